"""The divergence guard: injected NaN, infinite gradients and loss spikes roll back to the
last good checkpoint with a lower learning rate, or stop with one line."""
import json
import math
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import training
from albert_tf.training import optimization
from albert_tf.training.divergence import DivergenceGuard, DivergenceOptions

FEATURES = 4


class InjectingTask(training.Objective):
    """Squared error of a linear model; at optimizer update `at_step` the loss is multiplied
    by `factor` (NaN, or a spike), or (`infinite_gradient`) its gradient is made infinite.
    `once`: only the first time that update is computed (a rolled-back run then passes)."""

    metric_names = ("loss_total", "examples")

    def __init__(self, optimizer, at_step, factor=float("nan"), once=True,
                 infinite_gradient=False):
        self.iterations = optimizer.iterations
        self.at_step = at_step
        self.factor = factor
        self.once = once
        self.infinite_gradient = infinite_gradient
        self.armed = tf.Variable(True, trainable=False)
        self.fired = tf.Variable(0, trainable=False)

    def normalizers(self, features):
        return {"examples": tf.cast(tf.shape(features["x"])[0], tf.float32)}

    def loss(self, model, features, normalizers, training):
        fire = tf.logical_and(self.armed,
                              tf.equal(self.iterations + 1, tf.cast(self.at_step, tf.int64)))
        prediction = model(features["x"])
        if self.infinite_gradient:
            prediction = tf.cond(fire, lambda: _infinite_gradient(prediction),
                                 lambda: prediction)
        total = tf.reduce_sum(tf.square(prediction[:, 0] - features["y"]))
        if not self.infinite_gradient:
            total = total * tf.where(fire, tf.constant(self.factor), 1.0)
        updates = [self.fired.assign_add(tf.cast(fire, tf.int32))]
        if self.once:
            updates.append(self.armed.assign(tf.logical_and(self.armed,
                                                            tf.logical_not(fire))))
        with tf.control_dependencies(updates):
            total = tf.identity(total)
        return total / normalizers["examples"], {"loss_total": total,
                                                 "examples": normalizers["examples"]}

    def finalize(self, sums):
        return {"eval_loss": sums["loss_total"] / max(sums["examples"], 1.0)}


@tf.custom_gradient
def _infinite_gradient(x):
    return tf.identity(x), lambda dy: dy * float("inf")


def dataset_fn(_ctx):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, FEATURES)).astype(np.float32)
    y = (x @ np.arange(1, FEATURES + 1, dtype=np.float32)).astype(np.float32)
    return tf.data.Dataset.from_tensor_slices({"x": x, "y": y}).repeat().batch(8)


def make_trainer(output_dir, steps=12, save_every=4, divergence=DivergenceOptions(),
                 **inject):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(1)])
    optimizer = optimization.create_optimizer(1e-2, steps, 0, "adamw", clip_norm=None)
    task = InjectingTask(optimizer, **inject)
    config = training.TrainingConfig(output_dir=str(output_dir), num_train_steps=steps,
                                     steps_per_loop=2, save_checkpoints_steps=save_every,
                                     divergence=divergence)
    trainer = training.Trainer(tf.distribute.get_strategy(), model, optimizer, task, config,
                               task.metric_names, optimizer.learning_rate_schedule)
    return trainer, task


def all_finite(path):
    reader = tf.train.load_checkpoint(path)
    names = [n for n, d in reader.get_variable_to_dtype_map().items() if d == tf.float32]
    assert names
    return all(np.all(np.isfinite(reader.get_tensor(n))) for n in names)


def events(output_dir):
    with open(os.path.join(output_dir, "train", "metrics.jsonl")) as handle:
        return [json.loads(line) for line in handle]


def test_nan_rolls_back_to_the_last_checkpoint_with_half_the_learning_rate(tmp_path, caplog):
    trainer, task = make_trainer(tmp_path, at_step=7)
    caplog.set_level("WARNING")
    trainer.train(dataset_fn)
    assert int(task.fired.numpy()) == 1
    assert trainer.step == 12 and trainer.rollbacks == 1
    assert trainer.learning_rate_scale == pytest.approx(0.5)
    for weight in trainer.model.weights:
        assert np.all(np.isfinite(weight.numpy())), weight.path
    assert all_finite(str(tmp_path / "ckpt-12"))
    [line] = [r.getMessage() for r in caplog.records if "divergence at step" in r.getMessage()]
    assert line.startswith("divergence at step 7 (the loss became NaN; loss nan): rolled back "
                           f"to {tmp_path / 'ckpt-4'} (step 4), learning rate x0.5")
    log = events(tmp_path)
    [rollback] = [e for e in log if e.get("event") == "rollback"]
    assert rollback == {"step": 4, "event": "rollback", "diverged_step": 7,
                        "cause": "the loss became NaN", "loss": None,
                        "learning_rate_scale": 0.5}
    # The windows logged after step 4 by the diverged attempt were dropped: each step once.
    steps = [e["step"] for e in log if "event" not in e]
    assert steps == [2, 4, 6, 8, 10, 12]
    # The logged rate is the scaled schedule's: 0.5 x the constant-decay rate at step 11.
    schedule = optimization.WarmupPolynomialDecay(1e-2, 12, 0)
    assert log[-1]["learning_rate"] == pytest.approx(0.5 * float(schedule(11)), rel=1e-5)


def test_a_resumed_run_keeps_the_lowered_learning_rate(tmp_path):
    trainer, _ = make_trainer(tmp_path, at_step=7)
    trainer.train(dataset_fn)
    resumed, _ = make_trainer(tmp_path, steps=16, at_step=100)
    resumed.train(dataset_fn)
    assert resumed.step == 16
    assert resumed.learning_rate_scale == pytest.approx(0.5) and resumed.rollbacks == 1


def test_divergence_before_the_first_checkpoint_returns_to_the_starting_weights(tmp_path):
    trainer, _ = make_trainer(tmp_path, steps=6, save_every=6, at_step=3)
    start = [w.numpy().copy() for w in trainer.model.weights]
    snapshots = set(os.listdir(os.environ.get("TMPDIR", "/tmp")))
    events_seen = []
    trainer.train(dataset_fn, on_checkpoint=lambda step, path: events_seen.append(step))
    assert trainer.step == 6 and trainer.rollbacks == 1 and events_seen == [6]
    assert any(np.any(a != b.numpy()) for a, b in zip(start, trainer.model.weights))
    rollback = [e for e in events(tmp_path) if e.get("event") == "rollback"]
    assert rollback[0]["step"] == 0 and rollback[0]["diverged_step"] == 3
    # The scratch copy of the starting state is gone.
    assert not {n for n in os.listdir(os.environ.get("TMPDIR", "/tmp"))
                if n.startswith("albert_tf_start_")} - snapshots


def test_a_loss_spike_rolls_back(tmp_path):
    options = DivergenceOptions(spike_factor=10, spike_window=20)
    trainer, task = make_trainer(tmp_path, steps=30, save_every=10, divergence=options,
                                 at_step=25, factor=1e4)
    trainer.train(dataset_fn)
    assert int(task.fired.numpy()) == 1 and trainer.rollbacks == 1
    [rollback] = [e for e in events(tmp_path) if e.get("event") == "rollback"]
    assert rollback["step"] == 20 and rollback["diverged_step"] == 25
    assert rollback["cause"].startswith("loss spike: ")
    assert "the median of the last 20 steps" in rollback["cause"]


def test_an_infinite_gradient_norm_rolls_back(tmp_path):
    trainer, _ = make_trainer(tmp_path, at_step=5, infinite_gradient=True)
    trainer.train(dataset_fn)
    [rollback] = [e for e in events(tmp_path) if e.get("event") == "rollback"]
    # (inf x a zero element of the upstream gradient is NaN: the norm is NaN or infinite)
    assert rollback["cause"] in ("the gradient norm became infinite",
                                 "the gradient norm became NaN")
    assert rollback["loss"] is not None and math.isfinite(rollback["loss"])
    assert all_finite(str(tmp_path / "ckpt-12"))


def test_stop_raises_one_line_naming_step_cause_and_checkpoint(tmp_path):
    trainer, _ = make_trainer(tmp_path, at_step=7,
                              divergence=DivergenceOptions(on_divergence="stop"))
    with pytest.raises(training.NonFiniteLossError) as stopped:
        trainer.train(dataset_fn)
    message = str(stopped.value)
    assert "\n" not in message
    assert message.startswith(
        "training diverged at step 7: the loss became NaN; stopping (--on_divergence=stop). "
        f"The last good checkpoint is {tmp_path / 'ckpt-4'} (try a lower --learning_rate")
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-4")
    assert all_finite(str(tmp_path / "ckpt-4"))


def test_the_run_stops_after_max_rollbacks(tmp_path):
    trainer, task = make_trainer(tmp_path, at_step=7, once=False,
                                 divergence=DivergenceOptions(max_rollbacks=2))
    with pytest.raises(training.DivergenceError,
                       match=r"^training diverged at step 7: the loss became NaN; stopping "
                             r"after 2 rollbacks \(--max_rollbacks=2\)\. The last good "
                             r"checkpoint is .*ckpt-4 "):
        trainer.train(dataset_fn)
    assert int(task.fired.numpy()) == 3 and trainer.rollbacks == 2
    assert trainer.learning_rate_scale == pytest.approx(0.25)
    assert all_finite(str(tmp_path / "ckpt-4"))


def test_without_the_guard_a_nan_window_still_stops(tmp_path):
    trainer, _ = make_trainer(tmp_path, at_step=7, divergence=None)
    with pytest.raises(training.NonFiniteLossError, match="between steps 6 and 8"):
        trainer.train(dataset_fn)


def test_guard_inspect_finds_the_first_diverged_step():
    guard = DivergenceGuard(DivergenceOptions(spike_factor=3, spike_window=10))
    assert guard.inspect(0, [2.0, 1.0, 1.0, 1.0], [1.0] * 4) is None
    assert guard.initial_loss == 2.0
    # Above 3 x the median (1.0) but not above the first step's loss: a noisy batch.
    assert guard.inspect(4, [1.9], [1.0]) is None
    event = guard.inspect(5, [1.0, 2.9, 3.5, float("nan")], [1.0] * 4)
    assert (event.step, event.loss) == (8, 3.5)
    assert event.cause == ("loss spike: 3.5 > 3 x 1, the median of the last 7 steps "
                           "(first step: 2)")
    assert guard.inspect(8, [1.0, float("inf")], [1.0, 1.0]).cause == \
        "the loss became infinite"
    assert guard.inspect(10, [1.0], [float("nan")]).cause == "the gradient norm became NaN"
    # A resumed run's first-step loss comes from its checkpoint.
    resumed = DivergenceGuard(DivergenceOptions(spike_factor=3), initial_loss=100.0)
    assert resumed.inspect(0, [1.0, 50.0], [1.0, 1.0]) is None
    off = DivergenceGuard(DivergenceOptions(spike_factor=0), check_gradients=False)
    assert off.inspect(0, [1.0, 1e30], [float("inf")] * 2) is None


def test_a_run_that_starts_at_its_final_loss_is_not_a_spike():
    """run_distill.py's layers:2 student from its SST-2 teacher (measured): 0.0062 at step 1,
    a batch of 0.1495 later; the job's floor (chance level) keeps it a noisy batch."""
    floored = DivergenceGuard(DivergenceOptions(loss_floor=0.693))  # ln 2: chance on SST-2
    assert floored.inspect(0, [0.0062, 0.0064, 0.0066, 0.1495, 0.0703], [1.0] * 5) is None
    assert floored.inspect(5, [0.0065, 0.9], [1.0] * 2).cause.startswith("loss spike: 0.9")
    unfloored = DivergenceGuard(DivergenceOptions())
    assert unfloored.inspect(0, [0.0062, 0.0064, 0.0066, 0.1495], [1.0] * 4).step == 4


def test_a_diverging_start_is_caught_at_its_second_step():
    """RTE at learning rate 50 (measured): 0.70 at step 1, 681 at step 2."""
    guard = DivergenceGuard(DivergenceOptions())
    event = guard.inspect(0, [0.70, 681.0, 21638.0], [1.0] * 3)
    assert event.step == 2 and event.cause.startswith("loss spike: 681 > 5 x 0.7")


@pytest.mark.parametrize("field,value,message", [
    ("on_divergence", "ignore", "--on_divergence must be one of rollback, stop"),
    ("spike_factor", 0.5, "--spike_factor must be above 1 (or 0: no spike check), got 0.5"),
    ("spike_factor", 1.0, "--spike_factor must be above 1"),
    ("spike_window", 0, "--spike_window must be at least 1 step"),
    ("lr_factor", 1.0, "--divergence_lr_factor must be in (0, 1)"),
    ("lr_factor", 0.0, "--divergence_lr_factor must be in (0, 1)"),
    ("max_rollbacks", -1, "--max_rollbacks must be >= 0"),
])
def test_bad_options_name_their_flag(field, value, message):
    with pytest.raises(ValueError) as bad:
        DivergenceOptions(**{field: value}).validate()
    assert str(bad.value).startswith(message)


def test_a_nan_evaluation_is_never_the_best_and_never_written(tmp_path):
    from albert_tf.training import best_checkpoint

    tracker = best_checkpoint.BestCheckpointTracker(str(tmp_path), "eval_accuracy")
    assert not tracker.record(5, {"eval_accuracy": float("nan"), "eval_loss": float("inf")},
                              model=None)
    assert tracker.best is None and not (tmp_path / "best_eval.json").exists()
    text = (tmp_path / "eval_results.txt").read_text()
    assert text == "global_step = 5\nnonfinite_metrics = eval_accuracy,eval_loss\n"
    assert "nan" not in text and "inf" not in text
    assert tracker.evaluated_steps() == {5}
    tracker.best = {"eval_accuracy": 0.5, "global_step": 1}
    assert not tracker.record(6, {"eval_accuracy": float("nan")}, model=None)


@pytest.mark.slow  # ~20 s: a subprocess with two logical CPUs
def test_rollback_under_a_mirrored_strategy():
    import subprocess
    import sys

    from tests.conftest import HELPERS, REPO_ROOT

    done = subprocess.run([sys.executable, str(HELPERS / "mirrored_guard_run.py")],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "step": 12, "rollbacks": 1, "scale": 0.5, "finite": True}
    assert "divergence at step 7 (the loss became NaN" in done.stderr
