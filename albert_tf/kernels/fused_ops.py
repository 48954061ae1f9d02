"""XLA-fused elementwise kernels of the encoder: bias add + GELU, bias add +
residual add + LayerNorm, and, for bf16 (see `layers.split_bias_products`), the
Q/K/V bias adds (with the head transposes at inference), each with a
hand-written backward; for float32 inference on oneDNN, the LayerNorm in
oneDNN's own kernel (`onednn_layer_norm`); and, for float32 inference where
oneDNN's GEMMs are AVX2 (`avx2_gemms`), the FFN's first product with its bias and
GELU (`dense_gelu`).

Why: on CPU, TensorFlow runs every elementwise op as its own pass over memory,
and the glue between ALBERT's matmuls (the tanh GELU over [B*S, I], the
LayerNorms, and the casts around them under mixed precision) cost as much as
the matmuls themselves. Each function
here compiles one small XLA cluster for the forward and one for the backward
(`tf.function(jit_compile=True)`), so a chain of ~15 passes becomes one read
of the inputs and one write of the outputs, while the matmuls stay on
oneDNN (whole-model XLA is 2-3x slower on CPU; docs/performance.md). The
attention softmax stays on oneDNN's softmax kernel: an XLA version was no
faster (float32) or slower (bf16), forward and backward.

Numerics: everything is computed in float32 from the inputs as given (bf16
or float32), with the same formulas as the unfused code in `albert_tf.modeling.layers`
(bf16 inference rounds the projections before their bias add, see
`layers.split_bias_products`);
the backward recomputes what it needs from the inputs instead of saving
float32 intermediates, which also keeps 3-6x less activation memory. Outputs
take the dtype of the inputs they stand for. Used only in traced graphs that
are not being exported (`use_fused()`): eager calls and SavedModels run the
plain ops, which compute the same values, except that SavedModels exported on
oneDNN spell their LayerNorms so that grappler runs them in oneDNN's kernel
where they are served (`layer_norm_as_batch_norm`).
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import threading

import tensorflow as tf

from albert_tf.kernels import onednn, precision, tf_internals

GELU_C = math.sqrt(2.0 / math.pi)
GELU_A = 0.044715


_portable = threading.local()  # set only inside `portable_graph`


@contextlib.contextmanager
def portable_graph(litert: bool = False):
    """Graphs traced within this block are traced as for a SavedModel: plain TensorFlow
    ops only, no XLA functions or oneDNN-internal ops (for converters such as tf2onnx,
    which trace a `tf.function` outside any save). `litert`: also spell loops as LiteRT's
    converter lowers them (`tracing_for_litert`)."""
    previous = (getattr(_portable, "active", False), getattr(_portable, "litert", False))
    _portable.active, _portable.litert = True, litert or previous[1]
    try:
        yield
    finally:
        _portable.active, _portable.litert = previous


def tracing_for_litert() -> bool:
    """Whether the graph being traced is for the LiteRT converter, which lowers a loop
    that stacks per-step outputs (`tf.scan`, TensorArrays) only when each step's output
    has a static shape, never with a free batch size: loops accumulate by concatenation
    there instead."""
    return getattr(_portable, "litert", False)


def _trace_context():
    """(saving, in_xla) for the graph being traced: traced for a SavedModel (or within
    `portable_graph`); compiled whole by XLA (`jit_compile=True`, TPUs). Only TF's
    internal markers show either while tracing (read in `tf_internals`, which takes
    both as True where they are missing: the plain ops then run everywhere)."""
    return (tf_internals.tracing_for_saved_model() or getattr(_portable, "active", False),
            tf_internals.compiled_by_xla())


def use_fused() -> bool:
    """True where these kernels pay off and are safe: in a graph being traced (a
    `tf.function`: training steps, `predict`, in-process serving), except
      * a graph traced for a SavedModel: exports stay plain TensorFlow because TF
        Serving runs no XLA by default (`--xla_cpu_compilation_enabled`);
      * a graph that XLA compiles whole (`jit_compile=True`, TPUs): XLA fuses the
        plain ops itself, and faster (ALBERT-base fp32 step 3.97 vs 4.40 s here).
    Eager calls would compile per shape."""
    if tf.executing_eagerly():
        return False
    saving, in_xla = _trace_context()
    return not saving and not in_xla


# ----------------------------------------------------------------------------- GELU


def gelu_sigmoid(x, x2):
    """sigmoid(2z), z = sqrt(2/pi) (x + 0.044715 x^3), given x2 = x * x: the
    0.5 (1 + tanh(z)) factor of the tanh GELU, so GELU(x) = x * gelu_sigmoid."""
    return tf.math.sigmoid(x * ((2.0 * GELU_C) + (2.0 * GELU_C * GELU_A) * x2))


def gelu_slope(x2):
    """2c + 6ca x^2: with s = gelu_sigmoid, d/dx GELU(x) = s + x s (1 - s) gelu_slope."""
    return (6.0 * GELU_C * GELU_A) * x2 + (2.0 * GELU_C)


def _plus_bias(h, bias):
    """h + bias, both cast to float32 first (the sum every bias kernel here forms)."""
    return tf.cast(h, tf.float32) + tf.cast(bias, tf.float32)


@tf.function(jit_compile=True, autograph=False)
def _bias_gelu_forward(h, bias):
    x = _plus_bias(h, bias)
    return tf.cast(x * gelu_sigmoid(x, x * x), h.dtype)


@tf.function(jit_compile=True, autograph=False)
def _bias_gelu_backward(h, bias, dy):
    x = _plus_bias(h, bias)
    x2 = x * x
    s = gelu_sigmoid(x, x2)
    dx = tf.cast(dy, tf.float32) * (s + s * (1.0 - s) * x * gelu_slope(x2))
    return tf.cast(dx, h.dtype), tf.cast(tf.reduce_sum(dx, axis=0), bias.dtype)


@tf.custom_gradient
def bias_gelu(h, bias):
    """tanh-GELU(h + bias) for h [N, I] and bias [I] of any float dtypes, evaluated in
    float32 and returned in h's dtype: a Dense layer's bias add and activation in
    one pass. The backward keeps only `h` and returns the bias gradient summed in
    float32 (in place of a separate BiasAddGrad pass)."""

    def grad(dy):
        return _bias_gelu_backward(h, bias, dy)

    return _bias_gelu_forward(h, bias), grad


@tf.function(jit_compile=True, autograph=False)
def _dense_gelu(x, kernel, bias):
    z = _plus_bias(tf.matmul(x, kernel), bias)
    return tf.cast(z * gelu_sigmoid(z, z * z), x.dtype)


def dense_gelu(x, kernel, bias):
    """tanh-GELU(x @ kernel + bias) for x [N, H], kernel [H, I], bias [I] as one XLA
    kernel, product included: the inference spelling of the FFN's first product where
    oneDNN runs AVX2 GEMMs (see `avx2_gemms`). Bias and GELU in float32, as
    `bias_gelu`; differentiable (autodiff of the compiled function)."""
    return _dense_gelu(*[tf.convert_to_tensor(t) for t in (x, kernel, bias)])


@functools.lru_cache(maxsize=None)
def _this_cpu():
    return precision.read_cpu_info()


def avx2_gemms(cpu=None, environ=None) -> bool:
    """Whether oneDNN's float32 GEMMs here are its AVX2 kernels: an x86 CPU without
    AVX-512 (no avx512f), or one capped below it by ONEDNN_MAX_CPU_ISA; False where
    oneDNN is off (`onednn.expected_on`: Eigen's GEMMs, not measured). `cpu`
    (`precision.CpuInfo`) and `environ` default to this machine's; unknown flags (no
    /proc/cpuinfo) and other architectures give False.

    Why it matters: oneDNN's AVX2 sgemm is slow for the FFN's first product at few
    tokens ([128, 768] x [768, 3072]: 6.7 ms, against 3.7 ms for XLA's dot on the same
    AVX2 instructions and 3.7 ms for oneDNN's AVX-512 kernel), and its GELU post-op
    costs 20% more at 4,096 tokens; with AVX-512 oneDNN's fused op is the faster one
    (docs/performance.md, "Per CPU")."""
    if cpu is None and environ is None:  # this process: what TensorFlow did decide
        on = _mkl_enabled()
    else:
        on = onednn.expected_on(cpu, environ)
    if not on:
        return False
    environ = os.environ if environ is None else environ
    cpu = _this_cpu() if cpu is None else cpu
    max_isa = environ.get("ONEDNN_MAX_CPU_ISA", "").strip().lower()
    if max_isa in precision.ONEDNN_ISAS_BELOW_AVX512:
        return True
    return cpu.is_x86 and bool(cpu.flags) and "avx512f" not in cpu.flags


# ------------------------------------------------------- attention heads

HEADS_FIRST = [0, 2, 1, 3]  # transpose permutation: [B, S, N, D] <-> [B, N, S, D]


@tf.function(jit_compile=True, autograph=False)
def _bias_to_heads_forward(q, k, v, q_bias, k_bias, v_bias):
    return [tf.transpose(tf.cast(_plus_bias(x, b), x.dtype), HEADS_FIRST)
            for x, b in ((q, q_bias), (k, k_bias), (v, v_bias))]


@tf.function(jit_compile=True, autograph=False)
def _bias_to_heads_backward(dq, dk, dv, bias_dtype):
    grads = [tf.transpose(d, HEADS_FIRST) for d in (dq, dk, dv)]
    return grads + [tf.cast(tf.reduce_sum(tf.cast(g, tf.float32), axis=[0, 1]), bias_dtype)
                    for g in grads]


@tf.custom_gradient
def bias_to_heads(q, k, v, q_bias, k_bias, v_bias):
    """(q + q_bias, k + k_bias, v + v_bias) moved from [B, S, N, D] to [B, N, S, D].

    q, k, v: the query/key/value projections without their biases, [B, S, N, D];
    biases: [N, D]. Each sum is formed in float32 and returned in its projection's
    dtype. One kernel in place of three bias adds and the three head transposes
    that the attention products need; its backward sums the bias gradients over B
    and S in float32 (returned in the biases' dtype)."""

    def grad(dq, dk, dv):
        return _bias_to_heads_backward(dq, dk, dv, q_bias.dtype)

    return _bias_to_heads_forward(q, k, v, q_bias, k_bias, v_bias), grad


@tf.function(jit_compile=True, autograph=False)
def _bias_add_forward(h, bias):
    return tf.cast(_plus_bias(h, bias), h.dtype)


@tf.function(jit_compile=True, autograph=False)
def _bias_add_backward(dy, bias_dtype):
    return dy, tf.cast(tf.reduce_sum(tf.cast(dy, tf.float32), axis=0), bias_dtype)


@tf.custom_gradient
def bias_add(h, bias):
    """h + bias for h [N, K] and bias [K], summed in float32 and returned in h's dtype:
    a Dense layer's bias add as its own kernel, so that grappler cannot fuse it into
    the product (see `layers.split_bias_products`). The backward passes dy through
    and sums the bias gradient in float32 (returned in the bias's dtype)."""

    def grad(dy):
        return _bias_add_backward(dy, bias.dtype)

    return _bias_add_forward(h, bias), grad


# ---------------------------------------------------------------- add + LayerNorm


def row_mean_by_product(x):
    """Mean over the last axis of a float32 [N, K] x, keepdims, as the product x @ ones[K, 1]
    divided by K: XLA's CPU row reductions ran at a third of the memory bandwidth here
    (1.56 ms for a [4096, 768] row sum against 0.81 ms as a product), and the
    kernels' LayerNorms spend most of their time in them. Sums in another order than
    a reduction; the LayerNorm's error against float64 measured the same."""
    return tf.matmul(x, tf.ones([x.shape[-1], 1], x.dtype)) / float(x.shape[-1])


def _row_mean(x):
    return tf.reduce_mean(x, axis=-1, keepdims=True)


def layer_norm_moments(z, epsilon, row_mean=_row_mean):
    """(xhat, inv_std) of LayerNorm over the last axis of float32 z:
    xhat = (z - mean) * inv_std, inv_std = rsqrt(var + epsilon). `row_mean` takes the
    means (keepdims): a reduction, or `row_mean_by_product` inside XLA kernels."""
    centered = z - row_mean(z)
    inv_std = tf.math.rsqrt(row_mean(tf.square(centered)) + epsilon)
    return centered * inv_std, inv_std


def layer_norm_input_grad(g, xhat, inv_std, row_mean=_row_mean):
    """d LayerNorm / d z for g = dy * gamma: inv_std (g - mean(g) - xhat mean(g xhat)),
    a few passes instead of the dozen that autodiff of the moments emits; `row_mean`
    as in `layer_norm_moments`."""
    return inv_std * (g - row_mean(g) - xhat * row_mean(g * xhat))


def _normalize(x, residual, bias, epsilon):
    """(xhat, inv_std) of LayerNorm over the last axis of x + residual + bias, in float32."""
    z = tf.cast(x, tf.float32) + tf.cast(residual, tf.float32) + tf.cast(bias, tf.float32)
    return layer_norm_moments(z, epsilon, row_mean_by_product)


@tf.function(jit_compile=True, autograph=False)
def _add_layer_norm_forward(x, residual, bias, gamma, beta, epsilon):
    xhat, _ = _normalize(x, residual, bias, epsilon)
    return xhat * gamma + beta


def _layer_norm_grads(xhat, inv_std, gamma, dy):
    """(d z, d gamma, d beta) of LayerNorm(z) * gamma + beta, all float32."""
    dy = tf.cast(dy, tf.float32)
    dz = layer_norm_input_grad(dy * gamma, xhat, inv_std, row_mean_by_product)
    return dz, tf.reduce_sum(dy * xhat, axis=0), tf.reduce_sum(dy, axis=0)


@tf.function(jit_compile=True, autograph=False)
def _add_layer_norm_backward(x, residual, bias, gamma, epsilon, dy):
    dz, dgamma, dbeta = _layer_norm_grads(*_normalize(x, residual, bias, epsilon), gamma, dy)
    return (tf.cast(dz, x.dtype), tf.cast(dz, residual.dtype),
            tf.cast(tf.reduce_sum(dz, axis=0), bias.dtype), dgamma, dbeta)


def add_layer_norm(x, residual, bias, gamma, beta, epsilon: float):
    """LayerNorm(x + residual + bias) * gamma + beta over the last axis, in float32.

    x, residual: [N, H] of any float dtypes (the sub-layer input and its output
    before the bias add); bias: [H], any float dtype; gamma, beta: float32 [H].
    Returns float32 [N, H]. The sum is formed in float32 inside the kernel, so
    the inputs are never cast in separate passes, and the bias gradient is the
    float32 column sum of the residual's (no separate BiasAddGrad pass).
    """
    epsilon = tf.constant(epsilon, tf.float32)

    @tf.custom_gradient
    def fused(x, residual, bias, gamma, beta):
        def grad(dy):
            return _add_layer_norm_backward(x, residual, bias, gamma, epsilon, dy)

        return _add_layer_norm_forward(x, residual, bias, gamma, beta, epsilon), grad

    return fused(x, residual, bias, gamma, beta)


def _mkl_enabled() -> bool:
    """oneDNN is on in this process (`tf_internals.onednn_enabled`: False where
    TensorFlow lacks the internal). The one place this module asks, so tests can
    patch it."""
    return tf_internals.onednn_enabled()


def _onednn_on_cpu() -> bool:
    """oneDNN is on in this process (TF_ENABLE_ONEDNN_OPTS) and no GPU is visible."""
    return _mkl_enabled() and not tf.config.list_logical_devices("GPU")


def onednn_layer_norm_available() -> bool:
    """Whether oneDNN's LayerNorm kernel can run: a TensorFlow build with its oneDNN
    ops (`_MklLayerNorm`), switched on (TF_ENABLE_ONEDNN_OPTS), and no GPU visible
    (the kernel is CPU-only)."""
    # TensorFlow internals (`tf_internals`): a version without them runs the XLA kernel.
    return _onednn_on_cpu() and tf_internals.onednn_layer_norm_op_available()


@tf.function(jit_compile=True, autograph=False)
def _layer_norm_backward(z, gamma, epsilon, dy):
    return _layer_norm_grads(*layer_norm_moments(z, epsilon, row_mean_by_product), gamma, dy)


def onednn_layer_norm(z, gamma, beta, epsilon: float):
    """LayerNorm(z) * gamma + beta over the last axis of float32 z [N, H] (gamma, beta:
    float32 [H]) in oneDNN's kernel, TensorFlow's internal `_MklLayerNorm` op, made
    directly in the graph being traced (see `onednn_layer_norm_available`).

    Why: it runs in one pass each way: 0.45 ms for [4096, 768] against 1.7 ms for the
    XLA kernel, with the same error against float64; and grappler makes this op only
    from `layer_norm_as_batch_norm` in graphs whose rows are unknown when traced
    (in-process graphs often know them). Only for in-process inference: a SavedModel
    holding it would not load in TensorFlow builds without oneDNN (exports use
    `layer_norm_as_batch_norm`). It has no registered gradient; this one is the XLA
    backward.
    """
    epsilon_value = tf.constant(epsilon, tf.float32)

    @tf.custom_gradient
    def normalize(z, gamma, beta):
        def grad(dy):
            return _layer_norm_backward(z, gamma, epsilon_value, dy)

        return tf_internals.make_onednn_layer_norm(
            z, gamma, beta, epsilon, name="onednn_layer_norm"), grad

    return normalize(z, gamma, beta)


EXPORT_LAYER_NORMS = ("auto", "onednn", "plain")
_export_layer_norms = threading.local()  # set only inside `exporting_layer_norms_as`


def _requested_export_spelling() -> str:
    """The spelling of the innermost `exporting_layer_norms_as` block ("auto" outside)."""
    return getattr(_export_layer_norms, "spelling", "auto")


def check_export_layer_norm(spelling: str, name: str = "layer_norm") -> None:
    """Raises ValueError naming `name` unless `spelling` is in EXPORT_LAYER_NORMS."""
    if spelling not in EXPORT_LAYER_NORMS:
        raise ValueError(f"{name} must be one of {', '.join(EXPORT_LAYER_NORMS)}, "
                         f"got {spelling!r}")


@contextlib.contextmanager
def exporting_layer_norms_as(spelling: str):
    """Within this block, SavedModels being traced spell their LayerNorms as `spelling`:
      "onednn": `layer_norm_as_batch_norm`, which oneDNN TensorFlow (the default on x86
                Linux) runs in one fused kernel, and which is slower where oneDNN is off;
      "plain":  seven plain ops, the same speed everywhere;
      "auto":   "onednn" if this process runs oneDNN with no GPU visible, else "plain"
                (the default, also outside this block).
    All three load anywhere and compute the same values up to float32 rounding.
    Entered inside a serving module's traced functions (`export.call_for_export`), so
    that its graphs always hold the spelling the module was built with; a scope for
    tracing, as TensorFlow's own save context, rather than an argument, because it is
    read deep inside the model's layers.
    """
    check_export_layer_norm(spelling)
    previous = _requested_export_spelling()
    _export_layer_norms.spelling = spelling
    try:
        yield
    finally:
        _export_layer_norms.spelling = previous


def export_layer_norm_as_batch_norm(z) -> bool:
    """Whether a SavedModel being traced should spell its LayerNorm over float32 z
    [N, H] or [B, S, H] as `layer_norm_as_batch_norm`: the export asks for it
    (`exporting_layer_norms_as`), the graph is not compiled whole by XLA (which fuses
    the plain ops itself), and the rows are not known when tracing (otherwise grappler
    folds the Fill ops that its pattern needs, and an unfused FusedBatchNormV3 is slower
    than the plain ops)."""
    if tf.executing_eagerly():
        return False
    saving, in_xla = _trace_context()
    if not saving or in_xla:
        return False
    spelling = _requested_export_spelling()
    if spelling == "auto":
        spelling = "onednn" if _onednn_on_cpu() else "plain"
    return (spelling == "onednn" and z.shape.rank in (2, 3) and z.shape[-1] is not None
            and None in z.shape[:-1])


def layer_norm_as_batch_norm(z, gamma, beta, epsilon: float):
    """LayerNorm(z) * gamma + beta over the last axis of z ([N, H] or [B, S, H]; all
    float32, gamma and beta [H]), spelled as Keras 2 spelled its fused LayerNorm: z as one
    NCHW image [1, rows, H, 1] through FusedBatchNormV3 in training mode (each row a
    channel, normalised with its own biased variance), unit scale and zero offset made
    by Fill, then * gamma + beta.

    Why: it is the one spelling of the formula that grappler's remapper rewrites into
    oneDNN's LayerNorm kernel (`_MklLayerNorm`, one pass) when a graph runs on oneDNN
    TensorFlow; it never matched the plain ops' spellings (see docs/performance.md).
    The graph itself holds only public ops, so a SavedModel exported with it loads and
    computes the same values anywhere, up to float32 rounding (max error against float64
    on [4096, 768]: 1.8e-6 rewritten, 6.8e-6 in Eigen's kernel, 2.3e-6 for the plain
    ops). Measured [4096, 768] add + LayerNorm, plain ops 4.8 ms, this spelling
    rewritten 2.1 ms. Where nothing rewrites it (oneDNN off, TensorFlow builds without
    oneDNN) Eigen's NCHW batch norm is ~4x slower than the plain ops, hence
    `exporting_layer_norms_as`. Gradients are FusedBatchNormV3's own. On GPUs cuDNN
    would run it (it has taken epsilons below 1e-5 since 7.5); untested here, so "auto"
    does not choose it where a GPU is visible. Keras 2 kept this spelling for epsilons
    of at least 1.001e-5 only, because its batch-norm wrapper raised smaller ones; the
    raw op keeps 1e-12.
    """
    shape = tf.shape(z)
    rows = tf.reduce_prod(shape[:-1])
    images = tf.reshape(z, tf.stack([1, rows, shape[-1], 1]))
    # Fill, not constants: the remapper's pattern requires Fill ops here.
    channels = tf.reshape(rows, [1])
    empty = tf.constant([], tf.float32)
    normalized = tf.raw_ops.FusedBatchNormV3(
        x=images, scale=tf.fill(channels, 1.0), offset=tf.fill(channels, 0.0),
        mean=empty, variance=empty, epsilon=epsilon, data_format="NCHW",
        is_training=True)[0]
    return tf.reshape(normalized, shape) * gamma + beta


# --------------------------------------------------------------- gradient sums


@tf.function(experimental_attributes={"_noinline": True})
def _add(total, term):
    return total + term


@tf.function(jit_compile=True, autograph=False)
def _add_cast(total, term):
    return total + tf.cast(term, total.dtype)


def accumulate(total, term):
    """`total + term` (term cast to total's dtype) for a running sum of gradients that
    must stay one addition per term. In a graph, grappler's arithmetic optimizer
    would rewrite a chain of adds into one AddN over every term (AddOpsRewrite),
    which keeps all terms alive until the last exists; it does not look inside a
    function call that is not inlined. A bf16 term is cast and added in one XLA
    kernel (one pass instead of a Cast and an add). Plain ops eagerly and inside
    whole-XLA graphs, which schedule buffers themselves."""
    term = tf.convert_to_tensor(term)  # a dense sum, whatever the gradient's form
    if not use_fused():
        return total + tf.cast(term, total.dtype)
    if term.dtype != total.dtype:
        return _add_cast(total, term)
    return _add(total, term)
