"""Pipelines with fewer layers and early exit: a Keras source is set so; an export runs
as it was exported and refuses other settings in one line."""
import numpy as np
import pytest

from albert_tf import pipeline
from albert_tf.errors import UserValueError
from albert_tf.pipelines import base, sources
from tests.helpers import hf_models

TEXTS = ["A gripping, beautifully acted film.", "Dull and far too long.", "It was fine."]


@pytest.fixture(scope="module")
def models(tmp_path_factory, shared_data):
    spm = str(shared_data / "spm_official" / "30k-clean.model")
    return hf_models.write_model_set(str(tmp_path_factory.mktemp("hf")), spm,
                                     names=("sentiment", "ner", "qa"))


def scores(results):
    return np.array([[entry["score"] for entry in sorted(result, key=lambda e: e["label"])]
                     for result in results])


def test_num_layers_answers_from_the_first_layers(models):
    full = scores(pipeline("text-classification", model=models["sentiment"])(
        TEXTS, top_k=None))
    classify = pipeline("text-classification", model=models["sentiment"], num_layers=1)
    one = scores(classify(TEXTS, top_k=None))
    assert not np.allclose(full, one, atol=1e-4)
    # The same as the Keras model told to run one layer, on the pipeline's rows.
    read = sources.read_huggingface(models["sentiment"])
    read.model.inference_layers = 1
    rows = [classify.rows(text, classify.resolve_options({}))[0] for text in TEXTS]
    features = base.pad_rows(rows, classify.encoder.pad_id)
    logits = sources.keras_runner(read.model, "classifier")(features, ("logits",))["logits"]
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    labels = read.labels
    order = np.argsort(labels)
    np.testing.assert_allclose(probabilities[:, order], one, atol=1e-5)


def test_early_exit_reports_each_rows_exit_layer(models):
    # Confidence 0.01: every row is confident at the first layer.
    early = pipeline("text-classification", model=models["sentiment"], exit_confidence=0.01)
    one = pipeline("text-classification", model=models["sentiment"], num_layers=1)
    for result, reference in zip(early(TEXTS), one(TEXTS)):
        assert result["exit_layer"] == 1
        assert result["label"] == reference["label"]
        assert result["score"] == pytest.approx(reference["score"], abs=1e-5)
    # Patience beyond the depth: every row runs both layers, as without early exit.
    late = pipeline("text-classification", model=models["sentiment"], patience=5)
    full = pipeline("text-classification", model=models["sentiment"])
    for result, reference in zip(late(TEXTS), full(TEXTS)):
        assert result["exit_layer"] == 2 and result["label"] == reference["label"]
        assert result["score"] == pytest.approx(reference["score"], abs=1e-5)
    tagger = pipeline("token-classification", model=models["ner"], exit_confidence=0.01)
    entities = tagger("Ada Lovelace met Charles Babbage in London.")
    assert entities and all(entity["exit_layer"] == 1 for entity in entities)


@pytest.mark.parametrize("options, message", [
    ({"num_layers": 3}, r"inference_layers must be a whole number from 1 to the model's "
                        r"num_hidden_layers \(2\); got 3"),
    ({"patience": 0}, "patience must be a whole number of layers >= 1, got 0"),
])
def test_bad_settings_are_one_line(models, options, message):
    with pytest.raises(UserValueError, match=message):
        pipeline("text-classification", model=models["sentiment"], **options)


def test_early_exit_of_a_head_without_exits_is_refused(models):
    with pytest.raises(UserValueError, match=r"a span model has no per-layer exits; a "
                                             r"pipeline's early exit .* is for text and token "
                                             r"classification and multiple choice \(num_layers "
                                             r"works"):
        pipeline("question-answering", model=models["qa"], patience=2)


QUESTIONS = [
    {"question": "Where is Paris?", "choices": ["France", "Peru"],
     "context": "Paris is the capital of France."},
    {"question": "What colour is the ball?", "choices": ["red", "blue", "green", "black"]},
    {"question": "Who wrote it?", "choices": ["Tom", "Ann", "Bo"]},
]


@pytest.mark.slow  # 12 s
def test_a_questions_choices_exit_together(tmp_path, shared_data):
    """Multiple choice: whole questions go through the model (padded to the most choices,
    absent ones masked); each question's choices report its exit layer; a batch equals each
    question alone; patience beyond the depth equals the plain pipeline."""
    spm = str(shared_data / "spm_official" / "30k-clean.model")
    path = hf_models.write_hf_dir(str(tmp_path / "mc"), "multiple_choice", spm, seed=4)
    plain = pipeline("multiple-choice", model=path)(QUESTIONS)
    late = pipeline("multiple-choice", model=path, patience=5, batch_size=8)(QUESTIONS)
    for result, reference in zip(late, plain):
        assert [e["index"] for e in result] == [e["index"] for e in reference]
        assert {e["exit_layer"] for e in result} == {2}
        np.testing.assert_allclose([e["score"] for e in result],
                                   [e["score"] for e in reference], atol=1e-5)
    together = pipeline("multiple-choice", model=path, exit_confidence=0.3, batch_size=8)
    alone = pipeline("multiple-choice", model=path, exit_confidence=0.3, batch_size=1)
    batched, single = together(QUESTIONS), [alone(question) for question in QUESTIONS]
    assert [result[0]["exit_layer"] for result in batched] == [1, 2, 1]  # a mixed batch
    for result, reference in zip(batched, single):
        assert len({e["exit_layer"] for e in result}) == 1
        assert [(e["index"], e["exit_layer"]) for e in result] == [
            (e["index"], e["exit_layer"]) for e in reference]
        np.testing.assert_allclose([e["score"] for e in result],
                                   [e["score"] for e in reference], atol=1e-5)
    first = pipeline("multiple-choice", model=path, exit_confidence=0.01)(QUESTIONS)
    one = pipeline("multiple-choice", model=path, num_layers=1)(QUESTIONS)
    for result, reference in zip(first, one):
        assert {e["exit_layer"] for e in result} == {1}
        assert [e["index"] for e in result] == [e["index"] for e in reference]


def test_an_export_refuses_settings_it_was_not_exported_with():
    source = sources.ModelSource(None, "classifier", None, 64, "onnx", "/runs/sst2/export",
                                 light={"early_exit": {"patience": 3, "confidence": None,
                                                       "tolerance": 0.0},
                                        "num_hidden_layers": 12})
    assert sources.set_light_inference(source, patience=3) is source
    with pytest.raises(UserValueError, match=r"model=/runs/sst2/export: an export's graph is "
                                             r"fixed when exported \(patience=3\); patience=2 "
                                             r"needs an export made with it"):
        sources.set_light_inference(source, patience=2)
    plain = sources.ModelSource(None, "classifier", None, 64, "onnx", "/runs/x/export")
    with pytest.raises(UserValueError, match=r"\(every layer, no early exit\); num_layers=6"):
        sources.set_light_inference(plain, num_layers=6)


@pytest.mark.slow  # 14 s: two CLI processes
def test_predict_passes_the_settings_through(models, tmp_path):
    import json
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    output = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "albert_tf.predict", f"--model={models['sentiment']}",
               "--task=text-classification", f"--input={source}", f"--output={output}",
               "--exit_confidence=0.01"]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    results = [line["result"] for line in lines]
    results = [r[0] if isinstance(r, list) else r for r in results]
    assert [result["exit_layer"] for result in results] == [1, 1, 1]
    bad = subprocess.run(command[:-1] + ["--num_layers=9", f"--output={tmp_path / 'x'}"],
                         cwd=REPO_ROOT, capture_output=True, text=True)
    assert bad.returncode != 0
    assert "num_hidden_layers (2); got 9" in bad.stderr.strip().splitlines()[-1]
