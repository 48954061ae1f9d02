"""The pretraining task (MLM + SOP) for the training loop, with global-batch normalisation.

For a global batch the losses are the original's:
  masked_lm_loss      = sum(w * nll) / (sum(w) + 1e-5)
  sentence_order_loss = mean(nll)
and each replica / micro-batch contributes its numerator divided by the global
denominators, so distributed and accumulated steps equal one big step.
"""
from __future__ import annotations

from typing import Dict

import tensorflow as tf

from albert_tf.models import MLM_LOSS_EPSILON
from albert_tf.training import Task

METRIC_SUMS = ("masked_lm_loss_sum", "masked_lm_correct", "masked_lm_weight",
               "sentence_order_loss_sum", "sentence_order_correct", "examples")


def _nll(logits, labels):
    """Per-position negative log-likelihood, float32; logits [..., C], labels int [...]."""
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    return -tf.gather(log_probs, labels, axis=-1, batch_dims=len(labels.shape))


class PretrainingTask(Task):
    """MLM + SOP on `AlbertPretrainer` outputs."""

    metric_names = METRIC_SUMS

    def normalizers(self, features) -> Dict[str, tf.Tensor]:
        weights = tf.cast(features["masked_lm_weights"], tf.float32)
        return {"masked_lm_weight": tf.reduce_sum(weights),
                "examples": tf.cast(tf.shape(weights)[0], tf.float32)}

    def loss(self, model, features, normalizers, training):
        outputs = model(features, training=training)
        ids = tf.cast(features["masked_lm_ids"], tf.int32)
        weights = tf.cast(features["masked_lm_weights"], tf.float32)
        sop_labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
        mlm_nll = _nll(outputs["mlm_logits"], ids)
        sop_nll = _nll(outputs["sop_logits"], sop_labels)
        mlm_sum = tf.reduce_sum(weights * mlm_nll)
        sop_sum = tf.reduce_sum(sop_nll)
        loss = (mlm_sum / (normalizers["masked_lm_weight"] + MLM_LOSS_EPSILON)
                + sop_sum / normalizers["examples"])
        mlm_pred = tf.argmax(outputs["mlm_logits"], axis=-1, output_type=tf.int32)
        sop_pred = tf.argmax(outputs["sop_logits"], axis=-1, output_type=tf.int32)
        sums = {
            "masked_lm_loss_sum": mlm_sum,
            "masked_lm_correct": tf.reduce_sum(weights * tf.cast(mlm_pred == ids, tf.float32)),
            "masked_lm_weight": tf.reduce_sum(weights),
            "sentence_order_loss_sum": sop_sum,
            "sentence_order_correct": tf.reduce_sum(tf.cast(sop_pred == sop_labels, tf.float32)),
            "examples": tf.cast(tf.shape(sop_labels)[0], tf.float32),
        }
        return loss, sums

    def finalize(self, sums: Dict[str, float]) -> Dict[str, float]:
        weight = sums["masked_lm_weight"]
        examples = max(sums["examples"], 1.0)
        metrics = {
            "masked_lm_loss": sums["masked_lm_loss_sum"] / (weight + MLM_LOSS_EPSILON),
            "masked_lm_accuracy": sums["masked_lm_correct"] / max(weight, 1e-12),
            "sentence_order_loss": sums["sentence_order_loss_sum"] / examples,
            "sentence_order_accuracy": sums["sentence_order_correct"] / examples,
        }
        metrics["loss"] = metrics["masked_lm_loss"] + metrics["sentence_order_loss"]
        return metrics
