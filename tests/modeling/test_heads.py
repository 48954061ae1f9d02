"""Fine-tuning heads and models (classifier, SQuAD v1/v2, RACE) against NumPy formulas."""
import numpy as np
import pytest

from albert_tf import AlbertClassifier, AlbertMultipleChoice, AlbertSpanLabeler, AlbertSquadV2
from albert_tf.modeling import heads, layers, models
from albert_tf.checkpoints import names as tf1_names
from tests.helpers import numpy_reference as ref
from tests.modeling.test_numerics import random_batch, randomize, tiny_config

TOL = 1e-5


def weights_by_tf1_name(model):
    return {name: var.numpy() for name, var in tf1_names.variables_for(model).items()}


def encoder_reference(model, batch):
    w = weights_by_tf1_name(model)
    seq, pooled, _, _ = ref.encoder_forward(w, model.config.to_dict(), **batch)
    return w, seq, pooled


@pytest.mark.parametrize("num_labels", [3, 1])
def test_classifier_logits_and_loss(num_labels):
    model = AlbertClassifier(tiny_config(), num_labels=num_labels)
    tf1_names.variables_for(model)
    randomize(model.weights, seed=5)
    batch = random_batch(model.config)
    out = model(batch)
    w, _, pooled = encoder_reference(model, batch)
    logits = ref.classifier_logits(w, pooled)
    np.testing.assert_allclose(out["logits"].numpy(), logits, atol=TOL, rtol=TOL)
    if num_labels == 1:
        labels = {"label_ids": np.array([0.5, -1.0, 2.0], "float32")}
        want = ((logits[:, 0] - labels["label_ids"]) ** 2).mean()
        np.testing.assert_allclose(out["predictions"].numpy(), logits[:, 0], atol=TOL)
    else:
        labels = {"label_ids": np.array([2, 0, 1])}
        lp = ref.log_softmax(logits)
        want = -lp[np.arange(3), labels["label_ids"]].mean()
        np.testing.assert_allclose(out["probabilities"].numpy(), ref.softmax(logits), atol=TOL)
        assert out["predictions"].numpy().tolist() == logits.argmax(-1).tolist()
        acc = (logits.argmax(-1) == labels["label_ids"]).mean()
        assert float(models.classifier_losses(out, labels)["accuracy"]) == pytest.approx(acc)
    losses = models.classifier_losses(out, labels)
    np.testing.assert_allclose(float(losses["loss"]), want, rtol=TOL)


def test_classifier_dropout_only_in_training():
    model = AlbertClassifier(tiny_config(), num_labels=2, dropout_rate=0.5)
    batch = random_batch(model.config)
    np.testing.assert_array_equal(model(batch)["logits"].numpy(), model(batch)["logits"].numpy())
    assert not np.allclose(model(batch, training=True)["logits"].numpy(),
                           model(batch)["logits"].numpy())


def test_span_labeler_logits_and_loss():
    model = AlbertSpanLabeler(tiny_config())
    tf1_names.variables_for(model)
    randomize(model.weights, seed=6)
    batch = random_batch(model.config)
    out = model(batch)
    w, seq, _ = encoder_reference(model, batch)
    start, end = ref.squad_v1_logits(w, seq)
    np.testing.assert_allclose(out["start_logits"].numpy(), start, atol=TOL, rtol=TOL)
    np.testing.assert_allclose(out["end_logits"].numpy(), end, atol=TOL, rtol=TOL)
    labels = {"start_positions": np.array([1, 4, 0]), "end_positions": np.array([[3], [4], [9]])}
    losses = models.span_losses(out, labels)
    rows = np.arange(3)
    want = (-ref.log_softmax(start)[rows, labels["start_positions"]].mean()
            - ref.log_softmax(end)[rows, labels["end_positions"][:, 0]].mean()) / 2
    np.testing.assert_allclose(float(losses["loss"]), want, rtol=TOL)


def squad_v2_setup(seed=7):
    model = AlbertSquadV2(tiny_config(), start_n_top=3, end_n_top=2)
    tf1_names.variables_for(model)
    randomize(model.weights, seed=seed)
    batch = random_batch(model.config)
    p_mask = np.zeros((3, 11), "int32")
    p_mask[:, 1:5] = 1          # query and separators
    p_mask[1, 7:] = 1           # padding of row 1
    p_mask[2, 4:] = 1           # row 2: only positions 0 and 4.. masked -> few candidates
    p_mask[2, 4] = 0
    p_mask[2, 5] = 0
    p_mask[2, 6] = 0
    return model, dict(batch, p_mask=p_mask)


def test_squad_v2_teacher_forced_outputs_and_loss():
    model, batch = squad_v2_setup()
    starts = np.array([5, 6, 4])
    out = model(dict(batch, start_positions=starts))
    w, seq, _ = encoder_reference(model, {k: batch[k] for k in
                                          ("input_ids", "input_mask", "segment_ids")})
    want = ref.squad_v2_forward(w, seq, batch["p_mask"], start_positions=starts)
    valid = batch["p_mask"] == 0  # masked entries are ~-1e30; compare them loosely
    for key in ("start_log_probs", "end_log_probs"):
        got = out[key].numpy()
        np.testing.assert_allclose(got[valid], want[key][valid], atol=TOL, rtol=TOL)
        assert np.all(got[~valid] < -1e29)
    np.testing.assert_allclose(out["cls_logits"].numpy(), want["cls_logits"], atol=TOL, rtol=TOL)
    labels = {"start_positions": starts, "end_positions": np.array([6, 6, 5]),
              "is_impossible": np.array([0, 1, 0])}
    losses = models.squad_v2_losses(out, labels)
    rows = np.arange(3)
    ce = (-want["start_log_probs"][rows, starts].mean()
          - want["end_log_probs"][rows, labels["end_positions"]].mean())
    x, z = want["cls_logits"], labels["is_impossible"]
    bce = np.mean(np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0) - x * z)
    np.testing.assert_allclose(float(losses["loss"]), 0.5 * ce + 0.5 * bce, rtol=TOL)


def test_squad_v2_beam_search_matches_reference():
    model, batch = squad_v2_setup(seed=8)
    out = model(batch)
    w, seq, _ = encoder_reference(model, {k: batch[k] for k in
                                          ("input_ids", "input_mask", "segment_ids")})
    want = ref.squad_v2_forward(w, seq, batch["p_mask"], start_n_top=3, end_n_top=2)
    assert out["start_top_index"].shape == (3, 3) and out["end_top_index"].shape == (3, 6)
    np.testing.assert_array_equal(out["start_top_index"].numpy(), want["start_top_index"])
    np.testing.assert_array_equal(out["end_top_index"].numpy(), want["end_top_index"])
    np.testing.assert_allclose(out["start_top_log_probs"].numpy(), want["start_top_log_probs"],
                               atol=TOL, rtol=TOL)
    np.testing.assert_allclose(out["end_top_log_probs"].numpy(), want["end_top_log_probs"],
                               atol=TOL, rtol=TOL)
    np.testing.assert_allclose(out["cls_logits"].numpy(), want["cls_logits"], atol=TOL, rtol=TOL)
    # The best starts and ends are never masked positions.
    assert not np.any(np.take_along_axis(batch["p_mask"], out["start_top_index"].numpy(), 1))


def test_multiple_choice_logits_and_loss():
    config = tiny_config()
    model = AlbertMultipleChoice(config, num_choices=4)
    tf1_names.variables_for(model)
    randomize(model.weights, seed=9)
    flat = random_batch(config, batch=8, seq=9, seed=3)  # 2 examples x 4 choices
    batch = {k: v.reshape(2, 4, 9) for k, v in flat.items()}
    out = model(batch)
    w = weights_by_tf1_name(model)
    _, pooled, _, _ = ref.encoder_forward(w, config.to_dict(), **flat)
    logits = ref.classifier_logits(w, pooled).reshape(2, 4)
    np.testing.assert_allclose(out["logits"].numpy(), logits, atol=TOL, rtol=TOL)
    assert out["pooled_output"].shape == (2, 4, 32)
    labels = {"label_ids": np.array([3, 1])}
    want = -ref.log_softmax(logits)[[0, 1], [3, 1]].mean()
    np.testing.assert_allclose(float(models.multiple_choice_losses(out, labels)["loss"]), want,
                               rtol=TOL)
    with pytest.raises(ValueError, match=r"\[batch, num_choices, seq_length\]"):
        model(flat)


@pytest.mark.parametrize("factory", [
    lambda c: AlbertClassifier(c, num_labels=3, dropout_rate=0.2),
    lambda c: AlbertSpanLabeler(c),
    lambda c: AlbertSquadV2(c, start_n_top=4, end_n_top=3, dropout_rate=0.0),
    lambda c: AlbertMultipleChoice(c, num_choices=3),
])
def test_get_config_round_trip(factory):
    model = factory(tiny_config())
    clone = type(model).from_config(model.get_config())
    assert clone.get_config() == model.get_config()
    assert len(tf1_names.variables_for(clone)) == len(clone.weights)


def test_masked_lm_decoder_is_one_product_against_the_table():
    """The tied decoder is one [B*P, E] x [E, V] product: its table gradient is one
    GEMM, not a per-example [B, E, V] product summed over the batch. Values and
    gradients equal the batched einsum's."""
    import tensorflow as tf

    from albert_tf.modeling import heads

    batch, positions, hidden, embedding, vocab = 3, 4, 8, 6, 50
    head = heads.MaskedLMHead(vocab, embedding, hidden, "gelu", 0.5)
    head.build()
    randomize(head.weights)
    rng = np.random.default_rng(3)
    x = tf.constant(rng.normal(size=(batch, positions, hidden)), tf.float32)
    table = tf.constant(rng.normal(size=(vocab, embedding)), tf.float32)
    upstream = tf.constant(rng.normal(size=(batch, positions, vocab)), tf.float32)

    def value_and_table_grad(x, table):
        with tf.GradientTape() as tape:
            tape.watch(table)
            logits = head(x, table)
        return logits, tape.gradient(logits, table, output_gradients=upstream)

    traced = tf.function(value_and_table_grad)
    graph = traced.get_concrete_function(x, table).graph
    shapes = [tuple(t.shape.as_list()) for op in graph.get_operations() for t in op.outputs
              if t.shape.rank == 3]
    assert (batch, embedding, vocab) not in shapes and (batch, vocab, embedding) not in shapes
    logits, grad = traced(x, table)
    assert logits.shape == (batch, positions, vocab)
    h = head.layer_norm(head.transform(x))
    want = tf.einsum("bpe,ve->bpv", h, table) + head.output_bias
    np.testing.assert_allclose(logits.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    want_grad = tf.einsum("bpv,bpe->ve", upstream, h)
    np.testing.assert_allclose(grad.numpy(), want_grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make", [
    lambda: heads.MaskedLMHead(50, 6, 8, "gelu", 0.02, name="predictions"),
    lambda: heads.SentenceOrderHead(8, 0.02),
    lambda: heads.ClassificationHead(3, 8, 0.02, dropout_rate=0.2),
    lambda: heads.SpanHead(8, 0.02),
    lambda: heads.SquadV2Head(8, 0.02, start_n_top=4, end_n_top=3, dropout_rate=0.0),
    lambda: layers.FactorizedEmbedding(50, 6, 16, 2, 0.02, 0.1),
    lambda: layers.AttentionSublayer(8, 2, 0.02, 0.1, 0.0),
    lambda: layers.FeedForwardSublayer(8, 12, "gelu", 0.02, 0.1),
])
def test_every_layer_config_holds_its_constructor_arguments(make):
    """A layer's config is Keras's plus every argument of its __init__, so from_config
    rebuilds the same layer."""
    import inspect

    layer = make()
    config = layer.get_config()
    arguments = [name for name in inspect.signature(type(layer).__init__).parameters
                 if name not in ("self", "kwargs")]
    assert set(arguments) <= set(config)
    assert type(layer).from_config(config).get_config() == config


def test_every_public_layer_is_registered_for_keras_loading():
    """ConfiguredLayer is an abstract base: the layers themselves carry the registration
    (`albert_tf>Name`), LayerNorm included, so a saved model holding one loads."""
    import keras

    for cls in (layers.LayerNorm, layers.FactorizedEmbedding, layers.AttentionSublayer,
                layers.FeedForwardSublayer, heads.MaskedLMHead, heads.SentenceOrderHead,
                heads.ClassificationHead, heads.SpanHead, heads.SquadV2Head):
        assert keras.saving.get_registered_name(cls) == f"albert_tf>{cls.__name__}"
    norm = layers.LayerNorm(name="LayerNorm")
    assert type(keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(norm))) is layers.LayerNorm
