"""Token classification (named-entity recognition): a label per word, softmax or CRF.

Words are scored at their first sub-token (`word_mask`); the other sub-tokens, [CLS],
[SEP] and padding carry no label and no loss. With `use_crf`, a linear-chain CRF links
the labels of consecutive words (not sub-tokens). Decoding is Viterbi over the words for
both heads when `allowed` transitions are given (a tag scheme's hard constraints, e.g.
no `I-PER` after `O`): the softmax head then decodes its log-probabilities with no
transition scores, under the same constraints.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import keras
import tensorflow as tf
from keras import ops

from albert_tf.config import AlbertConfig
from albert_tf.modeling import crf, early_exit
from albert_tf.modeling.exiting import ExitingModel

# Transition constraints: (allowed [K, K], allowed_start [K], allowed_end [K]) as booleans.
Allowed = Tuple[Sequence[Sequence[bool]], Sequence[bool], Sequence[bool]]


def words_first(word_mask):
    """(order int32 [B, S], lengths int32 [B]): each row's word positions first, in order.

    `tf.gather(x, order, batch_dims=1)[:, :n]` are the n words of a row; `inverse_order`
    maps word-ordered values back to positions.
    """
    mask = tf.cast(word_mask, tf.int32)
    order = tf.argsort(1 - mask, axis=-1, stable=True)
    return tf.cast(order, tf.int32), tf.reduce_sum(mask, axis=-1)


def inverse_order(order):
    """The permutation that undoes `order` [B, S] (row by row)."""
    return tf.argsort(order, axis=-1, stable=True)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTokenClassifier(ExitingModel):
    """Encoder -> dropout(sequence_output) -> logits = h W^T + b, W `output_weights` [K, H].

    Inputs: the encoder's dict, plus optionally
      `word_mask` int [B, S]  1 at each word's first sub-token (default: `label_ids >= 0`
                              when labels are given, else `input_mask`)
      `label_ids` int [B, S]  gold label id at word starts, -1 elsewhere: adds the loss
    Returns the encoder's outputs plus
      `logits`       float32 [B, S, K]
      `predictions`  int32 [B, S]: the decoded label id at word starts, -1 elsewhere
                     (not computed when training)
      with `label_ids`: `loss_sum` float32 [B] (the example's summed cross-entropy, or its
      CRF negative log-likelihood) and `scored` float32 [B] (its number of labelled words).
    `allowed`: hard transition constraints for decoding (see the module docstring).
    Light inference as `AlbertClassifier`'s: with exit heads the loss is PABEE's (each
    layer's, weighted by depth, `exit_logits` [L, B, S, K]); with an `early_exit` rule a
    row exits at the first layer whose decoded tags (every word's) have not changed for
    `patience` layers (outputs `logits`, `predictions`, `exit_layer` [B]).
    """

    _EXTRA_ARGS = ("num_labels", "dropout_rate", "use_crf", "allowed")

    def __init__(self, config: AlbertConfig, num_labels: int, dropout_rate: float = 0.1,
                 use_crf: bool = False, allowed: Optional[Allowed] = None,
                 exit_heads: str = "none", early_exit: Optional[Dict] = None, **kwargs):
        super().__init__(config, **kwargs)
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate
        self.use_crf = use_crf
        self.allowed = None if allowed is None else tuple(
            [[bool(v) for v in row] for row in allowed[0]] if i == 0 else
            [bool(v) for v in allowed[i]] for i in range(3))
        self.classifier = self.classification_head(num_labels, dropout_rate)
        self.crf = crf.CRF(num_labels, name="crf") if use_crf else None
        self.init_exits(exit_heads, early_exit, num_labels, dropout_rate)

    def check_exit_rule(self, rule: early_exit.EarlyExit) -> None:
        if rule.confidence is not None and self.use_crf:
            raise ValueError("an exit confidence needs the softmax head (a CRF's tags have "
                             "no per-word probability); exit by patience")

    def call(self, inputs: Dict, training=False):
        if self.early_exit is not None and not training:
            outputs = self.exit_early(inputs, _TaggerExits(self),
                                      {"word_mask": self._word_mask(inputs)})
            if inputs.get("label_ids") is not None:  # the loss of each row's exit
                outputs.update(self.loss_terms(outputs["logits"], inputs["label_ids"]))
            return outputs
        outputs = dict(self.encoder(inputs, training=training))
        if self.exit_heads == "none":
            logits = self.classifier(outputs["sequence_output"], training=training)
        else:
            exit_logits = [self.head_logits(index, sequence, training) for index, sequence
                           in enumerate(self.layer_outputs(outputs, training))]
            outputs["exit_logits"] = tf.stack(exit_logits)
            logits = exit_logits[-1]
        outputs["logits"] = logits
        if inputs.get("label_ids") is not None and self.exit_heads == "none":
            outputs.update(self.loss_terms(logits, inputs["label_ids"]))
        elif inputs.get("label_ids") is not None:  # PABEE's loss: each exit's, by depth
            each = [self.loss_terms(layer_logits, inputs["label_ids"])
                    for layer_logits in exit_logits]
            outputs.update(each[-1], loss_sum=early_exit.weighted_exit_loss(
                tf.stack([terms["loss_sum"] for terms in each])))
        if not training:
            outputs["predictions"] = self.decode(logits, self._word_mask(inputs))
        return outputs

    def logits(self, inputs: Dict, training=False):
        """The encoder's token features -> logits [B, S, K] alone (no decoding)."""
        sequence = self.encoder(inputs, training=training)["sequence_output"]
        return self.classifier(sequence, training=training)

    def _word_mask(self, inputs):
        if inputs.get("word_mask") is not None:
            return tf.cast(inputs["word_mask"], tf.int32)
        if inputs.get("label_ids") is not None:
            return tf.cast(inputs["label_ids"] >= 0, tf.int32)
        return tf.cast(inputs["input_mask"], tf.int32)

    def loss_terms(self, logits, label_ids) -> Dict[str, tf.Tensor]:
        """logits float [B, S, K], label_ids int [B, S] (-1: no label) -> `loss_sum`
        float32 [B] (each row's summed cross-entropy, or its CRF negative log-likelihood
        over its labelled words in order) and `scored` float32 [B] (its labelled words)."""
        label_ids = tf.cast(label_ids, tf.int32)
        labelled = tf.cast(label_ids >= 0, tf.float32)
        scored = tf.reduce_sum(labelled, axis=-1)
        if self.use_crf:
            order, lengths = words_first(tf.cast(label_ids >= 0, tf.int32))
            word_logits = tf.gather(logits, order, batch_dims=1)
            word_labels = tf.maximum(tf.gather(label_ids, order, batch_dims=1), 0)
            loss_sum = -self.crf.log_likelihood(word_logits, word_labels, lengths)
        else:
            log_probs = tf.nn.log_softmax(logits, axis=-1)
            gold = tf.gather(log_probs, tf.maximum(label_ids, 0), batch_dims=2)
            loss_sum = -tf.reduce_sum(gold * labelled, axis=-1)
        return {"loss_sum": loss_sum, "scored": scored}

    def decode(self, logits, word_mask):
        """logits float [B, S, K], word_mask int [B, S] (1 at each word's first sub-token)
        -> int32 [B, S]: the decoded label id at word starts (the words of a row decoded
        as one sequence: Viterbi for the CRF or under `allowed`, else argmax), -1
        elsewhere."""
        word_mask = tf.cast(word_mask, tf.int32)
        order, lengths = words_first(word_mask)
        word_logits = tf.gather(logits, order, batch_dims=1)
        if self.use_crf:
            tags, _ = self.crf.decode(word_logits, lengths, allowed=self._allowed_tensors())
        elif self.allowed is not None:
            zeros = tf.zeros([self.num_labels, self.num_labels], tf.float32)
            tags, _ = crf.crf_decode(tf.nn.log_softmax(word_logits, axis=-1), lengths, zeros,
                                     zeros[0], zeros[0], allowed=self._allowed_tensors())
        else:
            tags = tf.argmax(word_logits, axis=-1, output_type=tf.int32)
        at_positions = tf.gather(tags, inverse_order(order), batch_dims=1)
        return tf.where(tf.cast(word_mask, tf.bool), at_positions, -1)

    def _allowed_tensors(self):
        if self.allowed is None:
            return None
        return tuple(tf.constant(value, tf.bool) for value in self.allowed)

    def get_config(self):
        values = super().get_config()
        values["allowed"] = None if self.allowed is None else [list(v) for v in self.allowed]
        return values


class _TaggerExits(early_exit.ExitFamily):
    """`AlbertTokenClassifier`'s exits: the decision is the row's decoded tags (every word's
    the same as the previous layer's); confident when every word's top probability is."""

    def __init__(self, model: AlbertTokenClassifier):
        self.model = model

    def outputs(self, layer_index, sequence, extras):
        logits = self.model.head_logits(layer_index, sequence)
        return {"logits": logits, "predictions": self.model.decode(logits, extras["word_mask"])}

    def unchanged(self, previous, current, extras, rule):
        return tf.reduce_all(tf.equal(previous["predictions"], current["predictions"]), axis=-1)

    def confident(self, outputs, threshold):
        top = tf.reduce_max(tf.nn.softmax(outputs["logits"], axis=-1), axis=-1)
        words = tf.not_equal(outputs["predictions"], -1)
        return tf.reduce_all(tf.logical_or(top >= threshold, tf.logical_not(words)), axis=-1)


def token_classifier_losses(outputs: Dict, labels: Optional[Dict] = None) -> Dict:
    """The mean loss per labelled word over a batch (`loss_sum` and `scored` come from the
    model called with `label_ids`)."""
    del labels
    total = ops.sum(outputs["loss_sum"])
    return {"loss": total / ops.maximum(ops.sum(outputs["scored"]), 1.0),
            "per_example_loss": outputs["loss_sum"]}
