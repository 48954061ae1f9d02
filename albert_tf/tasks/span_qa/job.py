"""The SQuAD fine-tuning job behind run_squad.py (v1.1 and v2.0).

`run_squad(options, strategy)`: reads the JSON files, builds (or reuses) the
TFRecord feature caches, fine-tunes `AlbertSpanLabeler` (v1) or
`AlbertSquadV2` (v2) through `finetuning.run_finetuning`, evaluating every
checkpoint on `predict_file` when it has gold answers (best checkpoint by
`f1`, kept as `model.ckpt-best` in the TF1 format), then predicts with the
best weights and optionally exports a SavedModel (`squad_export`).

Files in `output_dir` (besides run_finetuning's checkpoints/, train/,
eval_results.txt, best_eval.json, best_trial.txt, model.ckpt-best.*):
  train.tf_record(.json), predict.tf_record(.json)   feature caches (default paths)
  predictions.json, nbest_predictions.json, null_odds.json (v2)
  predict_results.json   metrics of the final predictions (when gold answers exist)

Vocabulary: `spm_model_file` (SentencePiece, the English models) or
`vocab_file` (WordPiece, the Chinese models: CMRC 2018); SentencePiece wins
when both are given, as in the original. Metric (`metric`): "squad" (the
official v1.1 / v2.0 script), "cmrc2018" (`cmrc_metrics`, the official CMRC
2018 definitions; v1.1-style data only) or "auto": cmrc2018 when more than
half of the predict file's non-whitespace context characters are CJK
ideographs (`squad_data.cjk_fraction`) and the data is not v2, else squad. The flags and
the predict file name a data set (`datasets.resolve`: squad_v1, squad_v2 or cmrc2018)
whose record's scoring scores the predictions (`scoring`).

v2 threshold: with `null_score_diff_threshold` None, it is tuned on the
evaluated set itself (as the original): the answers of predictions.json are ""
where null_odds > best_f1_thresh, and the results say
`null_threshold_source = "tuned_on_eval_set"`. With a given threshold, that one
is used (`"given"`). `exact` / `f1` are the official v2.0 score of
predictions.json as written; `best_*` come from null_odds.json. `collapsed` (v2): those
answers are "" (or not "") for at least 95% of the questions while the gold's share of
that outcome is below 80% (`finetuning.collapse`, with one warning).
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import ClassVar, Dict, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.errors import UserValueError, check_file
from albert_tf import fileio, finetuning, tokenization
from albert_tf.export import portable
from albert_tf.training import run_dir
from albert_tf.modeling.models import AlbertSpanLabeler, AlbertSquadV2
from albert_tf.finetuning import collapse, predict
from albert_tf.finetuning.command_line import CommandLine
from albert_tf.finetuning.options import TaskOptions
from albert_tf.option_fields import POSITIVE, check_fields, option
from albert_tf.tasks import registry
from albert_tf.tasks.span_qa import export as squad_export
from albert_tf.tasks.span_qa import (data as squad_data, datasets, features as squad_features,
                                     postprocess as squad_postprocess)
from albert_tf.tasks.span_qa.datasets import CJK_METRIC_THRESHOLD  # noqa: F401 (its old place)

METRIC = "f1"  # both metrics report it (in percent)
METRICS = ("auto", "squad", "cmrc2018")
V1_OUTPUTS = ("start_logits", "end_logits")
V2_OUTPUTS = ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
              "cls_logits")


class SpanQaObjective(finetuning.ExampleMeanObjective):
    """The original's losses, per example then averaged over the global batch.

    v1: (CE(start) + CE(end)) / 2; v2: 0.5 (CE(start) + CE(end)) + 0.5 sigmoid
    CE(cls_logits, is_impossible), with the end teacher-forced on the gold start.
    """

    def __init__(self, version_2_with_negative: bool):
        self.v2 = version_2_with_negative

    def per_example(self, model, features, training):
        outputs = model(features, training=training)
        if self.v2:
            start = _nll(outputs["start_log_probs"], features["start_positions"])
            end = _nll(outputs["end_log_probs"], features["end_positions"])
            logits = tf.cast(outputs["cls_logits"], tf.float32)
            target = tf.cast(tf.reshape(features["is_impossible"], [-1]), tf.float32)
            answer = tf.nn.sigmoid_cross_entropy_with_logits(labels=target, logits=logits)
            return 0.5 * (start + end) + 0.5 * answer, {}
        start = _nll(tf.nn.log_softmax(tf.cast(outputs["start_logits"], tf.float32)),
                     features["start_positions"])
        end = _nll(tf.nn.log_softmax(tf.cast(outputs["end_logits"], tf.float32)),
                   features["end_positions"])
        return (start + end) / 2.0, {}


def _nll(log_probs, positions):
    """-log_probs[b, positions[b]] -> [B]."""
    positions = tf.reshape(tf.cast(positions, tf.int32), [-1, 1])
    return -tf.squeeze(tf.gather(tf.cast(log_probs, tf.float32), positions, batch_dims=1), -1)


@dataclasses.dataclass(kw_only=True)
class SpanQaOptions(TaskOptions):
    """run_squad.py's flags (the original's names and defaults).

    `spm_model_file` or `vocab_file` (see the module docstring). The training steps are
    derived from `num_train_epochs` and `warmup_proportion` (the original's flags), so
    `train_step` / `warmup_step` are not read; there is no separate evaluation: every
    checkpoint is scored on `predict_file` when it has gold answers.
    """

    train_file: Optional[str] = option(None, help="SQuAD JSON for training.")
    predict_file: Optional[str] = option(None, help="SQuAD JSON for prediction (and "
                                                    "evaluation when it has answers).")
    train_feature_file: Optional[str] = option(
        None, help="Training feature cache (TFRecord; built when missing). Default: "
                   "<output_dir>/train.tf_record.")
    predict_feature_file: Optional[str] = option(
        None, help="Prediction feature cache (TFRecord; built when missing). Default: "
                   "<output_dir>/predict.tf_record.")
    do_train: bool = option(False, help="Fine-tune on --train_file.")
    do_predict: bool = option(False, help="Predict --predict_file (evaluating every "
                                          "checkpoint when training and the file has "
                                          "answers).")
    max_seq_length: int = 384
    doc_stride: int = option(128, help="Stride of the sliding document windows.")
    max_query_length: int = option(64, help="Maximum question length in tokens.")
    num_train_epochs: float = option(3.0, help="Epochs: steps = int(#examples / batch * "
                                               "epochs).")
    warmup_proportion: float = option(0.1, help="Fraction of the steps used for linear "
                                                "warmup.")
    n_best_size: int = option(20, help="Answers kept in nbest_predictions.json.",
                              check=POSITIVE)
    max_answer_length: int = option(30, help="Longest answer, in tokens.", check=POSITIVE)
    version_2_with_negative: bool = option(False, help="SQuAD v2.0: questions may have no "
                                                       "answer.")
    start_n_top: int = option(5, help="v2: beam size for the start position.",
                              check=POSITIVE)
    end_n_top: int = option(5, help="v2: beam size for the end position.", check=POSITIVE)
    null_score_diff_threshold: Optional[float] = option(
        None, help="v2: answer \"\" when null_odds is above this. Default: tuned on "
                   "--predict_file itself, as the original (reported as "
                   "null_threshold_source = tuned_on_eval_set).")
    metric: str = option(
        "auto", choices=METRICS,
        help="Metric of --do_predict (and of choosing the best checkpoint): the official "
             "SQuAD v1.1/v2.0 script, or the official CMRC 2018 definitions. auto: cmrc2018 "
             "when more than half of the predict file's non-whitespace context characters "
             "are CJK ideographs (and not --version_2_with_negative), else squad.")
    # run_squad.py counts in epochs and evaluates on --predict_file: no such flags.
    NOT_FLAGS: ClassVar[Tuple[str, ...]] = ("train_step", "warmup_step", "eval_batch_size",
                                            "do_eval")

    def validate(self, num_replicas: int = 1) -> None:
        """Raises ValueError naming the flag that is wrong."""
        self.check_export()
        self.check_vocabulary_given()
        if self.train_feature_file and self.train_feature_file == self.predict_feature_file:
            raise ValueError("--train_feature_file and --predict_feature_file are the same file "
                             f"({self.train_feature_file}): training and prediction features "
                             "need a cache each")
        if self.metric not in METRICS:
            raise ValueError(f"--metric must be one of {', '.join(METRICS)}, got {self.metric!r}")
        if self.metric == "cmrc2018" and self.version_2_with_negative:
            raise ValueError("--metric=cmrc2018 scores SQuAD v1.1-style data (every question "
                             "answerable); it cannot be used with --version_2_with_negative")
        if not (self.do_train or self.do_predict):
            raise ValueError("at least one of --do_train or --do_predict must be set")
        if self.do_train and not self.train_file:
            raise ValueError("--do_train needs --train_file")
        if self.do_predict and not self.predict_file:
            raise ValueError("--do_predict needs --predict_file")
        if self.do_train:
            check_file(self.train_file, "--train_file", "SQuAD JSON file")
        if self.do_predict:
            check_file(self.predict_file, "--predict_file", "SQuAD JSON file")
        self.check_max_seq_length()
        check_fields(self, ("n_best_size", "max_answer_length", "start_n_top", "end_n_top",
                            "predict_batch_size"))
        if self.version_2_with_negative and self.start_n_top > self.max_seq_length:
            raise ValueError("--start_n_top cannot exceed --max_seq_length")
        self.feature_options().validate()

    def feature_options(self) -> squad_features.FeatureOptions:
        return squad_features.FeatureOptions(self.max_seq_length, self.doc_stride,
                                             self.max_query_length, self.do_lower_case)

    def postprocess_options(self) -> squad_postprocess.PostprocessOptions:
        return squad_postprocess.PostprocessOptions(
            self.n_best_size, self.max_answer_length, self.version_2_with_negative,
            self.null_score_diff_threshold)


def build_model(options: SpanQaOptions, dtype_policy: str = "float32"):
    if options.version_2_with_negative:
        return AlbertSquadV2(options.albert_config, start_n_top=options.start_n_top,
                             end_n_top=options.end_n_top, dropout_rate=options.classifier_dropout,
                             dtype=dtype_policy, inference_layers=options.inference_layers)
    return AlbertSpanLabeler(options.albert_config, dtype=dtype_policy,
                             inference_layers=options.inference_layers)


def load_tokenizer(options: SpanQaOptions) -> tokenization.Tokenizer:
    """The Python tokenizer of options (SentencePiece when spm_model_file is given)."""
    return options.load_tokenizer()


def resolve_metric(metric: str, dataset: list, version_2_with_negative: bool) -> str:
    """"squad" or "cmrc2018" for `metric` (see the module docstring for "auto"): the
    scoring of the data set `datasets.resolve` names."""
    name = datasets.resolve(metric, version_2_with_negative, dataset)
    return datasets.get(name).settings["scoring"].name


def prepare_features(path: str, examples, tokenizer, options: SpanQaOptions, is_training: bool,
                     source: str, owned: bool = False) -> Dict:
    """The feature cache at `path`, built unless a matching one exists; returns its
    description (`features.prepare_feature_file`; `owned`: albert_tf chose the path)."""
    featurizer = squad_features.SquadFeaturizer(tokenizer, options.feature_options())
    return squad_features.prepare_feature_file(path, featurizer, examples, is_training, source,
                                               owned)


def train_dataset(path: str, max_seq_length: int, batch_size: int, input_context=None,
                  seed: Optional[int] = None) -> tf.data.Dataset:
    """Training batches of `batch_size` (one replica's: sharded per input pipeline with
    `input_context`): repeated, shuffled (buffer 100 as the original; larger here), parsed."""
    ds = tf.data.TFRecordDataset(path)
    if input_context is not None and input_context.num_input_pipelines > 1:
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    ds = ds.repeat().shuffle(1000, seed=seed)
    ds = ds.batch(batch_size, drop_remainder=True)
    return ds.map(lambda s: squad_features.parse_features(s, max_seq_length, True),
                  num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def predict_raw(model, path: str, max_seq_length: int, batch_size: int, v2: bool,
                strategy: Optional[tf.distribute.Strategy] = None) -> Dict[str, np.ndarray]:
    """Model outputs for every feature of a prediction cache, keyed by output name.

    Returns `unique_ids` [F] plus the v1 (`start_logits`, `end_logits` [F, S]) or
    v2 (beam and `cls_logits`) outputs, in file order.
    """
    strategy = strategy or tf.distribute.get_strategy()
    names = V2_OUTPUTS if v2 else V1_OUTPUTS
    ds = tf.data.TFRecordDataset(path).batch(batch_size).map(
        lambda s: squad_features.parse_features(s, max_seq_length, False))

    def outputs_of(model, features):
        inputs = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids", "p_mask")}
        outputs = model(inputs, training=False)
        return dict({name: outputs[name] for name in names}, unique_ids=features["unique_ids"])

    outputs = predict.predict_outputs(strategy, model, ds, outputs_of, "features", log_every=50)
    if "unique_ids" not in outputs:
        raise UserValueError(f"{path}: no features to predict")
    return outputs


def score(dataset, predictions: squad_postprocess.SquadPredictions, options: SpanQaOptions,
          metric: str = "squad") -> Tuple[Dict, Dict]:
    """Official metrics of predictions (v2: also tunes the null threshold if not given).

    metric: "squad" or "cmrc2018" (already resolved, see `resolve_metric`): with
    --version_2_with_negative, the data set's scoring (`datasets`, `scoring`).
    Returns (answers to write, metrics without the lists of question ids).
    """
    name = datasets.resolve(metric, options.version_2_with_negative, dataset)
    return datasets.get(name).settings["scoring"].score(
        dataset, predictions, options.null_score_diff_threshold, options.predict_file)


def answerability_collapse(examples, answers) -> Optional[str]:
    """`collapse.answerability_collapse` of the answers as written ("" = no answer) against
    the gold (a question without gold answers is unanswerable, as the official v2.0 script)."""
    predicted = [not answers.get(e.qas_id, "") for e in examples]
    gold = [e.is_impossible or not e.answers for e in examples]
    return collapse.answerability_collapse(predicted, gold)


@dataclasses.dataclass
class PredictSplit:
    """--predict_file: its JSON, examples, whether it has gold answers, the data set
    (`datasets`: its scoring), its feature cache and the features' position arrays."""

    dataset: Dict
    examples: list
    has_gold: bool
    data_set: registry.DataSet
    path: str
    feature_arrays: Dict[str, np.ndarray]

    @property
    def metric_name(self) -> str:
        """The --metric value that scores it: "squad" or "cmrc2018"."""
        return self.data_set.settings["scoring"].name

    def score(self, predictions: squad_postprocess.SquadPredictions,
              options: SpanQaOptions) -> Tuple[Dict, Dict]:
        """(answers to write, metrics) of predictions by the data set's scoring."""
        return self.data_set.settings["scoring"].score(
            self.dataset, predictions, options.null_score_diff_threshold, options.predict_file)


def _hparams_task(values) -> str:
    """The --hparams=paper table's task: the data set the flags name before any file is
    read (`datasets.resolve`: CMRC 2018 for --metric=cmrc2018 or the Chinese WordPiece
    vocabulary with --metric=auto, else SQuAD v1.1 / v2.0)."""
    return datasets.resolve(values.metric, values.version_2_with_negative,
                            wordpiece=bool(values.vocab_file and not values.spm_model_file))


class SpanQaJob(finetuning.FinetuningJob):
    """run_squad.py's job: SQuAD v1.1 / v2.0 or CMRC 2018, best checkpoint by `f1` on
    predict_file when it has gold answers."""

    metric = METRIC
    OPTIONS = SpanQaOptions
    COMMAND_LINE = CommandLine(
        required=("albert_config_file", "output_dir"), hparams_task=_hparams_task,
        default_rules=lambda values: ["max_query_length:squad", "doc_stride:squad",
                                      "predict_batch_size:8"],
        print_predict_metrics=True, renamed_flags={"dropout_prob": "classifier_dropout"})

    def __init__(self, options: SpanQaOptions, strategy=None):
        super().__init__(options, strategy)
        self.v2 = options.version_2_with_negative

    def identity(self):
        task = "squad v2.0" if self.v2 else "squad v1.1"
        return run_dir.RunIdentity.of(run_dir.FINETUNING, task, self.options.albert_config,
                                      metric=METRIC)

    def check_weights_to_predict_with(self) -> None:
        """Prediction alone needs weights: --init_checkpoint or a trained output_dir."""
        options = self.options
        if not options.do_train and not options.init_checkpoint and not tf.io.gfile.exists(
                os.path.join(options.output_dir, finetuning.BEST_PREFIX + ".index")) and \
                tf.train.latest_checkpoint(os.path.join(options.output_dir,
                                                        finetuning.CHECKPOINT_SUBDIR)) is None:
            raise UserValueError(f"--do_predict without --do_train needs --init_checkpoint or a "
                                 f"trained model in {options.output_dir}")

    def build_model(self, dtype_policy: str = "float32"):
        return build_model(self.options, dtype_policy)

    def objective(self):
        return SpanQaObjective(self.v2)

    def evaluates(self) -> bool:
        """SQuAD evaluates the --predict_file predictions (when the file has answers)."""
        return bool(self.options.do_predict and self.options.predict_file)

    def finetuning_options(self):
        """The shared rule's steps from --num_train_epochs and --warmup_proportion (one
        step, no warmup, without training); every checkpoint is evaluated when training on
        a --predict_file with gold answers."""
        options = super().finetuning_options()
        if not self.options.do_train:
            options = dataclasses.replace(options, train_step=1, warmup_step=0)
        return dataclasses.replace(options, do_eval=bool(
            self.options.do_train and self.options.do_predict
            and self.predict_split().has_gold))

    def prepare(self) -> None:
        self.check_weights_to_predict_with()
        super().prepare()

    def data(self, purpose: str):
        """train: (examples, cache path) of --train_file; predict: --predict_file's
        `PredictSplit` (which evaluation reads too)."""
        build = {"train": self.train_split, "predict": self.predict_split}.get(purpose)
        return build() if build is not None else None  # no "eval": predict_file scores

    def train_split(self):
        """(number of examples, feature cache path) of --train_file, the cache built if
        needed (once)."""
        return self.once("train", self._read_train_split)

    def _read_train_split(self):
        options = self.options
        # Every span QA data set has the same reader: the flags' data set reads the file.
        reader = datasets.get(datasets.resolve(options.metric, self.v2)).reader
        examples = reader(options.train_file, True, self.v2)
        path = options.train_feature_file or os.path.join(options.output_dir, "train.tf_record")
        prepare_features(path, squad_features.shuffle_for_training(examples), self.tokenizer,
                         options, True, options.train_file,
                         owned=not options.train_feature_file)
        return len(examples), path

    def num_train_examples(self) -> int:
        return self.train_split()[0]

    def train_dataset(self, input_context):
        options = self.options
        return train_dataset(self.train_split()[1], options.max_seq_length,
                             self.per_replica_train_batch(input_context), input_context,
                             options.seed)

    def predict_split(self) -> "PredictSplit":
        """--predict_file read and its feature cache built if needed (once)."""
        return self.once("predict", self._read_predict_split)

    def _read_predict_split(self) -> "PredictSplit":
        options = self.options
        dataset = squad_data.load_squad_json(options.predict_file)
        data_set = datasets.get(datasets.resolve(options.metric, self.v2, dataset))
        examples = data_set.reader(options.predict_file, False, self.v2, data=dataset)
        path = options.predict_feature_file or os.path.join(options.output_dir,
                                                            "predict.tf_record")
        prepare_features(path, examples, self.tokenizer, options, False, options.predict_file,
                         owned=not options.predict_feature_file)
        return PredictSplit(
            dataset=dataset, examples=examples,
            has_gold=any(e.answers or e.is_impossible for e in examples),
            data_set=data_set, path=path,
            feature_arrays=squad_features.read_feature_arrays(path, options.max_seq_length))

    def eval_features(self):
        """--predict_file's first features (p_mask too: the check compares the passage)."""
        if not self.options.do_predict:
            return None
        arrays = self.predict_split().feature_arrays
        return {name: arrays[name][:portable.AGREEMENT_EXAMPLES].astype(np.int32)
                for name in squad_features.SEQUENCE_FIELDS}

    def predictions_of(self, model) -> squad_postprocess.SquadPredictions:
        data = self.predict_split()
        raw = predict_raw(model, data.path, self.options.max_seq_length,
                          self.options.predict_batch_size, self.v2, self.strategy)
        return squad_postprocess.postprocess(data.examples, data.feature_arrays, raw,
                                             self.options.postprocess_options())

    def write(self, predictions, answers) -> Dict:
        if not self.chief:
            return {}
        return squad_postprocess.write_predictions(self.options.output_dir, predictions,
                                                   answers)

    def evaluate(self, model, step) -> Dict:
        """The checkpoint's metrics on predict_file (its predictions files written); v2
        adds `collapsed` (no answer, or an answer, almost everywhere: `finetuning.collapse`)."""
        predictions, data = self.predictions_of(model), self.predict_split()
        answers, metrics = data.score(predictions, self.options)
        self.write(predictions, answers)
        if self.v2:
            collapse.mark(metrics, answerability_collapse(data.examples, answers),
                          "SQuAD v2.0", step, warmup_flag="--warmup_proportion")
        return metrics

    def predict(self, model):
        predictions, data = self.predictions_of(model), self.predict_split()
        if data.has_gold:
            answers, metrics = data.score(predictions, self.options)
            self.results["predict_metrics"] = metrics
            if self.chief:
                fileio.atomic_write_text(
                    os.path.join(self.options.output_dir, "predict_results.json"),
                    json.dumps(metrics, indent=2) + "\n")
            logging.info("predictions of the best weights: %s", json.dumps(metrics))
        else:
            answers = data.data_set.settings["scoring"].answers(
                predictions, self.options.null_score_diff_threshold)
        self.results.update(paths=self.write(predictions, answers), predictions=predictions,
                            answers=answers)
        return answers

    def export_options(self) -> squad_export.ExportOptions:
        """The serving settings: the null threshold given, or the one tuned on predict_file."""
        options = self.options
        threshold = options.null_score_diff_threshold
        if threshold is None and "predict_metrics" in self.results and self.v2:
            threshold = self.results["predict_metrics"]["null_score_diff_threshold"]
        return squad_export.ExportOptions(
            max_seq_length=options.max_seq_length, doc_stride=options.doc_stride,
            max_query_length=options.max_query_length, do_lower_case=options.do_lower_case,
            n_best_size=options.n_best_size, max_answer_length=options.max_answer_length,
            version_2_with_negative=self.v2, null_score_diff_threshold=threshold,
            layer_norm=options.export_layer_norm)

    def export_saved_model(self, model) -> None:
        squad_export.export_saved_model(model, self.options.export_dir,
                                        self.options.spm_model_file,
                                        vocab_file=self.options.vocab_file,
                                        options=self.export_options())

    def portable_model(self, model):
        return squad_export.portable_model(model, self.export_options())


def run_squad(options: SpanQaOptions, strategy: Optional[tf.distribute.Strategy] = None) -> Dict:
    """Runs the job; returns run_finetuning's results plus `predict_metrics` / `paths`."""
    return SpanQaJob(options, strategy).run()


# Old names, for old imports: the family runs CMRC 2018 as well as SQuAD.
SquadJob, SquadOptions, SquadTask = SpanQaJob, SpanQaOptions, SpanQaObjective
