"""`AlbertMultipleChoiceTask`: fit on RACE questions leaves run_race.py's weights; its rows
are the CLI's; `.keras` round trips; the export answers as the task predicts; bad input gets
one line."""
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

import albert_tf
from albert_tf.errors import UserValueError
from albert_tf.tasks.multiple_choice import race
from albert_tf.tasks.multiple_choice.job import MultipleChoiceJob, MultipleChoiceOptions
from tests.helpers.hf_models import small_config, write_hf_dir

STEPS, BATCH, LENGTH, QA_LENGTH = 3, 4, 64, 24
QUESTIONS = {"article": ["Tom has a red ball. He plays with it every day.",
                         "The sun rises in the east and sets in the west."],
             "question": ["What colour is Tom's ball?", "The sun rises in the _ ."],
             "options": [["red", "blue", "green", "black"], ["west", "east", "north", "south"]]}


def _atol(path: str) -> float:
    """The choice head's output_bias shifts every option's logit alike, which the softmax
    over the options cancels: its gradient is rounding noise (the CLI's graph and Keras'
    sum in other orders; Eigen's kernels, with oneDNN off, differ by ~3e-6)."""
    return 1e-5 if "output_bias" in path else 1e-6


@pytest.fixture(scope="module")
def mc_dir(tmp_path_factory, official_spm):
    return write_hf_dir(str(tmp_path_factory.mktemp("hf") / "mc"), "multiple_choice",
                        official_spm, seed=8)


@pytest.fixture(scope="module")
def chooser(mc_dir):
    return albert_tf.from_pretrained(mc_dir, sequence_length=LENGTH)


def race_dir(tmp_path, shared_data):
    source = shared_data / "race" / "RACE" / "train"
    if not source.exists():
        pytest.skip(f"{source} not found (shared RACE samples)")
    root = tmp_path / "race"
    shutil.copytree(source, root / "RACE" / "train")
    return root


def race_job(tmp_path, shared_data, official_spm, mc_dir, **options):
    data = race_dir(tmp_path, shared_data)
    return MultipleChoiceJob(MultipleChoiceOptions(
        task_name="race", data_dir=str(data), spm_model_file=official_spm,
        albert_config=small_config(64), max_seq_length=LENGTH, max_qa_length=QA_LENGTH,
        classifier_dropout=0.0, output_dir=str(tmp_path / "run"), do_train=True,
        do_eval=False, init_checkpoint=mc_dir, train_batch_size=BATCH, learning_rate=1e-3,
        train_step=STEPS, warmup_step=1, save_checkpoints_steps=STEPS,
        iterations_per_loop=STEPS, optimizer="adamw", seed=3, **options))


def test_fit_leaves_the_cli_weights(tmp_path, shared_data, official_spm, mc_dir):
    """After the same 3 steps on the same batches (the original's AdamW, warmup and decay,
    clipping at 1.0; dropout 0), every weight is run_race.py's."""
    job = race_job(tmp_path, shared_data, official_spm, mc_dir)
    data = job.options.data_dir
    trained = job.run()["model"]
    batches = list(job.train_dataset(None).take(STEPS).as_numpy_iterator())
    order = [int(i) for batch in batches for i in batch["example_index"]]
    # The questions as the files hold them (raw texts: the task normalises them itself).
    questions = race.read_examples(str(data), "train", normalize=lambda text: text)
    rows = [questions[i] for i in order]
    x = {"article": [q.article for q in rows], "question": [q.question for q in rows],
         "options": [list(q.options) for q in rows]}
    answers = ["ABCD"[q.label] for q in rows]

    chooser = albert_tf.from_pretrained(mc_dir, sequence_length=LENGTH, dropout=0.0,
                                        max_qa_length=QA_LENGTH)
    packed = chooser.packed(x, answers)
    cli = {name: np.concatenate([b[name] for b in batches])
           for name in ("input_ids", "input_mask", "segment_ids", "label_ids")}
    for name, value in cli.items():
        np.testing.assert_array_equal(packed[name], value.reshape(packed[name].shape), name)
    chooser.compile(optimizer="adamw", learning_rate=1e-3, num_train_steps=STEPS,
                    warmup_steps=1)
    chooser.fit(x, answers, batch_size=BATCH, shuffle=False, verbose=0)
    start = albert_tf.from_pretrained(mc_dir).network.weights
    moved = 0
    for mine, theirs, initial in zip(chooser.network.weights, trained.weights, start):
        assert mine.path.split("/", 1)[1] == theirs.path.split("/", 1)[1]
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-5,
                                   atol=_atol(mine.path), err_msg=mine.path)
        moved += not np.array_equal(mine.numpy(), initial.numpy())
    assert moved > len(start) // 2


@pytest.mark.slow  # ~25 s on AMD EPYC Zen 3: a CLI run with its export
def test_a_run_race_directory_is_a_source(tmp_path, shared_data, official_spm, mc_dir):
    """from_pretrained(run_dir): the run's best weights, length and max_qa_length (from its
    export); it answers as the run's export does."""
    export_dir = tmp_path / "run" / "export"
    race_job(tmp_path, shared_data, official_spm, mc_dir, export_dir=str(export_dir)).run()
    chooser = albert_tf.from_pretrained(str(tmp_path / "run"))
    assert isinstance(chooser, albert_tf.AlbertMultipleChoiceTask)
    assert (chooser.preprocessor.sequence_length, chooser.max_qa_length) == (LENGTH, QA_LENGTH)
    served = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
    out = served(article=tf.constant(QUESTIONS["article"]),
                 question=tf.constant(QUESTIONS["question"]),
                 options=tf.constant(QUESTIONS["options"]))
    np.testing.assert_allclose(out["probabilities"].numpy(),
                               tf.nn.softmax(chooser.predict(QUESTIONS, verbose=0)).numpy(),
                               rtol=1e-4, atol=1e-6)


def test_rows_list_and_columns_agree_and_a_saved_task_predicts_the_same(chooser, tmp_path):
    logits = chooser.predict(QUESTIONS, verbose=0)
    assert logits.shape == (2, 4) and logits.dtype == np.float32
    rows = [dict(zip(("context", "question", "options"), values))
            for values in zip(*QUESTIONS.values())]
    np.testing.assert_allclose(chooser.predict(rows, verbose=0), logits, rtol=1e-6)
    chooser.compile(learning_rate=1e-3)
    chooser.fit(QUESTIONS, [0, "B"], batch_size=2, epochs=1, verbose=0)
    path = str(tmp_path / "race.keras")
    chooser.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, albert_tf.AlbertMultipleChoiceTask)
    assert loaded.max_qa_length == chooser.max_qa_length == 32  # half of 64: 128 does not fit
    np.testing.assert_allclose(loaded.predict(QUESTIONS, verbose=0),
                               chooser.predict(QUESTIONS, verbose=0), rtol=1e-5, atol=1e-6)
    scores = loaded.evaluate(QUESTIONS, [0, 1], verbose=0, return_dict=True)
    assert set(scores) == {"loss", "accuracy"}


@pytest.mark.slow  # 8 s on AMD EPYC Zen 3: a SavedModel and ONNX
def test_the_export_answers_as_the_task_predicts(chooser, tmp_path):
    result = chooser.export(str(tmp_path / "export"), format=("saved_model", "onnx"))
    assert result["onnx"].endswith("model.onnx")
    served = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"]
    out = served(article=tf.constant(QUESTIONS["article"]),
                 question=tf.constant(QUESTIONS["question"]),
                 options=tf.constant(QUESTIONS["options"]))
    probabilities = tf.nn.softmax(chooser.predict(QUESTIONS, verbose=0)).numpy()
    np.testing.assert_allclose(out["probabilities"].numpy(), probabilities, rtol=1e-4,
                               atol=1e-6)
    again = albert_tf.from_pretrained(str(tmp_path / "export"))  # the export is a source
    assert (again.packing, again.max_qa_length) == (chooser.packing, chooser.max_qa_length)
    np.testing.assert_array_equal(again.predict(QUESTIONS, verbose=0),
                                  chooser.predict(QUESTIONS, verbose=0))


def test_bad_input_gets_one_line(chooser):
    one = {name: values[:1] for name, values in QUESTIONS.items()}
    c3 = albert_tf.from_pretrained(chooser, packing="c3")
    assert c3.packing == "c3" and chooser.packing == "race"
    cases = [
        (lambda: chooser.fit(one, ["E"]), "question 0: the answer is an option index 0-3 or "
                                          "a letter A-D, got 'E'"),
        (lambda: chooser.fit(one, [0, 1]), "1 questions but 2 answers"),
        (lambda: chooser.fit(one), "need answers"),
        (lambda: chooser.predict(dict(one, options=[["a", "b"]])),
         "question 0: 'options' is a list of 4 texts"),
        (lambda: chooser.predict({"article": ["a"], "question": ["q"]}),
         "x has no 'options' column"),
        (lambda: chooser.predict(dict(one, question=["q", "r"])), "columns of different"),
        (lambda: chooser.predict(["a text"]), "x is a dict of columns"),
        (lambda: chooser.predict(tf.data.Dataset.from_tensor_slices(["a"])),
         "a dataset of single examples: batch it first"),
        (lambda: albert_tf.from_pretrained(chooser, max_qa_length=70), "max_qa_length=70"),
        (lambda: c3.predict({"context": ["c"], "question": ["q"], "options": [["a"] * 5]}),
         "question 0: 'options' is a list of 2 to 4 texts"),
        (lambda: c3.fit({"context": ["c"], "question": ["q"], "options": [["a", "b"]]},
                        ["c"]), "the answer is an option index 0-1 or the text of one of"),
        (lambda: albert_tf.from_pretrained(chooser, packing="squad"), "packing='squad'"),
    ]
    for call, message in cases:
        with pytest.raises(UserValueError, match=message.replace("(", "\\(")):
            call()


# --- C3 ------------------------------------------------------------------------------------


def test_c3_packing_leaves_the_cli_weights(tmp_path, shared_data):
    """packing="c3" (2-4 options, the absent ones masked): fit leaves run_race.py
    --task_name=c3's weights, on its rows; an answer may be the option's text."""
    import json

    from albert_tf.tasks.multiple_choice import c3

    source, vocab = shared_data / "chinese" / "c3", shared_data / "chinese" / "vocab"
    if not (source / "c3-m-dev.json").exists() or not (vocab / "vocab_chinese.txt").exists():
        pytest.skip("shared C3 samples or the Chinese vocabulary not found")
    data = tmp_path / "c3"
    data.mkdir()
    for subset in ("m", "d"):
        documents = json.loads((source / f"c3-{subset}-dev.json").read_text("utf-8"))
        # C3 documents are [lines, [{"question", "choice", "answer"}, ...], id]: the first
        # two, and the first with a question of fewer than 4 options.
        short = next(d for d in documents if any(len(q["choice"]) < 4 for q in d[1]))
        documents = documents[:2] + [short]
        (data / f"c3-{subset}-train.json").write_text(json.dumps(documents, ensure_ascii=False),
                                                      "utf-8")
    hf_dir = write_hf_dir(str(tmp_path / "hf"), "multiple_choice", None, seed=4,
                          vocab_file=str(vocab / "vocab_chinese.txt"))
    job = MultipleChoiceJob(MultipleChoiceOptions(
        task_name="c3", data_dir=str(data), vocab_file=str(vocab / "vocab_chinese.txt"),
        albert_config=small_config(64, vocab_size=21128), max_seq_length=LENGTH,
        classifier_dropout=0.0, output_dir=str(tmp_path / "run"), do_train=True,
        do_eval=False, init_checkpoint=hf_dir, train_batch_size=BATCH, learning_rate=1e-3,
        train_step=STEPS, warmup_step=1, save_checkpoints_steps=STEPS,
        iterations_per_loop=STEPS, optimizer="adamw", seed=3))
    trained = job.run()["model"]
    batches = list(job.train_dataset(None).take(STEPS).as_numpy_iterator())
    examples = c3.read_examples(str(data), "train")
    rows = [examples[int(i)] for batch in batches for i in batch["example_index"]]
    assert any(len(e.options) < 4 for e in rows)  # some rows are masked
    x = [{"context": e.context, "question": e.question, "options": list(e.options)}
         for e in rows]
    answers = [e.options[e.label] for e in rows]  # the answers' texts

    chooser = albert_tf.from_pretrained(hf_dir, "multiple-choice", packing="c3",
                                        sequence_length=LENGTH, dropout=0.0)
    packed = chooser.packed(x, answers)
    for name in ("input_ids", "segment_ids", "choice_mask", "label_ids"):
        cli = np.concatenate([b[name] for b in batches])
        np.testing.assert_array_equal(packed[name], cli.reshape(packed[name].shape), name)
    chooser.compile(optimizer="adamw", learning_rate=1e-3, num_train_steps=STEPS,
                    warmup_steps=1)
    chooser.fit(x, answers, batch_size=BATCH, shuffle=False, verbose=0)
    for mine, theirs in zip(chooser.network.weights, trained.weights):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-5,
                                   atol=_atol(mine.path), err_msg=mine.path)
    probabilities = tf.nn.softmax(chooser.predict(x[:BATCH], verbose=0)).numpy()
    absent = packed["choice_mask"][:BATCH] == 0
    assert absent.any() and (probabilities[absent] == 0).all()
