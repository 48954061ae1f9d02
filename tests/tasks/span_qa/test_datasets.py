"""The span QA data sets (`span_qa.datasets`): the records, how run_squad.py's flags and
predict file name one, and each record's scoring against the evaluate command on the
predictions file the job writes (the same numbers)."""
import json
import types

import pytest
from sklearn.metrics import accuracy_score

from albert_tf.errors import UserValueError
from albert_tf.tasks import registry
from albert_tf.tasks.span_qa import __main__ as span_qa_command
from albert_tf.tasks.span_qa import data as squad_data
from albert_tf.tasks.span_qa import datasets, job, postprocess, scoring


@pytest.fixture(scope="module")
def squad_v1(shared_data):
    return squad_data.load_squad_json(str(shared_data / "squad" / "dev-v1.1.json"))[:2]


@pytest.fixture(scope="module")
def squad_v2(shared_data):
    return squad_data.load_squad_json(str(shared_data / "squad" / "dev-v2.0.sample2.json"))


@pytest.fixture(scope="module")
def cmrc(shared_data):
    path = shared_data / "chinese" / "cmrc2018" / "cmrc2018_trial.json"
    if not path.exists():
        pytest.skip(f"{path} not found (the CMRC 2018 trial set)")
    return squad_data.load_squad_json(str(path))


@pytest.mark.parametrize("name, language, scoring_class, metric_flag", [
    ("squad_v1", "en", scoring.SquadV1Scoring, "squad"),
    ("squad_v2", "en", scoring.SquadV2Scoring, "squad"),
    ("cmrc2018", "zh", scoring.Cmrc2018Scoring, "cmrc2018")])
def test_every_data_set_resolves(name, language, scoring_class, metric_flag):
    data_set = registry.get("span_qa", name)
    assert data_set is datasets.get(name.upper())
    assert (data_set.name, data_set.family, data_set.language) == (name, "span_qa", language)
    # Best checkpoint by f1 (the job's metric), the SQuAD JSON reader for all three.
    assert data_set.metric == job.METRIC == "f1"
    assert data_set.reader is squad_data.read_squad_examples
    assert data_set.labels is None and data_set.default_rules == ()
    assert type(data_set.settings["scoring"]) is scoring_class
    assert data_set.settings["scoring"].name == metric_flag


def test_names_and_unknown_name():
    assert registry.names("span_qa") == ("squad_v1", "squad_v2", "cmrc2018")
    with pytest.raises(UserValueError) as caught:
        registry.get("span_qa", "squad3")
    assert str(caught.value) == ("--task_name 'squad3' is not a span qa data set: one of "
                                 "squad_v1, squad_v2, cmrc2018")


def test_resolve_from_flags_and_file(squad_v1, squad_v2, cmrc):
    resolve = datasets.resolve
    assert resolve("auto", False, cmrc) == "cmrc2018"  # 77% CJK
    assert resolve("auto", True, cmrc) == "squad_v2"
    assert resolve("auto", False, squad_v1) == "squad_v1"
    assert resolve("auto", False, squad_v2) == "squad_v1"  # scored as v1 without the flag
    assert resolve("auto", True, squad_v2) == "squad_v2"
    assert resolve("squad", False, cmrc) == "squad_v1"
    assert resolve("squad", True, squad_v1) == "squad_v2"
    assert resolve("cmrc2018", False, squad_v1) == "cmrc2018"
    # The metric names the job reported before the records: "squad" / "cmrc2018".
    for metric, v2, dataset, want in [("auto", False, cmrc, "cmrc2018"),
                                      ("auto", True, cmrc, "squad"),
                                      ("auto", False, squad_v2, "squad"),
                                      ("squad", True, squad_v2, "squad"),
                                      ("cmrc2018", False, squad_v1, "cmrc2018")]:
        assert job.resolve_metric(metric, dataset, v2) == want


@pytest.mark.parametrize("metric, v2, vocab_file, spm_model_file, want", [
    ("auto", False, "vocab.txt", None, "cmrc2018"),
    ("auto", True, "vocab.txt", None, "cmrc2018"),  # as the --hparams table chose before
    ("auto", False, "vocab.txt", "30k.model", "squad_v1"),
    ("auto", True, None, "30k.model", "squad_v2"),
    ("squad", False, "vocab.txt", None, "squad_v1"),
    ("cmrc2018", False, None, "30k.model", "cmrc2018")])
def test_hparams_task_is_the_flags_data_set(metric, v2, vocab_file, spm_model_file, want):
    values = types.SimpleNamespace(metric=metric, version_2_with_negative=v2,
                                   vocab_file=vocab_file, spm_model_file=spm_model_file)
    assert job._hparams_task(values) == want


def _predictions(dataset, wrong_every: int, null_odds=None):
    """SquadPredictions answering every question with its first gold answer ("" when
    impossible), except every `wrong_every`-th, answered "zzz"."""
    answers, nbest = {}, {}
    qids = [qa["id"] for article in dataset for paragraph in article["paragraphs"]
            for qa in paragraph["qas"]]
    golds = {qa["id"]: (qa["answers"][0]["text"] if qa["answers"] else "")
             for article in dataset for paragraph in article["paragraphs"]
             for qa in paragraph["qas"]}
    for index, qid in enumerate(qids):
        text = "zzz" if index % wrong_every == 0 else golds[qid]
        answers[qid] = text
        nbest[qid] = [{"text": text, "probability": 1.0}]
    return postprocess.SquadPredictions(answers, nbest, null_odds or {}), qids, golds


def _evaluate_written(capsys, tmp_path, dataset, predictions, answers, *flags):
    """What `evaluate` prints for the predictions.json the job writes (`answers`)."""
    paths = postprocess.write_predictions(str(tmp_path), predictions, answers)
    data_file = tmp_path / "data.json"
    data_file.write_text(json.dumps({"data": dataset}, ensure_ascii=False))
    assert span_qa_command.main(["evaluate", "--data_file", str(data_file),
                                 "--prediction_file", paths["predictions"], *flags]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_squad_v1_scoring_is_what_evaluate_prints(squad_v1, tmp_path, capsys):
    predictions, qids, golds = _predictions(squad_v1, wrong_every=3)
    scorer = datasets.get("squad_v1").settings["scoring"]
    answers, metrics = scorer.score(squad_v1, predictions, None, "dev.json")
    # Independent reference: "zzz" matches no gold answer, a gold answer matches itself.
    right = [answers[qid] == golds[qid] for qid in qids]
    expected = 100.0 * accuracy_score([True] * len(right), right)
    assert metrics["exact_match"] == pytest.approx(expected)
    assert metrics["f1"] == pytest.approx(expected)
    printed = _evaluate_written(capsys, tmp_path, squad_v1, predictions, answers)
    assert (printed["exact_match"], printed["f1"]) == (metrics["exact_match"], metrics["f1"])


def test_squad_v2_scoring_tunes_or_takes_the_threshold(squad_v2, tmp_path, capsys):
    base, qids, golds = _predictions(squad_v2, wrong_every=4)
    # null_odds: high for the impossible questions, low elsewhere.
    null_odds = {qid: (5.0 if golds[qid] == "" else -5.0) for qid in qids}
    predictions = postprocess.SquadPredictions(base.answers, base.nbest, null_odds)
    scorer = datasets.get("squad_v2").settings["scoring"]
    answers, tuned = scorer.score(squad_v2, predictions, None, "dev.json")
    assert tuned["null_threshold_source"] == "tuned_on_eval_set"
    assert tuned["null_score_diff_threshold"] == tuned["best_f1_thresh"]
    _, given = scorer.score(squad_v2, predictions, 100.0, "dev.json")
    assert (given["null_threshold_source"], given["null_score_diff_threshold"]) == ("given",
                                                                                    100.0)
    assert scorer.answers(predictions, 0.0) == predictions.with_threshold(0.0)
    printed = _evaluate_written(capsys, tmp_path, squad_v2, predictions, answers)
    assert (printed["exact"], printed["f1"]) == (tuned["exact"], tuned["f1"])


def test_cmrc2018_scoring_is_what_evaluate_prints(cmrc, tmp_path, capsys):
    predictions, _, _ = _predictions(cmrc, wrong_every=5)
    scorer = datasets.get("cmrc2018").settings["scoring"]
    answers, metrics = scorer.score(cmrc, predictions, None, "trial.json")
    assert metrics["metric"] == "cmrc2018" and metrics["total"] == 1002
    assert not any(isinstance(value, (list, dict)) for value in metrics.values())
    printed = _evaluate_written(capsys, tmp_path, cmrc, predictions, answers,
                                "--metric", "cmrc2018")
    assert {key: printed[key] for key in ("exact_match", "f1", "average")} == {
        key: metrics[key] for key in ("exact_match", "f1", "average")}


def test_cmrc2018_scoring_error_names_the_predict_file():
    dataset = [{"paragraphs": [{"context": "文本", "qas": [
        {"id": "q", "question": "问", "answers": []}]}]}]
    predictions = postprocess.SquadPredictions({"q": "文"}, {"q": [{"text": "文"}]}, {})
    with pytest.raises(UserValueError, match=r"^--predict_file trial\.json: "):
        datasets.get("cmrc2018").settings["scoring"].score(dataset, predictions, None,
                                                           "trial.json")


def test_evaluate_missing_prediction_file_is_one_line(squad_v1, tmp_path, capsys):
    data_file = tmp_path / "dev.json"
    data_file.write_text(json.dumps({"data": squad_v1}))
    missing = tmp_path / "none.json"
    assert span_qa_command.main(["evaluate", "--data_file", str(data_file),
                                 "--prediction_file", str(missing)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"python -m albert_tf.tasks.span_qa evaluate: error: --prediction_file "
                   f"{missing}: no such file"]
