"""The sentence-embedding pipeline against sentence-transformers' `encode` (5.1, torch) on
sentence-transformers directories of small random ALBERTs: every pooling mode, concatenated
modes, Normalize, texts cut at max_seq_length, and a Chinese WordPiece model.

Run by `make test-oracle` (.venv-oracle, ALBERT_TF_ORACLE_PYTHON); skipped elsewhere. The
directories are written by albert-tf (`checkpoints.sentence_transformers`), so the test also
shows that sentence-transformers reads what albert-tf writes (with the slow tokenizer, the
original SentencePiece's ids, words glued to ( ) " - . included). Equal means within 1e-4.
"""
import json
import os
import subprocess

import numpy as np
import pytest

from albert_tf import pipeline
from tests.helpers import hf_models

ORACLE = os.environ.get("ALBERT_TF_ORACLE_PYTHON")
pytestmark = [pytest.mark.oracle,
              pytest.mark.skipif(not ORACLE, reason="sentence-transformers oracle not set up: "
                                                    "run `make test-oracle`")]
TOLERANCE = 1e-4
PROGRAM = r"""
import json, sys
import sentence_transformers
request = json.load(open(sys.argv[1]))
out = {}
for name, case in request.items():
    model = sentence_transformers.SentenceTransformer(case["dir"], device="cpu")
    vectors = model.encode(case["texts"], batch_size=4,
                           normalize_embeddings=case["normalize_embeddings"])
    out[name] = {"vectors": vectors.tolist(), "max_seq_length": model.max_seq_length,
                 "version": sentence_transformers.__version__}
print(json.dumps(out))
"""
TEXTS = ["A man is playing a guitar on the stage tonight.", "Someone plays music.",
         "Café Müller opened in Zürich in 1999, said Jean-Luc.", "",
         "tabs\tand\nnewlines   between words",
         # User-defined pieces glued to words: the directories albert-tf writes make
         # sentence-transformers use the slow tokenizer, the original SentencePiece's ids.
         'the U.S.A. (1999) cost £5 or 3.5 € "quoted".']
ZH = ["中国的首都是北京。", "ALBERT 模型在 2019 年发布，Google 的 Lan 等人提出。"]
CASES = {
    "mean": dict(pooling=("mean",)), "cls": dict(pooling=("cls",)),
    "max": dict(pooling=("max",)), "mean_sqrt_len": dict(pooling=("mean_sqrt_len",)),
    "mean_normalize": dict(pooling=("mean",), normalize=True),
    "cls_max_mean": dict(pooling=("cls", "max", "mean")),
    "encode_normalizes": dict(pooling=("cls",), normalize_embeddings=True),
    "chinese": dict(pooling=("mean",), normalize=True, zh=True),
}


def long_text(shared_data) -> str:
    """100 words of a book, cut at max_seq_length."""
    book = sorted((shared_data / "corpus" / "gutenberg").glob("*.txt"))[0]
    return " ".join(book.read_text(encoding="utf-8", errors="replace").split()[3000:3100])


@pytest.fixture(scope="module")
def compared(shared_data, tmp_path_factory):
    spm = str(shared_data / "spm_official" / "30k-clean.model")
    vocab = shared_data / "chinese" / "vocab" / "vocab_chinese.txt"
    root = tmp_path_factory.mktemp("st")
    request, ours = {}, {}
    for index, (name, case) in enumerate(CASES.items()):
        zh = case.get("zh")
        if zh and not vocab.exists():
            continue
        directory = hf_models.write_sentence_transformers_dir(
            str(root / name), None if zh else spm, case["pooling"], case.get("normalize", False),
            seed=index, max_seq_length=32, vocab_file=str(vocab) if zh else None)
        texts = ZH if zh else TEXTS + [long_text(shared_data)]  # the long one is cut at 32
        normalize = case.get("normalize_embeddings", False)
        request[name] = {"dir": directory, "texts": texts, "normalize_embeddings": normalize}
        embed = pipeline("sentence-embedding", model=directory, batch_size=3)
        ours[name] = embed(texts, normalize_embeddings=normalize)
    (root / "request.json").write_text(json.dumps(request))
    done = subprocess.run([ORACLE, "-c", PROGRAM, str(root / "request.json")],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    return ours, theirs


@pytest.mark.parametrize("name", sorted(CASES))
def test_embeddings_equal_sentence_transformers_encode(compared, name):
    ours, theirs = compared
    if name not in ours:
        pytest.skip("the Chinese vocabulary is not in ../shared/data")
    want = np.array(theirs[name]["vectors"], np.float32)
    assert ours[name].dtype == np.float32 and ours[name].shape == want.shape
    np.testing.assert_allclose(ours[name], want, atol=TOLERANCE, rtol=0)
    assert theirs[name]["max_seq_length"] == 32


def test_an_embedding_export_equals_sentence_transformers_on_its_directory(shared_data,
                                                                           tmp_path):
    """run_embeddings' export: the raw-text SavedModel signature and the
    sentence-transformers directory written beside it give the same vectors."""
    import tensorflow as tf

    from albert_tf.checkpoints import sentence_transformers
    from albert_tf.modeling.sentence_encoder import AlbertSentenceEncoder
    from albert_tf.tasks.embeddings.export import EmbeddingServingModule
    from albert_tf.tokenization import in_graph_tokenizer

    spm = str(shared_data / "spm_official" / "30k-clean.model")
    tf.keras.utils.set_random_seed(11)
    model = AlbertSentenceEncoder(hf_models.small_config(64), pooling=["max", "mean"],
                                  normalize=True)
    model.build()
    rng = np.random.default_rng(11)
    for variable in model.weights:
        if "layer_norm" not in variable.path.lower():
            variable.assign(rng.normal(0, 0.1, variable.shape).astype(np.float32))
    directory = str(tmp_path / "st")
    sentence_transformers.save_sentence_transformers_dir(model, directory, model.pooling,
                                                         model.normalize, 32,
                                                         spm_model_file=spm)
    texts = TEXTS + [long_text(shared_data)]
    module = EmbeddingServingModule(model, in_graph_tokenizer(spm_model_file=spm), 32)
    ours = module.serving_default(text=tf.constant(texts))["embedding"].numpy()
    (tmp_path / "request.json").write_text(json.dumps(
        {"export": {"dir": directory, "texts": texts, "normalize_embeddings": False}}))
    done = subprocess.run([ORACLE, "-c", PROGRAM, str(tmp_path / "request.json")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = np.array(json.loads(done.stdout.strip().splitlines()[-1])["export"]["vectors"])
    np.testing.assert_allclose(ours, theirs, atol=TOLERANCE, rtol=0)
