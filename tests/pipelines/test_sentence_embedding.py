"""The sentence-embedding pipeline: pooling as sentence-transformers defines it, its inputs and
options, and sentence-transformers directories read (and refused) in one line. The values are
checked against sentence-transformers itself in test_sentence_transformers_oracle.py."""
import json
import shutil

import numpy as np
import pytest

from albert_tf import pipeline
from albert_tf.checkpoints import sentence_transformers
from albert_tf.errors import UserError
from albert_tf.pipelines import sentence_embedding
from tests.helpers import hf_models

TEXTS = ["A man is playing a guitar.", "Someone plays music.", "An empty stage."]


@pytest.fixture(scope="module")
def st_dir(shared_data, tmp_path_factory):
    spm = str(shared_data / "spm_official" / "30k-clean.model")
    return hf_models.write_sentence_transformers_dir(
        str(tmp_path_factory.mktemp("st") / "model"), spm, ("cls", "mean"), normalize=True,
        seed=2, max_seq_length=16)


def test_pool_follows_sentence_transformers_definitions():
    hidden = np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2) - 5
    mask = np.array([[1, 1, 0], [1, 1, 1]])
    np.testing.assert_allclose(sentence_embedding.pool(hidden, mask, ["mean"]),
                               [[-4, -3], [3, 4]])
    np.testing.assert_allclose(sentence_embedding.pool(hidden, mask, ["max"]),
                               [[-3, -2], [5, 6]])  # padding never wins
    np.testing.assert_allclose(sentence_embedding.pool(hidden, mask, ["cls"]),
                               [[-5, -4], [1, 2]])
    np.testing.assert_allclose(sentence_embedding.pool(hidden, mask, ["mean_sqrt_len"]),
                               [[-8 / np.sqrt(2), -6 / np.sqrt(2)],
                                [9 / np.sqrt(3), 12 / np.sqrt(3)]], rtol=1e-6)
    both = sentence_embedding.pool(hidden, mask, ["cls", "mean"])  # in the order given
    np.testing.assert_allclose(both, [[-5, -4, -4, -3], [1, 2, 3, 4]])
    swapped = sentence_embedding.pool(hidden, mask, ["mean", "cls"])
    np.testing.assert_allclose(swapped, [[-4, -3, -5, -4], [3, 4, 1, 2]])
    unit = sentence_embedding.pool(hidden, mask, ["mean"], normalize=True)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), [1, 1], rtol=1e-6)
    assert sentence_embedding.pool(np.zeros([1, 2, 2]), np.ones([1, 2]), ["mean"],
                                   normalize=True).tolist() == [[0, 0]]  # no division by 0


def test_a_sentence_transformers_directory_pools_as_it_says(st_dir):
    embed = pipeline("sentence-embedding", model=st_dir, batch_size=2)
    vectors = embed(TEXTS)
    assert vectors.shape == (3, 128) and vectors.dtype == np.float32  # cls + mean of 64
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, rtol=1e-5)  # Normalize
    single = embed(TEXTS[0])
    assert single.shape == (128,)
    np.testing.assert_allclose(single, vectors[0], atol=1e-6)
    streamed = list(embed(iter(TEXTS)))
    np.testing.assert_allclose(np.stack(streamed), vectors, atol=1e-6)
    # The model's pooling, then another: the encoder's mean alone (normalized on request).
    mean = embed(TEXTS, pooling="mean", normalize_embeddings=True)
    assert mean.shape == (3, 64)
    # A text longer than max_seq_length (16) keeps its first 14 tokens, as
    # sentence-transformers cuts it; with truncation=False it is an error.
    long = " ".join(TEXTS * 6)
    assert embed([long]).shape == (1, 128)
    with pytest.raises(UserError, match="the model reads 16"):
        embed(long, truncation=False)


@pytest.mark.parametrize("options, message", [
    (dict(pooling="median"), "pooling='median': one or more of cls, max, mean, mean_sqrt_len"),
    (dict(pooling=[]), "one or more of cls"),
])
def test_bad_options_are_one_line(st_dir, options, message):
    with pytest.raises(UserError, match=message):
        pipeline("sentence-embedding", model=st_dir)(TEXTS, **options)
    with pytest.raises(UserError, match="an input is a string, not int"):
        pipeline("sentence-embedding", model=st_dir)([3])


@pytest.mark.parametrize("edit, message", [
    (lambda d: (d / "modules.json").write_text("[1, 2]"), "expected a list of module objects"),
    (lambda d: (d / "modules.json").write_text(json.dumps(
        [{"type": "sentence_transformers.models.Transformer", "path": ""},
         {"type": "sentence_transformers.models.Dense", "path": "2_Dense"}])),
     "this library runs Transformer, Pooling and an optional Normalize"),
    (lambda d: (d / "1_Pooling" / "config.json").write_text(json.dumps(
        {"pooling_mode_lasttoken": True})), "pooling_mode_lasttoken is not supported"),
    (lambda d: shutil.rmtree(d / "1_Pooling"), "the Pooling module's config is missing"),
])
def test_directories_this_library_cannot_run_are_one_line(st_dir, tmp_path, edit, message):
    copy = tmp_path / "copy"
    shutil.copytree(st_dir, copy)
    edit(copy)
    with pytest.raises(UserError, match=message):
        pipeline("sentence-embedding", model=str(copy))


def test_written_directory_reads_back(st_dir):
    spec = sentence_transformers.read_sentence_transformers_dir(st_dir)
    assert (spec.pooling, spec.normalize, spec.max_seq_length) == (("cls", "mean"), True, 16)
    assert spec.transformer_path.rstrip("/") == st_dir.rstrip("/")


def test_sentence_transformers_6_layout_reads_as_the_5_layout(st_dir, shared_data, tmp_path):
    """The same weights written in 6.x's layout (its module paths, "pooling_mode", the
    length as the tokenizer's model_max_length) embed as the 5.x directory does."""
    spm = str(shared_data / "spm_official" / "30k-clean.model")
    directory = hf_models.write_sentence_transformers_dir(
        str(tmp_path / "st6"), spm, ("cls", "mean"), normalize=True, seed=2,
        max_seq_length=16, generation=6)
    modules = json.loads((tmp_path / "st6" / "modules.json").read_text())
    assert [m["type"] for m in modules] == [
        "sentence_transformers.base.modules.transformer.Transformer",
        "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
        "sentence_transformers.base.modules.normalize.Normalize"]
    pooling = json.loads((tmp_path / "st6" / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode"] == ["cls", "mean"]
    tokenizer = json.loads((tmp_path / "st6" / "tokenizer_config.json").read_text())
    assert tokenizer["model_max_length"] == 16
    long = " ".join(TEXTS * 6)  # cut at 16 tokens by both
    want = pipeline("sentence-embedding", model=st_dir)(TEXTS + [long])
    got = pipeline("sentence-embedding", model=directory)(TEXTS + [long])
    np.testing.assert_allclose(got, want, atol=1e-6)
    # 6.x concatenates a pooling_mode list in its order.
    (tmp_path / "st6" / "1_Pooling" / "config.json").write_text(json.dumps(
        dict(pooling, pooling_mode=["mean", "cls"])))
    swapped = pipeline("sentence-embedding", model=directory)(TEXTS)
    np.testing.assert_allclose(swapped, np.concatenate([want[:3, 64:], want[:3, :64]], 1),
                               atol=1e-6)


@pytest.mark.parametrize("config, modes", [
    ({"pooling_mode": "mean_sqrt_len_tokens"}, ("mean_sqrt_len",)),
    ({"pooling_mode": ["mean", "cls"]}, ("mean", "cls")),      # 6.x: the list's order
    ({"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": True}, ("cls", "mean")),
])
def test_pooling_configs_of_both_generations(config, modes):
    assert sentence_transformers.pooling_modes(config, "config.json") == modes


@pytest.mark.parametrize("config, message", [
    ({"pooling_mode": "lasttoken"}, "config.json: pooling mode 'lasttoken' is not supported"),
    ({"pooling_mode": []}, "config.json: no pooling mode is on"),
])
def test_pooling_configs_this_library_cannot_run(config, message):
    with pytest.raises(UserError, match=message):
        sentence_transformers.pooling_modes(config, "config.json")


def test_a_plain_hugging_face_directory_is_mean_pooled(shared_data, tmp_path):
    spm = str(shared_data / "spm_official" / "30k-clean.model")
    directory = hf_models.write_hf_dir(str(tmp_path / "enc"), "encoder", spm, seed=4)
    vectors = pipeline("sentence-embedding", model=directory)(TEXTS[:2])
    hidden = pipeline("feature-extraction", model=directory)
    for row, text in enumerate(TEXTS[:2]):
        states = hidden(text, return_tensors=True)[0]
        np.testing.assert_allclose(vectors[row], states.mean(axis=0), atol=1e-5)
