"""Multi-label classification: GoEmotions and custom label-set files read, multi-hot features,
the sigmoid cross-entropy, the metrics and the evaluate command against scikit-learn on
adversarial prediction files, and the tuned thresholds."""
import json
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.modeling.models import classifier_losses
from albert_tf.tasks.classification import (__main__ as evaluate_command, datasets, features,
                                            glue, metrics, multilabel, postprocess)

sklearn_metrics = pytest.importorskip("sklearn.metrics")


@pytest.fixture(scope="module")
def goemotions_dir(shared_data):
    path = shared_data / "multilabel" / "goemotions"
    if not (path / "train.tsv").exists():
        pytest.skip(f"{path} not found")
    return path


def open_goemotions(data_dir):
    return datasets.open_task(type("Args", (), {"task_name": "goemotions",
                                                "data_dir": str(data_dir), "custom": None,
                                                "do_lower_case": True})())


# --- reading ------------------------------------------------------------------------------------


def test_goemotions_sample_is_read_as_its_readme_counts(goemotions_dir):
    task = open_goemotions(goemotions_dir)
    assert task.spec.multi_label and task.spec.metric == "macro_f1"
    assert len(task.spec.labels) == 28
    assert task.spec.labels[0] == "admiration" and task.spec.labels[27] == "neutral"
    train, dev = task.read("train"), task.read("dev")
    sizes = [len(e.label) for e in train]
    assert (len(train), sizes.count(1), sizes.count(2), sum(s >= 3 for s in sizes)) == \
        (4000, 3320, 620, 60)
    assert {name for e in train for name in e.label} == set(task.spec.labels)
    assert len(dev) == 500
    # dev line 2: `...them!<TAB>4,27<TAB>ee84bjg`: ids -> names, the comment id is the guid.
    assert (dev[1].guid, dev[1].label) == ("ee84bjg", ("approval", "neutral"))
    # The 8 dev lines in CSV quotes are unquoted (inner "" -> "), as pandas reads them.
    raw = (goemotions_dir / "dev.tsv").read_text(encoding="utf-8").splitlines()
    quoted = [i for i, line in enumerate(raw) if line.startswith('"')]
    assert len(quoted) == 8
    for i in quoted:
        text = raw[i].rsplit("\t", 2)[0]
        assert dev[i].text_a == text[1:-1].replace('""', '"')


@pytest.mark.parametrize("line, message", [
    ("text\t28\tid1", "label id '28' is not a number from 0 to 27"),
    ("text\t3,x\tid1", "label id 'x' is not a number from 0 to 27"),
    ("text\t\u00b2\tid1", "label id '\u00b2' is not a number from 0 to 27"),
    ("text\t3", "expected 3 tab-separated fields"),
    ('"an unclosed quote\t3\tid1\nnext\t4\tid2', "a quoted text runs on to line"),
])
def test_bad_goemotions_lines_are_one_line_errors_naming_the_line(goemotions_dir, tmp_path,
                                                                   line, message):
    shutil.copy(goemotions_dir / "emotions.txt", tmp_path)
    (tmp_path / "dev.tsv").write_text("fine\t1\tid0\n" + line + "\n", encoding="utf-8")
    with pytest.raises(glue.GlueDataError, match=message) as caught:
        open_goemotions(tmp_path).read("dev")
    assert f"{tmp_path / 'dev.tsv'}:2:" in str(caught.value)


def test_missing_label_names_file_is_named(tmp_path):
    with pytest.raises(glue.GlueDataError, match="emotions.txt: file not found"):
        open_goemotions(tmp_path)


def custom(multi_label=True, **columns):
    values = dict(text_a_column="text", label_column="labels", multi_label=multi_label)
    values.update(columns)
    return glue.CustomTaskOptions(**values)


def test_custom_tsv_label_cells_are_comma_separated_sets(tmp_path):
    (tmp_path / "train.tsv").write_text("text\tlabels\na\tx, y\nb\t\nc\tz\n", encoding="utf-8")
    (tmp_path / "dev.tsv").write_text("text\tlabels\nd\ty,x,y\n", encoding="utf-8")
    options = custom()
    labels = glue.custom_labels(options, str(tmp_path))
    assert labels == ["x", "y", "z"]
    train = glue.read_custom_examples(options, str(tmp_path), "train", labels)
    assert [e.label for e in train] == [("x", "y"), (), ("z",)]
    dev = glue.read_custom_examples(options, str(tmp_path), "dev", labels)
    assert dev[0].label == ("x", "y")  # once each, in label order
    spec = glue.custom_spec(options, labels)
    assert spec.multi_label and spec.metric == "macro_f1"


def test_custom_json_lines_take_label_lists(tmp_path):
    rows = [{"text": "a", "labels": ["x", "y"], "id": 7}, {"text": "b", "labels": [], "id": 8},
            {"text": "c", "labels": ["z"], "id": "c"}]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "test.jsonl").write_text(json.dumps({"text": "t", "id": "t1"}) + "\n")
    options = custom(id_column="id")
    labels = glue.custom_labels(options, str(tmp_path))
    train = glue.read_custom_examples(options, str(tmp_path), "train", labels)
    assert [(e.guid, e.label) for e in train] == [("7", ("x", "y")), ("8", ()), ("c", ("z",))]
    assert glue.read_custom_examples(options, str(tmp_path), "test", labels)[0].label is None
    # Single-label JSON lines read the same way.
    (tmp_path / "dev.jsonl").write_text(json.dumps({"text": "d", "labels": "x"}) + "\n")
    single = glue.read_custom_examples(custom(False), str(tmp_path), "dev", ["x", "y"])
    assert single[0].label == "x"


@pytest.mark.parametrize("name, text, options, message", [
    ("dev.tsv", "text\tlabels\nd\tx,w\n", {}, r"dev.tsv:2: label 'w' is not one of x, y, z"),
    ("dev.jsonl", '{"text": "d", "labels": "x"}\n{"text": 3, "labels": []}\n', {},
     r"dev.jsonl:2: --text_a_column='text': expected a string field 'text', found int"),
    ("dev.jsonl", '{"text": "d", "labels": [1]}\n', {},
     r"dev.jsonl:1: a multi-label cell is comma-separated names or a JSON list"),
    ("dev.jsonl", '{"text": "d", "labels": ["x", ""]}\n', {},
     r"dev.jsonl:1: a multi-label cell is comma-separated names or a JSON list of non-empty"),
    ("dev.jsonl", '{"text": "d", "labels": ["x"]}\n', {"id_column": "id"},
     r"dev.jsonl:1: no id field 'id' \(--id_column\)"),
    ("dev.jsonl", '{"text": "d"}\n', {}, r"dev.jsonl:1: no label field 'labels'"),
    ("dev.jsonl", '{"text": "d", "labels": ["x"]}\n', {"multi_label": False},
     r"dev.jsonl:1: expected a label string, found \['x'\] \(a list of labels needs "
     r"--multi_label\)"),
])
def test_bad_custom_label_cells_name_file_and_line(tmp_path, name, text, options, message):
    (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(glue.GlueDataError, match=message):
        glue.read_custom_examples(custom(**options), str(tmp_path), "dev", ["x", "y", "z"])


def test_regression_and_multi_label_exclude_each_other():
    with pytest.raises(glue.GlueDataError, match="--regression and --multi_label"):
        custom(regression=True)


# --- features and loss --------------------------------------------------------------------------


class Tokenizer:
    cls_id, sep_id, pad_id, do_lower_case = 2, 3, 0, True

    def preprocess(self, text):
        return text

    def encode_ids(self, texts, num_threads=1):
        return [[10 + len(word) for word in text.split()] for text in texts]

    def convert_ids_to_tokens(self, ids):
        return [str(i) for i in ids]


def test_multi_hot_features_round_trip_through_the_tfrecord_cache(tmp_path):
    spec = glue.custom_spec(custom(), ["x", "y", "z"])
    examples = [glue.InputExample("a", "one two", None, ("x", "z")),
                glue.InputExample("b", "three", None, ()),
                glue.InputExample("c", "four", None, None)]  # unlabelled (test)
    path = features.prepare_features(str(tmp_path), spec, "dev", examples, Tokenizer(), 8, "v")
    data = features.dataset(path, 8, False, 2, False, 3, num_multi_labels=3)
    rows = [batch for batch in data.as_numpy_iterator()]
    labels = np.concatenate([b["label_ids"] for b in rows])
    np.testing.assert_array_equal(labels, [[1, 0, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(np.concatenate([b["is_real_example"] for b in rows]),
                                  [1, 1, 1, 0])  # padded to whole batches
    parsed = tf.io.parse_single_example(next(iter(tf.data.TFRecordDataset(path))),
                                        features.feature_spec(8, False, 3))
    assert parsed["label_ids"].dtype == tf.int64 and parsed["label_ids"].shape == (3,)
    # Another label kind of the same examples is another cache.
    single = glue.custom_spec(custom(False), ["x", "y", "z"])
    assert features.cache_identity("custom", "dev", 8, "v", True, examples, spec.labels,
                                   spec.multi_label) != features.cache_identity(
        "custom", "dev", 8, "v", True, examples, single.labels, single.multi_label)


def test_sigmoid_cross_entropy_is_the_mean_over_labels_per_example():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, [5, 4]).astype(np.float32)
    logits[0, 0] = 60.0  # large logits stay finite
    gold = rng.integers(0, 2, [5, 4])
    probabilities = 1 / (1 + np.exp(-logits.astype(np.float64)))
    with np.errstate(divide="ignore"):  # entry [0, 0] is set by hand below
        reference = -(gold * np.log(probabilities) + (1 - gold) * np.log1p(-probabilities))
    reference[0, 0] = 0.0 if gold[0, 0] else 60.0
    reference = reference.mean(axis=1)
    losses = classifier_losses({"logits": tf.constant(logits)},
                               {"label_ids": tf.constant(gold, tf.int32)})
    np.testing.assert_allclose(losses["per_example_loss"].numpy(), reference, rtol=1e-5)
    assert float(losses["loss"]) == pytest.approx(reference.mean(), rel=1e-5)
    np.testing.assert_allclose(metrics.per_example_loss(logits, gold, False), reference,
                               rtol=1e-6)


# --- metrics ------------------------------------------------------------------------------------


def sklearn_reference(gold, predicted, k):
    kwargs = dict(labels=list(range(k)), zero_division=0)
    return {
        "micro_f1": sklearn_metrics.f1_score(gold, predicted, average="micro", **kwargs),
        "macro_f1": sklearn_metrics.f1_score(gold, predicted, average="macro", **kwargs),
        "micro_precision": sklearn_metrics.precision_score(gold, predicted, average="micro",
                                                           **kwargs),
        "micro_recall": sklearn_metrics.recall_score(gold, predicted, average="micro",
                                                     **kwargs),
        "hamming_loss": sklearn_metrics.hamming_loss(gold, predicted),
        "subset_accuracy": sklearn_metrics.accuracy_score(gold, predicted),
        "per_label": sklearn_metrics.f1_score(gold, predicted, average=None, **kwargs),
    }


def adversarial(gold, seed):
    """Prediction matrices built to break metric code: none, all, each gold set with one
    label dropped or one added, random, and the gold itself."""
    rng = np.random.default_rng(seed)
    dropped, added = gold.copy(), gold.copy()
    for row in range(len(gold)):
        on, off = np.flatnonzero(gold[row]), np.flatnonzero(gold[row] == 0)
        if len(on):
            dropped[row, rng.choice(on)] = 0
        if len(off):
            added[row, rng.choice(off)] = 1
    return {"empty": np.zeros_like(gold), "all": np.ones_like(gold), "one dropped": dropped,
            "one added": added, "random": rng.integers(0, 2, gold.shape), "gold": gold.copy()}


@pytest.mark.parametrize("case", ["empty", "all", "one dropped", "one added", "random", "gold"])
def test_metrics_equal_scikit_learn_on_adversarial_predictions(goemotions_dir, case):
    task = open_goemotions(goemotions_dir)
    examples = task.read("dev")
    gold = metrics.gold_label_ids(task.spec, examples)
    predicted = adversarial(gold, 1)[case]
    ours = metrics.prediction_metrics(task.spec, predicted, gold)
    reference = sklearn_reference(gold, predicted, 28)
    for key in ("micro_f1", "macro_f1", "micro_precision", "micro_recall", "hamming_loss",
                "subset_accuracy"):
        assert ours[key] == pytest.approx(reference[key], abs=1e-12), key
    np.testing.assert_allclose([ours[f"f1/{name}"] for name in task.spec.labels],
                               reference["per_label"], atol=1e-12)


def test_metrics_of_labels_nobody_has_are_zero_not_nan():
    gold = np.array([[1, 0, 0], [0, 0, 0]])
    ours = metrics.multilabel_metrics(gold, np.zeros_like(gold), ["a", "b", "c"])
    reference = sklearn_reference(gold, np.zeros_like(gold), 3)
    assert ours["macro_f1"] == reference["macro_f1"] == 0.0
    assert ours["micro_precision"] == 0.0 and ours["subset_accuracy"] == 0.5


def write_predictions(path, guids, names, matrix):
    path.write_text("".join(json.dumps({"id": guid, "labels": [names[k] for k in
                                                               np.flatnonzero(row)]}) + "\n"
                            for guid, row in zip(guids, matrix)), encoding="utf-8")
    return path


@pytest.mark.parametrize("case", ["empty", "all", "one dropped", "one added", "random"])
def test_evaluate_command_equals_scikit_learn_on_a_predictions_file(goemotions_dir, tmp_path,
                                                                     capsys, case):
    task = open_goemotions(goemotions_dir)
    examples = task.read("dev")
    gold = metrics.gold_label_ids(task.spec, examples)
    predicted = adversarial(gold, 2)[case]
    order = np.random.default_rng(3).permutation(len(examples))  # any line order
    path = write_predictions(tmp_path / "predictions.jsonl", [examples[i].guid for i in order],
                             task.spec.labels, predicted[order])
    status = evaluate_command.main(["evaluate", "--task_name", "goemotions", "--data_file",
                                    str(goemotions_dir / "dev.tsv"), "--prediction_file",
                                    str(path)])
    out = capsys.readouterr()
    assert status == 0, out.err
    result = json.loads(out.out.strip().splitlines()[-1])
    reference = sklearn_reference(gold, predicted, 28)
    for key in ("micro_f1", "macro_f1", "hamming_loss", "subset_accuracy"):
        assert result[key] == pytest.approx(reference[key], abs=1e-12)
    assert result["eval_examples"] == 500


@pytest.mark.parametrize("edit, message", [
    (lambda lines: lines[:-1], r"predictions.jsonl: its ids do not match the 500 examples of "
                               r"goemotions: 0 unknown \(first \[\]\), 1 without a prediction"),
    (lambda lines: lines + [lines[0]], r"predictions.jsonl:501: id 'eebbqej' is given twice"),
    (lambda lines: ['{"id": "eebbqej", "labels": ["happy"]}'] + lines[1:],
     r"predictions.jsonl:1: label 'happy' is not one of the 28 labels of goemotions"),
    (lambda lines: ['{"id": "eebbqej", "labels": "joy"}'] + lines[1:],
     r"predictions.jsonl:1: expected \"labels\": a list of label names"),
    (lambda lines: ["not json"] + lines[1:], r"predictions.jsonl:1: not a valid JSON line"),
])
def test_bad_prediction_files_are_one_line_errors(goemotions_dir, tmp_path, capsys, edit,
                                                  message):
    task = open_goemotions(goemotions_dir)
    examples = task.read("train")[:500]
    data = tmp_path / "gold.tsv"
    data.write_text("".join(line + "\n" for line in (goemotions_dir / "train.tsv").read_text(
        encoding="utf-8").splitlines()[:500]), encoding="utf-8")
    shutil.copy(goemotions_dir / "emotions.txt", tmp_path)
    gold = metrics.gold_label_ids(task.spec, examples)
    path = write_predictions(tmp_path / "predictions.jsonl", [e.guid for e in examples],
                             task.spec.labels, gold)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(edit(lines)) + "\n")
    status = evaluate_command.main(["evaluate", "--task_name", "goemotions", "--data_file",
                                    str(data), "--prediction_file", str(path)])
    err = capsys.readouterr().err
    assert status == 2
    assert len(err.strip().splitlines()) == 1
    assert re.search(message, err), err


# --- thresholds ---------------------------------------------------------------------------------


def test_tuned_thresholds_never_lose_to_the_baseline_and_keep_half_without_positives():
    rng = np.random.default_rng(5)
    gold = (rng.random([300, 6]) < 0.15).astype(int)
    gold[:, 5] = 0  # a label dev never shows
    # Under-confident scores: the true labels score ~0.3, the others ~0.1.
    probabilities = np.clip(0.1 + 0.2 * gold + rng.normal(0, 0.08, gold.shape), 1e-4, 1 - 1e-4)
    logits = np.log(probabilities / (1 - probabilities)).astype(np.float32)
    thresholds = multilabel.tune_thresholds(logits, gold)
    assert thresholds[5] == 0.5
    assert all(0.01 <= t <= 0.99 for t in thresholds)
    names = list("abcdef")
    at_half = metrics.multilabel_metrics(gold, probabilities > 0.5, names)["macro_f1"]
    tuned = metrics.multilabel_metrics(gold, metrics.above_thresholds(logits, thresholds),
                                       names)["macro_f1"]
    assert tuned > at_half + 0.3
    # Each label's threshold is the best of the grid for that label alone.
    for k in range(5):
        best = max(sklearn_metrics.f1_score(gold[:, k], probabilities[:, k] > t,
                                            zero_division=0)
                   for t in multilabel.THRESHOLD_GRID)
        assert sklearn_metrics.f1_score(gold[:, k], probabilities[:, k] > thresholds[k],
                                        zero_division=0) == pytest.approx(best)


def test_the_decision_compares_float32_logits_with_the_thresholds_logits():
    # float32(-0.84729785) is the float32 logit of 0.3: its float64 sigmoid is just above
    # 0.3, its float32 one equal to float32(0.3). Every path decides on the logit: not above.
    logit = np.float32(-0.84729785)
    assert 1 / (1 + np.exp(-np.float64(logit))) > 0.3
    assert metrics.above_thresholds([[logit]], [0.3])[0, 0] == 0
    assert metrics.above_thresholds([[np.nextafter(logit, np.float32(1))]], [0.3])[0, 0] == 1
    assert metrics.above_thresholds([[0.0, 1e-7]], [0.5, 0.5]).tolist() == [[0, 1]]


def test_ties_pick_the_threshold_nearest_a_half():
    def logits(probabilities):
        probabilities = np.array(probabilities, np.float64)
        return np.log(probabilities / (1 - probabilities)).astype(np.float32)

    # Every threshold in [0.3, 0.7) separates these perfectly: 0.5 is kept.
    gold = np.array([[0], [0], [1], [1]])
    assert multilabel.tune_thresholds(logits([[0.2], [0.25], [0.75], [0.8]]), gold)[0] == 0.5
    # Only [0.80, 0.85) separates these: the first grid point there.
    assert multilabel.tune_thresholds(logits([[0.805], [0.85]]), [[0], [1]])[0] == 0.81
    # 0.3 and 0.7 both separate these best (exactly as far from 0.5): the lower wins.
    assert multilabel.tune_thresholds(logits([[0.295], [0.305], [0.695], [0.695], [0.705]]),
                                      [[0], [1], [0], [0], [1]])[0] == 0.3


def test_the_predictions_file_round_trips(tmp_path):
    spec = glue.custom_spec(custom(), ["x", "y", "z"])
    examples = [glue.InputExample(f"g{i}", "t", None, ()) for i in range(3)]
    logits = np.array([[2.0, -1.0, 0.1], [-3.0, -3.0, -3.0], [0.0, 5.0, 1.0]])
    written = postprocess.write_multilabel_predictions(str(tmp_path), spec, examples, logits,
                                                       np.array([0.5, 0.5, 0.55]))
    lines = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text()
             .splitlines()]
    assert [line["labels"] for line in lines] == [["x"], [], ["y", "z"]]
    assert lines[0]["probabilities"]["x"] == pytest.approx(1 / (1 + np.exp(-2.0)), abs=1e-6)
    assert written["labels"] == [["x"], [], ["y", "z"]]
    np.testing.assert_array_equal(
        postprocess.read_label_sets(str(tmp_path / "predictions.jsonl"), spec, examples),
        [[1, 0, 0], [0, 0, 0], [0, 1, 1]])
