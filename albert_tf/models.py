"""ALBERT models: the encoder plus a head, and their losses.

`AlbertPretrainer` is the original's pretraining graph: masked-LM head tied to
the word embeddings and the sentence-order (SOP) head, with the original's
losses `mlm = sum(w * nll) / (sum(w) + 1e-5)`, `sop = mean(nll)`, `total = mlm + sop`.
"""
from __future__ import annotations

from typing import Dict, Mapping

import keras
from keras import ops

from albert_tf import heads
from albert_tf.config import AlbertConfig
from albert_tf.encoder import AlbertEncoder, deserialize_model_config, serialize_model_config

MLM_LOSS_EPSILON = 1e-5  # the original's denominator term in the masked-LM loss


def gather_positions(sequence, positions):
    """Gathers vectors at `positions` [B, P] from `sequence` [B, S, H] -> [B, P, H]."""
    positions = ops.cast(positions, "int32")
    return ops.take_along_axis(sequence, positions[:, :, None], axis=1)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertPretrainer(keras.Model):
    """Encoder + masked-LM head + sentence-order head.

    Call with the encoder's input dict plus, optionally, `masked_lm_positions`
    int32 [B, P]. Returns the encoder's outputs plus
      `mlm_logits` float32 [B, P, V] (at the given positions; [B, S, V] over every
                   position when `masked_lm_positions` is absent)
      `sop_logits` float32 [B, 2]
    """

    def __init__(self, config: AlbertConfig, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = AlbertConfig.from_dict(config)
        self.config = config
        self.encoder = AlbertEncoder(config, name="encoder", dtype=self.dtype_policy)
        self.masked_lm = heads.MaskedLMHead(config.vocab_size, config.embedding_size,
                                            config.hidden_size, config.hidden_act,
                                            config.initializer_range, name="predictions",
                                            dtype=self.dtype_policy)
        self.sentence_order = heads.SentenceOrderHead(config.hidden_size,
                                                      config.initializer_range,
                                                      name="seq_relationship",
                                                      dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.encoder.build()
        self.masked_lm.build()
        self.sentence_order.build()
        self.built = True

    def call(self, inputs: Dict, training=False):
        outputs = dict(self.encoder(inputs, training=training))
        sequence = outputs["sequence_output"]
        positions = inputs.get("masked_lm_positions")
        if positions is not None:
            sequence = gather_positions(sequence, positions)
        outputs["mlm_logits"] = self.masked_lm(sequence, self.encoder.embedding_table)
        outputs["sop_logits"] = self.sentence_order(outputs["pooled_output"])
        return outputs

    def compute_losses(self, outputs: Mapping, labels: Mapping) -> Dict:
        """The original's losses and metrics; see `pretraining_losses`."""
        return pretraining_losses(outputs, labels)

    def get_config(self):
        return serialize_model_config(self)

    @classmethod
    def from_config(cls, config):
        return cls(**deserialize_model_config(config))


def pretraining_losses(outputs: Mapping, labels: Mapping) -> Dict:
    """Masked-LM and SOP losses and metrics exactly as the original computes them.

    Args:
      outputs: with `mlm_logits` [B, P, V] and `sop_logits` [B, 2] (float32).
      labels: with `masked_lm_ids` int [B, P], `masked_lm_weights` float [B, P]
        (1 real, 0 padding) and `next_sentence_labels` int [B] or [B, 1] (1 = swapped).
    Returns scalars (float32):
      `masked_lm_loss` = sum(w * nll) / (sum(w) + 1e-5) over the batch,
      `sentence_order_loss` = mean nll, `loss` = their sum,
      `masked_lm_accuracy` (weighted by w), `sentence_order_accuracy`,
      and `masked_lm_weight` = sum(w), useful to average accuracies over batches.
    """
    mlm_logits = ops.cast(outputs["mlm_logits"], "float32")
    sop_logits = ops.cast(outputs["sop_logits"], "float32")
    ids = ops.cast(labels["masked_lm_ids"], "int32")
    weights = ops.cast(labels["masked_lm_weights"], "float32")
    sop_labels = ops.reshape(ops.cast(labels["next_sentence_labels"], "int32"), (-1,))

    mlm_log_probs = ops.log_softmax(mlm_logits, axis=-1)
    mlm_nll = -ops.squeeze(ops.take_along_axis(mlm_log_probs, ids[..., None], axis=-1), -1)
    weight_sum = ops.sum(weights)
    mlm_loss = ops.sum(weights * mlm_nll) / (weight_sum + MLM_LOSS_EPSILON)

    sop_log_probs = ops.log_softmax(sop_logits, axis=-1)
    sop_nll = -ops.squeeze(ops.take_along_axis(sop_log_probs, sop_labels[:, None], axis=-1), -1)
    sop_loss = ops.mean(sop_nll)

    mlm_correct = ops.cast(ops.equal(ops.argmax(mlm_logits, axis=-1), ids), "float32")
    sop_correct = ops.cast(ops.equal(ops.argmax(sop_logits, axis=-1), sop_labels), "float32")
    return {
        "loss": mlm_loss + sop_loss,
        "masked_lm_loss": mlm_loss,
        "sentence_order_loss": sop_loss,
        "masked_lm_accuracy": ops.sum(weights * mlm_correct) / ops.maximum(weight_sum, 1e-12),
        "sentence_order_accuracy": ops.mean(sop_correct),
        "masked_lm_weight": weight_sum,
    }
