"""Official SQuAD metrics on hand-made cases, and the evaluate command
(`python -m albert_tf.tasks.span_qa evaluate`, and `albert_tf.tasks.squad` its former name)."""
import json
import subprocess
import sys

import pytest

from albert_tf.tasks import squad
from albert_tf.tasks.span_qa import __main__ as span_qa_command, metrics as m

from tests.conftest import REPO_ROOT


def dataset(*qas, context="ctx"):
    return [{"title": "t", "paragraphs": [{"context": context, "qas": list(qas)}]}]


def qa(qid, *answers, impossible=None):
    item = {"id": qid, "question": "q?", "answers": [{"text": a, "answer_start": 0}
                                                      for a in answers]}
    if impossible is not None:
        item["is_impossible"] = impossible
    return item


@pytest.mark.parametrize("text,want", [
    ("The Cat", "cat"), ("  a  dog,  an apple. ", "dog apple"), ("the-end!", "theend"),
    ("Theatre", "theatre"), ("An", ""), ("anthem's", "anthems"), ("A\tB\nC", "b c"),
])
def test_normalisation(text, want):
    assert m.normalize_answer(text) == want


def test_f1_by_hand():
    # pred tokens [big, red, dog], gold [red, dog, barks]: overlap 2, P = R = 2/3.
    assert m.f1_score_v1("red dog barks", "the big red dog") == pytest.approx(2 / 3)
    # Counter overlap: repeated tokens count at most min(count) times.
    assert m.f1_score_v1("x y", "x x x") == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))
    assert m.f1_score_v1("", "") == 0.0  # v1: no overlap -> 0
    assert m.f1_score_v2("", "") == 1.0  # v2: both empty -> 1
    assert m.f1_score_v2("the", "") == 1.0  # "the" normalises to empty
    assert m.f1_score_v2("cat", "") == 0.0


def test_v1_multiple_golds_and_missing():
    data = dataset(qa("1", "Denver Broncos", "the Broncos"), qa("2", "1999"), qa("3", "x"))
    result = m.evaluate_v1(data, {"1": "broncos", "2": "in 1999 ."})
    # q1: EM with "the Broncos"; q2: F1 2*(1/2*1)/(1.5) = 2/3, EM 0; q3 missing -> 0.
    assert result["exact_match"] == pytest.approx(100 / 3)
    assert result["f1"] == pytest.approx(100 * (1 + 2 / 3) / 3)
    assert result["missing"] == ["3"] and result["missing_predictions"] == 1


def test_v2_splits_empty_answers_and_best_threshold():
    data = dataset(qa("a", "Paris", impossible=False), qa("b", "blue sky", impossible=False),
                   qa("c", impossible=True), qa("d", impossible=True))
    preds = {"a": "Paris", "b": "sky", "c": "", "d": "something"}
    result = m.evaluate_v2(data, preds)
    # raw: a 1/1, b EM 0 F1 2/3, c 1/1, d 0/0
    assert result["exact"] == pytest.approx(50.0)
    assert result["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1) / 4)
    assert result["HasAns_total"] == 2 and result["NoAns_total"] == 2
    assert result["HasAns_exact"] == pytest.approx(50.0)
    assert result["NoAns_f1"] == pytest.approx(50.0)
    assert "best_f1" not in result
    # na_probs: the sweep starts at 2 (all null), then in na order a(+1)=3, b(+2/3 for f1),
    # d (pred non-empty on no-answer: -1), c (0).
    na = {"a": 0.1, "b": 0.2, "d": 0.5, "c": 0.9}
    result = m.evaluate_v2(data, preds, na, na_prob_thresh=0.3)
    # thresh 0.3: d and c predicted null -> d becomes correct.
    assert result["exact"] == pytest.approx(75.0)
    assert result["best_exact"] == pytest.approx(75.0) and result["best_exact_thresh"] == 0.1
    assert result["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 4)
    assert result["best_f1_thresh"] == 0.2
    # A missing prediction scores 0 and counts in the total, never a crash.
    del preds["a"]
    result = m.evaluate_v2(data, preds, na)
    assert result["total"] == 4 and result["missing"] == ["a"]
    assert result["HasAns_exact"] == 0.0


def test_v2_gold_that_normalises_to_empty_is_ignored():
    data = dataset(qa("a", "the", "Rome", impossible=False))
    assert m.evaluate_v2(data, {"a": "rome"})["exact"] == 100.0


def run_evaluate(*args, module="albert_tf.tasks.squad"):
    return subprocess.run([sys.executable, "-m", module, "evaluate", *args],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)


def v2_files(tmp_path):
    """--data_file, --prediction_file and --na_prob_file of a v2.0 case (question c has no
    prediction)."""
    data = {"version": "2.0", "data": dataset(qa("a", "Paris", impossible=False),
                                              qa("c", impossible=True))}
    (tmp_path / "d.json").write_text(json.dumps(data))
    (tmp_path / "p.json").write_text(json.dumps({"a": "paris"}))
    (tmp_path / "n.json").write_text(json.dumps({"a": 0.5, "c": 2.0}))
    return ["--data_file", str(tmp_path / "d.json"), "--prediction_file",
            str(tmp_path / "p.json"), "--na_prob_file", str(tmp_path / "n.json")]


@pytest.mark.slow  # ~12 s: two processes
def test_span_qa_evaluate_prints_what_squad_evaluate_prints(tmp_path):
    args = v2_files(tmp_path)
    new = run_evaluate(*args, module="albert_tf.tasks.span_qa")
    old = run_evaluate(*args)
    assert new.returncode == old.returncode == 0, new.stderr + old.stderr
    assert new.stdout == old.stdout and json.loads(new.stdout)["missing_predictions"] == 1
    assert "missing prediction for question id c" in new.stderr
    assert "DeprecationWarning" not in old.stderr  # the old name is not deprecated


def test_both_evaluate_commands_share_the_scorer(tmp_path, capsys):
    """In-process: the same output, and each command's own name in its errors."""
    args = v2_files(tmp_path)
    assert span_qa_command.main(["evaluate", *args]) == 0
    new = capsys.readouterr()
    assert squad.main(["evaluate", *args]) == 0
    assert capsys.readouterr() == new
    assert json.loads(new.out)["exact"] == 50.0
    for command, prog in ((span_qa_command.main, "python -m albert_tf.tasks.span_qa"),
                          (squad.main, "python -m albert_tf.tasks.squad")):
        assert command(["evaluate", *args, "--version", "1"]) == 2
        assert capsys.readouterr().err.startswith(f"{prog} evaluate: error: --na_prob_file")
        assert command(["score"]) == 2
        assert capsys.readouterr().err.startswith(f"{prog}: error: the command is `evaluate`")


@pytest.mark.slow  # ~10s: keeps the default suite under 10 minutes on slower CPUs (11 min on a Zen 4)
def test_evaluate_command(tmp_path):
    done = run_evaluate(*v2_files(tmp_path))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["exact"] == 50.0 and result["missing_predictions"] == 1
    assert "missing prediction for question id c" in done.stderr
    # v1 scoring of the same predictions, and a clear error for a bad prediction file.
    v1 = run_evaluate("--data_file", str(tmp_path / "d.json"), "--prediction_file",
                      str(tmp_path / "p.json"), "--version", "1")
    assert json.loads(v1.stdout)["exact_match"] == 50.0
    (tmp_path / "bad.json").write_text(json.dumps({"a": 3}))
    bad = run_evaluate("--data_file", str(tmp_path / "d.json"), "--prediction_file",
                       str(tmp_path / "bad.json"))
    assert bad.returncode == 2 and "question id a" in bad.stderr


def test_evaluate_files_on_real_v2_sample(shared_data):
    path = str(shared_data / "squad" / "dev-v2.0.sample2.json")
    data = squad.load_squad_json(path)
    gold = {}
    for art in data:
        for p in art["paragraphs"]:
            for q in p["qas"]:
                gold[q["id"]] = q["answers"][0]["text"] if q["answers"] else ""
    result = squad.evaluate_files(path, _write(gold))
    assert result["exact"] == 100.0 and result["f1"] == 100.0 and result["total"] == 626
    assert result["NoAns_total"] == 333


def _write(obj):
    import tempfile

    handle = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(obj, handle)
    handle.close()
    return handle.name
