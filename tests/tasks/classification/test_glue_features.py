"""GLUE features: the original's packing, in-graph equality, TFRecord caches, readers, metrics."""
import dataclasses
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier, AlbertConfig, export, tokenization
from albert_tf.tasks.classification import features, glue, job as glue_job, metrics

CLS, SEP = 2, 3


@pytest.fixture(scope="module")
def spm_path(shared_data):
    path = shared_data / "spm" / "albert_style_pd8k.model"
    if not path.exists():
        pytest.skip(f"{path} not found")
    return str(path)


@pytest.fixture(scope="module")
def tokenizer(spm_path):
    return tokenization.SentencePieceTokenizer(spm_path, do_lower_case=True)


def test_truncate_seq_pair_pops_from_the_longer_end():
    a, b = [1, 2, 3, 4, 5], [6, 7]
    features.truncate_seq_pair(a, b, 5)
    assert (a, b) == ([1, 2, 3], [6, 7])
    a, b = [1, 2, 3], [4, 5, 6]
    features.truncate_seq_pair(a, b, 4)  # tie -> pop B first, then alternate
    assert (a, b) == ([1, 2], [4, 5])


def test_pack_pair_hand_computed():
    ids, mask, seg = features.pack_pair([10, 11, 12, 13], [20, 21], 8, CLS, SEP)
    # budget 5: A 4 + B 2 = 6 -> pop A once: [CLS] 10 11 12 [SEP] 20 21 [SEP]
    assert ids == [2, 10, 11, 12, 3, 20, 21, 3]
    assert seg == [0, 0, 0, 0, 0, 1, 1, 1] and mask == [1] * 8
    ids, mask, seg = features.pack_pair([10, 11, 12, 13, 14, 15, 16, 17], None, 6, CLS, SEP)
    assert ids == [2, 10, 11, 12, 13, 3] and seg == [0] * 6
    ids, mask, seg = features.pack_pair([10], [], 5, CLS, SEP)  # empty B: single sentence
    assert (ids, mask, seg) == ([2, 10, 3, 0, 0], [1, 1, 1, 0, 0], [0] * 5)


def test_convert_examples_hand_computed(tokenizer):
    examples = [glue.InputExample("a", "In 116, he", "page 3, line", "entailment"),
                glue.InputExample("b", "x", None, "not_entailment")]
    out = features.convert_examples(examples, tokenizer, 12, ("entailment", "not_entailment"))
    # "in 116, he" -> 21 211 1 14 28 (tokenization tests); "page 3, line" -> 2013 13 x , 805
    b_ids = tokenizer.encode_ids([tokenizer.preprocess("page 3, line")])[0]
    assert b_ids[0] == 2013 and b_ids[-1] == 805
    assert out["input_ids"][0].tolist() == [2, 21, 211, 1, 14, 28, 3] + b_ids[:4] + [3]
    assert out["segment_ids"][0].tolist() == [0] * 7 + [1] * 5
    assert out["label_ids"].tolist() == [0, 1] and out["label_ids"].dtype == np.int32
    x_ids = tokenizer.encode_ids(["x"])[0]
    assert out["input_ids"][1].tolist()[:len(x_ids) + 2] == [2] + x_ids + [3]
    assert out["input_mask"][1].sum() == len(x_ids) + 2
    reg = features.convert_examples([glue.InputExample("c", "y", "z", 3.5)], tokenizer, 8, None)
    assert reg["label_ids"].tolist() == [3.5] and reg["label_ids"].dtype == np.float32


def real_pairs(shared_data):
    mrpc = glue.read_examples(glue.TASKS["mrpc"], str(shared_data / "glue"), "dev")
    rte = glue.read_examples(glue.TASKS["rte"], str(shared_data / "glue"), "dev")
    sst = glue.read_examples(glue.TASKS["sst-2"], str(shared_data / "glue"), "dev")
    cola = glue.read_examples(glue.TASKS["cola"], str(shared_data / "glue"), "dev")
    unlabelled = [dataclasses.replace(e, label=None) for e in mrpc + rte + sst[:300] + cola[:300]]
    return unlabelled[:len(mrpc + rte)], unlabelled[len(mrpc + rte):]


@pytest.mark.parametrize("max_seq_length", [16, 48, 128])
def test_in_graph_packing_equals_python_features(shared_data, spm_path, tokenizer,
                                                 max_seq_length):
    """Raw text -> InGraphTokenizer -> export.pack_pair == the Python feature conversion."""
    pairs, singles = real_pairs(shared_data)
    graph_tokenizer = tokenization.InGraphTokenizer(spm_path, do_lower_case=True)
    for examples in (pairs, singles):
        want = features.convert_examples(examples, tokenizer, max_seq_length, None)
        ids_b = None if examples[0].text_b is None else graph_tokenizer(
            tf.constant([e.text_b for e in examples]))
        got = export.pack_pair(graph_tokenizer(tf.constant([e.text_a for e in examples])),
                               ids_b, max_seq_length, CLS, SEP)
        for key in export.TOKEN_FEATURES:
            np.testing.assert_array_equal(got[key].numpy(), want[key], err_msg=key)


def test_feature_cache_reuse_and_invalidation(tmp_path, tokenizer, spm_path, caplog):
    spec = glue.TASKS["rte"]
    examples = [glue.InputExample(str(i), f"premise {i}", f"hypothesis {i}",
                                  spec.labels[i % 2]) for i in range(5)]
    vocab = tokenization.vocabulary_fingerprint(tokenizer)
    path = features.prepare_features(str(tmp_path), spec, "dev", examples, tokenizer, 16, vocab)
    assert os.path.basename(path).startswith("rte_dev_s16_") and os.path.exists(path + ".json")
    stamp = os.stat(path).st_mtime_ns
    with caplog.at_level(logging.INFO, logger="absl"):
        assert features.prepare_features(str(tmp_path), spec, "dev", examples, tokenizer, 16,
                                     vocab) == path
    assert "reusing cached features" in caplog.text and os.stat(path).st_mtime_ns == stamp
    other_length = features.prepare_features(str(tmp_path), spec, "dev", examples, tokenizer, 24,
                                         vocab)
    changed = list(examples)
    changed[2] = glue.InputExample("2", "premise 2 edited", "hypothesis 2", spec.labels[0])
    other_data = features.prepare_features(str(tmp_path), spec, "dev", changed, tokenizer, 16,
                                       vocab)
    other_vocab = features.prepare_features(str(tmp_path), spec, "dev", examples, tokenizer, 16,
                                        "another-vocabulary")
    assert len({path, other_length, other_data, other_vocab}) == 4

    # Reading the cache back gives the converted arrays; eval batches are padded.
    want = features.convert_examples(examples, tokenizer, 16, spec.labels)
    batches = list(features.dataset(path, 16, False, 4, False, len(examples)))
    assert len(batches) == 2
    got = {k: np.concatenate([b[k].numpy() for b in batches]) for k in batches[0]}
    np.testing.assert_array_equal(got["input_ids"][:5], want["input_ids"])
    np.testing.assert_array_equal(got["label_ids"][:5], want["label_ids"])
    assert got["is_real_example"].tolist() == [1] * 5 + [0] * 3
    assert not got["input_mask"][5:].any()
    train = next(iter(features.dataset(path, 16, False, 4, True, len(examples), seed=3)))
    assert train["input_ids"].shape == (4, 16) and train["input_ids"].dtype == tf.int32


def test_compute_metrics_per_task():
    logits = np.log(np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7]]))
    labels = np.array([0, 1, 1, 1])
    cola = metrics.compute_metrics(glue.TASKS["cola"], logits, labels)
    assert cola["eval_accuracy"] == 0.75
    # TP 2, TN 1, FP 0, FN 1: (2 - 0) / sqrt(2 * 3 * 1 * 2)
    assert cola["matthew_corr"] == pytest.approx(2 / np.sqrt(12))
    nll = -np.log([0.9, 0.8, 0.4, 0.7])
    assert cola["eval_loss"] == pytest.approx(nll.mean())
    assert glue.TASKS["cola"].metric == "matthew_corr"
    mrpc = metrics.compute_metrics(glue.TASKS["mrpc"], logits, labels)
    assert mrpc["f1"] == pytest.approx(2 * 2 / (2 * 2 + 0 + 1)) and "matthew_corr" not in mrpc
    stsb = metrics.compute_metrics(glue.TASKS["sts-b"], np.array([[1.0], [2.0], [2.5]]),
                                np.array([1.0, 2.0, 3.0]))
    assert stsb["MSE"] == pytest.approx(0.25 / 3) and stsb["spearman"] == pytest.approx(1.0)
    assert glue.TASKS["sts-b"].metric == "pearson"


def test_predict_logits_keeps_order_and_drops_padding(tmp_path, tokenizer, spm_path):
    config = AlbertConfig(vocab_size=8000, embedding_size=16, hidden_size=32,
                          num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                          max_position_embeddings=32)
    model = AlbertClassifier(config, num_labels=3)
    model.build()
    spec = glue.TASKS["mnli"]
    examples = [glue.InputExample(str(i), f"sentence number {i}", f"other {i * 7}", "neutral")
                for i in range(7)]
    path = features.prepare_features(str(tmp_path), spec, "dev", examples, tokenizer, 16, "v")
    data = features.dataset(path, 16, False, 3, False, len(examples))
    got = glue_job.predict_logits(tf.distribute.OneDeviceStrategy("/cpu:0"), model, data, 7)
    packed = features.convert_examples(examples, tokenizer, 16, spec.labels)
    want = model({k: packed[k] for k in export.TOKEN_FEATURES})["logits"].numpy()
    assert got.shape == (7, 3)
    np.testing.assert_allclose(got, want, atol=1e-5)


MIRRORED_EVAL = r"""
import json, sys
from albert_tf.training import distribute
distribute.split_cpu(2)
import numpy as np
import tensorflow as tf
from albert_tf import AlbertClassifier, AlbertConfig, export, tokenization
from albert_tf.tasks.classification import features, glue, job as glue_job, metrics

spm, workdir = sys.argv[1], sys.argv[2]
tok = tokenization.SentencePieceTokenizer(spm)
config = AlbertConfig(vocab_size=8000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=32)
strategy = distribute.get_strategy("mirrored")
with strategy.scope():
    model = AlbertClassifier(config, num_labels=3)
    model.build()
spec = glue.TASKS["mnli"]
examples = [glue.InputExample(str(i), f"sentence number {i}", f"other {i * 7}", "neutral")
            for i in range(11)]
path = features.prepare_features(workdir, spec, "dev", examples, tok, 16, "v")
data = features.dataset(path, 16, False, 4, False, len(examples))
got = glue_job.predict_logits(strategy, model, data, len(examples))
packed = features.convert_examples(examples, tok, 16, spec.labels)
want = model({k: packed[k] for k in export.TOKEN_FEATURES})["logits"].numpy()
print(json.dumps({"replicas": strategy.num_replicas_in_sync, "shape": list(got.shape),
                  "max_diff": float(np.abs(got - want).max())}))
"""


@pytest.mark.slow
def test_predict_logits_under_two_replicas_keeps_order(spm_path, tmp_path):
    import json
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    done = subprocess.run([sys.executable, "-c", MIRRORED_EVAL, spm_path, str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO_ROOT,
                          env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["replicas"] == 2 and result["shape"] == [11, 3]
    assert result["max_diff"] < 1e-5
