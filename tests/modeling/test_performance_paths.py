"""The speed-oriented code paths compute the same thing as the plain ones.

* `recompute_layers=True` (tf.recompute_grad per layer) gives the same outputs and
  gradients as storing every activation.
* Under a mixed policy, a shared block's weights are cast once per pass (resident
  weights) yet every variable still gets its full float32 gradient.
* In training, a shared block's per-application weight gradients are summed as they
  are produced (a chain), with the same result as summing them all at the variable,
  and without keeping L of them alive.
"""
import glob
import os
import shutil
import tempfile

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertPretrainer
from tests.modeling.test_numerics import random_batch, randomize, tiny_config
from albert_tf.kernels import fused_ops
from tests.kernels.test_tf_internals import onednn_on, require_onednn_layer_norm


def _pretraining_batch(config):
    batch = random_batch(config)
    batch["masked_lm_positions"] = np.array([[1, 3], [2, 5], [0, 1]], "int32")
    return batch


def _loss_and_gradients(model, batch):
    with tf.GradientTape() as tape:
        outputs = model(batch, training=True)
        loss = (tf.reduce_sum(tf.square(tf.cast(outputs["mlm_logits"], tf.float32)))
                + tf.reduce_sum(tf.cast(outputs["sop_logits"], tf.float32))
                + tf.reduce_sum(tf.cast(outputs["sequence_output"], tf.float32)))
    grads = tape.gradient(loss, model.trainable_variables)
    return loss, {v.path.split("/", 1)[1]: g for v, g in zip(model.trainable_variables, grads)}


def _twin_models(config, dtype="float32", **kwargs):
    plain = AlbertPretrainer(config, dtype=dtype)
    plain.build()
    randomize(plain.weights)
    other = AlbertPretrainer(config, dtype=dtype, **kwargs)
    other.build()
    for a, b in zip(other.weights, plain.weights):
        a.assign(b)
    return plain, other


@pytest.mark.parametrize("changes", [{}, {"parameter_sharing": "none", "num_hidden_groups": 1,
                                          "inner_group_num": 1}])
def test_recompute_layers_gives_the_same_outputs_and_gradients(changes):
    config = tiny_config(**changes)
    plain, recomputed = _twin_models(config, recompute_layers=True)
    batch = _pretraining_batch(config)
    loss_plain, grads_plain = _loss_and_gradients(plain, batch)
    loss_re, grads_re = _loss_and_gradients(recomputed, batch)
    np.testing.assert_allclose(loss_re.numpy(), loss_plain.numpy(), rtol=1e-6)
    assert set(grads_re) == set(grads_plain)
    for path, grad in grads_plain.items():
        assert grads_re[path] is not None, path
        np.testing.assert_allclose(tf.convert_to_tensor(grads_re[path]).numpy(),
                                   tf.convert_to_tensor(grad).numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=path)
    # Inference is unaffected by the option.
    np.testing.assert_allclose(recomputed(batch)["sequence_output"].numpy(),
                               plain(batch)["sequence_output"].numpy(), atol=1e-6)


def _assert_close_up_to_bf16(grads, reference):
    """Every gradient float32, non-zero, and equal to the reference's up to bf16 rounding."""
    for path, grad in reference.items():
        got = tf.convert_to_tensor(grads[path]).numpy()
        want = tf.convert_to_tensor(grad).numpy()
        assert got.dtype == np.float32 and np.any(got != 0), path
        np.testing.assert_allclose(got, want, rtol=0.05, atol=0.05 * np.abs(want).max(),
                                   err_msg=path)


def test_recompute_layers_under_mixed_precision_trains_every_variable():
    config = tiny_config()
    plain, recomputed = _twin_models(config, dtype="mixed_bfloat16", recompute_layers=True)
    batch = _pretraining_batch(config)
    _, grads_plain = _loss_and_gradients(plain, batch)
    _, grads_re = _loss_and_gradients(recomputed, batch)
    _assert_close_up_to_bf16(grads_re, grads_plain)


def test_recompute_layers_round_trips_through_get_config():
    model = AlbertPretrainer(tiny_config(), recompute_layers=True)
    clone = AlbertPretrainer.from_config(model.get_config())
    assert clone.recompute_layers and clone.encoder.recompute_layers
    assert "recompute_layers" not in AlbertPretrainer(tiny_config()).get_config()


def _without_chain(monkeypatch, model):
    """Every block's Dense layers read their variables at each application, as plain
    Keras would: autodiff then sums the L per-application gradients at the variable."""
    for block in model.encoder.attention_blocks + model.encoder.ffn_blocks:
        monkeypatch.setattr(block, "resident_weights", lambda *args, **kwargs: None)


def _traced_with_and_without_chain(monkeypatch, config, **model_kwargs):
    """((loss, gradients) with the gradient chain, the same without it) of one randomized
    model, both from a traced step."""
    model = AlbertPretrainer(config, **model_kwargs)
    model.build()
    randomize(model.weights)
    batch = _pretraining_batch(config)
    chained = tf.function(_loss_and_gradients)(model, batch)
    _without_chain(monkeypatch, model)
    return chained, tf.function(_loss_and_gradients)(model, batch)


def test_resident_weights_give_float32_gradients_equal_to_per_use_casts(monkeypatch):
    """Mixed bf16: the encoder casts each shared weight once; gradients must match a
    cast-per-use computation (the same maths) and stay float32."""
    config = tiny_config()
    model = AlbertPretrainer(config, dtype="mixed_bfloat16")
    model.build()
    randomize(model.weights)
    batch = _pretraining_batch(config)
    _, resident = _loss_and_gradients(model, batch)
    # Without resident weights every block's Dense layers autocast their own weights
    # at each application (Keras' per-use cast).
    _without_chain(monkeypatch, model)
    _, per_use = _loss_and_gradients(model, batch)
    for path, grad in per_use.items():
        got = tf.convert_to_tensor(resident[path])
        assert got.dtype == tf.float32, path
        np.testing.assert_allclose(got.numpy(), tf.convert_to_tensor(grad).numpy(),
                                   rtol=1e-2, atol=1e-2 * float(tf.reduce_max(tf.abs(grad))),
                                   err_msg=path)


@pytest.mark.parametrize("changes", [
    {},  # 3 layers over 2 groups of 2 inner blocks: uses 2 and 1 per block
] + [pytest.param(changes, marks=pytest.mark.slow) for changes in (  # 2 s each
    {"num_hidden_layers": 4, "num_hidden_groups": 1, "inner_group_num": 1},
    {"parameter_sharing": "attention", "num_hidden_groups": 1, "inner_group_num": 1},
    {"parameter_sharing": "ffn", "num_hidden_groups": 1, "inner_group_num": 1},
    {"parameter_sharing": "none", "num_hidden_groups": 1, "inner_group_num": 1},
)])
@pytest.mark.parametrize("recompute", [False, True])
def test_chained_weight_gradients_equal_summing_at_the_variable(monkeypatch, changes,
                                                                recompute):
    (loss_chain, chained), (loss_plain, at_variable) = _traced_with_and_without_chain(
        monkeypatch, tiny_config(**changes), recompute_layers=recompute)
    np.testing.assert_allclose(loss_chain.numpy(), loss_plain.numpy(), rtol=1e-6)
    assert set(chained) == set(at_variable)
    for path, grad in at_variable.items():
        want = tf.convert_to_tensor(grad).numpy()
        np.testing.assert_allclose(tf.convert_to_tensor(chained[path]).numpy(), want,
                                   rtol=1e-5, atol=1e-6 * np.abs(want).max(), err_msg=path)


@pytest.mark.parametrize("recompute", [pytest.param(False, marks=pytest.mark.slow),  # 4 s
                                       True])
def test_chained_weight_gradients_under_mixed_precision_in_a_traced_step(monkeypatch,
                                                                         recompute):
    """bf16 compute: the chain sums each application's bf16 gradient in float32; the
    per-use Keras autocast path gets the same maths (up to bf16 rounding)."""
    (_, chained), (_, at_variable) = _traced_with_and_without_chain(
        monkeypatch, tiny_config(), dtype="mixed_bfloat16", recompute_layers=recompute)
    _assert_close_up_to_bf16(chained, at_variable)


def _gradient_peak_bytes(model, batch):
    """Allocator peak above the resting level while computing the loss's gradients."""
    step = tf.function(lambda: _loss_and_gradients(model, batch)[1])
    step()  # trace, optimise and allocate once
    tf.config.experimental.reset_memory_stats("CPU:0")
    before = tf.config.experimental.get_memory_info("CPU:0")["current"]
    step()
    return tf.config.experimental.get_memory_info("CPU:0")["peak"] - before


@pytest.mark.slow  # 9 s
def test_shared_weight_gradients_are_summed_as_they_are_produced(monkeypatch):
    """With one shared block applied L times, the gradient pass holds one partial sum
    per weight: its peak memory must not grow by a weight gradient per extra layer (the
    control, summing at the variable, grows by about that)."""
    try:
        tf.config.experimental.get_memory_info("CPU:0")
    except (ValueError, tf.errors.OpError) as error:
        pytest.skip(f"this TensorFlow build keeps no CPU allocator statistics: {error}")
    # Weights dominate (3.1 MB of gradients per application), activations are tiny.
    sizes = dict(vocab_size=64, embedding_size=32, hidden_size=256, num_attention_heads=4,
                 intermediate_size=1024, num_hidden_groups=1, inner_group_num=1,
                 max_position_embeddings=16)
    per_layer = 4 * (4 * 256 * 256 + 2 * 256 * 1024 + 4 * 256 + 1024 + 256)
    peaks = {}
    for chained in (True, False):
        with monkeypatch.context() as patch:
            for layers in (2, 12):
                config = tiny_config(num_hidden_layers=layers, **sizes)
                model = AlbertPretrainer(config)
                model.build()
                if not chained:
                    _without_chain(patch, model)
                batch = random_batch(config, batch=2, seq=8)
                batch["masked_lm_positions"] = np.array([[1, 3], [2, 5]], "int32")
                peaks[chained, layers] = _gradient_peak_bytes(model, batch)
    if not peaks[False, 12]:
        pytest.skip("this TensorFlow build reports no CPU allocator peak")
    growth = {chained: (peaks[chained, 12] - peaks[chained, 2]) / per_layer
              for chained in (True, False)}
    # Measured: the control ~10 (every per-layer gradient alive), the chain ~0.2.
    assert growth[False] > 8, f"the control should hold ~10 extra gradients: {growth}"
    assert growth[True] < 1, f"extra weight gradients held per 10 more layers: {growth}"


def _scalar_scalings(graph):
    """The Mul ops of a traced graph (the attention is traced inline) that multiply a
    tensor by a scalar, as (op, the other input's producing op)."""
    found = []
    for op in graph.get_operations():
        if op.type != "Mul":
            continue
        a, b = op.inputs
        for scalar, other in ((a, b), (b, a)):
            if scalar.shape.rank == 0 and other.shape.rank != 0:
                found.append((op, other.op))
    return found


def _traced_encoder(config, dtype, training):
    """(the encoder's sequence output as a tf.function of its inputs, those inputs)."""
    model = AlbertPretrainer(config, dtype=dtype)
    model.build()
    batch = _pretraining_batch(config)
    inputs = {k: tf.constant(batch[k]) for k in ("input_ids", "input_mask", "segment_ids")}
    return tf.function(lambda x: model.encoder(x, training=training)["sequence_output"]), inputs


@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
@pytest.mark.parametrize("training", [False, True])
def test_float32_attention_scales_the_scores_not_the_query_weights(dtype, training):
    """float32 computes softmax(q k^T / sqrt(D) + mask) in the original's order, which
    grappler can fuse into the score product (no per-application scaling of the query
    weights); bf16 scales the query kernel and bias instead, once per application, as
    its scores are cast to float32 before the mask add. Dropout is on, so its own
    scalings of the probabilities are in the graph too and must not be counted."""
    config = tiny_config(attention_probs_dropout_prob=0.1, hidden_dropout_prob=0.1)
    encoder, inputs = _traced_encoder(config, dtype, training)
    graph = encoder.get_concrete_function(inputs).graph
    applications = config.num_hidden_layers * config.inner_group_num
    scalings = _scalar_scalings(graph)
    score_scalings = [op for op, other in scalings if other.type.startswith("BatchMatMul")]
    hidden = config.hidden_size
    weight_scalings = [op for op, other in scalings
                       if other.outputs[0].shape.as_list() in ([hidden, hidden], [hidden])
                       and not other.type.startswith(("MatMul", "BatchMatMul"))]
    if dtype == "float32":
        assert not weight_scalings, [op.name for op in weight_scalings]
        assert len(score_scalings) == applications
    else:  # the query kernel and bias, per application
        assert len(weight_scalings) == 2 * applications
        assert not score_scalings


def _executed_kernels(fn, *args):
    """[(op name, kernel type)] that one call of the traced `fn` executes, read from a
    profiler trace: the graph after grappler's rewrites (fusions), not the traced one."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    fn(*args)  # trace, optimise and warm up outside the profile
    logdir = tempfile.mkdtemp(prefix="albert_trace_")
    try:
        tf.profiler.experimental.start(logdir)
        fn(*args)
        tf.profiler.experimental.stop()
        space = xplane_pb2.XSpace()
        (path,) = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    kernels = []
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                op_name, _, kernel = name.rpartition(":")
                if op_name and "/" in op_name and " " not in kernel:
                    kernels.append((op_name, kernel))
    return kernels


def test_float32_inference_fuses_every_score_scaling_and_mask_add_into_its_product():
    """With oneDNN, grappler fuses q k^T, * 1/sqrt(D) and + mask into one op; its CSE
    sorts a commutative op's inputs by name, so the shared scale and mask are named
    to sort after the encoder's ops. 12 applications, as ALBERT-base (the names of
    their scopes decide the order). Without oneDNN the products run as TensorFlow's
    plain BatchMatMulV2 (two per application) and no oneDNN kernel runs."""
    config = tiny_config(num_hidden_layers=12, num_hidden_groups=1, inner_group_num=1)
    kernels = _executed_kernels(*_traced_encoder(config, "float32", training=False))
    if not onednn_on():
        assert not [kernel for _, kernel in kernels if kernel.startswith("_Mkl")], kernels
        assert [kernel for _, kernel in kernels].count("BatchMatMulV2") == 24, kernels
        return
    fused = [name for name, kernel in kernels if kernel == "_MklFusedBatchMatMulV2"]
    # A layer's own scale or mask pass. (Where oneDNN's GEMMs are AVX2 the FFN's first
    # product, bias and GELU run in XLA and its residual add stays: not the attention's.)
    unfused = [name for name, kernel in kernels
               if "inner_group" in name and "attention" in name and kernel in ("Mul", "AddV2")]
    assert len(fused) == 12 and not unfused, (fused, unfused)


@pytest.mark.parametrize("dtype,training,expected", [
    ("float32", False, True), ("float32", True, False), ("mixed_bfloat16", False, False)])
def test_float32_inference_runs_the_block_layer_norms_in_onednn(dtype, training, expected):
    """float32 inference: the blocks' LayerNorms are oneDNN's kernel, fed by one fused
    product + bias + residual add; training and bf16 keep the XLA add + LayerNorm, as
    every case does where oneDNN is off."""
    expected = expected and fused_ops.onednn_layer_norm_available()
    if onednn_on() and not tf.config.list_logical_devices("GPU"):
        require_onednn_layer_norm()  # asserts the op is in the wheel
    config = tiny_config()
    encoder, inputs = _traced_encoder(config, dtype, training)
    graph = encoder.get_concrete_function(inputs).graph
    norms = [op for op in graph.get_operations() if op.type == "_MklLayerNorm"]
    xla_norms = [op for op in graph.get_operations()
                 if op.type in ("PartitionedCall", "StatefulPartitionedCall")
                 and "_add_layer_norm_forward" in op.get_attr("f").name]
    applications = config.num_hidden_layers * config.inner_group_num
    assert len(norms) == (2 * applications if expected else 0)
    assert len(xla_norms) == (0 if expected else 2 * applications)
