"""The distillation loss (Hinton et al. 2015, as DistilBERT and TinyBERT's prediction layer):

    loss = alpha * the task's loss on the labels + (1 - alpha) * T^2 * soft(student, teacher)

per example, where soft is the KL divergence from the teacher's softmax at temperature T to
the student's (single-label), the cross-entropy of each label's sigmoid at T against the
teacher's (multi-label), or the squared difference of the scores (regression, no T). T^2
keeps the soft term's gradients the size of the hard term's as T grows. The teacher runs in
inference mode beside the student on the same features; no gradient reaches it.
"""
from __future__ import annotations

import tensorflow as tf

from albert_tf.export import saved_model
from albert_tf.finetuning import ExampleMeanObjective
from albert_tf.modeling.models import classifier_losses


def soft_loss(student_logits, teacher_logits, temperature: float, kind: str):
    """Per-example soft loss [B] of float32 logits [B, K] (see the module docstring); kind:
    "single_label", "multi_label" or "regression"."""
    if kind == "regression":
        return tf.reduce_sum(tf.square(student_logits - teacher_logits), axis=-1)
    scale = temperature * temperature
    student, teacher = student_logits / temperature, teacher_logits / temperature
    if kind == "multi_label":
        target = tf.sigmoid(teacher)
        terms = (tf.nn.relu(student) - student * target + tf.math.log1p(tf.exp(-tf.abs(student)))
                 - (tf.nn.relu(teacher) - teacher * target
                    + tf.math.log1p(tf.exp(-tf.abs(teacher)))))  # minus the entropy: a KL
        return scale * tf.reduce_mean(terms, axis=-1)
    target = tf.nn.softmax(teacher, axis=-1)
    return scale * tf.reduce_sum(
        target * (tf.nn.log_softmax(teacher, axis=-1) - tf.nn.log_softmax(student, axis=-1)),
        axis=-1)


class DistillationObjective(ExampleMeanObjective):
    """The student's training loss beside `teacher` (a built classifier); `kind` as in
    `soft_loss`, `alpha` the labels' weight in [0, 1]. Reports `soft_loss` and, for
    classification, `accuracy` against the labels."""

    def __init__(self, teacher, kind: str, temperature: float, alpha: float):
        self.teacher = teacher
        self.kind = kind
        self.temperature = float(temperature)
        self.alpha = float(alpha)
        self.metric_names = ("loss_total", "examples", "soft_total") + (
            () if kind == "regression" else ("correct",))

    def per_example(self, model, features, training):
        inputs = {name: features[name] for name in saved_model.TOKEN_FEATURES}
        outputs = model(inputs, training=training)
        teacher_logits = tf.stop_gradient(tf.cast(
            self.teacher(inputs, training=False)["logits"], tf.float32))
        soft = soft_loss(tf.cast(outputs["logits"], tf.float32), teacher_logits,
                         self.temperature, self.kind)
        hard = classifier_losses(outputs, features)["per_example_loss"]
        extra = {"soft_total": tf.reduce_sum(soft)}
        if self.kind != "regression":
            equal = tf.equal(outputs["predictions"], tf.cast(features["label_ids"], tf.int32))
            if self.kind == "multi_label":
                equal = tf.reduce_all(equal, axis=-1)
            extra["correct"] = tf.reduce_sum(tf.cast(equal, tf.float32))
        return self.alpha * hard + (1.0 - self.alpha) * soft, extra

    def finalize_extra(self, sums):
        metrics = {"soft_loss": sums["soft_total"] / max(sums["examples"], 1.0)}
        if self.kind != "regression":
            metrics["accuracy"] = sums["correct"] / max(sums["examples"], 1.0)
        return metrics
