"""The pretraining task (MLM + SOP) for the training loop, with global-batch normalisation.

For a global batch the losses are the original's:
  masked_lm_loss      = sum(w * nll) / (sum(w) + 1e-5)
  sentence_order_loss = mean(nll)
and each replica / micro-batch contributes its numerator divided by the global
denominators, so distributed and accumulated steps equal one big step.
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Callable, Dict, Optional, Tuple

import keras
import tensorflow as tf
from absl import logging

from albert_tf.option_fields import option
from albert_tf import checkpoints, training
from albert_tf.training import (best_checkpoint, distribute, optimization, reproducibility,
                                run_dir)
from albert_tf.training.divergence import DivergenceOptions
from albert_tf.pretraining import inputs
from albert_tf.kernels import precision
from albert_tf.config import AlbertConfig
from albert_tf.modeling.models import MLM_LOSS_EPSILON, AlbertPretrainer
from albert_tf.training import Objective

METRIC_SUMS = ("masked_lm_loss_sum", "masked_lm_correct", "masked_lm_weight",
               "sentence_order_loss_sum", "sentence_order_correct", "examples")


def _nll(logits, labels):
    """Per-position negative log-likelihood, float32; logits [..., C], labels int [...]."""
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
    return -tf.gather(log_probs, labels, axis=-1, batch_dims=len(labels.shape))


class PretrainingObjective(Objective):
    """MLM + SOP on `AlbertPretrainer` outputs."""

    metric_names = METRIC_SUMS

    def normalizers(self, features) -> Dict[str, tf.Tensor]:
        weights = tf.cast(features["masked_lm_weights"], tf.float32)
        return {"masked_lm_weight": tf.reduce_sum(weights),
                "examples": tf.cast(tf.shape(weights)[0], tf.float32)}

    def loss(self, model, features, normalizers, training):
        outputs = model(features, training=training)
        ids = tf.cast(features["masked_lm_ids"], tf.int32)
        weights = tf.cast(features["masked_lm_weights"], tf.float32)
        sop_labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
        mlm_nll = _nll(outputs["mlm_logits"], ids)
        sop_nll = _nll(outputs["sop_logits"], sop_labels)
        mlm_sum = tf.reduce_sum(weights * mlm_nll)
        sop_sum = tf.reduce_sum(sop_nll)
        loss = (mlm_sum / (normalizers["masked_lm_weight"] + MLM_LOSS_EPSILON)
                + sop_sum / normalizers["examples"])
        mlm_pred = tf.argmax(outputs["mlm_logits"], axis=-1, output_type=tf.int32)
        sop_pred = tf.argmax(outputs["sop_logits"], axis=-1, output_type=tf.int32)
        sums = {
            "masked_lm_loss_sum": mlm_sum,
            "masked_lm_correct": tf.reduce_sum(weights * tf.cast(mlm_pred == ids, tf.float32)),
            "masked_lm_weight": tf.reduce_sum(weights),
            "sentence_order_loss_sum": sop_sum,
            "sentence_order_correct": tf.reduce_sum(tf.cast(sop_pred == sop_labels, tf.float32)),
            "examples": tf.cast(tf.shape(sop_labels)[0], tf.float32),
        }
        return loss, sums

    def finalize(self, sums: Dict[str, float]) -> Dict[str, float]:
        weight = sums["masked_lm_weight"]
        examples = max(sums["examples"], 1.0)
        metrics = {
            "masked_lm_loss": sums["masked_lm_loss_sum"] / (weight + MLM_LOSS_EPSILON),
            "masked_lm_accuracy": sums["masked_lm_correct"] / max(weight, 1e-12),
            "sentence_order_loss": sums["sentence_order_loss_sum"] / examples,
            "sentence_order_accuracy": sums["sentence_order_correct"] / examples,
        }
        metrics["loss"] = metrics["masked_lm_loss"] + metrics["sentence_order_loss"]
        return metrics


# --- the pretraining job (what run_pretraining.py runs) -----------------------------------------

@dataclasses.dataclass
class PretrainingOptions:
    """Everything `run_pretraining` needs; defaults are the original's flags.

    Batch sizes are global (over replicas and accumulation micro-batches).
    """

    albert_config: AlbertConfig
    output_dir: str = option(help="Checkpoints, summaries and results are written here.")
    input_file: Optional[str] = option(None, help="Training TFRecords: comma list and/or "
                                                  "globs.")
    eval_input_file: Optional[str] = option(None, help="Held-out TFRecords for --do_eval "
                                                       "(comma list and/or globs).")
    init_checkpoint: Optional[str] = option(
        None, help="Initial weights: TF1 checkpoint (prefix or directory), Hugging Face "
                   "directory, Keras .weights.h5 or tf.train.Checkpoint.")
    init_from_group0: bool = option(False, help="Initialise every layer group from group 0 "
                                                "of --init_checkpoint.")
    max_seq_length: int = option(512, help="Sequence length of the TFRecords.")
    max_predictions_per_seq: int = option(20, help="Masked positions per sequence in the "
                                                   "data.")
    do_train: bool = option(True, help="Train.")
    do_eval: bool = option(False, help="Evaluate every saved checkpoint on "
                                       "--eval_input_file.")
    train_batch_size: int = option(4096, help="Global training batch size.")
    eval_batch_size: int = option(64, help="Global evaluation batch size.")
    optimizer: str = option("lamb", help="Optimizer.", choices=("lamb", "adamw"))
    learning_rate: float = option(0.00176, help="Peak learning rate.")
    poly_power: float = option(1.0, help="Power of the polynomial decay.")
    num_train_steps: int = option(125000, help="Optimizer steps.")
    num_warmup_steps: int = option(3125, help="Linear warmup steps.")
    start_warmup_step: int = option(0, help="Step at which the warmup starts.")
    save_checkpoints_steps: int = option(5000, help="Checkpoint (and evaluate) every N "
                                                    "steps.")
    keep_checkpoint_max: int = option(5, help="Training checkpoints kept.")
    iterations_per_loop: int = option(1000, help="Steps run on the device per host round "
                                                 "trip (also the logging period).")
    max_eval_steps: Optional[int] = option(100, help="Evaluation batches per evaluation "
                                                     "(0 = all).")
    mixed_precision: str = "float32"
    jit_compile: bool = False
    recompute_layers: bool = option(
        False, help="Keep only each layer's input for the backward pass and recompute the "
                    "rest (tf.recompute_grad): much less activation memory at long "
                    "sequences, about a third more compute.")
    max_train_seconds: Optional[float] = None  # stop early (checkpointed) past this time
    gradient_accumulation_steps: int = 1
    seed: Optional[int] = None
    deterministic_input: bool = option(False, help="Read the input in a reproducible order "
                                                   "(slower interleave).")
    deterministic: bool = False  # TensorFlow's op determinism (needs seed)
    divergence: DivergenceOptions = dataclasses.field(default_factory=DivergenceOptions)

    def validate(self, num_replicas: int) -> None:
        """Raises ValueError naming the flag that is wrong."""
        if not (self.do_train or self.do_eval):
            raise ValueError("at least one of --do_train and --do_eval must be set")
        if self.do_train and not self.input_file:
            raise ValueError("--input_file is required with --do_train")
        if self.do_eval and not self.eval_input_file:
            raise ValueError("--eval_input_file is required with --do_eval (evaluation reads "
                             "held-out files, never the training files)")
        precision.check(self.mixed_precision)
        self.divergence.validate()
        if self.deterministic and self.seed is None:
            raise ValueError("--deterministic needs --seed")
        if self.max_seq_length > self.albert_config.max_position_embeddings:
            raise ValueError(f"--max_seq_length {self.max_seq_length} exceeds the config's "
                             f"max_position_embeddings {self.albert_config.max_position_embeddings}")
        for name in ("num_train_steps", "save_checkpoints_steps", "iterations_per_loop",
                     "train_batch_size", "eval_batch_size", "gradient_accumulation_steps"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--{name} must be positive, got {getattr(self, name)}")
        training.check_batch_split(self.train_batch_size, num_replicas,
                                   self.gradient_accumulation_steps)
        if self.eval_batch_size % num_replicas:
            raise ValueError(f"--eval_batch_size {self.eval_batch_size} must be divisible by the "
                             f"number of replicas ({num_replicas})")


CHECKPOINT_SUBDIR = "checkpoints"
BEST_PREFIX = best_checkpoint.BEST_PREFIX


def _input_config(options, files, is_training):
    return inputs.PretrainingInputConfig(
        files, options.max_seq_length, options.max_predictions_per_seq, is_training=is_training,
        seed=options.seed,
        deterministic=options.deterministic_input or options.deterministic or not is_training)


def _dataset_fn(config, global_batch: int, accumulation_steps: int = 1):
    """dataset_fn(input_context) -> one replica's batches of global_batch / replicas
    examples (`training.per_replica_batch`; training splits them into
    `accumulation_steps` micro-batches)."""
    def dataset_fn(input_context):
        per_replica = training.per_replica_batch(global_batch, input_context,
                                                 accumulation_steps)
        return inputs.pretraining_dataset(config, per_replica, input_context)
    return dataset_fn


def run_pretraining(options: PretrainingOptions,
                    strategy: Optional[tf.distribute.Strategy] = None,
                    on_evaluation: Optional[Callable[[keras.Model, int, Dict, float], None]] = None
                    ) -> Dict:
    """Trains and/or evaluates; returns {"train": metrics, "eval": metrics, "best": ...}.

    on_evaluation(model, step, metrics, seconds), if given, runs after each held-out
    evaluation (which took `seconds`), with the model holding that step's weights (the
    demo shows fill-ins with it).

    Output directory (re-running the same command resumes from `checkpoints/`, first
    evaluating the latest checkpoint when an interruption left it unevaluated; a directory
    holding a fine-tuning run or a run of another model config is refused before anything
    is written, see `albert_tf.training.run_dir`):
      albert_tf_run.json (the run's identity), albert_config.json, checkpoints/ckpt-N
      (tf.train.Checkpoint: model, optimizer, input position), train/ and eval/
      TensorBoard logs, eval_results.txt, model.ckpt-best.{index,data-*} (official TF1
      format, best masked_lm_accuracy; the final checkpoint when there is no evaluation),
      best_eval.json.
    """
    strategy = strategy or tf.distribute.get_strategy()
    options.validate(strategy.num_replicas_in_sync)
    reproducibility.seed_run(options.seed, options.deterministic)
    chief = distribute.is_chief(strategy)
    _claim_output_dir_and_save_config(options, chief)
    ckpt_dir = os.path.join(options.output_dir, CHECKPOINT_SUBDIR)
    model, optimizer, schedule = _build_model_and_optimizer(options, strategy)
    task = PretrainingObjective()
    resuming = tf.train.latest_checkpoint(ckpt_dir) is not None
    _initialize_from_checkpoint(model, options, ckpt_dir, resuming)
    trainer = training.Trainer(strategy, model, optimizer, task,
                               _training_config(options, ckpt_dir), task.metric_names,
                               learning_rate_fn=schedule)
    tracker = best_checkpoint.BestCheckpointTracker(options.output_dir, "masked_lm_accuracy",
                                                    write=chief)
    results = {}
    evaluate_now = _held_out_evaluator(options, strategy, model, task, tracker, chief,
                                       results, on_evaluation)
    if options.do_train:
        results["train"] = _train(options, trainer, tracker, evaluate_now, resuming)
    else:
        trainer.restore_latest()
    if options.do_eval and "eval" not in results:
        evaluate_now(trainer.step)
    if not options.do_eval and chief:
        _export_final_weights(model, options.output_dir, trainer.step)
    results["best"] = tracker.best
    results["global_step"] = trainer.step
    results["stopped_early"] = trainer.stopped_early
    return results


def _claim_output_dir_and_save_config(options: PretrainingOptions, chief: bool) -> None:
    """Refuses an output directory of another run (`albert_tf.training.run_dir`); on the chief,
    records this run's identity and writes albert_config.json."""
    identity = run_dir.RunIdentity.of(run_dir.PRETRAINING, run_dir.PRETRAINING,
                                      options.albert_config)
    run_dir.claim_output_dir(options.output_dir, identity, write=chief)
    if chief:
        options.albert_config.to_json_file(os.path.join(options.output_dir,
                                                        "albert_config.json"))


def _build_model_and_optimizer(options: PretrainingOptions, strategy: tf.distribute.Strategy
                               ) -> Tuple[AlbertPretrainer, keras.optimizers.Optimizer,
                                          Callable]:
    """The built model and its optimizer under `strategy`, and the learning-rate schedule
    (the optimizer is wrapped in a LossScaleOptimizer for mixed_float16)."""
    policy = precision.resolve(options.mixed_precision, strategy)
    with strategy.scope():
        model = AlbertPretrainer(options.albert_config, dtype=policy,
                                 recompute_layers=options.recompute_layers)
        model.build()
        optimizer = optimization.create_optimizer(
            options.learning_rate, options.num_train_steps, options.num_warmup_steps,
            options.optimizer, options.poly_power, options.start_warmup_step, clip_norm=None)
        schedule = optimizer.learning_rate_schedule
        if policy == "mixed_float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return model, optimizer, schedule


def _initialize_from_checkpoint(model: AlbertPretrainer, options: PretrainingOptions,
                                ckpt_dir: str, resuming: bool) -> None:
    """Loads --init_checkpoint into a fresh run; a resumed run's own checkpoint (restored
    by the trainer) already holds the weights that training moved on from it."""
    if options.init_checkpoint and not resuming:
        checkpoints.restore_for_training(model, options.init_checkpoint,
                                         init_from_group0=options.init_from_group0)
    elif options.init_checkpoint:
        logging.info("resuming from %s: --init_checkpoint is not applied again", ckpt_dir)


def _training_config(options: PretrainingOptions, ckpt_dir: str) -> training.TrainingConfig:
    """The training loop's settings: checkpoints in ckpt_dir, TensorBoard logs in train/."""
    return training.TrainingConfig(
        output_dir=ckpt_dir, num_train_steps=options.num_train_steps,
        steps_per_loop=options.iterations_per_loop,
        save_checkpoints_steps=options.save_checkpoints_steps,
        keep_checkpoint_max=options.keep_checkpoint_max,
        gradient_accumulation_steps=options.gradient_accumulation_steps,
        jit_compile=options.jit_compile, summary_dir=os.path.join(options.output_dir, "train"),
        max_train_seconds=options.max_train_seconds, divergence=options.divergence)


def _held_out_evaluator(options: PretrainingOptions, strategy: tf.distribute.Strategy,
                        model: AlbertPretrainer, task: PretrainingObjective,
                        tracker: best_checkpoint.BestCheckpointTracker, chief: bool,
                        results: Dict, on_evaluation: Optional[Callable]
                        ) -> Callable[..., None]:
    """`evaluate_now(step, path=None)`: evaluates the model's current weights on
    --eval_input_file, records them with `tracker` (and TensorBoard eval/ on the chief),
    stores the metrics as results["eval"] and calls on_evaluation. Its signature fits the
    trainer's `on_checkpoint(step, path)`."""
    eval_writer = (tf.summary.create_file_writer(os.path.join(options.output_dir, "eval"))
                   if chief else tf.summary.create_noop_writer())

    def evaluate_now(step, _path=None):
        started = time.time()
        eval_config = _input_config(options, options.eval_input_file, is_training=False)
        metrics = training.evaluate(strategy, model, task,
                                    _dataset_fn(eval_config, options.eval_batch_size),
                                    task.metric_names, max_steps=options.max_eval_steps,
                                    checkpoint_dir=os.path.join(options.output_dir,
                                                                CHECKPOINT_SUBDIR))
        metrics.pop("eval_batches", None)
        tracker.record(step, metrics, model, eval_writer)
        results["eval"] = metrics
        if on_evaluation is not None:
            on_evaluation(model, step, metrics, time.time() - started)

    return evaluate_now


def _train(options: PretrainingOptions, trainer: training.Trainer,
           tracker: best_checkpoint.BestCheckpointTracker,
           evaluate_now: Callable[..., None], resuming: bool) -> Dict:
    """Trains to --num_train_steps on --input_file; returns the training metrics.

    With --do_eval every checkpoint is evaluated, and a resumed run first evaluates its
    latest checkpoint if the interrupted run had not.
    """
    train_config = _input_config(options, options.input_file, is_training=True)
    if options.do_eval and resuming:
        best_checkpoint.evaluate_unrecorded_checkpoint(trainer, tracker, evaluate_now)
    try:
        return trainer.train(_dataset_fn(train_config, options.train_batch_size,
                                         options.gradient_accumulation_steps),
                             on_checkpoint=evaluate_now if options.do_eval else None)
    except training.CorruptedInputError:
        # Name the file (TensorFlow's error does not); re-raise if none is found.
        inputs.locate_corruption(inputs.expand_patterns(options.input_file))
        raise


def _export_final_weights(model: AlbertPretrainer, output_dir: str, step: int) -> None:
    """Without evaluation there is no best checkpoint: writes the step's weights as
    model.ckpt-best (official TF1 format)."""
    checkpoints.save_tf1_checkpoint(model, os.path.join(output_dir, BEST_PREFIX),
                                    global_step=step)
    logging.info("no evaluation: exported the step-%d weights as %s", step, BEST_PREFIX)


PretrainingTask = PretrainingObjective  # the old name, for old imports
