"""The Keras encoder and pretrainer against a NumPy reference written from the formulas."""
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import albert_tf
from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.modeling import layers
from albert_tf.checkpoints import names as tf1_names
from tests.helpers import numpy_reference as ref

TOL = 1e-5


def tiny_config(**changes):
    values = dict(vocab_size=61, embedding_size=16, hidden_size=32, num_hidden_layers=3,
                  num_hidden_groups=2, num_attention_heads=4, intermediate_size=48,
                  inner_group_num=2, max_position_embeddings=24)
    values.update(changes)
    return AlbertConfig(**values)


def randomize(variables, seed=0, matrix_scale=0.3, vector_scale=0.5):
    """Gives every variable (incl. LayerNorm and biases) non-trivial random values: normal
    with standard deviation `matrix_scale` (matrices) or `vector_scale` (vectors; LayerNorm
    gammas around 1)."""
    rng = np.random.default_rng(seed)
    for var in variables:
        scale = matrix_scale if len(var.shape) > 1 else vector_scale
        value = rng.normal(0.0, scale, var.shape)
        if var.path.endswith("gamma"):
            value += 1.0
        var.assign(value.astype("float32"))


def random_batch(config, batch=3, seq=11, seed=1):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, config.vocab_size, (batch, seq)).astype("int32")
    mask = np.ones((batch, seq), "int32")
    for row, length in ((1, 7), (2, 4)):  # padded rows
        if row < batch:
            mask[row, length:] = 0
    segments = np.zeros((batch, seq), "int32")
    segments[:, 5:] = 1
    return {"input_ids": ids, "input_mask": mask, "segment_ids": segments}


def tf1_weights(name_map):
    return {name: var.numpy() for name, var in name_map.items()}


CONFIGS = {
    "groups2_inner2_E!=H": tiny_config(),
    "E==H": tiny_config(embedding_size=32, num_hidden_groups=1, inner_group_num=1),
    "no_sharing": tiny_config(num_hidden_groups=1, inner_group_num=1, parameter_sharing="none"),
    "relu_groups3": tiny_config(num_hidden_groups=3, inner_group_num=1, hidden_act="relu"),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_encoder_matches_numpy_reference(name):
    config = CONFIGS[name]
    encoder = AlbertEncoder(config)
    names = tf1_names.encoder_variables(encoder)
    randomize(encoder.weights)
    batch = random_batch(config)
    out = encoder(batch)
    cfg = config.to_dict()
    if config.parameter_sharing == "none":
        cfg["num_hidden_groups"] = config.num_hidden_layers
    seq, pooled, all_layers, emb = ref.encoder_forward(tf1_weights(names), cfg, **batch)
    np.testing.assert_allclose(out["sequence_output"].numpy(), seq, atol=TOL, rtol=TOL)
    np.testing.assert_allclose(out["pooled_output"].numpy(), pooled, atol=TOL, rtol=TOL)
    np.testing.assert_allclose(out["embedding_output"].numpy(), emb, atol=TOL, rtol=TOL)
    assert len(out["encoder_outputs"]) == config.num_hidden_layers * config.inner_group_num
    for got, want in zip(out["encoder_outputs"], all_layers):
        np.testing.assert_allclose(got.numpy(), want, atol=TOL, rtol=TOL)


def test_no_projection_when_embedding_equals_hidden():
    encoder = AlbertEncoder(CONFIGS["E==H"])
    names = tf1_names.encoder_variables(encoder)
    assert encoder.embedding_projection is None
    assert not any("embedding_hidden_mapping_in" in n for n in names)
    assert "bert/encoder/embedding_hidden_mapping_in/kernel" in \
        tf1_names.encoder_variables(AlbertEncoder(tiny_config()))


def test_official_variable_names_and_2d_shapes():
    config = tiny_config()
    names = tf1_names.pretrainer_variables(AlbertPretrainer(config))
    h, e, i, v = 32, 16, 48, 61
    p = "bert/encoder/transformer/group_1/inner_group_1/"
    expected = {
        "bert/embeddings/word_embeddings": (v, e),
        "bert/embeddings/token_type_embeddings": (2, e),
        "bert/embeddings/position_embeddings": (24, e),
        "bert/embeddings/LayerNorm/gamma": (e,),
        "bert/encoder/embedding_hidden_mapping_in/kernel": (e, h),
        p + "attention_1/self/query/kernel": (h, h),
        p + "attention_1/self/value/bias": (h,),
        p + "attention_1/output/dense/kernel": (h, h),
        p + "LayerNorm/beta": (h,),
        p + "ffn_1/intermediate/dense/kernel": (h, i),
        p + "ffn_1/intermediate/output/dense/kernel": (i, h),
        p + "LayerNorm_1/gamma": (h,),
        "bert/pooler/dense/kernel": (h, h),
        "cls/predictions/transform/dense/kernel": (h, e),
        "cls/predictions/transform/LayerNorm/beta": (e,),
        "cls/predictions/output_bias": (v,),
        "cls/seq_relationship/output_weights": (2, h),
        "cls/seq_relationship/output_bias": (2,),
    }
    for name, shape in expected.items():
        assert tuple(names[name].shape) == shape, name
    # 2 groups x 2 inner groups x 16 variables per block, plus 5 embedding, 2 projection,
    # 2 pooler and 7 head variables; every model variable appears exactly once.
    assert len(names) == 4 * 16 + 5 + 2 + 2 + 7
    model = AlbertPretrainer(config)
    model.build()
    assert len({id(v) for v in tf1_names.pretrainer_variables(model).values()}) == \
        len(model.weights)


@pytest.mark.parametrize("name", ["groups2_inner2_E!=H", "E==H"])
def test_pretrainer_logits_and_losses_match_reference(name):
    config = CONFIGS[name]
    model = AlbertPretrainer(config)
    names = tf1_names.pretrainer_variables(model)
    randomize(model.weights, seed=3)
    batch = random_batch(config)
    positions = np.array([[1, 3, 0], [2, 5, 6], [0, 1, 3]], "int32")
    out = model(dict(batch, masked_lm_positions=positions))
    mlm, sop = ref.pretrainer_forward(tf1_weights(names), config.to_dict(),
                                      batch["input_ids"], batch["input_mask"],
                                      batch["segment_ids"], positions)
    np.testing.assert_allclose(out["mlm_logits"].numpy(), mlm, atol=TOL * 10, rtol=TOL)
    np.testing.assert_allclose(out["sop_logits"].numpy(), sop, atol=TOL, rtol=TOL)
    assert out["mlm_logits"].shape == (3, 3, config.vocab_size)

    labels = {"masked_lm_ids": np.array([[4, 9, 0], [7, 1, 2], [3, 3, 0]], "int32"),
              "masked_lm_weights": np.array([[1, 1, 0], [1, 1, 1], [1, 1, 0]], "float32"),
              "next_sentence_labels": np.array([[1], [0], [1]], "int32")}
    losses = albert_tf.pretraining_losses(out, labels)
    mlm_loss, sop_loss = ref.pretraining_losses(mlm, sop, labels["masked_lm_ids"],
                                                labels["masked_lm_weights"],
                                                labels["next_sentence_labels"])
    np.testing.assert_allclose(float(losses["masked_lm_loss"]), mlm_loss, rtol=TOL)
    np.testing.assert_allclose(float(losses["sentence_order_loss"]), sop_loss, rtol=TOL)
    np.testing.assert_allclose(float(losses["loss"]), mlm_loss + sop_loss, rtol=TOL)
    w = labels["masked_lm_weights"]
    mlm_acc = ((mlm.argmax(-1) == labels["masked_lm_ids"]) * w).sum() / w.sum()
    sop_acc = (sop.argmax(-1) == labels["next_sentence_labels"][:, 0]).mean()
    assert float(losses["masked_lm_accuracy"]) == pytest.approx(mlm_acc)
    assert float(losses["sentence_order_accuracy"]) == pytest.approx(sop_acc)
    assert float(losses["masked_lm_weight"]) == 7.0


def test_mlm_loss_denominator_epsilon():
    # One weighted position with logits (0, 0): nll = log 2, loss = log2 / (1 + 1e-5).
    out = {"mlm_logits": np.zeros((1, 2, 2), "float32"), "sop_logits": np.zeros((1, 2), "float32")}
    labels = {"masked_lm_ids": np.array([[1, 0]]), "masked_lm_weights": np.array([[1.0, 0.0]]),
              "next_sentence_labels": np.array([0])}
    losses = albert_tf.pretraining_losses(out, labels)
    assert float(losses["masked_lm_loss"]) == pytest.approx(math.log(2) / (1 + 1e-5), rel=1e-6)
    assert float(losses["sentence_order_loss"]) == pytest.approx(math.log(2), rel=1e-6)


def test_mlm_decoder_is_tied_to_word_embeddings():
    model = AlbertPretrainer(tiny_config())
    model.build()
    assert len(model.masked_lm.weights) == 5  # transform kernel/bias, LayerNorm, output bias
    assert not any("word_embeddings" in v.path for v in model.masked_lm.weights)
    batch = random_batch(model.config)
    before = model(batch)["mlm_logits"].numpy()
    table = model.encoder.embedding_table
    table.assign(table.numpy() * 2.0)
    assert not np.allclose(model(batch)["mlm_logits"].numpy(), before)


def test_mlm_over_all_positions_without_masked_lm_positions():
    model = AlbertPretrainer(tiny_config())
    batch = random_batch(model.config, batch=2, seq=6)
    full = model(batch)["mlm_logits"].numpy()
    assert full.shape == (2, 6, 61)
    picked = model(dict(batch, masked_lm_positions=np.array([[5, 0], [2, 2]], "int32")))
    np.testing.assert_allclose(picked["mlm_logits"].numpy(), full[[[0, 0], [1, 1]], [[5, 0], [2, 2]]],
                               atol=1e-6)


def test_gelu_is_the_tanh_approximation():
    x = np.linspace(-6, 6, 101).astype("float32")
    np.testing.assert_allclose(layers.gelu_tanh(x).numpy(), ref.gelu(x.astype("float64")),
                               atol=1e-6)
    # The exact (erf) GELU differs visibly at x = -1: tanh form -0.158808, erf form -0.158655.
    assert float(layers.gelu_tanh(np.float32(-1.0))) == pytest.approx(-0.158808, abs=1e-6)


def test_layer_norm_epsilon_is_1e_12():
    encoder = AlbertEncoder(tiny_config())
    encoder.build()
    norms = [l for l in encoder._flatten_layers()
             if isinstance(l, keras.layers.LayerNormalization)]
    assert norms and all(l.epsilon == 1e-12 for l in norms)
    # A row of tiny variance (1e-8): epsilon 1e-12 normalises it to unit variance,
    # a 1e-3 epsilon (Keras' default) would shrink it to ~0.003.
    x = np.array([[[1.0, 1.0 + 2e-4, 1.0 - 2e-4, 1.0]]], "float32")
    y = norms[0](np.tile(x, (1, 1, 4))).numpy()
    assert np.std(y) == pytest.approx(1.0, rel=1e-2)


def _composite_gelu(x):
    return 0.5 * x * (1.0 + tf.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def _composite_layer_norm(x, gamma, beta):
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(variance + 1e-12) * gamma + beta


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gelu_hand_written_gradient_matches_autodiff(dtype):
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(scale=2.0, size=(4, 37)), tf.float32)
    upstream = tf.constant(rng.normal(size=(4, 37)), tf.float32)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        x_in = tf.cast(x, dtype)
        ours = tf.cast(layers.gelu_tanh(x_in), tf.float32)
        reference = _composite_gelu(tf.cast(x_in, tf.float32))
    assert layers.gelu_tanh(x_in).dtype == x_in.dtype
    grad_ours = tape.gradient(ours, x, output_gradients=upstream)
    grad_ref = tape.gradient(reference, x, output_gradients=upstream)
    # float32: the same function up to rounding; bfloat16: ours is computed in float32
    # and rounded once, so it is within one bf16 step of the float32 reference.
    tol = 1e-5 if dtype == "float32" else 2e-2
    np.testing.assert_allclose(ours.numpy(), reference.numpy(), atol=tol, rtol=tol)
    np.testing.assert_allclose(grad_ours.numpy(), grad_ref.numpy(), atol=tol, rtol=tol)


def test_layer_norm_hand_written_gradient_matches_autodiff():
    rng = np.random.default_rng(1)
    norm = layers.layer_norm("LayerNorm")
    norm.build((None, 24))
    norm.gamma.assign(rng.normal(size=24).astype("float32"))
    norm.beta.assign(rng.normal(size=24).astype("float32"))
    x = tf.constant(rng.normal(loc=3.0, scale=5.0, size=(2, 5, 24)), tf.float32)
    upstream = tf.constant(rng.normal(size=(2, 5, 24)), tf.float32)
    gamma, beta = norm.gamma, norm.beta
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours = norm(x)
        reference = _composite_layer_norm(x, tf.convert_to_tensor(gamma),
                                          tf.convert_to_tensor(beta))
    np.testing.assert_allclose(ours.numpy(), reference.numpy(), atol=1e-5)
    for a, b in zip(tape.gradient(ours, [x, gamma, beta], output_gradients=upstream),
                    tape.gradient(reference, [x, gamma, beta],
                                  output_gradients=upstream)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-4, rtol=1e-4)
    # bf16 input: normalised in float32, returned as float32 (the layer's dtype).
    assert norm(tf.cast(x, tf.bfloat16)).dtype == tf.float32


def test_default_mask_and_segments():
    encoder = AlbertEncoder(tiny_config())
    batch = random_batch(encoder.config)
    ones = dict(batch, input_mask=np.ones_like(batch["input_ids"]),
                segment_ids=np.zeros_like(batch["input_ids"]))
    np.testing.assert_allclose(encoder({"input_ids": batch["input_ids"]})["sequence_output"],
                               encoder(ones)["sequence_output"], atol=1e-6)


def test_bad_inputs():
    encoder = AlbertEncoder(tiny_config())
    with pytest.raises(KeyError, match="no 'input_ids'.*input_mask"):
        encoder({"input_mask": np.ones((1, 3), "int32")})
    with pytest.raises(TypeError, match="called with a dict"):
        encoder(np.ones((1, 3), "int32"))
