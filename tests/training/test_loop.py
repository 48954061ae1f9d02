"""The training loop: distribution and accumulation equivalence, resume, NaN stop, learning."""
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertPretrainer, training
from albert_tf.training import optimization
from albert_tf.pretraining import PretrainingObjective
from tests.conftest import HELPERS, REPO_ROOT
from tests.helpers.cluster import Cluster
from tests.helpers.pretraining_data import make_examples

CONFIG = AlbertConfig(vocab_size=40, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=16)


def as_batch(examples):
    return {k: np.stack([e[k] for e in examples]).astype(
        np.float32 if k == "masked_lm_weights" else np.int32) for k in examples[0]}


@pytest.mark.slow  # ~23s: keeps the default suite under 10 minutes on slower CPUs (11 min on a Zen 4)
def test_mirrored_and_accumulated_steps_equal_one_device_step():
    """2 logical CPUs, and 2 micro-batches, give the single-device update (to 1e-5)."""
    result = subprocess.run([sys.executable, str(HELPERS / "one_step_equivalence.py")],
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["max_update"] > 1e-4  # the step really moved the weights
    for name in ("mirrored", "accumulated", "mirrored_accumulated"):
        assert out[f"{name}_max_weight_diff"] < 1e-5, out
        assert out[f"{name}_loss"] == pytest.approx(out["one_device_loss"], abs=1e-5)


def make_trainer(output_dir, steps, save_every, lr=1e-2, optimizer="adamw", seed=0):
    keras.utils.set_random_seed(seed)
    strategy = tf.distribute.get_strategy()
    model = AlbertPretrainer(CONFIG)
    model.build()
    opt = optimization.create_optimizer(lr, steps, steps // 10, optimizer=optimizer,
                                        clip_norm=None)
    task = PretrainingObjective()
    config = training.TrainingConfig(output_dir=str(output_dir), num_train_steps=steps,
                                     steps_per_loop=2, save_checkpoints_steps=save_every)
    return training.Trainer(strategy, model, opt, task, config, task.metric_names,
                            opt.learning_rate_schedule)


def fixed_dataset_fn(examples, batch):
    data = as_batch(examples)
    return lambda ctx: tf.data.Dataset.from_tensor_slices(data).shuffle(
        len(examples), seed=5).repeat().batch(batch)


@pytest.mark.slow  # 8 s
def test_resume_continues_step_learning_rate_and_input(tmp_path):
    examples = make_examples(40, seed=1)
    straight = make_trainer(tmp_path / "straight", 8, 4)
    straight.train(fixed_dataset_fn(examples, 4))

    first = make_trainer(tmp_path / "resumed", 8, 4)
    first.config.num_train_steps = 4  # "interrupted" after the step-4 checkpoint
    first.train(fixed_dataset_fn(examples, 4))
    assert first.step == 4
    second = make_trainer(tmp_path / "resumed", 8, 4, seed=99)  # fresh init, then restored
    second.train(fixed_dataset_fn(examples, 4))
    assert second.step == 8
    assert float(second.optimizer.learning_rate) == pytest.approx(
        float(straight.optimizer.learning_rate))
    for a, b in zip(straight.model.weights, second.model.weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6, err_msg=a.path)
    assert sorted(os.listdir(tmp_path / "resumed")) == [
        "checkpoint", "ckpt-4.data-00000-of-00001", "ckpt-4.index",
        "ckpt-8.data-00000-of-00001", "ckpt-8.index", "train"]


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    examples = make_examples(8, seed=2)
    good, bad = as_batch(examples[:4]), as_batch(examples[4:])
    bad["masked_lm_weights"][:] = np.nan
    trainer = make_trainer(tmp_path, 10, 2)

    def dataset_fn(ctx):
        return tf.data.Dataset.from_tensors(good).repeat(2).concatenate(
            tf.data.Dataset.from_tensors(bad).repeat())

    with pytest.raises(training.NonFiniteLossError, match="between steps 2 and 4.*ckpt-2"):
        trainer.train(dataset_fn)
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-2")
    reader = tf.train.load_checkpoint(str(tmp_path / "ckpt-2"))
    floats = [n for n, d in reader.get_variable_to_dtype_map().items() if d == tf.float32]
    assert len(floats) > 30
    for name in floats:
        assert np.all(np.isfinite(reader.get_tensor(name))), name


def summary_steps(log_dir, tag):
    """Steps at which `tag` was written to the event files of log_dir."""
    steps = []
    for name in sorted(n for n in os.listdir(log_dir) if ".tfevents." in n):
        for raw in tf.data.TFRecordDataset(os.path.join(log_dir, name)):
            event = tf.compat.v1.Event.FromString(raw.numpy())
            steps += [event.step for value in event.summary.value if value.tag == tag]
    return steps


def test_interrupted_training_keeps_its_summaries(tmp_path):
    """Ctrl-C mid-run: the CLIs exit without the interpreter's teardown (cli.exit_now), so
    the summaries logged so far must be on disk when the interrupt leaves `train`. The
    writer alone flushes every 2 minutes; each window's `as_default` block flushes on exit."""
    trainer = make_trainer(tmp_path, 10, 2)

    def interrupt(step, _path):
        if step == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as interrupted:
        trainer.train(fixed_dataset_fn(make_examples(8, seed=3), 4), on_checkpoint=interrupt)
    assert interrupted.value is not None  # the traceback (and the writer) still live here
    assert summary_steps(tmp_path / "train", "loss") == [2, 4]


@pytest.mark.slow  # 17 s
def test_loss_falls_and_accuracy_rises(tmp_path):
    examples = make_examples(200, seed=4)
    trainer = make_trainer(tmp_path, 200, 1000, lr=1e-3)
    trainer.config.steps_per_loop = 10
    task = trainer.task
    eval_fn = fixed_dataset_fn(make_examples(64, seed=5), 32)
    strategy = tf.distribute.get_strategy()

    def evaluate():
        return training.evaluate(strategy, trainer.model, task,
                                 lambda ctx: eval_fn(ctx).take(2), task.metric_names)

    before = evaluate()
    trainer.train(fixed_dataset_fn(examples, 16))
    after = evaluate()
    assert after["loss"] < before["loss"] - 0.5, (before, after)
    assert after["masked_lm_accuracy"] > before["masked_lm_accuracy"] + 0.2, (before, after)


def test_trainer_refuses_an_optimizer_that_clips_itself(tmp_path):
    model = AlbertPretrainer(CONFIG)
    model.build()
    with pytest.raises(ValueError, match="without clipping"):
        training.Trainer(tf.distribute.get_strategy(), model,
                         optimization.create_optimizer(1e-3, 10, 0, clip_norm=1.0),
                         PretrainingObjective(), training.TrainingConfig(str(tmp_path), 10),
                         PretrainingObjective.metric_names)


@pytest.mark.slow
def test_multi_worker_mirrored_matches_one_process(tmp_path):
    """Two worker processes on localhost end with the single-process weights."""
    script = str(HELPERS / "multi_worker_step.py")
    single = subprocess.run([sys.executable, script, str(tmp_path / "single.npz")],
                            capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert single.returncode == 0, single.stderr[-2000:]
    with Cluster([script, str(tmp_path / "multi.npz")], 2, tmp_path / "logs",
                 env={"ALBERT_TF_TEST_OUTPUT": str(tmp_path / "multi")}) as cluster:
        assert cluster.wait(timeout=300) == [0, 0], cluster.stderr(0)[-3000:]
    want, got = np.load(tmp_path / "single.npz"), np.load(tmp_path / "multi.npz")
    assert len(want.files) == len(got.files) > 30
    for name in want.files:
        np.testing.assert_allclose(got[name], want[name], atol=1e-5, err_msg=name)
    # Only the chief wrote checkpoints into the shared output directory.
    assert tf.train.latest_checkpoint(str(tmp_path / "multi")).endswith("ckpt-3")


def test_build_train_function_runs_the_requested_steps_and_sums_metrics(tmp_path):
    """The public compiled loop (used by bench/ours.py): N optimizer steps per call."""
    trainer = make_trainer(tmp_path, 10, 100)
    iterator = iter(fixed_dataset_fn(make_examples(16, seed=2), 4)(None))
    train_loop = trainer.build_train_function()
    before = [v.numpy().copy() for v in trainer.model.trainable_variables]
    totals = train_loop(iterator, tf.constant(3))
    assert trainer.step == 3
    assert float(totals["steps"]) == 3.0 and float(totals["nonfinite"]) == 0.0
    assert np.isfinite(float(totals["loss_sum"])) and float(totals["loss_sum"]) > 0
    assert any(np.any(a != b.numpy()) for a, b in zip(before, trainer.model.trainable_variables))
    train_loop(iterator, tf.constant(2))
    assert trainer.step == 5
    assert not os.listdir(tmp_path)  # no checkpoints or summaries from the bare loop
