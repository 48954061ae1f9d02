"""The one training / evaluation / checkpoint / summary loop that every CLI uses.

A *task* says how to turn a batch into a loss (see `Objective`); this module does
the rest: distribution, gradient accumulation, global-norm clipping, mixed
precision loss scaling, XLA, checkpoints with resume, the divergence guard (rollback
to the last good checkpoint, or a clear stop), TensorBoard summaries and console
progress.

Exactness under distribution. A task normalises its loss with *global*
normalisers (e.g. the number of masked tokens in the whole global batch),
computed from the labels and all-reduced before the forward pass, so the sum
of the replicas' losses is the loss of the global batch. Gradients are summed
over micro-batches and replicas, then clipped by their global norm (1.0, as
the original) and applied once: one step with R replicas x k micro-batches of
b examples equals one step of a single device on the R*k*b batch.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence

import keras
import tensorflow as tf
from absl import logging

from albert_tf.training import distribute, optimization, preemption, worker_loss
from albert_tf.training.divergence import Divergence, DivergenceGuard, DivergenceOptions
from albert_tf.errors import Preempted, UserError, UserFileNotFoundError, UserValueError


class DivergenceError(UserError, RuntimeError):
    """Training diverged and the guard stopped it; the last checkpoint on disk is intact."""


class NonFiniteLossError(DivergenceError):
    """Training produced a NaN or infinite loss; the last checkpoint on disk is intact."""


class CorruptedInputError(UserError, RuntimeError):
    """The input pipeline hit a corrupted record (TensorFlow does not say in which file)."""


class Objective:
    """What the loop needs to know about a model's loss.

    normalizers(features) -> dict of float32 scalars summed over examples (all-reduced
        across replicas and micro-batches before `loss` is called).
    loss(model, features, normalizers, training) -> (loss, metric_sums): `loss` is this
        micro-batch's share of the global-batch loss; `metric_sums` are float32 scalars
        that are summed over steps and replicas.
    finalize(metric_sums) -> dict of float metrics (ratios of the sums).
    trainable_variables: weights the loss itself owns, trained with the model's and kept
        in the training checkpoints, never in the model's exports (distillation's
        hidden-state projection); none by default.
    """

    trainable_variables: Sequence[tf.Variable] = ()

    def normalizers(self, features) -> Dict[str, tf.Tensor]:
        raise NotImplementedError

    def loss(self, model, features, normalizers, training):
        raise NotImplementedError

    def finalize(self, sums: Dict[str, float]) -> Dict[str, float]:
        raise NotImplementedError


@dataclasses.dataclass
class TrainingConfig:
    """Loop options; `num_train_steps` counts optimizer updates."""

    output_dir: str
    num_train_steps: int
    steps_per_loop: int = 100  # the original's iterations_per_loop: steps per host round trip
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    gradient_accumulation_steps: int = 1
    clip_norm: Optional[float] = 1.0
    jit_compile: bool = False
    # Resume the input where the checkpoint left it: the iterator is saved in the checkpoint
    # where the strategy allows (one replica), else a resumed run skips the batches read.
    checkpoint_iterator: bool = True
    # SIGTERM (or GCE's maintenance notice) during train(): stop after the next step to
    # start, save a checkpoint there and raise errors.Preempted (every worker alike).
    handle_preemption: bool = True
    summary_dir: Optional[str] = None  # TensorBoard logs; default <output_dir>/train
    # Stop (with a checkpoint) at the first window that ends past this many seconds of
    # this call's training; the rest of the schedule is left undone. None: no limit.
    max_train_seconds: Optional[float] = None
    # The divergence guard (per-step checks, rollback). None: no per-step record; a window
    # with a non-finite loss stops the run (NonFiniteLossError).
    divergence: Optional[DivergenceOptions] = None

    def scheduled_checkpoint(self, step: int) -> bool:
        """Whether the schedule saves (and evaluates) a checkpoint at `step`: every
        save_checkpoints_steps steps and at the last step. Others are a time limit's or a
        preemption's."""
        return step % self.save_checkpoints_steps == 0 or step >= self.num_train_steps


class _GuardState(tf.Module):
    """What the guard keeps in every checkpoint: the learning-rate scale, the number of
    rollbacks so far and the loss of the run's first step (-1: none yet); a resumed run
    goes on with all three."""

    def __init__(self, learning_rate_scale: Optional[tf.Variable]):
        super().__init__(name="divergence_guard")
        self.learning_rate_scale = learning_rate_scale
        self.rollbacks = tf.Variable(0, dtype=tf.int64, trainable=False, name="rollbacks")
        self.initial_loss = tf.Variable(-1.0, dtype=tf.float32, trainable=False,
                                        name="initial_loss")


class _InputPosition(tf.Module):
    """How many optimizer steps' worth of input the run has read (rolled-back steps too;
    kept in every checkpoint): where a resumed run's input starts when the iterator itself
    cannot be checkpointed."""

    def __init__(self):
        super().__init__(name="input_position")
        self.steps_read = tf.Variable(0, dtype=tf.int64, trainable=False, name="steps_read")


def _zeros_like_sums(names):
    return {name: tf.constant(0.0) for name in names}


class Trainer:
    """Trains `model` on `dataset_fn` batches under `strategy`; resumable from `output_dir`.

    Build the model and optimizer inside `strategy.scope()` before passing them.
    `dataset_fn(input_context)` returns each replica's batches of one optimizer step:
    global batch / replicas examples (`batching.per_replica_batch`), which each step
    splits, in order, into `gradient_accumulation_steps` micro-batches.
    """

    def __init__(self, strategy: tf.distribute.Strategy, model: keras.Model,
                 optimizer: keras.optimizers.Optimizer, task: Objective, config: TrainingConfig,
                 metric_names, learning_rate_fn: Optional[Callable] = None):
        if config.gradient_accumulation_steps < 1:
            raise ValueError("gradient_accumulation_steps must be >= 1, got "
                             f"{config.gradient_accumulation_steps}")
        if getattr(optimizer, "global_clipnorm", None) or getattr(optimizer, "clipnorm", None):
            raise ValueError("create the optimizer without clipping: the Trainer clips the "
                             "summed gradient itself (clipping per replica would be wrong)")
        self.strategy = strategy
        self.model = model
        self.optimizer = optimizer
        self.task = task
        self.config = config
        self.metric_names = list(metric_names)
        self.learning_rate_fn = learning_rate_fn
        self._loss_scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
        with strategy.scope():
            optimizer.build(self.trainable_variables)
            self._guard_state = _GuardState(optimization.learning_rate_scale(optimizer))
        scale = self._guard_state.learning_rate_scale
        # The rate before any rollback (a constant rate's variable holds the rate itself).
        self._base_rate = float(scale.numpy()) if scale is not None else 1.0
        if config.divergence is not None:
            config.divergence.validate()
            if (config.divergence.on_divergence == "rollback"
                    and self._guard_state.learning_rate_scale is None):
                raise ValueError("rolling back on divergence needs a learning rate it can "
                                 "scale: a constant rate or an optimization.ScaledSchedule")
        self.is_chief = distribute.is_chief(strategy)
        # Host variables, outside the strategy's scope: one per process.
        self._stop = preemption.StopRequest()
        self._input_position = _InputPosition()
        self._iterator_saved = False
        self._grad_fn = tf.function(self._micro_batch_gradients, jit_compile=config.jit_compile)
        self._train_fn = None
        self.stopped_early = False  # the last train() call hit config.max_train_seconds

    # --- one step --------------------------------------------------------------------

    @property
    def trainable_variables(self) -> List[tf.Variable]:
        """The model's trainable weights, then the objective's own."""
        return list(self.model.trainable_variables) + list(self.task.trainable_variables)

    def _micro_batch_gradients(self, features, normalizers):
        variables = self.trainable_variables
        with tf.GradientTape() as tape:
            loss, sums = self.task.loss(self.model, features, normalizers, training=True)
            scaled = self.optimizer.scale_loss(loss) if self._loss_scaled else loss
        grads = tape.gradient(scaled, variables)
        grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                 for g, v in zip(grads, variables)]
        return grads, loss, sums

    def _replica_step(self, features, stop_request):
        k = self.config.gradient_accumulation_steps
        ctx = tf.distribute.get_replica_context()
        # A stop request rides on the all-reduce every step makes anyway: every replica of
        # every worker learns of any worker's request in the same step.
        normalizers = ctx.all_reduce(tf.distribute.ReduceOp.SUM, dict(
            self.task.normalizers(features), stop=tf.cast(stop_request, tf.float32)))
        stop = normalizers.pop("stop")
        grad_fn = self._grad_fn
        if k == 1:
            grads, loss, sums = grad_fn(features, normalizers)
        else:
            micro = {name: tf.reshape(v, tf.concat([[k, -1], tf.shape(v)[1:]], 0))
                     for name, v in features.items()}
            grads, loss, sums = grad_fn({n: v[0] for n, v in micro.items()}, normalizers)
            for i in range(1, k):
                g_i, l_i, s_i = grad_fn({n: v[i] for n, v in micro.items()}, normalizers)
                grads = [a + b for a, b in zip(grads, g_i)]
                loss = loss + l_i
                sums = {name: sums[name] + s_i[name] for name in sums}
        # Sum over replicas, unscale, clip the *global* gradient, then hand each replica
        # 1/R of it: the optimizer's own cross-replica sum restores the total.
        grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        if self._loss_scaled:
            scale = tf.cast(self.optimizer.scale_loss(1.0), tf.float32)
            grads = [g / scale for g in grads]
        if self.config.clip_norm:
            grads, grad_norm = tf.clip_by_global_norm(grads, self.config.clip_norm)
        elif self.config.divergence is not None:
            grad_norm = tf.linalg.global_norm(grads)
        else:
            grad_norm = tf.constant(0.0)
        replicas = float(self.strategy.num_replicas_in_sync)
        if self._loss_scaled:
            grads = [g * (scale / replicas) for g in grads]
        elif replicas != 1.0:  # (a pass over every gradient saved on one device)
            grads = [g / replicas for g in grads]
        self.optimizer.apply(grads, self.trainable_variables)
        sums = dict(sums)
        sums["loss_sum"] = loss
        sums["nonfinite"] = tf.cast(tf.logical_not(tf.math.is_finite(loss)), tf.float32)
        sums["grad_norm"] = tf.cast(grad_norm, tf.float32)
        sums["stop"] = stop
        return sums

    def build_train_function(self):
        """The compiled loop `train_loop(iterator, num_steps)` that `train()` runs: it
        takes `num_steps` (int32 scalar tensor) optimizer steps on batches from
        `iterator`, fewer when a stop is requested (it ends after the step that saw the
        request), and returns the summed metrics, `loss_sum`, `nonfinite`, `stop` (> 0:
        stopped on request) and `steps` (float32 scalars), and with the divergence guard
        on, each step's loss and gradient norm (`step_losses`, `step_grad_norms`: float32
        [steps]). Public for benchmarks and custom loops; no checkpoints, summaries or
        logging happen in it."""
        names = self.metric_names + ["loss_sum", "nonfinite", "steps", "stop"]
        record = self.config.divergence is not None
        strategy = self.strategy
        stop_request = self._stop.variable

        @tf.function
        def train_loop(iterator, num_steps):
            totals = _zeros_like_sums(names)
            losses = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
            norms = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
            for i in tf.range(num_steps):
                # Read before every step: a signal's reader thread may set it meanwhile.
                per_replica = strategy.run(self._replica_step,
                                           args=(next(iterator), stop_request.read_value()))
                step_sums = {name: strategy.reduce(tf.distribute.ReduceOp.SUM,
                                                   per_replica[name], axis=None)
                             for name in names[:-2]}
                step_sums["steps"] = tf.constant(1.0)
                # Already all-reduced in the step: any replica's value is every worker's.
                step_sums["stop"] = strategy.experimental_local_results(per_replica["stop"])[0]
                if record:  # (a Python bool: fixed when traced)
                    losses = losses.write(i, step_sums["loss_sum"])
                    # Every replica holds the same all-reduced gradient, hence the mean.
                    norms = norms.write(i, strategy.reduce(
                        tf.distribute.ReduceOp.MEAN, per_replica["grad_norm"], axis=None))
                # Rebuilt, not mutated: autograph carries only reassigned loop variables.
                totals = {name: totals[name] + step_sums[name] for name in names}
                if step_sums["stop"] > 0:  # the same value on every worker: all stop here
                    break
            if record:
                totals = dict(totals, step_losses=losses.stack(), step_grad_norms=norms.stack())
            return totals

        return train_loop

    # --- the loop --------------------------------------------------------------------

    @property
    def step(self) -> int:
        return int(self.optimizer.iterations.numpy())

    def make_checkpoint(self, iterator=None) -> tf.train.Checkpoint:
        items = {"model": self.model, "optimizer": self.optimizer,
                 "divergence_guard": self._guard_state, "input_position": self._input_position}
        if self.task.trainable_variables:  # (absent otherwise: older checkpoints still fit)
            items["objective"] = tf.Module(name="objective")
            items["objective"].weights = list(self.task.trainable_variables)
        if iterator is not None:
            items["iterator"] = iterator
        return tf.train.Checkpoint(**items)

    def train(self, dataset_fn, on_checkpoint: Optional[Callable[[int, str], None]] = None
              ) -> Dict[str, float]:
        """Trains to `num_train_steps`, resuming from the latest checkpoint in output_dir.

        `on_checkpoint(step, path)` runs after each checkpoint is written (evaluation hooks).
        Returns the metrics of the last logging window. With `config.divergence`, a
        diverged window is rolled back (or stops the run: DivergenceError) before anything
        is logged or saved, so no checkpoint holds the weights of a diverged step.
        """
        cfg = self.config
        self.stopped_early = False
        self._stop.clear()
        iterator, checkpoint, manager = self._resume(dataset_fn)
        if self.is_chief:
            self._trim_jsonl(self.step)
        if self._train_fn is None:
            self._train_fn = self.build_train_function()
        guard = None
        if cfg.divergence is not None:
            initial = float(self._guard_state.initial_loss.numpy())
            guard = DivergenceGuard(cfg.divergence, check_gradients=not self._loss_scaled,
                                    initial_loss=initial if initial >= 0 else None)
        writer = tf.summary.create_file_writer(
            cfg.summary_dir or os.path.join(cfg.output_dir, "train")) if self.is_chief \
            else tf.summary.create_noop_writer()
        start_snapshot = None
        watcher = preemption.PreemptionWatcher(self._stop) if cfg.handle_preemption \
            else contextlib.nullcontext()
        try:
            if guard is not None and cfg.divergence.on_divergence == "rollback" \
                    and manager.latest_checkpoint is None:
                start_snapshot = self._write_start_snapshot(checkpoint)
            with watcher:
                return self._train_windows(iterator, checkpoint, manager, guard,
                                           start_snapshot, writer, on_checkpoint)
        except tf.errors.OpError as err:
            worker_loss.reraise(err, self.strategy, cfg.output_dir)
            raise
        finally:
            writer.flush()
            if start_snapshot is not None:
                shutil.rmtree(os.path.dirname(start_snapshot), ignore_errors=True)

    def _train_windows(self, iterator, checkpoint, manager, guard, start_snapshot, writer,
                       on_checkpoint) -> Dict[str, float]:
        """train()'s loop over windows of steps: run, check, log, save, evaluate."""
        cfg = self.config
        last_metrics: Dict[str, float] = {}
        # The rate and ETA count from here (and again after a rollback); the time limit
        # counts from the call.
        start_step = self.step
        start_time = budget_start = time.time()
        while self.step < cfg.num_train_steps:
            step = self.step
            next_save = (step // cfg.save_checkpoints_steps + 1) * cfg.save_checkpoints_steps
            num_steps = min(cfg.steps_per_loop, cfg.num_train_steps - step, next_save - step)
            loop_start = time.time()
            totals = self._run_window(iterator, num_steps)
            elapsed = time.time() - loop_start
            stop = totals.pop("stop") > 0
            if guard is not None:
                event = guard.inspect(step, totals.pop("step_losses"),
                                      totals.pop("step_grad_norms"))
                if guard.initial_loss is not None:
                    self._guard_state.initial_loss.assign(guard.initial_loss)
                if event is not None:
                    self._on_divergence(event, checkpoint, manager, start_snapshot)
                    guard.reset()
                    start_step, start_time = self.step, time.time()
                    continue
            elif totals["nonfinite"] > 0:
                raise NonFiniteLossError(
                    f"the loss became NaN or infinite between steps {step} and {self.step}; "
                    f"stopping. The last good checkpoint is {manager.latest_checkpoint or 'none'} "
                    "(try a lower --learning_rate, or float32 instead of mixed_float16)")
            last_metrics = self._log(writer, totals, elapsed, start_step, start_time)
            out_of_time = (cfg.max_train_seconds is not None
                           and time.time() - budget_start >= cfg.max_train_seconds
                           and self.step < cfg.num_train_steps)
            if cfg.scheduled_checkpoint(self.step) or out_of_time or stop:
                path = manager.save(checkpoint_number=self.step)
                logging.info("saved checkpoint %s", path)
                # A preempted run leaves the evaluation to the resumed one (its grace period
                # is short); a checkpoint off the schedule is not evaluated at all.
                if on_checkpoint is not None and not stop:
                    on_checkpoint(self.step, path)
            if stop:
                raise self._preempted()
            if out_of_time:
                logging.warning("time limit of %.0f s reached: stopped at step %d of %d",
                                cfg.max_train_seconds, self.step, cfg.num_train_steps)
                self.stopped_early = True
                break
        return last_metrics

    def _run_window(self, iterator, num_steps: int) -> Dict:
        """One call of the compiled loop: scalars as floats, per-step records as numpy."""
        try:
            totals = self._train_fn(iterator, tf.constant(num_steps))
        except tf.errors.DataLossError as err:
            raise CorruptedInputError(
                f"corrupted training input ({err.message.strip()}); "
                "albert_tf.pretraining.inputs.locate_corruption(files) finds the file") from err
        totals = {name: value.numpy() if value.shape.rank else float(value)
                  for name, value in totals.items()}
        self._input_position.steps_read.assign_add(int(totals["steps"]))
        return totals

    def _preempted(self) -> Preempted:
        """The exception that ends a run stopped on a preemption notice (just saved)."""
        cfg = self.config
        why = self._stop.reason or "a preemption notice reached another worker"
        path = os.path.join(cfg.output_dir, f"ckpt-{self.step}")
        return Preempted(f"{why}; saved checkpoint {path} at step {self.step} of "
                         f"{cfg.num_train_steps}: rerun the same command to resume there",
                         self.step, path)

    # --- the divergence guard ------------------------------------------------------------

    @property
    def learning_rate_scale(self) -> float:
        """What the guard's rollbacks have multiplied the learning rate by (1.0: none)."""
        variable = self._guard_state.learning_rate_scale
        if variable is None or self.config.divergence is None:
            return 1.0
        return float(variable.numpy()) / self._base_rate if self._base_rate else 1.0

    @property
    def rollbacks(self) -> int:
        """Rollbacks so far in this run (kept in its checkpoints)."""
        return int(self._guard_state.rollbacks.numpy())

    def _write_start_snapshot(self, checkpoint) -> str:
        """The starting weights, optimizer and input position, written to a scratch
        directory: what a rollback returns to before the first checkpoint exists."""
        directory = tempfile.mkdtemp(prefix="albert_tf_start_")
        return checkpoint.write(os.path.join(directory, "start"))

    def _on_divergence(self, event: Divergence, checkpoint, manager, start_snapshot) -> None:
        """Rolls back to the last good checkpoint (or the starting state) with the learning
        rate scaled down, or raises DivergenceError when the guard must stop."""
        options = self.config.divergence
        latest = manager.latest_checkpoint
        target = latest or start_snapshot
        rollbacks = self.rollbacks
        if options.on_divergence == "stop" or rollbacks >= options.max_rollbacks \
                or target is None:
            raise self._divergence_error(event, latest, rollbacks)
        scale = self._guard_state.learning_rate_scale
        new_scale = float(scale.numpy()) * options.lr_factor
        # Without a saved iterator the input goes on from where it is; a resumed run must
        # skip what was read, not what the checkpoint had read.
        steps_read = self._input_position.steps_read.numpy()
        if latest:
            checkpoint.restore(latest).expect_partial()
        else:
            checkpoint.read(start_snapshot).expect_partial()
        if not self._iterator_saved:
            self._input_position.steps_read.assign(steps_read)
        scale.assign(new_scale)
        self._guard_state.rollbacks.assign(rollbacks + 1)
        where = latest or "the starting weights"
        logging.warning(
            "divergence at step %d (%s; loss %.4g): rolled back to %s (step %d), learning "
            "rate x%g (now x%.4g of the schedule), rollback %d of at most %d", event.step,
            event.cause, event.loss, where, self.step, options.lr_factor,
            self.learning_rate_scale, rollbacks + 1, options.max_rollbacks)
        if self.is_chief:
            self._trim_jsonl(self.step)
            self._append_jsonl({"step": self.step, "event": "rollback",
                                "diverged_step": event.step, "cause": event.cause,
                                "loss": event.loss if math.isfinite(event.loss) else None,
                                "learning_rate_scale": self.learning_rate_scale})

    def _divergence_error(self, event: Divergence, latest: Optional[str],
                          rollbacks: int) -> DivergenceError:
        options = self.config.divergence
        if options.on_divergence == "stop":
            why = "stopping (--on_divergence=stop)"
        elif rollbacks >= options.max_rollbacks:
            why = (f"stopping after {rollbacks} rollback{'s' * (rollbacks != 1)} "
                   f"(--max_rollbacks={options.max_rollbacks})")
        else:
            why = "stopping (nothing to roll back to)"
        error = NonFiniteLossError if "NaN" in event.cause or "infinite" in event.cause \
            else DivergenceError
        where = f"The last good checkpoint is {latest}" if latest else \
            "No checkpoint was written yet"
        return error(f"training diverged at step {event.step}: {event.cause}; {why}. {where} "
                     "(try a lower --learning_rate or --hparams=paper, more --warmup_step, "
                     "another --seed)")

    def _restore(self, checkpoint) -> tf.train.CheckpointManager:
        """Restores the newest checkpoint of output_dir (if any); returns the saving manager.

        Every worker restores from output_dir; under a multi-worker strategy only the
        chief saves there, the others save (collectively, as TF requires) to a
        scratch directory of their own.
        """
        latest = tf.train.latest_checkpoint(self.config.output_dir)
        if latest:
            # Partial: an evaluation-only restore has no input iterator to match.
            checkpoint.restore(latest).expect_partial()
            number = int(latest.rsplit("-", 1)[1])
            if self.step != number:
                raise RuntimeError(f"{latest} restored step {self.step}, expected {number}: "
                                   "the checkpoint does not hold this model's optimizer state")
            logging.info("resumed from %s at step %d", latest, self.step)
        save_dir = self.config.output_dir if self.is_chief else tempfile.mkdtemp(
            prefix="albert_tf_worker_ckpt_")
        return tf.train.CheckpointManager(checkpoint, save_dir,
                                          max_to_keep=self.config.keep_checkpoint_max,
                                          checkpoint_name="ckpt")

    def restore_latest(self) -> str:
        """Restores model and optimizer from the newest checkpoint (evaluation-only runs)."""
        latest = tf.train.latest_checkpoint(self.config.output_dir)
        if not latest:
            raise UserFileNotFoundError(f"no checkpoint to evaluate in {self.config.output_dir}")
        self._restore(self.make_checkpoint())
        return latest

    def _append_jsonl(self, record) -> None:
        """One JSON line per logging window in <summary dir>/metrics.jsonl (easy to plot)."""
        cfg = self.config
        directory = cfg.summary_dir or os.path.join(cfg.output_dir, "train")
        tf.io.gfile.makedirs(directory)
        with tf.io.gfile.GFile(os.path.join(directory, "metrics.jsonl"), "a") as handle:
            handle.write(json.dumps(record) + "\n")

    def _trim_jsonl(self, step: int) -> None:
        """Drops the metrics.jsonl lines of steps after `step` (the checkpoint resumed from):
        an interrupted run logged windows that the resumed run trains and logs again."""
        cfg = self.config
        path = os.path.join(cfg.summary_dir or os.path.join(cfg.output_dir, "train"),
                            "metrics.jsonl")
        if not tf.io.gfile.exists(path):
            return
        with tf.io.gfile.GFile(path) as handle:
            lines = handle.read().splitlines()
        kept = []
        for line in lines:
            try:
                if json.loads(line).get("step", 0) <= step:
                    kept.append(line)
            except (ValueError, AttributeError):
                pass  # a line cut by the interruption
        if len(kept) == len(lines):
            return
        tmp = f"{path}.tmp-{os.getpid()}"
        with tf.io.gfile.GFile(tmp, "w") as handle:
            handle.write("".join(line + "\n" for line in kept))
        tf.io.gfile.rename(tmp, path, overwrite=True)
        logging.info("%s: dropped %d lines logged after step %d by the interrupted run", path,
                     len(lines) - len(kept), step)

    def _single_pipeline(self) -> bool:
        """One replica fed by a plain (checkpointable) iterator; else a distributed one."""
        return (self.strategy.num_replicas_in_sync == 1
                and not isinstance(self.strategy, tf.distribute.TPUStrategy))

    def _resume(self, dataset_fn):
        """(iterator, checkpoint, manager) of train(), restored from the latest checkpoint.

        With one replica the iterator is in the checkpoint. A distributed iterator cannot be
        (TensorFlow 2.21), so the input restarts and skips, element by element, what the
        checkpointed run had read: the same position when the input order is reproducible
        (a seed and --deterministic_input or --deterministic)."""
        cfg = self.config
        self._iterator_saved = cfg.checkpoint_iterator and self._single_pipeline()
        if self._iterator_saved:
            iterator = self._make_iterator(dataset_fn)
            checkpoint = self.make_checkpoint(iterator)
            return iterator, checkpoint, self._restore(checkpoint)
        checkpoint = self.make_checkpoint()
        manager = self._restore(checkpoint)
        skip = int(self._input_position.steps_read.numpy()) if cfg.checkpoint_iterator else 0
        if skip:
            logging.info("this strategy's input iterator cannot be checkpointed: skipping the "
                         "%d steps of input the checkpoint had read", skip)
        elif self.step and cfg.checkpoint_iterator:
            logging.warning("the checkpoint at step %d records no input position (written by "
                            "an older albert-tf): the input restarts from its beginning",
                            self.step)
        return self._make_iterator(dataset_fn, skip), checkpoint, manager

    def _make_iterator(self, dataset_fn, skip_steps: int = 0):
        """A checkpointable plain iterator on one replica, a distributed one otherwise; the
        first `skip_steps` optimizer steps' elements skipped."""
        if skip_steps:
            strategy, make = self.strategy, dataset_fn

            def dataset_fn(context):  # each input pipeline feeds its replicas in turn
                per_step = max(1, strategy.num_replicas_in_sync // context.num_input_pipelines)
                return make(context).skip(skip_steps * per_step)

        if self._single_pipeline():
            context = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                                 num_replicas_in_sync=1)
            return iter(dataset_fn(context))
        return iter(self.strategy.distribute_datasets_from_function(dataset_fn))

    def _log(self, writer, totals, elapsed, start_step, start_time) -> Dict[str, float]:
        cfg = self.config
        steps = max(totals["steps"], 1.0)
        # Tasks name their metrics for evaluation (eval_loss, eval_accuracy: the keys of
        # the original's eval_results.txt); here they are the training window's.
        metrics = {name[len("eval_"):] if name.startswith("eval_") else name: value
                   for name, value in self.task.finalize(totals).items()}
        metrics["loss"] = totals["loss_sum"] / steps
        examples = totals.get("examples", 0.0)
        metrics["sequences_per_sec"] = examples / elapsed if elapsed > 0 else 0.0
        step = self.step
        # The rate used by the last update of the window (a schedule of the step before it).
        if self.learning_rate_fn is not None:
            metrics["learning_rate"] = float(self.learning_rate_fn(step - 1))
        with writer.as_default(step=step):
            for name, value in metrics.items():
                tf.summary.scalar(name, value)
        if self.is_chief:
            self._append_jsonl(dict(metrics, step=step))
        done = step - start_step
        rate = done / max(time.time() - start_time, 1e-9)
        eta = (cfg.num_train_steps - step) / rate if rate > 0 else math.inf
        shown = " | ".join(f"{k} {v:.4g}" for k, v in metrics.items())
        logging.info("step %d/%d | %s | eta %s", step, cfg.num_train_steps, shown,
                     _format_seconds(eta))
        return metrics


def evaluate(strategy, model, task: Objective, dataset_fn, metric_names,
             max_steps: Optional[int] = None, checkpoint_dir: Optional[str] = None
             ) -> Dict[str, float]:
    """Runs `task.loss` (training=False) over the dataset (at most `max_steps` batches).
    A lost worker (multi-worker strategies) raises errors.WorkerLost naming the latest
    checkpoint of `checkpoint_dir`."""
    dataset = strategy.distribute_datasets_from_function(dataset_fn)

    # No data-dependent Python control flow here, so no AutoGraph (which cannot
    # convert this closure and would warn on every call).
    @tf.function(autograph=False)
    def eval_step(features):
        def replica(features):
            ctx = tf.distribute.get_replica_context()
            normalizers = ctx.all_reduce(tf.distribute.ReduceOp.SUM, task.normalizers(features))
            _, sums = task.loss(model, features, normalizers, training=False)
            return sums
        per_replica = strategy.run(replica, args=(features,))
        return {name: strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica[name], axis=None)
                for name in metric_names}

    totals = {name: 0.0 for name in metric_names}
    batches = 0
    try:
        for features in dataset:
            if max_steps is not None and batches >= max_steps:
                break
            for name, value in eval_step(features).items():
                totals[name] += float(value)
            batches += 1
    except tf.errors.OpError as err:
        worker_loss.reraise(err, strategy, checkpoint_dir)
        raise
    if batches == 0:
        raise UserValueError("the evaluation data produced no batch (is it smaller than one batch?)")
    metrics = task.finalize(totals)
    metrics["eval_batches"] = batches
    return metrics


def _format_seconds(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s"


# The name before training objectives had their own name (a data set and a task family are
# "tasks" too); kept for old imports.
Task = Objective
