"""`albert_tf.distill`: run_distill.py's student and loss in Keras' fit, on texts in memory.

    teacher = albert_tf.from_pretrained("runs/sst2")           # any fine-tuned source
    student = albert_tf.distill(teacher, texts, labels, student="layers:2", epochs=3)
    student.predict(["a gripping film"]); student.export("student_export")

The student is a task model of the teacher's class (`AlbertTextClassifier`, `AlbertTagger`
or `AlbertMultipleChoiceTask`) with the teacher's preprocessor, labels and settings, the
config `students.student_config` makes, and the teacher's weights where they fit. It trains
on the task's own dataset of (x, y) with `objective`'s loss: alpha x the task's loss (its
compiled one: the original's), (1 - alpha) x T^2 x the soft loss over the task's units,
hidden_weight x TinyBERT's hidden-state loss (the projection belongs to the `Distiller`,
not the student) and attention_weight x MiniLMv2's self-attention relations. Keras callbacks, validation_data and the task's compile defaults apply.
"""
from __future__ import annotations

from typing import Optional, Union

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.distillation import objective, students
from albert_tf.errors import UserValueError


class Distiller(keras.Model):
    """Trains `student` (a compiled task model) against `teacher` (the teacher's task
    model) with the distillation loss (see the module docstring). `fit` on the student's
    dataset; `evaluate` reports the student's own loss and metrics."""

    def __init__(self, student, teacher, *, temperature: float = 2.0, alpha: float = 0.5,
                 hidden_weight: float = 0.0, attention_weight: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= alpha <= 1.0:
            raise UserValueError(f"alpha must be in [0, 1], got {alpha}")
        if temperature <= 0 or min(hidden_weight, attention_weight) < 0:
            raise UserValueError(f"temperature must be > 0 and hidden_weight, "
                                 f"attention_weight >= 0, got {temperature}, "
                                 f"{hidden_weight} and {attention_weight}")
        self.student = student
        self.teacher = teacher
        self.targets = objective.family_targets(teacher.network, _soft_kind(teacher))
        self.temperature = float(temperature)
        self.alpha = float(alpha)
        self.transfer = objective.TransferTerms(teacher.config, student.config, hidden_weight,
                                                attention_weight)
        # Tracked here (trained by fit, saved with the Distiller), not in the student.
        self.projection = self.transfer.projection
        teacher.trainable = False
        self.loss_tracker = keras.metrics.Mean(name="loss")

    @property
    def metrics(self):
        """The distillation loss's mean, then the student's compiled metrics (reset by fit
        and evaluate with these)."""
        return [self.loss_tracker] + [metric for metric in self.student.metrics
                                      if metric.name != "loss"]

    def call(self, features, training=False):
        return self.student(features, training=training)

    def distillation_loss(self, x, y, sample_weight=None, training=True):
        """(loss, the student's logits): the weighted terms on one batch."""
        outputs = self.student.network(x, training=training)
        logits = tf.cast(outputs["logits"], tf.float32)
        hard = self.student.compute_loss(x, y, logits, sample_weight, training=training)
        sums = objective.teacher_sums(self.targets, self.transfer, self.temperature,
                                      self.student.network, outputs, self.teacher.network,
                                      dict(x, label_ids=y))
        loss = self.alpha * hard + (1.0 - self.alpha) * tf.math.divide_no_nan(
            sums["soft_total"], sums["soft_units"])
        for name in self.transfer.names:
            loss += self.transfer.weights[name] * sums[f"{name}_total"] / sums["transfer_rows"]
        return loss, logits

    def train_step(self, data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            loss, logits = self.distillation_loss(x, y, sample_weight)
            replicas = tf.distribute.get_strategy().num_replicas_in_sync
            scaled = loss / replicas  # the replicas' gradients are summed
        variables = self.trainable_variables
        gradients = tape.gradient(scaled, variables)
        self.optimizer.apply([tf.zeros_like(v) if g is None else g
                              for g, v in zip(gradients, variables)], variables)
        return self._metrics_of(x, y, logits, sample_weight, loss)

    def test_step(self, data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        logits = self.student(x, training=False)
        loss = self.student.compute_loss(x, y, logits, sample_weight, training=False)
        return self._metrics_of(x, y, logits, sample_weight, loss)

    def _metrics_of(self, x, y, logits, sample_weight, loss):
        self.loss_tracker.update_state(loss)
        self.student.compute_metrics(x, y, logits, sample_weight)
        results = {}
        for metric in self.metrics:
            value = metric.result()
            results.update(value if isinstance(value, dict) else {metric.name: value})
        return results


def _soft_kind(teacher) -> str:
    problem = getattr(teacher, "problem_type", None)
    return {"regression": "regression",
            "multi_label_classification": "multi_label"}.get(problem, "single_label")


def student_task(teacher, student: Union[str, AlbertConfig] = "tiny"):
    """The untrained student of `teacher` (a task model): the teacher's class, preprocessor
    and settings, the student's config (a `students` spec or an AlbertConfig), the
    teacher's weights where name and shape agree."""
    try:
        config = (student if isinstance(student, AlbertConfig)
                  else students.student_config(teacher.config, student))
    except UserValueError as error:  # the CLI's words, as this function's argument
        raise UserValueError(str(error).replace("--student=", "student=", 1)) from None
    network_config = dict(teacher.network.get_config(), config=config.to_dict())
    for name in ("early_exit", "inference_layers", "exit_heads"):  # a plain student
        network_config.pop(name, None)
    network = type(teacher.network).from_config(network_config)
    network.build()
    students.initialise_from_teacher(network, teacher.network)
    # The teacher's own settings (labels, tag scheme, ...) and preprocessor: the student
    # reads the teacher's tokens.
    settings = {key: value for key, value in teacher.get_config().items()
                if key not in ("network", "preprocessor", "name", "trainable", "dtype")}
    made = type(teacher)(network=network, preprocessor=teacher.preprocessor, **settings)
    made.build()
    return made


def distill(teacher, x=None, y=None, *, student: Union[str, AlbertConfig] = "tiny",
            temperature: float = 2.0, alpha: float = 0.5, hidden_weight: float = 0.0,
            attention_weight: float = 0.0, epochs: int = 3, batch_size: int = 32,
            learning_rate: Optional[float] = None,
            validation_data=None, callbacks=None, verbose="auto", **compile_kwargs):
    """The student of `teacher` trained on (x, y) to copy it (see the module docstring).

    teacher: a text classifier, tagger or multiple-choice task model, or any source
        `from_pretrained` reads (run or export directory, Hugging Face directory, .keras).
    x, y: what the teacher's task `fit` takes (texts and labels, or a tf.data.Dataset of
        (x, y)); validation_data likewise.
    student: "tiny", "small", "layers:k" or an AlbertConfig. alpha: the labels' weight;
    temperature: T of the soft targets; hidden_weight, attention_weight: the hidden-state
    and self-attention relation losses' weights.
    learning_rate and compile_kwargs go to the student's `compile` (the original's AdamW
    and schedule over epochs x batches by default).
    Returns the trained student task model; its `history` attribute is fit's History.
    """
    from albert_tf.keras_tasks import from_pretrained
    from albert_tf.keras_tasks.multiple_choice import AlbertMultipleChoiceTask
    from albert_tf.keras_tasks.tagger import AlbertTagger
    from albert_tf.keras_tasks.text_classifier import AlbertTextClassifier

    if not hasattr(teacher, "network"):
        teacher = from_pretrained(teacher)
    families = (AlbertTextClassifier, AlbertTagger, AlbertMultipleChoiceTask)
    if not isinstance(teacher, families):
        raise UserValueError(f"distill: the teacher is an {type(teacher).__name__}; it "
                             f"distils {', '.join(kind.__name__ for kind in families)}")
    if getattr(teacher.network, "early_exit", None) is not None:
        teacher.network.early_exit = None  # the teacher answers from every layer
    teacher.network.inference_layers = None
    made = student_task(teacher, student)
    data = made.dataset(x, y, batch_size, needs_labels=True, shuffle=True)
    steps = int(data.cardinality())
    if steps <= 0:
        raise UserValueError("distill: the training data is empty or of unknown length "
                             "(give texts and labels, or a finite tf.data.Dataset)")
    made.compile(learning_rate=learning_rate, num_train_steps=steps * epochs,
                 **compile_kwargs)
    distiller = Distiller(made, teacher, temperature=temperature, alpha=alpha,
                          hidden_weight=hidden_weight, attention_weight=attention_weight)
    distiller.compile(optimizer=made.optimizer)
    validation = (None if validation_data is None else
                  made.dataset(*_pair(validation_data), batch_size, needs_labels=True))
    made.history = distiller.fit(data, epochs=epochs, validation_data=validation,
                                 callbacks=callbacks, verbose=verbose, shuffle=False)
    return made


def _pair(validation_data):
    if isinstance(validation_data, tf.data.Dataset):
        return validation_data, None
    if isinstance(validation_data, (tuple, list)) and len(validation_data) == 2:
        return tuple(validation_data)
    raise UserValueError("validation_data: (x, y) or a tf.data.Dataset of (x, y)")

