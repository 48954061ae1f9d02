"""run_ner.py end to end with a tiny model on slices of the shared NER samples.

Data directories are assembled in a temporary directory from ../shared/data/ner (nothing
is copied into the repository): CoNLL-2003 (IOB1, -DOCSTART- lines kept), MSRA (BIO,
one character per line) and CLUENER2020 (JSON lines, a test.json without labels, with
CLUE's integer ids). Each run trains, evaluates every checkpoint, keeps the best by
entity F1 and predicts with it; the checks read what it wrote: eval_results.txt,
labels.txt, the predictions file in the data's own format and scheme, the TF1
checkpoint, and `python -m albert_tf.tasks.tagging evaluate` on the predictions. The
CRF and constrained-decoding checks decode the feature caches with model.ckpt-best in
this process and look at every window's raw tag sequence, before any repair.

Bad input through the CLI: one `run_ner.py: error:` line, exit status 2, and nothing
written. The default suite runs two trainings (CoNLL-2003 softmax, CLUENER CRF) and the
cheap refusals; the rest is `slow`.
"""
import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from albert_tf.config import AlbertConfig
from albert_tf.tasks.tagging import readers, schemes
from tests.conftest import REPO_ROOT
from tests.cli.test_errors import assert_user_error

CONFIG = {"vocab_size": 8000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 1,
          "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}
CHINESE_CONFIG = dict(CONFIG, vocab_size=21128)  # the Chinese WordPiece vocabulary
MAX_SEQ_LENGTH = 48
CONLL_LABELS = ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
CLUENER_TYPES = ["address", "book", "company", "game", "government", "movie", "name",
                 "organization", "position", "scene"]
DOCSTART = "-DOCSTART- -X- O O\n\n"
# A test line of our own: spaces (characters without sub-tokens, predicted O) and Latin text.
EXTRA_CLUENER_TEXT = "据悉 Universal Pictures 已在北京 发布"


def blocks_of(path):
    """The sentences (blank-line separated blocks) of a column file, -DOCSTART- dropped."""
    text = pathlib.Path(path).read_text(encoding="utf-8")
    return [b.strip("\n") for b in text.split("\n\n")
            if b.strip() and not b.strip().startswith("-DOCSTART-")]


def write_blocks(path, blocks, header=""):
    path.write_text(header + "".join(block + "\n\n" for block in blocks), encoding="utf-8")


@pytest.fixture(scope="module")
def setup(shared_data, spm_model, chinese_vocab_file, tmp_path_factory):
    root = tmp_path_factory.mktemp("ner_cli")
    ner = shared_data / "ner"
    for path in ("conll2003/eng.train", "msra/train.txt", "cluener/train.json"):
        if not (ner / path).exists():
            pytest.skip(f"{ner / path} not found (shared NER samples)")

    conll = blocks_of(ner / "conll2003" / "eng.train")
    (root / "conll2003").mkdir()
    write_blocks(root / "conll2003" / "eng.train", conll[:120], DOCSTART)
    write_blocks(root / "conll2003" / "eng.testa", conll[120:160], DOCSTART)
    write_blocks(root / "conll2003" / "eng.testb", conll[160:200], DOCSTART)

    msra = blocks_of(ner / "msra" / "train.txt")
    (root / "msra").mkdir()
    write_blocks(root / "msra" / "train.txt", msra[:150])
    write_blocks(root / "msra" / "dev.txt", msra[150:190])
    write_blocks(root / "msra" / "test.txt", msra[190:230])

    lines = (ner / "cluener" / "train.json").read_text(encoding="utf-8").split("\n")
    (root / "cluener").mkdir()
    (root / "cluener" / "train.json").write_text("\n".join(lines[:200]) + "\n", "utf-8")
    (root / "cluener" / "dev.json").write_text("\n".join(lines[200:260]) + "\n", "utf-8")
    texts = [json.loads(line)["text"] for line in lines[260:290]] + [EXTRA_CLUENER_TEXT]
    (root / "cluener" / "test.json").write_text("".join(
        json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n"
        for i, t in enumerate(texts)), "utf-8")

    AlbertConfig.from_dict(CONFIG).to_json_file(str(root / "albert_config.json"))
    AlbertConfig.from_dict(CHINESE_CONFIG).to_json_file(str(root / "albert_config_zh.json"))
    return {"root": root, "spm": spm_model, "vocab": chinese_vocab_file,
            "test_texts": texts}


def run_cli(setup, task, output_dir, data_dir=None, **extra):
    """run_ner.py in a subprocess with the tiny model and small windows."""
    chinese = task in ("cluener", "msra")
    args = {"task_name": task, "data_dir": data_dir or setup["root"] / task,
            "albert_config_file": setup["root"] / ("albert_config_zh.json" if chinese
                                                   else "albert_config.json"),
            "output_dir": output_dir, "do_train": True, "do_eval": True, "do_predict": True,
            "max_seq_length": MAX_SEQ_LENGTH, "doc_stride": 16, "train_batch_size": 16,
            "eval_batch_size": 16, "predict_batch_size": 16, "learning_rate": 3e-3,
            "train_step": 20, "save_checkpoints_steps": 10, "seed": 1}
    args["vocab_file" if chinese else "spm_model_file"] = setup["vocab" if chinese else "spm"]
    args.update(extra)
    argv = [f"--{k}" if v is True else f"--no{k}" if v is False else f"--{k}={v}"
            for k, v in args.items() if v is not None]
    return subprocess.run([sys.executable, str(REPO_ROOT / "run_ner.py")] + argv,
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=600,
                          check=False, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def evaluate_cli(task, data_file, prediction_file):
    done = subprocess.run([sys.executable, "-m", "albert_tf.tasks.tagging", "evaluate",
                           "--task_name", task, "--data_file", str(data_file),
                           "--prediction_file", str(prediction_file)],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120,
                          check=False, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def eval_blocks(path):
    """eval_results.txt as one dict per evaluation (`key = value` lines, keys sorted)."""
    from albert_tf.training import best_checkpoint

    blocks = [{}]
    for line in pathlib.Path(path).read_text().splitlines():
        key, value = line.split(" = ")
        if key in blocks[-1]:
            blocks.append({})
        blocks[-1][key] = best_checkpoint.parse_value(value)
    return blocks


def predictions_txt(path):
    """predictions.txt as sentences of (word, gold, predicted); checks the layout."""
    text = pathlib.Path(path).read_text(encoding="utf-8")
    assert text.endswith("\n\n") and "\n\n\n" not in text and "-DOCSTART-" not in text
    sentences = [[tuple(line.split(" ")) for line in block.split("\n")]
                 for block in text[:-2].split("\n\n")]
    assert all(len(fields) == 3 for sentence in sentences for fields in sentence)
    return sentences


def assert_same_scores(evaluated, results):
    """The evaluate CLI's figures against predict_results.json's (flat per-type keys)."""
    for key in ("precision", "recall", "f1", "token_accuracy"):
        assert evaluated[key] == results[key], key
    for kind, row in evaluated["per_type"].items():
        for name in ("precision", "recall", "f1"):
            assert row[name] == results[f"{name}_{kind}"], (kind, name)


def assert_column_predictions(out, task, data_file, file_scheme):
    """predictions.txt repeats every word of the data file once, in order, with its gold
    tag as written, and a predicted tag valid in the file's own scheme (and in IOB2 once
    converted); the evaluate CLI gives predict_results.json's figures, and so does
    seqeval on the file's two tag columns."""
    written = predictions_txt(out / "predictions.txt")
    gold_file = blocks_of(data_file)
    assert len(written) == len(gold_file)
    for sentence, block in zip(written, gold_file):
        lines = [line.split() for line in block.split("\n")]
        assert [(w, g) for w, g, _ in sentence] == [(f[0], f[-1]) for f in lines]
        predicted = [p for _, _, p in sentence]
        assert schemes.is_valid(predicted, file_scheme), predicted
        assert schemes.is_valid(schemes.to_iob2(predicted, file_scheme), "iob2")
    results = json.loads((out / "predict_results.json").read_text())
    evaluated = evaluate_cli(task, data_file, out / "predictions.txt")
    assert_same_scores(evaluated, results)
    seqeval = pytest.importorskip("seqeval.metrics")
    gold = [[g for _, g, _ in s] for s in written]
    assert seqeval.f1_score(gold, [[p for _, _, p in s] for s in written]) == results["f1"]
    return evaluated, written


def decode_windows(out, task, split, labels, scheme, use_crf, config, constrain=True):
    """Decodes the run's feature cache of `split` with model.ckpt-best in this process:
    (the cache's arrays, predicted label ids [windows, S])."""
    import tensorflow as tf

    from albert_tf import checkpoints
    from albert_tf.modeling.token_classifier import AlbertTokenClassifier
    from albert_tf.tasks.tagging import features

    model = AlbertTokenClassifier(
        AlbertConfig.from_dict(config), num_labels=len(labels), use_crf=use_crf,
        allowed=schemes.allowed_transitions(labels, scheme) if constrain else None)
    model.build()
    checkpoints.load_tf1_checkpoint(model, str(out / "model.ckpt-best"))
    arrays = features.read_feature_arrays(str(out / f"{task}_{split}_s{MAX_SEQ_LENGTH}"
                                                    ".tf_record"), MAX_SEQ_LENGTH)
    inputs = {name: tf.constant(arrays[name], tf.int32)
              for name in ("input_ids", "input_mask", "segment_ids")}
    inputs["word_mask"] = tf.constant((arrays["word_index"] >= 0).astype(np.int32))
    return arrays, model(inputs, training=False)["predictions"].numpy()


def window_tags(arrays, predicted, labels):
    """Each window's decoded tags at its word starts, in order."""
    return [[labels[predicted[row, p]] for p in np.nonzero(arrays["word_index"][row] >= 0)[0]]
            for row in range(len(predicted))]


def merged_iob2(arrays, predicted, labels, scheme, sentences):
    """Per sentence, the job's tags: each word from its max-context window, in IOB2."""
    from albert_tf.tasks.tagging import features

    ids = features.merge_predictions(arrays, predicted, [len(s.words) for s in sentences],
                                     labels.index("O"))
    return [schemes.repair(schemes.convert([labels[i] for i in row], scheme, "iob2"),
                           "iob2")[0] for row in ids]


def read_lines(path):
    return pathlib.Path(path).read_text().split("\n")[:-1]


# --- default suite: two trainings -----------------------------------------------------

@pytest.mark.slow  # 13 s
def test_conll2003_softmax_train_eval_predict_score(setup, tmp_path):
    out = tmp_path / "conll"
    data = setup["root"] / "conll2003"
    done = run_cli(setup, "conll2003", out, train_step=300, save_checkpoints_steps=150)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{data / 'eng.train'}: 120 sentences, tags read as iob1" in done.stderr
    split = re.search(r"tagging conversion: 120 sentences .*\((\d+) sentences split",
                      done.stderr)
    assert split and int(split.group(1)) > 0  # long sentences in several windows

    blocks = eval_blocks(out / "eval_results.txt")
    assert [b["global_step"] for b in blocks] == [150, 300]
    for block in blocks:
        assert block["eval_examples"] == 40
        assert {"precision", "recall", "f1", "token_accuracy"} <= set(block)
        for kind in ("LOC", "MISC", "ORG", "PER"):  # every type of the dev gold
            assert {f"precision_{kind}", f"recall_{kind}", f"f1_{kind}"} <= set(block)
        assert isinstance(block["collapsed"], bool)
    best = json.loads((out / "best_eval.json").read_text())
    assert best["f1"] == max(b["f1"] for b in blocks)
    assert best["collapsed"] is False  # the best weights predict entities
    assert (out / "model.ckpt-best.index").exists()
    assert read_lines(out / "labels.txt") == CONLL_LABELS
    record = json.loads((out / "albert_tf_run.json").read_text())
    assert record["details"]["tag_scheme"] == "iob2" and record["details"]["use_crf"] is False

    # eng.testb, predicted in IOB1 as the file is, every word once and in order.
    evaluated, written = assert_column_predictions(out, "conll2003", data / "eng.testb",
                                                   "iob1")
    assert evaluated["support"] > 0 and evaluated["predicted"] > 0  # a non-trivial test
    assert sum(len(s) for s in written) == 763


@pytest.mark.slow  # ~39 s: the CoNLL-2003 end-to-end test stays in the default suite
def test_cluener_crf_submission_file_and_constrained_viterbi(setup, tmp_path):
    out = tmp_path / "cluener"
    done = run_cli(setup, "cluener", out, use_crf=True, train_step=100,
                   save_checkpoints_steps=50, export_dir=out / "export",
                   export_format="saved_model,onnx,tflite", export_int8=True)
    assert done.returncode == 0, done.stderr[-3000:]
    labels = read_lines(out / "labels.txt")
    assert labels == ["O"] + [f"{p}-{t}" for t in CLUENER_TYPES for p in "BI"]
    dev_types = {t.split("-", 1)[1] for s in readers.read_sentences(
        "cluener", str(setup["root"] / "cluener" / "dev.json")) for t in s.tags if t != "O"}
    for block in eval_blocks(out / "eval_results.txt"):
        assert {"precision", "recall", "f1"} <= set(block)
        assert {f"f1_{kind}" for kind in dev_types} <= set(block)
    assert not (out / "predict_results.json").exists()  # test.json has no labels
    assert json.loads((out / "albert_tf_run.json").read_text())["details"]["use_crf"] is True

    # The CRF's tables are in the TF1 checkpoint, beside the classifier's.
    import tensorflow as tf
    shapes = tf.train.load_checkpoint(str(out / "model.ckpt-best")).get_variable_to_shape_map()
    assert shapes["crf/transitions"] == [21, 21]
    assert shapes["crf/start_transitions"] == shapes["crf/end_transitions"] == [21]
    assert shapes["output_weights"] == [21, 32] and shapes["output_bias"] == [21]

    # cluener_predict.json: CLUE's submission lines, one per test line, in order.
    texts = setup["test_texts"]
    submission = [json.loads(line) for line in read_lines(out / "cluener_predict.json")]
    assert len(submission) == len(texts) == 31
    found = []
    for index, (record, text) in enumerate(zip(submission, texts)):
        assert set(record) == {"id", "label"}
        assert record["id"] == index  # test.json's integer ids, as CLUE's baseline writes them
        spans = sorted((start, end, kind, entity) for kind, entities in record["label"].items()
                       for entity, places in entities.items() for start, end in places)
        for (start, end, kind, entity), following in zip(spans, spans[1:] + [None]):
            assert kind in CLUENER_TYPES and text[start:end + 1] == entity  # inclusive end
            assert following is None or following[0] > end  # flat: no overlaps
        found.append([(kind, start, end + 1) for start, end, kind, _ in spans])
    assert any(found)

    # Viterbi under IOB2's constraints: every window's raw decoding is valid, and the
    # words merged from their max-context windows are what the submission holds.
    sentences = list(readers.read_sentences("cluener", str(setup["root"] / "cluener" /
                                                           "test.json")))
    arrays, predicted = decode_windows(out, "cluener", "test", labels, "iob2", True,
                                       CHINESE_CONFIG)
    assert len(predicted) > len(sentences)  # some sentences span two windows
    assert all(schemes.is_valid(tags, "iob2") for tags in window_tags(arrays, predicted,
                                                                      labels))
    merged = merged_iob2(arrays, predicted, labels, "iob2", sentences)
    # model.tflite decodes the same tags, Viterbi included; the int8 files were checked
    # word by word on the dev windows.
    from albert_tf.export.litert_runtime import LiteRTModel
    lite = LiteRTModel(str(out / "export" / "model.tflite"))
    feeds = {name: arrays[name].astype(np.int32) for name in ("input_ids", "input_mask",
                                                               "segment_ids")}
    feeds["word_mask"] = (arrays["word_index"] >= 0).astype(np.int32)
    np.testing.assert_array_equal(lite.run_batches(feeds, 16, ["predictions"])["predictions"],
                                  predicted)
    assert lite.metadata["use_crf"] is True and lite.metadata["labels"] == labels
    assert re.search(r"model\.int8\.tflite (predicts as|agrees with) model\.tflite on "
                     r"[\d.]+% of \d+ (values|predictions)", done.stderr)
    assert [sorted(schemes.entities(tags), key=lambda e: e.start) for tags in merged] == [
        sorted([schemes.Entity(*e) for e in f], key=lambda e: e.start) for f in found]
    # The spaces of the extra line have no sub-token: never inside an entity.
    last = sentences[-1]
    spaces = [i for i, word in enumerate(last.words) if word == " "]
    assert spaces and all(merged[-1][i] == "O" for i in spaces)

    # The exported SavedModel finds, from the raw texts, the entities of the submission.
    import tensorflow_text  # noqa: F401  (registers the tokenizers' ops for loading)

    assert (out / "export" / "model.onnx").exists()
    served = tf.saved_model.load(str(out / "export")).signatures["serving_default"](
        text=tf.constant(texts))
    for row, want in enumerate(found):
        count = int(served["num_entities"][row])
        got = [(served["entity_type"][row, k].numpy().decode(), int(served["start"][row, k]),
                int(served["end"][row, k])) for k in range(count)]
        assert sorted(got, key=lambda e: e[1]) == sorted(want, key=lambda e: e[1]), row


# --- default suite: refusals (one line, exit 2, nothing written) ---------------------

def test_doc_stride_default_follows_max_seq_length(setup, tmp_path):
    """--max_seq_length 48 without --doc_stride: the default (64, which does not fit a
    46-token window) becomes half the window, and the run goes on to the next check."""
    done = run_cli(setup, "conll2003", tmp_path / "out", doc_stride=None,
                   gradient_accumulation_steps=3)
    assert "--doc_stride 23 (its default follows --max_seq_length 48" in done.stderr, (
        done.stderr[-3000:])
    assert_user_error(done, "run_ner.py", "--train_batch_size 16 must be divisible")


@pytest.mark.slow  # 14 s
def test_flag_refusals(setup, tmp_path):
    out = tmp_path / "out"
    assert_user_error(run_cli(setup, "conll2003", out, tag_scheme="iob1"), "run_ner.py",
                      "--tag_scheme=iob1", "iob2|bio|bioes|iobes")
    assert_user_error(run_cli(setup, "conll2003", out, doc_stride=64), "run_ner.py",
                      f"--doc_stride 64 must be in [1, --max_seq_length - 2 = 46] "
                      f"(--max_seq_length {MAX_SEQ_LENGTH})")
    assert_user_error(run_cli(setup, "conll2003", out, token_column=0), "run_ner.py",
                      "--token_column, --label_column and --delimiter are for "
                      "--task_name=custom")
    assert not out.exists()


def test_unknown_dev_label_names_file_and_line(setup, tmp_path):
    data = tmp_path / "conll"
    data.mkdir()
    for name in ("eng.train", "eng.testb"):
        (data / name).write_bytes((setup["root"] / "conll2003" / name).read_bytes())
    lines = (setup["root"] / "conll2003" / "eng.testa").read_text().split("\n")
    where = [i for i, line in enumerate(lines) if not line][3] + 1  # the 4th sentence's start
    lines.insert(where, "Foo NNP I-NP B-FOO")
    (data / "eng.testa").write_text("\n".join(lines))
    out = tmp_path / "out"
    assert_user_error(run_cli(setup, "conll2003", out, data_dir=data), "run_ner.py",
                      f"{data / 'eng.testa'}:{where + 1}: label B-FOO is not one of the "
                      "training labels (O, B-LOC, I-LOC")
    assert not (out / "model.ckpt-best.index").exists() and not out.exists()


# --- slow -------------------------------------------------------------------------------

@pytest.mark.slow
def test_rerun_resumes_and_reuses_the_caches(setup, tmp_path):
    out = tmp_path / "conll"
    first = run_cli(setup, "conll2003", out)
    assert first.returncode == 0, first.stderr[-3000:]
    predictions = (out / "predictions.txt").read_text()
    caches = sorted(p.name for p in out.glob("*.tf_record"))
    assert caches == [f"conll2003_{split}_s48.tf_record" for split in ("dev", "test", "train")]
    again = run_cli(setup, "conll2003", out)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr.count("reusing cached features") == 3
    assert "rebuilding" not in again.stderr
    assert f"resumed from {out / 'checkpoints' / 'ckpt-20'} at step 20" in again.stderr
    assert (out / "predictions.txt").read_text() == predictions  # the same best weights
    assert sorted(p.name for p in out.glob("*.tf_record")) == caches


@pytest.mark.slow
@pytest.mark.parametrize("use_crf", [True, False], ids=["crf", "softmax"])
def test_msra_bioes(setup, tmp_path, use_crf):
    """Trained in BIOES (CRF, or softmax decoded by Viterbi under BIOES's constraints);
    the predictions are written in the file's BIO and scored as predict_results.json."""
    out = tmp_path / "msra"
    done = run_cli(setup, "msra", out, use_crf=use_crf, tag_scheme="bioes", train_step=100,
                   save_checkpoints_steps=50)
    assert done.returncode == 0, done.stderr[-3000:]
    labels = read_lines(out / "labels.txt")
    assert labels == ["O"] + [f"{p}-{t}" for t in ("LOC", "ORG", "PER") for p in "BIES"]
    details = json.loads((out / "albert_tf_run.json").read_text())["details"]
    assert details["tag_scheme"] == "bioes" and details["use_crf"] is use_crf
    for block in eval_blocks(out / "eval_results.txt"):
        assert {"f1", "f1_LOC", "f1_ORG", "f1_PER"} <= set(block)
    import tensorflow as tf
    shapes = tf.train.load_checkpoint(str(out / "model.ckpt-best")).get_variable_to_shape_map()
    assert ("crf/transitions" in shapes) is use_crf
    if use_crf:
        assert shapes["crf/transitions"] == [13, 13]

    data_file = setup["root"] / "msra" / "test.txt"
    _, written = assert_column_predictions(out, "msra", data_file, "iob2")
    assert not any(p[0] in "ES" for s in written for _, _, p in s)  # BIO, as the file

    sentences = list(readers.read_sentences("msra", str(data_file)))
    arrays, predicted = decode_windows(out, "msra", "test", labels, "bioes", use_crf,
                                       CHINESE_CONFIG)
    assert all(schemes.is_valid(tags, "bioes") for tags in window_tags(arrays, predicted,
                                                                       labels))
    merged = merged_iob2(arrays, predicted, labels, "bioes", sentences)
    assert merged == [[p for _, _, p in s] for s in written]
    if use_crf:  # the same weights decoded without the constraints break BIOES somewhere
        arrays, free = decode_windows(out, "msra", "test", labels, "bioes", True,
                                      CHINESE_CONFIG, constrain=False)
        assert not all(schemes.is_valid(tags, "bioes")
                       for tags in window_tags(arrays, free, labels))


@pytest.mark.slow
def test_msra_empty_tags_refused_then_skipped(setup, tmp_path):
    data = tmp_path / "msra"
    data.mkdir()
    for name in ("dev.txt", "test.txt"):
        (data / name).write_bytes((setup["root"] / "msra" / name).read_bytes())
    sentences = [block.split("\n") for block in blocks_of(setup["root"] / "msra" / "train.txt")]
    for index in (3, 10, 40):  # the full MSRA file's leftover markup: `0<TAB>`
        sentences[index].insert(2, "0\t")
    write_blocks(data / "train.txt", ["\n".join(s) for s in sentences])
    first_bad = read_lines(data / "train.txt").index("0\t") + 1

    out = tmp_path / "out"
    assert_user_error(run_cli(setup, "msra", out, data_dir=data), "run_ner.py",
                      f"{data / 'train.txt'}:{first_bad}: empty tag (3 such lines in this "
                      "file; --skip_bad_lines drops the sentences holding them)")
    assert not out.exists()

    done = run_cli(setup, "msra", out, data_dir=data, skip_bad_lines=True, do_predict=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (f"{data / 'train.txt'}: skipped 3 bad lines (3 empty tag), dropping the 3 "
            "sentences that held them") in done.stderr
    assert f"{data / 'train.txt'}: 147 sentences" in done.stderr
    assert (out / "model.ckpt-best.index").exists()
    assert [b["global_step"] for b in eval_blocks(out / "eval_results.txt")] == [10, 20]


@pytest.mark.slow
@pytest.mark.parametrize("labels", ["O,B-LOC,I-LOC,B-ORG,I-ORG,B-PER,I-PER,S-PER",
                                    "O,B-LOC,I-LOC,B-ORG,I-ORG,B-PER,I-PER,I-PER"],
                         ids=["other_scheme", "repeated"])
def test_bad_label_list_is_refused_before_anything_is_written(setup, tmp_path, labels):
    out = tmp_path / "out"
    done = run_cli(setup, "msra", out, labels=labels, do_eval=False, do_predict=False,
                   train_step=2, save_checkpoints_steps=2)
    assert_user_error(done, "run_ner.py", "--labels")
    assert not out.exists()
