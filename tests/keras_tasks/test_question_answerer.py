"""`AlbertQuestionAnswerer`: its windows are run_squad.py's; fit on the CLI's batches leaves
the CLI's weights; predict reads answers as run_squad.py's post-processing; .keras round
trips; bad input gets one line."""
import json

import keras
import numpy as np
import pytest

import albert_tf
from albert_tf.errors import UserFileNotFoundError, UserValueError
from albert_tf.tasks.span_qa import postprocess as squad_postprocess
from albert_tf.tasks.span_qa.job import SpanQaJob, SpanQaOptions
from tests.helpers.hf_models import small_config, write_hf_dir

LENGTH, BATCH = 64, 4
CONTEXT = "The Eiffel Tower was built in 1889 by Gustave Eiffel in Paris."
QUESTIONS = {"question": ["When was the tower built?", "Who built the tower?"],
             "context": [CONTEXT, CONTEXT]}


@pytest.fixture(scope="module")
def qa_dir(tmp_path_factory, official_spm):
    return write_hf_dir(str(tmp_path_factory.mktemp("hf") / "qa"), "span", official_spm,
                        seed=6)


@pytest.fixture(scope="module")
def reader(qa_dir):
    return albert_tf.from_pretrained(qa_dir, sequence_length=LENGTH)


def squad_sample(shared_data, tmp_path, questions=12, name="dev-v1.1.json"):
    source = shared_data / "squad" / name
    if not source.exists():
        pytest.skip(f"{source} not found")
    data = json.loads(source.read_text())
    paragraphs = []
    for paragraph in data["data"][0]["paragraphs"]:
        paragraphs.append(dict(paragraph, qas=paragraph["qas"][:3]))
        if sum(len(p["qas"]) for p in paragraphs) >= questions:
            break
    sample = {"version": data["version"], "data": [{"title": "t", "paragraphs": paragraphs}]}
    path = tmp_path / "train.json"
    path.write_text(json.dumps(sample))
    return path, paragraphs


def test_fit_leaves_the_cli_weights_on_its_windows(tmp_path, shared_data, official_spm,
                                                    qa_dir):
    """The task's windows of SQuAD questions are run_squad.py's (as sets: the CLI shuffles
    them); fit on the CLI's batches, as token features, leaves the CLI's weights but the
    pooler's (unused by the span head: Keras leaves it alone, as the original's optimizer
    skips a variable without gradient, while run_squad.py's loop applies a zero gradient,
    so weight decay shrinks it)."""
    path, paragraphs = squad_sample(shared_data, tmp_path)
    job = SpanQaJob(SpanQaOptions(
        train_file=str(path), spm_model_file=official_spm, albert_config=small_config(64),
        max_seq_length=LENGTH, doc_stride=24, max_query_length=16, classifier_dropout=0.0,
        output_dir=str(tmp_path / "run"), do_train=True, init_checkpoint=qa_dir,
        train_batch_size=BATCH, learning_rate=1e-3, num_train_epochs=1.0,
        warmup_proportion=0.25, optimizer="adamw", seed=3, save_checkpoints_steps=1000,
        iterations_per_loop=1))
    trained = job.run()["model"]
    steps = int(job.num_train_examples() / BATCH * 1.0)
    batches = list(job.train_dataset(None).take(steps).as_numpy_iterator())

    reader = albert_tf.from_pretrained(qa_dir, sequence_length=LENGTH, doc_stride=24,
                                       max_query_length=16)
    rows = [(qa["question"], p["context"], qa["answers"][0]) for p in paragraphs
            for qa in p["qas"]]
    windows = reader.windows({"question": [q for q, _, _ in rows],
                              "context": [c for _, c, _ in rows]}, [a for _, _, a in rows])
    ours = {tuple(ids) + (s, e) for ids, s, e in zip(
        windows["input_ids"].tolist(), windows["start_positions"], windows["end_positions"])}
    cli = {tuple(ids) + (s, e) for batch in batches for ids, s, e in zip(
        batch["input_ids"].tolist(), batch["start_positions"], batch["end_positions"])}
    assert cli <= ours and len(windows["input_ids"]) > len(rows)  # several windows each

    reader.compile(optimizer="adamw", learning_rate=1e-3, num_train_steps=steps,
                   warmup_steps=int(steps * 0.25))
    features = {name: np.concatenate([b[name] for b in batches])
                for name in ("input_ids", "input_mask", "segment_ids")}
    labels = {name: np.concatenate([b[name] for b in batches])
              for name in ("start_positions", "end_positions")}
    reader.fit(features, labels, batch_size=BATCH, shuffle=False, verbose=0)
    for mine, theirs in zip(reader.network.weights, trained.weights):
        if "pooler" not in mine.path:
            np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6,
                                       err_msg=mine.path)


def test_predict_reads_answers_as_run_squad(reader):
    """The answers are run_squad.py's post-processing of the network's logits."""
    examples = albert_tf.keras_tasks.question_answerer.examples_of(QUESTIONS)
    arrays = reader.windows(QUESTIONS)
    outputs = reader.network({name: arrays[name].astype(np.int32)
                              for name in ("input_ids", "input_mask", "segment_ids")})
    results = {"unique_ids": arrays["unique_ids"],
               "start_logits": outputs["start_logits"].numpy(),
               "end_logits": outputs["end_logits"].numpy()}
    want = squad_postprocess.postprocess(examples, arrays, results,
                                         squad_postprocess.PostprocessOptions())
    got = reader.predict(QUESTIONS, verbose=0)
    assert got == [want.answers[e.qas_id] for e in examples]
    assert all(answer in CONTEXT for answer in got)
    nbest = reader.predict_nbest(QUESTIONS, verbose=0)
    assert nbest[0][0]["text"] == got[0] and len(nbest[0]) <= 20
    rows = [{"question": q, "paragraph": c} for q, c in zip(*QUESTIONS.values())]
    assert reader.predict(rows, verbose=0) == got


def test_fit_on_questions_learns_and_round_trips(qa_dir, tmp_path):
    keras.utils.set_random_seed(0)
    reader = albert_tf.from_pretrained(qa_dir, sequence_length=LENGTH)
    reader.compile(learning_rate=3e-3)
    answers = [{"text": "1889", "answer_start": CONTEXT.index("1889")}, "Gustave Eiffel"]
    history = reader.fit(QUESTIONS, answers, epochs=6, batch_size=2, verbose=0).history
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    path = str(tmp_path / "qa.keras")
    reader.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, albert_tf.AlbertQuestionAnswerer)
    assert loaded.predict(QUESTIONS, verbose=0) == reader.predict(QUESTIONS, verbose=0)
    assert loaded.options == reader.options


def test_bad_input_gets_one_line(reader):
    cases = [
        (lambda: reader.fit(QUESTIONS, ["1889"]), "2 questions but 1 answers"),
        (lambda: reader.fit(QUESTIONS, ["1889", "Napoleon"]),
         "question 1: the answer 'Napoleon' is not in the context"),
        (lambda: reader.fit(QUESTIONS, ["1889", {"text": "Paris", "answer_start": 3}]),
         "question 1: the context at answer_start=3 is not the answer 'Paris'"),
        (lambda: reader.fit(QUESTIONS), "need answers"),
        (lambda: reader.predict({"question": ["q"]}), "x has no 'context' column"),
        (lambda: reader.predict(["a text"]), "x is a dict of columns"),
        (lambda: albert_tf.from_pretrained(reader, max_query_length=70),
         "max_query_length \\(70\\) must be smaller"),
    ]
    for call, message in cases:
        with pytest.raises(UserValueError, match=message):
            call()


@pytest.mark.slow  # ~15 s on AMD EPYC Zen 3: a SavedModel and ONNX
def test_export_answers_as_predict_and_serves_the_pipeline(reader, qa_dir, tmp_path):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the raw-text signature's ops)

    export_dir = str(tmp_path / "exported")
    results = reader.export(export_dir, format=("saved_model", "onnx"))
    record = json.loads((tmp_path / "exported" / "albert_tf_export.json").read_text())
    assert record["task"] == "squad_v1" and record["max_seq_length"] == LENGTH
    assert record["doc_stride"] == reader.options.doc_stride
    served = tf.saved_model.load(export_dir).signatures["serving_default"]
    answers = served(question=tf.constant(QUESTIONS["question"]),
                     context=tf.constant(QUESTIONS["context"]))["answer"].numpy()
    assert [a.decode() for a in answers] == reader.predict(QUESTIONS, verbose=0)
    # The pipelines read the export as they read the Hugging Face directory it came from.
    want = albert_tf.pipeline("question-answering", model=qa_dir)(
        question=QUESTIONS["question"], context=QUESTIONS["context"])
    for model in (export_dir, results["onnx"]):
        got = albert_tf.pipeline("question-answering", model=model)(
            question=QUESTIONS["question"], context=QUESTIONS["context"])
        assert [(g["start"], g["end"], g["answer"]) for g in got] == \
            [(w["start"], w["end"], w["answer"]) for w in want]
        np.testing.assert_allclose([g["score"] for g in got], [w["score"] for w in want],
                                   rtol=1e-4)
    again = albert_tf.from_pretrained(export_dir)  # the export is a source, its windows too
    assert again.options == reader.options
    assert again.predict(QUESTIONS, verbose=0) == reader.predict(QUESTIONS, verbose=0)
    (tmp_path / "onnx_only").mkdir()
    for name in ("model.onnx", "albert_tf_export.json", "spiece.model"):
        (tmp_path / "onnx_only" / name).write_bytes((tmp_path / "exported" / name).read_bytes())
    with pytest.raises(UserFileNotFoundError, match="no SavedModel .its ONNX and LiteRT"):
        albert_tf.from_pretrained(str(tmp_path / "onnx_only"))


# --- SQuAD v2.0 -----------------------------------------------------------------------------

@pytest.mark.slow  # ~25 s on AMD EPYC Zen 3: a CLI run
def test_v2_fit_leaves_the_cli_weights_on_its_windows(tmp_path, shared_data, official_spm,
                                                       qa_dir):
    """SQuAD v2.0 (unanswerable questions): the windows of run_squad.py
    --version_2_with_negative (impossible ones at [CLS]) are the reader's; fit on its
    batches leaves its weights (the end teacher-forced on the gold start, the answer-class
    loss), but the unused pooler's."""
    from albert_tf import convert, save_tf1_checkpoint
    from albert_tf.checkpoints import hf

    path, paragraphs = squad_sample(shared_data, tmp_path, 16, "dev-v2.0.sample2.json")
    # Both start from one checkpoint holding a v2 head (a new head's random start would
    # differ between the two doors).
    start = convert.build_model("squad_v2", small_config(64))
    hf.load_hf_checkpoint(start, qa_dir)
    save_tf1_checkpoint(start, str(tmp_path / "init" / "model.ckpt"))
    job = SpanQaJob(SpanQaOptions(
        train_file=str(path), spm_model_file=official_spm, albert_config=small_config(64),
        max_seq_length=LENGTH, doc_stride=24, max_query_length=16, classifier_dropout=0.0,
        version_2_with_negative=True, output_dir=str(tmp_path / "run"), do_train=True,
        init_checkpoint=str(tmp_path / "init" / "model.ckpt"), train_batch_size=BATCH,
        learning_rate=1e-3, num_train_epochs=1.0, warmup_proportion=0.25, optimizer="adamw",
        seed=3, save_checkpoints_steps=1000, iterations_per_loop=1))
    trained = job.run()["model"]
    steps = int(job.num_train_examples() / BATCH * 1.0)
    batches = list(job.train_dataset(None).take(steps).as_numpy_iterator())

    reader = albert_tf.from_pretrained(qa_dir, sequence_length=LENGTH, doc_stride=24,
                                       max_query_length=16, version_2_with_negative=True,
                                       dropout=0.0)
    reader.network.set_weights(start.get_weights())
    rows = [(qa["question"], p["context"], qa["answers"][0] if qa["answers"] else "")
            for p in paragraphs for qa in p["qas"]]
    assert any(answer == "" for _, _, answer in rows)
    windows = reader.windows({"question": [q for q, _, _ in rows],
                              "context": [c for _, c, _ in rows]}, [a for _, _, a in rows])
    names = ("start_positions", "end_positions", "is_impossible")
    ours = {tuple(ids) + tuple(int(windows[n][i]) for n in names)
            for i, ids in enumerate(windows["input_ids"].tolist())}
    cli = {tuple(ids) + tuple(int(batch[n][i]) for n in names)
           for batch in batches for i, ids in enumerate(batch["input_ids"].tolist())}
    assert cli <= ours and any(key[-1] == 1 for key in cli)

    reader.compile(optimizer="adamw", learning_rate=1e-3, num_train_steps=steps,
                   warmup_steps=int(steps * 0.25))
    features = {name: np.concatenate([b[name] for b in batches])
                for name in ("input_ids", "input_mask", "segment_ids", "p_mask")}
    labels = {name: np.concatenate([b[name] for b in batches]) for name in names}
    reader.fit(features, labels, batch_size=BATCH, shuffle=False, verbose=0)
    compared = 0
    for mine, theirs in zip(reader.network.weights, trained.weights):
        if "pooler" not in mine.path:
            # end_dense_1's bias shifts every end logit alike, which log_softmax cancels: its
            # gradient is rounding noise, and its value stays within ~1e-6 of 0.
            np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-5,
                                       atol=1e-5 if "end_dense_1/bias" in mine.path else 1e-6,
                                       err_msg=mine.path)
            compared += "squad" in mine.path
    assert compared >= 6  # the v2 head's own weights are among them


def test_v2_predict_is_run_squads_post_processing_with_its_threshold(qa_dir):
    reader = albert_tf.from_pretrained(qa_dir, sequence_length=LENGTH,
                                       version_2_with_negative=True)
    examples = albert_tf.keras_tasks.question_answerer.examples_of(QUESTIONS)
    arrays = reader.windows(QUESTIONS)
    outputs = reader.network({name: arrays[name].astype(np.int32) for name in
                              ("input_ids", "input_mask", "segment_ids", "p_mask")})
    results = {"unique_ids": arrays["unique_ids"]}
    results.update({name: outputs[name].numpy() for name in
                    albert_tf.keras_tasks.question_answerer.V2_OUTPUTS})
    options = squad_postprocess.PostprocessOptions(version_2_with_negative=True)
    want = squad_postprocess.postprocess(examples, arrays, results, options)
    predictions = reader.predictions(QUESTIONS, verbose=0)
    assert predictions.null_odds == pytest.approx(want.null_odds, rel=1e-5)
    assert reader.predict(QUESTIONS, verbose=0) == list(want.answers.values())
    assert all(answers for answers in reader.predict(QUESTIONS, verbose=0))  # no threshold
    odds = list(predictions.null_odds.values())
    reader.null_score_diff_threshold = min(odds) - 1.0  # every question's odds above it
    assert reader.predict(QUESTIONS, verbose=0) == ["", ""]
    with pytest.raises(UserValueError, match="an unanswerable question needs a SQuAD v2.0"):
        albert_tf.from_pretrained(qa_dir, sequence_length=LENGTH).fit(QUESTIONS, ["1889", ""])


@pytest.mark.slow  # ~20 s on AMD EPYC Zen 3: a fit, a SavedModel, a .keras file
def test_v2_fit_export_and_sources_round_trip(qa_dir, tmp_path):
    import keras
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    keras.utils.set_random_seed(0)
    reader = albert_tf.from_pretrained(qa_dir, sequence_length=LENGTH,
                                       version_2_with_negative=True,
                                       null_score_diff_threshold=0.5)
    reader.compile(learning_rate=1e-3)
    questions = {name: values + values[:1] for name, values in QUESTIONS.items()}
    history = reader.fit(questions, ["1889", "Gustave Eiffel", None], epochs=2, batch_size=2,
                         verbose=0).history
    assert np.isfinite(history["loss"]).all()
    want = reader.predict(questions, verbose=0)
    reader.export(str(tmp_path / "exported"))
    record = json.loads((tmp_path / "exported" / "albert_tf_export.json").read_text())
    assert record["task"] == "squad_v2" and record["null_score_diff_threshold"] == 0.5
    served = tf.saved_model.load(str(tmp_path / "exported")).signatures["serving_default"]
    answers = served(question=tf.constant(questions["question"]),
                     context=tf.constant(questions["context"]))["answer"].numpy()
    assert [a.decode() for a in answers] == want
    for source in (str(tmp_path / "exported"), reader):
        again = albert_tf.from_pretrained(source)
        assert again.v2 and again.null_score_diff_threshold == 0.5
        assert again.predict(questions, verbose=0) == want
    path = str(tmp_path / "v2.keras")
    reader.save(path)
    assert keras.saving.load_model(path).predict(questions, verbose=0) == want
