"""The distillation loss: the family's own loss on the labels, the teacher's soft targets
(Hinton et al. 2015; DistilBERT, TinyBERT's prediction layer) and, optionally, the
teacher's hidden states (TinyBERT) and self-attention relations (MiniLMv2):

    loss = alpha * the family's loss + (1 - alpha) * T^2 * soft + beta * hidden
           + gamma * attention

- soft: per unit of the family (a classification example, a labelled word of NER, a real
  RACE/C3 question, a SQuAD window), the KL divergence from the teacher's softmax at
  temperature T to the student's (single-label, NER tags, a question's choices, the mean
  of a window's start and end positions'), the KL of each label's
  sigmoid at T (multi-label), or the squared difference of the scores (regression, no T).
  T^2 keeps the soft gradients the size of the hard ones as T grows. A CRF tagger's soft
  targets are its per-word emission scores (the transition scores are not distilled).
- hidden: student layer m of M against teacher layer m * N // M of N (TinyBERT's uniform
  map), the mean squared difference over the real tokens and the teacher's width, summed
  over the M layers, per example. A student narrower than its teacher is read through a
  learned projection W [H_student, H_teacher] that the loss owns (trained with the
  student, in the training checkpoints, never exported).
- attention: MiniLMv2's self-attention relations of the last layer: its queries, keys
  and values (each model's own, recomputed from the layer's input) split into R relation
  heads, softmax(A A^T / sqrt(H / R)) over the keys, KL(teacher || student) averaged over
  the heads and the real query tokens, summed over the three; any widths and head counts.

The teacher runs in inference mode beside the student on the same features; no gradient
reaches it. The family's objective runs unchanged on the student (its metrics too): this
objective records the student's outputs as the family's loss reads them.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional

import keras
import tensorflow as tf

from albert_tf.modeling.layers import ATTENTION_MASK_ADDER
from albert_tf.modeling.models import AlbertMultipleChoice
from albert_tf.modeling.token_classifier import AlbertTokenClassifier

KINDS = ("single_label", "multi_label", "regression")


def soft_loss(student_logits, teacher_logits, temperature: float, kind: str):
    """Soft loss per unit [...] of float32 logits [..., K] (see the module docstring);
    kind: one of KINDS."""
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


def layer_map(student_layers: int, teacher_layers: int) -> List[int]:
    """The teacher layer (0-based) each student layer (0-based) learns from: TinyBERT's
    uniform map, student layer m of M (1-based) to teacher layer m * N // M."""
    return [(m * teacher_layers) // student_layers - 1 for m in range(1, student_layers + 1)]


def real_token_mean(values, input_mask):
    """values [R, S] averaged over each row's real tokens (input_mask [R, S]) -> [R]."""
    mask = tf.cast(input_mask, tf.float32)
    return tf.reduce_sum(values * mask, axis=-1) / tf.maximum(tf.reduce_sum(mask, axis=-1), 1.0)


def hidden_loss(student_layers, teacher_layers, input_mask, projection=None):
    """Per-example hidden-state loss [B] (see the module docstring) of the student's layer
    outputs (a list of M [B, S, Hs]) against the teacher's (N [B, S, Ht]); input_mask
    [B, S]; projection: a Dense Hs -> Ht when the widths differ."""
    total = 0.0
    for student_index, teacher_index in enumerate(layer_map(len(student_layers),
                                                            len(teacher_layers))):
        student = tf.cast(student_layers[student_index], tf.float32)
        if projection is not None:
            student = projection(student)
        difference = student - tf.stop_gradient(tf.cast(teacher_layers[teacher_index],
                                                         tf.float32))
        total += real_token_mean(tf.reduce_mean(tf.square(difference), axis=-1), input_mask)
    return total


def relation_heads(student_config, teacher_config) -> int:
    """MiniLMv2's number of relation heads R: the teacher's attention heads when they divide
    the student's width too, else the largest divisor of both widths not above them."""
    wanted = teacher_config.num_attention_heads
    student, teacher = student_config.hidden_size, teacher_config.hidden_size
    for heads in range(wanted, 0, -1):
        if student % heads == 0 and teacher % heads == 0:
            return heads
    return 1


def last_attention_input(network, outputs):
    """(x [R, S, H]: the input of the last layer's last attention sub-layer, that
    sub-layer) of a network's training outputs."""
    encoder = network.encoder
    sublayers = outputs["encoder_outputs"]
    if len(sublayers) >= 2:
        x = sublayers[-2]
    else:
        x = outputs["embedding_output"]
        if encoder.embedding_projection is not None:
            x = encoder.embedding_projection(x)
    attention, _ = encoder.layer_blocks(encoder.config.num_hidden_layers - 1)[-1]
    return x, attention


def self_attention_relations(x, attention, input_mask, heads: int) -> List:
    """MiniLMv2's self-attention relations of one attention sub-layer: for its queries,
    keys and values each (x W + b, [R, S, H] split into `heads` relation heads of H/heads),
    the log-softmax over keys of the scaled dot products with themselves, padded keys
    masked: three float32 [R, heads, S, S]."""
    x = tf.cast(x, tf.float32)
    mask = tf.cast(input_mask, tf.float32)[:, None, None, :]
    width = x.shape[-1]
    size = width // heads
    relations = []
    for dense in (attention.query, attention.key, attention.value):
        projected = tf.matmul(x, tf.cast(dense.kernel, tf.float32)) + tf.cast(dense.bias,
                                                                            tf.float32)
        split = tf.reshape(projected, tf.concat([tf.shape(x)[:2], [heads, size]], 0))
        split = tf.transpose(split, [0, 2, 1, 3])
        scores = tf.matmul(split, split, transpose_b=True) / (size ** 0.5)
        relations.append(tf.nn.log_softmax(scores + (1.0 - mask) * ATTENTION_MASK_ADDER,
                                           axis=-1))
    return relations


def relation_loss(student_relations, teacher_relations, input_mask):
    """Per-row loss [R]: KL(teacher || student) of each relation over the keys, averaged
    over the relation heads and the real query tokens, summed over the three relations."""
    total = 0.0
    for student, teacher in zip(student_relations, teacher_relations):
        teacher = tf.stop_gradient(teacher)
        kl = tf.reduce_sum(tf.exp(teacher) * (teacher - student), axis=-1)  # [R, heads, S]
        total += real_token_mean(tf.reduce_mean(kl, axis=1), input_mask)
    return total


class _Recorder:
    """Stands in for the student inside the family's objective: calls it and keeps what it
    returned, so that the student runs once per step."""

    def __init__(self, model):
        self.model = model
        self.outputs = None

    def __call__(self, inputs, training=False):
        self.outputs = self.model(inputs, training=training)
        return self.outputs


class FamilyTargets:
    """What the distillation loss reads of one family's models and features: the token
    inputs, the soft units (`units`: 1 for each unit the soft loss counts) and the
    teacher's logits and layer outputs."""

    inputs = ("input_ids", "input_mask", "segment_ids")
    kind = "single_label"

    def units(self, features):
        """float32 weights [B] (a tagger's [B, S]): 1 for each unit the soft loss counts (a
        classifier's: every row, unlabelled transfer text too)."""
        return tf.ones(tf.shape(features["input_ids"])[:1], tf.float32)

    def teacher_outputs(self, teacher, features) -> Mapping:
        return teacher({name: features[name] for name in self.inputs
                        if name in features}, training=False)

    def soft(self, student: Mapping, teacher: Mapping, temperature: float):
        """The soft loss per unit of the two models' outputs (`soft_loss` of their logits)."""
        return soft_loss(tf.cast(student["logits"], tf.float32),
                         tf.stop_gradient(tf.cast(teacher["logits"], tf.float32)),
                         temperature, self.kind)

    def input_mask(self, features):
        """[R, S]: the mask of the rows the encoder ran (a multiple-choice batch's choices
        flat)."""
        mask = features["input_mask"]
        return tf.reshape(mask, [-1, tf.shape(mask)[-1]])


class ClassifierTargets(FamilyTargets):
    def __init__(self, kind: str):
        if kind not in KINDS:
            raise ValueError(f"kind: one of {KINDS}, got {kind!r}")
        self.kind = kind


class TaggerTargets(FamilyTargets):
    """NER: one unit per labelled word (label_ids >= 0: a word's first piece in a window
    that scores it), as the family's loss counts. The teacher's logits are its emission
    scores, without decoding."""

    def units(self, features):
        from albert_tf.tasks.tagging.job import labelled_words

        return labelled_words(features)

    def teacher_outputs(self, teacher, features):
        outputs = dict(teacher.encoder({name: features[name] for name in self.inputs},
                                       training=False))
        outputs["logits"] = teacher.classifier(outputs["sequence_output"], training=False)
        return outputs


class ChoiceTargets(FamilyTargets):
    """RACE / C3: one unit per real question; absent C3 choices are masked in both."""

    inputs = ("input_ids", "input_mask", "segment_ids", "choice_mask")

    def units(self, features):
        from albert_tf.finetuning import example_weights

        return example_weights(features)


class SpanTargets(FamilyTargets):
    """SQuAD v1.1 / CMRC 2018: one unit per window; the soft loss is the mean of the start
    and end positions' KL over the window's tokens (as the labels' loss averages the two
    cross-entropies)."""

    def soft(self, student, teacher, temperature):
        return 0.5 * sum(
            soft_loss(tf.cast(student[name], tf.float32),
                      tf.stop_gradient(tf.cast(teacher[name], tf.float32)), temperature,
                      "single_label")
            for name in ("start_logits", "end_logits"))


def family_targets(teacher, kind: str = "single_label") -> FamilyTargets:
    """The targets of `teacher`'s family; kind: a classifier's (KINDS)."""
    from albert_tf.modeling.models import AlbertSpanLabeler

    if isinstance(teacher, AlbertSpanLabeler):
        return SpanTargets()
    if isinstance(teacher, AlbertTokenClassifier):
        return TaggerTargets()
    if isinstance(teacher, AlbertMultipleChoice):
        return ChoiceTargets()
    return ClassifierTargets(kind)


class TransferTerms:
    """The terms that compare the two encoders, with their weights: TinyBERT's hidden states
    (`hidden_weight`) and MiniLMv2's self-attention relations of the last layer
    (`attention_weight`). Owns the hidden states' projection (a student whose width differs
    from the teacher's); build it in the strategy's scope."""

    def __init__(self, teacher_config, student_config, hidden_weight: float = 0.0,
                 attention_weight: float = 0.0):
        self.weights = {name: float(weight) for name, weight in
                        (("hidden", hidden_weight), ("attention", attention_weight)) if weight}
        self.projection = None
        width, teacher_width = student_config.hidden_size, teacher_config.hidden_size
        if "hidden" in self.weights and width != teacher_width:
            self.projection = keras.layers.Dense(teacher_width, name="hidden_projection")
            self.projection.build((None, None, width))
        self.heads = relation_heads(student_config, teacher_config)

    @property
    def names(self):
        return tuple(self.weights)

    @property
    def trainable_variables(self):
        return list(self.projection.trainable_variables) if self.projection else []

    def per_row(self, student, student_outputs, teacher, teacher_outputs, input_mask
                ) -> Dict[str, tf.Tensor]:
        """Each active term's loss per encoder row [R] (a multiple-choice batch's choices
        flat), of the two networks' training outputs."""
        terms = {}
        if "hidden" in self.weights:
            terms["hidden"] = hidden_loss(encoder_layers(student, student_outputs),
                                          encoder_layers(teacher, teacher_outputs),
                                          input_mask, self.projection)
        if "attention" in self.weights:
            mine = self_attention_relations(*last_attention_input(student, student_outputs),
                                            input_mask, self.heads)
            theirs = self_attention_relations(*last_attention_input(teacher, teacher_outputs),
                                              input_mask, self.heads)
            terms["attention"] = relation_loss(mine, theirs, input_mask)
        return terms


def encoder_layers(network, outputs) -> List:
    """Each layer's output [R, S, H] among a network's training outputs."""
    inner = network.config.inner_group_num
    return list(outputs["encoder_outputs"][inner - 1::inner][:network.config.num_hidden_layers])


def teacher_sums(targets: FamilyTargets, transfer: Optional[TransferTerms],
                 temperature: float, student, student_outputs, teacher, features
                 ) -> Dict[str, tf.Tensor]:
    """What the student's outputs (its network's, on `features`) owe the teacher's, summed
    over the batch: `soft_total` over `soft_units` units, and each active transfer term's
    `<name>_total` over `transfer_rows` encoder rows. The teacher runs here."""
    theirs = targets.teacher_outputs(teacher, features)
    soft = targets.soft(student_outputs, theirs, temperature)
    units = targets.units(features)
    sums = {"soft_total": tf.reduce_sum(soft * units), "soft_units": tf.reduce_sum(units)}
    terms = transfer.per_row(student, student_outputs, teacher, theirs,
                             targets.input_mask(features)) if transfer else {}
    for name, per_row in terms.items():
        sums[f"{name}_total"] = tf.reduce_sum(per_row)
        sums["transfer_rows"] = tf.cast(tf.shape(per_row)[0], tf.float32)
    return sums


class DistillationObjective:
    """The student's training loss (a `training.Objective`): `family` is the family's own
    objective (the hard loss and its metrics), `teacher` the built teacher network,
    `targets` its `FamilyTargets`; `alpha` the hard loss's weight in [0, 1], `temperature`
    T; `transfer` the encoder terms (`TransferTerms`, None: none). Reports `soft_loss`
    (and `hidden_loss`, `attention_loss`) beside the family's metrics."""

    def __init__(self, family, teacher, targets: FamilyTargets, *, temperature: float,
                 alpha: float, transfer: Optional[TransferTerms] = None):
        self.family = family
        self.teacher = teacher
        self.targets = targets
        self.temperature = float(temperature)
        self.alpha = float(alpha)
        self.transfer = transfer if transfer is not None and transfer.names else None
        names = self.transfer.names if self.transfer else ()
        self.metric_names = tuple(family.metric_names) + ("soft_total", "soft_units") + tuple(
            f"{name}_total" for name in names) + (("transfer_rows",) if names else ())

    @property
    def trainable_variables(self):
        return self.transfer.trainable_variables if self.transfer else []

    def normalizers(self, features):
        rows = tf.reduce_prod(tf.shape(features["input_ids"])[:-1])
        return dict(self.family.normalizers(features),
                    soft_units=tf.reduce_sum(self.targets.units(features)),
                    encoder_rows=tf.cast(rows, tf.float32))

    def loss(self, model, features, normalizers, training):
        """This micro-batch's share of the global batch's loss (each term's sum over the
        micro-batch over its count in the global batch), and the metric sums."""
        recorder = _Recorder(model)
        hard, sums = self.family.loss(recorder, features, normalizers, training)
        sums = dict(sums, **teacher_sums(self.targets, self.transfer, self.temperature, model,
                                         recorder.outputs, self.teacher, features))
        loss = self.alpha * hard + (1.0 - self.alpha) * tf.math.divide_no_nan(
            sums["soft_total"], normalizers["soft_units"])
        for name in self.transfer.names if self.transfer else ():
            loss += self.transfer.weights[name] * tf.math.divide_no_nan(
                sums[f"{name}_total"], normalizers["encoder_rows"])
        return loss, sums

    def finalize(self, sums: Dict[str, float]) -> Dict[str, float]:
        metrics = self.family.finalize(sums)
        metrics["soft_loss"] = sums["soft_total"] / max(sums["soft_units"], 1.0)
        for name in self.transfer.names if self.transfer else ():
            metrics[f"{name}_loss"] = sums[f"{name}_total"] / max(sums["transfer_rows"], 1.0)
        return metrics
