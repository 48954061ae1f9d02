"""The sentence-embedding pipeline against sentence-transformers' `encode` (torch), in both
layout generations: 5.x (5.1, .venv-oracle, ALBERT_TF_ORACLE_PYTHON) and 6.x (6.3 with
transformers 5, .venv-oracle-st6, ALBERT_TF_ORACLE_ST6_PYTHON), on sentence-transformers
directories of small random ALBERTs: every pooling mode, concatenated modes, Normalize, texts
cut at max_seq_length, and a Chinese WordPiece model.

Run by `make test-oracle`; skipped where the generation's oracle is not set up. The
directories are written by albert-tf (`checkpoints.sentence_transformers`, in the
generation's layout), so the test also shows that sentence-transformers reads what albert-tf
writes; each is then saved again by sentence-transformers itself, and albert-tf reads that
directory too. Equal means within 1e-4.
"""
import json
import os
import subprocess

import numpy as np
import pytest

from albert_tf import pipeline
from tests.helpers import hf_models

ORACLE = os.environ.get("ALBERT_TF_ORACLE_PYTHON")
# The Python of each layout generation's sentence-transformers.
ORACLES = {5: ORACLE, 6: os.environ.get("ALBERT_TF_ORACLE_ST6_PYTHON")}
pytestmark = [pytest.mark.oracle]


def oracle(generation: int) -> str:
    if not ORACLES[generation]:
        pytest.skip(f"sentence-transformers {generation}.x oracle not set up: run "
                    "`make test-oracle`")
    return ORACLES[generation]
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
    if case.get("save_to"):  # the directory as this version writes it
        model.save(case["save_to"])
    features = model.tokenize(case["texts"])
    ids = [[int(i) for i, m in zip(row, mask) if m]
           for row, mask in zip(features["input_ids"].tolist(),
                                features["attention_mask"].tolist())]
    out[name] = {"vectors": vectors.tolist(), "max_seq_length": model.max_seq_length,
                 "version": sentence_transformers.__version__, "input_ids": ids}
print(json.dumps(out))
"""
# A user-defined piece ("-") inside a word: transformers 5's ALBERT tokenizer splits there.
GLUED = "Café Müller opened in Zürich in 1999, said Jean-Luc."
TEXTS = ["A man is playing a guitar on the stage tonight.", "Someone plays music.",
         GLUED, "",
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


@pytest.fixture(scope="module", params=[5, 6], ids=["st5", "st6"])
def compared(request, shared_data, tmp_path_factory):
    """albert-tf's vectors and sentence-transformers' (and albert-tf's on the directories
    sentence-transformers saved again) for every case, in one layout generation."""
    generation = request.param
    python = oracle(generation)
    spm = str(shared_data / "spm_official" / "30k-clean.model")
    vocab = shared_data / "chinese" / "vocab" / "vocab_chinese.txt"
    root = tmp_path_factory.mktemp(f"st{generation}")
    request, ours, ids = {}, {}, {}
    for index, (name, case) in enumerate(CASES.items()):
        zh = case.get("zh")
        if zh and not vocab.exists():
            continue
        directory = hf_models.write_sentence_transformers_dir(
            str(root / name), None if zh else spm, case["pooling"], case.get("normalize", False),
            seed=index, max_seq_length=32, vocab_file=str(vocab) if zh else None,
            generation=generation)
        texts = ZH if zh else TEXTS + [long_text(shared_data)]  # the long one is cut at 32
        normalize = case.get("normalize_embeddings", False)
        request[name] = {"dir": directory, "texts": texts, "normalize_embeddings": normalize,
                         "save_to": directory + "_saved"}
        ids[name] = original_ids(texts, None if zh else spm, str(vocab) if zh else None, 32)
        embed = pipeline("sentence-embedding", model=directory, batch_size=3)
        ours[name] = embed(texts, normalize_embeddings=normalize)
    (root / "request.json").write_text(json.dumps(request))
    done = subprocess.run([python, "-c", PROGRAM, str(root / "request.json")],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    resaved = {name: pipeline("sentence-embedding", model=case["save_to"], batch_size=3)(
        case["texts"], normalize_embeddings=case["normalize_embeddings"])
        for name, case in request.items()}
    return ours, theirs, resaved, generation, ids


def original_ids(texts, spm_model_file, vocab_file, length):
    """The original's ids of each text, [CLS] and [SEP] included, cut at `length`."""
    from albert_tf.tokenization import FullTokenizer, preprocess_text

    tokenizer = FullTokenizer(vocab_file=vocab_file, do_lower_case=True,
                              spm_model_file=spm_model_file)
    cls_id, sep_id = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]"])
    if spm_model_file:  # the original's readers lower-case before SentencePiece
        texts = [preprocess_text(text, lower=True) for text in texts]
    return [[cls_id] + tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))[:length - 2]
            + [sep_id] for text in texts]


@pytest.mark.parametrize("name", sorted(CASES))
def test_embeddings_equal_sentence_transformers_encode(compared, name):
    """Equal on every text its tokenizer reads as the original does. 5.x (with the slow
    tokenizer albert-tf's directories ask for) reads every text so; 6.x's transformers 5
    has only the tokenizers-backed ALBERT tokenizer, which splits a word at a user-defined
    piece inside it ("jean-luc"): there albert-tf keeps the original's ids and the vectors
    differ, on no other text."""
    ours, theirs, resaved, generation, ids = compared
    if name not in ours:
        pytest.skip("the Chinese vocabulary is not in ../shared/data")
    assert theirs[name]["version"].startswith(f"{generation}.")
    want = np.array(theirs[name]["vectors"], np.float32)
    assert ours[name].dtype == np.float32 and ours[name].shape == want.shape
    same = [mine == peer for mine, peer in zip(ids[name], theirs[name]["input_ids"])]
    departs = [row for row, equal in enumerate(same) if not equal]
    if generation == 5:
        assert not departs
    else:
        assert departs == ([] if name == "chinese" else [TEXTS.index(GLUED)])
    kept = np.array(same)
    np.testing.assert_allclose(ours[name][kept], want[kept], atol=TOLERANCE, rtol=0)
    assert theirs[name]["max_seq_length"] == 32
    # The directory sentence-transformers wrote is read as the original reads it.
    np.testing.assert_allclose(resaved[name], ours[name], atol=TOLERANCE, rtol=0)


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
    done = subprocess.run([oracle(5), "-c", PROGRAM, str(tmp_path / "request.json")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = np.array(json.loads(done.stdout.strip().splitlines()[-1])["export"]["vectors"])
    np.testing.assert_allclose(ours, theirs, atol=TOLERANCE, rtol=0)
