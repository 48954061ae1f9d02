"""Building blocks of the ALBERT encoder, with the original's numerics.

Shapes use B = batch, S = sequence length, E = embedding size, H = hidden size,
N = attention heads, D = H / N, I = intermediate size, V = vocabulary size.

Kernels are kept 2-D exactly as the TF1 checkpoints store them ([H, N*D] for
the Q/K/V projections, [N*D, H] for the attention output), so checkpoint
conversion is a pure rename. Under a mixed-precision policy the matmuls run in
the compute dtype while LayerNorm and the attention softmax run in float32.
"""
from __future__ import annotations

import contextlib
import math

import keras
import tensorflow as tf
from keras import ops

from albert_tf.kernels import fused_ops

LAYER_NORM_EPSILON = 1e-12  # tf.contrib.layers.layer_norm's epsilon, used by the original
ATTENTION_MASK_ADDER = -10000.0  # added to the scores of padded key positions


@tf.custom_gradient
def _gelu_tanh_float32(x):
    """tanh-GELU of a float32 tensor, as x * sigmoid(2z), with a hand-written derivative.

    0.5 (1 + tanh(z)) = sigmoid(2z) with z = c (x + a x^3), so GELU(x) = x s where
    s = sigmoid(x (2c + 2ca x^2)), and
      d/dx = s + x s (1 - s) (2c + 6ca x^2)
    whose s (1 - s) factor is TF's fused SigmoidGrad kernel. 13 elementwise passes
    over the [B*S, I] activations for forward and backward instead of autodiff's
    ~25 (or 17 with the tanh form), and closer to the float64 formula.
    """
    x2 = x * x
    s = fused_ops.gelu_sigmoid(x, x2)

    def grad(dy):
        return dy * s + tf.raw_ops.SigmoidGrad(y=s, dy=dy * x * fused_ops.gelu_slope(x2))

    return x * s, grad


@keras.saving.register_keras_serializable(package="albert_tf")
def gelu_tanh(x):
    """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

    The original's `gelu` (Hugging Face calls it `gelu_new`), not the exact erf form.
    Evaluated in float32 whatever the input dtype (bf16 elementwise math on CPU is
    both slower and coarser), and returned in the input dtype.
    """
    x = tf.convert_to_tensor(x)
    if x.dtype == tf.float32:
        return _gelu_tanh_float32(x)
    return tf.cast(_gelu_tanh_float32(tf.cast(x, tf.float32)), x.dtype)


def get_activation(name: str):
    """Maps an `albert_config.json` `hidden_act` to a callable."""
    table = {
        "gelu": gelu_tanh,
        "gelu_new": gelu_tanh,
        "relu": keras.activations.relu,
        "tanh": keras.activations.tanh,
        "linear": keras.activations.linear,
    }
    if name not in table:
        raise ValueError(f"unsupported activation {name!r}; choose one of {', '.join(table)}")
    return table[name]


def kernel_initializer(initializer_range: float):
    """Truncated normal (cut at 2 sigma) with stddev `initializer_range`, as the original."""
    return keras.initializers.TruncatedNormal(stddev=initializer_range)


@tf.custom_gradient
def _layer_norm_float32(x, gamma, beta, epsilon):
    """LayerNorm over the last axis of a float32 tensor, with a hand-written backward.

    y = (x - mean) * rsqrt(var + epsilon) * gamma + beta, as tf.contrib.layers.layer_norm.
    Backward, with xhat the normalised input and g = dy * gamma:
      dx = rsqrt(var + eps) * (g - mean(g) - xhat * mean(g * xhat))
    which is a few passes instead of the dozen that autodiff of the moments emits.
    """
    normalized, inv_std = fused_ops.layer_norm_moments(x, epsilon)

    def grad(dy):
        reduce_axes = list(range(len(dy.shape) - 1))
        dx = fused_ops.layer_norm_input_grad(dy * gamma, normalized, inv_std)
        return (dx, tf.reduce_sum(dy * normalized, axis=reduce_axes),
                tf.reduce_sum(dy, axis=reduce_axes), None)

    return normalized * gamma + beta, grad


class ConfiguredLayer(keras.layers.Layer):
    """A layer whose config (`get_config`) is its base's plus the attributes named in
    `CONFIG`, each the `__init__` argument of the same name (so `from_config` rebuilds it)."""

    CONFIG: tuple = ()

    def configure(self, arguments) -> None:
        """Sets the `CONFIG` attributes found in `arguments`, an `__init__`'s `locals()` (a
        subclass's own arguments are set by its own `__init__`)."""
        for name in self.CONFIG:
            if name in arguments:
                setattr(self, name, arguments[name])

    def get_config(self):
        return {**super().get_config(), **{name: getattr(self, name) for name in self.CONFIG}}


# The top-level name scope of the attention's scale and mask adder (see
# AttentionSublayer.call). Its name is absolute, so the ops keep it in whichever graph they
# are built: a loop body's (`modeling.early_exit`) takes another (`scores_scope_for_loop`),
# or its ops would share their names with the enclosing graph's, which an ONNX file cannot.
_scores_scope = ["zz_attention_scores/"]


@contextlib.contextmanager
def scores_scope_for_loop():
    """Builds the attention layers called inside with their own score-scope name."""
    _scores_scope.append(f"zz_attention_scores_loop_{len(_scores_scope)}/")
    try:
        yield
    finally:
        _scores_scope.pop()


@keras.saving.register_keras_serializable(package="albert_tf")
class LayerNorm(keras.layers.LayerNormalization):
    """keras LayerNormalization (same `gamma`/`beta` variables) over the last axis,
    computed in float32 with `_layer_norm_float32`'s backward; in SavedModels that ask
    for it, as `fused_ops.layer_norm_as_batch_norm` (see
    `fused_ops.exporting_layer_norms_as`)."""

    def call(self, inputs):
        x = tf.cast(inputs, tf.float32)
        gamma = tf.cast(self.gamma, tf.float32)
        beta = tf.cast(self.beta, tf.float32)
        if fused_ops.export_layer_norm_as_batch_norm(x):  # oneDNN's kernel where served
            return fused_ops.layer_norm_as_batch_norm(x, gamma, beta, self.epsilon)
        return _layer_norm_float32(x, gamma, beta, tf.constant(self.epsilon, tf.float32))

    def add_and_normalize(self, x, residual, bias=None, inference: bool = False):
        """`self(float32(x) + float32(residual + bias))` for [N, H] inputs of any float
        dtype; `bias` [H] is optional (a Dense layer's bias, not yet added).

        In a traced graph this is one XLA kernel each way (`fused_ops.add_layer_norm`,
        see `fused_ops.use_fused`); otherwise the plain ops. For float32 `inference`
        on oneDNN, the sum is plain ops (grappler folds bias and residual add into the
        product that made `residual`) and the LayerNorm oneDNN's kernel
        (`fused_ops.onednn_layer_norm`).
        """
        if fused_ops.use_fused():
            gamma = tf.cast(tf.convert_to_tensor(self.gamma), tf.float32)
            beta = tf.cast(tf.convert_to_tensor(self.beta), tf.float32)
            if (inference and x.dtype == residual.dtype == tf.float32
                    and fused_ops.onednn_layer_norm_available()):
                if bias is not None:
                    residual = tf.nn.bias_add(residual, bias)
                return fused_ops.onednn_layer_norm(residual + x, gamma, beta, self.epsilon)
            if bias is None:
                bias = tf.zeros([ops.shape(residual)[-1]], residual.dtype)
            return fused_ops.add_layer_norm(x, residual, bias, gamma, beta, self.epsilon)
        if bias is not None:
            residual = tf.nn.bias_add(residual, bias)
        return self(ops.cast(x, "float32") + ops.cast(residual, "float32"))


def layer_norm(name: str) -> LayerNorm:
    """LayerNorm over the last axis with epsilon 1e-12, always computed in float32."""
    return LayerNorm(axis=-1, epsilon=LAYER_NORM_EPSILON, name=name, dtype="float32")


def dense(units: int, initializer_range: float, name: str, activation=None,
          dtype=None) -> keras.layers.Dense:
    """A Dense layer with the original's initialisation (truncated normal kernel, zero bias).

    `dtype` is the parent's dtype policy (None = the global policy).
    """
    return keras.layers.Dense(units, activation=activation, name=name,
                              kernel_initializer=kernel_initializer(initializer_range),
                              bias_initializer="zeros", dtype=dtype)


def _as_float(grad, dtype):
    """A weight gradient (dense or IndexedSlices, any float dtype) as a dense `dtype`."""
    return tf.cast(tf.convert_to_tensor(grad), dtype)


@tf.custom_gradient
def _final_use(cast_value, carry):
    """Forward: the weight already cast to the compute dtype. Backward: the gradient
    of this use, in the variable's dtype, goes to `carry`."""

    def grad(d_use):
        return None, _as_float(d_use, carry.dtype)

    return tf.identity(cast_value), grad


@tf.custom_gradient
def _chained_use(cast_value, carry):
    """Forward: (the weight cast to the compute dtype, `carry` passed on to the next
    use). Backward: `carry` gets this use's gradient plus the later uses' running sum,
    in the variable's dtype."""

    def grad(d_use, d_later):
        return None, fused_ops.accumulate(_as_float(d_later, carry.dtype), d_use)

    return (tf.identity(cast_value), tf.identity(carry)), grad


class ResidentWeights:
    """The kernels and biases of a block's Dense layers, cast to the compute dtype once
    per forward pass and handed to each of the block's `uses` applications in turn
    (`next_use()`, in forward order).

    ALBERT applies one block L times. Keras would cast its float32 weights at every
    application under a mixed policy (12 casts of every shared weight per pass for
    ALBERT-base), and autodiff would keep the L per-application weight gradients
    until it sums them at the variable (12 x 28 MB for ALBERT-base in float32, held
    across the whole backward pass). With `chained=True` (training) the applications
    are chained: in the backward pass each application's gradient is added, in the
    variable's dtype, to the running sum of the later ones as soon as it exists, so
    one partial sum per weight is alive. Otherwise every application's gradient goes
    straight to the variable. Built where no autocast scope is active (the encoder),
    from the raw variables.
    """

    def __init__(self, dense_layers, dtype, uses: int = 1, chained: bool = True):
        if uses < 1:
            raise ValueError(f"uses must be >= 1, got {uses}")
        self._cast = {}
        self._carry = {}
        for layer in dense_layers:
            for attr in ("kernel", "bias"):
                value = tf.convert_to_tensor(getattr(layer, attr).value)
                self._cast[(layer.name, attr)] = tf.stop_gradient(tf.cast(value, dtype))
                self._carry[(layer.name, attr)] = value
        self._remaining = uses
        self._chained = chained

    def next_use(self) -> "WeightUse":
        """The weights for the block's next application."""
        if self._remaining == 0:
            raise RuntimeError("more applications than the `uses` this was built for")
        self._remaining -= 1
        values = {}
        for key, cast_value in self._cast.items():
            if self._remaining == 0 or not self._chained:
                values[key] = _final_use(cast_value, self._carry[key])
            else:
                values[key], self._carry[key] = _chained_use(cast_value, self._carry[key])
        return WeightUse(values)


class WeightUse:
    """One application's weights: `get(layer_name, "kernel" | "bias")`. `tensors()` and
    `with_tensors()` flatten and rebuild it (to pass it through `tf.recompute_grad`)."""

    def __init__(self, values):
        self._values = dict(values)

    def get(self, layer_name: str, attr: str):
        return self._values[(layer_name, attr)]

    def tensors(self) -> list:
        return list(self._values.values())

    def with_tensors(self, tensors) -> "WeightUse":
        return WeightUse(zip(self._values.keys(), tensors))


def dense_weights(layer: keras.layers.Dense, resident: "WeightUse | None",
                  scale: "float | None" = None):
    """(kernel, bias) of `layer` in the compute dtype: `resident`'s pre-cast copies, or
    the variables (autocast by the caller's scope); both multiplied by `scale` if given."""
    if resident is None:
        kernel, bias = layer.kernel, layer.bias
    else:
        kernel, bias = resident.get(layer.name, "kernel"), resident.get(layer.name, "bias")
    if scale is not None:
        kernel = kernel * ops.cast(scale, kernel.dtype)
        bias = bias * ops.cast(scale, bias.dtype)
    return kernel, bias


def apply_dense(layer: keras.layers.Dense, x, resident: "WeightUse | None",
                activation: bool = True, scale: "float | None" = None):
    """`layer(x)` for a 2-D `x`, as MatMul + BiasAdd (+ activation), with `resident`'s
    pre-cast weights when given.

    Spelled out rather than calling `layer` (whose bias add is a broadcasting AddV2)
    so that every application runs the same ops with or without resident weights:
    the chained and unchained gradients then agree to rounding of the same sums.
    `activation=False` stops after the bias add. `scale` multiplies kernel and bias
    (not the [B*S, units] output) and implies no activation.
    """
    kernel, bias = dense_weights(layer, resident, scale)
    if scale is not None:
        activation = False
    y = tf.nn.bias_add(tf.matmul(x, kernel), bias)
    return layer.activation(y) if activation else y


def split_bias_products(dtype) -> bool:
    """Whether the attention projections, and the FFN's first product when its
    activation is the tanh GELU, run as plain MatMuls with their bias (and GELU)
    added by `albert_tf.kernels.fused_ops` kernels: bf16 in a traced graph
    (`fused_ops.use_fused`). At inference the Q/K/V bias kernel also moves the
    heads first (`fused_ops.bias_to_heads`); in training the plain bias kernel
    (`fused_ops.bias_add`) keeps oneDNN's transposes, which measured faster there.

    Why: grappler fuses MatMul + BiasAdd (+ GELU) into one oneDNN op that runs the
    inner-product primitive on the weights' plain layout, which in bf16 is an
    AVX-512 GEMM, while a plain MatMul runs oneDNN's matmul primitive on AMX tiles
    ([4096, 768] x [768, 768]: 6.2 vs 2.4 ms inside the encoder here). In float32
    both are the same GEMM and the fused op saves the bias pass, so it stays.
    Numerics: the product is rounded to bf16 before the bias is added in float32,
    where the fused op adds the bias before rounding; both are bf16 roundings of
    the same sum, and the errors against float32 measured alike.
    """
    return tf.as_dtype(dtype) == tf.bfloat16 and fused_ops.use_fused()


def ffn_product_in_xla(dtype) -> bool:
    """Whether the FFN's first product, bias and tanh GELU run as one XLA kernel
    (`fused_ops.dense_gelu`) at inference: float32, in a traced graph
    (`fused_ops.use_fused`), where oneDNN's GEMMs are its AVX2 kernels
    (`fused_ops.avx2_gemms`). Elsewhere grappler's fused oneDNN op is faster.

    Measured on an AMD EPYC Zen 4 with oneDNN and XLA capped at AVX2, ALBERT-base
    float32 in process (bench/ab.py, paired): batch 1 195 -> 161 ms, batch 32 2% less
    time; the same change without the cap cost 6% (batch 1) and 3% (batch 32).
    """
    return (tf.as_dtype(dtype) == tf.float32 and fused_ops.use_fused()
            and fused_ops.avx2_gemms())


def add_output_and_normalize(output_dense, dropout, layer_norm, x, y, resident, training):
    """A post-LN sub-layer's end: layer_norm(x + dropout(output_dense(y))), float32 [N, H].

    x: the sub-layer input [N, H]; y: the input of `output_dense` [N, K]. In a
    traced graph the bias add joins the fused add + LayerNorm kernel, unless
    dropout is active (it must see the biased output, so the bias is added first);
    at float32 inference on oneDNN, see `LayerNorm.add_and_normalize`.
    """
    if fused_ops.use_fused() and (dropout.rate == 0 or not training):
        kernel, bias = dense_weights(output_dense, resident)
        return layer_norm.add_and_normalize(x, tf.matmul(y, kernel), bias=bias,
                                            inference=not training)
    output = dropout(apply_dense(output_dense, y, resident), training=training)
    return layer_norm.add_and_normalize(x, output)


@keras.saving.register_keras_serializable(package="albert_tf")
class FactorizedEmbedding(ConfiguredLayer):
    """Word (V x E) + token-type (T x E) + position (P x E) embeddings, LayerNorm, dropout.

    Call: `input_ids`, `segment_ids` int [B, S] -> [B, S, E].
    `embedding_table` is the [V, E] word matrix that the masked-LM decoder reuses.
    """

    CONFIG = ("vocab_size", "embedding_size", "max_position_embeddings", "type_vocab_size",
              "initializer_range", "dropout_rate")

    def __init__(self, vocab_size, embedding_size, max_position_embeddings, type_vocab_size,
                 initializer_range, dropout_rate, **kwargs):
        # No autocast: rows are gathered from the float32 tables and summed in float32
        # (casting would convert the whole [V, E] table on every call), and only the
        # normalised result is cast to the compute dtype.
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        self.configure(locals())
        self.layer_norm = layer_norm("LayerNorm")
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        init = kernel_initializer(self.initializer_range)
        self.word_embeddings = self.add_weight(
            name="word_embeddings", shape=(self.vocab_size, self.embedding_size),
            initializer=init)
        self.token_type_embeddings = self.add_weight(
            name="token_type_embeddings", shape=(self.type_vocab_size, self.embedding_size),
            initializer=init)
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_position_embeddings, self.embedding_size), initializer=init)
        self.layer_norm.build((None, None, self.embedding_size))
        self.built = True

    @property
    def embedding_table(self):
        return self.word_embeddings

    def call(self, input_ids, segment_ids, training=False):
        seq_length = ops.shape(input_ids)[1]
        if isinstance(seq_length, int) and seq_length > self.max_position_embeddings:
            raise ValueError(f"sequence length {seq_length} exceeds max_position_embeddings "
                             f"({self.max_position_embeddings}) of this model")
        word = ops.take(self.word_embeddings, input_ids, axis=0)
        token_type = ops.take(self.token_type_embeddings, segment_ids, axis=0)
        position = ops.expand_dims(self.position_embeddings[:seq_length], 0)
        normed = self.layer_norm(word + token_type + position)
        return self.dropout(ops.cast(normed, self.compute_dtype), training=training)



@keras.saving.register_keras_serializable(package="albert_tf")
class AttentionSublayer(ConfiguredLayer):
    """Post-LN multi-head self-attention: LayerNorm(x + dropout(W_o attention(x))).

    Call: `x` [B, S, H], `input_mask` int [B, S] (1 real token, 0 padding) -> [B, S, H].
    Padded keys get -10000 added to their scores, as the original. The mask is
    passed as integers so Keras' autocasting cannot round the adder to bf16.
    """

    CONFIG = ("hidden_size", "num_attention_heads", "initializer_range", "dropout_rate",
              "attention_dropout_rate")

    def __init__(self, hidden_size, num_attention_heads, initializer_range, dropout_rate,
                 attention_dropout_rate, **kwargs):
        super().__init__(**kwargs)
        self.configure(locals())
        self.head_size = hidden_size // num_attention_heads
        self.query = dense(hidden_size, initializer_range, "query", dtype=self.dtype_policy)
        self.key = dense(hidden_size, initializer_range, "key", dtype=self.dtype_policy)
        self.value = dense(hidden_size, initializer_range, "value", dtype=self.dtype_policy)
        self.output_dense = dense(hidden_size, initializer_range, "output_dense",
                                  dtype=self.dtype_policy)
        self.layer_norm = layer_norm("LayerNorm")
        self.attention_dropout = keras.layers.Dropout(attention_dropout_rate, dtype=self.dtype_policy)
        self.output_dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape):
        shape = (None, None, self.hidden_size)
        for layer in (self.query, self.key, self.value, self.output_dense, self.layer_norm):
            layer.build(shape)
        self.built = True

    def resident_weights(self, dtype, uses: int = 1, chained: bool = True) -> ResidentWeights:
        return ResidentWeights((self.query, self.key, self.value, self.output_dense), dtype,
                               uses, chained)

    def call(self, x, input_mask, training=False, resident=None):
        batch, seq = ops.shape(x)[0], ops.shape(x)[1]
        # Dense layers see [B*S, H] matrices (as the original's reshape_to_matrix), so
        # grappler fuses each MatMul with its bias add; reshapes of contiguous
        # tensors are free.
        x_matrix = ops.reshape(x, (-1, self.hidden_size))
        heads = (batch, seq, self.num_attention_heads, self.head_size)
        scale = 1.0 / math.sqrt(self.head_size)
        # The original scales the [B, N, S, S] scores by 1/sqrt(D), then adds the mask.
        # float32 does the same, with q, k, v transposed heads first, and oneDNN runs
        # product, scale and mask add as one op (grappler's _MklFusedBatchMatMulV2)
        # if the product comes first in the Mul and the Mul first in the add: grappler's
        # CSE sorts a commutative op's inputs by name, so the scale and the mask adder
        # (shared by every application after CSE) are made in a top-level scope named
        # to sort after the model's ops (otherwise 5 of ALBERT-base's 12 layers paid a
        # scale and an add pass). Scaling the weights instead cost, at float32
        # inference (no resident copies), a Mul of the query kernel per application,
        # each read from its variable anew, so grappler could not merge them.
        # Other dtypes scale the query kernel and bias instead (the same product, exact
        # when 1/sqrt(D) is a power of two, as in every published model but xlarge):
        # their scores come out of the product in bf16/f16 and are cast to float32
        # before the mask add, so there is no op to fuse the scale into.
        scale_scores = tf.as_dtype(self.compute_dtype) == tf.float32
        query_scale = None if scale_scores else scale
        split = split_bias_products(self.compute_dtype)
        heads_first = scale_scores or (split and not training)  # q, k, v as [B, N, S, D]
        if split:  # plain MatMuls, biases in fused_ops kernels; see split_bias_products
            weights = [dense_weights(layer, resident, layer_scale) for layer, layer_scale
                       in ((self.query, query_scale), (self.key, None), (self.value, None))]
            products = [tf.matmul(x_matrix, kernel) for kernel, _ in weights]
            if heads_first:  # one kernel for the bias adds and the head transposes
                q, k, v = fused_ops.bias_to_heads(
                    *[ops.reshape(p, heads) for p in products],
                    *[ops.reshape(bias, heads[2:]) for _, bias in weights])
            else:  # training: oneDNN's head transposes measured faster there
                q, k, v = [ops.reshape(fused_ops.bias_add(p, bias), heads)
                           for p, (_, bias) in zip(products, weights)]
        else:
            q = ops.reshape(apply_dense(self.query, x_matrix, resident, scale=query_scale),
                            heads)
            k = ops.reshape(apply_dense(self.key, x_matrix, resident), heads)
            v = ops.reshape(apply_dense(self.value, x_matrix, resident), heads)
            if heads_first:
                q, k, v = [tf.transpose(t, fused_ops.HEADS_FIRST) for t in (q, k, v)]
        if heads_first:
            scores = tf.matmul(q, k, transpose_b=True)
        else:
            scores = ops.einsum("bfnd,btnd->bnft", q, k)
        with tf.name_scope(_scores_scope[-1]):  # sorts last; see above
            # [B, 1, 1, T] by expand_dims: LiteRT has no strided slice that adds axes.
            mask = tf.expand_dims(tf.expand_dims(ops.cast(input_mask, "float32"), 1), 1)
            mask_adder = (1.0 - mask) * ATTENTION_MASK_ADDER
            scale_value = tf.constant(scale, tf.float32, name="scale")
        if scale_scores:
            scores = scores * scale_value + mask_adder  # fused into the product
        else:
            # Softmax in float32 whatever the compute dtype (bf16 scores lose the adder).
            scores = ops.cast(scores, "float32") + mask_adder
        probs = ops.softmax(scores, axis=-1)
        probs = self.attention_dropout(ops.cast(probs, self.compute_dtype), training=training)
        if heads_first:
            context = tf.transpose(tf.matmul(probs, v), fused_ops.HEADS_FIRST)
        else:
            context = ops.einsum("bnft,btnd->bfnd", probs, v)
        # x_matrix's own shape ([N, H], H static), not (-1, H): where the rows are
        # unknown when traced (SavedModels), grappler then sees that the residual add
        # below needs no broadcast and fuses it into the output product.
        context = tf.reshape(context, tf.shape(x_matrix))
        normed = add_output_and_normalize(self.output_dense, self.output_dropout,
                                          self.layer_norm, x_matrix, context, resident,
                                          training)
        return ops.reshape(normed, (batch, seq, self.hidden_size))



@keras.saving.register_keras_serializable(package="albert_tf")
class FeedForwardSublayer(ConfiguredLayer):
    """Post-LN feed-forward: LayerNorm(x + dropout(W_2 act(W_1 x + b_1) + b_2)).

    Call: `x` [B, S, H] -> [B, S, H]; the intermediate width is I.
    """

    CONFIG = ("hidden_size", "intermediate_size", "hidden_act", "initializer_range",
              "dropout_rate")

    def __init__(self, hidden_size, intermediate_size, hidden_act, initializer_range,
                 dropout_rate, **kwargs):
        super().__init__(**kwargs)
        self.configure(locals())
        self.intermediate = dense(intermediate_size, initializer_range, "intermediate",
                                  activation=get_activation(hidden_act), dtype=self.dtype_policy)
        self.output_dense = dense(hidden_size, initializer_range, "output_dense",
                                  dtype=self.dtype_policy)
        self.layer_norm = layer_norm("LayerNorm_1")
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape):
        self.intermediate.build((None, None, self.hidden_size))
        self.output_dense.build((None, None, self.intermediate_size))
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def resident_weights(self, dtype, uses: int = 1, chained: bool = True) -> ResidentWeights:
        return ResidentWeights((self.intermediate, self.output_dense), dtype, uses, chained)

    def call(self, x, training=False, resident=None):
        x_matrix = ops.reshape(x, (-1, self.hidden_size))  # [B*S, H]: fused MatMul+bias
        gelu = self.intermediate.activation is gelu_tanh
        if gelu and not training and ffn_product_in_xla(self.compute_dtype):
            hidden = fused_ops.dense_gelu(x_matrix, *dense_weights(self.intermediate, resident))
        elif gelu and (split_bias_products(self.compute_dtype)
                       or (training and fused_ops.use_fused())):
            # A plain MatMul, then bias + GELU in one kernel (its backward keeps
            # only the product; for bf16 see split_bias_products).
            kernel, bias = dense_weights(self.intermediate, resident)
            hidden = fused_ops.bias_gelu(tf.matmul(x_matrix, kernel), bias)
        elif gelu and not training:
            # Inference: MatMul + BiasAdd + tf.nn.gelu(approximate=True) is a pattern
            # grappler fuses into one oneDNN op (the tanh GELU evaluated on the float32
            # accumulator). Training keeps gelu_tanh, whose backward needs the input.
            hidden = tf.nn.gelu(apply_dense(self.intermediate, x_matrix, resident,
                                            activation=False), approximate=True)
        else:
            hidden = apply_dense(self.intermediate, x_matrix, resident)
        normed = add_output_and_normalize(self.output_dense, self.dropout, self.layer_norm,
                                          x_matrix, hidden, resident, training)
        return ops.reshape(normed, ops.shape(x))

