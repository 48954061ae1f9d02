"""The token-classification (NER) job behind run_ner.py: train, evaluate, predict.

`run_ner(options, strategy)` (a `TaggingJob`) reads the task's files (`readers`),
converts their tags to IOB2 (IOB1 files such as CoNLL-2003's are converted, invalid
sequences repaired by the conlleval rule and counted in the log) and then to the
training scheme (`tag_scheme`: IOB2 or BIOES), builds the windowed sub-token features
(`features`, cached by the one cache policy), fine-tunes an `AlbertTokenClassifier`
(softmax, or a CRF with `use_crf`) with `finetuning.run_finetuning`, keeps the best
checkpoint by dev entity F1 (seqeval's default mode, `metrics`), and writes the
predictions of the best weights in the data file's own format and scheme
(`postprocess`).

Files in output_dir besides run_finetuning's (checkpoints/, train/, eval_results.txt,
best_eval.json, best_trial.txt, model.ckpt-best.*):
  labels.txt                  the label list, one per line (tag id = line number)
  <task>_<split>_s<S>.tf_record (+ .json)   feature caches
  predictions.txt / cluener_predict.json / entities.jsonl   the predicted split
  predict_results.json        its scores when it has gold tags
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
from typing import ClassVar, Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import fileio
from albert_tf.finetuning import job as finetuning_job
from albert_tf.finetuning import collapse, predict
from albert_tf.finetuning.command_line import CommandLine
from albert_tf.finetuning.options import TaskOptions
from albert_tf.option_fields import check_fields, option
from albert_tf.modeling.token_classifier import AlbertTokenClassifier
from albert_tf.tasks.tagging import export as tagging_export
from albert_tf.tasks import registry
from albert_tf.tasks.tagging import features, metrics, postprocess, readers, schemes
from albert_tf.tasks.tagging.readers import TaggedSentence, TaggingDataError
from albert_tf.training import loop, run_dir

METRIC = "f1"
LABELS_FILE = "labels.txt"
TRAINING_SCHEMES = ("iob2", "bioes")


@dataclasses.dataclass(kw_only=True)
class TaggingOptions(TaskOptions):
    """run_ner.py's settings.

    task_name: conll2003, cluener, msra or custom (`readers`). tag_scheme: the scheme the
    model is trained and decodes in (the files' own scheme is detected and kept in the
    predictions). labels: the label list (default: read from the training data).
    constrain_decoding: decode only sequences valid in tag_scheme (both heads).
    token_column / label_column / delimiter: custom column files. predict_split: the
    split --do_predict reads.
    """

    HAS_EXITS: ClassVar[bool] = True  # --exit_heads, --patience
    task_name: str = option(help="The data format (see run_ner.py's docstring).",
                            choices=readers.TASKS)
    data_dir: str = option(help="Directory holding the task's train/dev/test files.")
    max_seq_length: int = 128
    doc_stride: int = option(64, help="Stride in sub-tokens between the windows of a "
                                      "sentence longer than max_seq_length - 2.")
    tag_scheme: str = option("iob2", choices=("iob2", "bio", "bioes", "iobes"),
                             help="The scheme the model is trained in (files are converted; "
                                  "predictions are written in the file's own scheme).")
    use_crf: bool = option(False, help="A linear-chain CRF on top (trained by its negative "
                                       "log-likelihood, decoded by Viterbi).")
    constrain_decoding: bool = option(True, help="Decode only tag sequences valid in "
                                                 "--tag_scheme (no I-X after O), for both "
                                                 "heads.")
    labels: Optional[Tuple[str, ...]] = option(None, help="The label list (default: the "
                                                          "training data's).")
    token_column: Optional[int] = option(None, help="custom column files: the word's column "
                                                    "(0).")
    label_column: Optional[int] = option(None, help="custom column files: the tag's column "
                                                    "(-1).")
    delimiter: Optional[str] = option(None, help="custom column files: the separator "
                                                 "(whitespace).")
    skip_bad_lines: bool = option(False, help="Skip bad lines (and, in column files, the "
                                              "sentences holding them), count them in the "
                                              "log, and train on the rest.")
    predict_split: str = option("test", choices=readers.SPLITS,
                                help="Split read by --do_predict.")

    def validate(self, num_replicas: int = 1) -> None:
        """Raises ValueError naming the flag that is wrong."""
        self.validate_task_options()
        if self.task_name not in registry.names(readers.FAMILY):
            raise ValueError(f"--task_name must be one of "
                             f"{', '.join(registry.names(readers.FAMILY))}, got "
                             f"{self.task_name!r}")
        if schemes.normalize_scheme(self.tag_scheme) not in TRAINING_SCHEMES:
            raise ValueError(f"--tag_scheme must be iob2 (bio) or bioes, got {self.tag_scheme!r}")
        if not 0 < self.doc_stride <= self.max_seq_length - 2:
            raise ValueError(f"--doc_stride must be in [1, max_seq_length - 2 = "
                             f"{self.max_seq_length - 2}], got {self.doc_stride}")
        if self.max_seq_length < 3:
            raise ValueError(f"--max_seq_length must be at least 3, got {self.max_seq_length}")
        check_fields(self, ("classifier_dropout",))
        if self.predict_split not in readers.SPLITS:
            raise ValueError(f"--predict_split must be one of {', '.join(readers.SPLITS)}, got "
                             f"{self.predict_split!r}")
        if self.labels is not None:
            self.check_labels_flag()
        if not self.data_set().settings["column_options"] and any(
                value is not None for value in (self.token_column, self.label_column,
                                                self.delimiter)):
            raise ValueError("--token_column, --label_column and --delimiter are for "
                             "--task_name=custom column files")

    def check_labels_flag(self) -> None:
        """--labels: no repeats, an "O", every label a tag of --tag_scheme."""
        labels = list(self.labels)
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        if repeated:
            raise ValueError(f"--labels repeats {', '.join(repeated)}")
        if "O" not in labels:
            raise ValueError("--labels has no O")
        try:
            schemes.allowed_transitions(labels, schemes.normalize_scheme(self.tag_scheme))
        except ValueError as err:
            raise ValueError(f"--labels: {err} (--tag_scheme={self.tag_scheme})") from None

    def data_set(self) -> registry.DataSet:
        """The --task_name data set (`datasets`)."""
        return registry.get(readers.FAMILY, self.task_name)

    def reader_options(self) -> Dict:
        return {name: getattr(self, name) for name in ("token_column", "label_column",
                                                      "delimiter")
                if getattr(self, name) is not None}


@dataclasses.dataclass
class SplitData:
    """One split: its file, sentences (tags in the training scheme), the files' own
    scheme, and the cached features."""

    path: str
    sentences: List[TaggedSentence]
    file_scheme: str
    feature_path: str = ""
    windows: Optional[List[features.TaggingFeature]] = None
    # The windows' position arrays (word_index, max_context, ...), built once: every
    # evaluation merges its predictions with them.
    window_arrays: Optional[Dict[str, np.ndarray]] = None

    @property
    def num_features(self) -> int:
        return len(self.windows or ())


def labelled_words(features) -> tf.Tensor:
    """float32 [B, S]: 1 at each scored word (label_ids >= 0: a word's first piece in a
    window that scores it), the unit of the tagger's loss."""
    return tf.cast(tf.cast(features["label_ids"], tf.int32) >= 0, tf.float32)


class TaggingObjective(loop.Objective):
    """The mean loss per labelled word of the global batch (cross-entropy, or the CRF's
    negative log-likelihood summed over a sentence's words)."""

    metric_names = ("loss_total", "words", "examples")

    def normalizers(self, features_):
        return {"words": tf.reduce_sum(labelled_words(features_))}

    def loss(self, model, features_, normalizers, training):
        outputs = model(features_, training=training)
        total = tf.reduce_sum(tf.cast(outputs["loss_sum"], tf.float32))
        sums = {"loss_total": total, "words": tf.reduce_sum(outputs["scored"]),
                "examples": tf.cast(tf.shape(outputs["scored"])[0], tf.float32)}
        return tf.math.divide_no_nan(total, normalizers["words"]), sums

    def finalize(self, sums):
        return {"eval_loss": sums["loss_total"] / max(sums["words"], 1.0)}


class TaggingJob(finetuning_job.FinetuningJob):
    """run_ner.py's job (see the module docstring)."""

    metric = METRIC
    OPTIONS = TaggingOptions
    COMMAND_LINE = CommandLine(
        required=("task_name", "data_dir", "albert_config_file", "output_dir"),
        hparams_task=lambda values: values.task_name,
        # It evaluates at --predict_batch_size, so no --eval_batch_size rule.
        default_rules=lambda values: ["doc_stride:ner", "predict_batch_size:8"])

    def __init__(self, options: TaggingOptions, strategy=None):
        super().__init__(options, strategy)
        self.scheme = schemes.normalize_scheme(options.tag_scheme)

    def identity(self):
        return run_dir.RunIdentity.of(
            run_dir.FINETUNING, f"ner {self.options.task_name}", self.options.albert_config,
            labels=self.labels, metric=METRIC, tag_scheme=self.scheme,
            use_crf=self.options.use_crf)

    def build_model(self, dtype_policy: str = "float32"):
        allowed = (schemes.allowed_transitions(self.labels, self.scheme)
                   if self.options.constrain_decoding else None)
        return AlbertTokenClassifier(self.options.albert_config, num_labels=len(self.labels),
                                     dropout_rate=self.options.classifier_dropout,
                                     use_crf=self.options.use_crf, allowed=allowed,
                                     dtype=dtype_policy, **self.options.light_inference())

    def objective(self):
        return TaggingObjective()

    # --- data ----------------------------------------------------------------------------

    def read_split(self, split: str) -> SplitData:
        """The split's sentences with their tags in the training scheme (repairs logged)."""
        options = self.options
        path = readers.find_split_file(options.data_dir, split, options.task_name)
        sentences = readers.read_sentences(options.task_name, path,
                                           skip_bad_lines=options.skip_bad_lines,
                                           **options.reader_options())
        labelled = [s.tags for s in sentences if s.tags is not None]
        file_scheme = schemes.detect_scheme(labelled) if labelled else "iob2"
        converted, repairs = [], 0
        for sentence in sentences:
            if sentence.tags is not None:
                iob2, fixed = schemes.repair(schemes.to_iob2(sentence.tags, file_scheme), "iob2")
                repairs += fixed
                sentence = dataclasses.replace(sentence,
                                               tags=schemes.convert(iob2, "iob2", self.scheme))
            converted.append(sentence)
        logging.info("%s: %d sentences, tags read as %s%s", path, len(converted), file_scheme,
                     f"; {repairs} invalid tags repaired by the conlleval rule" if repairs
                     else "")
        return SplitData(path, converted, file_scheme)

    def read(self, purpose: str) -> SplitData:
        """The split read for `purpose` ("train", "dev" or "predict"), read once."""
        split = {"train": "train", "dev": "dev", "predict": self.options.predict_split}[purpose]
        return self.once(("read", purpose), lambda: self.read_split(split))

    @functools.cached_property
    def labels(self) -> List[str]:
        """The label list (the run's identity): --labels, else the training data's, else
        the run's record. The run's splits are read first, and every tag of them must be
        one of the labels."""
        splits = [self.read(purpose) for purpose, _ in self.wanted_splits()]
        options = self.options
        if options.labels:
            labels = list(options.labels)
        elif options.do_train:
            labels = schemes.labels_from([s.tags for s in self.read("train").sentences],
                                         self.scheme)
        else:
            record = run_dir.read_record(options.output_dir)
            if record is None or not record.details.get("labels"):
                raise TaggingDataError(
                    f"{options.output_dir} records no label list (no training run "
                    "there): give --labels or train first")
            labels = list(record.details["labels"])
        if "O" not in labels:
            raise TaggingDataError(f"the label list has no 'O': {', '.join(labels)}")
        for data in splits:
            self.check_labels(data, labels)
        return labels

    @staticmethod
    def check_labels(data: SplitData, labels: List[str]) -> None:
        """Every tag of a split is a known label (one line naming the sentence)."""
        known = set(labels)
        unknown = [(s.source, tag) for s in data.sentences if s.tags for tag in s.tags
                   if tag not in known]
        if unknown:
            source, tag = unknown[0]
            raise TaggingDataError(f"{source}: label {tag} is not one of the training labels "
                                   f"({', '.join(labels)}); {len(unknown)} such tags in "
                                   f"{data.path}")

    def featurized(self, purpose: str) -> SplitData:
        """The split read for `purpose` with its windows and feature cache, built once."""
        return self.once(("features", purpose), lambda: self.build_features(purpose))

    def build_features(self, purpose: str) -> SplitData:
        options, tokenizer, data = self.options, self.tokenizer, self.read(purpose)
        split = {"predict": options.predict_split}.get(purpose, purpose)
        label_to_id = {label: i for i, label in enumerate(self.labels)}
        data.windows, stats = features.convert(data.sentences, tokenizer, label_to_id,
                                               options.max_seq_length, options.doc_stride)
        data.window_arrays = features.features_to_arrays(data.windows)
        data.feature_path = os.path.join(
            options.output_dir, f"{options.task_name}_{split}_s{options.max_seq_length}"
                                ".tf_record")
        features.prepare_feature_file(data.feature_path, data.windows, data.sentences,
                                      tokenizer, self.labels, options.max_seq_length,
                                      options.doc_stride, stats=stats, source=data.path,
                                      owned=True)
        return data

    def wanted_splits(self) -> List[Tuple[str, str]]:
        """(purpose, split) pairs the run reads: train, dev, and the predicted split."""
        options = self.options
        return ([("train", "train")] if options.do_train else []) + \
               ([("dev", "dev")] if options.do_eval else []) + \
               ([("predict", options.predict_split)] if options.do_predict else [])

    def prepare(self) -> None:
        super().prepare()
        options = self.options
        if self.chief and options.do_train:
            fileio.atomic_write_text(os.path.join(options.output_dir, LABELS_FILE),
                                     "".join(label + "\n" for label in self.labels))

    def data(self, purpose: str) -> SplitData:
        return self.featurized({"eval": "dev"}.get(purpose, purpose))

    def num_train_examples(self) -> int:
        return len(self.read("train").sentences)

    def train_dataset(self, input_context):
        """One replica's batches of the training windows."""
        options, data = self.options, self.featurized("train")
        return features.dataset(data.feature_path, options.max_seq_length,
                                self.per_replica_train_batch(input_context), True,
                                data.num_features, options.seed, input_context)

    def evaluate(self, model, step):
        return self.scores(model, self.featurized("dev"), step=step)

    # --- prediction ----------------------------------------------------------------------

    def predicted_tags(self, model, data: SplitData) -> List[List[str]]:
        """IOB2 tags per word of every sentence of a split, from the best window of each."""
        batches = features.dataset(data.feature_path, self.options.max_seq_length,
                                   self.options.predict_batch_size, False, data.num_features)

        def outputs_of(model, batch):
            inputs = {k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")}
            inputs["word_mask"] = tf.cast(batch["word_index"] >= 0, tf.int32)
            return {"predictions": model(inputs, training=False)["predictions"]}

        outputs = predict.predict_outputs(self.strategy, model, batches, outputs_of,
                                          f"of {data.num_features} windows")
        ids = outputs["predictions"][:data.num_features]
        outside = self.labels.index("O")
        per_word = features.merge_predictions(data.window_arrays, ids,
                                              [len(s.words) for s in data.sentences], outside)
        return [schemes.repair(schemes.convert([self.labels[i] for i in sentence], self.scheme,
                                               "iob2"), "iob2")[0]
                for sentence in per_word]

    def scores(self, model, data: SplitData, predicted=None, step: Optional[int] = None
               ) -> Dict:
        """Entity precision / recall / F1 (micro and per type) and token accuracy; an
        evaluation (`step` given) adds `collapsed`: no entity predicted while the gold
        has some (`finetuning.collapse`, with one warning)."""
        predicted = self.predicted_tags(model, data) if predicted is None else predicted
        gold = [schemes.convert(s.tags, self.scheme, "iob2") for s in data.sentences]
        found = metrics.entity_scores(gold, predicted)
        result = {key: found[key] for key in ("precision", "recall", "f1", "token_accuracy")}
        for kind, figures in sorted(found["per_type"].items()):
            for name in ("precision", "recall", "f1"):
                result[f"{name}_{kind}"] = figures[name]
        result["eval_examples"] = len(data.sentences)
        if step is not None:
            collapse.mark(result, collapse.entity_collapse(
                found["predicted"], found["support"], num_sentences=len(data.sentences)),
                f"NER {self.options.task_name}", step)
        return result

    def predict(self, model):
        data = self.featurized("predict")
        predicted = self.predicted_tags(model, data)
        if not self.chief:
            return predicted
        path = postprocess.write_predictions(
            self.options.output_dir, self.options.task_name, data.path,
            [dataclasses.replace(s, tags=None if s.tags is None else schemes.convert(
                s.tags, self.scheme, data.file_scheme)) for s in data.sentences],
            predicted, data.file_scheme)
        logging.info("wrote the predictions of %d sentences to %s", len(predicted), path)
        self.results["predictions_file"] = path
        if all(s.tags is not None for s in data.sentences):
            figures = self.scores(model, data, predicted)
            self.results["predict_metrics"] = figures
            fileio.atomic_write_text(os.path.join(self.options.output_dir,
                                                  "predict_results.json"),
                                     json.dumps(figures, indent=2, sort_keys=True) + "\n")
            logging.info("predictions of the best weights: f1 %.4f", figures["f1"])
        return predicted


    # --- export --------------------------------------------------------------------------

    def export_saved_model(self, model) -> None:
        options = self.options
        tagging_export.export_saved_model(
            model, options.export_dir, self.labels, self.scheme,
            spm_model_file=options.spm_model_file, vocab_file=options.vocab_file,
            do_lower_case=options.do_lower_case, max_seq_length=options.max_seq_length,
            doc_stride=options.doc_stride, layer_norm=options.export_layer_norm,
            word_split=options.data_set().settings["word_split"])

    def portable_model(self, model):
        options = self.options
        return tagging_export.portable_model(
            model, self.labels, self.scheme, max_seq_length=options.max_seq_length,
            do_lower_case=options.do_lower_case, doc_stride=options.doc_stride)

    def eval_features(self) -> Optional[Dict[str, np.ndarray]]:
        """The dev windows' token features (the int8 check's input)."""
        if not self.options.do_eval:
            return None
        arrays = self.featurized("dev").window_arrays
        features = {name: arrays[name].astype(np.int32)
                    for name in ("input_ids", "input_mask", "segment_ids")}
        features["word_mask"] = (arrays["word_index"] >= 0).astype(np.int32)
        return features


def run_ner(options: TaggingOptions, strategy: Optional[tf.distribute.Strategy] = None) -> Dict:
    """Runs the job; returns run_finetuning's results plus `predictions_file` and
    `predict_metrics` (when the predicted split has gold tags)."""
    return TaggingJob(options, strategy).run()


TaggingTask = TaggingObjective  # the old name, for old imports
