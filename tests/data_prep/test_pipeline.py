"""End to end: data_prep.runner / pipeline on the shared corpus and on hand-made documents."""
import dataclasses
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from data_prep import pipeline, runner, tfrecord
from data_prep.masking import MaskingOptions
from data_prep.text_input import InputError, ReaderOptions

from tests.conftest import REPO_ROOT

REPO = str(REPO_ROOT)
SEQ, PRED = 128, 20
FEATURES = {"input_ids": ("int64_list", SEQ), "input_mask": ("int64_list", SEQ),
            "segment_ids": ("int64_list", SEQ), "token_boundary": ("int64_list", SEQ),
            "masked_lm_positions": ("int64_list", PRED), "masked_lm_ids": ("int64_list", PRED),
            "masked_lm_weights": ("float_list", PRED), "next_sentence_labels": ("int64_list", 1)}


@pytest.fixture(scope="module")
def corpus_files(shared_data):
    directory = shared_data / "corpus" / "gutenberg"
    return [str(directory / n) for n in ("pg972.txt", "pg14263.txt", "pg20170.txt",
                                         "pg20249.txt")]


def _options(spm_model, **overrides):
    layout = overrides.pop("layout", pipeline.LayoutOptions(block_documents=3))
    return runner.RunOptions(
        spm_model_file=spm_model, reader=ReaderOptions(input_format="raw"),
        instances=pipeline.InstanceOptions(max_seq_length=SEQ, dupe_factor=2,
                                           masking=MaskingOptions(max_predictions_per_seq=PRED)),
        layout=layout, **overrides)


def _run(files, outputs, options):
    return runner.create_pretraining_data(files, [str(o) for o in outputs], options,
                                          log=lambda message: None)


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, spm_model, corpus_files):
    out = tmp_path_factory.mktemp("dp") / "one.tfrecord"
    summary = _run(corpus_files, [out], _options(spm_model))
    return out, summary


def _decode(path):
    tf = pytest.importorskip("tensorflow")
    examples = []
    for payload in tfrecord.read_payloads(str(path)):
        example = tf.train.Example.FromString(payload)
        examples.append(example)
    return examples


def _arrays(examples):
    out = {}
    for name, (kind, _) in FEATURES.items():
        out[name] = np.array([list(getattr(e.features.feature[name], kind).value)
                              for e in examples])
    return out


def test_schema_matches_the_original(reference_run):
    tf = pytest.importorskip("tensorflow")
    path, summary = reference_run
    examples = _decode(path)
    assert len(examples) == summary["instances"] > 3000
    for example in examples[:200]:
        assert set(example.features.feature) == set(FEATURES)
        for name, (kind, length) in FEATURES.items():
            feature = example.features.feature[name]
            assert feature.WhichOneof("kind") == kind
            assert len(getattr(feature, kind).value) == length
    spec = {name: tf.io.FixedLenFeature([length], tf.float32 if kind == "float_list"
                                        else tf.int64)
            for name, (kind, length) in FEATURES.items()}
    dataset = tf.data.TFRecordDataset(str(path)).map(
        lambda record: tf.io.parse_single_example(record, spec))
    assert sum(1 for _ in dataset) == len(examples)


def test_instances_follow_the_original_rules(reference_run):
    path, summary = reference_run
    a = _arrays(_decode(path))
    lengths = a["input_mask"].sum(1)
    n = len(lengths)
    cols = np.arange(SEQ)[None, :]
    np.testing.assert_array_equal(a["input_mask"], (cols < lengths[:, None]).astype(int))
    assert (a["input_ids"][:, 0] == 2).all()                                     # [CLS]
    assert (a["input_ids"][np.arange(n), lengths - 1] == 3).all()                # last [SEP]
    seg_a_end = (a["segment_ids"] == 0).sum(1) - (SEQ - lengths)                 # len(A) + 2
    assert (a["input_ids"][np.arange(n), seg_a_end - 1] == 3).all()              # middle [SEP]
    np.testing.assert_array_equal(
        a["segment_ids"], ((cols >= seg_a_end[:, None]) & (cols < lengths[:, None])).astype(int))
    for column in (np.zeros(n, int), seg_a_end - 1, lengths - 1):
        assert (a["token_boundary"][np.arange(n), column] == 1).all()
    assert (a["input_ids"][cols >= lengths[:, None]] == 0).all()
    assert (a["token_boundary"][cols >= lengths[:, None]] == 0).all()

    counts = a["masked_lm_weights"].sum(1).astype(int)
    expected = np.array([min(PRED, max(1, int(round(x * 0.15)))) for x in lengths])
    np.testing.assert_array_equal(counts, expected)
    real = np.arange(PRED)[None, :] < counts[:, None]
    positions, labels = a["masked_lm_positions"], a["masked_lm_ids"]
    assert (positions[~real] == 0).all() and (labels[~real] == 0).all()
    for row in range(n):
        pos = positions[row, :counts[row]]
        assert (np.diff(pos) > 0).all()
        assert not set(pos) & {0, seg_a_end[row] - 1, lengths[row] - 1}     # specials never
    assert not np.isin(labels[real], [0, 2, 3, 4]).any()
    at = np.take_along_axis(a["input_ids"], positions, axis=1)[real]
    mask_frac = np.mean(at == 4)
    keep_frac = np.mean(at == labels[real])
    assert abs(mask_frac - 0.8) < 0.02 and abs(keep_frac - 0.1) < 0.02
    assert abs((1 - mask_frac - keep_frac) - 0.1) < 0.02

    labels_sop = a["next_sentence_labels"][:, 0]
    assert summary["sop_labels"]["1"] == int(labels_sop.sum())
    swapped = summary["sop_labels"]["1"] - summary["random_document_b"]
    assert abs(swapped / (n - summary["random_document_b"]) - 0.5) < 0.02
    for got, want in zip(summary["ngram_drawn_histogram"].values(), (6 / 11, 3 / 11, 2 / 11)):
        assert abs(got - want) < 0.02
    assert summary["masked_tokens"] == counts.sum()
    assert summary["tokens"] == lengths.sum()


def test_byte_identical_for_any_worker_count_and_task_size(tmp_path, reference_run, spm_model,
                                                           corpus_files):
    path, summary = reference_run
    layout = pipeline.LayoutOptions(block_documents=3, task_tokens=30_000)
    two = tmp_path / "two.tfrecord"
    summary_two = _run(corpus_files, [two], _options(spm_model, num_workers=2, layout=layout))
    assert two.read_bytes() == path.read_bytes()
    for key in ("instances", "tokens", "masked_tokens", "ngram_spans", "sop_labels"):
        assert summary_two[key] == summary[key]


def test_output_files_only_partition_the_same_instances(tmp_path, reference_run, spm_model,
                                                        corpus_files):
    path, _ = reference_run
    outputs = [tmp_path / f"part-{i}" for i in range(3)]
    summary = _run(corpus_files, outputs, _options(spm_model))
    parts = [tfrecord.read_payloads(str(o)) for o in outputs]
    assert [len(p) for p in parts] == [f["instances"] for f in summary["output_files"]]
    assert all(len(p) > 0 for p in parts)
    assert sorted(r for p in parts for r in p) == sorted(tfrecord.read_payloads(str(path)))
    on_disk = json.loads((tmp_path / "_part-0.summary.json").read_text())  # not part-0*
    assert on_disk["instances"] == summary["instances"]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]   # no temp files left


def test_seed_changes_output(tmp_path, reference_run, spm_model, corpus_files):
    path, _ = reference_run
    options = _options(spm_model)
    options = dataclasses.replace(
        options, instances=dataclasses.replace(options.instances, random_seed=1))
    other = tmp_path / "seed1.tfrecord"
    _run(corpus_files, [other], options)
    assert other.read_bytes() != path.read_bytes()


def test_hand_made_documents_sop_layout(tmp_path, spm_model):
    # Document k is sentences of consecutive ids in its own range, so the order of
    # A and B is visible in the ids: label 0 -> A before B, label 1 -> swapped or other doc.
    sentences, doc_bounds, doc_ids = [], [0], []
    for doc in range(4):
        base = 100 + 1500 * doc
        for k in range(30):
            sentences.append(np.arange(base + 10 * k, base + 10 * k + 10, dtype=np.int32))
        doc_bounds.append(len(sentences))
        doc_ids.append(doc)
    sent_bounds = np.concatenate([[0], np.cumsum([len(s) for s in sentences])])
    block = pipeline.TokenizedBlock(0, np.array(doc_ids), np.array(doc_bounds), sent_bounds,
                                    np.concatenate(sentences))
    instances = pipeline.InstanceOptions(max_seq_length=48, dupe_factor=1, short_seq_prob=0.0,
                                         masking=MaskingOptions(masked_lm_prob=0.0001,
                                                                max_predictions_per_seq=2))
    context = pipeline.WorkerContext(spm_model, True, instances, pipeline.LayoutOptions())
    results = [pipeline.run_task(context, block, task)
               for task in pipeline.make_tasks(block, instances, 10 ** 9)]
    examples = [e for r in results for e in _decode_payloads([rec[12:-4] for rec in r.records])]
    assert len(examples) > 20
    for example in examples:
        ids = list(example.features.feature["input_ids"].int64_list.value)
        segments = list(example.features.feature["segment_ids"].int64_list.value)
        feature = example.features.feature
        count = int(sum(feature["masked_lm_weights"].float_list.value))
        restore = dict(zip(feature["masked_lm_positions"].int64_list.value[:count],
                           feature["masked_lm_ids"].int64_list.value[:count]))
        assert count == 1 and 0 not in restore
        ids = [restore.get(i, t) for i, t in enumerate(ids)]
        length = sum(feature["input_mask"].int64_list.value)
        sep = ids.index(3)
        a, b = ids[1:sep], ids[sep + 1:length - 1]
        assert ids[length - 1] == 3 and 3 not in b and a and b
        assert segments[:length] == [0] * (sep + 1) + [1] * (length - sep - 1)
        label = example.features.feature["next_sentence_labels"].int64_list.value[0]
        same_doc = (a[0] - 100) // 1500 == (b[0] - 100) // 1500
        if label == 0:
            assert same_doc and max(a) < min(b)
        elif same_doc:
            assert min(a) > max(b)


def _decode_payloads(payloads):
    tf = pytest.importorskip("tensorflow")
    return [tf.train.Example.FromString(p) for p in payloads]


def test_errors_name_the_problem_and_leave_no_output(tmp_path, spm_model):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n   \n")
    out = tmp_path / "out.tfrecord"
    with pytest.raises(InputError, match="no training instances"):
        _run([str(empty)], [out], _options(spm_model))
    assert not out.exists() and os.listdir(tmp_path) == ["empty.txt"]
    small = _options(spm_model)
    small = dataclasses.replace(small, instances=dataclasses.replace(small.instances,
                                                                     max_seq_length=4))
    with pytest.raises(ValueError, match="max_seq_length=4 is too small"):
        _run([str(empty)], [out], small)
    with pytest.raises(InputError, match="--spm_model_file=.*missing.model: SentencePiece model "
                                         "not found"):
        _run([str(empty)], [out], _options(str(tmp_path / "missing.model")))


def test_cli_shards_summary_and_flag_defaults(tmp_path, spm_model):
    text = tmp_path / "in.txt"
    text.write_text("\n".join(
        ["The first sentence of the first document.", "It goes on and on.",
         "And ends here.", "", "A second document starts.", "It has two sentences."]) + "\n")
    env = dict(os.environ, PYTHONPATH=REPO)
    cmd = [sys.executable, "-m", "data_prep.create_pretraining_data",
           f"--input_file={text}", f"--output_file={tmp_path}/out@2",
           f"--spm_model_file={spm_model}", "--max_seq_length=32", "--dupe_factor=3"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    names = sorted(os.listdir(tmp_path))
    assert names == ["in.txt", "out-00000-of-00002", "out-00001-of-00002", "out.summary.json"]
    summary = json.loads((tmp_path / "out.summary.json").read_text())
    total = sum(len(tfrecord.read_payloads(str(tmp_path / n))) for n in names[1:3])
    assert summary["instances"] == total > 0
    for example in _decode(tmp_path / names[1]) + _decode(tmp_path / names[2]):
        assert {name: (f.WhichOneof("kind"), len(getattr(f, f.WhichOneof("kind")).value))
                for name, f in example.features.feature.items()} == {
            name: (kind, 32 if length == SEQ else length) for name, (kind, length)
            in FEATURES.items()}
    assert summary["options"]["instances"]["random_seed"] == 12345
    assert "progress:" in done.stderr and "wrote" in done.stderr

    helped = subprocess.run([sys.executable, "-m", "data_prep.create_pretraining_data",
                             "--helpshort"], env=env, capture_output=True, text=True, timeout=60)
    defined = helped.stdout.split("\nflags:\n", 1)[1]
    for flag, default in [("max_seq_length", "512"), ("dupe_factor", "40"), ("ngram", "3"),
                          ("max_predictions_per_seq", "20"), ("masked_lm_prob", "0.15"),
                          ("short_seq_prob", "0.1"), ("random_seed", "12345"),
                          ("do_lower_case", "true"), ("do_whole_word_mask", "true"),
                          ("favor_shorter_ngram", "true"), ("random_next_sentence", "false")]:
        section = re.search(rf"--(\[no\])?{flag}:(.*?)(?=\n  --|\Z)", defined, re.S)
        assert section and f"(default: '{default}')" in section.group(2), flag
    assert "--vocab_file:" in defined  # defined, but not required with --spm_model_file


def test_tokenize_block_drops_empty_sentences_and_documents(spm_model):
    from data_prep import tokenization
    from data_prep.text_input import Document
    tokenizer = tokenization.SentencePieceTokenizer(spm_model)
    docs = [Document(7, "a", ("hello world", "", "again")),   # "" tokenizes to []
            Document(8, "a", ("",)),                      # left empty: dropped
            Document(9, "b", ("last one",))]
    block = pipeline.tokenize_block(3, docs, tokenizer)
    expected = [tokenizer.encode_ids([s])[0] for s in ("hello world", "again", "last one")]
    assert block.block_index == 3 and list(block.doc_indices) == [7, 9]
    assert list(block.doc_bounds) == [0, 2, 3]
    assert list(block.sent_bounds) == [0] + list(np.cumsum([len(e) for e in expected]))
    assert block.ids.tolist() == [t for e in expected for t in e]
    tasks = pipeline.make_tasks(block, pipeline.InstanceOptions(dupe_factor=3), task_tokens=1)
    assert [(t.dupe, t.doc_lo, t.doc_hi) for t in tasks] == [
        (d, lo, hi) for d in range(3) for lo, hi in ((0, 1), (1, 2))]
