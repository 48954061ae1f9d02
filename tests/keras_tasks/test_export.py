"""model.export(dir) of a Keras classifier writes run_classifier.py's export: the pipelines
read it (SavedModel on raw text, ONNX) with the Keras model's scores."""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

import albert_tf
from albert_tf import pipeline
from albert_tf.errors import UserValueError
from albert_tf.export import records

TEXTS = ["a good film", "a bad film", "Good, VERY good!", "bad and boring"]
SECOND = ["it was fine", "", "truly", "so dull"]


def _softmax(logits):
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True)


def _scores(answers):
    return [{answer["label"]: answer["score"] for answer in row} for row in answers]


def test_saved_model_and_onnx_give_the_keras_models_scores(models, tmp_path):
    classifier = albert_tf.from_pretrained(models["sentiment"], sequence_length=32)
    export_dir = str(tmp_path / "exported")
    results = classifier.export(export_dir, format=("tf_saved_model", "onnx"))
    assert results["onnx"] == os.path.join(export_dir, "model.onnx")
    with open(os.path.join(export_dir, records.EXPORT_RECORD)) as handle:
        record = json.load(handle)
    assert record["labels"] == classifier.labels and record["max_seq_length"] == 32
    assert record["vocabulary_file"] == "spiece.model" and not record["pair"]
    want = [dict(zip(classifier.labels, row))
            for row in _softmax(classifier.predict(TEXTS, verbose=0))]
    for model in (export_dir, results["onnx"]):
        got = _scores(pipeline("text-classification", model=model, top_k=None)(TEXTS))
        for mine, theirs in zip(got, want):
            assert mine.keys() == theirs.keys()
            for label in mine:
                np.testing.assert_allclose(mine[label], theirs[label], rtol=1e-4, atol=1e-6)
    served = tf.saved_model.load(export_dir).signatures["serving_default"]
    np.testing.assert_allclose(served(text_a=tf.constant(TEXTS))["logits"].numpy(),
                               classifier.predict(TEXTS, verbose=0), rtol=1e-4, atol=1e-5)


@pytest.mark.slow  # 31 s on AMD EPYC Zen 3
def test_pairs_multi_label_and_regression(models, tmp_path):
    pair_classifier = albert_tf.from_pretrained(models["sentiment"], sequence_length=32)
    export_dir = str(tmp_path / "pairs")
    pair_classifier.export(export_dir, text_pair=True)
    served = tf.saved_model.load(export_dir).signatures["serving_default"]
    logits = served(text_a=tf.constant(TEXTS), text_b=tf.constant(SECOND))["logits"].numpy()
    np.testing.assert_allclose(logits, pair_classifier.predict((TEXTS, SECOND), verbose=0),
                               rtol=1e-4, atol=1e-5)
    for name in ("multilabel", "regression"):
        classifier = albert_tf.from_pretrained(models[name], sequence_length=32)
        export_dir = str(tmp_path / name)
        classifier.export(export_dir)
        answers = pipeline("text-classification", model=export_dir, top_k=None)(TEXTS)
        logits = classifier.predict(TEXTS, verbose=0)
        for row, answer in zip(logits, answers):
            if name == "regression":
                np.testing.assert_allclose(answer[0]["score"], row[0], rtol=1e-4, atol=1e-5)
            else:
                got = {a["label"]: a["score"] for a in answer}
                want = dict(zip(classifier.labels, 1 / (1 + np.exp(-row))))
                for label in want:
                    np.testing.assert_allclose(got[label], want[label], rtol=1e-4, atol=1e-6)


@pytest.mark.slow  # 17 s on AMD EPYC Zen 3: a SavedModel and two sources of it
def test_bad_export_requests_in_one_line(models, tmp_path):
    classifier = albert_tf.from_pretrained(models["sentiment"], sequence_length=16)
    with pytest.raises(UserValueError, match="export format 'pdf': give one or more of"):
        classifier.export(str(tmp_path / "x"), format="pdf")
    assert not os.path.exists(tmp_path / "x")
    classifier.export(str(tmp_path / "exported"))
    again = albert_tf.from_pretrained(str(tmp_path / "exported"))  # an export is a source
    assert (again.labels, again.preprocessor.sequence_length) == (classifier.labels, 16)
    np.testing.assert_array_equal(again.predict(TEXTS, verbose=0),
                                  classifier.predict(TEXTS, verbose=0))
    record = tmp_path / "exported" / records.EXPORT_RECORD
    values = json.loads(record.read_text())
    del values["albert_config"]  # as exports written before the record held the config
    record.write_text(json.dumps(values))
    with pytest.raises(UserValueError, match="the export does not record its model's config"):
        albert_tf.from_pretrained(str(tmp_path / "exported"))
