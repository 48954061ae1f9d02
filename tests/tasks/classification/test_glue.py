"""GLUE processors on the real files in ../shared/data/glue, the custom task, and bad input."""
import logging

import pytest

from albert_tf.tasks.classification import glue


@pytest.fixture(scope="module")
def glue_dir(shared_data, tmp_path_factory):
    """A GLUE-layout data_dir of symlinks into ../shared/data/glue (nothing is copied)."""
    source = shared_data / "glue"
    if not source.is_dir():
        pytest.skip(f"{source} not found")
    root = tmp_path_factory.mktemp("glue_data")
    for name in ("CoLA", "SST-2", "MRPC", "RTE"):
        (root / name).symlink_to(source / name)
    for name in ("MNLI", "QNLI", "QQP", "WNLI"):
        (root / name).symlink_to(source / "hf_dummy" / name)
    (root / "STS-B").mkdir()
    for split in ("train", "dev"):
        (root / "STS-B" / f"{split}.tsv").symlink_to(source / "STS-B" / f"{split}_sample.tsv")
    return root


def read(glue_dir, task, split, lower=True):
    return glue.read_examples(glue.TASKS[task], str(glue_dir), split, lower)


def label_counts(examples):
    counts = {}
    for e in examples:
        counts[e.label] = counts.get(e.label, 0) + 1
    return counts


def test_cola_has_no_header_in_train_and_dev(glue_dir):
    dev = read(glue_dir, "cola", "dev")
    assert len(dev) == 1043 and label_counts(dev) == {"1": 721, "0": 322}
    first = dev[0]
    assert (first.guid, first.text_a, first.text_b, first.label) == (
        "dev-0", "The sailors rode the breeze clear of the rocks.", None, "1")
    assert first.source.endswith("CoLA/dev.tsv:1")
    assert dev[-1].source.endswith("CoLA/dev.tsv:1043")  # no final newline: still read
    train = read(glue_dir, "cola", "train")
    assert len(train) == 8551 and label_counts(train) == {"1": 6023, "0": 2528}


def test_sst2_dev(glue_dir):
    dev = read(glue_dir, "sst-2", "dev")
    assert len(dev) == 872 and label_counts(dev) == {"1": 444, "0": 428}
    assert (dev[0].guid, dev[0].text_a) == ("dev-1", "it 's a charming and often affecting "
                                                     "journey . ")


def test_mrpc_dev_with_bom_and_unbalanced_quotes(glue_dir):
    dev = read(glue_dir, "mrpc", "dev")
    assert len(dev) == 408 and label_counts(dev) == {"1": 279, "0": 129}
    # The quote opening the second sentence is text (no CSV quoting in GLUE files).
    assert dev[0].text_a.startswith("He said the foodservice pie business")
    assert dev[0].text_b == "\"The foodservice pie business does not fit our long-term " \
                            "growth strategy."
    assert dev[0].guid == "dev-1" and dev[0].source.endswith("MRPC/dev.tsv:2")


def test_rte_and_stsb(glue_dir):
    assert label_counts(read(glue_dir, "rte", "dev")) == {"not_entailment": 131,
                                                         "entailment": 146}
    assert label_counts(read(glue_dir, "rte", "train")) == {"not_entailment": 1241,
                                                           "entailment": 1249}
    stsb = read(glue_dir, "sts-b", "dev")
    assert len(stsb) == 30 and glue.TASKS["sts-b"].is_regression
    assert (stsb[0].guid, stsb[0].text_a, stsb[0].text_b, stsb[0].label) == (
        "0", "A man with a hard hat is dancing.", "A man wearing a hard hat is dancing.", 5.0)
    assert stsb[1].label == 4.75


@pytest.mark.parametrize("task, split, count, first", [
    ("mnli", "train", 3, ("0", "neutral")),
    ("mnli", "dev", 2, ("0", "neutral")),
    ("mnli", "test", 1, ("0", None)),
    ("mismnli", "dev", 2, ("0", "contradiction")),
    ("mismnli", "test", 1, ("0", None)),
    ("qnli", "train", 3, ("0", "not_entailment")),
    ("qnli", "test", 1, ("0", None)),
    ("qqp", "train", 3, ("133273", "0")),
    ("qqp", "dev", 2, ("201359", "0")),
    ("qqp", "test", 1, ("0", None)),
    ("wnli", "train", 3, ("0", "1")),
    ("wnli", "test", 1, ("0", None)),
])
def test_format_samples_of_the_other_tasks(glue_dir, task, split, count, first):
    examples = read(glue_dir, task, split)
    assert len(examples) == count
    assert (examples[0].guid, examples[0].label) == first
    assert examples[0].text_b  # every one of these is a sentence-pair task


def test_mnli_and_qqp_columns(glue_dir):
    mnli = read(glue_dir, "mnli", "train")[0]
    assert mnli.text_a.startswith("Conceptually cream skimming has two basic dimensions")
    assert mnli.text_b.startswith("Product and geography are what make cream skimming")
    test = read(glue_dir, "mnli", "test")[0]
    assert test.text_a.startswith("Hierbas, ans seco, ans dulce, and frigola")
    qqp = read(glue_dir, "qqp", "dev")[0]
    assert (qqp.text_a, qqp.text_b) == ("Why are African-Americans so beautiful?",
                                        "Why are hispanics so beautiful?")


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_bad_rows_name_file_and_line(tmp_path):
    write(tmp_path / "RTE" / "dev.tsv",
          "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\tonly two\n")
    with pytest.raises(glue.GlueDataError, match=r"RTE/dev.tsv:3: expected at least 3 "
                                                 r"tab-separated columns, found 2 \(task rte\)"):
        glue.read_examples(glue.TASKS["rte"], str(tmp_path), "dev")
    write(tmp_path / "RTE" / "train.tsv",
          "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tb\tmaybe\n")
    with pytest.raises(glue.GlueDataError, match=r"RTE/train.tsv:3: label 'maybe' is not one "
                                                 r"of entailment, not_entailment"):
        glue.read_examples(glue.TASKS["rte"], str(tmp_path), "train")
    # Labels are normalised like the original (preprocess_text, lower-cased).
    write(tmp_path / "RTE" / "test.tsv", "index\tsentence1\tsentence2\n0\ta\tb\n")
    write(tmp_path / "RTE" / "dev.tsv",
          "index\tsentence1\tsentence2\tlabel\n0\ta\tb\t Entailment \n")
    assert glue.read_examples(glue.TASKS["rte"], str(tmp_path), "dev")[0].label == "entailment"
    write(tmp_path / "STS-B" / "dev.tsv", "h\n" + "\t".join(["x"] * 9 + ["high"]) + "\n")
    with pytest.raises(glue.GlueDataError, match=r"STS-B/dev.tsv:2: regression label 'high'"):
        glue.read_examples(glue.TASKS["sts-b"], str(tmp_path), "dev")
    with pytest.raises(glue.GlueDataError, match=r"CoLA/dev.tsv: file not found \(check "
                                                 r"--data_dir"):
        glue.read_examples(glue.TASKS["cola"], str(tmp_path), "dev")
    (tmp_path / "SST-2").mkdir()
    (tmp_path / "SST-2" / "dev.tsv").write_bytes(b"sentence\tlabel\nok\t1\nbad \xff\t0\n")
    with pytest.raises(glue.GlueDataError, match=r"SST-2/dev.tsv:3: not valid UTF-8"):
        glue.read_examples(glue.TASKS["sst-2"], str(tmp_path), "dev")


def test_qqp_short_rows_are_skipped_and_counted(tmp_path, caplog):
    write(tmp_path / "QQP" / "train.tsv",
          "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
          "1\t1\t2\tq one?\tq two?\t1\n"
          "2\t3\t4\tbroken row\n"
          "3\t5\t6\tq three?\tq four?\t0\n"
          "4\t7\n")
    with caplog.at_level(logging.WARNING, logger="absl"):
        examples = glue.read_examples(glue.TASKS["qqp"], str(tmp_path), "train")
    assert [e.guid for e in examples] == ["1", "3"]
    assert "skipped 2 rows with fewer than 6 columns" in caplog.text


def test_custom_task_tsv_csv_and_errors(tmp_path):
    opts = glue.CustomTaskOptions(text_a_column="review", text_b_column="title",
                                  label_column="stars", id_column="id")
    write(tmp_path / "train.csv", 'id,title,review,stars\n7,"Great, really","I ""loved"" it",'
                                  'good\n8,Meh,So so,bad\n9,Fine,Ok,good\n')
    write(tmp_path / "dev.csv", "id,title,review,stars\n1,A,B,good\n2,C,D,awful\n")
    write(tmp_path / "test.csv", "id,title,review\n5,T,R\n")
    assert glue.custom_labels(opts, str(tmp_path)) == ["bad", "good"]
    train = glue.read_custom_examples(opts, str(tmp_path), "train", ["bad", "good"])
    assert (train[0].guid, train[0].text_a, train[0].text_b, train[0].label) == (
        "7", 'I "loved" it', "Great, really", "good")
    test = glue.read_custom_examples(opts, str(tmp_path), "test", ["bad", "good"])
    assert (test[0].guid, test[0].label) == ("5", None)
    with pytest.raises(glue.GlueDataError, match=r"dev.csv:3: label 'awful' is not one of "
                                                 r"bad, good \(labels of the training data\)"):
        glue.read_custom_examples(opts, str(tmp_path), "dev", ["bad", "good"])
    spec = glue.custom_spec(opts, ["bad", "good"])
    assert spec.is_pair and spec.labels == ("bad", "good") and spec.metric == "eval_accuracy"
    bad = glue.CustomTaskOptions(text_a_column="body", label_column="stars")
    with pytest.raises(glue.GlueDataError, match=r"--text_a_column='body': no such column"):
        glue.read_custom_examples(bad, str(tmp_path), "train")
    write(tmp_path / "train.tsv", "x\n")
    with pytest.raises(glue.GlueDataError, match="exactly one of train.tsv, train.csv and train.jsonl"):
        glue.read_custom_examples(opts, str(tmp_path), "train")


def test_custom_task_by_index_without_header_and_regression(tmp_path):
    write(tmp_path / "train.tsv", "0.5\tfirst text\n2.25\tsecond text\n")
    opts = glue.CustomTaskOptions(text_a_column="1", label_column="0", has_header=False,
                                  regression=True)
    examples = glue.read_custom_examples(opts, str(tmp_path), "train")
    assert [(e.guid, e.text_a, e.label) for e in examples] == [
        ("train-0", "first text", 0.5), ("train-1", "second text", 2.25)]
    spec = glue.custom_spec(opts, None)
    assert spec.is_regression and spec.metric == "pearson" and not spec.is_pair
    named = glue.CustomTaskOptions(text_a_column="text", label_column="0", has_header=False)
    with pytest.raises(glue.GlueDataError, match="names a column but .* without a header"):
        glue.read_custom_examples(named, str(tmp_path), "train")
