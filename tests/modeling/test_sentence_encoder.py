"""The sentence encoder's pooling (the pipelines' NumPy pooling, itself checked against
sentence-transformers) and its losses against references written from sentence-transformers'
definitions of CoSENTLoss and MultipleNegativesRankingLoss."""
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.modeling.sentence_encoder import (AlbertSentenceEncoder, SentencePooling,
                                                 cosent_loss, ranking_loss)
from albert_tf.pipelines.sentence_embedding import pool


@pytest.mark.parametrize("modes, normalize", [(("mean",), False), (("max",), False),
                                              (("cls",), True), (("mean_sqrt_len",), False),
                                              (("mean", "cls", "max"), True)])
def test_pooling_layer_equals_the_pipelines_pooling(modes, normalize):
    rng = np.random.default_rng(0)
    hidden = rng.normal(0, 1, [4, 7, 5]).astype(np.float32)
    mask = (np.arange(7)[None, :] < np.array([[7], [3], [1], [5]])).astype(np.int32)
    layer = SentencePooling(modes, normalize)
    # Several modes: concatenated in sentence-transformers' order, whatever order was given.
    assert layer.pooling == tuple(m for m in ("cls", "max", "mean", "mean_sqrt_len")
                                  if m in modes)
    got = layer(tf.constant(hidden), tf.constant(mask)).numpy()
    np.testing.assert_allclose(got, pool(hidden, mask, layer.pooling, normalize), atol=1e-6)


def cosines(a, b):
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return a @ b.T


def test_cosent_is_log_one_plus_the_sum_over_misordered_pairs():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0, 1, [6, 8]), rng.normal(0, 1, [6, 8])
    scores = np.array([0.0, 2.5, 1.0, 2.5, 4.0, 0.5])
    cos = np.diag(cosines(a, b)) * 20
    terms = [np.exp(cos[i] - cos[j]) for i in range(6) for j in range(6)
             if scores[i] < scores[j]]
    reference = np.log(1 + np.sum(terms))
    got = float(cosent_loss(tf.constant(a, tf.float32), tf.constant(b, tf.float32),
                            tf.constant(scores, tf.float32)))
    assert got == pytest.approx(reference, rel=1e-5)


def test_ranking_loss_is_the_cross_entropy_of_each_rows_own_candidate():
    rng = np.random.default_rng(2)
    anchors, candidates = rng.normal(0, 1, [4, 8]), rng.normal(0, 1, [7, 8])  # 3 hard negatives
    logits = cosines(anchors, candidates) * 20
    logits -= logits.max(axis=1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    reference = -np.mean([log_probs[i, i] for i in range(4)])
    got = float(ranking_loss(tf.constant(anchors, tf.float32),
                             tf.constant(candidates, tf.float32)))
    assert got == pytest.approx(reference, rel=1e-5)


def test_the_encoders_checkpoint_and_config_are_the_encoders():
    from albert_tf.checkpoints import names

    config = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                          num_attention_heads=2, intermediate_size=32, max_position_embeddings=8)
    model = AlbertSentenceEncoder(config, pooling=["max", "cls"], normalize=True)
    model.build()
    assert model.pooling == ["cls", "max"]  # sentence-transformers' concatenation order
    assert all(name.startswith("bert/") for name in names.variables_for(model))
    rebuilt = AlbertSentenceEncoder.from_config(model.get_config())
    assert (rebuilt.pooling, rebuilt.normalize) == (["cls", "max"], True)
    with pytest.raises(ValueError, match="--pooling median: one or more of cls, max, mean"):
        AlbertSentenceEncoder(config, pooling=["median"])
