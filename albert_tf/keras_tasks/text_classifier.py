"""`AlbertTextClassifier`: raw text (or pairs) -> logits, run_classifier.py's model.

    classifier = albert_tf.from_pretrained("albert_base_v2", "text-classification",
                                           num_classes=2)
    classifier.compile()                        # the original's AdamW, warmup + decay
    classifier.fit(texts, labels, batch_size=32, epochs=3)
    classifier.predict(["what a film"])         # logits [1, 2], as keras-hub's classifier

Three problems, as Hugging Face's `problem_type`:
  single_label_classification  y: class ids int [N] (or label names, given `labels`);
                               softmax cross-entropy; metric accuracy
  multi_label_classification   y: multi-hot [N, K] (0/1); a sigmoid per label, binary
                               cross-entropy averaged over labels (GoEmotions'); metric:
                               binary accuracy at logit 0 (probability 0.5)
  regression                   y: floats [N]; squared error on the one output (STS-B)
The losses are run_classifier.py's (`modeling.models.classifier_losses`), as Keras losses.
"""
from __future__ import annotations

from typing import Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from albert_tf.errors import UserValueError
from albert_tf.keras_tasks import exporting
from albert_tf.keras_tasks.metrics import PearsonCorrelation
from albert_tf.keras_tasks.exits import ExitTraining
from albert_tf.keras_tasks.task import Task
from albert_tf.modeling.models import AlbertClassifier

PROBLEM_TYPES = ("single_label_classification", "multi_label_classification", "regression")


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTextClassifier(ExitTraining, Task):
    """An `AlbertClassifier` network on raw text (see the module docstring).

    Args:
      network: an `AlbertClassifier` (its `multi_label` and `num_labels` set the problem:
        one output is regression).
      preprocessor: an `AlbertPreprocessor`, or None (token features only).
      labels: the class names (len K), or None.
    Calling it returns float32 logits [B, K].
    """

    task_name = "text-classification"

    def __init__(self, network: AlbertClassifier, preprocessor=None,
                 labels: Optional[Sequence[str]] = None, **kwargs):
        super().__init__(network, preprocessor, **kwargs)
        self.labels = None if labels is None else [str(name) for name in labels]
        if self.labels is not None and len(self.labels) != network.num_labels:
            raise UserValueError(f"{len(self.labels)} label names for a classifier of "
                                 f"{network.num_labels} outputs")

    @property
    def num_classes(self) -> int:
        return self.network.num_labels

    @property
    def problem_type(self) -> str:
        if self.network.multi_label:
            return "multi_label_classification"
        return "regression" if self.num_classes == 1 else "single_label_classification"

    def call(self, features, training=False):
        return tf.cast(self.exit_outputs(features, training)["logits"], tf.float32)

    # --- compile defaults --------------------------------------------------------------------

    def default_loss(self):
        if self.problem_type == "multi_label_classification":
            return keras.losses.BinaryCrossentropy(from_logits=True)
        if self.problem_type == "regression":
            return keras.losses.MeanSquaredError()
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        if self.problem_type == "multi_label_classification":
            return [keras.metrics.BinaryAccuracy(threshold=0.0, name="binary_accuracy")]
        if self.problem_type == "regression":
            return [PearsonCorrelation(name="pearson")]
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    # --- labels ------------------------------------------------------------------------------

    def prepare_labels(self, y, count: int):
        problem = self.problem_type
        array = np.asarray(y, dtype=object) if not isinstance(y, np.ndarray) else y
        if len(array) != count:
            raise UserValueError(f"{count} texts but {len(array)} labels")
        if problem == "regression":
            scores = _numbers(array, "regression labels are numbers (one score per text)")
            if scores.ndim == 2 and scores.shape[1] == 1:
                scores = scores[:, 0]
            if scores.ndim != 1:
                raise UserValueError(f"regression labels are one score per text, got shape "
                                     f"{list(scores.shape)}")
            return scores.astype(np.float32)
        if problem == "multi_label_classification":
            values = _numbers(array, f"multi-label labels are multi-hot rows of "
                                     f"{self.num_classes} 0/1 values")
            if values.ndim != 2 or values.shape[1] != self.num_classes or not np.isin(
                    values, (0, 1)).all():
                raise UserValueError(f"multi-label labels are multi-hot rows of "
                                     f"{self.num_classes} 0/1 values, got shape "
                                     f"{list(values.shape)}")
            return values.astype(np.float32)
        return self._class_ids(array)

    def _class_ids(self, array) -> np.ndarray:
        if array.ndim == 1 and len(array) and all(isinstance(v, (str, bytes)) for v in array):
            if self.labels is None:
                raise UserValueError("labels are strings but this classifier has no label "
                                     "names: give class ids 0..K-1, or labels=[...] to "
                                     "from_pretrained")
            index = {name: i for i, name in enumerate(self.labels)}
            unknown = sorted({str(v) for v in array} - set(index))
            if unknown:
                raise UserValueError(f"label {unknown[0]!r} is not one of {self.labels}")
            return np.asarray([index[str(v)] for v in array], np.int32)
        values = _numbers(array, f"single-label labels are class ids 0..{self.num_classes - 1}"
                                 " (one per text)")
        if values.ndim == 2 and values.shape[1] == 1:
            values = values[:, 0]
        if values.ndim != 1:
            raise UserValueError(f"single-label labels are class ids 0..{self.num_classes - 1}"
                                 f" (one int per text), got shape {list(values.shape)}")
        if (values != np.round(values)).any():
            bad = values[values != np.round(values)][0]
            raise UserValueError(f"single-label labels are class ids 0..{self.num_classes - 1}"
                                 f", got {bad:g}")
        if len(values) and (values.min() < 0 or values.max() >= self.num_classes):
            bad = values[(values < 0) | (values >= self.num_classes)][0]
            raise UserValueError(f"class id {int(bad)} is outside 0..{self.num_classes - 1}")
        return values.astype(np.int32)

    def check_label_spec(self, spec) -> None:
        if not isinstance(spec, tf.TensorSpec):
            raise UserValueError("a dataset's labels are one tensor per batch")
        problem = self.problem_type
        if spec.dtype == tf.string:
            raise UserValueError(f"{problem}: a dataset's labels are numbers, got strings")
        rank = spec.shape.rank
        if problem == "multi_label_classification" and (
                rank is not None and (rank != 2 or spec.shape[-1] not in (None,
                                                                          self.num_classes))):
            raise UserValueError(f"multi-label labels are multi-hot [batch, {self.num_classes}], "
                                 f"got {spec.shape}")
        if problem != "multi_label_classification" and rank is not None and rank > 2:
            raise UserValueError(f"{problem} labels are one value per text, got {spec.shape}")

    # --- serving ----------------------------------------------------------------------------

    def export(self, filepath, format="saved_model", verbose=None, input_signature=None, *,
               text_pair: bool = False, int8: bool = False, fp16: bool = False,
               check_data=None, **kwargs):
        """Writes run_classifier.py's export to `filepath`: a raw-text SavedModel
        (`format` "saved_model", Keras' "tf_saved_model"), and / or "onnx", "tflite"
        ("litert"), with the vocabulary and albert_tf_export.json, for `albert_tf.pipeline`
        and `python -m albert_tf.predict` (see `exporting.py`). `text_pair`: the signature
        takes (text_a, text_b). Returns {"export_dir", and the portable files' paths}."""
        exporting.check_arguments(input_signature, kwargs, "raw text and token ids",
                                  "format, text_pair, int8, fp16, check_data, "
                                  "int8_min_agreement")
        return exporting.export_text_classifier(
            self, filepath, format, text_pair=text_pair, int8=int8, fp16=fp16,
            check_data=check_data, **kwargs)

    def save_to_preset(self, preset_dir: str) -> list:
        """Writes a keras-hub `AlbertTextClassifier` preset (its backbone, logits head,
        preprocessor and SentencePiece model) that
        `keras_hub.models.AlbertTextClassifier.from_preset(preset_dir)` loads with this
        model's logits (on lower-case text: keras-hub's tokenizer does not lower-case).
        keras-hub's classifier has no problem type: a multi-label or regression head is
        written as its logits. Returns the files written."""
        return exporting.save_keras_hub_preset(self, preset_dir, "classifier")

    def get_config(self):
        config = super().get_config()
        config["labels"] = self.labels
        return config


def _numbers(array, what: str) -> np.ndarray:
    """array as float64 numbers, or one line saying `what` labels are."""
    try:
        values = np.asarray(array.tolist() if array.dtype == object else array, np.float64)
    except (TypeError, ValueError):
        raise UserValueError(what) from None
    if array.dtype.kind in "US" or not np.isfinite(values).all():
        raise UserValueError(what)
    return values
