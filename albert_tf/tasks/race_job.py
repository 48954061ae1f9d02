"""The RACE fine-tuning job behind run_race.py: train, evaluate, predict, export.

`run_race(options, strategy)` reads the data (`albert_tf.tasks.race`), builds
TFRecord caches, fine-tunes an `AlbertMultipleChoice` with
`finetuning.run_finetuning` (best checkpoint by dev `eval_accuracy`, kept as
`model.ckpt-best` in the official TF1 format), reports accuracy for middle,
high and all, writes predictions with the best weights and optionally exports
a SavedModel that takes raw text (`albert_tf.tasks.race_export`).

Output files in `output_dir` (besides run_finetuning's checkpoints/, train/,
eval_results.txt, best_eval.json, best_trial.txt, model.ckpt-best.*):
  predictions.jsonl   one JSON object per question of the predicted split:
                      {"id", "question_index", "level", "prediction" (A-D),
                       "probabilities" [4], "answer" (A-D or null)}
  predict_results.txt `key = value` accuracies of the predicted split when it has
                      answers (the original's file name)
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import fileio, finetuning, fused_ops, training
from albert_tf.config import AlbertConfig
from albert_tf.models import AlbertMultipleChoice, multiple_choice_losses
from albert_tf.tasks import race

METRIC = "eval_accuracy"
PREDICTIONS_FILE = "predictions.jsonl"
PREDICT_RESULTS_FILE = "predict_results.txt"


class RaceTask(training.Task):
    """Softmax cross-entropy over the 4 choices, weighted by `is_real_example`.

    The loss is the mean over the real examples of the global batch (the
    original's `reduce_mean`; training batches have no padding). Metric sums
    give accuracy overall and per level (level_ids 0 = middle, 1 = high).
    """

    metric_names = ("loss_total", "examples", "correct", "examples_middle", "correct_middle",
                    "examples_high", "correct_high")

    def normalizers(self, features):
        return {"examples": tf.reduce_sum(tf.cast(features["is_real_example"], tf.float32))}

    def loss(self, model, features, normalizers, training):
        outputs = model(features, training=training)
        losses = multiple_choice_losses(outputs, features)["per_example_loss"]
        weights = tf.cast(features["is_real_example"], tf.float32)
        correct = tf.cast(tf.equal(outputs["predictions"], features["label_ids"]),
                          tf.float32) * weights
        total = tf.reduce_sum(tf.cast(losses, tf.float32) * weights)
        sums = {"loss_total": total, "examples": tf.reduce_sum(weights),
                "correct": tf.reduce_sum(correct)}
        for level_id, level in enumerate(race.LEVELS):
            in_level = tf.cast(tf.equal(features["level_ids"], level_id), tf.float32) * weights
            sums["examples_" + level] = tf.reduce_sum(in_level)
            sums["correct_" + level] = tf.reduce_sum(correct * in_level)
        return tf.math.divide_no_nan(total, normalizers["examples"]), sums

    def finalize(self, sums: Dict[str, float]) -> Dict[str, float]:
        examples = max(sums["examples"], 1.0)
        metrics = {"eval_loss": sums["loss_total"] / examples,
                   "eval_accuracy": sums["correct"] / examples,
                   "eval_examples": int(sums["examples"])}
        for level in race.LEVELS:
            if sums["examples_" + level] > 0:
                metrics["eval_accuracy_" + level] = (sums["correct_" + level]
                                                     / sums["examples_" + level])
                metrics["eval_examples_" + level] = int(sums["examples_" + level])
        return metrics


@dataclasses.dataclass
class RaceOptions:
    """run_race.py's settings (defaults: the original run_race.py flags).

    Cache paths default to `<output_dir>/race_{train,dev,<predict_split>}.tf_record`.
    `predict_split` is the split --do_predict reads ("test" as the original).
    `export_dir`: when set, a SavedModel with token-id and raw-text signatures is
    written there from the best weights.
    """

    data_dir: str
    albert_config: AlbertConfig
    spm_model_file: str
    output_dir: str
    init_checkpoint: Optional[str] = None
    init_from_group0: bool = False
    do_lower_case: bool = True
    dropout_prob: float = 0.1
    max_seq_length: int = 512
    max_qa_length: int = 128
    high_only: bool = False
    middle_only: bool = False
    do_train: bool = True
    do_eval: bool = True
    do_predict: bool = False
    train_batch_size: int = 32
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    learning_rate: float = 1e-5
    train_step: int = 12000
    warmup_step: int = 1000
    save_checkpoints_steps: int = 100
    keep_checkpoint_max: int = 5
    iterations_per_loop: int = 1000
    optimizer: str = "adamw"
    train_file: Optional[str] = None
    eval_file: Optional[str] = None
    predict_file: Optional[str] = None
    predict_split: str = "test"
    export_dir: Optional[str] = None
    export_layer_norm: str = "auto"
    mixed_precision: str = "float32"
    jit_compile: bool = False
    gradient_accumulation_steps: int = 1
    seed: Optional[int] = None

    def validate(self) -> None:
        fused_ops.check_export_layer_norm(self.export_layer_norm, "--export_layer_norm")
        race.levels_for(self.high_only, self.middle_only)
        race.validate_lengths(self.max_seq_length, self.max_qa_length)
        if self.max_seq_length > self.albert_config.max_position_embeddings:
            raise ValueError(
                f"--max_seq_length {self.max_seq_length} exceeds the model's "
                f"max_position_embeddings {self.albert_config.max_position_embeddings} "
                "(--albert_config_file)")
        if not 0.0 <= self.dropout_prob < 1.0:
            raise ValueError(f"--dropout_prob must be in [0, 1), got {self.dropout_prob}")
        for name in ("eval_batch_size", "predict_batch_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--{name} must be positive, got {getattr(self, name)}")
        if self.predict_split not in race.SPLITS:
            raise ValueError(f"--predict_split must be one of {', '.join(race.SPLITS)}, got "
                             f"{self.predict_split!r}")
        if not (self.do_train or self.do_eval or self.do_predict or self.export_dir):
            raise ValueError("at least one of --do_train, --do_eval, --do_predict, "
                             "--export_dir must be set")

    def split_of(self, purpose: str) -> str:
        """The split read for `purpose` ("train", "eval" or "predict")."""
        return {"train": "train", "eval": "dev", "predict": self.predict_split}[purpose]

    def cache_path(self, purpose: str) -> str:
        """The TFRecord cache for `purpose`: --train_file / --eval_file / --predict_file,
        else `<output_dir>/race_<split>.tf_record`."""
        given = {"train": self.train_file, "eval": self.eval_file,
                 "predict": self.predict_file}[purpose]
        return given or os.path.join(self.output_dir,
                                     f"race_{self.split_of(purpose)}.tf_record")

    def finetuning_options(self) -> finetuning.FinetuningOptions:
        return finetuning.FinetuningOptions.from_fields(self)


def build_model(config: AlbertConfig, dropout_prob: float,
                dtype_policy: str = "float32") -> AlbertMultipleChoice:
    """run_race's model: 4 choices, `dropout_prob` on the pooled output."""
    return AlbertMultipleChoice(config, num_choices=race.NUM_CHOICES, dropout_rate=dropout_prob,
                                dtype=dtype_policy)


def predict_probabilities(strategy: tf.distribute.Strategy, model, path: str,
                          max_seq_length: int, batch_size: int, num_examples: int) -> np.ndarray:
    """Probabilities float32 [num_examples, 4] of a cached split, in example order."""
    ds = race.dataset(path, max_seq_length, batch_size, is_training=False,
                      num_examples=num_examples)
    dist = strategy.experimental_distribute_dataset(ds)

    @tf.function
    def step(features):
        def replica(features):
            outputs = model(features, training=False)
            return features["example_index"], tf.cast(outputs["probabilities"], tf.float32)
        index, probs = strategy.run(replica, args=(features,))
        return strategy.gather(index, axis=0), strategy.gather(probs, axis=0)

    result = np.full((num_examples, race.NUM_CHOICES), np.nan, np.float32)
    done = 0
    for features in dist:
        index, probs = step(features)
        index, probs = index.numpy(), probs.numpy()
        real = index >= 0
        result[index[real]] = probs[real]
        done += int(real.sum())
    missing = np.isnan(result).any(axis=1)
    if missing.any():
        raise RuntimeError(f"{path}: no prediction for {int(missing.sum())} of {num_examples} "
                           "examples (is the cache complete?)")
    return result


def prediction_records(examples: Sequence[race.RaceExample], probabilities: np.ndarray
                       ) -> List[Dict]:
    """One predictions.jsonl record per example (see the module docstring)."""
    records = []
    for example, probs in zip(examples, probabilities):
        records.append({
            "id": example.example_id, "question_index": example.question_index,
            "level": example.level, "prediction": race.LABELS[int(np.argmax(probs))],
            "probabilities": [float(p) for p in probs],
            "answer": race.LABELS[example.label] if example.label is not None else None})
    return records


def write_predictions(output_dir: str, examples: Sequence[race.RaceExample],
                      probabilities: np.ndarray) -> Dict[str, float]:
    """Writes predictions.jsonl (and predict_results.txt when the split has answers),
    atomically; returns the accuracies (empty without answers)."""
    records = prediction_records(examples, probabilities)
    fileio.atomic_write_text(os.path.join(output_dir, PREDICTIONS_FILE),
                             "".join(json.dumps(r) + "\n" for r in records))
    accuracies = race.accuracy_by_level(examples, np.argmax(probabilities, axis=1))
    if accuracies:
        lines = [f"{key} = {accuracies[key]}" for key in sorted(accuracies)]
        fileio.atomic_write_text(os.path.join(output_dir, PREDICT_RESULTS_FILE),
                                 "\n".join(lines) + "\n")
        logging.info("prediction accuracy: %s", " | ".join(
            f"{k} {v:.4g}" for k, v in sorted(accuracies.items()) if k.startswith("accuracy")))
    logging.info("wrote %d predictions to %s", len(records),
                 os.path.join(output_dir, PREDICTIONS_FILE))
    return accuracies


def run_race(options: RaceOptions, strategy: Optional[tf.distribute.Strategy] = None) -> Dict:
    """Runs the job; returns run_finetuning's results plus `predict_accuracy` and `export_dir`."""
    from albert_tf import checkpoints, distribute
    from albert_tf.tokenization import SentencePieceTokenizer

    strategy = strategy or tf.distribute.get_strategy()
    options.validate()
    tf.io.gfile.makedirs(options.output_dir)
    chief = distribute.is_chief(strategy)
    tokenizer = SentencePieceTokenizer(options.spm_model_file,
                                       do_lower_case=options.do_lower_case)
    levels = dict(high_only=options.high_only, middle_only=options.middle_only)
    seq = options.max_seq_length

    def cached(purpose, shuffle_seed=None):
        examples = race.read_examples(options.data_dir, options.split_of(purpose),
                                      options.do_lower_case, **levels)
        path = options.cache_path(purpose)
        # Every worker prepares the cache: workers may not share a file system, and
        # on a shared one they write identical bytes through atomic renames.
        race.prepare_cache(path, examples, tokenizer, seq, options.max_qa_length, shuffle_seed)
        return examples, path

    train_fn = evaluate_fn = predict_fn = None
    if options.do_train:
        train_examples, train_path = cached("train", race.TRAIN_SHUFFLE_SEED)
        logging.info("RACE training: %d examples, batch %d, %d steps", len(train_examples),
                     options.train_batch_size, options.train_step)

        def train_fn(input_context):
            batch = options.train_batch_size // options.gradient_accumulation_steps
            return race.dataset(train_path, seq, batch, is_training=True,
                                input_context=input_context, seed=options.seed)

    task = RaceTask()
    if options.do_eval:
        dev_examples, dev_path = cached("eval")

        def evaluate_fn(model, step):
            def dataset_fn(input_context):
                return race.dataset(dev_path, seq, options.eval_batch_size, is_training=False,
                                    num_examples=len(dev_examples), input_context=input_context)
            return training.evaluate(strategy, model, task, dataset_fn, task.metric_names)

    results: Dict = {}
    if options.do_predict:
        predict_examples, predict_path = cached("predict")

        def predict_fn(model):
            probs = predict_probabilities(strategy, model, predict_path, seq,
                                          options.predict_batch_size, len(predict_examples))
            if chief:
                results["predict_accuracy"] = write_predictions(options.output_dir,
                                                                predict_examples, probs)
            return probs

    def make_model(dtype_policy):
        return build_model(options.albert_config, options.dropout_prob, dtype_policy)

    if options.do_train or options.do_eval or options.do_predict:
        results.update(finetuning.run_finetuning(
            options.finetuning_options(), make_model, task, METRIC, train_dataset_fn=train_fn,
            evaluate_fn=evaluate_fn, predict_fn=predict_fn, strategy=strategy))
    if options.export_dir and chief:
        from albert_tf.tasks import race_export

        model = results.get("model")
        best = os.path.join(options.output_dir, finetuning.BEST_PREFIX)
        if model is None:
            model = build_model(options.albert_config, options.dropout_prob)
            model.build()
            source = best if tf.io.gfile.exists(best + ".index") else options.init_checkpoint
            if not source:
                raise ValueError("--export_dir without training needs model.ckpt-best in "
                                 "--output_dir or an --init_checkpoint")
            checkpoints.restore_for_training(model, source)
        elif tf.io.gfile.exists(best + ".index"):
            checkpoints.load_tf1_checkpoint(model, best)
        results["export_dir"] = race_export.export_saved_model(
            model, options.export_dir, options.spm_model_file, options.max_seq_length,
            options.max_qa_length, options.do_lower_case, options.export_layer_norm)
    return results
