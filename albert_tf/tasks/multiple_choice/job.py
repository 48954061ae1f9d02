"""The RACE and C3 fine-tuning job behind run_race.py: train, evaluate, predict, export.

`run_race(options, strategy)` (a `MultipleChoiceJob`) reads the data set --task_name
names (`datasets`: `race` or `c3`), builds TFRecord caches, fine-tunes an
`AlbertMultipleChoice` with `finetuning.run_finetuning` (best checkpoint by dev
`eval_accuracy`, kept as `model.ckpt-best` in the official TF1 format), reports
accuracy for middle, high and all (C3: C3-M, C3-D and both), writes
predictions with the best weights and optionally exports a SavedModel that
takes raw text (`export`). C3's questions with fewer than
4 options have their padding options masked (`AlbertMultipleChoice`'s `choice_mask`) in
the loss, the metrics, the predictions and the export.

Output files in `output_dir` (besides run_finetuning's checkpoints/, train/,
eval_results.txt, best_eval.json, best_trial.txt, model.ckpt-best.*): predictions.jsonl,
predict_results.txt and C3's c3_predict.json (`postprocess`). What differs between RACE
and C3 is asked of the data set's record (`datasets`).
"""
from __future__ import annotations

import dataclasses
import functools
import os
from typing import ClassVar, Dict, List, Optional

import numpy as np
import tensorflow as tf

from albert_tf import finetuning, training
from albert_tf.finetuning.command_line import CommandLine
from albert_tf.finetuning.options import TaskOptions
from albert_tf.option_fields import check_fields, option
from albert_tf.training import run_dir
from albert_tf.config import AlbertConfig
from albert_tf.modeling.models import AlbertMultipleChoice, multiple_choice_losses
from albert_tf.tasks import registry
from albert_tf.tasks.multiple_choice import datasets, race, export as race_export
from albert_tf.tasks.multiple_choice.features import (LABELS, LEVELS, NUM_CHOICES,
                                                   TRAIN_SHUFFLE_SEED, dataset)
# Moved to postprocess / metrics; their old names here still work.
from albert_tf.tasks.multiple_choice.metrics import METRIC, metrics_from_sums
from albert_tf.tasks.multiple_choice.postprocess import (  # noqa: F401
    C3_SUBMISSION_FILE, PREDICT_RESULTS_FILE, PREDICTIONS_FILE, c3_prediction_records,
    predict_probabilities, prediction_records, write_predictions)

TASKS = registry.names(datasets.FAMILY)  # ("race", "c3"): --task_name's choices


class MultipleChoiceObjective(training.Objective):
    """Softmax cross-entropy over the 4 choices, weighted by `is_real_example`.

    The loss is the mean over the real examples of the global batch (the
    original's `reduce_mean`; training batches have no padding). Metric sums
    give accuracy overall and per level (`levels`: level_ids 0 = middle,
    1 = high; C3's ("m", "d")). `masked` (C3): the features carry a `choice_mask`,
    with which the model masks absent choices before the loss and the argmax.

    Evaluation (training=False) also sums, per choice, the questions predicted and the
    questions answered by it (`eval_metric_names`, not computed in training steps), from
    which `finalize` adds `collapsed` (`finetuning.collapse`; `name` names the task in
    its warning, `choice_labels` the choices).
    """

    def __init__(self, levels=LEVELS, masked: bool = False, name: str = "RACE",
                 choice_labels=LABELS):
        self.levels = tuple(levels)
        self.masked = masked
        self.name = name
        self.choice_labels = tuple(choice_labels)
        self.metric_names = ("loss_total", "examples", "correct") + tuple(
            f"{kind}_{level}" for level in self.levels for kind in ("examples", "correct"))
        self.choice_count_names = tuple(f"{kind}_{choice}" for kind in ("predicted", "gold")
                                        for choice in range(NUM_CHOICES))
        self.eval_metric_names = self.metric_names + self.choice_count_names

    def normalizers(self, features):
        return {"examples": tf.reduce_sum(tf.cast(features["is_real_example"], tf.float32))}

    def loss(self, model, features, normalizers, training):
        outputs = model(features, training=training)  # masks by features["choice_mask"]
        losses = multiple_choice_losses(outputs, features)["per_example_loss"]
        weights = tf.cast(features["is_real_example"], tf.float32)
        correct = tf.cast(tf.equal(outputs["predictions"], features["label_ids"]),
                          tf.float32) * weights
        total = tf.reduce_sum(tf.cast(losses, tf.float32) * weights)
        sums = {"loss_total": total, "examples": tf.reduce_sum(weights),
                "correct": tf.reduce_sum(correct)}
        for level_id, level in enumerate(self.levels):
            in_level = tf.cast(tf.equal(features["level_ids"], level_id), tf.float32) * weights
            sums["examples_" + level] = tf.reduce_sum(in_level)
            sums["correct_" + level] = tf.reduce_sum(correct * in_level)
        if not training:  # per-choice counts for the collapse check (evaluation only)
            for kind, ids in (("predicted", outputs["predictions"]),
                              ("gold", features["label_ids"])):
                counts = tf.reduce_sum(tf.one_hot(tf.reshape(tf.cast(ids, tf.int32), [-1]),
                                                  NUM_CHOICES) * weights[:, None], axis=0)
                for choice in range(NUM_CHOICES):
                    sums[f"{kind}_{choice}"] = counts[choice]
        return tf.math.divide_no_nan(total, normalizers["examples"]), sums

    def finalize(self, sums: Dict[str, float]) -> Dict[str, float]:
        return metrics_from_sums(sums, self.levels, self.name, self.choice_labels)


@dataclasses.dataclass(kw_only=True)
class MultipleChoiceOptions(TaskOptions):
    """run_race.py's settings (defaults: the original run_race.py flags).

    task_name: "race" or "c3" (`max_qa_length`, `high_only` and `middle_only` are
    RACE's only). Cache paths default to `<output_dir>/<task>_{train,dev,<predict_split>}
    .tf_record`. `predict_split` is the split --do_predict reads ("test" as the original).
    """

    data_dir: str = option(help="race: directory holding RACE/{train,dev,test}/"
                                "{middle,high}; c3: directory holding "
                                "c3-{m,d}-{train,dev,test}.json.")
    task_name: str = option("race", choices=TASKS,
                            help="race (English RACE) or c3 (Chinese C3, 2-4 options per "
                                 "question).")
    max_seq_length: int = 512
    max_qa_length: int = option(128, help="race: maximum question+option length in tokens "
                                          "(the last tokens are kept); at most "
                                          "max_seq_length - 3. Not used by c3, which "
                                          "truncates as C3's baseline.")
    high_only: bool = option(False, help="race: use only the high-school passages.")
    middle_only: bool = option(False, help="race: use only the middle-school passages.")
    do_train: bool = True
    do_eval: bool = True
    learning_rate: float = 1e-5
    train_step: int = 12000
    warmup_step: int = 1000
    save_checkpoints_steps: int = 100
    train_file: Optional[str] = option(None, help="TFRecord cache of the training features "
                                                  "(default <output_dir>/race_train.tf_record; "
                                                  "built if missing or stale).")
    eval_file: Optional[str] = option(None, help="TFRecord cache of the dev features "
                                                 "(default <output_dir>/race_dev.tf_record).")
    predict_file: Optional[str] = option(None, help="TFRecord cache of the --predict_split "
                                                    "features (default "
                                                    "<output_dir>/race_<split>.tf_record).")
    predict_split: str = option("test", choices=race.SPLITS,
                                help="Split read by --do_predict.")
    # The original run_race.py's name for --keep_checkpoint_max.
    FLAG_NAMES: ClassVar[Dict[str, str]] = {"keep_checkpoint_max": "num_keep_checkpoint"}
    HAS_EXITS: ClassVar[bool] = True  # --exit_heads, --patience

    def validate(self, num_replicas: int = 1) -> None:
        """Raises ValueError naming the flag that is wrong."""
        self.check_export()
        if self.task_name not in TASKS:
            raise ValueError(f"--task_name must be one of {', '.join(TASKS)}, got "
                             f"{self.task_name!r}")
        self.check_vocabulary_given()
        datasets.data_of(self.task_name).validate(self)
        self.check_max_seq_length()
        check_fields(self, ("classifier_dropout",))
        self.check_batch_sizes()
        self.check_schedule()
        if self.predict_split not in race.SPLITS:
            raise ValueError(f"--predict_split must be one of {', '.join(race.SPLITS)}, got "
                             f"{self.predict_split!r}")
        if not (self.do_train or self.do_eval or self.do_predict or self.export_dir):
            raise ValueError("at least one of --do_train, --do_eval, --do_predict, "
                             "--export_dir must be set")
        given = [path for path in (self.train_file, self.eval_file, self.predict_file) if path]
        if len(set(given)) < len(given):
            raise ValueError("--train_file, --eval_file and --predict_file must be different "
                             "files: each split needs a cache of its own")

    def split_of(self, purpose: str) -> str:
        """The split read for `purpose` ("train", "eval" or "predict")."""
        return {"train": "train", "eval": "dev", "predict": self.predict_split}[purpose]

    def given_cache_path(self, purpose: str) -> Optional[str]:
        """--train_file / --eval_file / --predict_file: the cache path the user gave, if any."""
        return {"train": self.train_file, "eval": self.eval_file,
                "predict": self.predict_file}[purpose]

    def cache_path(self, purpose: str) -> str:
        """The TFRecord cache for `purpose`: the path given (`given_cache_path`), else
        `<output_dir>/<task>_<split>.tf_record`."""
        return self.given_cache_path(purpose) or os.path.join(
            self.output_dir, f"{self.task_name}_{self.split_of(purpose)}.tf_record")


def build_model(config: AlbertConfig, dropout_prob: float,
                dtype_policy: str = "float32", **light_inference) -> AlbertMultipleChoice:
    """run_race's model: 4 choices, `dropout_prob` on the pooled output (`light_inference`:
    `TaskOptions.light_inference()`)."""
    return AlbertMultipleChoice(config, num_choices=NUM_CHOICES, dropout_rate=dropout_prob,
                                dtype=dtype_policy, **light_inference)


def _default_rules(values) -> List[str]:
    """run_race.py's `cli_defaults` rules: the warmup follows the steps unless epochs give
    them; the data set's own (RACE: --max_qa_length follows --max_seq_length)."""
    steps_given = values.num_train_epochs is None and values.warmup_proportion is None
    return (["eval_batch_size:8", "predict_batch_size:8"]
            + (["warmup_step:race"] if steps_given else [])
            + list(registry.get(datasets.FAMILY, values.task_name).default_rules))


def _check_flags(values) -> None:
    datasets.data_of(values.task_name).check_flags(values)


class MultipleChoiceJob(finetuning.FinetuningJob):
    """run_race.py's job: RACE or C3 (`options.task_name`), best checkpoint by dev accuracy."""

    metric = METRIC
    exports_without_training = True  # --export_dir alone exports model.ckpt-best
    OPTIONS = MultipleChoiceOptions
    COMMAND_LINE = CommandLine(
        required=("data_dir", "albert_config_file", "output_dir"),
        hparams_task=lambda values: values.task_name,
        default_rules=_default_rules, check=_check_flags,
        renamed_flags={"dropout_prob": "classifier_dropout"})

    # Looked up on first use, not at construction: an unknown --task_name is the options'
    # one-line error when the job runs (validate), as before the registry.
    @functools.cached_property
    def data_set(self) -> registry.DataSet:
        return registry.get(datasets.FAMILY, self.options.task_name)

    @property
    def source(self) -> "datasets.MultipleChoiceData":
        """The data set's behaviour (reading, caches, prediction files)."""
        return self.data_set.settings["data"]

    @property
    def is_c3(self) -> bool:  # for old callers; the job itself asks `source`
        return self.options.task_name == "c3"

    @functools.cached_property
    def task(self) -> MultipleChoiceObjective:
        source = self.source
        return MultipleChoiceObjective(source.levels, masked=source.masked,
                                       name=source.display, choice_labels=source.choice_labels)

    def identity(self):
        return run_dir.RunIdentity.of(run_dir.FINETUNING, self.options.task_name,
                                      self.options.albert_config, metric=METRIC)

    def build_model(self, dtype_policy: str = "float32"):
        return build_model(self.options.albert_config, self.options.classifier_dropout,
                           dtype_policy, **self.options.light_inference())

    def objective(self):
        return self.task

    def cached(self, purpose: str):
        """(examples, cache path) of the split read for `purpose`, the cache built if needed
        (once per job).

        Every worker prepares the cache: workers may not share a file system, and on a
        shared one they write identical bytes through atomic renames.
        """
        return self.once(purpose, lambda: self._read_split(purpose))

    def _read_split(self, purpose: str):
        options, tokenizer = self.options, self.tokenizer
        split, path = options.split_of(purpose), options.cache_path(purpose)
        owned = not options.given_cache_path(purpose)
        shuffle_seed = TRAIN_SHUFFLE_SEED if purpose == "train" else None
        examples = self.data_set.reader(options.data_dir, split, options, tokenizer)
        self.source.prepare_cache(path, examples, tokenizer, options, shuffle_seed, owned)
        return examples, path

    def data(self, purpose: str):
        return self.cached(purpose)

    def num_train_examples(self) -> int:
        return len(self.cached("train")[0])

    def train_dataset(self, input_context):
        options = self.options
        return dataset(self.cached("train")[1], options.max_seq_length,
                       self.per_replica_train_batch(input_context), is_training=True,
                       input_context=input_context, seed=options.seed,
                       choice_mask=self.source.masked, batch_is_per_replica=True)

    def dev_dataset(self, input_context=None):
        examples, path = self.cached("eval")
        return dataset(path, self.options.max_seq_length, self.options.eval_batch_size,
                       is_training=False, num_examples=len(examples),
                       input_context=input_context, choice_mask=self.source.masked)

    def evaluate(self, model, step):
        return training.evaluate(self.strategy, model, self.task, self.dev_dataset,
                                 self.task.eval_metric_names,
                                 checkpoint_dir=os.path.join(self.options.output_dir,
                                                             finetuning.CHECKPOINT_SUBDIR))

    def eval_features(self):
        if not self.options.do_eval:
            return None
        return finetuning.real_features(
            self.dev_dataset(), ("input_ids", "input_mask", "segment_ids") +
            (("choice_mask",) if self.source.masked else ()))

    def predict(self, model):
        examples, path = self.cached("predict")
        options = self.options
        return self.write_predictions(examples, predict_probabilities(
            self.strategy, model, path, options.max_seq_length, options.predict_batch_size,
            len(examples), masked=self.source.masked))

    def write_predictions(self, examples, probabilities: np.ndarray) -> np.ndarray:
        if self.chief:
            self.results["predict_accuracy"] = write_predictions(
                self.options.output_dir, examples, probabilities, self.options.task_name)
        return probabilities

    def export_saved_model(self, model) -> None:
        options = self.options
        race_export.export_saved_model(
            model, options.export_dir, options.spm_model_file, options.max_seq_length,
            options.max_qa_length, options.do_lower_case, options.export_layer_norm,
            vocab_file=options.vocab_file, task_name=options.task_name)

    def portable_model(self, model):
        options = self.options
        return race_export.portable_model(model, options.task_name, options.max_seq_length,
                                          options.max_qa_length, options.do_lower_case)


def run_race(options: MultipleChoiceOptions,
             strategy: Optional[tf.distribute.Strategy] = None) -> Dict:
    """Runs the job; returns run_finetuning's results plus `predict_accuracy` and `export_dir`."""
    return MultipleChoiceJob(options, strategy).run()


# Old names, for old imports: the family runs C3 as well as RACE.
RaceJob, RaceOptions, RaceTask = MultipleChoiceJob, MultipleChoiceOptions, MultipleChoiceObjective
