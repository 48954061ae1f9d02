"""Task heads on top of the ALBERT encoder.

Pretraining: MaskedLMHead (`cls/predictions`), SentenceOrderHead (`cls/seq_relationship`).
Fine-tuning, as the original scripts: ClassificationHead (run_classifier; run_race with
K = 1 per choice), SpanHead (SQuAD v1), SquadV2Head (SQuAD v2, XLNet-style with beam).

B = batch, S = sequence length, P = masked positions per sequence, H = hidden,
E = embedding size, V = vocabulary size. Logits are returned in float32 under
every dtype policy so that losses and softmaxes are computed in float32.
"""
from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from albert_tf.modeling import layers


@keras.saving.register_keras_serializable(package="albert_tf")
class MaskedLMHead(layers.ConfiguredLayer):
    """The original's `cls/predictions`: dense H->E with the config activation, LayerNorm,
    then a decoder tied to the word embeddings plus an output bias.

    Call: `hidden` [B, P, H], `embedding_table` [V, E] -> logits [B, P, V] (float32).
    The embedding table is passed at call time (not owned), so it is trained and
    saved once, by the encoder.
    """

    CONFIG = ("vocab_size", "embedding_size", "hidden_size", "hidden_act",
              "initializer_range")

    def __init__(self, vocab_size, embedding_size, hidden_size, hidden_act, initializer_range,
                 **kwargs):
        super().__init__(**kwargs)
        self.configure(locals())
        self.transform = layers.dense(embedding_size, initializer_range, "transform",
                                      activation=layers.get_activation(hidden_act),
                                      dtype=self.dtype_policy)
        self.layer_norm = layers.layer_norm("LayerNorm")

    def build(self, input_shape=None):
        self.transform.build((None, None, self.hidden_size))
        self.layer_norm.build((None, None, self.embedding_size))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                           initializer="zeros")
        self.built = True

    def call(self, hidden, embedding_table):
        h = ops.cast(self.layer_norm(self.transform(hidden)), self.compute_dtype)
        table = ops.cast(embedding_table, self.compute_dtype)
        # One [B*P, E] x [E, V] product: a batched product against the shared table
        # would form the table's gradient per example ([B, E, V]) and then sum it.
        logits = tf.matmul(tf.reshape(h, [-1, self.embedding_size]), table, transpose_b=True)
        logits = tf.reshape(logits, tf.concat([tf.shape(h)[:-1], [self.vocab_size]], axis=0))
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")



def project(x, weights, bias, dtype):
    """x [..., H] W^T + b with W [K, H] stored as the original stores it: the product in
    `dtype` (the compute dtype), the bias added in float32; float32 [..., K]."""
    logits = ops.matmul(ops.cast(x, dtype), ops.transpose(ops.cast(weights, dtype)))
    return ops.cast(logits, "float32") + ops.cast(bias, "float32")


class _ProjectionHead(layers.ConfiguredLayer):
    """What the original's output projections share: `output_weights` [K, H] (stored as the
    original, transposed at call time) and `output_bias` [K], K = `num_outputs`."""

    num_outputs = 2
    CONFIG = ("hidden_size", "initializer_range")

    def __init__(self, hidden_size, initializer_range, **kwargs):
        super().__init__(**kwargs)
        self.configure(locals())

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            name="output_weights", shape=(self.num_outputs, self.hidden_size),
            initializer=layers.kernel_initializer(self.initializer_range))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.num_outputs,),
                                           initializer="zeros")
        self.built = True


@keras.saving.register_keras_serializable(package="albert_tf")
class SentenceOrderHead(_ProjectionHead):
    """The original's `cls/seq_relationship`: logits = pooled W^T + b, W stored [2, H].

    Call: `pooled` [B, H] -> logits [B, 2] (float32); label 1 means "swapped".
    """

    def call(self, pooled):
        return project(pooled, self.output_weights, self.output_bias, self.compute_dtype)


# --- fine-tuning heads of the original scripts -------------------------------------------------
#
# Variable names follow the original's `tf.get_variable` / `tf.layers.dense` scopes; the map to
# the TF1 names is in `albert_tf.checkpoints.names`. K = labels, C = choices.

MASK_NEGATIVE = 1e30  # the original SQuAD v2 masking: x * (1 - p) - 1e30 * p


@keras.saving.register_keras_serializable(package="albert_tf")
class ClassificationHead(_ProjectionHead):
    """run_classifier's head: dropout on the pooled output, then logits = pooled W^T + b.

    Weights: `output_weights` [K, H] (stored as the original, transposed at call
    time), `output_bias` [K]. K = 1 is STS-B regression (and RACE, per choice).
    Call: `pooled` [B, H] -> logits [B, K] (float32).
    """

    CONFIG = _ProjectionHead.CONFIG + ("num_labels", "dropout_rate")

    def __init__(self, num_labels, hidden_size, initializer_range, dropout_rate=0.1, **kwargs):
        super().__init__(hidden_size, initializer_range, **kwargs)
        if num_labels < 1:
            raise ValueError(f"ClassificationHead needs num_labels >= 1, got {num_labels}")
        self.configure(locals())
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)

    @property
    def num_outputs(self):
        return self.num_labels

    def call(self, pooled, training=False):
        pooled = self.dropout(ops.cast(pooled, self.compute_dtype), training=training)
        return project(pooled, self.output_weights, self.output_bias, self.compute_dtype)


@keras.saving.register_keras_serializable(package="albert_tf")
class ExitHeads(layers.ConfiguredLayer):
    """PABEE's per-layer exit classifiers of layers 1..L-1 (the last layer's is the task's
    `ClassificationHead`): `output_weights` [L-1, K, H], `output_bias` [L-1, K], each
    layer's as the task head's, and the same dropout.

    `logits(layer_index, pooled, last_head)`: pooled [B, H] -> float32 [B, K] through layer
    `layer_index`'s head (a Python int or an int32 scalar tensor; `last_head`, the task's
    head, at L - 1). Computed by the task head's `project`, so layer L's logits are the task
    head's bit for bit.
    """

    CONFIG = ("num_exits", "num_labels", "hidden_size", "initializer_range", "dropout_rate")

    def __init__(self, num_exits, num_labels, hidden_size, initializer_range, dropout_rate=0.1,
                 **kwargs):
        super().__init__(**kwargs)
        self.configure(locals())
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            name="output_weights", shape=(self.num_exits, self.num_labels, self.hidden_size),
            initializer=layers.kernel_initializer(self.initializer_range))
        self.output_bias = self.add_weight(name="output_bias",
                                           shape=(self.num_exits, self.num_labels),
                                           initializer="zeros")
        self.built = True

    def logits(self, layer_index, pooled, last_head, training=False):
        if isinstance(layer_index, int):
            if layer_index >= self.num_exits:
                return last_head(pooled, training=training)
            weights, bias = self.output_weights[layer_index], self.output_bias[layer_index]
        else:
            weights = ops.take(ops.concatenate(
                [self.output_weights, last_head.output_weights[None]], axis=0), layer_index,
                axis=0)
            bias = ops.take(ops.concatenate([self.output_bias, last_head.output_bias[None]],
                                            axis=0), layer_index, axis=0)
        pooled = self.dropout(ops.cast(pooled, self.compute_dtype), training=training)
        return project(pooled, weights, bias, self.compute_dtype)


@keras.saving.register_keras_serializable(package="albert_tf")
class SpanHead(_ProjectionHead):
    """SQuAD v1's `cls/squad` head: per-token logits = h W^T + b with W [2, H], b [2].

    Call: `sequence` [B, S, H] -> (start_logits [B, S], end_logits [B, S]), float32.
    No p_mask and no dropout, as the original.
    """

    def call(self, sequence):
        logits = ops.einsum("bsh,kh->bsk", ops.cast(sequence, self.compute_dtype),
                            ops.cast(self.output_weights, self.compute_dtype))
        logits = ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")
        return logits[..., 0], logits[..., 1]


def mask_logits(logits, p_mask):
    """The original's `x * (1 - p) - 1e30 * p` (p_mask 1 = not a valid answer position)."""
    p_mask = ops.cast(p_mask, "float32")
    return ops.cast(logits, "float32") * (1.0 - p_mask) - MASK_NEGATIVE * p_mask


@keras.saving.register_keras_serializable(package="albert_tf")
class SquadV2Head(layers.ConfiguredLayer):
    """SQuAD v2's XLNet-style head: start, end conditioned on the start, answerability.

    Sub-layers (TF1 scopes in brackets):
      start_dense    [start_logits/dense]     H -> 1
      end_dense_0    [end_logits/dense_0]     2H -> H, tanh, on concat(h_t, h_start)
      end_layer_norm [end_logits/LayerNorm]   epsilon 1e-12
      end_dense_1    [end_logits/dense_1]     H -> 1
      answer_dense_0 [answer_class/dense_0]   2H -> H, tanh, on
                                              concat(sum_t softmax(start)_t h_t, h_CLS)
      answer_dense_1 [answer_class/dense_1]   H -> 1, no bias (after dropout)

    Call: `sequence` [B, S, H], `p_mask` [B, S] (1 = position that cannot be an
    answer), optionally `start_positions` int [B] (teacher forcing, as the
    original in training). Returns float32 tensors:
      `start_log_probs` [B, S], `cls_logits` [B], and
      with start_positions: `end_log_probs` [B, S] (end given the gold start);
      without: the beam of the original's inference,
        `start_top_log_probs` / `start_top_index` [B, start_n_top],
        `end_top_log_probs` / `end_top_index` [B, start_n_top * end_n_top]
        (row-major: entry i * end_n_top + j is the j-th end for the i-th start).
    """

    CONFIG = ("hidden_size", "initializer_range", "start_n_top", "end_n_top",
              "dropout_rate")

    def __init__(self, hidden_size, initializer_range, start_n_top=5, end_n_top=5,
                 dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.configure(locals())
        policy = self.dtype_policy
        self.start_dense = layers.dense(1, initializer_range, "start_dense", dtype=policy)
        self.end_dense_0 = layers.dense(hidden_size, initializer_range, "end_dense_0",
                                        activation="tanh", dtype=policy)
        self.end_layer_norm = layers.layer_norm("end_layer_norm")
        self.end_dense_1 = layers.dense(1, initializer_range, "end_dense_1", dtype=policy)
        self.answer_dense_0 = layers.dense(hidden_size, initializer_range, "answer_dense_0",
                                           activation="tanh", dtype=policy)
        self.answer_dense_1 = keras.layers.Dense(
            1, use_bias=False, name="answer_dense_1", dtype=policy,
            kernel_initializer=layers.kernel_initializer(initializer_range))
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=policy)

    def build(self, input_shape=None):
        h = self.hidden_size
        self.start_dense.build((None, None, h))
        self.end_dense_0.build((None, None, 2 * h))
        self.end_layer_norm.build((None, None, h))
        self.end_dense_1.build((None, None, h))
        self.answer_dense_0.build((None, 2 * h))
        self.answer_dense_1.build((None, h))
        self.built = True

    def _end_log_probs(self, sequence, start_features, p_mask):
        """sequence [B, S, H], start_features [B, K, H] -> end log-probs [B, K, S]."""
        seq_len = ops.shape(sequence)[1]
        num_starts = ops.shape(start_features)[1]
        tiled_h = ops.repeat(sequence[:, None], num_starts, axis=1)            # [B, K, S, H]
        tiled_start = ops.repeat(start_features[:, :, None], seq_len, axis=2)  # [B, K, S, H]
        hidden = self.end_dense_0(ops.concatenate([tiled_h, tiled_start], axis=-1))
        hidden = self.end_layer_norm(ops.cast(hidden, "float32"))
        logits = ops.squeeze(ops.cast(self.end_dense_1(ops.cast(hidden, self.compute_dtype)),
                                      "float32"), -1)
        return ops.log_softmax(mask_logits(logits, p_mask[:, None]), axis=-1)

    def call(self, sequence, p_mask, start_positions=None, training=False):
        sequence = ops.cast(sequence, self.compute_dtype)
        p_mask = ops.cast(p_mask, "float32")
        start_logits = ops.squeeze(ops.cast(self.start_dense(sequence), "float32"), -1)
        start_masked = mask_logits(start_logits, p_mask)
        start_log_probs = ops.log_softmax(start_masked, axis=-1)
        outputs = {"start_log_probs": start_log_probs}
        if start_positions is not None:
            positions = ops.reshape(ops.cast(start_positions, "int32"), (-1, 1))
            start_features = ops.take_along_axis(sequence, positions[:, :, None], axis=1)
            outputs["end_log_probs"] = self._end_log_probs(sequence, start_features, p_mask)[:, 0]
        else:
            top_log_probs, top_index = ops.top_k(start_log_probs, k=self.start_n_top)
            start_features = ops.take_along_axis(sequence, top_index[:, :, None], axis=1)
            end_log_probs = self._end_log_probs(sequence, start_features, p_mask)
            end_top_log_probs, end_top_index = ops.top_k(end_log_probs, k=self.end_n_top)
            flat = (-1, self.start_n_top * self.end_n_top)
            outputs.update(start_top_log_probs=top_log_probs,
                           start_top_index=ops.cast(top_index, "int32"),
                           end_top_log_probs=ops.reshape(end_top_log_probs, flat),
                           end_top_index=ops.reshape(ops.cast(end_top_index, "int32"), flat))
        start_probs = ops.cast(ops.softmax(start_masked, axis=-1), self.compute_dtype)
        start_feature = ops.einsum("bs,bsh->bh", start_probs, sequence)
        answer = self.answer_dense_0(ops.concatenate([start_feature, sequence[:, 0]], axis=-1))
        answer = self.dropout(answer, training=training)
        outputs["cls_logits"] = ops.squeeze(ops.cast(self.answer_dense_1(answer), "float32"), -1)
        return outputs
