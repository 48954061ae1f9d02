"""`AlbertMaskedLM`: fill-mask equals `python -m albert_tf.fill_mask` on the same weights;
predict's logits are the network's at the masks; .keras and keras-hub presets round trip;
bad input gets one line."""
import keras
import numpy as np
import pytest

import albert_tf
from albert_tf.checkpoints import from_official_dir
from albert_tf.errors import UserValueError
from tests.helpers.hf_models import write_hf_dir, write_official_dir

TEXTS = ["The capital of France is [MASK].", "The [MASK] sat on the [MASK] mat."]


@pytest.fixture(scope="module")
def mlm_dir(tmp_path_factory, official_spm):
    return write_hf_dir(str(tmp_path_factory.mktemp("hf") / "mlm"), "masked_lm", official_spm,
                        seed=7)


@pytest.fixture(scope="module")
def masked_lm(mlm_dir):
    return albert_tf.from_pretrained(mlm_dir, sequence_length=32)


def test_fill_mask_is_the_fill_mask_commands(masked_lm, mlm_dir, official_spm, tmp_path):
    official_dir = str(tmp_path / "official")
    write_official_dir(official_dir, mlm_dir, official_spm)
    official = from_official_dir(official_dir)
    got = masked_lm.fill_mask(TEXTS, top_k=4, verbose=0)
    for text, answer in zip(TEXTS, got):
        want = official.fill_mask(text, top_k=4)
        assert len(answer) == len(want) == text.count("[MASK]")
        for mine, theirs in zip(answer, want):
            assert [t for t, _ in mine] == [official.tokenizer.token_text(t) for t, _ in theirs]
            np.testing.assert_allclose([p for _, p in mine], [p for _, p in theirs],
                                       rtol=1e-5)
    from_official = albert_tf.from_pretrained(official_dir, "fill-mask", sequence_length=32)
    np.testing.assert_allclose(from_official.predict(TEXTS, verbose=0),
                               masked_lm.predict(TEXTS, verbose=0), rtol=1e-5, atol=1e-5)


def test_predict_gives_the_logits_at_each_mask(masked_lm):
    logits = masked_lm.predict(TEXTS, batch_size=1, verbose=0)
    assert logits.shape == (2, 2, masked_lm.config.vocab_size) and logits.dtype == np.float32
    assert (logits[0, 1] == 0).all()  # the first text has one mask
    features = masked_lm.masked_features(TEXTS)
    assert features["num_masks"].tolist() == [1, 2]
    full = masked_lm.network({k: features[k] for k in ("input_ids", "input_mask",
                                                       "segment_ids")})["mlm_logits"].numpy()
    for row, positions in enumerate(features["masked_lm_positions"]):
        for slot in range(features["num_masks"][row]):
            np.testing.assert_allclose(logits[row, slot], full[row, positions[slot]],
                                       rtol=1e-4, atol=1e-4)


def test_keras_file_and_keras_hub_preset_round_trip(masked_lm, tmp_path):
    path = str(tmp_path / "mlm.keras")
    masked_lm.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, albert_tf.AlbertMaskedLM)
    np.testing.assert_array_equal(loaded.predict(TEXTS, verbose=0),
                                  masked_lm.predict(TEXTS, verbose=0))
    written = masked_lm.save_to_preset(str(tmp_path / "preset"))
    assert "task.weights.h5" in written
    preset = albert_tf.from_pretrained(str(tmp_path / "preset"), sequence_length=32)
    assert isinstance(preset, albert_tf.AlbertMaskedLM)
    np.testing.assert_allclose(preset.predict(TEXTS, verbose=0),
                               masked_lm.predict(TEXTS, verbose=0), rtol=1e-6, atol=1e-6)


def test_bad_input_gets_one_line(masked_lm):
    cases = [
        (lambda: masked_lm.fill_mask(["no mask here"]), "text 0 has no \\[MASK\\]"),
        (lambda: masked_lm.fill_mask("The [MASK]."), "x is one text"),
        (lambda: masked_lm.fill_mask(TEXTS, top_k=0), "top_k must be at least 1"),
        (lambda: masked_lm.predict(["[MASK] " + "word " * 40]),
         "more than sequence_length \\(32\\)"),
        (lambda: masked_lm.predict([3]), "text 0 is not a text"),
        (lambda: albert_tf.from_pretrained(masked_lm, top_k=3), "fill-mask: unknown option"),
        (lambda: masked_lm.export("x"), "fill-mask: export\\(\\) writes a CLI's serving "
                                        "files, and no CLI serves fill-mask: save\\("
                                        "\"model.keras\"\\), save_to_preset\\(dir\\)"),
    ]
    for call, message in cases:
        with pytest.raises(UserValueError, match=message):
            call()
