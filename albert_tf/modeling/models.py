"""ALBERT models: the encoder plus a head, and their losses.

Fine-tuning models (the original scripts' heads): `AlbertClassifier` (run_classifier),
`AlbertSpanLabeler` (SQuAD v1), `AlbertSquadV2` (SQuAD v2), `AlbertMultipleChoice` (RACE),
with `classifier_losses`, `span_losses`, `squad_v2_losses`, `multiple_choice_losses`.

`AlbertPretrainer` is the original's pretraining graph: masked-LM head tied to
the word embeddings and the sentence-order (SOP) head, with the original's
losses `mlm = sum(w * nll) / (sum(w) + 1e-5)`, `sop = mean(nll)`, `total = mlm + sop`.
"""
from __future__ import annotations

from typing import Dict, Mapping, Optional

import keras
import tensorflow as tf
from keras import ops

from albert_tf.modeling import heads
from albert_tf.config import AlbertConfig
from albert_tf.modeling import early_exit as early_exit_module
from albert_tf.modeling.base import FineTuningModel
from albert_tf.modeling.encoder import (AlbertEncoder, deserialize_model_config,
                                        serialize_model_config)
from albert_tf.modeling.exiting import ExitingModel

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

    def __init__(self, config: AlbertConfig, recompute_layers: bool = False, **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = AlbertConfig.from_dict(config)
        self.config = config
        self.recompute_layers = bool(recompute_layers)
        self.encoder = AlbertEncoder(config, recompute_layers=recompute_layers, name="encoder",
                                     dtype=self.dtype_policy)
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


# --- fine-tuning models --------------------------------------------------------------------------
#
# Each takes the encoder's input dict, returns a dict with stable names, and has a
# module-level loss function with the original scripts' formula. Labels are
# given as a dict (the feature names of the original's TFRecords).


def _nll(log_probs, labels):
    """-log p[label] per example: log_probs [B, K], labels int [B] -> [B]."""
    labels = ops.reshape(ops.cast(labels, "int32"), (-1, 1))
    return -ops.squeeze(ops.take_along_axis(log_probs, labels, axis=-1), -1)


_FineTuningModel = FineTuningModel  # its former, private name


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertClassifier(ExitingModel):
    """run_classifier's model: encoder -> dropout(pooled) -> `output_weights` [K, H].

    Call with the encoder's input dict. Returns the encoder's outputs plus
      `logits`        float32 [B, K]
      `probabilities` float32 [B, K]: softmax, or the logits themselves when K = 1
                      (regression), or a sigmoid per label with `multi_label`
      `predictions`   int32 [B] argmax, or float32 [B] the regression value when K = 1, or
                      int32 [B, K] multi-hot (probability above 0.5) with `multi_label`
    `dropout_rate` is the original's fixed 0.1 on the pooled output.

    Light inference (`modeling.early_exit`): `exit_heads` "shared" or "per_layer" also
    outputs `exit_logits` float32 [L, B, K], every layer's exit (what PABEE's training loss
    reads; `classifier_losses` weights them by depth). `inference_layers=k` answers from
    layer k. With an `early_exit` rule, inference runs the layers until each row exits and
    returns `logits`, `probabilities`, `predictions` of its exit layer and `exit_layer`
    int32 [B] (no encoder outputs).
    """

    _EXTRA_ARGS = ("num_labels", "dropout_rate", "multi_label")

    def __init__(self, config: AlbertConfig, num_labels: int, dropout_rate: float = 0.1,
                 multi_label: bool = False, exit_heads: str = "none",
                 early_exit: Optional[Mapping] = None, **kwargs):
        super().__init__(config, **kwargs)
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate
        self.multi_label = multi_label
        self.classifier = self.classification_head(num_labels, dropout_rate)
        self.init_exits(exit_heads, early_exit, num_labels, dropout_rate)

    def check_exit_rule(self, rule: early_exit_module.EarlyExit) -> None:
        if rule.confidence is not None and (self.multi_label or self.num_labels == 1):
            raise ValueError("an exit confidence needs a single-label classifier (a "
                             "regression or multi-label one exits by patience)")

    def layer_logits(self, layer_index, sequence, training=False):
        """float32 logits [B, K] of the exit after layer `layer_index` (0-based; a Python
        int or an int32 scalar tensor), read from its output sequence [B, S, H]."""
        return self.head_logits(layer_index, self.encoder.pooler(sequence[:, 0]), training)

    def label_outputs(self, logits) -> Dict:
        """`logits`, `probabilities` and `predictions` of logits [B, K] (the class doc)."""
        outputs = {"logits": logits}
        if self.multi_label:
            outputs["probabilities"] = ops.sigmoid(logits)
            outputs["predictions"] = ops.cast(ops.greater(logits, 0), "int32")
        elif self.num_labels == 1:
            outputs["probabilities"] = logits
            outputs["predictions"] = logits[:, 0]
        else:
            outputs["probabilities"] = ops.softmax(logits, axis=-1)
            # TensorFlow's argmax: Keras' adds Bitcast ops, which ONNX lacks (the early-exit
            # loop decides by it inside the exported graphs).
            outputs["predictions"] = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return outputs

    def call(self, inputs: Dict, training=False):
        if self.early_exit is not None and not training:
            return self.exit_early(inputs, _ClassifierExits(self))
        outputs = dict(self.encoder(inputs, training=training))
        if self.exit_heads == "none":
            outputs.update(self.label_outputs(self.classifier(outputs["pooled_output"],
                                                              training=training)))
            return outputs
        # Every layer's exit (PABEE's training objective reads them all); the last is the
        # model's answer: at full depth the task head on the pooled output, as without exits.
        exit_logits = [self.layer_logits(index, sequence, training)
                       for index, sequence in enumerate(self.layer_outputs(outputs, training))]
        outputs.update(self.label_outputs(exit_logits[-1]))
        outputs["exit_logits"] = ops.stack(exit_logits)
        return outputs


class _ClassifierExits(early_exit_module.ExitFamily):
    """`AlbertClassifier`'s exits for `run_early_exit`: its outputs at each layer; the
    decision is the argmax, the multi-hot labels, or the score within the tolerance."""

    def __init__(self, model: AlbertClassifier):
        self.model = model

    def outputs(self, layer_index, sequence, extras):
        return self.model.label_outputs(self.model.layer_logits(layer_index, sequence))

    def unchanged(self, previous, current, extras, rule):
        before, now = previous["predictions"], current["predictions"]
        if self.model.num_labels == 1 and not self.model.multi_label:
            return ops.abs(now - before) <= rule.tolerance
        same = ops.equal(before, now)
        return ops.all(same, axis=-1) if self.model.multi_label else same


def classifier_losses(outputs: Mapping, labels: Mapping) -> Dict:
    """run_classifier's loss: softmax cross-entropy, or squared error when K = 1, or, for
    multi-hot `label_ids` [B, K], the binary cross-entropy of a sigmoid per label averaged
    over the K labels (the mean over the batch is then the mean over all B x K terms, as
    google-research's GoEmotions classifier and Hugging Face's BCEWithLogitsLoss take it).

    Args:
      outputs: with `logits` float32 [B, K], and with exit heads `exit_logits` [L, B, K]:
        the loss is then PABEE's, each exit's weighted by its depth
        (`early_exit.weighted_exit_loss`); `accuracy` stays the last layer's.
      labels: with `label_ids` [B] (int class ids; float targets when K = 1; [B, 1] is
        read as [B]) or [B, K] multi-hot when K > 1.
    Returns `loss` (mean over the batch, as the original: padding examples are
    not excluded here) and `per_example_loss` [B]; for single-label K > 1 also `accuracy`.
    """
    if "exit_logits" not in outputs:
        return _classifier_losses(ops.cast(outputs["logits"], "float32"), labels)
    exit_logits = ops.cast(outputs["exit_logits"], "float32")
    each = [_classifier_losses(exit_logits[i], labels) for i in range(exit_logits.shape[0])]
    per_example = early_exit_module.weighted_exit_loss(
        ops.stack([losses["per_example_loss"] for losses in each]))
    # The last exit is the model's `logits`: its accuracy is the model's.
    return dict(each[-1], per_example_loss=per_example, loss=ops.mean(per_example))


def _classifier_losses(logits, labels: Mapping) -> Dict:
    label_shape = labels["label_ids"].shape
    if len(label_shape) == 2 and label_shape[-1] == logits.shape[-1] and logits.shape[-1] > 1:
        targets = ops.cast(labels["label_ids"], "float32")
        # max(x, 0) - x z + log(1 + exp(-|x|)): the stable sigmoid cross-entropy.
        terms = (ops.relu(logits) - logits * targets
                 + ops.log1p(ops.exp(-ops.abs(logits))))
        per_example = ops.mean(terms, axis=-1)
        return {"loss": ops.mean(per_example), "per_example_loss": per_example}
    label_ids = ops.reshape(labels["label_ids"], (-1,))
    if logits.shape[-1] == 1:
        per_example = ops.square(logits[:, 0] - ops.cast(label_ids, "float32"))
        return {"loss": ops.mean(per_example), "per_example_loss": per_example}
    per_example = _nll(ops.log_softmax(logits, axis=-1), label_ids)
    correct = ops.equal(ops.argmax(logits, axis=-1), ops.cast(label_ids, "int32"))
    return {"loss": ops.mean(per_example), "per_example_loss": per_example,
            "accuracy": ops.mean(ops.cast(correct, "float32"))}


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSpanLabeler(FineTuningModel):
    """SQuAD v1's model: per-token start/end logits from `cls/squad/output_weights` [2, H].

    Returns the encoder's outputs plus `start_logits`, `end_logits` float32 [B, S]
    (the original calls them start/end "log_prob" in its predictions: they are raw logits).
    """

    _HEAD = "span"

    def __init__(self, config: AlbertConfig, **kwargs):
        super().__init__(config, **kwargs)
        self.span = heads.SpanHead(self.config.hidden_size, self.config.initializer_range,
                                   name="squad", dtype=self.dtype_policy)

    def call(self, inputs: Dict, training=False):
        outputs = dict(self.encoder(inputs, training=training))
        outputs["start_logits"], outputs["end_logits"] = self.span(outputs["sequence_output"])
        return outputs


def span_losses(outputs: Mapping, labels: Mapping) -> Dict:
    """SQuAD v1's loss: (CE(start) + CE(end)) / 2, each a batch mean.

    Args: outputs `start_logits`, `end_logits` [B, S]; labels `start_positions`,
    `end_positions` int [B] or [B, 1].
    """
    start = ops.mean(_nll(ops.log_softmax(ops.cast(outputs["start_logits"], "float32"), -1),
                          labels["start_positions"]))
    end = ops.mean(_nll(ops.log_softmax(ops.cast(outputs["end_logits"], "float32"), -1),
                        labels["end_positions"]))
    return {"loss": (start + end) / 2.0, "start_loss": start, "end_loss": end}


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSquadV2(FineTuningModel):
    """SQuAD v2's model: XLNet-style start / end-given-start / answerability head.

    Inputs: the encoder's dict plus `p_mask` int [B, S] (1 = query, special or
    padding token; default zeros) and, for training, `start_positions` int [B]:
    when present the end is conditioned on it (teacher forcing, as the original's
    training graph); when absent the original's beam search runs. Outputs: the
    encoder's plus those of `heads.SquadV2Head`.
    """

    _EXTRA_ARGS = ("start_n_top", "end_n_top", "dropout_rate")

    _HEAD = "squad"

    def __init__(self, config: AlbertConfig, start_n_top: int = 5, end_n_top: int = 5,
                 dropout_rate: float = 0.1, **kwargs):
        super().__init__(config, **kwargs)
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        self.dropout_rate = dropout_rate
        self.squad = heads.SquadV2Head(self.config.hidden_size, self.config.initializer_range,
                                       start_n_top, end_n_top, dropout_rate, name="squad_v2",
                                       dtype=self.dtype_policy)

    def call(self, inputs: Dict, training=False):
        outputs = dict(self.encoder(inputs, training=training))
        sequence = outputs["sequence_output"]
        p_mask = inputs.get("p_mask")
        if p_mask is None:
            p_mask = ops.zeros(ops.shape(sequence)[:2], "float32")
        outputs.update(self.squad(sequence, p_mask, inputs.get("start_positions"),
                                  training=training))
        return outputs


def squad_v2_losses(outputs: Mapping, labels: Mapping) -> Dict:
    """SQuAD v2's loss: 0.5 (CE(start) + CE(end)) + 0.5 mean sigmoid-CE(cls_logits, is_impossible).

    Args: outputs `start_log_probs`, `end_log_probs` [B, S] (teacher-forced),
    `cls_logits` [B]; labels `start_positions`, `end_positions` int [B],
    `is_impossible` [B] (1 = no answer).
    """
    start = ops.mean(_nll(ops.cast(outputs["start_log_probs"], "float32"),
                          labels["start_positions"]))
    end = ops.mean(_nll(ops.cast(outputs["end_log_probs"], "float32"), labels["end_positions"]))
    logits = ops.cast(outputs["cls_logits"], "float32")
    target = ops.reshape(ops.cast(labels["is_impossible"], "float32"), (-1,))
    # Numerically stable sigmoid cross-entropy: max(x, 0) - x z + log(1 + exp(-|x|)).
    answer = ops.mean(ops.maximum(logits, 0.0) - logits * target
                      + ops.log1p(ops.exp(-ops.abs(logits))))
    return {"loss": 0.5 * (start + end) + 0.5 * answer, "start_loss": start, "end_loss": end,
            "answer_class_loss": answer}


# The logit of an absent choice: softmax gives it probability 0 and argmax never picks it.
MASKED_CHOICE_LOGIT = -1e9


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMultipleChoice(ExitingModel):
    """RACE's model: each (article, question+option) scored by pooled -> dropout -> [1, H].

    Inputs: `input_ids`, `input_mask`, `segment_ids` int [B, C, S] (C = num_choices),
    and optionally `choice_mask` int [B, C] (1 = a real choice; C3's questions have 2-4):
    an absent choice gets the logit MASKED_CHOICE_LOGIT, so probability 0 and never the
    prediction (the logits are then float32).
    Returns `sequence_output` [B, C, S, H], `pooled_output` [B, C, H],
    `logits` [B, C], `probabilities` [B, C], `predictions` int32 [B].
    `dropout_rate` is run_race's --classifier_dropout (0.1; the original's --dropout_prob).
    Light inference as `AlbertClassifier`'s: `exit_logits` [L, B, C] with exit heads; with
    an `early_exit` rule a question's C choices exit together, at the first layer whose
    chosen answer has not changed for `patience` layers (outputs `logits`,
    `probabilities`, `predictions`, `exit_layer` [B]).
    """

    _EXTRA_ARGS = ("num_choices", "dropout_rate")

    def __init__(self, config: AlbertConfig, num_choices: int = 4, dropout_rate: float = 0.1,
                 exit_heads: str = "none", early_exit: Optional[Mapping] = None, **kwargs):
        super().__init__(config, **kwargs)
        self.num_choices = num_choices
        self.dropout_rate = dropout_rate
        self.classifier = self.classification_head(1, dropout_rate)
        self.init_exits(exit_heads, early_exit, 1, dropout_rate)

    def choice_outputs(self, logits, choice_mask=None) -> Dict:
        """`logits`, `probabilities`, `predictions` of the choices' scores [B * C, 1]."""
        logits = ops.reshape(logits, (-1, self.num_choices))
        if choice_mask is not None:
            logits = ops.where(ops.cast(choice_mask, "bool"), ops.cast(logits, "float32"),
                               MASKED_CHOICE_LOGIT)
        return {"logits": logits, "probabilities": ops.softmax(logits, axis=-1),
                # TensorFlow's argmax: Keras' adds Bitcast ops, which ONNX lacks.
                "predictions": tf.argmax(logits, axis=-1, output_type=tf.int32)}

    def layer_logits(self, layer_index, sequence, training=False):
        """float32 scores [B * C, 1] of the exit after layer `layer_index` on its output
        sequence [B * C, S, H]."""
        return self.head_logits(layer_index, self.encoder.pooler(sequence[:, 0]), training)

    def call(self, inputs: Dict, training=False):
        input_ids = inputs.get("input_ids") if isinstance(inputs, dict) else None
        if input_ids is None or len(input_ids.shape) != 3:
            raise ValueError("AlbertMultipleChoice takes input_ids (and input_mask, "
                             "segment_ids) of shape [batch, num_choices, seq_length]")
        if input_ids.shape[1] is not None and input_ids.shape[1] != self.num_choices:
            raise ValueError(f"input_ids has {input_ids.shape[1]} choices, the model "
                             f"num_choices={self.num_choices}")
        seq_length = ops.shape(input_ids)[2]
        flat = {key: ops.reshape(inputs[key], (-1, seq_length))
                for key in ("input_ids", "input_mask", "segment_ids") if key in inputs}
        choice_mask = inputs.get("choice_mask")
        if self.early_exit is not None and not training:
            extras = {} if choice_mask is None else {"choice_mask": choice_mask}
            return self.exit_early(flat, _ChoiceExits(self), extras)
        encoded = self.encoder(flat, training=training)
        hidden = self.config.hidden_size
        outputs = {
            "sequence_output": ops.reshape(encoded["sequence_output"],
                                           (-1, self.num_choices, seq_length, hidden)),
            "pooled_output": ops.reshape(encoded["pooled_output"], (-1, self.num_choices, hidden)),
            # Each sub-layer's output and the embeddings over the choices flat [B * C, S, H]
            # and [B * C, S, E] (distillation's hidden-state and attention terms read them).
            "encoder_outputs": encoded["encoder_outputs"],
            "embedding_output": encoded["embedding_output"],
        }
        if self.exit_heads == "none":
            outputs.update(self.choice_outputs(
                self.classifier(encoded["pooled_output"], training=training), choice_mask))
            return outputs
        exit_logits = [self.choice_outputs(self.layer_logits(index, sequence, training),
                                           choice_mask)["logits"]
                       for index, sequence in enumerate(self.layer_outputs(encoded, training))]
        outputs.update(self.choice_outputs(exit_logits[-1]))
        outputs["exit_logits"] = ops.stack(exit_logits)
        return outputs


class _ChoiceExits(early_exit_module.ExitFamily):
    """`AlbertMultipleChoice`'s exits: a question's C rows together; the decision is the
    chosen answer."""

    def __init__(self, model: AlbertMultipleChoice):
        self.model = model
        self.group = model.num_choices

    def outputs(self, layer_index, sequence, extras):
        return self.model.choice_outputs(self.model.layer_logits(layer_index, sequence),
                                         extras.get("choice_mask"))

    def unchanged(self, previous, current, extras, rule):
        return ops.equal(previous["predictions"], current["predictions"])


def multiple_choice_losses(outputs: Mapping, labels: Mapping) -> Dict:
    """RACE's loss: softmax cross-entropy over the choices (mean over the batch).

    Args: outputs `logits` [B, C] (with `exit_logits` [L, B, C]: PABEE's loss, each exit's
    weighted by depth); labels `label_ids` int [B] (0 = A, ...).
    """
    logits = ops.cast(outputs["logits"], "float32")
    if "exit_logits" in outputs:  # PABEE's loss: each exit's, weighted by depth
        exit_logits = ops.cast(outputs["exit_logits"], "float32")
        per_example = early_exit_module.weighted_exit_loss(ops.stack(
            [_nll(ops.log_softmax(exit_logits[i], axis=-1), labels["label_ids"])
             for i in range(exit_logits.shape[0])]))
    else:
        per_example = _nll(ops.log_softmax(logits, axis=-1), labels["label_ids"])
    label_ids = ops.cast(ops.reshape(labels["label_ids"], (-1,)), "int32")
    correct = ops.equal(ops.cast(ops.argmax(logits, axis=-1), "int32"), label_ids)
    return {"loss": ops.mean(per_example), "per_example_loss": per_example,
            "accuracy": ops.mean(ops.cast(correct, "float32"))}
