"""CLUE tasks (albert_tf.tasks.classification.clue) and WordPiece in run_classifier, on the shared
CLUE samples and ChnSentiCorp (../shared/data/chinese): readers, labels, bad input, the
submission file, fine-tune/evaluate/predict/export for each task, and the exported SavedModel
serving raw Chinese pairs in a TensorFlow-only process."""
import json
import logging
import subprocess
import sys

import numpy as np
import pytest

from albert_tf.tasks.classification import clue, glue
from tests.conftest import REPO_ROOT

CONFIG = {"vocab_size": 21128, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64}
TNEWS_LABELS = ["100", "101", "102", "103", "104", "106", "107", "108", "109", "110", "112",
                "113", "114", "115", "116"]


def read_lines(path):
    # split("\n"), not splitlines(): CLUE's texts hold U+2028 and other line separators.
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n")
            if line.strip()]


def write_lines(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def chinese(shared_data):
    root = shared_data / "chinese"
    vocab = root / "vocab" / "vocab_chinese.txt"
    if not (root / "clue").is_dir() or not vocab.exists():
        pytest.skip(f"{root}/clue or {vocab} not found")
    return root


def spread(rows, count):
    """`count` rows taken evenly through `rows` (the samples are sorted by label in places)."""
    step = max(len(rows) // count, 1)
    return rows[::step][:count]


@pytest.fixture(scope="module")
def clue_dir(chinese, tmp_path_factory):
    """A data_dir with <task>/{train,dev,test}.json built from the shared samples."""
    source = chinese / "clue"
    root = tmp_path_factory.mktemp("clue")
    afqmc = read_lines(source / "afqmc" / "dev_first2000.json")
    write_lines(root / "afqmc" / "train.json", afqmc[:48])
    write_lines(root / "afqmc" / "dev.json", afqmc[48:72])
    write_lines(root / "afqmc" / "test.json",
                read_lines(source / "afqmc" / "test_first200.json")[:12])

    tnews = spread(read_lines(source / "tnews" / "fewclue_dev_few_all.json"), 60)
    write_lines(root / "tnews" / "train.json", tnews[:40])  # integer labels (FewCLUE)
    write_lines(root / "tnews" / "dev.json", [dict(r, label=str(r["label"])) for r in tnews[40:]])
    write_lines(root / "tnews" / "test.json", [{"id": r["id"], "sentence": r["sentence"]}
                                               for r in tnews[40:52]])
    (root / "tnews" / "labels.json").write_bytes((source / "tnews" / "labels.json").read_bytes())

    iflytek = spread(read_lines(source / "iflytek" / "dev_first1000.json"), 60)
    write_lines(root / "iflytek" / "train.json", iflytek[:40])
    write_lines(root / "iflytek" / "dev.json", iflytek[40:])
    write_lines(root / "iflytek" / "test.json",
                [{"sentence": r["sentence"]} for r in iflytek[40:50]])  # no ids
    (root / "iflytek" / "labels.json").write_bytes(
        (source / "iflytek" / "labels.json").read_bytes())

    ocnli = read_lines(source / "ocnli" / "train.3k.json")
    dashes = [i for i, r in enumerate(ocnli) if r["label"] == "-"]
    # train.3k's "-" rows, then ordinary ones: the train split has rows to skip.
    write_lines(root / "ocnli" / "train.json", [ocnli[i] for i in dashes[:2]] + ocnli[:40])
    write_lines(root / "ocnli" / "dev.json", ocnli[40:64] + [ocnli[dashes[2]]])
    write_lines(root / "ocnli" / "test.json",
                read_lines(source / "ocnli" / "test_first200.json")[:10])

    # No CMNLI sample is shared; its format is OCNLI's (sentence1, sentence2, label, "-").
    write_lines(root / "cmnli" / "train.json", ocnli[100:140])
    write_lines(root / "cmnli" / "dev.json", ocnli[140:160])
    write_lines(root / "cmnli" / "test.json", [{"id": i, "sentence1": r["sentence1"],
                                                "sentence2": r["sentence2"]}
                                               for i, r in enumerate(ocnli[160:170])])

    csl = spread(read_lines(source / "csl" / "dev_first1000.json"), 60)
    write_lines(root / "csl" / "train.json", csl[:40])
    write_lines(root / "csl" / "dev.json", csl[40:])
    write_lines(root / "csl" / "test.json", read_lines(source / "csl" / "test_first100.json")[:10])
    return root


def read(clue_dir, name, split):
    task = clue.TASKS[name]
    directory = clue.task_dir(task, str(clue_dir))
    labels, _ = clue.task_labels(task, directory)
    return clue.read_examples(task, directory, split, labels)


# --- readers ------------------------------------------------------------------------------------


def test_afqmc_fields_guids_and_test_ids(clue_dir):
    train = read(clue_dir, "afqmc", "train")
    assert len(train) == 48
    assert (train[0].guid, train[0].text_a, train[0].text_b, train[0].label) == (
        "train-0", "双十一花呗提额在哪", "里可以提花呗额度", "0")
    assert train[0].source.endswith("afqmc/train.json:1")
    test = read(clue_dir, "afqmc", "test")
    assert [(e.guid, e.example_id, e.label) for e in test[:2]] == [("0", 0, None), ("1", 1, None)]
    assert (test[0].text_a, test[0].text_b) == ("借呗什么时候会取消", "蚂蚁借呗什么时候可以恢复***个月")
    assert clue.spec(clue.TASKS["afqmc"], ("0", "1")).is_pair


def test_label_lists_follow_clue_and_labels_json(clue_dir, chinese, tmp_path):
    task = clue.TASKS["tnews"]
    assert list(task.labels) == TNEWS_LABELS  # 100..116 without 105 and 111
    labels, descriptions = clue.task_labels(task, str(clue_dir / "tnews"))
    assert list(labels) == TNEWS_LABELS and descriptions["115"] == "news_agriculture"
    # Without labels.json: CLUE's fixed lists.
    assert clue.task_labels(task, str(tmp_path)) == (task.labels, {})
    iflytek, names = clue.task_labels(clue.TASKS["iflytek"], str(clue_dir / "iflytek"))
    assert list(iflytek) == [str(i) for i in range(119)] and names["0"] == "打车"
    assert clue.TASKS["iflytek"].labels == iflytek
    assert clue.TASKS["ocnli"].labels == clue.TASKS["cmnli"].labels == (
        "contradiction", "entailment", "neutral")
    assert not clue.spec(task, labels).is_pair and clue.spec(task, labels).metric == "eval_accuracy"


def test_tnews_integer_and_string_labels_read_alike(clue_dir, tmp_path):
    train = read(clue_dir, "tnews", "train")  # integer labels in the file
    raw = read_lines(clue_dir / "tnews" / "train.json")
    assert isinstance(raw[0]["label"], int)
    assert [e.label for e in train] == [str(r["label"]) for r in raw]
    write_lines(tmp_path / "tnews" / "train.json", [dict(r, label=str(r["label"])) for r in raw])
    as_strings = read(tmp_path, "tnews", "train")
    assert [(e.text_a, e.label) for e in as_strings] == [(e.text_a, e.label) for e in train]
    test = read(clue_dir, "tnews", "test")
    assert [e.example_id for e in test] == [r["id"] for r in
                                            read_lines(clue_dir / "tnews" / "test.json")]


def test_ocnli_skips_and_counts_dash_rows(clue_dir, chinese, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="absl"):
        train = read(clue_dir, "ocnli", "train")
    assert len(train) == 40 and "-" not in {e.label for e in train}
    assert "skipped 2 rows labelled '-'" in caplog.text
    # The guid counts the skipped rows, as the baseline's line index does.
    assert train[0].guid == "train-2"
    # On the whole shared train.3k.json: 3,000 rows, 6 of them "-".
    task = clue.TASKS["ocnli"]
    (tmp_path / "train.json").symlink_to(chinese / "clue" / "ocnli" / "train.3k.json")
    everything = clue.read_examples(task, str(tmp_path), "train")
    assert len(everything) == 2994
    assert {e.label for e in everything} == set(task.labels)


def test_csl_joins_keywords_with_spaces_like_clues_baseline(clue_dir):
    raw = read_lines(clue_dir / "csl" / "train.json")
    train = read(clue_dir, "csl", "train")
    assert raw[0]["keyword"] == ["水声学", "FFT", "波束形成", "3维成像声呐"]
    assert train[0].text_a == "水声学 FFT 波束形成 3维成像声呐"
    assert train[0].text_b == raw[0]["abst"] and train[0].label == "1"
    assert [e.text_a for e in train] == [" ".join(r["keyword"]) for r in raw]


def test_csl_joined_keywords_tokenize_as_the_keywords(clue_dir, chinese):
    from albert_tf import tokenization
    tokenizer = tokenization.load_tokenizer(
        vocab_file=str(chinese / "vocab" / "vocab_chinese.txt"))
    for example, row in zip(read(clue_dir, "csl", "train"),
                            read_lines(clue_dir / "csl" / "train.json")):
        joined = tokenizer.encode_ids([tokenizer.preprocess(example.text_a)])[0]
        one_by_one = [i for k in row["keyword"] for i in tokenizer.encode_ids([k])[0]]
        assert joined == one_by_one


def test_task_directory_layouts(chinese, tmp_path, caplog):
    sample = read_lines(chinese / "clue" / "afqmc" / "dev_first2000.json")[:3]
    flat = tmp_path / "flat"
    write_lines(flat / "dev.json", sample)
    with caplog.at_level(logging.INFO, logger="absl"):
        assert clue.task_dir(clue.TASKS["afqmc"], str(flat)) == str(flat)
    assert f"CLUE afqmc: reading the files in {flat}" in caplog.text
    write_lines(tmp_path / "public" / "afqmc_public" / "dev.json", sample)
    assert clue.task_dir(clue.TASKS["afqmc"], str(tmp_path / "public")) == str(
        tmp_path / "public" / "afqmc_public")
    # OCNLI's download has train.50k.json and no train.json.
    ocnli = read_lines(chinese / "clue" / "ocnli" / "train.3k.json")[:5]
    write_lines(tmp_path / "o" / "ocnli" / "train.50k.json", ocnli)
    assert len(read(tmp_path / "o", "ocnli", "train")) == 5
    with pytest.raises(glue.GlueDataError, match=r"ocnli/dev.json: file not found \(the dev "
                                                 r"split of ocnli"):
        read(tmp_path / "o", "ocnli", "dev")
    with pytest.raises(glue.GlueDataError, match=r"no train.json / dev.json / test.json for "
                                                 r"task csl in .*/empty/csl, "):
        clue.task_dir(clue.TASKS["csl"], str(tmp_path / "empty"))


def test_bad_input_names_file_and_line(tmp_path):
    good = {"sentence1": "一", "sentence2": "二", "label": "1"}
    path = tmp_path / "afqmc" / "train.json"
    path.parent.mkdir()
    path.write_text(json.dumps(good) + "\n\n" + '{"sentence1": "坏", "sentence2": \n',
                    encoding="utf-8")
    with pytest.raises(glue.GlueDataError,
                       match=rf"{path}:3: not a valid JSON line \(Expecting value at column "):
        read(tmp_path, "afqmc", "train")
    write_lines(path, [good, dict(good, label="2")])
    with pytest.raises(glue.GlueDataError, match=rf"{path}:2: label '2' is not one of 0, 1 "
                                                 r"\(task afqmc\)"):
        read(tmp_path, "afqmc", "train")
    write_lines(tmp_path / "tnews" / "train.json", [{"sentence": "新闻", "label": 105}])
    with pytest.raises(glue.GlueDataError, match=r"train.json:1: label '105' is not one of "
                                                 r"100, 101, 102, 103, 104, 106, .*116"):
        read(tmp_path, "tnews", "train")
    write_lines(path, [{"sentence1": "一", "label": "1"}])
    with pytest.raises(glue.GlueDataError, match=rf"{path}:1: no field 'sentence2' \(task "
                                                 r"afqmc; the line has label, sentence1\)"):
        read(tmp_path, "afqmc", "train")
    write_lines(path, [["not", "an", "object"]])
    with pytest.raises(glue.GlueDataError, match=rf"{path}:1: expected a JSON object, found list"):
        read(tmp_path, "afqmc", "train")
    write_lines(tmp_path / "csl" / "train.json", [{"abst": "摘要", "keyword": "关键词",
                                                   "label": "0"}])
    with pytest.raises(glue.GlueDataError, match=r"train.json:1: 'keyword' must be a list of "
                                                 r"strings \(task csl\)"):
        read(tmp_path, "csl", "train")
    (tmp_path / "ocnli").mkdir()
    (tmp_path / "ocnli" / "dev.json").write_bytes(b'{"sentence1": "\xff"}\n')
    with pytest.raises(glue.GlueDataError, match=r"ocnli/dev.json:1: not valid UTF-8"):
        read(tmp_path, "ocnli", "dev")
    write_lines(tmp_path / "iflytek" / "labels.json", [{"label": "0"}, {"label": "0"}])
    with pytest.raises(glue.GlueDataError, match=r"labels.json:2: label '0' is listed twice"):
        clue.task_labels(clue.TASKS["iflytek"], str(tmp_path / "iflytek"))


def test_submission_file_format_and_ids(tmp_path):
    task = clue.TASKS["tnews"]
    examples = [glue.InputExample("7", "a", example_id=7),
                glue.InputExample("x-1", "b", example_id="x-1"),
                glue.InputExample("2", "c")]  # no id in the file: the guid (record index)
    name = clue.write_submission(str(tmp_path), task, examples, ["115", "100", "116"])
    assert name == "tnews_predict.json"
    assert (tmp_path / name).read_text(encoding="utf-8") == (
        '{"id": 7, "label": "115"}\n{"id": "x-1", "label": "100"}\n'
        '{"id": "2", "label": "116"}\n')
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tnews_predict.json"]  # no temp left
    with pytest.raises(ValueError, match="3 examples but 2 predictions"):
        clue.write_submission(str(tmp_path), task, examples, ["1", "2"])


def test_iflytek_test_ids_default_to_the_record_index(clue_dir):
    test = read(clue_dir, "iflytek", "test")
    assert [(e.guid, e.example_id) for e in test] == [(str(i), i) for i in range(10)]


# --- the fine-tuning job ------------------------------------------------------------------------


def glue_options(chinese, data_dir, output_dir, task_name, **finetune):
    from albert_tf.config import AlbertConfig
    from albert_tf.finetuning import FinetuningOptions
    from albert_tf.tasks.classification.job import ClassificationOptions

    values = dict(do_train=True, do_eval=True, do_predict=True, train_batch_size=8,
                  learning_rate=1e-3, train_step=2, warmup_step=0, save_checkpoints_steps=2,
                  iterations_per_loop=2, seed=5)
    values.update(finetune)
    return ClassificationOptions(task_name=task_name, data_dir=str(data_dir),
                       vocab_file=str(chinese / "vocab" / "vocab_chinese.txt"),
                       albert_config=AlbertConfig.from_dict(CONFIG), max_seq_length=48,
                       eval_batch_size=8, predict_batch_size=4,
                       finetuning=FinetuningOptions(output_dir=str(output_dir), **values))


def check_predictions(out, name, test_examples, labels):
    """The CLUE submission agrees with test_results.tsv and submit_results.tsv."""
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t", ndmin=2)
    assert probabilities.shape == (len(test_examples), len(labels))
    submission = read_lines(out / f"{name}_predict.json")
    assert [r["id"] for r in submission] == [e.example_id for e in test_examples]
    predicted = [labels[i] for i in probabilities.argmax(axis=1)]
    assert [r["label"] for r in submission] == predicted
    assert all(isinstance(r["label"], str) and set(r) == {"id", "label"} for r in submission)
    submit = (out / "submit_results.tsv").read_text(encoding="utf-8").splitlines()
    assert submit[1:] == [f"{e.guid}\t{p}" for e, p in zip(test_examples, predicted)]
    return probabilities, predicted


@pytest.mark.slow  # tnews 10 s, the other four ~21 s
@pytest.mark.parametrize("name", ["tnews", "iflytek", "ocnli", "cmnli", "csl"])
def test_finetune_evaluate_predict_each_task(chinese, clue_dir, tmp_path, name):
    from albert_tf.tasks.classification.job import run_glue

    options = glue_options(chinese, clue_dir, tmp_path, name)
    options.export_dir = str(tmp_path / "export")
    results = run_glue(options)
    task = clue.TASKS[name]
    labels, _ = clue.task_labels(task, str(clue_dir / name))
    dev = read(clue_dir, name, "dev")
    assert results["eval"]["eval_examples"] == len(dev)
    assert (tmp_path / "model.ckpt-best.index").exists()
    assert sorted(p.name for p in tmp_path.glob("*.tsv")) == ["submit_results.tsv",
                                                              "test_results.tsv"]
    test = read(clue_dir, name, "test")
    probabilities, predicted = check_predictions(tmp_path, name, test, labels)
    # The SavedModel serves the raw Chinese texts (in-graph WordPiece) as Python predicted.
    import tensorflow as tf
    serve = tf.saved_model.load(results["export_dir"]).signatures["serving_default"]
    texts = {"text_a": tf.constant([e.text_a for e in test])}
    if task.text_b:
        texts["text_b"] = tf.constant([e.text_b for e in test])
    assert set(serve.structured_input_signature[1]) == set(texts)
    served = serve(**texts)
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-5)
    assert [p.decode() for p in served["predictions"].numpy()] == predicted


@pytest.mark.slow  # 6 s
def test_chnsenticorp_tsv_through_the_custom_task(chinese, tmp_path):
    """ChnSentiCorp's `text<TAB>label` .txt files, no header: --task_name=custom
    --text_a_column=0 --label_column=1 --nohas_header."""
    from albert_tf.tasks.classification.job import run_glue

    lines = (chinese / "chnsenticorp" / "dev.txt").read_text(encoding="utf-8").splitlines()
    data = tmp_path / "data"
    data.mkdir()
    for split, rows in (("train", lines[:40]), ("dev", lines[40:64]), ("test", lines[64:72])):
        (data / f"{split}.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    custom = glue.CustomTaskOptions(text_a_column="0", label_column="1", has_header=False)
    dev = glue.read_custom_examples(custom, str(data), "dev", ["0", "1"])
    assert [(e.text_a, e.label) for e in dev] == [tuple(l.split("\t")) for l in lines[40:64]]
    whole = glue.read_custom_examples(custom, str(chinese / "chnsenticorp"), "dev")
    assert len(whole) == 1200 and {e.label for e in whole} == {"0", "1"}
    assert glue.custom_labels(custom, str(data)) == ["0", "1"]

    options = glue_options(chinese, data, tmp_path / "out", "custom")
    options.custom = custom
    results = run_glue(options)
    assert results["eval"]["eval_examples"] == 24
    submit = (tmp_path / "out" / "submit_results.tsv").read_text().splitlines()
    assert len(submit) == 9 and {l.split("\t")[1] for l in submit[1:]} <= {"0", "1"}


@pytest.mark.parametrize("change, message", [
    ({"vocab_file": "/no/vocab.txt"}, "--vocab_file '/no/vocab.txt' does not exist"),
    ({"vocab_file": None}, r"give --spm_model_file \(SentencePiece\) or --vocab_file "
                           r"\(WordPiece\)"),
    ({"task_name": "clue"}, "--task_name 'clue' is not one of .* afqmc, cmnli, csl, iflytek, "
                            r"ocnli, tnews \(CLUE\), goemotions \(multi-label\) or custom"),
])
def test_option_errors_name_the_flag(chinese, clue_dir, tmp_path, change, message):
    from albert_tf.tasks.classification.job import run_glue

    options = glue_options(chinese, clue_dir, tmp_path, "afqmc")
    for key, value in change.items():
        setattr(options, key, value)
    with pytest.raises(ValueError, match=message):
        run_glue(options)


def test_sentencepiece_wins_when_both_vocabularies_are_given(chinese, shared_data, tmp_path):
    from albert_tf.tasks.classification import job as glue_job

    spm = shared_data / "spm_official" / "30k-clean.model"
    if not spm.exists():
        pytest.skip(f"{spm} not found")
    options = glue_options(chinese, tmp_path, tmp_path, "afqmc")
    assert glue_job.load_tokenizer(options).kind == "wordpiece"
    options.spm_model_file = str(spm)
    tokenizer = glue_job.load_tokenizer(options)
    assert (tokenizer.kind, tokenizer.vocab_size) == ("sentencepiece", 30000)
    # As in the original, the vocabulary file is then not read at all, so it need not exist.
    options.vocab_file = str(tmp_path / "no_such_vocab.txt")
    options.validate(1)
    assert glue_job.load_tokenizer(options).kind == "sentencepiece"
    options.spm_model_file = None
    with pytest.raises(ValueError, match="--vocab_file .*no_such_vocab.txt' does not exist"):
        options.validate(1)


def test_init_checkpoint_of_another_vocabulary_is_an_error(chinese, clue_dir, tmp_path):
    """An English checkpoint (30,000 embeddings) with the Chinese vocabulary and a config
    edited to 21,128 is stopped before training, naming all three sizes."""
    from albert_tf import checkpoints
    from albert_tf.config import AlbertConfig
    from albert_tf.modeling.models import AlbertPretrainer
    from albert_tf.tasks.classification.job import run_glue

    english = AlbertPretrainer(AlbertConfig.from_dict(dict(CONFIG, vocab_size=30000)))
    english({"input_ids": np.zeros((1, 4), np.int32),
             "masked_lm_positions": np.zeros((1, 1), np.int32)})
    prefix = checkpoints.save_tf1_checkpoint(english, str(tmp_path / "english" / "model.ckpt"))
    options = glue_options(chinese, clue_dir, tmp_path / "out", "afqmc")
    options.init_checkpoint = prefix
    with pytest.raises(ValueError, match=r"vocabulary sizes differ: the vocabulary .*"
                       r"vocab_chinese.txt has 21128 tokens; the config --albert_config_file has "
                       r"21128 vocab_size; the checkpoint .*model.ckpt has 30000 rows"):
        run_glue(options)
    assert not (tmp_path / "out" / "checkpoints").exists()


@pytest.mark.parametrize("config_vocab", [21000, 30000])
def test_vocabulary_of_another_size_than_the_config_is_an_error(chinese, clue_dir, tmp_path,
                                                                config_vocab):
    from albert_tf.config import AlbertConfig
    from albert_tf.tasks.classification.job import run_glue

    options = glue_options(chinese, clue_dir, tmp_path, "afqmc")
    options.albert_config = AlbertConfig.from_dict(dict(CONFIG, vocab_size=config_vocab))
    with pytest.raises(ValueError, match=r"vocabulary sizes differ: the vocabulary "
                       r".*vocab_chinese.txt has 21128 tokens; the config --albert_config_file "
                       rf"has {config_vocab} vocab_size"):
        run_glue(options)


# --- run_classifier.py end to end, and the SavedModel in a TensorFlow-only process --------------

LOADER = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401
pairs = json.loads(sys.argv[2])
loaded = tf.saved_model.load(sys.argv[1])
out = loaded.signatures["serving_default"](text_a=tf.constant([a for a, _ in pairs]),
                                           text_b=tf.constant([b for _, b in pairs]))
print("RESULT" + json.dumps({
    "probabilities": out["probabilities"].numpy().tolist(),
    "predictions": [p.decode("utf-8") for p in out["predictions"].numpy()],
    "albert_tf": any(m.startswith("albert_tf") for m in sys.modules)}))
"""


@pytest.mark.slow  # ~16s: keeps the default suite under 10 minutes on slower CPUs (11 min on a Zen 4)
def test_run_classifier_afqmc_with_vocab_file_and_raw_text_serving(chinese, clue_dir, tmp_path):
    data = tmp_path / "data"
    (data / "afqmc").mkdir(parents=True)
    for split in ("train", "dev"):
        (data / "afqmc" / f"{split}.json").write_bytes(
            (clue_dir / "afqmc" / f"{split}.json").read_bytes())
    test = read_lines(clue_dir / "afqmc" / "test.json")
    # Mixed Chinese / English / full-width text, accents and extra spaces: normalisation and
    # WordPiece in the graph must give the Python ids.
    test[0] = {"id": 1000, "sentence1": "  ＡＬＢＥＲＴ 模型 Café，RÉSUMÉ！  ",
               "sentence2": "花呗\t能 用于 uber 吗？ １２３"}
    write_lines(data / "afqmc" / "test.json", test)
    config = tmp_path / "albert_config.json"
    config.write_text(json.dumps(CONFIG))
    out = tmp_path / "run"
    args = {"task_name": "afqmc", "data_dir": data, "albert_config_file": config,
            "vocab_file": chinese / "vocab" / "vocab_chinese.txt", "output_dir": out,
            "export_dir": out / "export", "max_seq_length": 40, "train_batch_size": 8,
            "eval_batch_size": 8, "predict_batch_size": 4, "learning_rate": 1e-3,
            "train_step": 6, "save_checkpoints_steps": 3, "iterations_per_loop": 3, "seed": 2}
    argv = [f"--{k}={v}" for k, v in args.items()] + ["--do_train", "--do_eval", "--do_predict"]
    done = subprocess.run([sys.executable, str(REPO_ROOT / "run_classifier.py")] + argv,
                          capture_output=True, text=True, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    evals = (out / "eval_results.txt").read_text()
    assert [l for l in evals.splitlines() if l.startswith("global_step")] == [
        "global_step = 3", "global_step = 6"]
    assert "eval_accuracy = " in evals
    test_examples = read(data, "afqmc", "test")
    assert test_examples[0].example_id == 1000
    probabilities, predicted = check_predictions(out, "afqmc", test_examples, ["0", "1"])

    # The export's in-graph WordPiece + packing gives exactly the Python features.
    import tensorflow as tf
    from albert_tf import export, tokenization
    vocab = str(chinese / "vocab" / "vocab_chinese.txt")
    graph = tokenization.in_graph_tokenizer(vocab_file=vocab)
    features = glue.convert_examples(test_examples, tokenization.load_tokenizer(vocab_file=vocab),
                                     40, ["0", "1"])
    packed = export.pack_pair(graph(tf.constant([e.text_a for e in test_examples])),
                              graph(tf.constant([e.text_b for e in test_examples])), 40,
                              graph.cls_id, graph.sep_id, max(graph.pad_id, 0))
    for name in export.TOKEN_FEATURES:
        np.testing.assert_array_equal(packed[name].numpy(), features[name])
    # The original's BasicTokenizer: lower-cased, accents stripped, CJK characters split,
    # full-width letters kept full-width (no NFKC).
    assert features["input_ids"][0][:16].tolist() == [101] + tokenization.load_tokenizer(
        vocab_file=vocab).convert_tokens_to_ids(
            ["ａ", "##ｌ", "##ｂ", "##ｅ", "##ｒ", "##ｔ", "模", "型", "cafe", "，", "re", "##su",
             "##me", "！"]) + [102]

    pairs = [[e.text_a, e.text_b] for e in test_examples]
    served = subprocess.run([sys.executable, "-c", LOADER, str(out / "export"),
                             json.dumps(pairs)], capture_output=True, text=True, cwd="/",
                            env={"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"})
    assert served.returncode == 0, served.stderr[-3000:]
    result = json.loads([l for l in served.stdout.splitlines()
                         if l.startswith("RESULT")][-1][len("RESULT"):])
    assert result["albert_tf"] is False
    np.testing.assert_allclose(result["probabilities"], probabilities, atol=1e-5)
    assert result["predictions"] == predicted


@pytest.mark.slow
def test_run_classifier_cli_flag_errors(chinese, clue_dir, tmp_path):
    base = [sys.executable, str(REPO_ROOT / "run_classifier.py"), "--task_name=afqmc",
            f"--data_dir={clue_dir}", f"--output_dir={tmp_path}", "--do_train",
            f"--albert_config_file={tmp_path / 'c.json'}"]
    (tmp_path / "c.json").write_text(json.dumps(CONFIG))
    neither = subprocess.run(base, capture_output=True, text=True, cwd=REPO_ROOT)
    assert neither.returncode != 0
    assert "--spm_model_file (SentencePiece) or --vocab_file (WordPiece) is required" in \
        neither.stderr
    missing = subprocess.run(base + ["--vocab_file=/no/vocab.txt"], capture_output=True,
                             text=True, cwd=REPO_ROOT)
    assert "--vocab_file '/no/vocab.txt' does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr
