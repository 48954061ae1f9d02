"""CMRC 2018 metric: the official script's definitions on hand-built cases,
gold answers on the trial set, and `squad evaluate --metric cmrc2018`.

Expected values are computed by hand from the definitions in
`albert_tf/tasks/span_qa/cmrc_metrics.py` (those of `cmrc2018_evaluate.py`). The
tokenizer cases are the outputs of `nltk.word_tokenize` in NLTK 3.4.5 under
Python 2.7 (the environment the official script runs in).
"""
import json
import subprocess
import sys

import pytest

from albert_tf.tasks.span_qa import cmrc_metrics as m
from albert_tf.tasks.span_qa import cmrc_tokenize

from tests.conftest import REPO_ROOT


@pytest.mark.parametrize("text,want", [
    ("hello. world", ["hello", ".", "world"]),  # Punkt splits, so the period is final
    ("u.s. army", ["u.s.", "army"]),  # abbreviation: no sentence break
    ("var. megacephala", ["var", ".", "megacephala"]),
    ("a. b. c.", ["a.", "b.", "c", "."]),  # initials before lower-case words: no break
    ("1. first 2. second", ["1.", "first", "2.", "second"]),
    ('end." next', ["end", ".", "''", "next"]),  # closing quote realigned to its sentence
    ('"quoted" text', ["``", "quoted", "''", "text"]),
    ("don't can't cannot", ["do", "n't", "ca", "n't", "can", "not"]),
    ("it's 'quoted' here", ["it", "'s", "'quoted", "'", "here"]),
    ("a, b, 1,000", ["a", ",", "b", ",", "1,000"]),
    ("rock & roll; 50% @home #1 $5",
     ["rock", "&", "roll", ";", "50", "%", "@", "home", "#", "1", "$", "5"]),
    ("x (y) [z]", ["x", "(", "y", ")", "[", "z", "]"]),
    ("wait... what", ["wait", "...", "what"]),
    ("gonna 'tis", ["gon", "na", "'t", "is"]),
    ("«a» ‘c’", ["«", "a", "»", "‘", "c", "’"]),
    ("ｆｕｌｌ１２３\u3000ｗｉｄｔｈ", ["ｆｕｌｌ１２３", "ｗｉｄｔｈ"]),
    ("1—2", ["1—2"]),  # NLTK 3.4.5 keeps dashes inside (newer NLTK splits them)
    (" 2018 ", ["2018"]),
    (" ", []),
])
def test_word_tokenize_matches_nltk_3_4_5(text, want):
    assert cmrc_tokenize.word_tokenize(text) == want


def test_segmentation():
    # CJK characters one by one, English runs tokenized, the script's punctuation removed.
    assert m.segment("NBA总决赛MVP是谁？") == ["nba", "总", "决", "赛", "mvp", "是", "谁"]
    # Removed punctuation does not end a run: the text around it joins.
    assert m.segment("2018-2019年") == ["20182019", "年"]
    assert m.segment("iPhone X，售价999美元") == ["iphone", "x", "售", "价", "999", "美", "元"]
    # Not in the list: "…" (the list has "……" as one two-character item), ASCII ",".
    assert m.segment("等等…") == ["等", "等", "…"]
    assert m.segment("甲,乙") == ["甲", ",", "乙"]
    assert m.segment("  《红楼梦》 ") == ["红", "楼", "梦"]
    assert m.remove_punctuation(" 《A B》。") == "a b"


def test_f1_is_longest_common_substring():
    # A common run, not a bag of tokens: 甲丙乙丁 vs 甲乙丙丁 share runs of length 1.
    assert m.f1_score("甲乙丙丁", "甲丙乙丁") == pytest.approx(0.25)
    # L = 2 (北京): P = 2/2, R = 2/4 -> 2/3.
    assert m.f1_score("北京大学", "北京") == pytest.approx(2 / 3)
    # Mixed: gold [i, phone, 发, 布] vs pred [iphone, 发, 布, 会]: L = 2 (发布), P = R = 2/4.
    assert m.f1_score("i phone发布", "iPhone发布会") == pytest.approx(0.5)
    # gold [iphone, x] vs pred [iphone, x, 发, 布] (the comma joins nothing: 发 ends the run).
    assert m.f1_score("iPhone X", "iPhone X，发布") == pytest.approx(2 * 1 * 0.5 / 1.5)
    assert m.f1_score("等等", "等等…") == pytest.approx(0.8)  # P 2/3, R 1
    assert m.f1_score("NBA", "nba") == 1.0
    assert m.f1_score("北京", "") == 0.0
    assert m.f1_score("。", "") == 0.0  # no segments on either side: 0


def test_exact_match():
    assert m.exact_score("《红楼梦》", "红楼梦。") == 1
    assert m.exact_score("NBA", " nba ") == 1
    assert m.exact_score("A B", "AB") == 0  # inner spaces count
    assert m.exact_score("等等", "等等…") == 0
    assert m.exact_score("。", "") == 1  # both empty after removing punctuation


def dataset(*qas):
    return [{"title": "t", "paragraphs": [{"context": "ctx", "qas": list(qas)}]}]


def qa(qid, *answers):
    return {"id": qid, "question": "问?", "answers": [{"text": a, "answer_start": 0}
                                                       for a in answers]}


def test_evaluate_several_golds_empty_and_missing():
    data = dataset(qa("q1", "北京大学", "北大"), qa("q2", "《红楼梦》"), qa("q3", "1998年"),
                   qa("q4", "x"), qa(" q5 ", "北大"))
    preds = {"q1": "北京", "q2": "红楼梦。", "q3": "", "q5": "北大"}
    result = m.evaluate(data, preds)
    # q1: max(2/3 vs 北京大学, 1/2 vs 北大), EM 0; q2: 1/1; q3 empty: 0/0; q4 missing: 0/0;
    # q5: the id is looked up stripped, as the script does: 1/1.
    assert result["exact_match"] == pytest.approx(100 * 2 / 5)
    assert result["f1"] == pytest.approx(100 * (2 / 3 + 1 + 1) / 5)
    assert result["average"] == pytest.approx((result["exact_match"] + result["f1"]) / 2)
    assert (result["total"], result["skip"], result["missing_predictions"]) == (5, 1, 1)
    assert result["missing"] == ["q4"]
    json.dumps(result)
    with pytest.raises(ValueError, match="question id q9: no gold answers"):
        m.evaluate(dataset(qa("q9")), {"q9": "x"})
    # Without a prediction such a question is a skip, as in the script.
    assert m.evaluate(dataset(qa("q9"), qa("q1", "x")), {"q1": "x"})["skip"] == 1
    with pytest.raises(ValueError, match="question id q1: the prediction must be a string"):
        m.evaluate(dataset(qa("q1", "x")), {"q1": 3})


@pytest.fixture(scope="module")
def trial(shared_data):
    path = shared_data / "chinese" / "cmrc2018" / "cmrc2018_trial.json"
    if not path.exists():
        pytest.skip(f"{path} not found (CMRC 2018 trial set)")
    return path


def test_gold_answers_score_100_on_trial(trial):
    data = json.loads(trial.read_text(encoding="utf-8"))["data"]
    questions = [q for article in data for p in article["paragraphs"] for q in p["qas"]]
    assert len(questions) == 1002
    for pick in (0, -1):
        golds = {q["id"]: q["answers"][pick]["text"] for q in questions}
        result = m.evaluate(data, golds)
        assert (result["exact_match"], result["f1"], result["total"], result["skip"]) == \
            (100.0, 100.0, 1002, 0)


def run_evaluate(*args):
    return subprocess.run([sys.executable, "-m", "albert_tf.tasks.squad", "evaluate", *args],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)


@pytest.mark.slow  # 6 s
def test_evaluate_command_cmrc2018(tmp_path, capsys):
    data = {"version": "v1.0", "data": dataset(qa("q1", "北京大学", "北大"),
                                               qa("q2", "《红楼梦》"), qa("q3", "x"))}
    d, p = tmp_path / "d.json", tmp_path / "p.json"
    d.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    p.write_text(json.dumps({"q1": "北京", "q2": "红楼梦"}, ensure_ascii=False), encoding="utf-8")
    done = run_evaluate("--metric", "cmrc2018", "--data_file", str(d), "--prediction_file", str(p))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["exact_match"] == pytest.approx(100 / 3)
    assert result["f1"] == pytest.approx(100 * (2 / 3 + 1) / 3)
    assert (result["total"], result["skip"], result["missing_predictions"]) == (3, 1, 1)
    assert set(result) == {"exact_match", "f1", "average", "total", "skip",
                           "missing_predictions"}
    assert "missing prediction for question id q3" in done.stderr
    # The default metric is still SQuAD v1.1 (no segmentation: "北京" vs "北京大学" is 0 F1).
    squad_result = squad_evaluate(capsys, "--data_file", str(d), "--prediction_file", str(p))
    assert squad_result[0] == 0 and "skip" not in json.loads(squad_result[1])
    assert json.loads(squad_result[1])["exact_match"] == 0.0
    # Clear errors naming the flag or file.
    code, _, err = squad_evaluate(capsys, "--metric", "cmrc2018", "--data_file", str(d),
                                  "--prediction_file", str(p), "--na_prob_file", str(p))
    assert code == 2 and "--na_prob_file" in err
    code, _, err = squad_evaluate(capsys, "--metric", "cmrc2018", "--data_file", str(d),
                                  "--prediction_file", str(p), "--na_prob_thresh", "0.5")
    assert code == 2 and "--na_prob_thresh" in err
    code, _, err = squad_evaluate(capsys, "--metric", "cmrc2018", "--data_file",
                                  str(tmp_path / "no.json"), "--prediction_file", str(p))
    assert code == 2 and "no.json: no such file" in err
    with pytest.raises(SystemExit):
        squad_evaluate(capsys, "--metric", "cmrc", "--data_file", str(d),
                       "--prediction_file", str(p))
    assert "argument --metric: invalid choice" in capsys.readouterr().err
    (tmp_path / "e.json").write_text(json.dumps({"data": dataset(qa("q1"))}))
    code, _, err = squad_evaluate(capsys, "--metric", "cmrc2018", "--data_file",
                                  str(tmp_path / "e.json"), "--prediction_file", str(p))
    assert code == 2 and "e.json: question id q1: no gold answers" in err
    (tmp_path / "f.json").write_text(json.dumps({"data": [{"paragraphs": [{"qas": [{}]}]}]}))
    code, _, err = squad_evaluate(capsys, "--metric", "cmrc2018", "--data_file",
                                  str(tmp_path / "f.json"), "--prediction_file", str(p))
    assert code == 2 and "f.json: not SQuAD-format questions" in err


def squad_evaluate(capsys, *args):
    """`python -m albert_tf.tasks.squad evaluate ARGS` in-process: (exit code, stdout, stderr)."""
    from albert_tf.tasks import squad

    code = squad.main(["evaluate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_lower_casing_is_python_2s_per_character_mapping():
    """The script's unicode.lower(): no final-sigma rule, and U+0130 lower-cases to "i"."""
    assert m.exact_score("ΟΔΟΣ", "οδοσ") == 1 and m.f1_score("ΟΔΟΣ", "οδοσ") == 1.0
    assert m.exact_score("\u0130", "i") == 1
