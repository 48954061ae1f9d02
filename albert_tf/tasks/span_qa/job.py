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
ideographs (`squad_data.cjk_fraction`) and the data is not v2, else squad.

v2 threshold: with `null_score_diff_threshold` None, it is tuned on the
evaluated set itself (as the original): the answers of predictions.json are ""
where null_odds > best_f1_thresh, and the results say
`null_threshold_source = "tuned_on_eval_set"`. With a given threshold, that one
is used (`"given"`). `exact` / `f1` are the official v2.0 score of
predictions.json as written; `best_*` come from null_odds.json.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.errors import UserValueError, check_file
from albert_tf import checkpoints, fileio, finetuning, tokenization
from albert_tf.kernels import fused_ops
from albert_tf.export import onnx as onnx_export
from albert_tf.training import run_dir
from albert_tf.config import AlbertConfig
from albert_tf.modeling.models import AlbertSpanLabeler, AlbertSquadV2
from albert_tf.tasks.span_qa import (data as squad_data, features as squad_features,
                                     metrics as squad_metrics, postprocess as squad_postprocess)

METRIC = "f1"  # both metrics report it (in percent)
METRICS = ("auto", "squad", "cmrc2018")
CJK_METRIC_THRESHOLD = 0.5  # auto: cmrc2018 above this share of CJK context characters
V1_OUTPUTS = ("start_logits", "end_logits")
V2_OUTPUTS = ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
              "cls_logits")


class SquadTask(finetuning.ExampleMeanTask):
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


@dataclasses.dataclass
class SquadOptions:
    """run_squad.py's flags (the original's names and defaults).

    `spm_model_file` or `vocab_file` (see the module docstring); pass
    spm_model_file=None for a WordPiece vocabulary.
    """

    albert_config: AlbertConfig
    spm_model_file: Optional[str]
    output_dir: str
    train_file: Optional[str] = None
    predict_file: Optional[str] = None
    train_feature_file: Optional[str] = None
    predict_feature_file: Optional[str] = None
    init_checkpoint: Optional[str] = None
    init_from_group0: bool = False
    do_lower_case: bool = True
    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64
    do_train: bool = False
    do_predict: bool = False
    train_batch_size: int = 32
    predict_batch_size: int = 8
    learning_rate: float = 5e-5
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    iterations_per_loop: int = 1000
    n_best_size: int = 20
    max_answer_length: int = 30
    version_2_with_negative: bool = False
    start_n_top: int = 5
    end_n_top: int = 5
    dropout_prob: float = 0.1
    null_score_diff_threshold: Optional[float] = None
    optimizer: str = "adamw"
    mixed_precision: str = "float32"
    jit_compile: bool = False
    gradient_accumulation_steps: int = 1
    seed: Optional[int] = None
    export_dir: Optional[str] = None
    export_layer_norm: str = "auto"
    export_format: Tuple[str, ...] = onnx_export.DEFAULT_EXPORT_FORMATS
    export_int8: bool = False
    vocab_file: Optional[str] = None
    metric: str = "auto"

    def validate(self) -> None:
        fused_ops.check_export_layer_norm(self.export_layer_norm, "--export_layer_norm")
        onnx_export.check_export_formats(self.export_format, self.export_int8,
                                         mixed_precision=self.mixed_precision,
                                         export_dir=self.export_dir)
        if not self.spm_model_file and not self.vocab_file:
            raise ValueError("give --spm_model_file (SentencePiece) or --vocab_file (WordPiece)")
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
        if self.max_seq_length > self.albert_config.max_position_embeddings:
            raise ValueError(f"--max_seq_length {self.max_seq_length} exceeds the model's "
                             f"max_position_embeddings {self.albert_config.max_position_embeddings}")
        for name in ("n_best_size", "max_answer_length", "start_n_top", "end_n_top",
                     "predict_batch_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--{name} must be positive, got {getattr(self, name)}")
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


def build_model(options: SquadOptions, dtype_policy: str = "float32"):
    if options.version_2_with_negative:
        return AlbertSquadV2(options.albert_config, start_n_top=options.start_n_top,
                             end_n_top=options.end_n_top, dropout_rate=options.dropout_prob,
                             dtype=dtype_policy)
    return AlbertSpanLabeler(options.albert_config, dtype=dtype_policy)


def load_tokenizer(options: SquadOptions) -> tokenization.Tokenizer:
    """The Python tokenizer of options (SentencePiece when spm_model_file is given); its
    errors are TokenizerErrors, user errors naming the flag."""
    return tokenization.load_tokenizer(vocab_file=options.vocab_file,
                                       spm_model_file=options.spm_model_file,
                                       do_lower_case=options.do_lower_case)


def resolve_metric(metric: str, dataset: list, version_2_with_negative: bool) -> str:
    """"squad" or "cmrc2018" for `metric` (see the module docstring for "auto")."""
    if metric != "auto":
        return metric
    if version_2_with_negative or squad_metrics.is_v2_dataset(dataset):
        return "squad"
    share = squad_data.cjk_fraction(dataset)
    chosen = "cmrc2018" if share > CJK_METRIC_THRESHOLD else "squad"
    logging.info("--metric=auto: %.1f%% of the context characters are CJK ideographs -> %s",
                 100 * share, chosen)
    return chosen


def prepare_features(path: str, examples, tokenizer, options: SquadOptions, is_training: bool,
                     source: str) -> Dict:
    """Builds the feature cache unless a matching one exists; returns its description."""
    feature_options = options.feature_options()
    if tf.io.gfile.exists(path):
        meta = squad_features.check_feature_file(path, feature_options, is_training, tokenizer)
        logging.info("reusing the feature cache %s (%d features)", path, meta["features"])
        return meta
    featurizer = squad_features.SquadFeaturizer(tokenizer, feature_options)
    squad_features.write_feature_file(path, featurizer, examples, is_training, source)
    return squad_features.check_feature_file(path, feature_options, is_training, tokenizer)


def train_dataset(path: str, max_seq_length: int, batch_size: int, input_context=None,
                  seed: Optional[int] = None) -> tf.data.Dataset:
    """Training batches: repeated, shuffled (buffer 100 as the original; larger here), parsed."""
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
    dist = strategy.experimental_distribute_dataset(ds)

    @tf.function
    def step(features):
        def replica(features):
            inputs = {k: features[k] for k in ("input_ids", "input_mask", "segment_ids",
                                               "p_mask")}
            outputs = model(inputs, training=False)
            return [features["unique_ids"]] + [outputs[name] for name in names]
        values = strategy.run(replica, args=(features,))
        return [strategy.gather(v, axis=0) for v in values]

    columns = {name: [] for name in ("unique_ids",) + names}
    count = 0
    for features in dist:
        values = step(features)
        for name, value in zip(columns, values):
            columns[name].append(value.numpy())
        count += len(columns["unique_ids"][-1])
        if len(columns["unique_ids"]) % 50 == 0:
            logging.info("predicted %d features", count)
    if not columns["unique_ids"]:
        raise UserValueError(f"{path}: no features to predict")
    return {name: np.concatenate(parts) for name, parts in columns.items()}


def score(dataset, predictions: squad_postprocess.SquadPredictions, options: SquadOptions,
          metric: str = "squad") -> Dict:
    """Official metrics of predictions (v2: also tunes the null threshold if not given).

    metric: "squad" or "cmrc2018" (already resolved, see `resolve_metric`).
    Returns (answers to write, metrics without the lists of question ids).
    """
    if metric == "cmrc2018":
        from albert_tf.tasks.span_qa import cmrc_metrics

        try:
            metrics = cmrc_metrics.evaluate(dataset, predictions.answers)
        except ValueError as err:  # e.g. a question without gold answers
            raise UserValueError(f"--predict_file {options.predict_file}: {err}") from err
        metrics = {key: value for key, value in metrics.items()
                   if not isinstance(value, (list, tuple, set, dict))}
        metrics["metric"] = "cmrc2018"
        return predictions.answers, metrics
    if not options.version_2_with_negative:
        metrics = squad_metrics.evaluate_v1(dataset, predictions.answers)
        answers = predictions.answers
    else:
        raw = predictions.with_threshold(None)
        best = squad_metrics.evaluate_v2(dataset, raw, predictions.null_odds)
        if options.null_score_diff_threshold is None:
            threshold, source = best["best_f1_thresh"], "tuned_on_eval_set"
        else:
            threshold, source = options.null_score_diff_threshold, "given"
        answers = predictions.with_threshold(threshold)
        metrics = squad_metrics.evaluate_v2(dataset, answers)
        for key in ("best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"):
            metrics[key] = best[key]
        metrics["null_score_diff_threshold"] = threshold
        metrics["null_threshold_source"] = source
    metrics.pop("missing", None)
    return answers, metrics


def run_squad(options: SquadOptions, strategy: Optional[tf.distribute.Strategy] = None) -> Dict:
    """Runs the job; returns run_finetuning's results plus `predict_metrics` / `paths`."""
    options.validate()
    strategy = strategy or tf.distribute.get_strategy()
    # Another task's (or model's) run in --output_dir is refused before anything is written.
    identity = run_dir.RunIdentity.of(
        run_dir.FINETUNING, "squad v2.0" if options.version_2_with_negative else "squad v1.1",
        options.albert_config, metric=METRIC)
    run_dir.check_output_dir(options.output_dir, identity)
    tokenizer = load_tokenizer(options)
    # Another model's vocabulary (e.g. the Chinese vocab with an English checkpoint) would
    # train silently on the wrong embeddings: the sizes must agree.
    checkpoints.check_vocab_size(tokenizer, options.albert_config, "--albert_config_file",
                                 options.init_checkpoint)
    v2 = options.version_2_with_negative
    seq = options.max_seq_length
    train_fn = evaluate_fn = predict_fn = None
    train_step, warmup_step = 1, 0
    if options.do_train:
        train_examples = squad_data.read_squad_examples(options.train_file, True, v2)
        train_path = options.train_feature_file or os.path.join(options.output_dir,
                                                                "train.tf_record")
        prepare_features(train_path, squad_features.shuffle_for_training(train_examples),
                         tokenizer, options, True, options.train_file)
        train_step = max(1, int(len(train_examples) / options.train_batch_size
                                * options.num_train_epochs))
        warmup_step = int(train_step * options.warmup_proportion)
        logging.info("SQuAD training: %d examples, batch %d, %d steps (%d warmup)",
                     len(train_examples), options.train_batch_size, train_step, warmup_step)

        def train_fn(input_context):
            batch = options.train_batch_size // options.gradient_accumulation_steps
            if input_context is not None:
                batch = input_context.get_per_replica_batch_size(batch)
            return train_dataset(train_path, seq, batch * options.gradient_accumulation_steps,
                                 input_context, options.seed)

    has_gold = False
    results_extra: Dict = {}
    if options.do_predict:
        dataset = squad_data.load_squad_json(options.predict_file)
        predict_examples = squad_data.read_squad_examples(options.predict_file, False, v2,
                                                          data=dataset)
        has_gold = any(e.answers or e.is_impossible for e in predict_examples)
        metric = resolve_metric(options.metric, dataset, v2)
        predict_path = options.predict_feature_file or os.path.join(options.output_dir,
                                                                    "predict.tf_record")
        prepare_features(predict_path, predict_examples, tokenizer, options, False,
                         options.predict_file)
        feature_arrays = squad_features.read_feature_arrays(predict_path, seq)

        def predictions_of(model):
            raw = predict_raw(model, predict_path, seq, options.predict_batch_size, v2,
                              strategy)
            return squad_postprocess.postprocess(predict_examples, feature_arrays, raw,
                                                 options.postprocess_options())

        def write(predictions, answers):
            if distribute_is_chief(strategy):
                return squad_postprocess.write_predictions(options.output_dir, predictions,
                                                           answers)
            return {}

        if has_gold and options.do_train:
            def evaluate_fn(model, step):
                predictions = predictions_of(model)
                answers, metrics = score(dataset, predictions, options, metric)
                write(predictions, answers)
                return metrics

        def predict_fn(model):
            predictions = predictions_of(model)
            if has_gold:
                answers, metrics = score(dataset, predictions, options, metric)
                results_extra["predict_metrics"] = metrics
                if distribute_is_chief(strategy):
                    fileio.atomic_write_text(
                        os.path.join(options.output_dir, "predict_results.json"),
                        json.dumps(metrics, indent=2) + "\n")
                logging.info("predictions of the best weights: %s", json.dumps(metrics))
            else:
                answers = predictions.answers if not v2 else predictions.with_threshold(
                    options.null_score_diff_threshold)
            results_extra["paths"] = write(predictions, answers)
            results_extra["predictions"] = predictions
            results_extra["answers"] = answers
            return answers

    finetune = finetuning.FinetuningOptions.from_fields(
        options, do_eval=evaluate_fn is not None, train_step=train_step,
        warmup_step=warmup_step)
    if not options.do_train and not options.init_checkpoint and not tf.io.gfile.exists(
            os.path.join(options.output_dir, finetuning.BEST_PREFIX + ".index")) and \
            tf.train.latest_checkpoint(os.path.join(options.output_dir,
                                                    finetuning.CHECKPOINT_SUBDIR)) is None:
        raise UserValueError(f"--do_predict without --do_train needs --init_checkpoint or a "
                         f"trained model in {options.output_dir}")
    results = finetuning.run_finetuning(
        finetune, lambda policy: build_model(options, policy), SquadTask(v2), METRIC,
        train_dataset_fn=train_fn, evaluate_fn=evaluate_fn, predict_fn=predict_fn,
        strategy=strategy, identity=identity)
    results.update(results_extra)
    if options.export_dir:
        from albert_tf.tasks.span_qa import export as squad_export

        if distribute_is_chief(strategy):
            threshold = options.null_score_diff_threshold
            if threshold is None and "predict_metrics" in results_extra and v2:
                threshold = results_extra["predict_metrics"]["null_score_diff_threshold"]
            export_options = squad_export.ExportOptions(
                max_seq_length=seq, doc_stride=options.doc_stride,
                max_query_length=options.max_query_length,
                do_lower_case=options.do_lower_case, n_best_size=options.n_best_size,
                max_answer_length=options.max_answer_length,
                version_2_with_negative=v2, null_score_diff_threshold=threshold,
                layer_norm=options.export_layer_norm)
            if "saved_model" in options.export_format:
                squad_export.export_saved_model(
                    results["model"], options.export_dir, options.spm_model_file,
                    vocab_file=options.vocab_file, options=export_options)
            if "onnx" in options.export_format:
                results.update(squad_export.export_onnx(
                    results["model"], options.export_dir, export_options,
                    int8=options.export_int8,
                    spm_model_file=options.spm_model_file, vocab_file=options.vocab_file))
        results["export_dir"] = options.export_dir
    return results


def distribute_is_chief(strategy) -> bool:
    from albert_tf.training import distribute

    return distribute.is_chief(strategy)
