"""The XLA-fused kernels (albert_tf.kernels.fused_ops) against autodiff of the plain formulas;
the encoder's traced passes (which use them) against its eager pass and its exported
SavedModel (which do not)."""
import re
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertPretrainer, export
from albert_tf.kernels import fused_ops
from albert_tf.export import hub as hub_export
from albert_tf.modeling import layers
from tests.conftest import REPO_ROOT
from tests.modeling.test_numerics import randomize, tiny_config
from tests.modeling.test_performance_paths import (_executed_kernels, _loss_and_gradients,
                                                   _pretraining_batch)
from tests.kernels.test_tf_internals import onednn_on, require_onednn_layer_norm

RNG = np.random.default_rng(7)


def _composite_gelu(x):
    return 0.5 * x * (1.0 + tf.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def _composite_add_layer_norm(x, residual, gamma, beta):
    z = tf.cast(x, tf.float32) + tf.cast(residual, tf.float32)
    mean, variance = tf.nn.moments(z, axes=[-1], keepdims=True)
    return (z - mean) * tf.math.rsqrt(variance + 1e-12) * gamma + beta


def _value_and_grads(fn, inputs, upstream):
    """fn(*inputs) and d(sum(fn * upstream))/d(inputs), all as float32 numpy."""
    inputs = [tf.convert_to_tensor(x) for x in inputs]
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        out = fn(*inputs)
    grads = tape.gradient(out, inputs, output_gradients=tf.cast(upstream, out.dtype))
    return (tf.cast(out, tf.float32).numpy(),
            [tf.cast(g, tf.float32).numpy() for g in grads])


def _in_graph(fn):
    """fn traced: the fused kernels are used only where a graph is being built."""
    return tf.function(fn, autograph=False)


def _assert_close(got, want, tol):
    np.testing.assert_allclose(got, want, atol=tol * max(1.0, np.abs(want).max()), rtol=tol)


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-5), ("bfloat16", 1e-2)])
def test_fused_bias_gelu_matches_autodiff_of_the_tanh_formula(dtype, tol):
    h = tf.cast(RNG.normal(scale=2.0, size=(6, 40)), dtype)
    bias = tf.cast(RNG.normal(size=40), dtype)
    upstream = RNG.normal(size=(6, 40)).astype("float32")
    got, grads = _value_and_grads(_in_graph(fused_ops.bias_gelu), [h, bias], upstream)
    # The reference sees the same (rounded) inputs, added and evaluated in float32.
    want, want_grads = _value_and_grads(
        lambda h, b: _composite_gelu(h + b), [tf.cast(h, tf.float32), tf.cast(bias, tf.float32)],
        upstream)
    assert fused_ops.bias_gelu(h, bias).dtype == h.dtype
    _assert_close(got, want, tol)
    for g, w in zip(grads, want_grads):
        _assert_close(g, w, tol)


@pytest.mark.parametrize("dtypes,tol", [(("float32", "float32"), 1e-5),
                                        (("bfloat16", "bfloat16"), 1e-2),
                                        (("bfloat16", "float32"), 1e-2)])
def test_fused_add_layer_norm_matches_autodiff(dtypes, tol):
    x = tf.cast(RNG.normal(loc=2.0, scale=3.0, size=(10, 24)), dtypes[0])
    residual = tf.cast(RNG.normal(size=(10, 24)), dtypes[1])
    bias = tf.cast(RNG.normal(size=24), dtypes[1])
    gamma = tf.constant(RNG.normal(size=24), tf.float32)
    beta = tf.constant(RNG.normal(size=24), tf.float32)
    upstream = RNG.normal(size=(10, 24)).astype("float32")

    def fused(x, residual, bias, gamma, beta):
        return fused_ops.add_layer_norm(x, residual, bias, gamma, beta, 1e-12)

    got, grads = _value_and_grads(_in_graph(fused), [x, residual, bias, gamma, beta], upstream)
    want, want_grads = _value_and_grads(
        lambda x, r, b, gamma, beta: _composite_add_layer_norm(x, r + b, gamma, beta),
        [tf.cast(v, tf.float32) for v in (x, residual, bias)] + [gamma, beta], upstream)
    assert fused(x, residual, bias, gamma, beta).dtype == tf.float32
    _assert_close(got, want, 1e-5)  # the forward reads the rounded inputs exactly
    for name, g, w in zip(("x", "residual", "bias", "gamma", "beta"), grads, want_grads):
        _assert_close(g, w, tol if name in ("x", "residual", "bias") else 1e-5)


def test_onednn_layer_norm_matches_autodiff_and_float64():
    require_onednn_layer_norm()
    z = tf.constant(RNG.normal(loc=2.0, scale=3.0, size=(10, 24)), tf.float32)
    gamma = tf.constant(RNG.normal(size=24), tf.float32)
    beta = tf.constant(RNG.normal(size=24), tf.float32)
    upstream = RNG.normal(size=(10, 24)).astype("float32")
    got, grads = _value_and_grads(
        _in_graph(lambda z, g, b: fused_ops.onednn_layer_norm(z, g, b, 1e-12)),
        [z, gamma, beta], upstream)
    want, want_grads = _value_and_grads(
        lambda z, g, b: _composite_add_layer_norm(z, tf.zeros_like(z), g, b),
        [z, gamma, beta], upstream)
    _assert_close(got, want, 1e-5)
    for g, w in zip(grads, want_grads):
        _assert_close(g, w, 1e-5)
    z64 = z.numpy().astype(np.float64)
    centered = z64 - z64.mean(-1, keepdims=True)
    want64 = centered / np.sqrt((centered ** 2).mean(-1, keepdims=True) + 1e-12)
    np.testing.assert_allclose(got, want64 * gamma.numpy() + beta.numpy(), atol=1e-5)


def _float64_layer_norm(z, gamma, beta):
    z = np.asarray(z, np.float64)
    centered = z - z.mean(-1, keepdims=True)
    return centered / np.sqrt((centered ** 2).mean(-1, keepdims=True) + 1e-12) * gamma + beta


def _spelled_layer_norm(z, gamma, beta):
    with tf.name_scope("norm"):  # _executed_kernels reads scoped op names
        return fused_ops.layer_norm_as_batch_norm(z, gamma, beta, 1e-12)


@pytest.mark.parametrize("shape", [(10, 24), (2, 5, 24)])
def test_layer_norm_as_batch_norm_matches_float64_and_autodiff(shape):
    # Rows far from 0; rows whose variance (1e-8) is small enough that an epsilon other
    # than 1e-12 would show (a rewritten kernel must carry it over); a constant row.
    z = RNG.normal(loc=50.0, scale=3.0, size=shape)
    rows = z.reshape(-1, shape[-1])
    rows[:3] = 1e-4 * RNG.normal(size=(3, shape[-1]))
    rows[3] = 7.0
    z = tf.constant(z, tf.float32)
    gamma = tf.constant(RNG.normal(size=24), tf.float32)
    beta = tf.constant(RNG.normal(size=24), tf.float32)
    upstream = RNG.normal(size=shape).astype("float32")
    want64 = _float64_layer_norm(z.numpy(), gamma.numpy(), beta.numpy())
    want, want_grads = _value_and_grads(
        lambda z, g, b: _composite_add_layer_norm(z, tf.zeros_like(z), g, b),
        [z, gamma, beta], upstream)
    unknown_rows = tf.function(_spelled_layer_norm, input_signature=[
        tf.TensorSpec([None] * (len(shape) - 1) + [24], tf.float32),
        tf.TensorSpec([24], tf.float32), tf.TensorSpec([24], tf.float32)])
    # Under a tape grappler keeps FusedBatchNormV3 (its gradient needs the op's outputs).
    for fn in (_spelled_layer_norm, unknown_rows):
        got, grads = _value_and_grads(fn, [z, gamma, beta], upstream)
        np.testing.assert_allclose(got, want64, atol=2e-5)
        for g, w in zip(grads, want_grads):
            _assert_close(g, w, 1e-4)
    # Without one, on oneDNN, it runs as oneDNN's LayerNorm kernel.
    np.testing.assert_allclose(unknown_rows(z, gamma, beta).numpy(), want64, atol=2e-5)
    if onednn_on():
        kernels = {kernel for _, kernel in _executed_kernels(unknown_rows, z, gamma, beta)}
        assert "_MklLayerNorm" in kernels, kernels


def test_grappler_runs_layer_norm_as_batch_norm_in_onednn_only_when_rows_are_unknown():
    """With oneDNN on; where it is off, FusedBatchNormV3 runs as TensorFlow's own kernel."""
    on = onednn_on()
    gamma, beta = tf.ones([24]), tf.zeros([24])

    def spelled(z):
        return _spelled_layer_norm(z, gamma, beta)

    z = tf.constant(RNG.normal(size=(6, 24)), tf.float32)
    for rows, kernel in ((None, "_MklLayerNorm"), (6, "_MklNativeFusedBatchNormV3")):
        fn = tf.function(spelled, input_signature=[tf.TensorSpec([rows, 24], tf.float32)])
        kernels = {kernel for _, kernel in _executed_kernels(fn, z)}
        if not on:
            kernel = "FusedBatchNormV3"
            assert not [k for k in kernels if k.startswith("_Mkl")], (rows, kernels)
        assert kernel in kernels and "Mean" not in kernels, (rows, kernels)


class _SpellingProbe(tf.Module):
    """Records, per traced function, whether its LayerNorms would be batch-norm spelled."""

    def __init__(self):
        super().__init__()
        self.seen = {}

    def _probe(self, name, z):
        self.seen[name] = fused_ops.export_layer_norm_as_batch_norm(z)

    @tf.function(input_signature=[tf.TensorSpec([None, 24], tf.float32)])
    def unknown_rows(self, z):
        self._probe("unknown rows", z)
        self._probe("3-D", tf.reshape(z, [1, -1, 24]))
        self._probe("1-D", tf.reshape(z, [-1]))
        self._probe("4-D", tf.reshape(z, [1, 1, -1, 24]))
        return z

    @tf.function(input_signature=[tf.TensorSpec(None, tf.float32)])
    def unknown_rank(self, z):
        self._probe("unknown rank", z)
        return z

    @tf.function(input_signature=[tf.TensorSpec([3, 24], tf.float32)])
    def known_rows(self, z):  # grappler would fold the Fill ops its pattern needs
        self._probe("known rows", z)
        return z

    @tf.function(input_signature=[tf.TensorSpec([None, 24], tf.float32)], jit_compile=True)
    def compiled(self, z):  # XLA fuses the plain ops itself
        self._probe("xla", z)
        return z


def _probed_export(path, spelling=None):
    probe = _SpellingProbe()
    if spelling is None:
        tf.saved_model.save(probe, str(path))
    else:
        with fused_ops.exporting_layer_norms_as(spelling):
            tf.saved_model.save(probe, str(path))
    return probe.seen


def test_exports_spell_layer_norm_as_batch_norm_as_asked_where_rows_are_unknown(
        tmp_path, monkeypatch):
    assert not fused_ops.export_layer_norm_as_batch_norm(tf.zeros([3, 24]))  # eager

    @tf.function(input_signature=[tf.TensorSpec([None, 24], tf.float32)])
    def traced(z):  # in-process graphs use the XLA or the direct oneDNN kernel
        traced.seen = fused_ops.export_layer_norm_as_batch_norm(z)
        return z

    with fused_ops.exporting_layer_norms_as("onednn"):
        traced(tf.zeros([3, 24]))
    assert traced.seen is False

    others = {"1-D": False, "4-D": False, "unknown rank": False, "known rows": False,
              "xla": False}
    assert _probed_export(tmp_path / "onednn", "onednn") == {
        "unknown rows": True, "3-D": True, **others}
    assert _probed_export(tmp_path / "plain", "plain") == {
        "unknown rows": False, "3-D": False, **others}
    auto = onednn_on() and not tf.config.list_logical_devices("GPU")
    assert _probed_export(tmp_path / "default")["unknown rows"] is auto
    assert _probed_export(tmp_path / "auto", "auto")["unknown rows"] is auto
    # Nested scopes and exceptions restore the outer spelling.
    with fused_ops.exporting_layer_norms_as("plain"):
        with pytest.raises(RuntimeError):
            with fused_ops.exporting_layer_norms_as("onednn"):
                raise RuntimeError
        assert _probed_export(tmp_path / "restored")["unknown rows"] is False
    monkeypatch.setattr(fused_ops, "_mkl_enabled", lambda: True)
    monkeypatch.setattr(tf.config, "list_logical_devices",
                        lambda kind=None: ["GPU:0"] if kind == "GPU" else [])
    assert _probed_export(tmp_path / "auto_with_gpu", "auto")["unknown rows"] is False
    monkeypatch.setattr(fused_ops, "_mkl_enabled", lambda: False)
    assert _probed_export(tmp_path / "auto_without_onednn", "auto")["unknown rows"] is False
    with pytest.raises(ValueError, match="layer_norm must be one of auto, onednn, plain, "
                                         "got 'fast'"):
        with fused_ops.exporting_layer_norms_as("fast"):
            pass


def test_row_mean_by_product_matches_the_float64_mean():
    x = RNG.normal(loc=50.0, scale=3.0, size=(7, 768)).astype("float32")
    got = tf.function(fused_ops.row_mean_by_product, jit_compile=True)(tf.constant(x))
    assert got.shape == (7, 1)
    np.testing.assert_allclose(got.numpy(), x.astype(np.float64).mean(-1, keepdims=True),
                               rtol=1e-6)


def _hlo_op_counts(fn, *args):
    hlo = fn.experimental_get_compiler_ir(*args)(stage="hlo")
    return {op: len(re.findall(rf"\b{op}\(", hlo)) for op in ("dot", "reduce")}


def test_add_layer_norm_kernels_take_row_means_as_products():
    # XLA's CPU row reductions were the LayerNorm kernels' main cost (see
    # fused_ops.row_mean_by_product): the forward's two means and the backward's four
    # are products; only the backward's three column sums (bias, gamma, beta) reduce.
    x = tf.constant(RNG.normal(size=(8, 24)), tf.float32)
    h = tf.zeros([24])
    epsilon = tf.constant(1e-12)
    assert _hlo_op_counts(fused_ops._add_layer_norm_forward, x, x, h, h, h, epsilon) == {
        "dot": 2, "reduce": 0}
    assert _hlo_op_counts(fused_ops._add_layer_norm_backward, x, x, h, h, epsilon, x) == {
        "dot": 4, "reduce": 3}


def test_fused_kernels_are_used_in_traced_graphs_but_not_eagerly_in_xla_or_in_exports(
        tmp_path):
    assert not fused_ops.use_fused()  # eager
    seen = []

    @tf.function
    def traced():
        seen.append(fused_ops.use_fused())
        return tf.constant(0)

    traced()
    assert seen == [True]

    @tf.function(jit_compile=True)
    def compiled():  # XLA fuses the plain ops of a whole-XLA graph itself
        seen.append(fused_ops.use_fused())
        return tf.constant(0)

    compiled()
    assert seen == [True, False]

    class Export(tf.Module):
        @tf.function(input_signature=[])
        def serve(self):
            seen.append(fused_ops.use_fused())
            return tf.constant(0)

    tf.saved_model.save(Export(), str(tmp_path / "probe"))
    assert len(seen) > 2 and not any(seen[2:])


def _internal_op_types(export_dir):
    """Op types of a SavedModel that start with "_" (TensorFlow's internal ops, such as
    oneDNN's `_MklLayerNorm`)."""
    return {op for op in export.op_types(export_dir) if op.startswith("_")}


TOKEN_INPUTS = ("input_ids", "input_mask", "segment_ids")


def _exported_tiny_pretrainer(tmp_path, dtype, **export_kwargs):
    """(model, batch, export_dir): a tiny random AlbertPretrainer and its hub export."""
    config = tiny_config()
    model = AlbertPretrainer(config, dtype=dtype)
    model.build()
    randomize(model.weights)
    config_file = tmp_path / "albert_config.json"
    config.to_json_file(str(config_file))
    spm_file = tmp_path / "spm.model"
    spm_file.write_bytes(b"placeholder")
    export_dir = hub_export.export_pretrainer(model, str(config_file), str(spm_file),
                                              str(tmp_path / "export"), **export_kwargs)
    return model, _pretraining_batch(config), export_dir


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-5),
                                       pytest.param("mixed_bfloat16", 5e-2,
                                                    marks=pytest.mark.slow)])  # 8 s
def test_exported_saved_model_is_plain_tensorflow_and_matches_in_process_inference(
        tmp_path, dtype, tol):
    """In process (traced first, so the fused kernels exist) and through the export."""
    model, batch, export_dir = _exported_tiny_pretrainer(tmp_path, dtype)
    traced = tf.function(lambda b: model.encoder(b, training=False)["sequence_output"])
    in_process = traced({k: batch[k] for k in TOKEN_INPUTS})
    assert export.xla_function_names(export_dir) == []
    assert not _internal_op_types(export_dir)  # loads in builds without oneDNN too
    loaded = tf.saved_model.load(export_dir)
    exported = loaded.signatures["tokens"](**{k: tf.constant(batch[k]) for k in TOKEN_INPUTS})
    eager = tf.cast(model.encoder(batch, training=False)["sequence_output"], tf.float32).numpy()
    _assert_close(tf.cast(in_process, tf.float32).numpy(), eager, tol)
    _assert_close(tf.cast(exported["sequence_output"], tf.float32).numpy(), eager, tol)


_RUN_EXPORT_WITHOUT_ONEDNN = """
import os, sys
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
import numpy as np, tensorflow as tf
from albert_tf.kernels import tf_internals
assert tf_internals.missing_internals() == [] and not tf_internals.onednn_enabled()
inputs = dict(np.load(sys.argv[2]))
out = tf.saved_model.load(sys.argv[1]).signatures["tokens"](
    **{k: tf.constant(v) for k, v in inputs.items()})
np.save(sys.argv[3], out["sequence_output"].numpy())
"""


@pytest.mark.slow  # 12 s
def test_onednn_export_runs_its_layer_norms_in_onednn_and_the_same_values_without_it(
        tmp_path):
    """The default export ("auto"), where oneDNN is on: its LayerNorms run as oneDNN's
    kernel. Where oneDNN is off, "auto" spells them plain and no oneDNN kernel runs."""
    on = onednn_on()
    model, batch, export_dir = _exported_tiny_pretrainer(tmp_path, "float32")
    inputs = {k: batch[k] for k in TOKEN_INPUTS}
    serve = tf.saved_model.load(export_dir).signatures["tokens"]
    executed = _executed_kernels(lambda: serve(**{k: tf.constant(v) for k, v in inputs.items()}))
    kernels = [kernel for _, kernel in executed]
    config = model.config
    norms = 1 + 2 * config.num_hidden_layers * config.inner_group_num  # + the embeddings'
    if not on:
        assert not [k for k in kernels if k.startswith("_Mkl")], kernels
        assert "FusedBatchNormV3" not in kernels and "Mean" in kernels, kernels
        eager = model.encoder(batch, training=False)["sequence_output"].numpy()
        _assert_close(serve(**{k: tf.constant(v) for k, v in inputs.items()})[
            "sequence_output"].numpy(), eager, 1e-5)
        return
    assert kernels.count("_MklLayerNorm") == norms and "Mean" not in kernels, kernels
    # Every residual add joins its output product (the rows are unknown when traced).
    assert not [name for name, kernel in executed
                if kernel == "AddV2" and "inner_group" in name], executed
    # Where nothing rewrites it, FusedBatchNormV3 computes the same LayerNorm.
    np.savez(tmp_path / "inputs.npz", **inputs)
    subprocess.run([sys.executable, "-c", _RUN_EXPORT_WITHOUT_ONEDNN, export_dir,
                    str(tmp_path / "inputs.npz"), str(tmp_path / "out.npy")], check=True,
                   cwd=REPO_ROOT)  # where albert_tf imports from
    eager = model.encoder(batch, training=False)["sequence_output"].numpy()
    _assert_close(np.load(tmp_path / "out.npy"), eager, 1e-5)


@pytest.mark.parametrize("dtype,floor", [("float32", 1e-5),
                                         pytest.param("mixed_bfloat16", 3e-2,
                                                      marks=pytest.mark.slow)])  # 7 s
def test_traced_training_pass_matches_the_eager_one(dtype, floor, monkeypatch):
    """The traced pass (fused kernels) gives the eager pass's (plain ops) loss and
    gradients, as closely as the traced pass with the plain ops does.

    With random weights the deep layers' softmax saturates, so some gradients are
    tiny differences of large terms (and the key bias's is exactly zero up to
    rounding): a fixed tolerance would be too tight for those and too loose for
    the rest, hence the comparison with the plain ops' own graph-vs-eager error.
    The floor is relative to the model's largest gradient, as the rounding of the
    large terms is what the small gradients inherit; it matters without oneDNN,
    where the plain graph equals eager exactly and only the fused kernels' own
    rounding remains.
    """
    config = tiny_config()
    model = AlbertPretrainer(config, dtype=dtype)
    model.build()
    randomize(model.weights)
    batch = _pretraining_batch(config)
    loss_eager, grads_eager = _loss_and_gradients(model, batch)
    traced = tf.function(_loss_and_gradients)
    graph = traced.get_concrete_function(model, batch).graph
    fused_calls = [op for op in graph.get_operations()
                   if op.type in ("StatefulPartitionedCall", "PartitionedCall")
                   and "_forward" in op.get_attr("f").name]
    assert len(fused_calls) >= 3 * config.num_hidden_layers, "fused kernels not used"
    loss_fused, grads_fused = traced(model, batch)
    monkeypatch.setattr(fused_ops, "use_fused", lambda: False)
    loss_plain, grads_plain = tf.function(_loss_and_gradients)(model, batch)
    rel = 1e-6 if dtype == "float32" else 1e-2
    scale = max(np.abs(tf.convert_to_tensor(g).numpy()).max() for g in grads_eager.values())
    np.testing.assert_allclose(loss_fused.numpy(), loss_eager.numpy(), rtol=rel)
    np.testing.assert_allclose(loss_plain.numpy(), loss_eager.numpy(), rtol=rel)
    for path, grad in grads_eager.items():
        want = tf.convert_to_tensor(grad).numpy()
        got = tf.convert_to_tensor(grads_fused[path]).numpy()
        plain = tf.convert_to_tensor(grads_plain[path]).numpy()
        assert got.dtype == np.float32, path
        error = np.abs(got - want).max()
        allowed = 3.0 * np.abs(plain - want).max() + floor * scale
        assert error <= allowed, (path, error, allowed, scale)


class _DoublingDropout:
    """A stand-in dropout with rate > 0 that is deterministic: it doubles its input."""
    rate = 0.5

    def __call__(self, x, training=False):
        return 2.0 * x if training else x


def test_sub_layer_end_adds_the_bias_before_dropout_in_the_fused_path():
    dense = layers.dense(8, 0.5, "output_dense")
    dense.build((None, 6))
    dense.bias.assign(RNG.normal(size=8).astype("float32"))
    norm = layers.layer_norm("LayerNorm")
    norm.build((None, 8))
    x = tf.constant(RNG.normal(size=(5, 8)), tf.float32)
    y = tf.constant(RNG.normal(size=(5, 6)), tf.float32)
    for dropout in (_DoublingDropout(), keras.layers.Dropout(0.0)):
        scale = 2.0 if dropout.rate else 1.0
        expected = norm(x + scale * (tf.matmul(y, dense.kernel) + dense.bias)).numpy()
        traced = tf.function(lambda: layers.add_output_and_normalize(
            dense, dropout, norm, x, y, None, True))
        np.testing.assert_allclose(traced().numpy(), expected, atol=1e-5)


def test_export_warns_about_xla_functions_that_reach_the_saved_model(tmp_path, caplog):
    class Compiled(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)], jit_compile=True)
        def serve(self, x):
            return {"y": x * 2.0}

    module = Compiled()
    with caplog.at_level("WARNING"):
        export.save_serving_model(str(tmp_path / "compiled"), module,
                                  {"serving_default": module.serve})
    assert export.xla_function_names(str(tmp_path / "compiled"))
    assert "XLA-compiled functions" in caplog.text


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-6), ("bfloat16", 1e-2)])
def test_bias_to_heads_adds_the_biases_and_moves_heads_first(dtype, tol):
    shape = (2, 512, 3, 4)  # [B, S, N, D]: 1024 terms in each bias gradient
    inputs = [tf.cast(RNG.normal(size=shape), dtype) for _ in range(3)]
    biases = [tf.cast(RNG.normal(size=shape[2:]), dtype) for _ in range(3)]
    upstream = [RNG.normal(loc=1.0, size=(2, 3, 512, 4)).astype("float32") for _ in range(3)]

    def value_and_grads(fn):
        tensors = inputs + biases
        with tf.GradientTape() as tape:
            tape.watch(tensors)
            outs = fn(*tensors)
        grads = tape.gradient(outs, tensors, output_gradients=[
            tf.cast(u, o.dtype) for u, o in zip(upstream, outs)])
        return outs, grads

    outs, grads = value_and_grads(_in_graph(fused_ops.bias_to_heads))
    want, want_grads = value_and_grads(lambda q, k, v, bq, bk, bv: [
        tf.transpose(x + b, [0, 2, 1, 3]) for x, b in ((q, bq), (k, bk), (v, bv))])
    for got, ref in zip(outs, want):
        assert got.dtype == tf.as_dtype(dtype) and got.shape == (2, 3, 512, 4)
        _assert_close(tf.cast(got, tf.float32).numpy(), tf.cast(ref, tf.float32).numpy(), tol)
    for got, ref in zip(grads, want_grads):
        assert got.dtype == tf.as_dtype(dtype)
        _assert_close(tf.cast(got, tf.float32).numpy(), tf.cast(ref, tf.float32).numpy(), tol)
    # The bias gradients are the sums of the upstream gradients over B and S, formed in
    # float32 and rounded once: within half a bf16 ulp (a bf16 running sum of 1024 terms
    # would be off by far more).
    for got, u in zip(grads[3:], upstream):
        want = tf.cast(tf.cast(u, dtype), tf.float64).numpy().sum(axis=(0, 2))
        np.testing.assert_allclose(tf.cast(got, tf.float64).numpy(), want,
                                   rtol=1.01 * 2.0 ** -8 if dtype == "bfloat16" else 1e-6)


def _kernel_calls(graph, name):
    return [op for op in graph.get_operations()
            if op.type in ("StatefulPartitionedCall", "PartitionedCall")
            and name in op.get_attr("f").name]


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16", "bfloat16"])
def test_bf16_inference_runs_plain_products_with_the_biases_in_kernels(dtype, monkeypatch):
    """bf16 inference adds the Q/K/V and FFN biases in fused kernels after plain
    MatMuls (layers.split_bias_products); float32 keeps grappler's fused products.
    Both give the plain ops' outputs, also traced for unknown batch and length
    (and with no resident weights under the pure bfloat16 policy)."""
    config = tiny_config()
    model = AlbertPretrainer(config, dtype=dtype)
    model.build()
    randomize(model.weights)
    batch = _pretraining_batch(config)
    inputs = {k: tf.constant(batch[k]) for k in ("input_ids", "input_mask", "segment_ids")}

    def infer(x):
        return model.encoder(x, training=False)["sequence_output"]

    spec = {k: tf.TensorSpec([None, None], v.dtype) for k, v in inputs.items()}
    traced = tf.function(infer, input_signature=[spec])
    graph = traced.get_concrete_function().graph
    split = dtype != "float32"
    blocks = config.num_hidden_layers * config.inner_group_num  # applications of a block
    assert len(_kernel_calls(graph, "_bias_to_heads_forward")) == (blocks if split else 0)
    assert len(_kernel_calls(graph, "_bias_gelu_forward")) == (blocks if split else 0)
    fused = traced(inputs)
    monkeypatch.setattr(fused_ops, "use_fused", lambda: False)
    plain = tf.function(infer)(inputs)
    _assert_close(tf.cast(fused, tf.float32).numpy(), tf.cast(plain, tf.float32).numpy(),
                  1e-5 if dtype == "float32" else 3e-2)


def test_split_bias_products_only_for_bf16_in_traced_graphs():
    assert not layers.split_bias_products("bfloat16")  # eager
    seen = []

    @tf.function
    def traced():
        seen.extend([layers.split_bias_products("bfloat16"),
                     layers.split_bias_products("float32")])
        return tf.constant(0)

    traced()
    assert seen == [True, False]


@pytest.mark.parametrize("dtype,tol", [("float32", 1e-6), ("bfloat16", 1e-2)])
def test_bias_add_kernel_matches_autodiff(dtype, tol):
    h = tf.cast(RNG.normal(size=(300, 6)), dtype)
    bias = tf.cast(RNG.normal(size=6), dtype)
    upstream = RNG.normal(loc=1.0, size=(300, 6)).astype("float32")
    got, grads = _value_and_grads(_in_graph(fused_ops.bias_add), [h, bias], upstream)
    want, want_grads = _value_and_grads(lambda h, b: h + b, [h, bias], upstream)
    assert fused_ops.bias_add(h, bias).dtype == h.dtype
    _assert_close(got, want, tol)
    for g, w in zip(grads, want_grads):
        _assert_close(g, w, tol)


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_bf16_training_adds_the_projection_biases_in_kernels(dtype):
    """bf16 training runs the Q/K/V products as plain MatMuls with `fused_ops.bias_add`
    after them; float32 keeps grappler's fused MatMul + BiasAdd. (The gradients
    are compared with the eager pass in test_traced_training_pass_matches_the_eager_one.)"""
    config = tiny_config()
    model = AlbertPretrainer(config, dtype=dtype)
    model.build()
    batch = _pretraining_batch(config)
    graph = tf.function(_loss_and_gradients).get_concrete_function(model, batch).graph
    blocks = config.num_hidden_layers * config.inner_group_num
    expected = 3 * blocks if dtype == "mixed_bfloat16" else 0
    assert len(_kernel_calls(graph, "_bias_add_forward")) == expected
    assert len(_kernel_calls(graph, "_bias_add_backward")) == expected
    assert not _kernel_calls(graph, "_bias_to_heads_forward")  # inference only


@pytest.mark.parametrize("term_dtype,kernel", [("bfloat16", "_add_cast"), ("float32", "_add")])
def test_accumulate_casts_the_term_to_the_sum_dtype(term_dtype, kernel):
    total = tf.constant(RNG.normal(size=(7, 5)), tf.float32)
    term = tf.cast(RNG.normal(size=(7, 5)), term_dtype)
    traced = tf.function(fused_ops.accumulate, autograph=False)
    graph = traced.get_concrete_function(total, term).graph
    names = [op.get_attr("f").name for op in _kernel_calls(graph, "")]  # every call
    # One non-inlined call of the kernel (names are __inference_<function>_<id>).
    assert len(names) == 1 and re.fullmatch(f"__inference_{kernel}_\\d+", names[0]), names
    want = total.numpy() + tf.cast(term, tf.float32).numpy()
    for got in (traced(total, term), fused_ops.accumulate(total, term)):  # traced, eager
        assert got.dtype == tf.float32
        np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.slow  # 9 s
def test_export_layer_norm_option_decides_the_spelling(tmp_path, monkeypatch):
    """Each serving module keeps the spelling it was built with, whatever was exported
    before it from the same model."""
    monkeypatch.setattr(fused_ops, "_mkl_enabled", lambda: False)  # "auto" would be plain
    model, _, onednn_dir = _exported_tiny_pretrainer(tmp_path / "a", "float32",
                                                     layer_norm="onednn")
    ops = export.op_types(onednn_dir)
    assert "FusedBatchNormV3" in ops and "Mean" not in ops
    plain_dir = hub_export.export_pretrainer(model, onednn_dir + "/assets/albert_config.json",
                                             onednn_dir + "/assets/spm.model",
                                             str(tmp_path / "plain"), layer_norm="plain")
    ops = export.op_types(plain_dir)
    assert "FusedBatchNormV3" not in ops and "Mean" in ops
    with pytest.raises(ValueError, match="layer_norm must be one of auto, onednn, plain, "
                                         "got 'fast'"):
        hub_export.export_pretrainer(model, "c.json", "s.model", str(tmp_path / "c"),
                                     layer_norm="fast")
    assert not (tmp_path / "c").exists()


def test_dense_gelu_matches_autodiff_of_the_formula():
    x = tf.constant(RNG.normal(size=(6, 12)), tf.float32)
    kernel = tf.constant(RNG.normal(scale=0.3, size=(12, 40)), tf.float32)
    bias = tf.constant(RNG.normal(size=40), tf.float32)
    upstream = RNG.normal(size=(6, 40)).astype("float32")
    got, grads = _value_and_grads(_in_graph(fused_ops.dense_gelu), [x, kernel, bias], upstream)
    want, want_grads = _value_and_grads(lambda x, k, b: _composite_gelu(tf.matmul(x, k) + b),
                                        [x, kernel, bias], upstream)
    _assert_close(got, want, 1e-5)
    for g, w in zip(grads, want_grads):
        _assert_close(g, w, 1e-5)


def test_avx2_gemms_from_the_cpu_flags_and_the_onednn_cap():
    from albert_tf.kernels.precision import CpuInfo
    from tests.kernels.test_precision import AVX2_EPYC, SKYLAKE, ZEN5_EPYC
    # TensorFlow leaves oneDNN off on an AVX2-only CPU (Eigen's GEMMs) unless it is
    # switched on, as albert-tf's programs do (onednn.configure).
    assert not fused_ops.avx2_gemms(AVX2_EPYC, {})
    assert fused_ops.avx2_gemms(AVX2_EPYC, {"TF_ENABLE_ONEDNN_OPTS": "1"})
    assert fused_ops.avx2_gemms(AVX2_EPYC, {"TF_ENABLE_ONEDNN_OPTS": "true"})
    assert not fused_ops.avx2_gemms(ZEN5_EPYC, {}) and not fused_ops.avx2_gemms(SKYLAKE, {})
    assert not fused_ops.avx2_gemms(SKYLAKE, {"TF_ENABLE_ONEDNN_OPTS": "1"})
    assert fused_ops.avx2_gemms(ZEN5_EPYC, {"ONEDNN_MAX_CPU_ISA": "avx2"})
    assert not fused_ops.avx2_gemms(AVX2_EPYC, {"TF_ENABLE_ONEDNN_OPTS": "0"})  # Eigen GEMMs
    assert not fused_ops.avx2_gemms(ZEN5_EPYC, {"ONEDNN_MAX_CPU_ISA": "avx2",
                                                "TF_ENABLE_ONEDNN_OPTS": "False"})
    unknown = CpuInfo("x", frozenset(), "x86_64")  # no /proc/cpuinfo: the default path
    assert not fused_ops.avx2_gemms(unknown, {})
    assert not fused_ops.avx2_gemms(ZEN5_EPYC, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"})
    assert not fused_ops.avx2_gemms(CpuInfo("Neoverse", frozenset({"asimd"}), "aarch64"), {})


@pytest.mark.parametrize("avx2", [True, False])
def test_float32_inference_ffn_product_runs_in_xla_only_where_onednn_runs_avx2(avx2,
                                                                               monkeypatch):
    """Where oneDNN's GEMMs are AVX2 (slow for the FFN's first product at few tokens),
    float32 inference runs that product, its bias and GELU as one XLA kernel; elsewhere,
    and in training, bf16 and exports, grappler's fused op stays. Same outputs."""
    monkeypatch.setattr(fused_ops, "avx2_gemms", lambda: avx2)
    config = tiny_config()
    blocks = config.num_hidden_layers * config.inner_group_num
    model = AlbertPretrainer(config)
    model.build()
    randomize(model.weights)
    batch = _pretraining_batch(config)
    inputs = {k: tf.constant(batch[k]) for k in ("input_ids", "input_mask", "segment_ids")}
    spec = {k: tf.TensorSpec([None, None], v.dtype) for k, v in inputs.items()}

    def run(training):
        return tf.function(lambda x: model.encoder(x, training=training)["sequence_output"],
                           input_signature=[spec])

    inference = run(training=False)
    graph = inference.get_concrete_function().graph
    assert len(_kernel_calls(graph, "_dense_gelu")) == (blocks if avx2 else 0)
    training_graph = run(training=True).get_concrete_function().graph
    assert not _kernel_calls(training_graph, "_dense_gelu")
    got = inference(inputs)
    monkeypatch.setattr(fused_ops, "use_fused", lambda: False)
    plain = run(training=False)(inputs)
    _assert_close(got.numpy(), plain.numpy(), 1e-5)
