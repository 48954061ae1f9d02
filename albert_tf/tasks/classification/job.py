"""The GLUE fine-tuning job (what run_classifier.py runs): train, evaluate, predict, export.

Built on `finetuning.run_finetuning`: every saved checkpoint is evaluated on
the whole dev set, the best one (by the task's metric: matthew_corr for CoLA,
pearson for STS-B, eval_accuracy otherwise, as the original) is kept as
`model.ckpt-best` (TF1 format), and prediction uses it. Output directory:

  eval_results.txt, best_eval.json, best_trial.txt, model.ckpt-best.*  (finetuning)
  test_results.tsv     class probabilities per test example (the regression score for STS-B)
  submit_results.tsv   `index<TAB>prediction`, as the original
  {TASK}.tsv           the same, under the GLUE leaderboard's file name (e.g. MNLI-m.tsv)
  {task}_predict.json  CLUE tasks: the CLUE submission file (albert_tf.tasks.clue)
  *.tf_record (+.json) feature caches (in cached_dir, default output_dir)
and, with `export_dir`, a SavedModel with `serving_default` (raw text) and
`serve_tokens` signatures (albert_tf.export).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import checkpoints, export, fileio, finetuning, tokenization
from albert_tf.training import distribute, run_dir
from albert_tf.kernels import fused_ops
from albert_tf.export import onnx as onnx_export
from albert_tf.config import AlbertConfig
from albert_tf.modeling.models import AlbertClassifier, classifier_losses
from albert_tf.tasks.classification import clue, glue


@dataclasses.dataclass
class GlueOptions:
    """Everything `run_glue` needs besides the shared fine-tuning options.

    `task_name`: a key of `glue.TASKS` or `clue.TASKS`, or "custom" (then
    `custom` is required). The vocabulary: `spm_model_file` (SentencePiece)
    or `vocab_file` (WordPiece); SentencePiece wins when both are given, as
    in the original. Batch sizes are global. `classifier_dropout` is the
    dropout on the pooled output (the original's fixed 0.1).
    """

    task_name: str
    data_dir: str
    albert_config: AlbertConfig
    finetuning: finetuning.FinetuningOptions
    spm_model_file: Optional[str] = None
    vocab_file: Optional[str] = None
    cached_dir: Optional[str] = None
    do_lower_case: bool = True
    max_seq_length: int = 512
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    classifier_dropout: float = 0.1
    export_dir: Optional[str] = None
    export_layer_norm: str = "auto"
    export_format: Tuple[str, ...] = onnx_export.DEFAULT_EXPORT_FORMATS
    export_int8: bool = False
    custom: Optional[glue.CustomTaskOptions] = None

    def validate(self, num_replicas: int) -> None:
        """Raises ValueError naming the flag that is wrong."""
        fused_ops.check_export_layer_norm(self.export_layer_norm, "--export_layer_norm")
        onnx_export.check_export_formats(self.export_format, self.export_int8,
                                         mixed_precision=self.finetuning.mixed_precision,
                                         export_dir=self.export_dir)
        name = self.task_name.lower()
        if name != glue.CUSTOM_TASK and name not in glue.TASKS and name not in clue.TASKS:
            raise ValueError(f"--task_name {self.task_name!r} is not one of "
                             f"{', '.join(sorted(glue.TASKS))} (GLUE), "
                             f"{', '.join(sorted(clue.TASKS))} (CLUE) or custom")
        if name == glue.CUSTOM_TASK and self.custom is None:
            raise ValueError("--task_name=custom needs --text_a_column and --label_column")
        if not self.data_dir:
            raise ValueError("--data_dir is required")
        if not self.spm_model_file and not self.vocab_file:
            raise ValueError("give --spm_model_file (SentencePiece) or --vocab_file (WordPiece)")
        # The vocabulary file is not read when a SentencePiece model is given (the original's rule).
        for flag in ("spm_model_file",) if self.spm_model_file else ("vocab_file",):
            path = getattr(self, flag)
            if not tf.io.gfile.exists(path):
                raise ValueError(f"--{flag} {path!r} does not exist")
        limit = self.albert_config.max_position_embeddings
        if self.max_seq_length > limit:
            raise ValueError(f"--max_seq_length {self.max_seq_length} exceeds the config's "
                             f"max_position_embeddings {limit}")
        if self.max_seq_length < 3:
            raise ValueError(f"--max_seq_length must be at least 3, got {self.max_seq_length}")
        for flag in ("eval_batch_size", "predict_batch_size"):
            value = getattr(self, flag)
            if value <= 0 or value % num_replicas:
                raise ValueError(f"--{flag} {value} must be a positive multiple of the number "
                                 f"of replicas ({num_replicas})")
        if not 0.0 <= self.classifier_dropout < 1.0:
            raise ValueError(f"--classifier_dropout must be in [0, 1), got "
                             f"{self.classifier_dropout}")


class GlueTask(finetuning.ExampleMeanTask):
    """Training loss of `AlbertClassifier`: mean cross-entropy (or squared error)."""

    def __init__(self, regression: bool):
        self.regression = regression
        self.metric_names = ("loss_total", "examples") + (() if regression else ("correct",))

    def per_example(self, model, features, training):
        outputs = model(features, training=training)
        losses = classifier_losses(outputs, features)["per_example_loss"]
        if self.regression:
            return losses, {}
        correct = tf.cast(tf.equal(outputs["predictions"],
                                   tf.cast(features["label_ids"], tf.int32)), tf.float32)
        return losses, {"correct": tf.reduce_sum(correct)}

    def finalize_extra(self, sums):
        if self.regression:
            return {}
        return {"accuracy": sums["correct"] / max(sums["examples"], 1.0)}


def predict_logits(strategy: tf.distribute.Strategy, model, data: tf.data.Dataset,
                   num_examples: int, what: str = "examples") -> np.ndarray:
    """float32 logits [num_examples, K] of a padded, batched eval dataset, in order."""
    distributed = strategy.experimental_distribute_dataset(data)

    @tf.function
    def step(features):
        def replica(batch):
            inputs = {k: batch[k] for k in export.TOKEN_FEATURES}
            return tf.cast(model(inputs, training=False)["logits"], tf.float32)
        return strategy.gather(strategy.run(replica, args=(features,)), axis=0)

    chunks: List[np.ndarray] = []
    done = 0
    for batch in distributed:
        chunks.append(step(batch).numpy())
        done += len(chunks[-1])
        if len(chunks) % 100 == 0:
            logging.info("predicted %d of %d %s", min(done, num_examples), num_examples, what)
    logits = np.concatenate(chunks, axis=0) if chunks else np.zeros([0, 1], np.float32)
    return logits[:num_examples]


def _resolve_task(options: GlueOptions):
    """(TaskSpec, split -> examples, CLUE task or None) of options.task_name."""
    name = options.task_name.lower()
    if name in clue.TASKS:
        task = clue.TASKS[name]
        directory = clue.task_dir(task, options.data_dir)
        labels, _ = clue.task_labels(task, directory)
        return (clue.spec(task, labels),
                lambda split: clue.read_examples(task, directory, split, labels), task)
    if name != glue.CUSTOM_TASK:
        spec = glue.TASKS[name]
        return spec, lambda split: glue.read_examples(spec, options.data_dir, split,
                                                      options.do_lower_case), None
    labels = None if options.custom.regression else glue.custom_labels(options.custom,
                                                                       options.data_dir)
    spec = glue.custom_spec(options.custom, labels)
    return spec, lambda split: glue.read_custom_examples(options.custom, options.data_dir,
                                                         split, labels,
                                                         options.do_lower_case), None


def load_tokenizer(options: GlueOptions):
    """The Python tokenizer of options (SentencePiece when spm_model_file is given)."""
    return tokenization.load_tokenizer(vocab_file=options.vocab_file,
                                      spm_model_file=options.spm_model_file,
                                      do_lower_case=options.do_lower_case)


def write_predictions(output_dir: str, spec: glue.TaskSpec,
                      examples: List[glue.InputExample], logits: np.ndarray,
                      clue_task: Optional[clue.ClueTask] = None) -> Dict:
    """test_results.tsv, submit_results.tsv, and the GLUE `{TASK}.tsv` or the CLUE
    `{task}_predict.json`; returns what was written."""
    if spec.is_regression:
        probabilities = logits[:, :1]
        labels = [str(float(v)) for v in logits[:, 0]]
    else:
        shifted = logits - logits.max(axis=-1, keepdims=True)
        probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
        labels = [spec.labels[i] for i in np.argmax(logits, axis=-1)]
    fileio.atomic_write_text(os.path.join(output_dir, "test_results.tsv"), "".join(
        "\t".join(str(float(p)) for p in row) + "\n" for row in probabilities))
    submission = "index\tprediction\n" + "".join(
        f"{e.guid}\t{label}\n" for e, label in zip(examples, labels))
    written = ["test_results.tsv", "submit_results.tsv"]
    fileio.atomic_write_text(os.path.join(output_dir, "submit_results.tsv"), submission)
    if spec.submission_name:
        fileio.atomic_write_text(os.path.join(output_dir, f"{spec.submission_name}.tsv"),
                                 submission)
        written.append(f"{spec.submission_name}.tsv")
    if clue_task is not None:
        written.append(clue.write_submission(output_dir, clue_task, examples, labels))
    logging.info("wrote predictions for %d test examples: %s", len(examples),
                 ", ".join(written))
    return {"probabilities": probabilities, "labels": labels, "files": written}


def export_classifier(model, options: GlueOptions, spec: glue.TaskSpec) -> str:
    """Saves `model` as a SavedModel (raw-text and token signatures) to options.export_dir."""
    tokenizer = tokenization.in_graph_tokenizer(vocab_file=options.vocab_file,
                                                spm_model_file=options.spm_model_file,
                                                do_lower_case=options.do_lower_case)
    module = export.ClassifierServingModule(model, tokenizer, options.max_seq_length,
                                            None if spec.is_regression else spec.labels,
                                            pair=spec.is_pair,
                                            layer_norm=options.export_layer_norm)
    return export.save_serving_model(options.export_dir, module, module.signatures())


def export_classifier_onnx(model, options: GlueOptions, spec: glue.TaskSpec) -> Dict[str, str]:
    """Writes model.onnx (token ids -> `probabilities`, `logits`, and `predictions` int32
    label index, or the score for regression) to options.export_dir, plus
    model.int8.onnx with options.export_int8, and the vocabulary file."""
    regression = spec.is_regression
    names = ["probabilities", "logits"]
    fn = onnx_export.model_function(model, names, argmax_of=None if regression else "logits")
    if regression:  # `predictions` = the score, as the SavedModel's
        scores = fn

        def fn(features):
            outputs = scores(features)
            outputs["predictions"] = outputs["logits"][:, 0]
            return outputs
    metadata = {"task": "classifier", "task_name": options.task_name,
                "labels": None if regression else list(spec.labels), "pair": spec.is_pair,
                "max_seq_length": options.max_seq_length,
                "do_lower_case": options.do_lower_case}
    return onnx_export.export_model_dir(
        options.export_dir, fn, export.token_input_signature(), metadata,
        int8=options.export_int8, spm_model_file=options.spm_model_file,
        vocab_file=options.vocab_file)


def run_glue(options: GlueOptions, strategy: Optional[tf.distribute.Strategy] = None) -> Dict:
    """Trains / evaluates / predicts / exports as configured; returns run_finetuning's dict
    (plus "export_dir" when exported)."""
    strategy = strategy or tf.distribute.get_strategy()
    options.validate(strategy.num_replicas_in_sync)
    ft = options.finetuning
    spec, read, clue_task = _resolve_task(options)
    # Another task's (or model's) run in --output_dir is refused before anything is written.
    identity = run_dir.RunIdentity.of(run_dir.FINETUNING, spec.name, options.albert_config,
                                      labels=spec.labels, metric=spec.metric)
    run_dir.check_output_dir(ft.output_dir, identity)
    tokenizer = load_tokenizer(options)
    # A vocabulary of another model (e.g. the Chinese vocab.txt with an English
    # checkpoint) would train silently on the wrong embeddings: sizes must agree.
    checkpoints.check_vocab_size(tokenizer, options.albert_config, "--albert_config_file",
                                 ft.init_checkpoint)
    vocab = tokenization.vocabulary_fingerprint(tokenizer)
    cached_dir = options.cached_dir or ft.output_dir
    seq_length, regression = options.max_seq_length, spec.is_regression

    def features_for(split):
        examples = read(split)
        if not examples:
            raise glue.GlueDataError(f"the {split} split of {spec.name} has no example")
        path = glue.prepare_features(cached_dir, spec, split, examples, tokenizer, seq_length,
                                         vocab)
        return examples, path

    train_dataset_fn = evaluate_fn = predict_fn = None
    if ft.do_train:
        train_examples, train_path = features_for("train")
        logging.info("training on %d examples, batch %d, %d steps", len(train_examples),
                     ft.train_batch_size, ft.train_step)

        def train_dataset_fn(input_context):
            per_replica = (input_context.get_per_replica_batch_size(ft.train_batch_size)
                           if input_context else ft.train_batch_size)
            return glue.dataset(train_path, seq_length, regression, per_replica, True,
                                len(train_examples), ft.seed, input_context)

    if ft.do_eval:
        dev_examples, dev_path = features_for("dev")
        dev_labels = np.array([e.label for e in dev_examples],
                              np.float64 if regression else object)
        if not regression:
            index = {label: i for i, label in enumerate(spec.labels)}
            dev_labels = np.array([index[label] for label in dev_labels], np.int64)

        def evaluate_fn(model, step):
            data = glue.dataset(dev_path, seq_length, regression, options.eval_batch_size, False,
                                len(dev_examples))
            logits = predict_logits(strategy, model, data, len(dev_examples), "dev examples")
            metrics = glue.compute_metrics(spec, logits, dev_labels)
            metrics["eval_examples"] = len(dev_examples)
            return metrics

    if ft.do_predict:
        test_examples, test_path = features_for("test")

        def predict_fn(model):
            data = glue.dataset(test_path, seq_length, regression, options.predict_batch_size, False,
                                len(test_examples))
            logits = predict_logits(strategy, model, data, len(test_examples),
                                    "test examples")
            if not distribute.is_chief(strategy):
                return {"logits": logits}
            written = write_predictions(ft.output_dir, spec, test_examples, logits, clue_task)
            return dict(written, logits=logits)

    def build_model(dtype):
        return AlbertClassifier(options.albert_config, num_labels=1 if regression
                                else len(spec.labels), dropout_rate=options.classifier_dropout,
                                dtype=dtype)

    results = finetuning.run_finetuning(
        ft, build_model, GlueTask(regression), spec.metric, train_dataset_fn=train_dataset_fn,
        evaluate_fn=evaluate_fn, predict_fn=predict_fn, strategy=strategy, identity=identity)
    if options.export_dir and distribute.is_chief(strategy):
        model = results["model"]
        best = os.path.join(ft.output_dir, finetuning.BEST_PREFIX)
        if tf.io.gfile.exists(best + ".index"):
            checkpoints.load_tf1_checkpoint(model, best)
        if "saved_model" in options.export_format:
            export_classifier(model, options, spec)
        if "onnx" in options.export_format:
            results.update(export_classifier_onnx(model, options, spec))
        results["export_dir"] = options.export_dir
    return results
