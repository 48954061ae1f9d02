"""The tagging data sets (`tagging.datasets`): each record's reader, split files, word
split and predictions file, the old name-keyed lookups answering from them, an unknown
name's errors, and a custom JSON predictions file scored by the evaluate command as
scikit-learn scores the same entities."""
import json
import types

import pytest
from sklearn.metrics import f1_score, precision_score, recall_score

from albert_tf.errors import UserError, UserValueError
from albert_tf.tasks import registry
from albert_tf.tasks.tagging import __main__ as tagging_command
from albert_tf.tasks.tagging import datasets, job, postprocess, readers, schemes


@pytest.mark.parametrize("name, language, reader, word_split, form, files", [
    ("conll2003", "en", readers.read_conll2003, "basic", postprocess.COLUMNS,
     {"train": ("eng.train", "train.txt"), "dev": ("eng.testa", "valid.txt", "dev.txt"),
      "test": ("eng.testb", "test.txt")}),
    ("cluener", "zh", readers.read_cluener, "characters", postprocess.CLUENER,
     {"train": ("train.json",), "dev": ("dev.json",), "test": ("test.json",)}),
    ("msra", "zh", readers.read_msra, "characters", postprocess.COLUMNS,
     {"train": ("train.txt",), "dev": ("dev.txt",), "test": ("test.txt",)}),
])
def test_fixed_layout_data_sets(name, language, reader, word_split, form, files):
    data_set = registry.get("tagging", name)
    assert data_set is datasets.get(name)
    assert (data_set.family, data_set.language, data_set.metric) == ("tagging", language,
                                                                     job.METRIC)
    assert data_set.reader is reader
    assert data_set.labels is None and data_set.default_rules == ()
    assert dict(data_set.settings["split_files"]) == files
    assert data_set.settings["word_split"] == word_split
    assert data_set.settings["column_options"] is False
    assert data_set.settings["prediction_format"].for_file("any.json") is form


def test_custom_data_set():
    data_set = registry.get("tagging", "custom")
    assert data_set.reader is readers.read_custom and data_set.metric == "f1"
    assert data_set.settings["column_options"] is True
    assert data_set.settings["word_split"] == "basic"
    assert data_set.settings["split_files"]["dev"] == (
        "dev.txt", "dev.tsv", "dev.conll", "dev.json", "dev.jsonl")
    form = data_set.settings["prediction_format"]
    assert form.for_file("d/test.jsonl") is postprocess.ENTITIES
    assert form.for_file("d/test.JSON") is postprocess.ENTITIES
    assert form.for_file("d/test.tsv") is postprocess.COLUMNS


def test_names_are_the_flag_choices_and_old_lookups_answer_from_the_records():
    assert registry.names("tagging") == readers.TASKS == ("conll2003", "cluener", "msra",
                                                          "custom")
    assert readers.SPLIT_FILE_NAMES["msra"]["test"] == ("test.txt",)
    assert list(readers.SPLIT_FILE_NAMES) == list(readers.TASKS)
    assert [postprocess.prediction_file_name(task, "x/test.json") for task in readers.TASKS] \
        == ["predictions.txt", "cluener_predict.json", "predictions.txt", "entities.jsonl"]
    assert postprocess.prediction_file_name("custom", "x/test.txt") == "predictions.txt"


def test_unknown_name_errors(tmp_path):
    with pytest.raises(UserValueError) as caught:
        registry.get("tagging", "ontonotes")
    assert str(caught.value) == ("--task_name 'ontonotes' is not a tagging data set: one of "
                                 "conll2003, cluener, msra, custom")
    with pytest.raises(UserError, match=r"^unknown tagging task 'ontonotes'; expected one of "
                                        r"conll2003, cluener, msra, custom$"):
        readers.find_split_file(str(tmp_path), "train", "ontonotes")
    with pytest.raises(UserValueError, match="^--task_name 'ontonotes' is not a tagging"):
        job.TaggingOptions.data_set(types.SimpleNamespace(task_name="ontonotes"))


def test_find_split_file_uses_the_record(tmp_path):
    (tmp_path / "valid.txt").write_text("EU B-ORG\n")
    (tmp_path / "dev.json").write_text("{}\n")
    assert readers.find_split_file(str(tmp_path), "dev", "conll2003") == str(
        tmp_path / "valid.txt")
    assert readers.find_split_file(str(tmp_path), "dev", "cluener") == str(tmp_path / "dev.json")
    with pytest.raises(UserError, match="no msra dev file: looked for dev.txt$"):
        readers.find_split_file(str(tmp_path), "dev", "msra")
    assert readers.find_split_file(str(tmp_path), "dev", "custom") == str(tmp_path / "dev.json")
    (tmp_path / "dev.txt").write_text("EU B-ORG\n")
    with pytest.raises(UserError, match=r"dev\.txt and dev\.json are all custom dev files"):
        readers.find_split_file(str(tmp_path), "dev", "custom")


def test_read_custom_by_extension(tmp_path):
    columns = tmp_path / "train.tsv"
    columns.write_text("John\tNNP\tB-PER\nruns\tVBZ\tO\n")
    read = readers.read_sentences("custom", str(columns), delimiter="\t")
    assert (read[0].words, read[0].tags) == (["John", "runs"], ["B-PER", "O"])
    lines = tmp_path / "train.jsonl"
    lines.write_text(json.dumps({"text": "Ann met Bob", "entities": [
        {"type": "PER", "start": 0, "end": 3}]}) + "\n")
    read = readers.read_custom(str(lines))
    assert (read[0].words, read[0].tags) == (["Ann", "met", "Bob"], ["B-PER", "O", "O"])


SENTENCES = [
    ("Ann met Bob in Paris", [("PER", 0, 3), ("PER", 8, 11), ("LOC", 15, 20)]),
    ("Acme Corp hired Carl", [("ORG", 0, 9), ("PER", 16, 20)]),
    ("Nothing here", []),
    ("Dan flew to Rome and Oslo", [("PER", 0, 3), ("LOC", 12, 16), ("LOC", 21, 25)]),
]
# The predictions: Bob missed, Corp alone as ORG (wrong span), Nothing as MISC (spurious).
PREDICTED = [
    [("PER", 0, 3), ("LOC", 15, 20)],
    [("ORG", 5, 9), ("PER", 16, 20)],
    [("MISC", 0, 7)],
    [("PER", 0, 3), ("LOC", 12, 16), ("LOC", 21, 25)],
]


def _entity_line(text, entities, key="entities"):
    return json.dumps({"text": text, key: [
        {"type": kind, "start": start, "end": end, "text": text[start:end]}
        for kind, start, end in entities]}) + "\n"


def test_evaluate_custom_json_against_sklearn(tmp_path, capsys):
    data = tmp_path / "test.jsonl"
    data.write_text("".join(_entity_line(text, gold) for text, gold in SENTENCES))
    predictions = tmp_path / "entities.jsonl"
    predictions.write_text("".join(_entity_line(text, found)
                                   for (text, _), found in zip(SENTENCES, PREDICTED)))
    assert tagging_command.main(["evaluate", "--task_name", "custom", "--data_file", str(data),
                                 "--prediction_file", str(predictions)]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # Reference: exact-match entities as binary decisions over the union of gold and
    # predicted (sentence, type, start, end) spans, scored by scikit-learn.
    gold = {(i, *span) for i, (_, spans) in enumerate(SENTENCES) for span in spans}
    found = {(i, *span) for i, spans in enumerate(PREDICTED) for span in spans}
    union = sorted(gold | found)
    y_true = [span in gold for span in union]
    y_pred = [span in found for span in union]
    assert printed["precision"] == pytest.approx(precision_score(y_true, y_pred))
    assert printed["recall"] == pytest.approx(recall_score(y_true, y_pred))
    assert printed["f1"] == pytest.approx(f1_score(y_true, y_pred))
    assert (printed["support"], printed["predicted"], printed["correct"]) == (8, 8, 6)


def test_written_custom_json_predictions_score_like_the_job(tmp_path):
    data = tmp_path / "test.jsonl"
    data.write_text("".join(_entity_line(text, gold) for text, gold in SENTENCES))
    sentences = list(readers.read_sentences("custom", str(data)))
    predicted = [schemes.to_iob2(s.tags, "iob2") for s in sentences]
    predicted[2] = ["B-MISC", "O"]
    path = postprocess.write_predictions(str(tmp_path), "custom", str(data), sentences,
                                         predicted, "iob2")
    assert path == str(tmp_path / "entities.jsonl")
    scores = postprocess.score_prediction_file("custom", str(data), path)
    assert (scores["support"], scores["predicted"], scores["correct"]) == (8, 9, 8)


def test_evaluate_bad_prediction_files_are_one_line(tmp_path, capsys):
    data = tmp_path / "test.jsonl"
    data.write_text("".join(_entity_line(text, gold) for text, gold in SENTENCES))
    prog = "python -m albert_tf.tasks.tagging evaluate"
    missing = tmp_path / "none.jsonl"
    assert tagging_command.main(["evaluate", "--task_name", "custom", "--data_file", str(data),
                                 "--prediction_file", str(missing)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"{prog}: error: --prediction_file={missing}: no such predictions file"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n" * len(SENTENCES))
    assert tagging_command.main(["evaluate", "--task_name", "custom", "--data_file", str(data),
                                 "--prediction_file", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{prog}: error: {bad}:1: not valid JSON")
