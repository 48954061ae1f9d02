"""run_pretraining.py end to end: outputs, evaluation, kill -9 and resume, precision, XLA."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer, checkpoints
from albert_tf.pretraining import inputs
from albert_tf.checkpoints import names as tf1_names
from albert_tf.pretraining import PretrainingOptions, run_pretraining
from tests.conftest import REPO_ROOT
from tests.helpers.pretraining_data import make_examples, write_records

CONFIG = dict(vocab_size=40, embedding_size=16, hidden_size=32, num_hidden_layers=2,
              num_attention_heads=4, intermediate_size=64, max_position_embeddings=16)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretraining_data")
    train = write_records(root / "train.tfrecord", make_examples(160, seed=0))
    heldout = write_records(root / "heldout.tfrecord", make_examples(48, seed=1))
    config = root / "albert_config.json"
    config.write_text(json.dumps(CONFIG))
    return {"train": train, "eval": heldout, "config": str(config)}


def cli_args(data, output_dir, steps=40, **extra):
    args = {"albert_config_file": data["config"], "input_file": data["train"],
            "eval_input_file": data["eval"], "output_dir": str(output_dir),
            "train_batch_size": 8, "eval_batch_size": 16, "max_seq_length": 16,
            "max_predictions_per_seq": 4, "num_train_steps": steps, "num_warmup_steps": 4,
            "learning_rate": 1e-3, "optimizer": "adamw", "save_checkpoints_steps": 10,
            "iterations_per_loop": 5, "seed": 7, "deterministic_input": True}
    args.update(extra)
    flags = []
    for key, value in args.items():
        if value is True:
            flags.append(f"--{key}")
        elif value is False:
            flags.append(f"--no{key}")
        else:
            flags.append(f"--{key}={value}")
    return [sys.executable, str(REPO_ROOT / "run_pretraining.py")] + flags


def read_tf1(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def options(data, output_dir, **changes):
    values = dict(albert_config=AlbertConfig.from_dict(CONFIG), output_dir=str(output_dir),
                  input_file=data["train"], eval_input_file=data["eval"], max_seq_length=16,
                  max_predictions_per_seq=4, train_batch_size=8, eval_batch_size=16,
                  optimizer="adamw", learning_rate=1e-3, num_train_steps=20, num_warmup_steps=2,
                  save_checkpoints_steps=10, iterations_per_loop=5, max_eval_steps=None,
                  seed=3, deterministic_input=True, do_eval=True)
    values.update(changes)
    return PretrainingOptions(**values)


def test_output_directory_looks_like_an_official_download(data, tmp_path):
    results = run_pretraining(options(data, tmp_path))
    assert results["global_step"] == 20
    for name in ("albert_config.json", "model.ckpt-best.index", "eval_results.txt",
                 "checkpoints", "train", "eval"):
        assert (tmp_path / name).exists(), name
    assert json.loads((tmp_path / "albert_config.json").read_text()) == \
        AlbertConfig.from_dict(CONFIG).to_dict()
    lines = (tmp_path / "eval_results.txt").read_text().splitlines()
    keys = {line.split(" = ")[0] for line in lines}
    assert keys == {"global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                    "sentence_order_accuracy", "sentence_order_loss"}
    assert [l for l in lines if l.startswith("global_step")] == ["global_step = 10",
                                                                  "global_step = 20"]
    # model.ckpt-best holds the official names and the best step, and loads back.
    best = read_tf1(str(tmp_path / "model.ckpt-best"))
    assert best["global_step"] == results["best"]["global_step"]
    model = AlbertPretrainer(AlbertConfig.from_dict(CONFIG))
    assert set(best) - {"global_step"} == set(tf1_names.pretrainer_variables(model))
    report = checkpoints.load_tf1_checkpoint(model, str(tmp_path))
    assert not report.missing


def test_eval_only_run_and_flag_errors(data, tmp_path):
    run_pretraining(options(data, tmp_path, do_eval=False, num_train_steps=10))
    assert (tmp_path / "model.ckpt-best.index").exists()  # final weights, no evaluation
    results = run_pretraining(options(data, tmp_path, do_train=False, num_train_steps=10))
    assert results["eval"]["masked_lm_accuracy"] >= 0 and results["global_step"] == 10
    with pytest.raises(ValueError, match="--eval_input_file is required with --do_eval"):
        run_pretraining(options(data, tmp_path / "x", eval_input_file=None))
    with pytest.raises(ValueError, match="--train_batch_size 8 must be divisible by replicas "
                                         r"\(1\) x --gradient_accumulation_steps \(3\)"):
        run_pretraining(options(data, tmp_path / "y", gradient_accumulation_steps=3))
    with pytest.raises(ValueError, match="--max_seq_length 32 exceeds"):
        run_pretraining(options(data, tmp_path / "z", max_seq_length=32))


@pytest.mark.slow  # ~19s: keeps the default suite under 10 minutes on slower CPUs (11 min on a Zen 4)
def test_cli_kill_and_rerun_resumes_to_the_same_weights(data, tmp_path):
    env = dict(os.environ, TF_DETERMINISTIC_OPS="1")  # same sums whatever the thread timing
    straight = tmp_path / "straight"
    done = subprocess.run(cli_args(data, straight), capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]

    resumed = tmp_path / "resumed"
    proc = subprocess.Popen(cli_args(data, resumed), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT, env=env)
    deadline = time.time() + 240
    state = resumed / "checkpoints" / "checkpoint"  # names ckpt-20 once it is complete
    while not (state.exists() and 'ckpt-20"' in state.read_text()):
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        assert time.time() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = subprocess.run(cli_args(data, resumed), capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    log = done.stderr
    assert "resumed from" in log and "step 40/40" in log, log[-3000:]
    first_step_logged = int(log.split("| masked_lm_loss")[0].rsplit("step ", 1)[1].split("/")[0])
    assert first_step_logged > 20, log[-3000:]  # continued, did not restart at step 5
    want = read_tf1(str(straight / "model.ckpt-best"))
    got = read_tf1(str(resumed / "model.ckpt-best"))
    assert want["global_step"] == got["global_step"]
    for name in want:
        np.testing.assert_allclose(got[name], want[name], atol=1e-6, err_msg=name)


@pytest.mark.parametrize("precision,jit", [
    pytest.param("mixed_bfloat16", False, marks=pytest.mark.slow),  # 5 s
    pytest.param("mixed_float16", False, marks=pytest.mark.slow),  # 5 s
    ("auto", False),
    pytest.param("float32", True, marks=pytest.mark.slow)])  # 13 s: XLA
def test_precision_and_xla_runs(data, tmp_path, precision, jit):
    results = run_pretraining(options(data, tmp_path, mixed_precision=precision, jit_compile=jit,
                                      num_train_steps=10, do_eval=True))
    assert results["global_step"] == 10
    assert np.isfinite(results["train"]["loss"])
    assert np.isfinite(results["eval"]["loss"])


def test_time_limit_stops_early_with_an_evaluated_checkpoint(data, tmp_path):
    results = run_pretraining(options(data, tmp_path, num_train_steps=20, iterations_per_loop=5,
                                      save_checkpoints_steps=10, do_eval=True,
                                      max_train_seconds=0.0))
    assert results["stopped_early"] and results["global_step"] == 5  # the first window
    assert results["best"]["global_step"] == 5  # evaluated, and exported as the best
    assert tf.train.load_checkpoint(str(tmp_path / "model.ckpt-best")).get_tensor(
        "global_step") == 5
    assert "ckpt-5" in tf.train.latest_checkpoint(str(tmp_path / "checkpoints"))
    unlimited = run_pretraining(options(data, tmp_path / "full", num_train_steps=10,
                                        iterations_per_loop=5, do_eval=False))
    assert not unlimited["stopped_early"] and unlimited["global_step"] == 10


@pytest.mark.slow  # 4 s
def test_recompute_layers_trains_to_the_same_weights(data, tmp_path):
    plain = run_pretraining(options(data, tmp_path / "plain", do_eval=False, num_train_steps=10))
    recomputed = run_pretraining(options(data, tmp_path / "recompute", do_eval=False,
                                         num_train_steps=10, recompute_layers=True))
    assert recomputed["train"]["loss"] == pytest.approx(plain["train"]["loss"], rel=1e-4)
    want = read_tf1(str(tmp_path / "plain" / "model.ckpt-best"))
    got = read_tf1(str(tmp_path / "recompute" / "model.ckpt-best"))
    for name in want:
        np.testing.assert_allclose(got[name], want[name], atol=1e-5, err_msg=name)


@pytest.mark.slow  # 5 s
def test_init_checkpoint_from_a_previous_run(data, tmp_path):
    run_pretraining(options(data, tmp_path / "first", do_eval=False, num_train_steps=10))
    first = read_tf1(str(tmp_path / "first" / "model.ckpt-best"))
    results = run_pretraining(options(data, tmp_path / "second", do_eval=True,
                                      num_train_steps=1, learning_rate=0.0,
                                      init_checkpoint=str(tmp_path / "first")))
    second = read_tf1(str(tmp_path / "second" / "model.ckpt-best"))
    assert results["global_step"] == 1
    for name in first:
        if name != "global_step":
            np.testing.assert_array_equal(second[name], first[name], err_msg=name)


def test_corrupted_training_file_is_named(data, tmp_path):
    good = open(data["train"], "rb").read()
    broken = bytearray(good)
    broken[len(broken) * 3 // 4] ^= 0xFF  # past the first record: schema validation passes
    path = tmp_path / "broken.tfrecord"
    path.write_bytes(bytes(broken))
    with pytest.raises(inputs.InputError, match="broken.tfrecord: corrupted TFRecord"):
        run_pretraining(options(data, tmp_path / "out", input_file=f"{data['train']},{path}",
                                do_eval=False, num_train_steps=200, train_batch_size=16))
