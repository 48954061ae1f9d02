"""Masking, sequence lengths, sharing modes, mixed precision, XLA and serialization."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from tests.modeling.test_numerics import random_batch, randomize, tiny_config


@pytest.fixture
def global_policy():
    """Sets a global Keras dtype policy for one test and restores float32 afterwards."""
    def set_policy(name):
        keras.mixed_precision.set_global_policy(name)
    yield set_policy
    keras.mixed_precision.set_global_policy("float32")


def test_padding_does_not_change_real_token_outputs():
    encoder = AlbertEncoder(tiny_config())
    randomize(encoder.weights)
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 61, (2, 6)).astype("int32")
    short = encoder({"input_ids": ids})["sequence_output"].numpy()
    # Pad to 10 with garbage ids under mask 0: the 6 real positions must not move.
    padded_ids = np.concatenate([ids, rng.integers(0, 61, (2, 4)).astype("int32")], axis=1)
    mask = np.concatenate([np.ones((2, 6)), np.zeros((2, 4))], axis=1).astype("int32")
    padded = encoder({"input_ids": padded_ids, "input_mask": mask})
    np.testing.assert_allclose(padded["sequence_output"].numpy()[:, :6], short, atol=1e-5)
    # ... and different garbage gives identical real-token outputs.
    padded_ids[:, 6:] = 0
    again = encoder({"input_ids": padded_ids, "input_mask": mask})["sequence_output"].numpy()
    np.testing.assert_allclose(again[:, :6], padded["sequence_output"].numpy()[:, :6],
                               atol=1e-6)


def test_variable_sequence_lengths_and_position_limit():
    config = tiny_config()
    encoder = AlbertEncoder(config)
    for seq in (1, 5, 24):
        out = encoder(random_batch(config, batch=2, seq=seq))
        assert out["sequence_output"].shape == (2, seq, 32)
        assert out["pooled_output"].shape == (2, 32)
    # One graph with unknown batch and length serves every shape.
    spec = {k: tf.TensorSpec([None, None], tf.int32)
            for k in ("input_ids", "input_mask", "segment_ids")}
    fn = tf.function(lambda b: encoder(b)["sequence_output"], input_signature=[spec])
    for batch, seq in ((2, 7), (3, 13)):
        assert fn(random_batch(config, batch, seq)).shape == (batch, seq, 32)
    with pytest.raises(ValueError, match=r"sequence length 25 exceeds max_position_embeddings \(24\)"):
        encoder(random_batch(config, batch=1, seq=25))


def test_grouped_sharing_reuses_objects():
    encoder = AlbertEncoder(tiny_config(num_hidden_layers=5, num_hidden_groups=2,
                                        inner_group_num=1))
    used = [encoder.layer_blocks(l)[0][0] for l in range(5)]
    # int(l / 5 * 2): layers 0-2 use group 0, layers 3-4 group 1.
    assert [encoder.attention_blocks.index(a) for a in used] == [0, 0, 0, 1, 1]
    assert len(encoder.attention_blocks) == 2


@pytest.mark.parametrize("mode", ["attention", "ffn"])
def test_partial_sharing_equals_unshared_model_with_tied_weights(mode):
    shared = AlbertEncoder(tiny_config(num_hidden_groups=1, inner_group_num=1,
                                       parameter_sharing=mode))
    shared.build()
    randomize(shared.weights, seed=7)
    unshared = AlbertEncoder(shared.config.replace(parameter_sharing="none"))
    unshared.build()
    for l in range(3):
        (sa, sf), = shared.layer_blocks(l)
        (ua, uf), = unshared.layer_blocks(l)
        for src, dst in ((sa, ua), (sf, uf)):
            for s, d in zip(src.weights, dst.weights):
                d.assign(s)
    for a, b in zip(shared.embeddings.weights + shared.embedding_projection.weights
                    + shared.pooler.weights,
                    unshared.embeddings.weights + unshared.embedding_projection.weights
                    + unshared.pooler.weights):
        b.assign(a)
    batch = random_batch(shared.config)
    np.testing.assert_allclose(shared(batch)["sequence_output"].numpy(),
                               unshared(batch)["sequence_output"].numpy(), atol=1e-6)
    blocks = shared.attention_blocks if mode == "attention" else shared.ffn_blocks
    others = shared.ffn_blocks if mode == "attention" else shared.attention_blocks
    assert len(blocks) == 1 and len(others) == 3


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_policies(policy, global_policy):
    config = tiny_config()
    reference = AlbertPretrainer(config)
    reference.build()
    randomize(reference.weights, seed=11)
    batch = dict(random_batch(config), masked_lm_positions=np.array([[1, 2]] * 3, "int32"))
    want = reference(batch)

    global_policy(policy)
    model = AlbertPretrainer(config)
    model.build()
    for src, dst in zip(reference.weights, model.weights):
        dst.assign(src)
    out = model(batch)
    compute = policy.split("_")[1]
    assert all(v.dtype == "float32" for v in model.weights)  # variables stay float32
    assert out["encoder_outputs"][0].dtype == "float32"  # post-LN outputs are float32
    assert model.encoder.attention_blocks[0].query.compute_dtype == compute
    assert out["mlm_logits"].dtype == "float32" and out["sop_logits"].dtype == "float32"
    layer_norms = [l for l in model._flatten_layers()
                   if isinstance(l, keras.layers.LayerNormalization)]
    assert layer_norms and all(l.compute_dtype == "float32" for l in layer_norms)
    tol = 0.1 if compute == "bfloat16" else 0.02
    np.testing.assert_allclose(out["sequence_output"].numpy(), want["sequence_output"].numpy(),
                               atol=tol * 2)
    np.testing.assert_allclose(out["sop_logits"].numpy(), want["sop_logits"].numpy(), atol=tol * 4)
    # Also through the constructor argument, without a global policy.
    global_policy("float32")
    local = AlbertEncoder(config, dtype=policy)
    local.build()
    assert local.attention_blocks[0].query.compute_dtype == compute
    assert local(batch)["sequence_output"].dtype == "float32"


@pytest.mark.slow  # 3 s
def test_jit_compile_gives_the_same_outputs():
    config = tiny_config()
    model = AlbertPretrainer(config)
    model.build()
    randomize(model.weights, seed=2)
    batch = dict(random_batch(config), masked_lm_positions=np.array([[1, 2]] * 3, "int32"))
    eager = model(batch)
    compiled = tf.function(lambda b: model(b), jit_compile=True)(batch)
    for key in ("sequence_output", "pooled_output", "mlm_logits", "sop_logits"):
        np.testing.assert_allclose(compiled[key].numpy(), eager[key].numpy(), atol=1e-5)


def test_dropout_only_in_training():
    config = tiny_config(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.3)
    encoder = AlbertEncoder(config)
    batch = random_batch(config)
    a = encoder(batch)["sequence_output"].numpy()
    np.testing.assert_array_equal(a, encoder(batch)["sequence_output"].numpy())
    b = encoder(batch, training=True)["sequence_output"].numpy()
    assert not np.allclose(a, b)


@pytest.mark.parametrize("cls", [AlbertEncoder, AlbertPretrainer])
def test_config_round_trip_and_keras_save_load(cls, tmp_path):
    config = tiny_config(parameter_sharing="none", num_hidden_groups=1, inner_group_num=1)
    config.extra["net_structure_type"] = 0
    model = cls(config)
    model.build()
    randomize(model.weights, seed=4)
    clone = cls.from_config(model.get_config())
    assert clone.config == config
    batch = random_batch(config)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, cls) and loaded.config == config
    want, got = model(batch), loaded(batch)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(got[key].numpy(), want[key].numpy())
    weights_path = str(tmp_path / "model.weights.h5")
    model.save_weights(weights_path)
    clone.build()
    clone.load_weights(weights_path)
    np.testing.assert_array_equal(clone(batch)["sequence_output"].numpy(),
                                  want["sequence_output"].numpy())


def test_dtype_policy_survives_serialization():
    model = AlbertEncoder(tiny_config(), dtype="mixed_bfloat16")
    clone = AlbertEncoder.from_config(model.get_config())
    assert clone.dtype_policy.name == "mixed_bfloat16"


def test_config_accepts_dict():
    model = AlbertEncoder(tiny_config().to_dict())
    assert isinstance(model.config, AlbertConfig)


@pytest.mark.parametrize("mode", ["all", "attention", "none"])
def test_tf_train_checkpoint_holds_every_weight(mode, tmp_path):
    """Model-only tf.train.Checkpoint round trip (evaluation restores use it)."""
    config = tiny_config(parameter_sharing=mode, **({} if mode == "all" else
                                                    dict(num_hidden_groups=1, inner_group_num=1)))
    model = AlbertPretrainer(config)
    model.build()
    randomize(model.weights, seed=8)
    path = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
    saved = [n for n, _ in tf.train.list_variables(path) if n.startswith("model/")]
    assert len(saved) == len(model.weights)
    clone = AlbertPretrainer(config)
    clone.build()
    tf.train.Checkpoint(model=clone).restore(path).assert_existing_objects_matched()
    for a, b in zip(model.weights, clone.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
