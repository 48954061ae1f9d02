"""GLUE, CLUE and custom classifiers served: raw text in, label names out.

Signatures (see `ClassifierServingModule`):
  serving_default(text_a [B][, text_b [B]]: tf.string)
      -> probabilities float32 [B, K], predictions tf.string [B] (label names; the float32
         score for regression)
      multi-label: probabilities float32 [B, K] (a sigmoid per label), predictions int32
         [B, K] (1: above the label's threshold), labels tf.string [B, M] (those labels'
         names in label order, padded with "" to the longest row's M)
  serve_tokens(input_ids, input_mask, segment_ids: int32 [B, S]) -> the same outputs
`export_classifier` writes that SavedModel for run_classifier.py; `classifier_portable_model`
is the ONNX / LiteRT function (token ids in). Raw text is tokenized and packed in the graph
with `albert_tf.export.pack_pair`, as `albert_tf.tasks.classification.glue` packs it in
Python. The SavedModel loads with `tf.saved_model.load` when only TensorFlow and
tensorflow-text are imported.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence

import tensorflow as tf

from albert_tf import export
from albert_tf.export import onnx as onnx_export, portable
from albert_tf.finetuning.options import TaskOptions
from albert_tf.tasks.classification import glue


class ClassifierServingModule(tf.Module):
    """Serving wrapper of an `AlbertClassifier` (GLUE) with two signatures.

    `serving_default(text_a[, text_b])`: tf.string [B] raw sentences (text_b
      only for sentence-pair tasks; an empty text_b packs that row as a single
      sentence). Tokenized and packed in the graph to max_seq_length.
    `serve_tokens(input_ids, input_mask, segment_ids)`: int32 [B, S], any S
      up to the model's max_position_embeddings.
    Both return `probabilities` float32 [B, K] (K = 1: the regression score)
    and `predictions`: tf.string [B] label names, or float32 [B] scores for
    regression (labels=None).
    """

    def __init__(self, model, tokenizer, max_seq_length: int, labels: Optional[Sequence[str]],
                 pair: bool, name: Optional[str] = None, layer_norm: str = "auto",
                 thresholds: Optional[Sequence[float]] = None):
        super().__init__(name=name)
        self.model = model
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self.pair = pair
        self.regression = labels is None
        self.label_names = None if labels is None else tf.constant(list(labels), tf.string)
        # Multi-label: the per-label decision thresholds, float32 [K].
        self.thresholds = (None if thresholds is None
                           else tf.constant(list(thresholds), tf.float32))
        self._outputs = export.model_outputs(model, ["probabilities", "predictions"],
                                             layer_norm)
        if pair:
            self.serving_default = tf.function(
                self._serve_pair, input_signature=[tf.TensorSpec([None], tf.string, "text_a"),
                                                   tf.TensorSpec([None], tf.string, "text_b")])
        else:
            self.serving_default = tf.function(
                self._serve_single, input_signature=[tf.TensorSpec([None], tf.string, "text_a")])
        self.serve_tokens = tf.function(self._serve_tokens,
                                        input_signature=[export.token_input_signature()])

    def _finish(self, features):
        outputs = self._outputs(features)
        if self.thresholds is not None:
            return multi_label_outputs(outputs["probabilities"], self.thresholds,
                                       self.label_names)
        if self.regression:
            predictions = outputs["probabilities"][:, 0]
        else:
            predictions = tf.gather(self.label_names, outputs["predictions"])
        return {"probabilities": outputs["probabilities"], "predictions": predictions}

    def pack_text(self, text_a, text_b=None):
        """Raw strings [B] -> int32 features [B, max_seq_length]."""
        ids_b = None if text_b is None else self.tokenizer(text_b)
        return export.pack_pair(self.tokenizer(text_a), ids_b, self.max_seq_length,
                                self.tokenizer.cls_id, self.tokenizer.sep_id,
                                max(self.tokenizer.pad_id, 0))  # -1: no pad token, as glue pads

    def _serve_single(self, text_a):
        return self._finish(self.pack_text(text_a))

    def _serve_pair(self, text_a, text_b):
        return self._finish(self.pack_text(text_a, text_b))

    def _serve_tokens(self, features):
        return self._finish(features)

    def signatures(self) -> Dict[str, Callable]:
        return {"serving_default": self.serving_default, "serve_tokens": self.serve_tokens}


def multi_label_outputs(probabilities, thresholds, label_names) -> Dict[str, tf.Tensor]:
    """{"probabilities" [B, K], "predictions" int32 [B, K] (above threshold), "labels"
    tf.string [B, M]: the chosen names in label order, padded with ""}."""
    chosen = probabilities > thresholds[tf.newaxis, :]
    names = tf.ragged.boolean_mask(
        tf.broadcast_to(label_names, tf.shape(chosen)), chosen)
    return {"probabilities": probabilities, "predictions": tf.cast(chosen, tf.int32),
            "labels": names.to_tensor(default_value="")}


def export_classifier(model, options: TaskOptions, spec: glue.TaskSpec,
                      thresholds: Optional[Sequence[float]] = None) -> str:
    """Saves `model` as a SavedModel (raw-text and token signatures) to options.export_dir
    (`thresholds`: a multi-label task's, [K])."""
    module = ClassifierServingModule(model, options.in_graph_tokenizer(), options.max_seq_length,
                                     None if spec.is_regression else spec.labels,
                                     pair=spec.is_pair, layer_norm=options.export_layer_norm,
                                     thresholds=thresholds)
    return export.save_serving_model(options.export_dir, module, module.signatures())


def classifier_portable_model(model, options: TaskOptions, spec: glue.TaskSpec,
                              thresholds: Optional[Sequence[float]] = None
                              ) -> portable.PortableModel:
    """The classifier's ONNX / LiteRT function: token ids -> `probabilities`, `logits`, and
    `predictions` (int32 label index, or the score for regression, or int32 [B, K] above
    the label's threshold for a multi-label task, `thresholds` [K]), with its metadata.
    options: run_classifier.py's (`task_name`, `max_seq_length`, `do_lower_case` are read)."""
    regression, multi = spec.is_regression, getattr(spec, "multi_label", False)
    names = ["probabilities", "logits"]
    fn = onnx_export.model_function(model, names,
                                    argmax_of=None if regression or multi else "logits")
    if multi:
        sigmoids, limits = fn, [float(t) for t in thresholds]

        def fn(features):
            outputs = sigmoids(features)
            # A constant made here, not captured: a captured tensor would be a model input.
            above = outputs["probabilities"] > tf.constant(limits, tf.float32)[tf.newaxis, :]
            outputs["predictions"] = tf.cast(above, tf.int32)
            return outputs
    if regression:  # `predictions` = the score, as the SavedModel's
        scores = fn

        def fn(features):
            outputs = scores(features)
            outputs["predictions"] = outputs["logits"][:, 0]
            return outputs
    metadata = {"task": "classifier", "task_name": options.task_name,
                "labels": None if regression else list(spec.labels), "pair": spec.is_pair,
                "max_seq_length": options.max_seq_length,
                "do_lower_case": options.do_lower_case}
    if multi:
        metadata.update(multi_label=True, thresholds=[float(t) for t in thresholds])
    # A regression score has no label to agree on: its int8 files are not checked.
    return portable.PortableModel(fn, export.token_input_signature(), metadata,
                                  compare=() if regression else (("predictions", "values"),))
