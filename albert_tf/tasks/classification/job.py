"""The GLUE fine-tuning job (what run_classifier.py runs): train, evaluate, predict, export.

Built on `finetuning.run_finetuning`: every saved checkpoint is evaluated on
the whole dev set, the best one (by the task's metric: matthew_corr for CoLA,
pearson for STS-B, eval_accuracy otherwise, as the original) is kept as
`model.ckpt-best` (TF1 format), and prediction uses it. Output directory:

  eval_results.txt, best_eval.json, best_trial.txt, model.ckpt-best.*  (finetuning)
  test_results.tsv, submit_results.tsv, {TASK}.tsv, {task}_predict.json  (postprocess.py)
  *.tf_record (+.json) feature caches (in cached_dir, default output_dir; features.py)
and, with `export_dir`, a SavedModel with `serving_default` (raw text) and
`serve_tokens` signatures, or ONNX / LiteRT files (albert_tf.tasks.classification.export).

The data set (`--task_name`) is a record of `datasets.py`, whose reader gives the task's
spec, examples and submission writer.
"""
from __future__ import annotations

import dataclasses
import functools
import os
from typing import ClassVar, Dict, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import errors, export, fileio, finetuning, tokenization
from albert_tf.finetuning import collapse, predict
from albert_tf.finetuning.command_line import CommandLine
from albert_tf.finetuning.options import FinetuningOptions, TaskOptions
from albert_tf.option_fields import option
from albert_tf.training import run_dir
from albert_tf.export import portable
from albert_tf.modeling.models import AlbertClassifier, classifier_losses
from albert_tf.tasks.classification import (datasets, features, glue, long_text as
                                            long_text_rules, metrics, multilabel, postprocess)
from albert_tf.tasks.classification.export import classifier_portable_model, export_classifier
from albert_tf.tasks.classification.postprocess import write_predictions  # noqa: F401 (old name)


# Eval-result keys of a multi-label run's tuned thresholds: threshold/<label>.
THRESHOLD_KEY = "threshold/"


@dataclasses.dataclass(kw_only=True)
class ClassificationOptions(TaskOptions):
    """run_classifier.py's settings (defaults: the original's flags).

    `task_name`: a data set of `datasets.py` (GLUE's, CLUE's or "custom"; custom needs
    `custom`, the column flags). `classifier_dropout` is the dropout on the pooled output (the original's
    fixed 0.1). Feature caches go to `cached_dir` (default output_dir).
    `finetuning`: the run's options as a separate object, the older spelling: when given,
    its fields replace the run fields here (output_dir may then be left out).
    """

    task_name: str = option(help="GLUE: cola, sst-2, mrpc, sts-b, qqp, mnli, mismnli, qnli, "
                                 "rte, wnli; CLUE: afqmc, tnews, iflytek, ocnli, cmnli, csl; "
                                 "multi-label: goemotions; or custom.")
    data_dir: str = option(help="Directory with the task's files (GLUE layout: "
                                "<data_dir>/MRPC/train.tsv, ...; CLUE: "
                                "<data_dir>/<task>/train.json or <data_dir>/train.json; "
                                "goemotions: <data_dir>/train.tsv and emotions.txt; "
                                "custom: <data_dir>/train.tsv, .csv, .txt or .jsonl).")
    output_dir: str = ""  # may come from `finetuning`
    cached_dir: Optional[str] = option(None, help="Where the TFRecord feature caches go "
                                                  "(default --output_dir); a cache is reused "
                                                  "when task, split, sequence length, "
                                                  "vocabulary and data match.")
    multi_label_threshold: str = option(
        "tuned", help="Multi-label tasks: the probability above which a label is predicted. "
                      "'tuned': per label, the threshold with the best F1 on the dev set "
                      "(written to label_thresholds.json and into the exports); or one "
                      "number in (0, 1) for every label (0.5: the untuned baseline).")
    long_text: str = option(
        "truncate", choices=long_text_rules.MODES,
        help="Texts longer than --max_seq_length (single-text tasks): 'truncate' reads the "
             "first tokens (the original); 'head_tail' the first and last (Sun et al. 2019: "
             "128 + 382 of 510); 'windows' reads every window of the text (--doc_stride) and "
             "aggregates their logits (--window_aggregation). Training, evaluation, "
             "prediction and the exports read the same way.")
    doc_stride: Optional[int] = option(
        None, help="--long_text=windows: tokens between the starts of a text's windows "
                   "(default half a window: (max_seq_length - 2) // 2).")
    window_aggregation: str = option(
        "mean", choices=long_text_rules.AGGREGATIONS,
        help="--long_text=windows: a text's logits are the mean or the max of its windows'.")
    custom: Optional[glue.CustomTaskOptions] = None
    finetuning: Optional[FinetuningOptions] = None
    FLAG_DEFAULTS: ClassVar[Dict[str, Optional[str]]] = {"output_dir": None}  # required
    HAS_EXITS: ClassVar[bool] = True

    def __post_init__(self, dropout_prob: Optional[float]) -> None:
        super().__post_init__(dropout_prob)
        if self.finetuning is not None:
            for field in dataclasses.fields(FinetuningOptions):
                setattr(self, field.name, getattr(self.finetuning, field.name))
            self.finetuning = None  # one copy of each option: the fields above

    def validate(self, num_replicas: int) -> None:
        """Raises ValueError naming the flag that is wrong."""
        self.check_export()
        if datasets.get(self.task_name).settings.get("columns") and self.custom is None:
            raise ValueError("--task_name=custom needs --text_a_column and --label_column")
        if not self.data_dir:
            raise ValueError("--data_dir is required")
        if not self.output_dir:
            raise ValueError("--output_dir is required")
        self.check_vocabulary_given()
        self.check_vocabulary_exists()
        self.check_max_seq_length()
        self.check_schedule()
        if self.max_seq_length < 3:
            raise ValueError(f"--max_seq_length must be at least 3, got {self.max_seq_length}")
        # Evaluation batches are split evenly over the replicas (padded, as the original).
        for flag in ("eval_batch_size", "predict_batch_size"):
            value = getattr(self, flag)
            if value <= 0 or value % num_replicas:
                raise ValueError(f"--{flag} {value} must be a positive multiple of the number "
                                 f"of replicas ({num_replicas})")
        if not 0.0 <= self.classifier_dropout < 1.0:
            raise ValueError(f"--classifier_dropout must be in [0, 1), got "
                             f"{self.classifier_dropout}")
        self.fixed_threshold()  # a bad --multi_label_threshold, in one line
        self.long_text_rule().stride(self.max_seq_length - 2)  # a stride that skips tokens

    def long_text_rule(self) -> long_text_rules.LongText:
        """--long_text, --doc_stride and --window_aggregation as one rule."""
        return long_text_rules.LongText(self.long_text, self.doc_stride,
                                        self.window_aggregation)

    def fixed_threshold(self) -> Optional[float]:
        """--multi_label_threshold as a number, or None for 'tuned'."""
        text = str(self.multi_label_threshold).strip()
        if text == "tuned":
            return None
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not 0.0 < value < 1.0:
            raise ValueError(f"--multi_label_threshold must be 'tuned' or a number in (0, 1), "
                             f"got {self.multi_label_threshold!r}")
        return value


class ClassificationObjective(finetuning.ExampleMeanObjective):
    """Training loss of `AlbertClassifier`: mean cross-entropy (or squared error, or the
    binary cross-entropy of each label, multi-label); `accuracy` counts an example right
    when its prediction is (multi-label: every label of it is)."""

    def __init__(self, regression: bool, multi_label: bool = False):
        self.regression = regression
        self.multi_label = multi_label
        self.metric_names = ("loss_total", "examples") + (() if regression else ("correct",))

    def per_example(self, model, features, training):
        outputs = model(features, training=training)
        losses = classifier_losses(outputs, features)["per_example_loss"]
        if self.regression:
            return losses, {}
        equal = tf.equal(outputs["predictions"], tf.cast(features["label_ids"], tf.int32))
        if self.multi_label:
            equal = tf.reduce_all(equal, axis=-1)
        weights = finetuning.example_weights(features)
        return losses, {"correct": tf.reduce_sum(tf.cast(equal, tf.float32) * weights)}

    def finalize_extra(self, sums):
        if self.regression:
            return {}
        return {"accuracy": sums["correct"] / max(sums["examples"], 1.0)}


def predict_logits(strategy: tf.distribute.Strategy, model, data: tf.data.Dataset,
                   num_examples: int, what: str = "examples") -> np.ndarray:
    """float32 logits [num_examples, K] of a padded, batched eval dataset, in order."""
    return predict_with_exits(strategy, model, data, num_examples, what)[0]


def predict_with_exits(strategy: tf.distribute.Strategy, model, data: tf.data.Dataset,
                       num_examples: int, what: str = "examples"):
    """(float32 logits [num_examples, K], int32 exit layers [num_examples] or None without
    early exit) of a padded, batched eval dataset, in order."""
    exits = getattr(model, "early_exit", None) is not None

    def outputs_of(model, batch):
        outputs = model({k: batch[k] for k in export.TOKEN_FEATURES}, training=False)
        values = {"logits": tf.cast(outputs["logits"], tf.float32)}
        if exits:
            values["exit_layer"] = outputs["exit_layer"]
        return values

    outputs = predict.predict_outputs(strategy, model, data, outputs_of, what)
    logits = outputs.get("logits", np.zeros([0, 1], np.float32))[:num_examples]
    return logits, (outputs.get("exit_layer", np.zeros([0], np.int32))[:num_examples]
                    if exits else None)


def load_tokenizer(options: ClassificationOptions):
    """The Python tokenizer of options (SentencePiece when spm_model_file is given)."""
    return options.load_tokenizer()


def _check_flags(values) -> None:
    datasets.custom_options(values)  # a custom task's missing column flag, in one line


class ClassificationJob(finetuning.FinetuningJob):
    """run_classifier.py's job: GLUE, CLUE or a custom task; every checkpoint evaluated on
    the whole dev set, the best kept by the task's metric (matthew_corr for CoLA, pearson
    for STS-B, eval_accuracy otherwise, as the original)."""

    OPTIONS = ClassificationOptions
    COMMAND_LINE = CommandLine(
        required=("data_dir", "task_name", "albert_config_file", "output_dir"),
        hparams_task=lambda values: values.task_name,
        default_rules=lambda values: ["eval_batch_size:8", "predict_batch_size:8"],
        check=_check_flags, flag_groups=(glue.CustomTaskOptions,))

    @classmethod
    def options_from_command_line(cls, values) -> Dict:
        """`custom` from the custom-task flags (`datasets.custom_options`)."""
        custom = datasets.custom_options(values)
        return {} if custom is None else {"custom": custom}

    @functools.cached_property
    def task(self) -> datasets.TaskData:
        """--task_name's spec, split -> examples and submission writer (the labels of a
        CLUE or custom task read from its files)."""
        return datasets.open_task(self.options)

    @property
    def resolved(self):
        """(TaskSpec, split -> examples, CLUE data set or None): the older spelling of
        `task`, for old callers."""
        clue_task = getattr(self.task.submission, "__self__", None)
        return self.task.spec, self.task.read, clue_task

    @property
    def spec(self) -> glue.TaskSpec:
        return self.task.spec

    @property
    def metric(self) -> str:  # the task's best-checkpoint key, as the original
        return self.spec.metric

    @property
    def regression(self) -> bool:
        return self.spec.is_regression

    @property
    def multi_label(self) -> bool:
        return self.spec.multi_label

    def identity(self):
        spec = self.spec
        return run_dir.RunIdentity.of(run_dir.FINETUNING, spec.name, self.options.albert_config,
                                      labels=spec.labels, metric=spec.metric)

    def build_model(self, dtype_policy: str = "float32"):
        return AlbertClassifier(self.options.albert_config,
                                num_labels=1 if self.regression else len(self.spec.labels),
                                dropout_rate=self.options.classifier_dropout,
                                multi_label=self.multi_label, dtype=dtype_policy,
                                **self.options.light_inference())

    def objective(self):
        return ClassificationObjective(self.regression, self.multi_label)

    def split(self, split: str):
        """(examples, feature cache path) of a split, the cache built if needed (once)."""
        return self.once(split, lambda: self._read_split(split))

    @property
    def windows(self) -> bool:
        return self.options.long_text_rule().mode == "windows"

    def _read_split(self, split: str):
        examples = self.task.read(split)
        if not examples:
            raise glue.GlueDataError(f"the {split} split of {self.spec.name} has no example")
        options = self.options
        rule = options.long_text_rule()
        if rule.mode != "truncate" and self.spec.is_pair:
            raise errors.UserValueError(f"--long_text={rule.mode} reads single-text tasks; "
                                        f"{self.spec.name} is a sentence-pair task (use "
                                        "--long_text=truncate)")
        return examples, self.feature_cache(split, examples)

    def feature_cache(self, split: str, examples, unlabelled: bool = False) -> str:
        """The feature cache of a split's `examples` (`features.prepare_features`: written
        or reused); `unlabelled`: rows the labels' loss skips."""
        options = self.options
        return features.prepare_features(options.cached_dir or options.output_dir, self.spec,
                                         split, examples, self.tokenizer,
                                         options.max_seq_length,
                                         tokenization.vocabulary_fingerprint(self.tokenizer),
                                         long_text=options.long_text_rule(),
                                         unlabelled=unlabelled)

    def example_index(self, split: str) -> Optional[np.ndarray]:
        """int32 [F]: the example each feature (window) of a split belongs to; None when
        each example is one feature."""
        if not self.windows:
            return None
        return self.once(f"{split} windows",
                         lambda: features.read_example_index(self.split(split)[1]))

    def num_features(self, split: str) -> int:
        index = self.example_index(split)
        return len(self.split(split)[0]) if index is None else len(index)

    def dataset(self, path, batch_size: int, is_training: bool, num_examples: int,
                seed=None, input_context=None) -> tf.data.Dataset:
        """`path`: a feature cache, or a list of them read as one; `num_examples`: their
        records (the windows, with --long_text=windows)."""
        return features.dataset(path, self.options.max_seq_length, self.regression, batch_size,
                                is_training, num_examples, seed, input_context,
                                len(self.spec.labels) if self.multi_label else None,
                                windows=self.windows)

    def data(self, purpose: str):
        return self.split({"train": "train", "eval": "dev", "predict": "test"}[purpose])

    def num_train_examples(self) -> int:
        return self.num_features("train")

    def training_records(self):
        """(the feature caches training reads, shuffled as one stream; their record count)."""
        return [self.split("train")[1]], self.num_features("train")

    def train_dataset(self, input_context):
        paths, count = self.training_records()
        return self.dataset(paths, self.per_replica_train_batch(input_context), True, count,
                            self.options.seed, input_context)

    def eval_features(self):
        if not self.options.do_eval:
            return None
        _, path = self.split("dev")
        return finetuning.real_features(self.dataset(path, 32, False, self.num_features("dev")),
                                        export.TOKEN_FEATURES)

    def example_logits(self, model, split: str, batch_size: int, what: str = "",
                       strategy: Optional[tf.distribute.Strategy] = None):
        """(examples, float32 logits [N, K]) of a split: one row per example, its windows'
        logits aggregated (--window_aggregation) under --long_text=windows. `strategy`:
        the run's by default."""
        examples, path = self.split(split)
        count = self.num_features(split)
        data = self.dataset(path, batch_size, False, count)
        logits, exits = predict_with_exits(strategy or self.strategy, model, data, count,
                                           f"of {len(examples)} {split} examples{what}")
        # Early exit: the mean layer the split's inputs exited at (1..L).
        self.mean_exit_layer = None if exits is None or not len(exits) else float(exits.mean())
        index = self.example_index(split)
        if index is not None:
            logits = long_text_rules.aggregate(logits, index, len(examples),
                                               self.options.window_aggregation)
        return examples, logits

    def evaluate(self, model, step):
        """The task's metrics on the dev set, with `collapsed` (classification, not
        regression: see `finetuning.collapse`)."""
        gold = self.once("dev gold", self._dev_gold)
        examples, logits = self.example_logits(model, "dev", self.options.eval_batch_size)
        results = metrics.compute_metrics(self.spec, logits, gold)
        results["eval_examples"] = len(examples)
        if self.mean_exit_layer is not None:
            results["eval_exit_layer"] = self.mean_exit_layer
        if self.multi_label:
            results.update(self._tuned_on(logits, gold))
        elif not self.regression:  # one label predicted almost everywhere?
            collapse.mark(results, collapse.label_collapse(
                np.argmax(logits, axis=-1), gold, labels=self.spec.labels),
                self.spec.name, step)
        return results

    def _dev_gold(self) -> np.ndarray:
        """The dev labels: float values (regression) or label indices."""
        return metrics.gold_label_ids(self.spec, self.split("dev")[0])

    def predict(self, model):
        """Logits of the test set, written as the submission files (multi-label:
        predictions.jsonl, and the test metrics when every test example is labelled)."""
        examples, logits = self.example_logits(model, "test", self.options.predict_batch_size)
        if self.multi_label:
            return self._predict_multi_label(model, examples, logits)
        if not self.chief:
            return {"logits": logits}
        written = postprocess.write_predictions(self.options.output_dir, self.spec, examples,
                                                logits, self.task.submission)
        return dict(written, logits=logits)

    def _predict_multi_label(self, model, examples, logits) -> Dict:
        if not self.chief:
            return {"logits": logits}
        thresholds = self.thresholds(model)
        output_dir = self.options.output_dir
        written = postprocess.write_multilabel_predictions(output_dir, self.spec, examples,
                                                           logits, thresholds)
        # An empty label column reads as empty sets: no gold to score against.
        if all(example.label is not None for example in examples) and \
                any(example.label for example in examples):
            written["metrics"] = postprocess.write_test_metrics(
                output_dir, metrics.compute_metrics(
                    self.spec, logits, metrics.gold_label_ids(self.spec, examples), thresholds),
                len(examples))
        else:
            postprocess.remove_test_metrics(output_dir, "the test file is not labelled (every "
                                                        "example with a label set)")
        return dict(written, logits=logits)

    def _tuned_on(self, logits: np.ndarray, gold: np.ndarray) -> Dict[str, float]:
        """`tuned_macro_f1` and `threshold/<label>`: thresholds tuned on these dev logits,
        and the macro-F1 they give there (optimistic: tuned and scored on the same set).
        The best checkpoint's are the thresholds the run then uses."""
        tuned = multilabel.tune_thresholds(logits, gold)
        values = {"tuned_macro_f1": metrics.compute_metrics(self.spec, logits, gold,
                                                            tuned)["macro_f1"]}
        values.update({f"{THRESHOLD_KEY}{label}": float(threshold)
                       for label, threshold in zip(self.spec.labels, tuned)})
        return values

    def thresholds(self, model) -> np.ndarray:
        """float64 [K]: each label's decision threshold for `model` (the best weights),
        written to label_thresholds.json: --multi_label_threshold's number; else those the
        best checkpoint's evaluation tuned (best_eval.json); else tuned on the dev set now;
        else 0.5 for every label."""
        return self.once("thresholds", lambda: self._thresholds(model))

    def _thresholds(self, model) -> np.ndarray:
        labels, fixed = self.spec.labels, self.options.fixed_threshold()
        if fixed is not None:
            return self._record(np.full([len(labels)], fixed),
                                f"--multi_label_threshold={fixed:g}")
        best = self._best_eval()
        if all(f"{THRESHOLD_KEY}{label}" in best for label in labels):
            return self._record(
                np.array([best[f"{THRESHOLD_KEY}{label}"] for label in labels]),
                f"tuned on the dev set at step {best.get('global_step')} (the best "
                "checkpoint's evaluation, best_eval.json)", best.get("eval_examples"),
                best.get("macro_f1"), best.get("tuned_macro_f1"))
        try:
            self.split("dev")
        except glue.GlueDataError as err:
            if self.options.do_eval:
                raise
            logging.warning("multi-label thresholds: 0.5 for every label, no dev set to tune "
                            "them on (%s)", err)
            return self._record(np.full([len(labels)], multilabel.BASELINE_THRESHOLD),
                                "0.5: no dev set")
        # In this process alone (the chief's export runs without the other workers).
        examples, logits = self.example_logits(model, "dev", self.options.eval_batch_size,
                                               " (tuning thresholds)",
                                               tf.distribute.get_strategy())
        gold = self.once("dev gold", self._dev_gold)
        tuned = self._tuned_on(logits, gold)
        return self._record(np.array([tuned[f"{THRESHOLD_KEY}{label}"] for label in labels]),
                            "tuned on the dev set", len(examples),
                            metrics.compute_metrics(self.spec, logits, gold)["macro_f1"],
                            tuned["tuned_macro_f1"])

    def _best_eval(self) -> Dict:
        path = os.path.join(self.options.output_dir, "best_eval.json")
        return fileio.read_json(path) if tf.io.gfile.exists(path) else {}

    def _record(self, thresholds: np.ndarray, source: str, dev_examples=None,
                at_half=None, tuned=None) -> np.ndarray:
        """Writes label_thresholds.json (chief) and logs where the thresholds come from."""
        if self.chief:
            postprocess.write_thresholds(self.options.output_dir, self.spec.labels, thresholds,
                                         source, dev_examples, at_half, tuned)
        logging.info("multi-label thresholds: %s%s (%s)", source,
                     f"; dev macro-F1 {at_half:.4f} at 0.5, {tuned:.4f} tuned"
                     if at_half is not None and tuned is not None else "",
                     postprocess.THRESHOLDS_FILE)
        return thresholds

    def export_saved_model(self, model) -> None:
        export_classifier(model, self.options, self.spec, self._export_thresholds(model))

    def portable_model(self, model) -> portable.PortableModel:
        return classifier_portable_model(model, self.options, self.spec,
                                         self._export_thresholds(model))

    def _export_thresholds(self, model) -> Optional[np.ndarray]:
        return self.thresholds(model) if self.multi_label else None


def run_glue(options: ClassificationOptions, strategy: Optional[tf.distribute.Strategy] = None) -> Dict:
    """Trains / evaluates / predicts / exports as configured; returns run_finetuning's dict
    (plus "export_dir" when exported)."""
    return ClassificationJob(options, strategy).run()


# Old names, for old imports: the family runs CLUE and custom tasks as well as GLUE.
GlueJob, GlueOptions, GlueTask = ClassificationJob, ClassificationOptions, ClassificationObjective
