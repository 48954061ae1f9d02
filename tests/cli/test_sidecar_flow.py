"""Data prep -> run_pretraining --input_file='<output>*': the summary never gets in the way.

The summary is named so that no glob `<output>*` matches it (data_prep.runner.
default_summary_path); the readers skip a `*.summary.json` a glob matches
anyway (an older version's `train.tfrecord.summary.json`), and still name any
other file that is not a TFRecord.
"""
import json
import logging
import os
import shutil
import subprocess
import sys

import pytest

from albert_tf import AlbertConfig
from albert_tf.pretraining import inputs
from albert_tf.pretraining import PretrainingOptions, run_pretraining
from data_prep import pipeline, runner
from data_prep.masking import MaskingOptions
from data_prep.text_input import InputError, ReaderOptions
from tests.conftest import REPO_ROOT

SEQ, PRED = 32, 5
SENTENCES = [
    "The river runs past the old mill and into the valley.",
    "Farmers bring their grain there every autumn.",
    "The miller weighs each sack before he grinds it.",
    "Children watch the wheel turn in the water.",
    "In winter the river freezes and the mill is quiet.",
    "A train crosses the bridge twice a day.",
    "Its whistle can be heard across the fields.",
    "The station master keeps a garden of roses.",
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Twelve documents of four to eight sentences (one per line, blank line between)."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    documents = ["\n".join(SENTENCES[i % 3:i % 3 + 4 + i % 5]) for i in range(12)]
    path.write_text("\n\n".join(documents) + "\n")
    return str(path)


def _options(spm_model):
    return runner.RunOptions(
        spm_model_file=spm_model, reader=ReaderOptions(),
        instances=pipeline.InstanceOptions(max_seq_length=SEQ, dupe_factor=2,
                                           masking=MaskingOptions(max_predictions_per_seq=PRED)))


def _prep(corpus, spm_model, spec, **kwargs):
    return runner.create_pretraining_data([corpus], runner.expand_output_spec(spec),
                                          _options(spm_model),
                                          log=lambda message: None, **kwargs)


def _pretraining(input_file, output_dir, **changes):
    config = AlbertConfig.from_dict(dict(
        vocab_size=8000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, max_position_embeddings=SEQ))
    values = dict(albert_config=config, output_dir=str(output_dir), input_file=input_file,
                  eval_input_file=input_file, max_seq_length=SEQ, max_predictions_per_seq=PRED,
                  train_batch_size=4, eval_batch_size=4, optimizer="adamw", num_train_steps=2,
                  num_warmup_steps=1, save_checkpoints_steps=2, iterations_per_loop=1,
                  max_eval_steps=2, seed=1, deterministic_input=True, do_eval=True)
    values.update(changes)
    return PretrainingOptions(**values)


@pytest.mark.parametrize("outputs,summary", [
    (["d/train.tfrecord"], "d/train.summary.json"),
    (["d/train.tfrecord-00000-of-00002", "d/train.tfrecord-00001-of-00002"],
     "d/train.summary.json"),
    (["d/train-00000-of-00008"], "d/train.summary.json"),
    (["d/a.tfrecord", "d/b.tfrecord"], "d/a.summary.json"),
    (["d/train"], "d/_train.summary.json"),
    (["d/a", "d/b"], "d/_a.summary.json"),
    (["d/train.tfrecord.gz"], "d/train.tfrecord.summary.json"),
    (["gs://bucket/d/train.tfrecord"], "gs://bucket/d/train.summary.json"),
])
def test_summary_name_is_matched_by_no_output_glob(outputs, summary):
    assert runner.default_summary_path(outputs) == summary
    assert not any(summary.startswith(output) for output in outputs)


def test_input_file_spec_matches_the_outputs_only():
    shards = runner.expand_output_spec("d/train@3")
    assert runner.input_file_spec(shards) == "d/train-*-of-00003"
    assert runner.input_file_spec(shards[:2]) == "d/train-00000-of-00003,d/train-00001-of-00003"
    assert runner.input_file_spec(["d/x.tfrecord"]) == "d/x.tfrecord"


@pytest.mark.slow  # 4 s
def test_single_file_output_glob_with_an_old_style_leftover(tmp_path, corpus, spm_model, caplog):
    data = tmp_path / "data"
    summary = _prep(corpus, spm_model, f"{data}/train.tfrecord")
    assert sorted(os.listdir(data)) == ["train.summary.json", "train.tfrecord"]
    assert json.loads((data / "train.summary.json").read_text()) == summary
    # What an older version left beside the output: the glob below matches it.
    old_style = data / "train.tfrecord.summary.json"
    shutil.copy(data / "train.summary.json", old_style)
    with caplog.at_level(logging.INFO, logger="absl"):
        results = run_pretraining(_pretraining(f"{data}/train.tfrecord*", tmp_path / "run"))
    assert results["global_step"] == 2 and results["eval"]["masked_lm_accuracy"] >= 0
    skips = [r.getMessage() for r in caplog.records if "data-prep summary" in r.getMessage()]
    # Expanded for training and for each evaluation, logged once.
    assert skips == [f"input: skipped 1 data-prep summary file(s) matched by a glob (not "
                     f"TFRecords): {old_style}"]


@pytest.mark.slow  # 13 s
def test_sharded_output_through_both_command_lines(tmp_path, corpus, spm_model):
    data = tmp_path / "data"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    prep = subprocess.run(
        [sys.executable, "-m", "data_prep.create_pretraining_data", f"--input_file={corpus}",
         f"--output_file={data}/train@2", f"--spm_model_file={spm_model}",
         f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PRED}", "--dupe_factor=2"],
        env=env, capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert prep.returncode == 0, prep.stderr[-2000:]
    assert sorted(os.listdir(data)) == ["train-00000-of-00002", "train-00001-of-00002",
                                        "train.summary.json"]
    last = prep.stderr.strip().splitlines()[-1]
    assert last.endswith(f"summary: {data}/train.summary.json; pretrain on them with "
                         f"--input_file='{data}/train-*-of-00002'"), last
    # `train*` matches the new summary too, and an old-style one left by an older version.
    shutil.copy(data / "train.summary.json", data / "train-00000-of-00002.summary.json")
    config = tmp_path / "albert_config.json"
    config.write_text(_pretraining("", "").albert_config.to_json_string())
    train = subprocess.run(
        [sys.executable, str(REPO_ROOT / "run_pretraining.py"), f"--albert_config_file={config}",
         f"--input_file={data}/train*", f"--output_dir={tmp_path / 'run'}",
         f"--max_seq_length={SEQ}", f"--max_predictions_per_seq={PRED}",
         "--train_batch_size=4", "--num_train_steps=2", "--num_warmup_steps=1",
         "--save_checkpoints_steps=2", "--iterations_per_loop=1", "--optimizer=adamw"],
        env=env, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert train.returncode == 0, train.stderr[-3000:]
    assert train.stderr.count("data-prep summary") == 1, train.stderr[-3000:]
    assert (f"skipped 2 data-prep summary file(s) matched by a glob (not TFRecords): "
            f"{data}/train-00000-of-00002.summary.json, {data}/train.summary.json"
            in train.stderr)
    assert (tmp_path / "run" / "model.ckpt-best.index").exists()


def test_a_file_that_is_not_a_tfrecord_is_named(tmp_path, corpus, spm_model):
    data = tmp_path / "data"
    _prep(corpus, spm_model, f"{data}/train.tfrecord")
    notes = data / "train.tfrecord.notes.json"
    notes.write_text(json.dumps({"made_by": "me", "comment": "a file of my own"}) + "\n")
    with pytest.raises(inputs.InputError, match=f"{notes}: not a readable TFRecord file"):
        run_pretraining(_pretraining(f"{data}/train.tfrecord*", tmp_path / "run", do_eval=False))


def test_readers_refuse_a_summary_named_explicitly_or_matched_alone(tmp_path, corpus, spm_model,
                                                                    caplog):
    data = tmp_path / "data"
    _prep(corpus, spm_model, f"{data}/train@2")
    with pytest.raises(inputs.InputError, match=f"{data}/train.summary.json: a data-prep summary "
                                                r"\(JSON\), not a TFRecord file"):
        inputs.expand_patterns(f"{data}/train-00000-of-00002,{data}/train.summary.json")
    with pytest.raises(inputs.InputError, match=r"'.*/\*.json' matches only data-prep summaries "
                                                rf"\({data}/train.summary.json\), no TFRecord"):
        inputs.expand_patterns(f"{data}/*.json")
    with caplog.at_level(logging.INFO, logger="absl"):
        for _ in range(3):
            assert inputs.expand_patterns(f"{data}/*") == [
                f"{data}/train-00000-of-00002", f"{data}/train-00001-of-00002"]
    assert caplog.text.count("data-prep summary") == 1
    os.mkdir(data / "train-extra")
    with pytest.raises(inputs.InputError, match="train-extra: a directory, not a TFRecord"):
        inputs.pretraining_dataset(inputs.PretrainingInputConfig(f"{data}/train*", SEQ, PRED), 2)


def test_runs_sharing_a_summary_name(tmp_path, corpus, spm_model):
    first = _prep(corpus, spm_model, f"{tmp_path}/a.tfrecord")
    again = _prep(corpus, spm_model, f"{tmp_path}/a.tfrecord")  # the same outputs: overwritten
    assert again["instances"] == first["instances"]
    for spec in (f"{tmp_path}/a.tf_record", f"{tmp_path}/a@2"):
        with pytest.raises(InputError, match=rf"{tmp_path}/a.summary.json already holds the "
                                             r"summary of other outputs \(a.tfrecord\); remove "
                                             "it or pass --summary_file"):
            _prep(corpus, spm_model, spec)
    assert sorted(os.listdir(tmp_path)) == ["a.summary.json", "a.tfrecord"]  # nothing written
    _prep(corpus, spm_model, f"{tmp_path}/a.tf_record",
          summary_file=str(tmp_path / "a2.summary.json"))
    (tmp_path / "b.summary.json").write_text("my own notes\n")
    with pytest.raises(InputError, match="b.summary.json already holds a file that is not a "
                                         "data-prep summary"):
        _prep(corpus, spm_model, f"{tmp_path}/b.tfrecord")
    with pytest.raises(InputError, match=r"--output_file .*/c.summary.json: names ending in "
                                         r"\.summary\.json are kept for data-prep summaries"):
        _prep(corpus, spm_model, f"{tmp_path}/c.summary.json")
    with pytest.raises(InputError, match="--summary_file .*/d.tfrecord is also an output file"):
        _prep(corpus, spm_model, f"{tmp_path}/d.tfrecord",
              summary_file=str(tmp_path / "d.tfrecord"))


def test_rerun_removes_the_old_style_summary_of_its_output(tmp_path, corpus, spm_model):
    old_style = tmp_path / "train.tfrecord.summary.json"
    old_style.write_text('{"instances": 1}\n')
    kept = tmp_path / "other.tfrecord.summary.json"  # not an output of this run
    kept.write_text('{"instances": 1}\n')
    logged = []
    runner.create_pretraining_data([corpus], [str(tmp_path / "train.tfrecord")],
                                   _options(spm_model), log=logged.append)
    assert sorted(os.listdir(tmp_path)) == ["other.tfrecord.summary.json", "train.summary.json",
                                            "train.tfrecord"]
    assert f"removed {old_style}: an older version's summary of the output rewritten now" \
        in logged
