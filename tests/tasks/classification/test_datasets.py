"""The classification data set registry (albert_tf.tasks.classification.datasets): every
--task_name resolves to its record, its labels and metric are the ones the job used before,
its reader opens the task as the job's old `_resolve_task` did, and an unknown name is the
error run_classifier.py has always given."""
import json
import types

import numpy as np
import pytest

from albert_tf.errors import UserValueError
from albert_tf.tasks import registry
from albert_tf.tasks.classification import clue, datasets, glue, postprocess

GLUE = ("cola", "sst-2", "mrpc", "sts-b", "qqp", "mnli", "mismnli", "qnli", "rte", "wnli")
CLUE = ("afqmc", "tnews", "iflytek", "ocnli", "cmnli", "csl")


def test_the_family_lists_every_glue_and_clue_task_goemotions_and_custom():
    assert registry.names("classification") == GLUE + CLUE + ("goemotions", "custom")


@pytest.mark.parametrize("name", GLUE)
def test_glue_records_carry_the_task_spec(name):
    spec = glue.TASKS[name]
    record = registry.get("classification", name.upper())
    assert record is datasets.get(name)
    assert (record.family, record.language, record.settings["task"]) == (
        "classification", "en", spec)
    assert (record.labels, record.metric) == (spec.labels, spec.metric)
    assert record.default_rules == ()


def test_glue_labels_and_metrics_are_the_originals():
    by_name = {name: (datasets.get(name).labels, datasets.get(name).metric) for name in GLUE}
    assert by_name["cola"] == (("0", "1"), "matthew_corr")
    assert by_name["sts-b"] == (None, "pearson")
    assert by_name["mnli"] == (("contradiction", "entailment", "neutral"), "eval_accuracy")
    assert by_name["rte"] == (("entailment", "not_entailment"), "eval_accuracy")


@pytest.mark.parametrize("name", CLUE)
def test_clue_records_carry_the_clue_task(name):
    task = clue.TASKS[name]
    record = datasets.get(name)
    assert (record.language, record.metric, record.settings["task"]) == (
        "zh", "eval_accuracy", task)
    # TNEWS and IFLYTEK read theirs from labels.json when it is there.
    assert record.labels == (None if name in ("tnews", "iflytek") else task.labels)


def test_custom_is_read_with_the_column_flags():
    record = datasets.get("custom")
    assert record.settings == {"columns": True} and record.labels is None
    assert not any(datasets.get(name).settings.get("columns") for name in GLUE + CLUE)


@pytest.mark.parametrize("name", ["sts", "glue", ""])
def test_an_unknown_name_names_the_flag_and_every_data_set(name):
    with pytest.raises(UserValueError) as raised:
        datasets.get(name)
    assert str(raised.value) == (
        f"--task_name {name!r} is not one of cola, mismnli, mnli, mrpc, qnli, qqp, rte, "
        "sst-2, sts-b, wnli (GLUE), afqmc, cmnli, csl, iflytek, ocnli, tnews (CLUE), "
        "goemotions (multi-label) or custom")
    assert not datasets.known(name)


def options(data_dir, task_name, custom=None):
    return types.SimpleNamespace(task_name=task_name, data_dir=str(data_dir),
                                 do_lower_case=True, custom=custom)


def test_a_glue_task_opens_on_the_shared_files(shared_data):
    source = shared_data / "glue"
    if not (source / "MRPC").is_dir():
        pytest.skip(f"{source}/MRPC not found")
    task = datasets.open_task(options(source, "mrpc"))
    assert task.spec is glue.TASKS["mrpc"] and task.submission is None
    dev = task.read("dev")
    assert [(e.guid, e.label) for e in dev] == [
        (e.guid, e.label) for e in glue.read_examples(glue.TASKS["mrpc"], str(source), "dev")]
    assert len(dev) == 408


def test_a_clue_task_takes_its_labels_from_labels_json(shared_data, tmp_path):
    source = shared_data / "chinese" / "clue" / "tnews"
    if not source.is_dir():
        pytest.skip(f"{source} not found")
    rows = [json.loads(line) for line in
            (source / "fewclue_dev_few_all.json").read_text(encoding="utf-8").split("\n")[:5]]
    (tmp_path / "tnews").mkdir()
    (tmp_path / "tnews" / "dev.json").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "tnews" / "labels.json").write_bytes((source / "labels.json").read_bytes())
    task = datasets.open_task(options(tmp_path, "TNEWS"))
    labels, _ = clue.task_labels(clue.TASKS["tnews"], str(tmp_path / "tnews"))
    assert task.spec == clue.spec(clue.TASKS["tnews"], labels)
    assert len(task.spec.labels) == 15
    assert [e.label for e in task.read("dev")] == [str(r["label"]) for r in rows]
    # The CLUE submission file is the data set's own prediction file.
    assert task.submission(str(tmp_path), task.read("dev")[:1], ["100"]) == \
        "tnews_predict.json"
    assert json.loads((tmp_path / "tnews_predict.json").read_text()) == {
        "id": rows[0]["id"], "label": "100"}
    # The older keyword of write_predictions, clue_task, writes the same file.
    (tmp_path / "tnews_predict.json").unlink()
    logits = np.zeros([1, len(task.spec.labels)], np.float32)
    written = postprocess.write_predictions(str(tmp_path), task.spec, task.read("dev")[:1],
                                            logits, clue_task=clue.TASKS["tnews"])
    assert written["files"][-1] == "tnews_predict.json"
    assert (tmp_path / "tnews_predict.json").exists()


def test_a_custom_task_takes_its_labels_from_the_training_file(tmp_path):
    (tmp_path / "train.tsv").write_text("text\tlabel\ngood\tpos\nbad\tneg\nfine\tpos\n")
    custom = glue.CustomTaskOptions(text_a_column="text", label_column="label")
    task = datasets.open_task(options(tmp_path, "custom", custom))
    assert (task.spec.labels, task.spec.metric) == (("neg", "pos"), "eval_accuracy")
    assert [e.label for e in task.read("train")] == ["pos", "neg", "pos"]
    regression = glue.CustomTaskOptions(text_a_column="text", label_column="label",
                                        regression=True)
    (tmp_path / "train.tsv").write_text("text\tlabel\ngood\t4.5\nbad\t0.5\n")
    task = datasets.open_task(options(tmp_path, "custom", regression))
    assert (task.spec.labels, task.spec.metric) == (None, "pearson")


def test_the_options_check_the_name_with_the_registry():
    from albert_tf.config import AlbertConfig
    from albert_tf.tasks.classification.job import ClassificationOptions

    values = dict(data_dir="d", output_dir="o", vocab_file="v",
                  albert_config=AlbertConfig(vocab_size=100, hidden_size=8,
                                             num_attention_heads=2, intermediate_size=16))
    with pytest.raises(ValueError, match=r"--task_name 'sts' is not one of cola, mismnli"):
        ClassificationOptions(task_name="sts", **values).validate(1)
    with pytest.raises(ValueError, match="--task_name=custom needs --text_a_column and "
                                         "--label_column"):
        ClassificationOptions(task_name="custom", **values).validate(1)


def test_moved_names_still_import_from_glue():
    from albert_tf.tasks.classification import features, job, metrics, postprocess

    for name in ("truncate_seq_pair", "pack_pair", "convert_examples", "feature_spec",
                 "serialize", "cache_identity", "cache_path", "prepare_features", "dataset"):
        assert getattr(glue, name) is getattr(features, name)
    assert glue.compute_metrics is metrics.compute_metrics
    assert glue.per_example_loss is metrics.per_example_loss
    assert job.write_predictions is postprocess.write_predictions
