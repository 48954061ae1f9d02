"""`python -m albert_tf.tasks.classification evaluate` on predictions files over the real dev
sets in ../shared/data: the metric values against scikit-learn / SciPy, the job's own
prediction file round-tripping to its compute_metrics, and one-line errors for bad input."""
import json
import subprocess
import sys

import numpy as np
import pytest

from albert_tf.tasks.classification import __main__ as evaluate_command
from albert_tf.tasks.classification import glue, metrics, postprocess
from tests.conftest import REPO_ROOT

sklearn_metrics = pytest.importorskip("sklearn.metrics")
stats = pytest.importorskip("scipy.stats")


@pytest.fixture(scope="module")
def glue_dir(shared_data, tmp_path_factory):
    """A GLUE-layout data_dir of symlinks into ../shared/data/glue."""
    source = shared_data / "glue"
    if not (source / "MRPC").is_dir():
        pytest.skip(f"{source} not found")
    root = tmp_path_factory.mktemp("glue_data")
    for name in ("CoLA", "MRPC"):
        (root / name).symlink_to(source / name)
    (root / "STS-B").mkdir()
    (root / "STS-B" / "dev.tsv").symlink_to(source / "STS-B" / "dev_sample.tsv")
    return root


def write(path, rows, header="index\tprediction"):
    path.write_text(header + "\n" + "".join(f"{i}\t{p}\n" for i, p in rows), encoding="utf-8")
    return path


def noisy(labels, choices, seed, keep=0.75):
    """Each gold label, replaced by a random choice a quarter of the time."""
    rng = np.random.default_rng(seed)
    return [label if rng.random() < keep else choices[rng.integers(len(choices))]
            for label in labels]


def run(capsys, *argv):
    status = evaluate_command.main(["evaluate", *map(str, argv)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def scored(capsys, *argv):
    status, out, err = run(capsys, *argv)
    assert status == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_mrpc_accuracy_and_f1_are_scikit_learns(glue_dir, tmp_path, capsys):
    dev = glue.read_examples(glue.TASKS["mrpc"], str(glue_dir), "dev")
    gold = [e.label for e in dev]
    predicted = noisy(gold, ("0", "1"), seed=1)
    path = write(tmp_path / "submit_results.tsv", zip([e.guid for e in dev], predicted))
    result = scored(capsys, "--task_name", "MRPC", "--data_dir", glue_dir,
                    "--prediction_file", path)
    assert set(result) == {"eval_accuracy", "f1", "eval_examples"}
    assert result["eval_examples"] == 408
    assert result["eval_accuracy"] == pytest.approx(
        sklearn_metrics.accuracy_score(gold, predicted), abs=1e-12)
    assert result["f1"] == pytest.approx(
        sklearn_metrics.f1_score(gold, predicted, pos_label="1"), abs=1e-12)


def test_cola_matthews_is_scikit_learns_and_rows_may_come_in_any_order(glue_dir, tmp_path,
                                                                      capsys):
    dev = glue.read_examples(glue.TASKS["cola"], str(glue_dir), "dev")
    gold = [e.label for e in dev]
    predicted = noisy(gold, ("0", "1"), seed=2, keep=0.6)
    rows = list(zip([e.guid for e in dev], predicted))[::-1]
    path = write(tmp_path / "CoLA.tsv", rows)
    result = scored(capsys, "--task_name", "cola", "--data_dir", glue_dir, "--prediction_file", path)
    assert result["matthew_corr"] == pytest.approx(
        sklearn_metrics.matthews_corrcoef(gold, predicted), abs=1e-12)
    assert result["eval_accuracy"] == pytest.approx(
        sklearn_metrics.accuracy_score(gold, predicted), abs=1e-12)


def test_stsb_float_predictions_give_scipys_correlations(glue_dir, tmp_path, capsys):
    dev = glue.read_examples(glue.TASKS["sts-b"], str(glue_dir), "dev")
    gold = np.array([e.label for e in dev])
    scores = np.round(gold + np.random.default_rng(3).normal(0, 1, len(gold)), 3)
    path = write(tmp_path / "STS-B.tsv", zip([e.guid for e in dev], scores))
    result = scored(capsys, "--task_name", "sts-b", "--data_dir", glue_dir,
                    "--prediction_file", path)
    assert result["pearson"] == pytest.approx(stats.pearsonr(scores, gold)[0], abs=1e-12)
    assert result["spearman"] == pytest.approx(stats.spearmanr(scores, gold)[0], abs=1e-12)
    mse = sklearn_metrics.mean_squared_error(gold, scores)
    assert result["MSE"] == pytest.approx(mse) and result["eval_loss"] == pytest.approx(mse)


@pytest.mark.parametrize("name", ["mrpc", "sts-b"])
def test_the_jobs_own_prediction_file_gives_the_jobs_metrics(glue_dir, tmp_path, capsys, name):
    """write_predictions (the job's writer) on dev logits, scored by evaluate: the metrics
    compute_metrics (the job's evaluate) gives on the same logits, but the loss of
    classification, which labels cannot give."""
    spec = glue.TASKS[name]
    dev = glue.read_examples(spec, str(glue_dir), "dev")
    width = 1 if spec.is_regression else len(spec.labels)
    logits = np.random.default_rng(4).normal(0, 2, [len(dev), width]).astype(np.float32)
    postprocess.write_predictions(str(tmp_path), spec, dev, logits)
    result = scored(capsys, "--task_name", name, "--data_dir", glue_dir,
                    "--prediction_file", tmp_path / "submit_results.tsv")
    expected = metrics.compute_metrics(spec, logits, metrics.gold_label_ids(spec, dev))
    if not spec.is_regression:
        del expected["eval_loss"]
    assert result.pop("eval_examples") == len(dev)
    assert result == pytest.approx(expected, abs=1e-12)


def test_a_clue_dev_set_is_scored(shared_data, tmp_path, capsys):
    source = shared_data / "chinese" / "clue" / "afqmc" / "dev_first2000.json"
    if not source.exists():
        pytest.skip(f"{source} not found")
    lines = source.read_text(encoding="utf-8").split("\n")[:50]
    (tmp_path / "afqmc").mkdir()
    (tmp_path / "afqmc" / "dev.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
    gold = [json.loads(line)["label"] for line in lines]
    predicted = noisy(gold, ("0", "1"), seed=5)
    path = write(tmp_path / "p.tsv", ((f"dev-{i}", p) for i, p in enumerate(predicted)))
    result = scored(capsys, "--task_name", "afqmc", "--data_dir", tmp_path, "--prediction_file", path)
    assert result == {"eval_accuracy": pytest.approx(
        sklearn_metrics.accuracy_score(gold, predicted), abs=1e-12), "eval_examples": 50}


def test_a_custom_task_is_read_with_the_column_flags(tmp_path, capsys):
    (tmp_path / "train.csv").write_text("id,text,label\na,good,pos\nb,bad,neg\n")
    (tmp_path / "dev.csv").write_text("id,text,label\nx,fine,pos\ny,awful,neg\nz,ok,pos\n")
    path = write(tmp_path / "p.tsv", [("x", "pos"), ("y", "pos"), ("z", "pos")])
    result = scored(capsys, "--task_name", "custom", "--data_dir", tmp_path,
                    "--prediction_file", path, "--text_a_column", "text", "--label_column",
                    "label", "--id_column", "id")
    assert result == {"eval_accuracy": pytest.approx(2 / 3), "eval_examples": 3}
    status, _, err = run(capsys, "--task_name", "custom", "--data_dir", tmp_path,
                         "--prediction_file", path)
    assert status == 2 and err == ("python -m albert_tf.tasks.classification evaluate: error: "
                                   "--task_name=custom needs --text_a_column and "
                                   "--label_column\n")


@pytest.fixture()
def mrpc_rows(glue_dir):
    return [(e.guid, e.label) for e in glue.read_examples(glue.TASKS["mrpc"], str(glue_dir),
                                                          "dev")]


PREFIX = "python -m albert_tf.tasks.classification evaluate: error: "


@pytest.mark.parametrize("make, message", [
    (lambda p, rows: write(p, rows, header="id\tlabel"),
     "{p}:1: expected the header 'index<TAB>prediction', found 'id\\tlabel'"),
    (lambda p, rows: write(p, rows[:2] + [("dev-3", "1\textra")] + rows[3:]),
     "{p}:4: expected 2 tab-separated fields (index, prediction), found 3"),
    (lambda p, rows: write(p, rows[:2] + [("dev-3", "yes")] + rows[3:]),
     "{p}:4: prediction 'yes' is not one of 0, 1 (task mrpc)"),
    (lambda p, rows: write(p, rows + rows[:1]),
     "{p}:410: index 'dev-1' is given twice (first at line 2)"),
    (lambda p, rows: write(p, rows[1:] + [("test-1", "0")]),
     "{p}: its indices do not match the 408 examples of mrpc: 1 unknown (first ['test-1']), "
     "1 without a prediction (first ['dev-1'])"),
    (lambda p, rows: p, "--prediction_file={p}: no such predictions file"),
])
def test_bad_files_are_one_line_errors(glue_dir, mrpc_rows, tmp_path, capsys, make, message):
    path = make(tmp_path / "bad.tsv", mrpc_rows)
    status, out, err = run(capsys, "--task_name", "mrpc", "--data_dir", glue_dir,
                           "--prediction_file", tmp_path / "bad.tsv")
    assert (status, out) == (2, "")
    assert err == PREFIX + message.format(p=path) + "\n"


def test_unknown_task_and_command_are_refused(capsys):
    status, _, err = run(capsys, "--task_name", "sts", "--data_dir", "d", "--prediction_file", "p")
    assert status == 2 and err.startswith(PREFIX + "--task_name 'sts' is not one of cola, ")
    assert evaluate_command.main(["score"]) == 2
    assert "the command is `evaluate`" in capsys.readouterr().err


def test_python_m_prints_the_metrics_as_json(glue_dir, mrpc_rows, tmp_path):
    path = write(tmp_path / "p.tsv", mrpc_rows)
    done = subprocess.run([sys.executable, "-m", "albert_tf.tasks.classification", "evaluate",
                           "--task_name", "mrpc", "--data_dir", str(glue_dir),
                           "--prediction_file", str(path)],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "eval_accuracy": 1.0, "eval_examples": 408, "f1": 1.0}
