"""albert_tf.export: packing, truncation, and SavedModels that load without albert_tf."""
import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier, AlbertConfig, export, tokenization
from albert_tf.tasks.classification.export import ClassifierServingModule

CONFIG = AlbertConfig(vocab_size=8000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
CLS, SEP = 2, 3


def reference_truncate(a, b, budget):
    """The original's _truncate_seq_pair, literally: pop from the longer (B on ties)."""
    a, b = list(a), list(b)
    while len(a) + len(b) > budget:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()
    return a, b


def reference_pack(a, b, max_seq_length):
    """The original's convert_single_example layout, from its definition."""
    if b:  # the original tests tokens_b before truncating and again when packing
        a, b = reference_truncate(a, b, max_seq_length - 3)
    else:
        a = a[:max_seq_length - 2]
    ids = [CLS] + a + [SEP]
    segments = [0] * len(ids)
    if b:
        ids += b + [SEP]
        segments += [1] * (len(b) + 1)
    mask = [1] * len(ids)
    pad = max_seq_length - len(ids)
    return ids + [0] * pad, mask + [0] * pad, segments + [0] * pad


def test_truncate_pair_lengths_equals_the_pop_loop_exhaustively():
    cases = [(la, lb, t) for la in range(13) for lb in range(13) for t in range(16)]
    la, lb, t = (tf.constant([c[i] for c in cases]) for i in range(3))
    got_a, got_b = export.truncate_pair_lengths(la, lb, t)
    want = [tuple(map(len, reference_truncate(range(x), range(y), z))) for x, y, z in cases]
    assert list(zip(got_a.numpy().tolist(), got_b.numpy().tolist())) == want


def test_pack_pair_equals_reference_on_random_rows():
    rng = np.random.default_rng(0)
    rows_a = [list(rng.integers(5, 100, rng.integers(0, 15))) for _ in range(200)]
    rows_b = [list(rng.integers(5, 100, rng.integers(0, 15))) for _ in range(200)]
    rows_b[:20] = [[]] * 20  # empty B -> single-segment packing
    for max_len in (3, 4, 9, 16, 40):
        got = export.pack_pair(tf.ragged.constant(rows_a, tf.int32),
                               tf.ragged.constant(rows_b, tf.int32, ragged_rank=1), max_len,
                               CLS, SEP)
        want = [reference_pack(a, b, max_len) for a, b in zip(rows_a, rows_b)]
        for key, index in (("input_ids", 0), ("input_mask", 1), ("segment_ids", 2)):
            assert got[key].dtype == tf.int32 and got[key].shape[1] == max_len
            assert got[key].numpy().tolist() == [w[index] for w in want], (key, max_len)
    single = export.pack_pair(tf.ragged.constant([[7, 8, 9, 10]]), None, 5, CLS, SEP)
    assert single["input_ids"].numpy().tolist() == [[2, 7, 8, 9, 3]]
    with pytest.raises(ValueError, match="max_seq_length must be >= 3"):
        export.pack_pair(tf.ragged.constant([[7]]), None, 2, CLS, SEP)


def test_token_input_signature_shapes():
    specs = export.token_input_signature(128, batch_dims=(None, 4))
    assert sorted(specs) == ["input_ids", "input_mask", "segment_ids"]
    assert specs["input_ids"].shape.as_list() == [None, 4, 128]
    assert specs["segment_ids"].dtype == tf.int32


@pytest.fixture(scope="module")
def spm_path(shared_data):
    path = shared_data / "spm" / "albert_style_pd8k.model"
    if not path.exists():
        pytest.skip(f"{path} not found")
    return str(path)


# Runs in a fresh interpreter with only TensorFlow and tensorflow-text imported.
LOADER = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  registers the tokenizer ops
args = json.loads(sys.argv[1])
loaded = tf.saved_model.load(args["dir"])
out = {"signatures": sorted(loaded.signatures)}
text = loaded.signatures["serving_default"]
inputs = {k: tf.constant(v) for k, v in args["text"].items()}
result = text(**inputs)
out["text"] = {k: (v.numpy().astype(str).tolist() if v.dtype == tf.string else v.numpy().tolist())
               for k, v in result.items()}
tokens = loaded.signatures["serve_tokens"](**{k: tf.constant(v, tf.int32)
                                              for k, v in args["tokens"].items()})
out["tokens"] = {k: (v.numpy().astype(str).tolist() if v.dtype == tf.string
                     else v.numpy().tolist()) for k, v in tokens.items()}
out["albert_tf_imported"] = any(m.startswith("albert_tf") for m in sys.modules)
print("RESULT" + json.dumps(out))
"""


def load_in_subprocess(export_dir, text, tokens):
    args = json.dumps({"dir": str(export_dir), "text": text, "tokens": tokens})
    done = subprocess.run([sys.executable, "-c", LOADER, args], capture_output=True, text=True,
                          cwd="/", env={"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    line = [l for l in done.stdout.splitlines() if l.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])


def load_in_process(export_dir, text, tokens):
    loaded = tf.saved_model.load(str(export_dir))
    out = {"signatures": sorted(loaded.signatures)}
    for key, result in (("text", loaded.signatures["serving_default"](
            **{k: tf.constant(v) for k, v in text.items()})),
                        ("tokens", loaded.signatures["serve_tokens"](
                            **{k: tf.constant(v) for k, v in tokens.items()}))):
        out[key] = {k: v.numpy().tolist() for k, v in result.items()}
    return out


@pytest.mark.parametrize("labels, pair", [
    pytest.param(["contradiction", "entailment", "neutral"], True,
                 marks=pytest.mark.slow),  # 13 s
    (None, False)])
def test_classifier_savedmodel_loads_without_albert_tf(tmp_path, spm_path, labels, pair):
    num_labels = 1 if labels is None else len(labels)
    model = AlbertClassifier(CONFIG, num_labels=num_labels)
    model.build()
    tokenizer = tokenization.InGraphTokenizer(spm_path, do_lower_case=True)
    module = ClassifierServingModule(model, tokenizer, 24, labels, pair=pair)
    export_dir = tmp_path / "export"
    (export_dir / "stale").mkdir(parents=True)  # a previous export is replaced
    export.save_serving_model(str(export_dir), module, module.signatures())
    assert not (export_dir / "stale").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]  # no temp dirs left

    text_a = ["The cat sat on the mat.", "Caf\u00e9 au lait, 1999, was good!", "x"]
    text_b = ["A cat is sitting.", "", "y " * 40]
    python_tok = tokenization.SentencePieceTokenizer(spm_path, do_lower_case=True)
    ids_a = python_tok.encode_ids([python_tok.preprocess(t) for t in text_a])
    ids_b = python_tok.encode_ids([python_tok.preprocess(t) for t in text_b])
    packed = [reference_pack(a, b if pair else [], 24) for a, b in zip(ids_a, ids_b)]
    features = {name: np.array([p[i] for p in packed], np.int32)
                for i, name in enumerate(["input_ids", "input_mask", "segment_ids"])}
    want = model(features, training=False)
    text_inputs = {"text_a": text_a, **({"text_b": text_b} if pair else {})}
    if pair:  # a fresh interpreter with only TensorFlow and tensorflow-text
        got = load_in_subprocess(export_dir, text_inputs,
                                 {k: v.tolist() for k, v in features.items()})
        assert got["albert_tf_imported"] is False
    else:  # the same checks in this process (test_run_classifier_cli also serves a single-text
        # model)
        got = load_in_process(export_dir, text_inputs, features)
    assert got["signatures"] == ["serve_tokens", "serving_default"]
    for key in ("text", "tokens"):
        np.testing.assert_allclose(got[key]["probabilities"],
                                   want["probabilities"].numpy(), atol=1e-5)
        if labels is None:
            np.testing.assert_allclose(got[key]["predictions"], want["predictions"].numpy(),
                                       atol=1e-5)
        else:
            assert got[key]["predictions"] == [labels[i] for i in want["predictions"].numpy()]

    if not pair:
        return
    shown = subprocess.run([sys.executable, "-m", "tensorflow.python.tools.saved_model_cli",
                            "show", "--dir", str(export_dir), "--tag_set", "serve"],
                           capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "serving_default" in shown.stdout and "serve_tokens" in shown.stdout


def test_save_serving_model_needs_serving_default(tmp_path):
    with pytest.raises(ValueError, match="serving_default"):
        export.save_serving_model(str(tmp_path / "x"), tf.Module(), {"serve_tokens": None})
    assert not (tmp_path / "x").exists()
