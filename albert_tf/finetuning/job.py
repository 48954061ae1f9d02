"""The fine-tuning job shared by run_classifier.py, run_squad.py and run_race.py.

It follows the original scripts' flow: train for `train_step` steps with AdamW
(or LAMB), warmup and linear decay; evaluate every saved checkpoint; keep the
best one (by the task's metric) as `model.ckpt-best` in the official TF1
format and record `best_trial.txt` / `eval_results.txt`; predict with the best
weights. Tasks supply the model, a `training.Task` for the loss, the datasets
and evaluation / prediction callbacks; this module supplies the loop.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, Optional

import keras
import tensorflow as tf
from absl import logging

from albert_tf import errors
from albert_tf import checkpoints, training
from albert_tf.training import best_checkpoint, distribute, optimization, run_dir
from albert_tf.kernels import precision

# Defined with the tracker in albert_tf.training.best_checkpoint; kept here for old imports.
BEST_PREFIX = best_checkpoint.BEST_PREFIX
CHECKPOINT_SUBDIR = best_checkpoint.CHECKPOINT_SUBDIR
BestCheckpointTracker = best_checkpoint.BestCheckpointTracker
evaluate_unrecorded_checkpoint = best_checkpoint.evaluate_unrecorded_checkpoint


class ExampleMeanTask(training.Task):
    """A task whose loss is the mean of a per-example loss over the global batch.

    Subclasses implement `per_example(model, features, training)` returning
    (losses [B] float32, extra metric sums dict), and `finalize_extra(sums)`.
    """

    metric_names = ("loss_total", "examples")

    def per_example(self, model, features, training):
        raise NotImplementedError

    def finalize_extra(self, sums: Dict[str, float]) -> Dict[str, float]:
        return {}

    def normalizers(self, features):
        first = next(iter(features.values()))
        return {"examples": tf.cast(tf.shape(first)[0], tf.float32)}

    def loss(self, model, features, normalizers, training):
        losses, extra = self.per_example(model, features, training)
        losses = tf.cast(losses, tf.float32)
        total = tf.reduce_sum(losses)
        sums = {"loss_total": total, "examples": tf.cast(tf.shape(losses)[0], tf.float32)}
        sums.update(extra)
        return total / normalizers["examples"], sums

    def finalize(self, sums):
        metrics = {"eval_loss": sums["loss_total"] / max(sums["examples"], 1.0)}
        metrics.update(self.finalize_extra(sums))
        return metrics


@dataclasses.dataclass
class FinetuningOptions:
    """Options of a fine-tuning job; defaults are the original run_classifier's flags.

    Batch sizes are global. `train_step` / `warmup_step` count optimizer updates.
    """

    output_dir: str
    init_checkpoint: Optional[str] = None
    init_from_group0: bool = False
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    train_batch_size: int = 32
    learning_rate: float = 5e-5
    train_step: int = 1000
    warmup_step: int = 0
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    iterations_per_loop: int = 1000
    optimizer: str = "adamw"
    mixed_precision: str = "float32"
    jit_compile: bool = False
    gradient_accumulation_steps: int = 1
    seed: Optional[int] = None

    @classmethod
    def from_fields(cls, source, **overrides) -> "FinetuningOptions":
        """Options taken field by field from a task's own options object `source`.

        Every field not in `overrides` must exist on `source` (AttributeError otherwise).
        """
        values = {f.name: getattr(source, f.name) for f in dataclasses.fields(cls)
                  if f.name not in overrides}
        values.update(overrides)
        return cls(**values)

    def validate(self, num_replicas: int) -> None:
        if not (self.do_train or self.do_eval or self.do_predict):
            raise ValueError("at least one of --do_train, --do_eval, --do_predict must be set")
        precision.check(self.mixed_precision)
        for name in ("train_step", "save_checkpoints_steps", "iterations_per_loop",
                     "train_batch_size", "gradient_accumulation_steps"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--{name} must be positive, got {getattr(self, name)}")
        per_step = num_replicas * self.gradient_accumulation_steps
        if self.do_train and self.train_batch_size % per_step:
            raise ValueError(
                f"--train_batch_size {self.train_batch_size} must be divisible by replicas "
                f"({num_replicas}) x --gradient_accumulation_steps "
                f"({self.gradient_accumulation_steps})")


def run_finetuning(options: FinetuningOptions, build_model: Callable[[str], keras.Model],
                   task: training.Task, metric: str,
                   train_dataset_fn: Optional[Callable] = None,
                   evaluate_fn: Optional[Callable[[keras.Model, int], Dict]] = None,
                   predict_fn: Optional[Callable[[keras.Model], Dict]] = None,
                   higher_is_better: bool = True,
                   strategy: Optional[tf.distribute.Strategy] = None,
                   identity: Optional[run_dir.RunIdentity] = None) -> Dict:
    """Trains, evaluates and predicts; returns {"train", "eval", "best", "predict", "model"}.

    build_model(dtype_policy) -> an unbuilt task model (built here, in the strategy scope).
    train_dataset_fn(input_context) -> per-replica training batches (of
        train_batch_size / replicas examples, times gradient_accumulation_steps).
    evaluate_fn(model, step) -> metrics dict containing `metric`; called after each
        checkpoint when do_eval, or once on the latest checkpoint without do_train.
    predict_fn(model) -> anything; called with the best weights (model.ckpt-best, or
        the final weights when nothing was evaluated) when do_predict.
    identity: what the run is (`run_dir.RunIdentity`: task, model config); default the
        task's class, the metric and the model's config. An output_dir holding a run of
        another identity is refused before anything is written (`run_dir.OutputDirError`).
    Output directory: albert_tf_run.json (the identity), checkpoints/ (resumable), train/
    logs, eval_results.txt, best_eval.json, best_trial.txt, model.ckpt-best.*. A rerun of
    the same command resumes from the latest checkpoint, first evaluating it when an
    interruption left it unevaluated.
    """
    strategy = strategy or tf.distribute.get_strategy()
    options.validate(strategy.num_replicas_in_sync)
    if options.do_train and train_dataset_fn is None:
        raise ValueError("do_train needs a train_dataset_fn")
    if options.do_eval and evaluate_fn is None:
        raise ValueError("do_eval needs an evaluate_fn")
    if options.seed is not None:
        keras.utils.set_random_seed(options.seed)
    chief = distribute.is_chief(strategy)
    if identity is not None:
        run_dir.claim_output_dir(options.output_dir, identity, write=chief)
    ckpt_dir = os.path.join(options.output_dir, CHECKPOINT_SUBDIR)
    policy = precision.resolve(options.mixed_precision, strategy)
    with strategy.scope():
        model = build_model(policy)
        model.build()
    if identity is None:
        run_dir.claim_output_dir(options.output_dir, run_dir.RunIdentity.of(
            run_dir.FINETUNING, type(task).__name__, getattr(model, "config", None),
            metric=metric), write=chief)
    with strategy.scope():
        optimizer = optimization.create_optimizer(
            options.learning_rate, options.train_step, options.warmup_step, options.optimizer,
            clip_norm=None)
        schedule = optimizer.learning_rate_schedule
        if policy == "mixed_float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    resuming = tf.train.latest_checkpoint(ckpt_dir) is not None
    if options.init_checkpoint and not resuming:
        checkpoints.restore_for_training(model, options.init_checkpoint,
                                         init_from_group0=options.init_from_group0)
    config = training.TrainingConfig(
        output_dir=ckpt_dir, num_train_steps=options.train_step,
        steps_per_loop=min(options.iterations_per_loop, options.save_checkpoints_steps),
        save_checkpoints_steps=options.save_checkpoints_steps,
        keep_checkpoint_max=options.keep_checkpoint_max,
        gradient_accumulation_steps=options.gradient_accumulation_steps,
        jit_compile=options.jit_compile, summary_dir=os.path.join(options.output_dir, "train"))
    trainer = training.Trainer(strategy, model, optimizer, task, config,
                               getattr(task, "metric_names"), learning_rate_fn=schedule)
    tracker = BestCheckpointTracker(options.output_dir, metric, higher_is_better, write=chief)
    eval_writer = (tf.summary.create_file_writer(os.path.join(options.output_dir, "eval"))
                   if chief else tf.summary.create_noop_writer())
    results: Dict = {}

    def evaluate_now(step, _path=None):
        results["eval"] = evaluate_fn(model, step)
        tracker.record(step, results["eval"], model, eval_writer)

    if options.do_train:
        if options.do_eval and resuming:
            evaluate_unrecorded_checkpoint(trainer, tracker, evaluate_now)
        results["train"] = trainer.train(train_dataset_fn,
                                         on_checkpoint=evaluate_now if options.do_eval else None)
    elif options.do_eval or (options.do_predict and tracker.best is None):
        if tf.train.latest_checkpoint(ckpt_dir):
            trainer.restore_latest()
        elif not options.init_checkpoint:
            raise errors.UserFileNotFoundError(f"nothing to evaluate: no checkpoint in {ckpt_dir} and no "
                                    "--init_checkpoint")
    if options.do_eval and "eval" not in results:
        evaluate_now(trainer.step)
    best_prefix = os.path.join(options.output_dir, BEST_PREFIX)
    if options.do_train and not options.do_eval and chief:
        checkpoints.save_tf1_checkpoint(model, best_prefix, global_step=trainer.step)
        logging.info("no evaluation: exported the step-%d weights as %s", trainer.step,
                     BEST_PREFIX)
    if options.do_predict:
        if tf.io.gfile.exists(best_prefix + ".index"):
            checkpoints.load_tf1_checkpoint(model, best_prefix)
        results["predict"] = predict_fn(model) if predict_fn is not None else None
    results["best"] = tracker.best
    results["global_step"] = trainer.step
    results["model"] = model
    return results
