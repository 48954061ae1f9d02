"""`Task`: the base of the Keras task models on raw text (keras-hub's Task, for ALBERT).

A task is a `keras.Model` holding
  `network`       the task's model of `albert_tf.modeling` (e.g. `AlbertClassifier`): the
                  encoder and the head, with the original's variable names, so the TF1,
                  Hugging Face and export code read and write it as for the CLIs;
  `preprocessor`  an `AlbertPreprocessor` (raw text -> token features) or None.
Calling the model takes token features ({"input_ids", "input_mask", "segment_ids"} int32
[B, S]); `fit`, `evaluate` and `predict` take raw text too (see `inputs.py`): the
preprocessor runs in their tf.data pipeline, as keras-hub's tasks run theirs.

`compile()` with no argument picks the task's loss and metrics and the original's optimizer:
AdamW without bias correction, weight decay 0.01 (not on LayerNorm and biases), gradients
clipped to global norm 1.0, a linear warmup over `warmup_proportion` of the steps then a
linear decay to 0 (`training.optimization`). The number of steps comes from
`compile(num_train_steps=...)`, else from the first `fit` (epochs x batches per epoch).
Any Keras optimizer, loss or metric can be given instead.
"""
from __future__ import annotations

import functools
import tempfile
from typing import Dict, Optional

import keras
import tensorflow as tf

from albert_tf.errors import UserValueError
from albert_tf.keras_tasks import dataset_rows, inputs
from albert_tf.keras_tasks.preprocessor import AlbertPreprocessor
from albert_tf.training import optimization

# compile()'s optimizer names: the original's two.
OPTIMIZERS = ("adamw", "lamb")


class Task(keras.Model):
    """Base of the raw-text Keras tasks (see the module docstring). A subclass sets
    `task_name` (the pipeline's name), `default_learning_rate`, and implements `call`,
    `default_loss`, `default_metrics`, `prepare_labels`, `check_label_spec` and, where the
    labels need it, `labels_in_graph`. A task whose loss needs the model's own variables
    (a CRF's transitions) returns None from `default_loss` and implements `task_loss`; a
    task whose examples are not one row each overrides `dataset`."""

    task_name = "task"
    default_learning_rate = 5e-5  # run_classifier.py's --learning_rate
    # False for a head that reads no pooled output (tagging, spans, token pooling): the
    # pooler is then frozen, so it gets no gradient (None, which Keras warns about) and no
    # weight decay, as the original's optimizer skips a variable without gradient.
    reads_pooled_output = True
    warmup_proportion = 0.1  # run_squad.py's --warmup_proportion

    def __init__(self, network: keras.Model, preprocessor: Optional[AlbertPreprocessor] = None,
                 **kwargs):
        super().__init__(**kwargs)
        self.network = network
        self.preprocessor = preprocessor
        self._pending_optimizer: Optional[Dict] = None
        self._task_loss_in_use = False
        if not self.reads_pooled_output:
            network.encoder.pooler.trainable = False
        if preprocessor is not None:
            positions = network.config.max_position_embeddings
            if preprocessor.sequence_length > positions:
                raise UserValueError(
                    f"sequence_length={preprocessor.sequence_length} is longer than the "
                    f"model's {positions} positions (max_position_embeddings)")
        self.create_state()
        if network.built:  # load_weights and the optimizer need a built model
            self.build()

    @property
    def config(self):
        """The encoder's AlbertConfig."""
        return self.network.config

    def build(self, input_shape=None):
        if not self.network.built:
            self.network.build()
        self.built = True

    # --- what a subclass supplies ------------------------------------------------------------

    def create_state(self) -> None:
        """Creates the task's own tracked state (metrics), before the model is built."""

    def default_loss(self):
        raise NotImplementedError

    def default_metrics(self):
        return []

    def prepare_labels(self, y, count: int):
        """In-memory labels y for `count` examples -> a numpy array in the form the loss
        reads; one line naming the problem otherwise."""
        raise NotImplementedError

    def check_label_spec(self, spec) -> None:
        """Refuses a dataset's label spec (tf.TensorSpec) of the wrong type or shape."""

    def labels_in_graph(self, labels):
        return labels

    def task_loss(self, y, y_pred):
        """The default loss when `default_loss` is None: a scalar from the batch's labels
        and the model's outputs."""
        raise NotImplementedError

    def dataset(self, x, y=None, batch_size: Optional[int] = None, needs_labels: bool = False,
                shuffle: bool = False) -> tf.data.Dataset:
        """x (and y) as the batched dataset fit / evaluate / predict run on (`inputs.py`)."""
        return inputs.task_dataset(self, x, y, batch_size, needs_labels=needs_labels,
                                   shuffle=shuffle)

    # --- raw text ---------------------------------------------------------------------------

    @functools.cached_property
    def python_tokenizer(self):
        """The preprocessor's vocabulary and casing as the CLI's Python tokenizer (what the
        tasks whose rows are made in Python, as their CLI makes them, tokenize with)."""
        from albert_tf import tokenization

        if self.preprocessor is None:
            raise UserValueError(f"{type(self).__name__} has no preprocessor: it needs the "
                                 "vocabulary")
        preprocessor = self.preprocessor
        with tempfile.TemporaryDirectory() as directory:
            path = preprocessor.write_vocabulary(directory)
            sentencepiece = preprocessor.tokenizer_kind == "sentencepiece"
            return tokenization.load_tokenizer(
                vocab_file=None if sentencepiece else path,
                spm_model_file=path if sentencepiece else None,
                do_lower_case=preprocessor.do_lower_case)

    def features(self, x):
        """x (texts, pairs or token features) -> token features: what the model is called on."""
        if inputs.is_token_features(x):
            return inputs.token_features(x)
        if self.preprocessor is None:
            raise UserValueError(f"{type(self).__name__} has no preprocessor: give token "
                                 "features {'input_ids': ..., 'input_mask': ..., "
                                 "'segment_ids': ...}")
        return self.preprocessor(x)

    # --- compile ----------------------------------------------------------------------------

    def compile(self, optimizer="auto", loss="auto", metrics="auto", *,
                learning_rate: Optional[float] = None, num_train_steps: Optional[int] = None,
                warmup_steps: Optional[int] = None, **kwargs):
        """Keras' compile; "auto" (the default) picks the task's loss, metrics and the
        original's optimizer (see the module docstring). `optimizer` may also be "adamw" or
        "lamb" (the original's two), with `learning_rate` (default: the task's),
        `num_train_steps` (default: from the first fit) and `warmup_steps` (default
        `warmup_proportion` of the steps)."""
        if loss == "auto":
            loss = self.default_loss()
            self._task_loss_in_use = loss is None
        else:
            self._task_loss_in_use = False
        if metrics == "auto":
            metrics = self.default_metrics()
        if num_train_steps is not None and int(num_train_steps) < 1:
            raise UserValueError(f"num_train_steps must be at least 1, got {num_train_steps}")
        if warmup_steps is not None and (int(warmup_steps) < 0 or (
                num_train_steps is not None and int(warmup_steps) > int(num_train_steps))):
            raise UserValueError(f"warmup_steps must be in [0, num_train_steps], got "
                                 f"{warmup_steps}")
        if isinstance(optimizer, str) and optimizer in ("auto",) + OPTIMIZERS:
            settings = dict(name="adamw" if optimizer == "auto" else optimizer,
                            learning_rate=learning_rate or self.default_learning_rate,
                            num_train_steps=num_train_steps, warmup_steps=warmup_steps)
            if num_train_steps is None:
                # Known at fit: compile with the rate as a constant until then.
                self._pending_optimizer = _Pending(dict(settings, loss=loss, metrics=metrics,
                                                        kwargs=kwargs))
                optimizer = self._original_optimizer(settings, max(1, int(warmup_steps or 0)))
            else:
                self._pending_optimizer = None
                optimizer = self._original_optimizer(settings, num_train_steps)
        elif learning_rate is not None or num_train_steps is not None:
            raise UserValueError("learning_rate and num_train_steps set the original's "
                                 "optimizer: give them with optimizer='auto', 'adamw' or 'lamb'")
        else:
            self._pending_optimizer = None
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def _original_optimizer(self, settings: Dict, num_train_steps: int):
        warmup = settings["warmup_steps"]
        if warmup is None:
            warmup = int(num_train_steps * self.warmup_proportion)
        return optimization.create_optimizer(settings["learning_rate"], num_train_steps, warmup,
                                             settings["name"], clip_norm=1.0)

    def _schedule_steps(self, dataset: tf.data.Dataset, epochs: int,
                        steps_per_epoch: Optional[int]) -> None:
        """Compiles the original's optimizer over the steps of this fit, when compile did not
        know them."""
        if self._pending_optimizer is None:
            return
        if steps_per_epoch is None:
            count = int(dataset.cardinality())
            if count < 0:
                raise UserValueError("the dataset's length is unknown: give "
                                     "compile(num_train_steps=...) or fit(steps_per_epoch=...)")
            steps_per_epoch = count
        self._compile_pending(max(int(epochs) * int(steps_per_epoch), 1))

    def _compile_pending(self, num_train_steps: int) -> None:
        """Compiles the pending original optimizer over `num_train_steps` steps."""
        pending = self._pending_optimizer.settings
        self._pending_optimizer = None
        # The optimizer's variables belong to the strategy the model was built under, which
        # may not be the one in scope at fit.
        with self.distribute_strategy.scope():
            super().compile(optimizer=self._original_optimizer(pending, num_train_steps),
                            loss=pending["loss"], metrics=pending["metrics"],
                            **pending["kwargs"])

    # --- fit / evaluate / predict on raw text --------------------------------------------------

    # A task whose inputs are made in Python (windows, packed rows, pretraining instances)
    # reads a tf.data.Dataset into memory first (`dataset_rows`); `text_columns`: its x may
    # be a tuple of text columns.
    inputs_in_python = False
    text_columns = False

    def in_memory(self, x, y=None):
        """(x, y), a dataset read into the in-memory forms where this task needs them."""
        if self.inputs_in_python and isinstance(x, tf.data.Dataset):
            return dataset_rows.read_batches(x, y, self.task_name, self.text_columns)
        return x, y

    def fit(self, x=None, y=None, batch_size=None, epochs=1, validation_data=None,
            steps_per_epoch=None, shuffle=True, **kwargs):
        """Keras' fit on texts and labels (see `inputs.py` for the forms). In-memory data is
        shuffled each epoch unless shuffle=False (Keras' default); a dataset is read as it
        is (shuffle it yourself, as Keras asks)."""
        x, y = self.in_memory(x, y)
        dataset = self.dataset(x, y, batch_size, needs_labels=True, shuffle=bool(shuffle))
        if validation_data is not None:
            validation_data = self.dataset(*self.in_memory(*_split_xy(validation_data)),
                                           batch_size, needs_labels=True)
        self._schedule_steps(dataset, epochs, steps_per_epoch)
        return super().fit(dataset, epochs=epochs, validation_data=validation_data,
                           steps_per_epoch=steps_per_epoch, shuffle=False, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
        if kwargs.get("_use_cached_eval_dataset"):
            # fit's validation: the dataset fit made of validation_data is already cached.
            return super().evaluate(x, y, batch_size=batch_size, **kwargs)
        dataset = self.dataset(*self.in_memory(x, y), batch_size, needs_labels=True)
        return super().evaluate(dataset, **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        dataset = self.dataset(self.in_memory(x)[0], None, batch_size)
        return super().predict(dataset, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """Keras' loss, or the task's own (`task_loss`) when compile chose it."""
        if not self._task_loss_in_use:
            return super().compute_loss(x, y, y_pred, sample_weight, training)
        # Under N replicas Keras sums the replicas' gradients (and reports N times the
        # loss): each replica's loss is 1/N of its own, as Keras' compiled losses scale theirs.
        total = self.task_loss(y, y_pred)
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        if replicas > 1:
            total = total / replicas
        for loss in self.losses:
            total = total + self._aggregate_additional_loss(loss)
        return total

    def get_compile_config(self):
        """Keras' compile config; while the original's optimizer waits for the first fit's
        steps, its settings instead of the placeholder (a model saved before fit, loaded
        and fit, gets the schedule over that fit's steps)."""
        config = super().get_compile_config()
        if config is not None and self._task_loss_in_use:
            config = dict(config, loss="auto")
        pending = getattr(self, "_pending_optimizer", None)
        if config is None or pending is None:
            return config
        settings = pending.settings
        return dict(config, optimizer=settings["name"],
                    learning_rate=settings["learning_rate"],
                    warmup_steps=settings["warmup_steps"])

    def compile_from_config(self, config):
        """Recompiles a loaded model with the optimizer, loss and metrics it was saved with
        (Keras restores the optimizer's state after this)."""
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if getattr(self, "optimizer", None) is not None and self.built:
            self.optimizer.build(self.trainable_variables)

    # --- config ------------------------------------------------------------------------------

    def export(self, filepath, format="saved_model", verbose=None, input_signature=None,
               **kwargs):
        """The tasks the CLIs serve write their export (see each task's); the others say
        what saves them instead, in one line."""
        preset = ", save_to_preset(dir) (keras-hub)" if hasattr(self, "save_to_preset") else ""
        raise UserValueError(
            f"{self.task_name}: export() writes a CLI's serving files, and no CLI serves "
            f"{self.task_name}: save(\"model.keras\"){preset}, or "
            "albert_tf.save_tf1_checkpoint(model.network, prefix) (an official checkpoint "
            "the CLIs, convert and the pipelines read)")

    def get_config(self):
        config = super().get_config()
        config.update(network=keras.saving.serialize_keras_object(self.network),
                      preprocessor=None if self.preprocessor is None else
                      keras.saving.serialize_keras_object(self.preprocessor))
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["network"] = keras.saving.deserialize_keras_object(config["network"])
        if config.get("preprocessor") is not None:
            config["preprocessor"] = keras.saving.deserialize_keras_object(
                config["preprocessor"])
        return cls(**config)


def load_task_file(path: str, where: str) -> "Task":
    """The task model a .keras file holds; one line naming `where` (the path, or the flag
    that gave it) when the file is not one, or holds another kind of model."""
    try:
        model = keras.saving.load_model(path)
    except (TypeError, ValueError) as error:
        raise UserValueError(f"{where}: not a .keras file this library loads "
                             f"({str(error).splitlines()[0][:200]})") from None
    if not isinstance(model, Task):
        raise UserValueError(f"{where}: a {type(model).__name__}, not a task model of "
                             "albert_tf")
    return model


class _Pending:
    """compile()'s settings until fit knows the steps (an object Keras does not track: a
    dict of metrics would be tracked as the model's state)."""

    def __init__(self, settings: Dict):
        self.settings = settings


def _split_xy(data):
    """validation_data as (x, y): a tuple (x, y), or a dataset (its own labels)."""
    if isinstance(data, tf.data.Dataset):
        return data, None
    if isinstance(data, (tuple, list)) and len(data) == 2:
        return data[0], data[1]
    raise UserValueError("validation_data is (texts, labels) or a tf.data.Dataset of them")
