"""`python -m albert_tf.tasks.multiple_choice evaluate`: a predictions.jsonl scored against
the shared RACE and C3 dev answers, checked against scikit-learn's accuracy; the job's own
file reproduces its predict_results.txt; one-line errors for bad input."""
import json
import re
import subprocess
import sys

import numpy as np
import pytest
from sklearn.metrics import accuracy_score

from albert_tf.tasks.multiple_choice import c3, race
from albert_tf.tasks.multiple_choice.__main__ import main
from albert_tf.tasks.multiple_choice.postprocess import write_predictions
from tests.conftest import REPO_ROOT


@pytest.fixture(scope="module")
def race_dir(shared_data):
    return str(shared_data / "race")


@pytest.fixture(scope="module")
def c3_dir(shared_data):
    path = shared_data / "chinese" / "c3"
    if not (path / "c3-m-dev.json").exists():
        pytest.skip(f"{path}/c3-m-dev.json not found (C3 dev files)")
    return str(path)


def evaluate(capsys, *argv):
    status = main(["evaluate", *map(str, argv)])
    out, err = capsys.readouterr()
    return status, (json.loads(out) if status == 0 else None), err


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                    encoding="utf-8")
    return path


def reference(gold, predicted, groups, levels):
    """scikit-learn's accuracy overall and per level."""
    expected = {"accuracy": accuracy_score(gold, predicted), "examples": len(gold)}
    for level in levels:
        chosen = [i for i, g in enumerate(groups) if g == level]
        expected[f"accuracy_{level}"] = accuracy_score([gold[i] for i in chosen],
                                                       [predicted[i] for i in chosen])
        expected[f"examples_{level}"] = len(chosen)
    return expected


def test_race_against_scikit_learn(tmp_path, capsys, race_dir):
    examples = race.read_examples(race_dir, "dev")
    predicted = np.random.default_rng(0).integers(0, 4, len(examples)).tolist()
    # in another order than the split's: questions are matched by id and index
    records = [{"id": e.example_id, "question_index": e.question_index, "level": e.level,
                "prediction": "ABCD"[p]} for e, p in zip(examples, predicted)][::-1]
    path = write_jsonl(tmp_path / "predictions.jsonl", records)
    status, result, _ = evaluate(capsys, "--task_name", "race", "--data_dir", race_dir,
                                 "--prediction_file", path)
    assert status == 0
    expected = reference([e.label for e in examples], predicted,
                         [e.level for e in examples], ("middle", "high"))
    assert result.keys() == expected.keys()
    assert result == pytest.approx(expected, abs=1e-12)
    assert (result["examples_middle"], result["examples_high"]) == (11, 6)


def test_c3_against_scikit_learn(tmp_path, capsys, c3_dir):
    examples = c3.read_examples(c3_dir, "dev")
    rng = np.random.default_rng(1)
    predicted = [int(rng.integers(0, len(e.options))) for e in examples]
    # C3-M and C3-D share document ids: the subset tells their questions apart
    records = [{"id": e.example_id, "question_index": e.question_index, "subset": e.subset,
                "prediction": p} for e, p in zip(examples, predicted)]
    path = write_jsonl(tmp_path / "predictions.jsonl", records)
    status, result, _ = evaluate(capsys, "--task_name", "c3", "--data_dir", c3_dir,
                                 "--prediction_file", path, "--split", "dev")
    assert status == 0
    expected = reference([e.label for e in examples], predicted,
                         [e.subset for e in examples], ("m", "d"))
    assert result == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("task", ["race", "c3"])
def test_the_jobs_file_reproduces_its_accuracies(tmp_path, capsys, task, race_dir, c3_dir):
    data_dir = race_dir if task == "race" else c3_dir
    examples = (race.read_examples if task == "race" else c3.read_examples)(data_dir, "dev")
    probabilities = np.random.default_rng(2).random((len(examples), 4)).astype(np.float32)
    if task == "c3":  # the job's probabilities of absent options are 0
        probabilities *= np.arange(4) < np.array([len(e.options) for e in examples])[:, None]
    written = write_predictions(str(tmp_path), examples, probabilities, task)
    status, result, _ = evaluate(capsys, "--task_name", task, "--data_dir", data_dir,
                                 "--prediction_file", tmp_path / "predictions.jsonl")
    assert status == 0 and result == written
    results_file = dict(line.split(" = ") for line in
                        (tmp_path / "predict_results.txt").read_text().splitlines())
    assert {k: float(v) for k, v in results_file.items()} == pytest.approx(result)


def race_records(race_dir):
    return [{"id": e.example_id, "question_index": e.question_index, "level": e.level,
             "prediction": "A"} for e in race.read_examples(race_dir, "dev")]


@pytest.mark.parametrize("edit, message", [
    (lambda lines: lines[:1] + ["{not json"] + lines[2:],
     r"{path}:2: not valid JSON \(Expecting property name enclosed in double quotes at "
     r"column 2\)"),
    (lambda lines: lines[:2] + ['["a list"]'] + lines[3:],
     r"{path}:3: expected a predictions.jsonl record with id, question_index, level and "
     r"prediction"),
    (lambda lines: lines[:1] + [lines[1].replace('"A"', '"E"')] + lines[2:],
     r"{path}:2: 'prediction' must be one of A, B, C, D, got 'E'"),
    (lambda lines: lines + [json.dumps({"id": "high999.txt", "question_index": 0,
                                        "level": "high", "prediction": "B"})],
     r"{path}:18: question 'high999.txt' #0 \(high\) is not in the dev split of "
     r"--data_dir .*race \(1 unknown questions\)"),
    (lambda lines: lines[:-1],
     r"{path}: no prediction for question '.*' #\d \(high\) of the dev split \(1 of 17 questions "
     r"missing\)"),
    (lambda lines: lines + lines[:1],
     r"{path}:18: a second prediction for question '.*' #0 \(middle\) \(first at line 1\)"),
])
def test_bad_predictions_are_one_error_line(tmp_path, capsys, race_dir, edit, message):
    lines = [json.dumps(r) for r in race_records(race_dir)]
    path = tmp_path / "predictions.jsonl"
    path.write_text("\n".join(edit(lines)) + "\n")
    status, _, err = evaluate(capsys, "--task_name", "race", "--data_dir", race_dir,
                              "--prediction_file", path)
    assert status == 2
    assert len(err.strip().splitlines()) == 1
    prefix = r"^python -m albert_tf.tasks.multiple_choice evaluate: error: "
    assert re.match(prefix + message.format(path=path), err.strip()), err


def test_missing_file_and_command_line(tmp_path, race_dir):
    done = subprocess.run([sys.executable, "-m", "albert_tf.tasks.multiple_choice", "evaluate",
                           "--task_name", "race", "--data_dir", race_dir,
                           "--prediction_file", str(tmp_path / "none.jsonl")],
                          capture_output=True, text=True, cwd=REPO_ROOT)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines()[-1] == (
        "python -m albert_tf.tasks.multiple_choice evaluate: error: "
        f"--prediction_file={tmp_path / 'none.jsonl'}: no such predictions file")
    assert main(["score"]) == 2
