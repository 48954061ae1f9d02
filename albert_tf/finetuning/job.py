"""The fine-tuning job shared by run_classifier.py, run_squad.py and run_race.py.

It follows the original scripts' flow: train for `train_step` steps with AdamW
(or LAMB), warmup and linear decay; evaluate every saved checkpoint; keep the
best one (by the task's metric) as `model.ckpt-best` in the official TF1
format and record `best_trial.txt` / `eval_results.txt`; predict with the best
weights; export them.

`FinetuningJob` is the job every task family runs: it owns the run directory, the
tokenizer, the loop (`run_finetuning`), the best weights and the export; a task
family's subclass supplies only what differs (in the spirit of Model Garden's Task):
its identity, model, loss, datasets, evaluation, prediction and exporters.
"""
from __future__ import annotations

import functools
import os
from typing import Callable, Dict, Iterable, Mapping, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import errors
from albert_tf import checkpoints, training
from albert_tf.training import (best_checkpoint, distribute, optimization, reproducibility,
                                run_dir)
from albert_tf.export import portable, records
from albert_tf.config import AlbertConfig
from albert_tf.finetuning.command_line import CommandLine
from albert_tf.finetuning.options import FinetuningOptions, TaskOptions  # noqa: F401
from albert_tf.kernels import precision

# Defined with the tracker in albert_tf.training.best_checkpoint; kept here for old imports.
BEST_PREFIX = best_checkpoint.BEST_PREFIX
CHECKPOINT_SUBDIR = best_checkpoint.CHECKPOINT_SUBDIR
BestCheckpointTracker = best_checkpoint.BestCheckpointTracker
evaluate_unrecorded_checkpoint = best_checkpoint.evaluate_unrecorded_checkpoint


def example_weights(features) -> tf.Tensor:
    """float32 [B]: `is_real_example` where the batch has it (0: a row the loss skips, as
    the padding of an evaluation batch or distillation's unlabelled transfer text), else 1."""
    real = features.get("is_real_example")
    if real is None:
        first = next(iter(features.values()))
        return tf.ones(tf.shape(first)[:1], tf.float32)
    return tf.cast(tf.reshape(real, [-1]), tf.float32)


class ExampleMeanObjective(training.Objective):
    """A task whose loss is the mean of a per-example loss over the global batch's real
    examples (`example_weights`).

    Subclasses implement `per_example(model, features, training)` returning
    (losses [B] float32, extra metric sums dict: counted over the real examples too), and
    `finalize_extra(sums)`.
    """

    metric_names = ("loss_total", "examples")

    def per_example(self, model, features, training):
        raise NotImplementedError

    def finalize_extra(self, sums: Dict[str, float]) -> Dict[str, float]:
        return {}

    def normalizers(self, features):
        return {"examples": tf.reduce_sum(example_weights(features))}

    def loss(self, model, features, normalizers, training):
        losses, extra = self.per_example(model, features, training)
        weights = example_weights(features)
        total = tf.reduce_sum(tf.cast(losses, tf.float32) * weights)
        sums = {"loss_total": total, "examples": tf.reduce_sum(weights)}
        sums.update(extra)
        return tf.math.divide_no_nan(total, normalizers["examples"]), sums

    def finalize(self, sums):
        metrics = {"eval_loss": sums["loss_total"] / max(sums["examples"], 1.0)}
        metrics.update(self.finalize_extra(sums))
        return metrics


def run_finetuning(options: FinetuningOptions, build_model: Callable[[str], keras.Model],
                   task: training.Objective, metric: str,
                   train_dataset_fn: Optional[Callable] = None,
                   evaluate_fn: Optional[Callable[[keras.Model, int], Dict]] = None,
                   predict_fn: Optional[Callable[[keras.Model], Dict]] = None,
                   higher_is_better: bool = True,
                   strategy: Optional[tf.distribute.Strategy] = None,
                   identity: Optional[run_dir.RunIdentity] = None) -> Dict:
    """Trains, evaluates and predicts; returns {"train", "eval", "best", "predict", "model"}.

    build_model(dtype_policy) -> an unbuilt task model (built here, in the strategy scope).
    train_dataset_fn(input_context) -> one replica's training batches, each of
        train_batch_size / replicas examples (`training.per_replica_batch`): one optimizer
        step's share of the replica, which the Trainer splits into
        gradient_accumulation_steps micro-batches itself.
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
    reproducibility.seed_run(options.seed, options.deterministic)
    chief = distribute.is_chief(strategy)
    policy = precision.resolve(options.mixed_precision, strategy)
    model = _build_and_claim(options, build_model, policy, task, metric, strategy, identity,
                             chief)
    trainer = _trainer(options, model, policy, task, strategy)
    tracker = best_checkpoint.BestCheckpointTracker(options.output_dir, metric,
                                                    higher_is_better, write=chief)
    eval_writer = (tf.summary.create_file_writer(os.path.join(options.output_dir, "eval"))
                   if chief else tf.summary.create_noop_writer())
    results: Dict = {}

    def evaluate_now(step, _path=None):
        results["eval"] = evaluate_fn(model, step)
        tracker.record(step, results["eval"], model, eval_writer)

    _train_or_restore(options, trainer, tracker, train_dataset_fn, evaluate_now, results)
    if options.do_eval and "eval" not in results:
        evaluate_now(trainer.step)
    best_prefix = os.path.join(options.output_dir, BEST_PREFIX)
    if options.do_train and not options.do_eval and chief:
        checkpoints.save_tf1_checkpoint(model, best_prefix, global_step=trainer.step)
        logging.info("no evaluation: exported the step-%d weights as %s", trainer.step,
                     BEST_PREFIX)
    if options.do_predict:
        load_best_weights(model, options.output_dir)
        results["predict"] = predict_fn(model) if predict_fn is not None else None
    results.update(best=tracker.best, global_step=trainer.step, model=model)
    return results


def _build_and_claim(options: FinetuningOptions, build_model, policy: str, task, metric,
                     strategy, identity, chief: bool) -> keras.Model:
    """The built model (in the strategy scope, under the run's dtype policy), after claiming
    output_dir for this run (before anything is written there)."""
    if identity is not None:
        run_dir.claim_output_dir(options.output_dir, identity, write=chief)
    with strategy.scope():
        model = build_model(policy)
        model.build()
    if identity is None:
        run_dir.claim_output_dir(options.output_dir, run_dir.RunIdentity.of(
            run_dir.FINETUNING, type(task).__name__, getattr(model, "config", None),
            metric=metric), write=chief)
    return model


def _trainer(options: FinetuningOptions, model, policy: str, task, strategy
             ) -> training.Trainer:
    """The Trainer of the run: the original's optimizer and schedule, checkpoints in
    output_dir/checkpoints, TensorBoard summaries in output_dir/train; the model starts
    from --init_checkpoint unless the run resumes."""
    with strategy.scope():
        optimizer = optimization.create_optimizer(
            options.learning_rate, options.train_step, options.warmup_step, options.optimizer,
            clip_norm=None)
        schedule = optimizer.learning_rate_schedule
        if policy == "mixed_float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    ckpt_dir = os.path.join(options.output_dir, CHECKPOINT_SUBDIR)
    if options.init_checkpoint and tf.train.latest_checkpoint(ckpt_dir) is None:
        checkpoints.restore_for_training(model, options.init_checkpoint,
                                         init_from_group0=options.init_from_group0)
    config = training.TrainingConfig(
        output_dir=ckpt_dir, num_train_steps=options.train_step,
        steps_per_loop=min(options.iterations_per_loop, options.save_checkpoints_steps),
        save_checkpoints_steps=options.save_checkpoints_steps,
        keep_checkpoint_max=options.keep_checkpoint_max,
        gradient_accumulation_steps=options.gradient_accumulation_steps,
        jit_compile=options.jit_compile, summary_dir=os.path.join(options.output_dir, "train"),
        divergence=options.divergence)
    return training.Trainer(strategy, model, optimizer, task, config,
                            getattr(task, "metric_names"), learning_rate_fn=schedule)


def _train_or_restore(options: FinetuningOptions, trainer, tracker, train_dataset_fn,
                      evaluate_now, results: Dict) -> None:
    """Trains (evaluating each checkpoint with do_eval; a resumed run first evaluates the
    checkpoint an interruption left unevaluated), or, without do_train, restores the latest
    checkpoint for evaluation or prediction."""
    ckpt_dir = os.path.join(options.output_dir, CHECKPOINT_SUBDIR)
    if options.do_train:
        if options.do_eval and tf.train.latest_checkpoint(ckpt_dir) is not None:
            best_checkpoint.evaluate_unrecorded_checkpoint(trainer, tracker, evaluate_now)
        results["train"] = trainer.train(train_dataset_fn,
                                         on_checkpoint=evaluate_now if options.do_eval else None)
    elif options.do_eval or (options.do_predict and tracker.best is None):
        if tf.train.latest_checkpoint(ckpt_dir):
            trainer.restore_latest()
        elif not options.init_checkpoint:
            raise errors.UserFileNotFoundError(f"nothing to evaluate: no checkpoint in "
                                               f"{ckpt_dir} and no --init_checkpoint")


def load_best_weights(model, output_dir: str) -> bool:
    """Loads output_dir/model.ckpt-best into model when it exists; returns whether it did."""
    best = os.path.join(output_dir, BEST_PREFIX)
    if not tf.io.gfile.exists(best + ".index"):
        return False
    checkpoints.load_tf1_checkpoint(model, best)
    return True


def real_features(batches: Iterable[Mapping], names: Sequence[str],
                  limit: int = portable.AGREEMENT_EXAMPLES) -> Dict[str, np.ndarray]:
    """The `names` features (numpy, int32) of the first `limit` real examples of an
    evaluation dataset's `batches` (rows whose `is_real_example` is 0, the padding of the
    last batch, are dropped)."""
    parts: Dict[str, list] = {name: [] for name in names}
    count = 0
    for batch in batches:
        real = np.asarray(batch["is_real_example"]).reshape(-1).astype(bool) \
            if "is_real_example" in batch else None
        for name in names:
            value = np.asarray(batch[name]).astype(np.int32)
            parts[name].append(value[real] if real is not None else value)
        count += len(parts[names[0]][-1])
        if count >= limit:
            break
    return {name: np.concatenate(values)[:limit] for name, values in parts.items()}


class FinetuningJob:
    """One fine-tuning run of a task family: what every family shares, in one place.

    `run()` checks the options (`options.check`: the family's, then the run's, the batch
    split included), checks the tokenizer's size against the config and
    --init_checkpoint, claims the output directory for `identity()` (another task's or
    model's run is refused before anything is written), builds the feature caches the run
    needs (`prepare`), runs `run_finetuning` with the hooks below, and exports the best
    weights. A family supplies, each hook taking what it needs as arguments and reading
    its data on first use (no hook depends on another having run):
      identity()                   what the run is (run_dir.RunIdentity)
      build_model(dtype_policy)    the task model
      objective()                  the loss (a training.Objective)
      metric, higher_is_better     how the best checkpoint is chosen
      train_dataset(input_context) one replica's training batches, each
                                   `per_replica_train_batch(input_context)` examples
      num_train_examples()         the training examples (--num_train_epochs)
      evaluate(model, step)        the dev metrics, with `metric` among them
      predict(model)               the predicted split's results (files written)
      eval_features()              the evaluation set's token features (the int8 files
                                   are checked on them), None without --do_eval
      export_saved_model(model)    the SavedModel in --export_dir
      portable_model(model)        the token-id function, signature and metadata of its
                                   ONNX and LiteRT files (export.portable)
      data(purpose)                the data "train", "eval" or "predict" reads, built
                                   once (`prepare` builds what the run's --do_* read
                                   before training starts, so a data error stops it
                                   first)
    and sets `exports_without_training` when --export_dir alone (no --do_*) is a run.
    """

    metric = "eval_accuracy"
    higher_is_better = True
    exports_without_training = False
    # The family's options class (its fields declare the CLI's flags) and what else its
    # run_*.py reads (albert_tf.cli_finetuning runs any family from these two).
    OPTIONS: type = TaskOptions
    COMMAND_LINE: Optional[CommandLine] = None

    @classmethod
    def options_from_command_line(cls, values) -> Dict:
        """Option fields this family builds from several flags, from the parsed flag values
        `values` (default: none; every field comes from its own flag)."""
        return {}

    def __init__(self, options: TaskOptions, strategy: Optional[tf.distribute.Strategy] = None):
        self.options = options
        self.strategy = strategy or tf.distribute.get_strategy()
        self.chief = distribute.is_chief(self.strategy)
        self.results: Dict = {}
        self._built: Dict = {}

    def once(self, key, build: Callable[[], object]):
        """`build()` the first time this job asks for `key`, the same value after: how a
        family's hooks share a split's examples and cache without depending on each
        other's order."""
        if key not in self._built:
            self._built[key] = build()
        return self._built[key]

    @functools.cached_property
    def tokenizer(self):
        """The Python tokenizer of --spm_model_file / --vocab_file, loaded once."""
        return self.options.load_tokenizer()

    # --- what a task family supplies ---------------------------------------------------------

    def identity(self) -> run_dir.RunIdentity:
        raise NotImplementedError

    def build_model(self, dtype_policy: str = "float32") -> keras.Model:
        raise NotImplementedError

    def objective(self) -> training.Objective:
        raise NotImplementedError

    def train_dataset(self, input_context: Optional[tf.distribute.InputContext]
                      ) -> tf.data.Dataset:
        raise NotImplementedError

    def num_train_examples(self) -> int:
        raise NotImplementedError

    def evaluate(self, model: keras.Model, step: int) -> Dict:
        raise NotImplementedError

    def predict(self, model: keras.Model):
        raise NotImplementedError

    def eval_features(self) -> Optional[Mapping[str, np.ndarray]]:
        return None

    def data(self, purpose: str):
        """The data of `purpose` ("train", "eval", "predict": what --do_train, --do_eval,
        --do_predict read), its feature cache built on first use and kept (`once`); None
        where the family builds nothing ahead for it (the default)."""
        return None

    def prepare(self) -> None:
        """Builds the data the run's --do_* read, in that order, so that a data error stops
        the run before training starts (the hooks build it on first use too), and logs
        the training's size."""
        options = self.options
        for purpose in ("train", "eval", "predict"):
            if getattr(options, f"do_{purpose}"):
                self.data(purpose)
        if options.do_train:
            steps = self.finetuning_options()
            logging.info("%s training: %d examples, batch %d, %d steps (%d warmup)",
                         self.identity().task, self.num_train_examples(),
                         options.train_batch_size, steps.train_step, steps.warmup_step)

    def export_saved_model(self, model: keras.Model) -> Optional[Dict]:
        raise NotImplementedError(f"{type(self).__name__} exports no SavedModel")

    def portable_model(self, model: keras.Model) -> portable.PortableModel:
        raise NotImplementedError(f"{type(self).__name__} exports no ONNX or LiteRT model")

    # --- what every family shares -------------------------------------------------------------

    def validate(self, num_replicas: int) -> None:
        """Every check of the options before anything is read (ValueError naming the flag);
        the run's checks only when there is a run (see `exports_without_training`)."""
        options = self.options
        options.check(num_replicas, run=bool(
            options.do_train or options.do_eval or options.do_predict
            or not (self.exports_without_training and options.export_dir)))

    def evaluates(self) -> bool:
        """Whether the run evaluates on a dev set (what a multi-seed run compares)."""
        return bool(self.options.do_eval)

    def per_replica_train_batch(self, input_context: Optional[tf.distribute.InputContext]
                                ) -> int:
        """Examples one replica's training dataset yields per optimizer step:
        --train_batch_size / replicas (the Trainer splits them into
        --gradient_accumulation_steps micro-batches). The one place a family's
        train_dataset gets its batch size from; input_context None: one replica."""
        return training.per_replica_batch(self.options.train_batch_size, input_context,
                                          self.options.gradient_accumulation_steps)

    def finetuning_options(self) -> FinetuningOptions:
        """The run's options, the steps from --num_train_epochs / --warmup_proportion when
        given (the one place epochs become steps)."""
        options = self.options
        examples = (self.num_train_examples() if options.do_train
                    and options.num_train_epochs is not None else None)
        return options.finetuning_options(examples)

    # --- the shared job ----------------------------------------------------------------------

    def run(self) -> Dict:
        """Trains / evaluates / predicts / exports as configured; returns run_finetuning's
        dict plus the task's results (and "export_dir" when exported)."""
        self.validate(self.strategy.num_replicas_in_sync)
        # Another model's vocabulary (e.g. the Chinese vocab.txt with an English checkpoint)
        # would train silently on the wrong embeddings: the sizes must agree.
        checkpoints.check_vocab_size(self.tokenizer, self.options.albert_config,
                                     "--albert_config_file", self.options.init_checkpoint)
        # Another task's (or model's) run in output_dir is refused before anything is written.
        identity = self.identity()
        run_dir.check_output_dir(self.options.output_dir, identity)
        self.prepare()
        options = self.finetuning_options()
        # run_finetuning refuses a run without --do_train/--do_eval/--do_predict, unless
        # the family exports the weights it is given without training.
        if options.do_train or options.do_eval or options.do_predict or \
                not (self.exports_without_training and self.options.export_dir):
            self.results.update(run_finetuning(
                options, self.build_model, self.objective(), self.metric,
                train_dataset_fn=self.train_dataset if options.do_train else None,
                evaluate_fn=self.evaluate if options.do_eval else None,
                predict_fn=self.predict if options.do_predict else None,
                higher_is_better=self.higher_is_better, strategy=self.strategy,
                identity=identity))
        if self.options.export_dir and self.chief:
            self.export(self.results.get("model"))
        return self.results

    def export_trained(self) -> Dict:
        """Exports the best weights of an output_dir trained earlier (no training, no new
        evaluation; with --do_eval the int8 files are checked on the dev set): what a
        multi-seed run does with its best seed."""
        self.validate(self.strategy.num_replicas_in_sync)
        self.export(None)
        return self.results

    def export(self, model: Optional[keras.Model]) -> None:
        """Exports the best weights (model.ckpt-best in output_dir; without a trained model in
        this process, else --init_checkpoint) in each of export_format."""
        trained_here = model is not None
        if not trained_here:
            model = self.build_model()
            model.build()
        if not load_best_weights(model, self.options.output_dir) and not trained_here:
            if not self.options.init_checkpoint:
                raise errors.UserValueError("--export_dir without training needs "
                                            "model.ckpt-best in --output_dir or an "
                                            "--init_checkpoint")
            checkpoints.restore_for_training(model, self.options.init_checkpoint)
        if "saved_model" in self.options.export_format:
            self.results.update(self.export_saved_model(model) or {})
        try:
            spec = self.portable_model(model)
        except NotImplementedError:  # a family without ONNX / LiteRT files
            spec = None
        self.export_portable(model, spec)
        self.write_export_record(spec, model.config)
        self.results["export_dir"] = self.options.export_dir

    def write_export_record(self, spec: Optional[portable.PortableModel],
                            config: Optional[AlbertConfig] = None) -> None:
        """albert_tf_export.json in --export_dir: what the export is (the portable model's
        metadata and the model's config), for `albert_tf.pipeline`, `python -m
        albert_tf.predict` and `albert_tf.from_pretrained`."""
        options = self.options
        if spec is None or "://" in options.export_dir or not tf.io.gfile.exists(
                options.export_dir):
            return
        records.write_export_record(
            options.export_dir, spec.metadata, spm_model_file=options.spm_model_file,
            vocab_file=None if options.spm_model_file else options.vocab_file,
            albert_config=None if config is None else config.to_dict())

    def export_portable(self, model: keras.Model,
                        spec: Optional[portable.PortableModel] = None) -> None:
        """Writes the ONNX and LiteRT files --export_format asks for, the int8 ones
        checked on the evaluation set when there is one (`spec`: the portable model, built
        here when not given)."""
        options = self.options
        if not set(options.export_format) & set(portable.PORTABLE_FORMATS):
            return
        spec = spec or self.portable_model(model)
        check_features = None
        if (options.export_int8 or options.export_fp16) and options.int8_min_agreement > 0:
            check_features = self.eval_features()
            if check_features is None:
                logging.info("quantized files not checked against float32: no evaluation "
                             "set (--do_eval)")
        self.results.update(portable.export_model_dir(
            options.export_dir, spec, options.export_format, int8=options.export_int8,
            fp16=options.export_fp16, spm_model_file=options.spm_model_file,
            vocab_file=None if options.spm_model_file else options.vocab_file,
            check_features=check_features, int8_min_agreement=options.int8_min_agreement))


ExampleMeanTask = ExampleMeanObjective  # the old name, for old imports
