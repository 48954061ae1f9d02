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
from typing import ClassVar, Dict, Optional

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import export, finetuning, tokenization
from albert_tf.finetuning import collapse, predict
from albert_tf.finetuning.command_line import CommandLine
from albert_tf.finetuning.options import FinetuningOptions, TaskOptions
from albert_tf.option_fields import option
from albert_tf.training import run_dir
from albert_tf.export import portable
from albert_tf.modeling.models import AlbertClassifier, classifier_losses
from albert_tf.tasks.classification import (datasets, features, glue, metrics, multilabel,
                                            postprocess)
from albert_tf.tasks.classification.export import classifier_portable_model, export_classifier
from albert_tf.tasks.classification.postprocess import write_predictions  # noqa: F401 (old name)


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
    custom: Optional[glue.CustomTaskOptions] = None
    finetuning: Optional[FinetuningOptions] = None
    FLAG_DEFAULTS: ClassVar[Dict[str, Optional[str]]] = {"output_dir": None}  # required

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
        return losses, {"correct": tf.reduce_sum(tf.cast(equal, tf.float32))}

    def finalize_extra(self, sums):
        if self.regression:
            return {}
        return {"accuracy": sums["correct"] / max(sums["examples"], 1.0)}


def predict_logits(strategy: tf.distribute.Strategy, model, data: tf.data.Dataset,
                   num_examples: int, what: str = "examples") -> np.ndarray:
    """float32 logits [num_examples, K] of a padded, batched eval dataset, in order."""
    def outputs_of(model, batch):
        inputs = {k: batch[k] for k in export.TOKEN_FEATURES}
        return {"logits": tf.cast(model(inputs, training=False)["logits"], tf.float32)}

    outputs = predict.predict_outputs(strategy, model, data, outputs_of, what)
    return outputs.get("logits", np.zeros([0, 1], np.float32))[:num_examples]


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
                                multi_label=self.multi_label, dtype=dtype_policy)

    def objective(self):
        return ClassificationObjective(self.regression, self.multi_label)

    def split(self, split: str):
        """(examples, feature cache path) of a split, the cache built if needed (once)."""
        return self.once(split, lambda: self._read_split(split))

    def _read_split(self, split: str):
        examples = self.task.read(split)
        if not examples:
            raise glue.GlueDataError(f"the {split} split of {self.spec.name} has no example")
        options = self.options
        path = features.prepare_features(options.cached_dir or options.output_dir, self.spec,
                                         split, examples, self.tokenizer,
                                         options.max_seq_length,
                                         tokenization.vocabulary_fingerprint(self.tokenizer))
        return examples, path

    def dataset(self, path: str, batch_size: int, is_training: bool, num_examples: int,
                seed=None, input_context=None) -> tf.data.Dataset:
        return features.dataset(path, self.options.max_seq_length, self.regression, batch_size,
                                is_training, num_examples, seed, input_context,
                                len(self.spec.labels) if self.multi_label else None)

    def data(self, purpose: str):
        return self.split({"train": "train", "eval": "dev", "predict": "test"}[purpose])

    def num_train_examples(self) -> int:
        return len(self.split("train")[0])

    def train_dataset(self, input_context):
        examples, path = self.split("train")
        return self.dataset(path, self.per_replica_train_batch(input_context), True,
                            len(examples), self.options.seed, input_context)

    def eval_features(self):
        if not self.options.do_eval:
            return None
        examples, path = self.split("dev")
        return finetuning.real_features(self.dataset(path, 32, False, len(examples)),
                                        export.TOKEN_FEATURES)

    def evaluate(self, model, step):
        """The task's metrics on the dev set, with `collapsed` (classification, not
        regression: see `finetuning.collapse`)."""
        examples, path = self.split("dev")
        gold = self.once("dev gold", self._dev_gold)
        data = self.dataset(path, self.options.eval_batch_size, False, len(examples))
        logits = predict_logits(self.strategy, model, data, len(examples),
                                f"of {len(examples)} dev examples")
        results = metrics.compute_metrics(self.spec, logits, gold)
        results["eval_examples"] = len(examples)
        if self.multi_label:  # what tuned thresholds would give (tuned on these examples)
            tuned = multilabel.tune_thresholds(multilabel.sigmoid(logits), gold)
            results["tuned_macro_f1"] = metrics.compute_metrics(
                self.spec, logits, gold, tuned)["macro_f1"]
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
        examples, path = self.split("test")
        data = self.dataset(path, self.options.predict_batch_size, False, len(examples))
        logits = predict_logits(self.strategy, model, data, len(examples),
                                f"of {len(examples)} test examples")
        if self.multi_label:
            return self._predict_multi_label(model, examples, logits)
        if not self.chief:
            return {"logits": logits}
        written = postprocess.write_predictions(self.options.output_dir, self.spec, examples,
                                                logits, self.task.submission)
        return dict(written, logits=logits)

    def _predict_multi_label(self, model, examples, logits) -> Dict:
        thresholds = self.thresholds(model)
        if not self.chief:
            return {"logits": logits}
        written = postprocess.write_multilabel_predictions(
            self.options.output_dir, self.spec, examples, logits, thresholds)
        if all(example.label is not None for example in examples):
            written["metrics"] = postprocess.write_test_metrics(
                self.options.output_dir, metrics.compute_metrics(
                    self.spec, logits, metrics.gold_label_ids(self.spec, examples), thresholds),
                len(examples))
        return dict(written, logits=logits)

    def thresholds(self, model) -> np.ndarray:
        """float32 [K]: each label's decision threshold for `model` (the best weights):
        --multi_label_threshold's number, or tuned on the dev set and written to
        label_thresholds.json (0.5 for every label when there is no dev set)."""
        return self.once("thresholds", lambda: self._thresholds(model))

    def _thresholds(self, model) -> np.ndarray:
        labels, fixed = self.spec.labels, self.options.fixed_threshold()
        if fixed is not None:
            return np.full([len(labels)], fixed, np.float32)
        try:
            examples, path = self.split("dev")
        except glue.GlueDataError as err:
            if self.options.do_eval:
                raise
            logging.warning("multi-label thresholds: 0.5 for every label, no dev set to tune "
                            "them on (%s)", err)
            return np.full([len(labels)], multilabel.BASELINE_THRESHOLD, np.float32)
        data = self.dataset(path, self.options.eval_batch_size, False, len(examples))
        logits = predict_logits(self.strategy, model, data, len(examples),
                                f"of {len(examples)} dev examples (tuning thresholds)")
        gold = self.once("dev gold", self._dev_gold)
        thresholds = multilabel.tune_thresholds(multilabel.sigmoid(logits), gold)
        if self.chief:
            record = postprocess.write_thresholds(
                self.options.output_dir, labels, thresholds,
                baseline=metrics.compute_metrics(self.spec, logits, gold)["macro_f1"],
                tuned=metrics.compute_metrics(self.spec, logits, gold, thresholds)["macro_f1"],
                num_examples=len(examples))
            logging.info("multi-label thresholds tuned on %d dev examples: macro-F1 %.4f at "
                         "0.5, %.4f tuned (%s)", len(examples), record["dev_macro_f1_at_0.5"],
                         record["dev_macro_f1_tuned"], postprocess.THRESHOLDS_FILE)
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
