"""Early exit (PABEE, "BERT Loses Patience", Zhou et al. 2020): a row stops at the first
layer whose prediction has not changed for `patience` layers.

ALBERT applies one shared layer L times, so every layer's output can be read by the same
head: an exit after layer i is pooler(h_i[:, 0]) through an exit classifier, either the
task's own head at every layer (`exit_heads="shared"`: no new weights) or one head per
layer (`"per_layer"`: PABEE's, L - 1 more [K, H] heads; the last layer keeps the task's).

Training (`exit_loss_weights`): PABEE's objective, the mean of the exits' losses weighted
by depth, sum_i i * loss_i / sum_i i (i = 1..L).

Inference (`run_early_exit`): a loop over the layers, in the graph, at any batch size. A
row's counter grows by one at each layer whose decision equals the previous layer's (the
argmax; a regression score within `tolerance`; every real token's tag for token
classification) and resets otherwise; the row exits when the counter reaches `patience`,
or, with `confidence`, when its top probability reaches it, or at the last layer. Exited
rows keep that layer's outputs and leave the batch: the next layer runs on the remaining
rows only (gathered), so a batch costs what its rows' exit layers cost. The loop stops
when no row is left. Each row reports `exit_layer` (1..L). SavedModel, ONNX (a Loop) and
LiteRT (a WHILE) run the same loop.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Mapping, Optional

import tensorflow as tf

from albert_tf.modeling import layers

EXIT_HEADS = ("none", "shared", "per_layer")


@dataclasses.dataclass(frozen=True)
class EarlyExit:
    """When a row stops (see the module docstring).

    patience: consecutive layers with an unchanged decision (PABEE's t, >= 1), or None.
    confidence: exit when the top probability reaches it, in (0, 1], or None.
    tolerance: a regression score is "unchanged" within it (>= 0).
    At least one of patience and confidence is given; with both, whichever comes first.
    """

    patience: Optional[int] = None
    confidence: Optional[float] = None
    tolerance: float = 0.0

    def __post_init__(self):
        if self.patience is None and self.confidence is None:
            raise ValueError("early exit needs a patience (layers, >= 1) or a confidence "
                             "threshold in (0, 1]")
        if self.patience is not None and (isinstance(self.patience, bool)
                                          or int(self.patience) != self.patience
                                          or self.patience < 1):
            raise ValueError(f"patience must be a whole number of layers >= 1, got "
                             f"{self.patience!r}")
        if self.confidence is not None and not 0.0 < self.confidence <= 1.0:
            raise ValueError(f"the exit confidence must be in (0, 1], got {self.confidence!r}")
        if not self.tolerance >= 0.0:
            raise ValueError(f"the exit tolerance must be >= 0, got {self.tolerance!r}")

    def to_dict(self) -> Dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Optional[Mapping]) -> Optional["EarlyExit"]:
        return None if values is None else cls(**values)


def check_exit_heads(exit_heads: str) -> str:
    if exit_heads not in EXIT_HEADS:
        raise ValueError(f"exit_heads must be one of {', '.join(EXIT_HEADS)}; got "
                         f"{exit_heads!r}")
    return exit_heads


def exit_loss_weights(num_layers: int) -> tf.Tensor:
    """PABEE's weights of the L exits' losses: i / sum(1..L) for i = 1..L, float32 [L]."""
    depth = tf.range(1, num_layers + 1, dtype=tf.float32)
    return depth / tf.reduce_sum(depth)


def weighted_exit_loss(per_exit: tf.Tensor) -> tf.Tensor:
    """per_exit [L, B] per-example losses of each exit -> [B], weighted by depth."""
    weights = exit_loss_weights(per_exit.shape[0] or tf.shape(per_exit)[0])
    return tf.tensordot(weights, per_exit, axes=1)


class ExitFamily:
    """What a task model gives the loop: its outputs at a layer and when two layers agree.

    An answer row is `group` encoder rows (a multiple-choice question's C choices; 1
    otherwise). `extras`: per answer row tensors the family reads ({name: [A, ...]}, e.g.
    the word mask), kept and dropped with their rows.
    `outputs(layer_index, sequence, extras)`: the head's outputs [A, ...] read from the
    layer's output sequence [A * group, S, H] (layer_index: int32 scalar, 0-based).
    `unchanged(previous, current, extras, rule)`: bool [A], the decision did not change.
    `confident(outputs, threshold)`: bool [A], the top probability reaches the threshold
    (by default the largest of `probabilities` [A, K]).
    """

    group: int = 1

    def outputs(self, layer_index, sequence, extras: Mapping) -> Dict[str, tf.Tensor]:
        raise NotImplementedError

    def unchanged(self, previous: Mapping, current: Mapping, extras: Mapping,
                  rule: EarlyExit):
        raise NotImplementedError

    def confident(self, outputs: Mapping, threshold: float):
        return tf.reduce_max(outputs["probabilities"], axis=-1) >= threshold


def _invariant(value: tf.Tensor) -> tf.TensorShape:
    """A loop variable's shape with its row count left free."""
    return tf.TensorShape([None]).concatenate(value.shape[1:])


def _keep(values, keep):
    return tf.nest.map_structure(lambda value: tf.boolean_mask(value, keep), values)


def _write(full: Dict, rows, exited, current: Dict) -> Dict:
    """full[rows[exited]] = current[exited], for each output."""
    index = tf.boolean_mask(rows, exited)[:, tf.newaxis]
    return {name: tf.tensor_scatter_nd_update(full[name], index,
                                              tf.boolean_mask(current[name], exited))
            for name, value in full.items()}


def run_early_exit(encoder, inputs: Mapping, family: ExitFamily, rule: EarlyExit,
                   extras: Optional[Mapping[str, tf.Tensor]] = None) -> Dict[str, tf.Tensor]:
    """The family's outputs [B, ...] of each answer row at its exit layer, plus
    `exit_layer` int32 [B] (1..the layers the encoder runs at inference), running `encoder`
    (an AlbertEncoder) layer by layer in inference mode (see the module docstring).
    inputs: the encoder's features [B * family.group, S]. extras: see `ExitFamily`.
    """
    num_layers = encoder.layers_run(False)
    extras = dict(extras or {})
    x, input_mask, _ = encoder.embed(dict(inputs), training=False)
    group = family.group
    batch = tf.shape(x)[0] // group

    def exit_now(layer_index, counter, current):
        exited = tf.fill(tf.shape(counter), layer_index + 1 >= num_layers)
        if rule.patience is not None:
            exited = exited | (counter >= rule.patience)
        if rule.confidence is not None:
            exited = exited | family.confident(current, rule.confidence)
        return exited

    def kept(keep, encoded, rows):
        """The still-running rows' state: the encoder rows (x, input_mask) of the kept
        answer rows, and the answer rows' own values."""
        return _keep(encoded, tf.repeat(keep, group) if group > 1 else keep), _keep(rows, keep)

    # The first layer outside the loop: its outputs give every output's shape and dtype.
    x = encoder.apply_layer(0, x, input_mask)[-1]
    current = family.outputs(tf.constant(0), x, extras)
    counter = tf.zeros([batch], tf.int32)
    keep = tf.logical_not(exit_now(tf.constant(0), counter, current))
    encoded, rows = kept(keep, (x, input_mask),
                         (tf.range(batch), counter, current, extras))
    state = (tf.constant(1), encoded, rows, dict(current), tf.ones([batch], tf.int32))

    def loop_over(layers_run: range, state):
        """The loop over one run of layers applying the same sub-layers (a group's)."""
        def more(layer_index, encoded, rows, *_):
            return (layer_index < layers_run.stop) & (tf.size(rows[0]) > 0)

        def step(layer_index, encoded, rows, full, exit_layer):
            (x, input_mask), (row, counter, previous, extras) = encoded, rows
            with layers.scores_scope_for_loop():
                x = encoder.apply_layer(layers_run.start, x, input_mask)[-1]
            current = family.outputs(layer_index, x, extras)
            same = family.unchanged(previous, current, extras, rule)
            counter = tf.where(same, counter + 1, tf.zeros_like(counter))
            exited = exit_now(layer_index, counter, current)
            full = _write(full, row, exited, current)
            exit_layer = _write({"exit_layer": exit_layer}, row, exited,
                                {"exit_layer": tf.fill(tf.shape(row), layer_index + 1)}
                                )["exit_layer"]
            encoded, rows = kept(tf.logical_not(exited), (x, input_mask),
                                 (row, counter, current, extras))
            return layer_index + 1, encoded, rows, full, exit_layer

        invariants = tf.nest.map_structure(_invariant, state[1:])
        return tf.while_loop(more, step, state,
                             shape_invariants=(tf.TensorShape([]),) + tuple(invariants))

    # One loop per run of same layers (ALBERT's groups): a loop body applies one layer's
    # weights, chosen when traced (choosing in the graph would need a Case op, which the
    # ONNX converter cannot place in a loop).
    for layers_run in encoder.same_layer_runs(num_layers):
        remaining = range(max(layers_run.start, 1), layers_run.stop)
        if len(remaining):
            state = loop_over(remaining, state)
    return dict(state[3], exit_layer=state[4])
