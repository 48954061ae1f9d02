"""albert_tf.pipeline: the outputs' shapes and rules, streaming, errors, and every model source
giving the same answers. (Equality with transformers' pipelines: test_transformers_oracle.)"""
import json
import os
import types

import numpy as np
import pytest

from albert_tf import pipeline
from albert_tf.errors import UserError
from albert_tf.pipelines import encoding, sources
from tests.helpers import hf_models

TEXTS = ["Anna Smith lives in New York.", "The film was a gripping thriller.", "Bob, 1999."]
LONG = " ".join(["Anna Smith lives in New York and works for the United Nations."] * 12)


@pytest.fixture(scope="module")
def spm(shared_data):
    return str(shared_data / "spm_official" / "30k-clean.model")


@pytest.fixture(scope="module")
def models(tmp_path_factory, spm):
    return hf_models.write_model_set(str(tmp_path_factory.mktemp("hf")), spm)


def logits_of(model_dir, texts):
    """The classifier's logits for `texts`, straight from the model source."""
    source = sources.load_source(model_dir)
    runner = pipeline("text-classification", model=model_dir)
    rows = [runner.rows(text, runner.resolve_options({}))[0] for text in texts]
    return runner.run_rows(rows)["logits"], source


def test_text_classification_outputs(models):
    classify = pipeline("text-classification", model=models["sentiment"])
    top = classify(TEXTS[0])
    assert isinstance(top, list) and len(top) == 1 and top[0]["label"] in ("negative", "positive")
    assert [set(r) for r in classify(TEXTS)] == [{"label", "score"}] * 3
    every = classify(TEXTS[0], top_k=None)
    assert [r["label"] for r in every] == sorted(
        hf_models.SENTIMENT_LABELS, key=lambda l: -next(x["score"] for x in every
                                                         if x["label"] == l))
    assert sum(r["score"] for r in every) == pytest.approx(1.0, abs=1e-6)
    assert every[0] == top[0]
    assert classify(TEXTS, top_k=1) == [[r] for r in classify(TEXTS)]
    pair = classify({"text": TEXTS[0], "text_pair": TEXTS[1]})
    assert set(pair) == {"label", "score"}


def test_multi_label_scores_are_independent_sigmoids(models):
    classify = pipeline("text-classification", model=models["multilabel"])
    logits, _ = logits_of(models["multilabel"], TEXTS[:1])
    scores = classify(TEXTS[0], top_k=None)
    expected = 1 / (1 + np.exp(-logits[0]))
    by_label = {r["label"]: r["score"] for r in scores}
    assert by_label == pytest.approx(dict(zip(hf_models.GOEMOTIONS_LABELS, expected)), abs=1e-6)
    assert abs(sum(by_label.values()) - 1) > 1e-3  # not a softmax


def test_regression_returns_the_raw_score(models):
    classify = pipeline("text-classification", model=models["regression"])
    logits, source = logits_of(models["regression"], TEXTS[:1])
    assert source.problem_type == "regression"
    assert classify(TEXTS[0], top_k=None) == [
        {"label": "LABEL_0", "score": pytest.approx(float(logits[0, 0]), abs=1e-6)}]


def test_one_output_without_problem_type_is_a_sigmoid_as_in_hugging_face(models, tmp_path):
    import shutil

    directory = tmp_path / "one"
    shutil.copytree(models["regression"], directory)
    values = json.loads((directory / "config.json").read_text())
    del values["problem_type"]
    (directory / "config.json").write_text(json.dumps(values))
    logits, _ = logits_of(models["regression"], TEXTS[:1])
    score = pipeline("text-classification", model=str(directory))(TEXTS[0])[0]["score"]
    assert score == pytest.approx(1 / (1 + np.exp(-logits[0, 0])), abs=1e-6)


def test_top_k_given_to_the_pipeline_keeps_hugging_faces_shapes(models):
    classify = pipeline("text-classification", model=models["sentiment"], top_k=None)
    assert len(classify(TEXTS[0])) == 1 and len(classify(TEXTS[0])[0]) == 2  # [[...]]
    assert [len(r) for r in classify(TEXTS)] == [2, 2, 2]
    with pytest.raises(UserError, match="top_k=0: a positive int, or None"):
        classify(TEXTS[0], top_k=0)
    with pytest.raises(UserError, match="function_to_apply='tanh'"):
        classify(TEXTS[0], function_to_apply="tanh")


def test_a_hugging_face_directory_with_another_tools_onnx_file_is_read_as_hugging_face(
        models, tmp_path):
    import shutil

    directory = tmp_path / "hf_with_onnx"
    shutil.copytree(models["sentiment"], directory)
    (directory / "model.onnx").write_bytes(b"an optimum export")
    assert sources.load_source(str(directory)).kind == "huggingface"


def test_too_long_text_needs_truncation(models):
    classify = pipeline("text-classification", model=models["sentiment"])
    with pytest.raises(UserError, match=r"tokens with \[CLS\] and \[SEP\]; the model reads 64: "
                                        "pass truncation=True"):
        classify(LONG)
    assert set(classify(LONG, truncation=True)[0]) == {"label", "score"}


@pytest.mark.parametrize("model, aggregation", [("sentiment", "mean"), ("multilabel", "max")])
def test_long_texts_are_read_in_windows_or_head_and_tail(models, model, aggregation):
    from albert_tf.tasks.classification import long_text

    classify = pipeline("text-classification", model=models[model])
    ids = classify.encoder.tokens(LONG, offsets=False).ids
    budget = classify.max_length - 2
    assert len(ids) > 2 * budget
    for rule in (long_text.LongText("windows", 20, aggregation), long_text.LongText("head_tail")):
        pieces = long_text.pieces(ids, budget, rule)
        rows = [classify.encoder.pack(encoding.Tokens(piece, [], [], [])) for piece in pieces]
        logits = long_text.aggregate(classify.run_rows(rows)["logits"],
                                     np.zeros(len(rows), int), 1, aggregation)[0]
        got = classify(LONG, top_k=None, long_text=rule.mode, doc_stride=rule.doc_stride,
                       window_aggregation=aggregation)
        scores = {item["label"]: item["score"] for item in got}
        np.testing.assert_allclose([scores[classify.source.label(k)]
                                    for k in range(len(logits))],
                                   classify.scores(logits, {"function_to_apply": None}),
                                   atol=1e-6)
    # A text that fits reads the same under every rule.
    short = [classify(TEXTS[0], top_k=None, long_text=mode)
             for mode in ("truncate", "head_tail", "windows")]
    assert short[0] == short[1] == short[2]


@pytest.mark.parametrize("options, message", [
    (dict(long_text="windows", doc_stride=100), "doc_stride 100 exceeds the 62 text tokens a "
                                                "window holds"),
    (dict(long_text="middle"), "long_text must be one of truncate, head_tail, windows"),
    (dict(long_text="windows", window_aggregation="sum"),
     "window_aggregation must be one of mean, max"),
])
def test_bad_long_text_options_are_one_line(models, options, message):
    classify = pipeline("text-classification", model=models["sentiment"])
    with pytest.raises(UserError, match=message):
        classify(LONG, **options)
    with pytest.raises(UserError, match="long_text='windows' reads single texts, not pairs"):
        classify({"text": LONG, "text_pair": "x"}, long_text="windows")


def test_batches_and_streams_give_the_same_results(models):
    one = pipeline("token-classification", model=models["ner"], batch_size=1,
                   aggregation_strategy="simple")
    many = pipeline("token-classification", model=models["ner"], batch_size=8,
                    aggregation_strategy="simple")
    expected = [one(text) for text in TEXTS]
    got = many(TEXTS)
    for a, b in zip(got, expected):
        assert [(e["entity_group"], e["start"], e["end"]) for e in a] == \
            [(e["entity_group"], e["start"], e["end"]) for e in b]
        assert [e["score"] for e in a] == pytest.approx([e["score"] for e in b], abs=1e-5)
    stream = many(iter(TEXTS))
    assert isinstance(stream, types.GeneratorType)
    assert [len(r) for r in stream] == [len(r) for r in expected]


def test_token_classification_spans_point_into_the_text(models):
    tag = pipeline("token-classification", model=models["ner"])
    for strategy in ("none", "simple", "first", "average", "max"):
        for entity in tag(TEXTS[0], aggregation_strategy=strategy, ignore_labels=[]):
            surface = TEXTS[0][entity["start"]:entity["end"]]
            assert surface == surface.strip() and surface
            word = entity["word"].replace("\u2581", "")
            assert word.replace(" ", "") in surface.lower().replace(" ", "")


def test_token_classification_reads_long_texts_in_windows(models, caplog):
    tag = pipeline("token-classification", model=models["ner"])
    cut = tag(LONG, aggregation_strategy="simple", ignore_labels=[])
    assert "pass stride= to read all of it" in caplog.text
    whole = tag(LONG, aggregation_strategy="simple", ignore_labels=[], stride=8)
    assert max(e["end"] for e in whole) == len(LONG) - 1 + 1  # the final "."
    assert max(e["end"] for e in cut) < len(LONG) // 2
    with pytest.raises(UserError, match="needs an aggregation_strategy other than 'none'"):
        tag(LONG, stride=8)
    with pytest.raises(UserError, match="stride=62: must be at least 0 and less than"):
        tag(LONG, stride=62, aggregation_strategy="first")


def test_question_answering_edge_inputs(models):
    from albert_tf.pipelines.question_answering import decode_spans

    answer = pipeline("question-answering", model=models["qa"])
    context = "Anna lives in Paris."
    assert answer([{"question": "Who?", "context": context}]) == answer(question="Who?",
                                                                       context=context)
    with pytest.raises(UserError, match="give both question= and context="):
        answer(question="Who?")
    with pytest.raises(UserError, match="the context is empty"):
        answer(question="Who?", context="   ")
    with pytest.raises(UserError, match=r"doc_stride=-1: an integer at least 0"):
        answer(question="Who?", context=context, doc_stride=-1)
    with pytest.raises(UserError, match=r"top_k='3': an integer at least 1"):
        answer(question="Who?", context=context, top_k="3")
    # as many candidates as top_k: every span, best first (numpy's argpartition needs fewer)
    starts, ends, scores = decode_spans(np.array([0.0, 0.6, 0.4]), np.array([0.0, 0.3, 0.7]),
                                        9, 15, np.array([1, 1, 1]))
    assert list(zip(starts, ends)) == [(1, 2), (2, 2), (1, 1)]


def test_question_answering(models):
    answer = pipeline("question-answering", model=models["qa"])
    context = "Anna Smith lives in New York and works for the United Nations."
    best = answer(question="Where does Anna live?", context=context)
    assert set(best) == {"score", "start", "end", "answer"}
    assert context[best["start"]:best["end"]] == best["answer"]
    top = answer(question="Where does Anna live?", context=context, top_k=4)
    assert len(top) == 4 and top[0] == best
    assert [a["score"] for a in top] == sorted((a["score"] for a in top), reverse=True)
    with_null = answer(question="Who?", context=context, top_k=500, handle_impossible_answer=True)
    assert [(a["start"], a["end"]) for a in with_null if a["answer"] == ""] == [(0, 0)]
    assert "" not in [a["answer"] for a in answer(question="Who?", context=context, top_k=500)]
    windows = answer(question="Who?", context=LONG, top_k=3)
    assert all(LONG[a["start"]:a["end"]] == a["answer"] for a in windows)
    alone = answer(question="Who?", context=context)
    for batched in answer([{"question": "Who?", "context": context}] * 2):
        assert batched == dict(alone, score=pytest.approx(alone["score"], abs=1e-6))
    with pytest.raises(UserError, match=r"doc_stride \(70\) is larger than max_seq_len \(64\)"):
        answer(question="Who?", context=context, doc_stride=70)
    with pytest.raises(UserError, match="an input is {'question': str, 'context': str}"):
        answer({"question": "Who?"})


def test_fill_mask(models):
    fill = pipeline("fill-mask", model=models["mlm"])
    candidates = fill("The capital of France is [MASK].")
    assert len(candidates) == 5 and set(candidates[0]) == {"score", "token", "token_str",
                                                           "sequence"}
    assert candidates[0]["sequence"] == f"the capital of france is " \
        f"{candidates[0]['token_str']}." or candidates[0]["token_str"] in candidates[0]["sequence"]
    two = fill("The [MASK] sat on the [MASK].", top_k=2)
    assert len(two) == 2 and all(len(row) == 2 for row in two)
    assert two[0][0]["sequence"].startswith("[CLS]")
    limited = fill("I like [MASK].", targets=["\u2581jazz", "\u2581rock"])
    assert {c["token_str"] for c in limited} == {"jazz", "rock"}
    with pytest.raises(UserError, match=r"no \[MASK\] in"):
        fill("No mask here.")


def test_feature_extraction(models):
    extract = pipeline("feature-extraction", model=models["mlm"])
    hidden = extract("hello world")
    assert np.array(hidden).shape == (1, 4, 64)  # [CLS] hello world [SEP]
    assert extract("hello world", return_tensors=True).dtype == np.float32


def test_zero_shot(models):
    classify = pipeline("zero-shot-classification", model=models["nli"])
    assert classify(TEXTS[0], ["sport", "food"]) == classify(
        TEXTS[0], candidate_labels=["sport", "food"])
    result = classify(TEXTS[0], candidate_labels=["sport", "politics", "food"])
    assert result["sequence"] == TEXTS[0] and sorted(result["labels"]) == [
        "food", "politics", "sport"]
    assert sum(result["scores"]) == pytest.approx(1.0, abs=1e-6)
    independent = classify(TEXTS[0], candidate_labels="sport, politics", multi_label=True)
    assert abs(sum(independent["scores"]) - 1) > 1e-4
    with pytest.raises(UserError, match="has no {} where the label goes"):
        classify(TEXTS[0], candidate_labels=["a"], hypothesis_template="No slot.")
    with pytest.raises(UserError, match="give candidate_labels"):
        classify(TEXTS[0])


def test_multiple_choice(models):
    choose = pipeline("multiple-choice", model=models["mc"])
    ranked = choose(question="Where is Paris?", choices=["France", "Peru", "Mars"],
                    context="Paris is the capital of France.")
    assert sorted(r["index"] for r in ranked) == [0, 1, 2]
    assert [r["choice"] for r in ranked] == [["France", "Peru", "Mars"][r["index"]]
                                             for r in ranked]
    assert sum(r["score"] for r in ranked) == pytest.approx(1.0)
    assert [r["score"] for r in ranked] == sorted((r["score"] for r in ranked), reverse=True)


def test_unknown_tasks_options_and_models_are_one_line(models, tmp_path):
    with pytest.raises(UserError, match="task 'summarization': one of text-classification"):
        pipeline("summarization", model=models["sentiment"])
    with pytest.raises(UserError, match="unknown option 'top_n'"):
        pipeline("text-classification", model=models["sentiment"], top_n=3)
    with pytest.raises(UserError, match="is a classifier model; token-classification needs a "
                                        "token_classifier model"):
        pipeline("ner", model=models["sentiment"])
    with pytest.raises(UserError, match="no such file or directory"):
        pipeline("ner", model=str(tmp_path / "missing"))
    with pytest.raises(UserError, match="not a model this library reads"):
        pipeline("ner", model=str(tmp_path))


def export_sentiment(models, tmp_path, spm, formats):
    """The Hugging Face sentiment model exported as run_classifier.py exports it: `formats`
    ("saved_model", "onnx", "tflite") and albert_tf_export.json. Returns the export dir."""
    from albert_tf import convert
    from albert_tf.checkpoints import hf
    from albert_tf.export import portable, records
    from albert_tf.tasks.classification import export as classifier_export
    from albert_tf.tasks.classification.job import ClassificationOptions

    config = hf.config_from_hf_dir(models["sentiment"])
    model = convert.build_model("classifier", config, 2)
    hf.load_hf_checkpoint(model, models["sentiment"])
    spec = types.SimpleNamespace(labels=hf_models.SENTIMENT_LABELS, is_pair=False,
                                 is_regression=False)
    options = ClassificationOptions(task_name="sst-2", spm_model_file=spm, max_seq_length=64,
                                    export_dir=str(tmp_path / "export"), albert_config=config,
                                    data_dir=str(tmp_path))
    if "saved_model" in formats:
        classifier_export.export_classifier(model, options, spec)
    portable_model = classifier_export.classifier_portable_model(model, options, spec)
    portable_formats = [f for f in formats if f != "saved_model"]
    if portable_formats:
        portable.export_model_dir(options.export_dir, portable_model, portable_formats,
                                  spm_model_file=spm)
    records.write_export_record(options.export_dir, portable_model.metadata, spm_model_file=spm)
    return options.export_dir


def test_every_source_gives_the_same_answers(models, tmp_path, spm):
    """A classifier as a Hugging Face directory, a SavedModel and model.onnx: equal results."""
    export_dir = export_sentiment(models, tmp_path, spm, ["saved_model", "onnx"])
    record = json.loads((tmp_path / "export" / "albert_tf_export.json").read_text())
    assert record["task"] == "classifier" and record["labels"] == hf_models.SENTIMENT_LABELS
    expected = pipeline("text-classification", model=models["sentiment"])(TEXTS, top_k=None)
    for path, kind in ((export_dir, "saved_model"),
                       (os.path.join(export_dir, "model.onnx"), "onnx")):
        runner = pipeline("text-classification", model=path)
        assert runner.source.kind == kind
        got = runner(TEXTS, top_k=None)
        for a, b in zip(got, expected):
            assert [x["label"] for x in a] == [x["label"] for x in b]
            assert [x["score"] for x in a] == pytest.approx([x["score"] for x in b], abs=1e-5)
    with pytest.raises(UserError, match="holds a task's outputs, not the encoder's"):
        pipeline("feature-extraction", model=export_dir)
    # model.onnx runs without TensorFlow: the same answers with its import blocked
    assert without_tensorflow(os.path.join(export_dir, "model.onnx"), TEXTS) == [
        [x["label"] for x in r] for r in expected]


def without_tensorflow(model_path, texts):
    """The labels a text-classification pipeline gives in a process that cannot import
    TensorFlow."""
    import subprocess
    import sys

    program = ("import json, sys; sys.modules['tensorflow'] = None\n"
               "from albert_tf import pipeline\n"
               f"p = pipeline('text-classification', model={model_path!r})\n"
               f"print(json.dumps([[x['label'] for x in r] for r in p({texts!r}, top_k=None)]))")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # the LiteRT conversion: ~20 s
def test_a_litert_export_serves_the_pipeline_without_tensorflow(models, tmp_path, spm):
    path = os.path.join(export_sentiment(models, tmp_path, spm, ["tflite"]), "model.tflite")
    expected = pipeline("text-classification", model=models["sentiment"])(TEXTS, top_k=None)
    assert pipeline("text-classification", model=path).source.kind == "tflite"
    assert without_tensorflow(path, TEXTS) == [[x["label"] for x in r] for r in expected]


def official_dir(models, tmp_path, spm):
    """The Hugging Face masked LM as an official download: TF1 checkpoint, config, vocabulary.
    Returns (directory, the pretrainer)."""
    directory = tmp_path / "albert_small"
    return directory, hf_models.write_official_dir(str(directory), models["mlm"], spm)


def test_an_official_directory_fills_masks_as_its_hugging_face_twin(models, tmp_path, spm):
    directory, _ = official_dir(models, tmp_path, spm)
    fill = pipeline("fill-mask", model=str(directory))
    assert fill.source.kind == "official"
    sentence = "The capital of France is [MASK]."
    expected = pipeline("fill-mask", model=models["mlm"])(sentence)
    got = fill(sentence)
    assert [c["token"] for c in got] == [c["token"] for c in expected]
    assert [c["score"] for c in got] == pytest.approx([c["score"] for c in expected], abs=1e-5)


@pytest.mark.slow  # the hub-style SavedModel export: ~15 s
def test_a_tf_hub_module_directory_is_read_as_official_not_as_an_export(models, tmp_path, spm):
    from albert_tf.export import hub as hub_export

    directory, model = official_dir(models, tmp_path, spm)
    module = hub_export.export_pretrainer(model, str(directory / "albert_config.json"),
                                          str(directory / "30k-clean.model"),
                                          str(tmp_path / "hub"))
    fill = pipeline("fill-mask", model=module)
    assert fill.source.kind == "official"
    sentence = "The capital of France is [MASK]."
    expected = pipeline("fill-mask", model=str(directory))(sentence)
    assert [c["token"] for c in fill(sentence)] == [c["token"] for c in expected]
