"""LAMB / AdamW single updates and the schedule, against a NumPy transcription of the original."""
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.training import optimization
from albert_tf.training.optimization import AdamWeightDecay, Lamb, WarmupPolynomialDecay

EXCLUDE = ["LayerNorm", "layer_norm", "bias"]


def numpy_update(kind, w, g, m, v, lr, name, wd=0.01, b1=0.9, b2=0.999, eps=1e-6):
    """One step of the original's AdamWeightDecayOptimizer / LAMBOptimizer for one variable."""
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    u = m / (np.sqrt(v) + eps)
    excluded = any(re.search(p, name) for p in EXCLUDE)
    if wd and not excluded:
        u = u + wd * w
    ratio = 1.0
    if kind == "lamb" and not excluded:
        wn, un = np.linalg.norm(w), np.linalg.norm(u)
        ratio = wn / un if wn > 0 and un > 0 else 1.0
    return w - ratio * lr * u, m, v


class Toy(keras.layers.Layer):
    """Variables whose paths exercise the exclusion rules."""

    def build(self, _=None):
        rng = np.random.default_rng(0)
        init = lambda shape: keras.initializers.Constant(rng.normal(0, 1, shape))  # noqa: E731
        self.kernel = self.add_weight(name="kernel", shape=(3, 4), initializer=init((3, 4)))
        self.bias = self.add_weight(name="bias", shape=(4,), initializer=init((4,)))
        self.gamma = self.add_weight(name="LayerNorm_gamma", shape=(4,), initializer=init((4,)))
        self.zero = self.add_weight(name="zero_kernel", shape=(2,), initializer="zeros")


def make_toy(name="bias_named_model"):
    toy = Toy(name=name)  # a model name containing "bias" must not exclude every variable
    toy.build()
    return toy


@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
@pytest.mark.parametrize("kind", ["lamb", "adamw"])
def test_two_updates_match_numpy(kind, traced):
    """Eagerly the update runs as plain ops; in a traced step as one XLA kernel per
    variable (`_update_xla`): both against the NumPy transcription."""
    toy = make_toy()
    variables = [toy.kernel, toy.bias, toy.gamma, toy.zero]
    cls = Lamb if kind == "lamb" else AdamWeightDecay
    opt = cls(learning_rate=0.05, weight_decay_rate=0.01, epsilon=1e-6,
              exclude_from_weight_decay=EXCLUDE)
    apply = lambda grads: opt.apply(grads, variables)  # noqa: E731
    if traced:
        apply = tf.function(apply)
        graph = apply.get_concrete_function([tf.TensorSpec(v.shape) for v in variables]).graph
        kernels = [op for op in graph.get_operations()
                   if op.type in ("StatefulPartitionedCall", "PartitionedCall")
                   and "_update" in op.get_attr("f").name]
        assert len(kernels) == len(variables), "the update should be one XLA call per variable"
    state = {v.path: (v.numpy().astype(np.float64), np.zeros(v.shape), np.zeros(v.shape))
             for v in variables}
    rng = np.random.default_rng(1)
    for _ in range(2):
        grads = [rng.normal(0, 1, v.shape).astype("float32") for v in variables]
        grads[3] = np.zeros(2, "float32")  # zero weights, zero gradient: ratio falls back to 1
        apply(grads)
        for v, g in zip(variables, grads):
            w, m, vv = state[v.path]
            state[v.path] = numpy_update(kind, w, g.astype(np.float64), m, vv, 0.05,
                                         v.path.split("/", 1)[1])
    for v in variables:
        np.testing.assert_allclose(v.numpy(), state[v.path][0], rtol=1e-5, atol=1e-6)


def test_exclusion_rules_on_model_paths():
    toy = make_toy()
    lamb = Lamb(weight_decay_rate=0.01, exclude_from_weight_decay=EXCLUDE)
    assert lamb.uses_weight_decay(toy.kernel) and lamb.uses_layer_adaptation(toy.kernel)
    for var in (toy.bias, toy.gamma):
        assert not lamb.uses_weight_decay(var) and not lamb.uses_layer_adaptation(var)
    adamw = AdamWeightDecay(weight_decay_rate=0.01, exclude_from_weight_decay=EXCLUDE)
    assert not adamw.uses_layer_adaptation(toy.kernel)
    custom = Lamb(weight_decay_rate=0.01, exclude_from_weight_decay=EXCLUDE,
                  exclude_from_layer_adaptation=["kernel"])
    assert not custom.uses_layer_adaptation(toy.kernel) and custom.uses_layer_adaptation(toy.bias)
    assert not Lamb(weight_decay_rate=0.0).uses_weight_decay(toy.kernel)


def test_albert_variables_excluded_as_in_the_original():
    from albert_tf import AlbertConfig, AlbertPretrainer
    from albert_tf.checkpoints import names as tf1_names
    model = AlbertPretrainer(AlbertConfig(vocab_size=20, embedding_size=8, hidden_size=16,
                                          num_hidden_layers=1, num_attention_heads=2,
                                          intermediate_size=16))
    lamb = optimization.create_optimizer(1e-3, 10, 0)
    for tf1_name, var in tf1_names.pretrainer_variables(model).items():
        original_excluded = any(re.search(p, tf1_name) for p in EXCLUDE)
        assert lamb.uses_weight_decay(var) == (not original_excluded), tf1_name
        assert lamb.uses_layer_adaptation(var) == (not original_excluded), tf1_name


def test_global_norm_clipping_before_the_update():
    toy = make_toy()
    opt = optimization.create_optimizer(0.1, 100, 0, optimizer="adamw", weight_decay_rate=0.0)
    big = np.full((3, 4), 10.0, "float32")  # global norm 40 -> clipped to 1
    before = toy.kernel.numpy().copy()
    opt.apply([big], [toy.kernel])
    g = big / np.linalg.norm(big)
    m, v = 0.1 * g, 0.001 * g * g
    expected = before - 0.1 * m / (np.sqrt(v) + 1e-6)  # lr at step 0 = 0.1 * (1 - 0/100)
    np.testing.assert_allclose(toy.kernel.numpy(), expected, rtol=1e-5)
    # Adam's update is nearly scale-invariant, so check the moments: they saw the clipped g.
    np.testing.assert_allclose(opt._m[0].numpy(), m, rtol=1e-6)
    np.testing.assert_allclose(opt._v[0].numpy(), v, rtol=1e-6)


def numpy_lr(step, init_lr, total, warmup, power, start):
    decayed = init_lr * (1 - min(step, total) / total) ** power
    if warmup and step - start < warmup:
        return init_lr * max(step - start, 0) / warmup
    return decayed


@pytest.mark.parametrize("warmup,power,start", [(0, 1.0, 0), (10, 1.0, 0), (10, 0.5, 5),
                                                (25, 2.0, 0)])
def test_schedule_matches_original(warmup, power, start):
    schedule = WarmupPolynomialDecay(1e-3, 100, warmup, power, start)
    for step in [0, 1, 4, 5, 9, 10, 14, 15, 24, 25, 50, 99, 100, 150]:
        assert float(schedule(step)) == pytest.approx(numpy_lr(step, 1e-3, 100, warmup, power,
                                                               start), rel=1e-5, abs=1e-12)
    # Decay uses the unshifted step: just after a shifted warmup the rate is below init_lr.
    if start:
        assert float(schedule(start + warmup)) < 1e-3


def test_schedule_drives_the_optimizer_step():
    toy = make_toy()
    opt = optimization.create_optimizer(1.0, 10, 4)
    lrs = []
    for _ in range(6):
        lrs.append(float(opt.learning_rate))
        opt.apply([np.zeros((3, 4), "float32")], [toy.kernel])
    assert lrs == pytest.approx([0.0, 0.25, 0.5, 0.75, 0.6, 0.5])


def test_serialization_and_bad_arguments():
    opt = optimization.create_optimizer(2e-3, 50, 5, poly_power=0.5)
    clone = Lamb.from_config(opt.get_config())
    assert clone.exclude_from_layer_adaptation_patterns == list(EXCLUDE)
    assert float(clone.learning_rate) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="unknown optimizer 'sgd'"):
        optimization.create_optimizer(1e-3, 10, 0, optimizer="sgd")
    with pytest.raises(ValueError, match="num_train_steps must be positive"):
        WarmupPolynomialDecay(1e-3, 0)


def test_works_under_tf_function_and_checkpoint(tmp_path):
    toy = make_toy("toy")
    opt = optimization.create_optimizer(0.01, 10, 0)
    step = tf.function(lambda g: opt.apply([g], [toy.kernel]))
    step(tf.ones((3, 4)))
    ckpt = tf.train.Checkpoint(optimizer=opt, toy=toy)
    path = ckpt.save(str(tmp_path / "ckpt"))
    kernel, iterations = toy.kernel.numpy(), int(opt.iterations)
    step(tf.ones((3, 4)))
    ckpt.restore(path)
    assert int(opt.iterations) == iterations == 1
    np.testing.assert_array_equal(toy.kernel.numpy(), kernel)
