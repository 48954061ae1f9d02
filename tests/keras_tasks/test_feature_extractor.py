"""`AlbertFeatureExtractor`: the encoder's outputs on raw text (texts and pairs); its
network trains under a head of your own; `.keras` round trips; fit is refused in one line."""
import keras
import numpy as np
import pytest

import albert_tf
from albert_tf.errors import UserValueError

TEXTS = ["a gripping film", "dull and far too long", "I loved every minute"]


@pytest.fixture(scope="module")
def extractor(models):
    return albert_tf.from_pretrained(models["mlm"], "feature-extraction", sequence_length=16)


def test_predict_gives_the_encoders_outputs(extractor, models):
    got = extractor.predict(TEXTS, verbose=0)
    features = extractor.preprocessor(TEXTS)
    want = extractor.network(features)
    assert got["sequence_output"].shape == (3, 16, extractor.config.hidden_size)
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got["input_mask"], features["input_mask"])
    source = albert_tf.from_pretrained(models["mlm"])  # the masked LM's own encoder
    np.testing.assert_allclose(
        source.network.encoder(features)["pooled_output"], got["pooled_output"], rtol=1e-5,
        atol=1e-5)
    pairs = extractor.predict((TEXTS, TEXTS[::-1]), verbose=0)
    assert pairs["pooled_output"].shape == (3, extractor.config.hidden_size)


def test_its_encoder_trains_under_your_own_head(extractor, tmp_path):
    """The documented way to train it: a Keras model over .network, fed the
    preprocessor's token features."""
    names = ("input_ids", "input_mask", "segment_ids")
    inputs = {name: keras.Input((16,), dtype="int32", name=name) for name in names}
    pooled = extractor.network(inputs)["pooled_output"]
    model = keras.Model(inputs, keras.layers.Dense(2)(pooled))
    model.compile(keras.optimizers.Adam(1e-3),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    features = {k: np.asarray(v) for k, v in extractor.preprocessor(TEXTS).items()}
    before = extractor.network.get_weights()[0].copy()
    model.fit(features, np.array([1, 0, 1]), epochs=2, verbose=0)
    assert not np.array_equal(extractor.network.get_weights()[0], before)

    path = str(tmp_path / "extractor.keras")
    extractor.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, albert_tf.AlbertFeatureExtractor)
    np.testing.assert_allclose(loaded.predict(TEXTS, verbose=0)["pooled_output"],
                               extractor.predict(TEXTS, verbose=0)["pooled_output"],
                               rtol=1e-6, atol=1e-6)


def test_fit_is_refused_in_one_line(extractor):
    with pytest.raises(UserValueError, match="feature-extraction has no training objective"):
        extractor.fit(TEXTS, [0, 1, 0])
    with pytest.raises(UserValueError, match="feature-extraction: unknown option"):
        albert_tf.from_pretrained(extractor, num_classes=2)
    with pytest.raises(UserValueError, match="no CLI serves feature-extraction: save\\("
                                             "\"model.keras\"\\), save_to_preset"):
        extractor.export("x")
    classifier = albert_tf.from_pretrained(extractor, "text-classification", num_classes=2)
    np.testing.assert_array_equal(classifier.network.encoder.get_weights()[0],
                                  extractor.network.get_weights()[0])


@pytest.mark.slow  # ~6 s on AMD EPYC Zen 3
def test_a_backbone_preset_round_trips(extractor, tmp_path):
    files = extractor.save_to_preset(str(tmp_path / "preset"))
    assert {"config.json", "model.weights.h5", "vocabulary.spm"} <= {
        name.rsplit("/", 1)[-1] for name in map(str, files)}
    again = albert_tf.from_pretrained(str(tmp_path / "preset"), sequence_length=16)
    assert isinstance(again, albert_tf.AlbertFeatureExtractor)
    np.testing.assert_allclose(again.predict(TEXTS, verbose=0)["sequence_output"],
                               extractor.predict(TEXTS, verbose=0)["sequence_output"],
                               rtol=1e-5, atol=1e-6)
