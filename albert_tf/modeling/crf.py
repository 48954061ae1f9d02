"""A linear-chain conditional random field (CRF) for sequence tagging, in TensorFlow.

Shapes use B = batch, L = padded sequence length, T = number of tags (ids 0..T-1).

  emissions          float [B, L, T]   unary score of tag j at position t (any float dtype)
  tags               int   [B, L]      gold tag ids
  lengths            int   [B]         true lengths; positions >= length are padding (0 allowed)
  transitions        float [T, T]      score of tag i followed by tag j
  start_transitions  float [T]         score of a path starting with tag j
  end_transitions    float [T]         score of a path ending with tag j

A path y over the first n = length positions scores
  start[y_0] + sum_t emissions[t, y_t] + sum_{t>0} transitions[y_{t-1}, y_t] + end[y_{n-1}]
and its log-likelihood is score(y) - logZ, logZ the logsumexp of the scores of all T^n
paths. The empty sequence (n = 0) has one path, of score 0, so its log-likelihood is 0.

Everything is computed in float32, whatever the inputs' dtype. Padding never matters:
padded emissions and tags are replaced before use, so they may hold anything (even NaN or
out-of-range ids). Converted to ONNX, padded emissions must be finite: tf2onnx 1.17 turns
a float `tf.where` into multiply-adds, where a NaN or an infinity spreads. The loops over
time are `tf.foldl` / `tf.scan`, so the functions run eagerly, in graph mode (the sequence
length may be unknown), under XLA (jit_compile) and, converted by tf2onnx, in ONNX Runtime
(`crf_decode`'s backtracking is a forward scan for it; see there).

`crf_log_likelihood` is the training loss (negated); `crf_decode` is Viterbi decoding,
optionally under hard constraints (e.g. a BIO scheme's "I-X only after B-X or I-X").
`CRF` is a Keras layer holding the three trainable score tables.
"""
from __future__ import annotations

import keras
import tensorflow as tf

from albert_tf.kernels import fused_ops

PADDING_TAG = 0  # what `crf_decode` writes at positions >= length


def _time_major(x: tf.Tensor) -> tf.Tensor:
    """[B, L, ...] -> [L, B, ...]."""
    return tf.transpose(x, [1, 0] + list(range(2, x.shape.rank)))


def _prepare(emissions, lengths):
    """Float32 emissions with padding zeroed, the padding mask and int32 lengths.

    Returns (emissions float32 [B, L', T], mask bool [B, L'], lengths int32 [B]), where
    L' = max(L, 1): the time axis gets one padded step when it is empty, because XLA
    cannot run a loop over zero elements. Callers slice results back to L.
    """
    emissions = tf.cast(emissions, tf.float32)
    lengths = tf.cast(lengths, tf.int32)
    missing = tf.maximum(1 - tf.shape(emissions)[1], 0)
    emissions = tf.pad(emissions, [[0, 0], [0, missing], [0, 0]])
    mask = tf.sequence_mask(lengths, tf.shape(emissions)[1])
    return tf.where(tf.expand_dims(mask, -1), emissions, 0.0), mask, lengths


def _as_float32(*tensors):
    return tuple(tf.cast(x, tf.float32) for x in tensors)


def _path_score(emissions, tags, mask, lengths, transitions, start, end):
    """Score of the given paths: float32 [B] (0 for empty sequences).

    emissions float32 [B, L, T] with padding zeroed; tags int32 [B, L] with padding 0;
    mask bool [B, L]; lengths int32 [B].
    """
    num_tags = tf.shape(transitions)[0]
    unary = tf.reduce_sum(tf.gather(emissions, tags, batch_dims=2), axis=1)
    pair_ids = tags[:, :-1] * num_tags + tags[:, 1:]  # flat index of (y_{t-1}, y_t)
    pairs = tf.gather(tf.reshape(transitions, [-1]), pair_ids)  # [B, L-1]
    binary = tf.reduce_sum(tf.where(mask[:, 1:], pairs, 0.0), axis=1)
    last = tf.gather(tags, tf.maximum(lengths - 1, 0), batch_dims=1)
    boundary = tf.gather(start, tags[:, 0]) + tf.gather(end, last)
    return tf.where(lengths > 0, unary + binary + boundary, 0.0)


def _log_partition(emissions, mask, lengths, transitions, start, end):
    """logZ, the logsumexp of the scores of all paths: float32 [B] (0 for empty sequences).

    The forward algorithm: alpha_t[j] = logsumexp of the scores of the paths over positions
    0..t that end in tag j, so
      alpha_0[j] = start[j] + e_0[j]
      alpha_t[j] = logsumexp_i(alpha_{t-1}[i] + transitions[i, j]) + e_t[j]
    At padded positions alpha is carried unchanged, so the final alpha is alpha_{n-1}.
    `reduce_logsumexp` subtracts the maximum first, which keeps it stable for large scores.
    """
    def step(alpha, inputs):  # alpha [B, T]
        emission, t, valid = inputs  # [B, T], [], [B]
        from_previous = tf.reduce_logsumexp(tf.expand_dims(alpha, -1) + transitions, axis=1)
        new_alpha = tf.where(t == 0, start + emission, from_previous + emission)
        return tf.where(tf.expand_dims(valid, -1), new_alpha, alpha)

    steps = (_time_major(emissions), tf.range(tf.shape(emissions)[1]), tf.transpose(mask))
    alpha = tf.foldl(step, steps, initializer=tf.zeros_like(emissions[:, 0]))
    return tf.where(lengths > 0, tf.reduce_logsumexp(alpha + end, axis=1), 0.0)


def crf_log_likelihood(emissions, tags, lengths, transitions, start_transitions,
                       end_transitions) -> tf.Tensor:
    """Log-likelihood of the gold `tags` under the CRF: float32 [B].

    emissions float [B, L, T] (float32, bfloat16, float16; computed in float32);
    tags int [B, L]; lengths int [B]; transitions float [T, T]; start_transitions and
    end_transitions float [T]. Each entry is score(tags) - logZ <= 0, and exactly 0 for a
    length-0 sequence. Differentiable in emissions and the three score tables; padded
    positions get zero gradient. The usual loss is `-tf.reduce_mean(...)` of this.
    """
    emissions, mask, lengths = _prepare(emissions, lengths)
    transitions, start, end = _as_float32(transitions, start_transitions, end_transitions)
    tags = tf.cast(tags, tf.int32)
    tags = tf.pad(tags, [[0, 0], [0, tf.shape(mask)[1] - tf.shape(tags)[1]]])
    tags = tf.where(mask, tags, 0)  # padding may hold any id, even an out-of-range one
    gold = _path_score(emissions, tags, mask, lengths, transitions, start, end)
    return gold - _log_partition(emissions, mask, lengths, transitions, start, end)


def _disallowed_score(emissions, transitions, start, end) -> tf.Tensor:
    """The finite score a disallowed move adds in constrained decoding: float32 [].

    Minus (1 + 2 * bound), where `bound` is at least the score gap between any two
    unconstrained paths (L * (spread of emissions + spread of transitions) + spread of
    start + spread of end, each spread max - min). One disallowed move therefore costs
    more than any path can gain elsewhere, whatever the scale of the scores, and the
    factor 2 leaves room for float32 rounding. Needs finite scores.
    """
    def spread(x):
        x = tf.concat([tf.reshape(x, [-1]), [0.0]], axis=0)  # 0 for an empty tensor
        return tf.reduce_max(x) - tf.reduce_min(x)

    length = tf.cast(tf.shape(emissions)[1], tf.float32)
    bound = length * (spread(emissions) + spread(transitions)) + spread(start) + spread(end)
    return tf.stop_gradient(-(1.0 + 2.0 * bound))


def _stacking_scan(fn, elems, initializer):
    """`tf.scan(fn, elems, initializer)` as a `tf.while_loop` that stacks each step's
    outputs by concatenation, for LiteRT: its converter lowers `tf.scan`'s TensorArrays
    only when a step's output shape is static, and here the batch size is free. Quadratic
    in the number of steps (a sequence's length), which is small next to the model."""
    elems_tuple = isinstance(elems, tuple)
    steps = elems if elems_tuple else (elems,)
    length = tf.shape(steps[0])[0]
    # Empty stacks whose first dimension is not a constant 0: the converter types a
    # loop variable by its initial value, and the body's stacks grow.
    none = tf.minimum(length, 0)
    stacked = tf.nest.map_structure(lambda x: tf.expand_dims(tf.zeros_like(x), 0)[:none],
                                    initializer)

    def body(t, carry, stacked):
        step = tuple(x[t] for x in steps) if elems_tuple else steps[0][t]
        carry = fn(carry, step)
        stacked = tf.nest.map_structure(lambda s, c: tf.concat([s, tf.expand_dims(c, 0)], 0),
                                        stacked, carry)
        return t + 1, carry, stacked

    carry_shapes = tf.nest.map_structure(lambda x: tf.TensorShape([None] * x.shape.rank),
                                         initializer)
    stacked_shapes = tf.nest.map_structure(
        lambda x: tf.TensorShape([None] * (x.shape.rank + 1)), initializer)
    _, _, stacked = tf.while_loop(
        lambda t, *_: t < length, body, (tf.constant(0), initializer, stacked),
        shape_invariants=(tf.TensorShape([]), carry_shapes, stacked_shapes))
    return stacked


def crf_decode(emissions, lengths, transitions, start_transitions, end_transitions,
               allowed=None) -> tuple[tf.Tensor, tf.Tensor]:
    """The highest-scoring path of each sequence (Viterbi): (tags int32 [B, L], best_score
    float32 [B]).

    emissions float [B, L, T] (any float dtype; computed in float32); lengths int [B];
    transitions float [T, T]; start_transitions, end_transitions float [T].
    Positions >= length of `tags` hold PADDING_TAG (0): always a valid id, so the output
    can feed gathers and one-hots directly; use `lengths` to tell padding from tag 0.
    A length-0 sequence decodes to all padding with best_score 0.

    `allowed`: optional hard constraints, a tuple of bool masks (allowed_transitions
    [T, T] (i followed by j), allowed_start [T], allowed_end [T]). Each disallowed move adds
    `_disallowed_score`, a finite penalty larger than any score gap between paths, so
    whenever a sequence has an allowed path, the result is the best allowed path and
    best_score its true score. A sequence with no allowed path still gets a path: the one
    with the fewest disallowed moves (ties broken by score), with best_score including the
    penalties (far below any allowed path's score).

    Back-pointers: at step t, pointer[j] is the best previous tag for tag j; at padded
    steps the pointers are the identity, so backtracking from the last position passes the
    final tag unchanged down to position length - 1.
    """
    out_length = tf.shape(emissions)[1]
    emissions, mask, lengths = _prepare(emissions, lengths)
    transitions, start, end = _as_float32(transitions, start_transitions, end_transitions)
    if allowed is not None:
        penalty = _disallowed_score(emissions, transitions, start, end)
        allowed_transitions, allowed_start, allowed_end = allowed
        transitions = tf.where(allowed_transitions, transitions, transitions + penalty)
        start = tf.where(allowed_start, start, start + penalty)
        end = tf.where(allowed_end, end, end + penalty)
    identity = tf.range(tf.shape(transitions)[0])[None, :]  # [1, T]

    def forward(carry, inputs):  # carry: (max score of paths ending in each tag [B, T], _)
        best, _ = carry
        emission, t, valid = inputs  # [B, T], [], [B]
        candidates = tf.expand_dims(best, -1) + transitions  # [B, previous T, next T]
        from_previous = tf.reduce_max(candidates, axis=1) + emission
        new_best = tf.where(t == 0, start + emission, from_previous)
        pointers = tf.argmax(candidates, axis=1, output_type=tf.int32)  # [B, T]
        return (tf.where(tf.expand_dims(valid, -1), new_best, best),
                tf.where(tf.expand_dims(valid, -1), pointers, identity))

    steps = (_time_major(emissions), tf.range(tf.shape(emissions)[1]), tf.transpose(mask))
    # The start values broadcast the emissions' rows with the mask's, as the body's
    # outputs do: where one's batch dimension is known and the other's is not (the
    # early-exit loop's remaining rows), the loop's shapes then agree.
    rows = tf.zeros_like(emissions[:, 0], tf.int32) + tf.zeros_like(mask[:, 0:1], tf.int32)
    initial = (tf.cast(rows, emissions.dtype), rows + identity)
    scan = _stacking_scan if fused_ops.tracing_for_litert() else tf.scan
    best, pointers = scan(forward, steps, initial)  # [L, B, T] each
    final = best[-1] + end
    last_tag = tf.argmax(final, axis=1, output_type=tf.int32)  # [B]

    # Backward over t = L-1..0: previous[t] = pointers[t][tag_t] is the tag at t - 1. A
    # forward scan over the reversed pointers, not `reverse=True`: tf2onnx 1.17 stacks a
    # reverse scan's outputs in the order it runs them, which would reverse the path in ONNX.
    backward = scan(lambda tag, pointer: tf.gather(pointer, tag, batch_dims=1),
                    tf.reverse(pointers, [0]), last_tag)  # [L, B], t = L-1..0
    previous = tf.reverse(backward, [0])  # [L, B], t = 0..L-1
    tags = tf.transpose(tf.concat([previous[1:], last_tag[None]], axis=0))  # [B, L]
    tags = tf.where(mask, tags, PADDING_TAG)[:, :out_length]
    best_score = tf.where(lengths > 0, tf.reduce_max(final, axis=1), 0.0)
    return tags, best_score


@keras.saving.register_keras_serializable(package="albert_tf")
class CRF(keras.layers.Layer):
    """A linear-chain CRF over `num_tags` tags, meant to sit on a per-token Dense layer
    that produces the emissions [B, L, num_tags].

    Trainable float32 weights: `transitions` [T, T], `start_transitions` [T],
    `end_transitions` [T]. They start at zero: the model then decodes as the argmax of the
    emissions (a plain softmax tagger), and the CRF log-likelihood is concave in these
    scores, so a symmetric start does not stall training; the emissions' own random
    initialisation breaks any symmetry between tags.

    The layer computes in float32 (its default dtype policy), as a model's output layer
    should under mixed precision; calling it casts bfloat16/float16 emissions up.
    `layer(emissions, lengths, allowed=None)` decodes; for training use
    `-tf.reduce_mean(layer.log_likelihood(emissions, tags, lengths))`.
    """

    def __init__(self, num_tags: int, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        if num_tags < 1:
            raise ValueError(f"num_tags must be at least 1, got {num_tags}")
        self.num_tags = int(num_tags)
        self.transitions = self.add_weight(
                shape=(num_tags, num_tags), initializer="zeros", name="transitions")
        self.start_transitions = self.add_weight(
                shape=(num_tags,), initializer="zeros", name="start_transitions")
        self.end_transitions = self.add_weight(
                shape=(num_tags,), initializer="zeros", name="end_transitions")
        self.built = True

    def _scores(self):
        return self.transitions, self.start_transitions, self.end_transitions

    def log_likelihood(self, emissions, tags, lengths) -> tf.Tensor:
        """`crf_log_likelihood` with this layer's weights: float32 [B]."""
        return crf_log_likelihood(emissions, tags, lengths, *self._scores())

    def decode(self, emissions, lengths, allowed=None) -> tuple[tf.Tensor, tf.Tensor]:
        """`crf_decode` with this layer's weights: (tags int32 [B, L], best_score [B])."""
        return crf_decode(emissions, lengths, *self._scores(), allowed=allowed)

    def call(self, emissions, lengths, allowed=None):
        return self.decode(emissions, lengths, allowed=allowed)

    def get_config(self):
        return {**super().get_config(), "num_tags": self.num_tags}
