"""RACE SavedModel: in-graph features equal the Python path's; the raw-text signature
served in a process with only TensorFlow and tensorflow-text gives the same probabilities."""
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf.tasks.multiple_choice import race, export as race_export, job as race_job
from albert_tf.tokenization import InGraphTokenizer, SentencePieceTokenizer

SPM = "spm/albert_style_pd8k.model"
SEQ, QA = 40, 12

# Hand-made passages exercising the rules: blanks (one, two, at the start and the end),
# no blank, qa longer than max_qa_length (its suffix is kept), an article longer than the
# sequence, an empty article, accents, upper case, odd whitespace and digit-comma pieces.
HAND = [
    {"article": "Tom went to the market. He bought 3 apples, 12 pears and 1,000 grapes.",
     "question": "Tom bought  _  pears.", "options": ["3", "12", "1,000", "no"]},
    {"article": "  Zoë   visited the CAFÉ\tin 1999, then left.\n",
     "question": "_ visited the _ ?", "options": ["Zoë", "ANNA", "the  man", "nobody"]},
    {"article": " ".join(f"token{i}" for i in range(60)),
     "question": "Which token is " + "very " * 20 + "far away?",
     "options": ["token1", "token59", "token30", "none of them"]},
    {"article": "", "question": "What is missing", "options": ["text", "", "a", "b"]},
]


@pytest.fixture(scope="module")
def tokenizers(shared_data):
    path = str(shared_data / SPM)
    return SentencePieceTokenizer(path), InGraphTokenizer(path)


def python_features(items, tokenizer, seq=SEQ, qa=QA):
    examples = [race.RaceExample(
        f"x{i}", 0, "high", race.preprocess_text(item["article"], lower=True),
        race.preprocess_text(item["question"], lower=True),
        tuple(race.preprocess_text(o, lower=True) for o in item["options"]), None, "hand")
        for i, item in enumerate(items)]
    feats = list(race.featurize(examples, tokenizer, seq, qa))
    return {k: np.stack([f[k] for f in feats]) for k in ("input_ids", "input_mask",
                                                          "segment_ids")}


def graph_features(items, tokenizer, model=None, seq=SEQ, qa=QA):
    module = race_export.RaceServingModule(model, tokenizer, seq, qa)
    out = module.features(tf.constant([i["article"] for i in items]),
                          tf.constant([i["question"] for i in items]),
                          tf.constant([i["options"] for i in items]))
    return {k: v.numpy() for k, v in out.items()}


def test_qa_texts_in_graph_hand_computed():
    got = race_export.qa_texts(tf.constant(["the _ sat on the _ .", "who sat?", "_", ""]),
                               tf.constant([["cat", "dog"], ["a", "b"], ["x", "y"],
                                            ["p", "q"]]))
    assert got.numpy().astype(str).tolist() == [
        ["the cat sat on the cat .", "the dog sat on the dog ."],
        ["who sat? a", "who sat? b"], ["x", "y"], [" p", " q"]]


def test_pack_choices_hand_computed():
    article = tf.ragged.constant([[10, 11, 12, 13, 14, 15]], tf.int32)
    qa = tf.ragged.constant([[20, 21, 22, 23], [20], [], [30, 31]], tf.int32)
    out = race_export.pack_choices(article, qa, 10, 3, 2, 3)
    assert out["input_ids"].numpy()[0].tolist() == [
        [2, 10, 11, 12, 13, 3, 21, 22, 23, 3],
        [2, 10, 11, 12, 13, 14, 15, 3, 20, 3],
        [2, 10, 11, 12, 13, 14, 15, 3, 3, 0],
        [2, 10, 11, 12, 13, 14, 3, 30, 31, 3]]
    assert out["segment_ids"].numpy()[0].tolist() == [
        [0] * 6 + [1] * 4, [0] * 8 + [1] * 2, [0] * 8 + [1, 0], [0] * 7 + [1] * 3]
    assert out["input_mask"].numpy()[0].sum(axis=1).tolist() == [10, 10, 9, 10]


def test_graph_features_equal_python_features(tokenizers, shared_data):
    python_tok, graph_tok = tokenizers
    expected = python_features(HAND, python_tok)
    got = graph_features(HAND, graph_tok)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    # the rules were exercised: truncated qa (12 ids kept) and a full-length row
    assert (expected["segment_ids"][2, 0] == 1).sum() == QA + 1
    assert expected["input_mask"][2].sum(axis=1).tolist() == [SEQ] * 4
    # and on every question of the shared dev and train samples
    items = []
    for split in ("dev", "train"):
        for path in sorted((shared_data / "race/RACE" / split).glob("*/*.txt")):
            data = json.loads(path.read_text())
            items += [{"article": data["article"], "question": q, "options": o}
                      for q, o in zip(data["questions"], data["options"])]
    assert len(items) == 39
    expected = python_features(items, python_tok, 96, 30)
    got = graph_features(items, graph_tok, seq=96, qa=30)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


LOADER = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
    served = tf.saved_model.load(sys.argv[1])
    items = json.load(open(sys.argv[2]))
    text = served.signatures["serving_default"](
        article=tf.constant([i["article"] for i in items]),
        question=tf.constant([i["question"] for i in items]),
        options=tf.constant([i["options"] for i in items]))
    tokens = served.signatures["serve_tokens"](**{
        k: tf.constant(v, tf.int32) for k, v in json.load(open(sys.argv[3])).items()})
    print(json.dumps({
        "probabilities": text["probabilities"].numpy().tolist(),
        "predictions": [p.decode() for p in text["predictions"].numpy()],
        "prediction_ids": text["prediction_ids"].numpy().tolist(),
        "token_probabilities": tokens["probabilities"].numpy().tolist(),
        "albert_modules": sorted(m for m in sys.modules if m.startswith("albert_tf"))}))
""")


@pytest.mark.slow  # 10 s
def test_saved_model_raw_text_signature_matches_python_path(tmp_path, tokenizers, shared_data):
    python_tok, _ = tokenizers
    config = AlbertConfig(vocab_size=8000, embedding_size=16, hidden_size=32,
                          num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                          max_position_embeddings=SEQ, initializer_range=0.5)
    model = race_job.build_model(config, 0.1)
    features = python_features(HAND, python_tok)
    expected = model(features)["probabilities"].numpy()
    assert np.abs(expected - 0.25).max() > 0.05  # distinct probabilities, a meaningful check
    export_dir = race_export.export_saved_model(model, str(tmp_path / "export"),
                                                str(shared_data / SPM), SEQ, QA)
    (tmp_path / "items.json").write_text(json.dumps(HAND))
    (tmp_path / "tokens.json").write_text(json.dumps({k: v.tolist()
                                                      for k, v in features.items()}))
    (tmp_path / "load.py").write_text(LOADER)
    done = subprocess.run([sys.executable, str(tmp_path / "load.py"), export_dir,
                           str(tmp_path / "items.json"), str(tmp_path / "tokens.json")],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    served = json.loads(done.stdout.strip().splitlines()[-1])
    assert served["albert_modules"] == []
    np.testing.assert_allclose(served["probabilities"], expected, atol=1e-5)
    np.testing.assert_allclose(served["token_probabilities"], expected, atol=1e-5)
    assert served["prediction_ids"] == expected.argmax(1).tolist()
    assert served["predictions"] == ["ABCD"[i] for i in expected.argmax(1)]
