"""A GoEmotions fine-tune end to end (tiny model, the shared sample): its reported test
metrics equal scikit-learn's on its own predictions file, tuned thresholds beat 0.5 on dev,
and the SavedModel, ONNX file and pipeline give the job's probabilities and labels."""
import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import pipeline
from albert_tf.config import AlbertConfig
from albert_tf.finetuning import FinetuningOptions
from albert_tf.tasks.classification import (__main__ as evaluate_command, datasets, metrics)
from albert_tf.tasks.classification.job import ClassificationOptions, run_glue

sklearn_metrics = pytest.importorskip("sklearn.metrics")
CONFIG = AlbertConfig(vocab_size=8000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)


@pytest.fixture(scope="module")
def run(shared_data, tmp_path_factory):
    source = shared_data / "multilabel" / "goemotions"
    spm = shared_data / "spm" / "albert_style_pd8k.model"
    if not (source / "train.tsv").exists() or not spm.exists():
        pytest.skip(f"{source} or {spm} not found")
    root = tmp_path_factory.mktemp("goemotions")
    data, out = root / "data", root / "out"
    data.mkdir()
    train = (source / "train.tsv").read_text(encoding="utf-8").splitlines(True)
    dev = (source / "dev.tsv").read_text(encoding="utf-8").splitlines(True)
    (data / "train.tsv").write_text("".join(train[:600]), encoding="utf-8")
    (data / "dev.tsv").write_text("".join(dev[:200]), encoding="utf-8")
    # The sample leaves out GoEmotions' (labelled) test.tsv: dev lines stand in for it.
    (data / "test.tsv").write_text("".join(dev[200:300]), encoding="utf-8")
    shutil.copy(source / "emotions.txt", data)
    options = ClassificationOptions(
        task_name="goemotions", data_dir=str(data), spm_model_file=str(spm),
        albert_config=CONFIG, max_seq_length=48, eval_batch_size=8, predict_batch_size=8,
        export_dir=str(out / "export"), export_format=("saved_model", "onnx"),
        finetuning=FinetuningOptions(output_dir=str(out), do_train=True, do_eval=True,
                                     do_predict=True, train_batch_size=16, learning_rate=3e-3,
                                     train_step=60, warmup_step=5, save_checkpoints_steps=30,
                                     iterations_per_loop=10, seed=3))
    results = run_glue(options)
    task = datasets.open_task(options)
    return {"results": results, "data": data, "out": out, "task": task,
            "test": task.read("test")}


def predictions(out):
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def test_reported_test_metrics_equal_scikit_learn_on_the_predictions_file(run):
    spec, test, out = run["task"].spec, run["test"], run["out"]
    lines = predictions(out)
    assert [line["id"] for line in lines] == [e.guid for e in test]
    index = {name: k for k, name in enumerate(spec.labels)}
    predicted = np.zeros([len(test), len(spec.labels)], int)
    for row, line in enumerate(lines):
        predicted[row, [index[name] for name in line["labels"]]] = 1
    gold = metrics.gold_label_ids(spec, test)
    reported = json.loads((out / "test_metrics.json").read_text())
    kwargs = dict(labels=list(range(28)), zero_division=0)
    assert reported["macro_f1"] == pytest.approx(
        sklearn_metrics.f1_score(gold, predicted, average="macro", **kwargs), abs=1e-12)
    assert reported["micro_f1"] == pytest.approx(
        sklearn_metrics.f1_score(gold, predicted, average="micro", **kwargs), abs=1e-12)
    assert reported["hamming_loss"] == pytest.approx(
        sklearn_metrics.hamming_loss(gold, predicted), abs=1e-12)
    assert reported["subset_accuracy"] == pytest.approx(
        sklearn_metrics.accuracy_score(gold, predicted), abs=1e-12)
    assert reported["eval_examples"] == 100
    assert run["results"]["predict"]["metrics"]["macro_f1"] == reported["macro_f1"]


def test_the_evaluate_command_reports_the_same_metrics(run, capsys):
    out = run["out"]
    status = evaluate_command.main(["evaluate", "--task_name", "goemotions", "--data_file",
                                    str(run["data"] / "test.tsv"), "--prediction_file",
                                    str(out / "predictions.jsonl")])
    assert status == 0
    scored = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    reported = json.loads((out / "test_metrics.json").read_text())
    for key in ("micro_f1", "macro_f1", "micro_precision", "micro_recall", "hamming_loss",
                "subset_accuracy", "f1/neutral"):
        assert scored[key] == pytest.approx(reported[key], abs=1e-12)


def test_tuned_thresholds_beat_a_half_on_dev_and_best_is_by_macro_f1(run):
    out = run["out"]
    record = json.loads((out / "label_thresholds.json").read_text())
    assert list(record["thresholds"]) == list(run["task"].spec.labels)
    assert record["dev_macro_f1_tuned"] > record["dev_macro_f1_at_0.5"]
    assert record["dev_examples"] == 200
    best = json.loads((out / "best_eval.json").read_text())
    assert {"macro_f1", "micro_f1", "hamming_loss", "subset_accuracy", "tuned_macro_f1",
            "f1/admiration"} <= set(best)
    # The thresholds are the best checkpoint's evaluation's: no second pass over dev.
    assert "best_eval.json" in record["source"]
    assert record["thresholds"] == {label: best[f"threshold/{label}"]
                                    for label in run["task"].spec.labels}
    assert record["dev_macro_f1_tuned"] == best["tuned_macro_f1"]
    evals = (out / "eval_results.txt").read_text().splitlines()
    scores = [float(line.split(" = ")[1]) for line in evals if line.startswith("macro_f1 ")]
    assert len(scores) == 2 and best["macro_f1"] == max(scores)


def test_saved_model_onnx_and_pipeline_give_the_jobs_probabilities_and_labels(run):
    import tensorflow_text  # noqa: F401
    out, test = run["out"], run["test"]
    lines = predictions(out)
    labels = run["task"].spec.labels
    expected = np.array([[line["probabilities"][name] for name in labels] for line in lines])
    served = tf.saved_model.load(str(out / "export")).signatures["serving_default"](
        text_a=tf.constant([e.text_a for e in test]))
    np.testing.assert_allclose(served["probabilities"].numpy(), expected, atol=2e-5)
    assert [[name.decode() for name in row if name] for row in served["labels"].numpy()] == \
        [line["labels"] for line in lines]
    thresholds = json.loads((out / "label_thresholds.json").read_text())["thresholds"]
    record = json.loads((out / "export" / "albert_tf_export.json").read_text())
    assert record["multi_label"] is True
    np.testing.assert_allclose(record["thresholds"], [thresholds[n] for n in labels], atol=1e-7)
    # model.onnx decides as the job: its multi-hot predictions are predictions.jsonl's labels.
    from albert_tf.export import portable
    from albert_tf.tasks.classification import features
    cache = next(out.glob("goemotions_test_s48_*.tf_record"))
    rows = {k: np.concatenate([b[k] for b in features.dataset(
        str(cache), 48, False, 100, False, 100, num_multi_labels=28).as_numpy_iterator()])
        for k in ("input_ids", "input_mask", "segment_ids")}
    onnx_out = portable.run_file(str(out / "export" / "model.onnx"), rows)
    assert [[labels[k] for k in np.flatnonzero(row)] for row in onnx_out["predictions"]] == \
        [line["labels"] for line in lines]
    for model in (out / "export", out / "export" / "model.onnx"):
        classify = pipeline("text-classification", model=str(model))
        scores = classify([e.text_a for e in test[:10]], top_k=None)
        for row, answer in enumerate(scores):
            got = {item["label"]: item["score"] for item in answer}
            np.testing.assert_allclose([got[name] for name in labels], expected[row],
                                       atol=2e-5)


def test_a_fresh_process_serves_the_saved_model_through_the_pipeline(run):
    # The raw-text signatures hold tensorflow-text ops: the pipeline registers them itself.
    import subprocess
    import sys
    from tests.conftest import REPO_ROOT

    code = ("from albert_tf import pipeline; import json; print(json.dumps(pipeline("
            f"'text-classification', model={str(run['out'] / 'export')!r})('thanks a lot!')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer[0]["label"] in run["task"].spec.labels
