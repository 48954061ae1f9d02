"""`AlbertQuestionAnswerer`: a question and its context -> the answer span (SQuAD v1.1 and
v2.0), run_squad.py's models, windows and post-processing.

    reader = albert_tf.from_pretrained("albert_base_v2", "question-answering")
    reader.compile()                        # the original's AdamW, warmup and decay
    reader.fit({"question": [...], "context": [...]}, answers, epochs=2)
    reader.predict({"question": ["Who wrote it?"], "context": ["It was written by Ann."]})
        -> ["Ann"]

x: a dict of columns {"question", "context"} (SQuAD's "paragraph" works too) or a list of
such dicts (or, for fit and evaluate, windows already made: token features int32 [N, S]
with y {"start_positions", "end_positions"} int [N]). y: one answer per question: {"text", "answer_start"} (SQuAD's, a character
offset into the context), or the answer's text alone (its first occurrence in the
context). Each question becomes run_squad.py's windows (`tasks.span_qa.features`:
`[CLS] question [SEP] context window [SEP]`, windows moved by `doc_stride`, the question
cut to `max_query_length` tokens); the loss is run_squad.py's (the mean of the start and
end cross-entropies); `predict` reads each question's answer from all its windows as
run_squad.py's post-processing does (n-best over the max-context windows, at most
`max_answer_length` tokens).

SQuAD v2.0 (`from_pretrained(..., version_2_with_negative=True)`, or a v2.0 source): the
network is run_squad.py --version_2_with_negative's `AlbertSquadV2` (start, end given the
start, answerability), an answer "" or None marks an unanswerable question (its windows
point at [CLS]), the loss is the original's v2.0 loss (the end teacher-forced on the gold
start), and `predict` gives "" where a question's null odds exceed
`null_score_diff_threshold` (None: always the best span).
"""
from __future__ import annotations

from typing import Dict, List, Optional

import keras
import numpy as np
import tensorflow as tf

from albert_tf.errors import UserValueError
from albert_tf.keras_tasks.inputs import DEFAULT_BATCH_SIZE
from albert_tf.keras_tasks.task import Task
from albert_tf.modeling.models import (AlbertSpanLabeler, AlbertSquadV2, span_losses,
                                       squad_v2_losses)
from albert_tf.tasks.span_qa import features as squad_features
from albert_tf.tasks.span_qa import postprocess as squad_postprocess
from albert_tf.tasks.span_qa.data import SquadExample

TOKEN_FEATURES = ("input_ids", "input_mask", "segment_ids")
LABELS = ("start_positions", "end_positions")
V1_OUTPUTS = ("start_logits", "end_logits")
# SQuAD v2.0: the beam of the original's inference, and in training (the end teacher-forced
# on the gold start) the log-probabilities its loss reads.
V2_OUTPUTS = ("start_top_log_probs", "start_top_index", "end_top_log_probs", "end_top_index",
              "cls_logits")
V2_TRAINING_OUTPUTS = ("start_log_probs", "end_log_probs", "cls_logits")


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertQuestionAnswerer(Task):
    """An `AlbertSpanLabeler` (SQuAD v1.1) or `AlbertSquadV2` (v2.0) network on questions
    and contexts (see the module docstring). Args: doc_stride, max_query_length
    (run_squad.py's: 128 and 64, or what fits the sequence length), n_best_size (20),
    max_answer_length (30 tokens), null_score_diff_threshold (v2.0: a question whose null
    odds exceed it gets "" as its answer; None: always the best span, as run_squad.py
    before it tunes the threshold on a scored set).
    Calling it on token features returns {"start_logits", "end_logits"} float32 [B, S]
    (v1.1), or V2_OUTPUTS (v2.0; with `p_mask`, and `start_positions` in training:
    V2_TRAINING_OUTPUTS)."""

    task_name = "question-answering"
    inputs_in_python = True  # a tf.data.Dataset is read into memory (dataset_rows)
    reads_pooled_output = False
    default_learning_rate = 5e-5  # run_squad.py's --learning_rate

    def __init__(self, network: AlbertSpanLabeler, preprocessor=None,
                 doc_stride: Optional[int] = None, max_query_length: Optional[int] = None,
                 n_best_size: int = 20, max_answer_length: int = 30,
                 null_score_diff_threshold: Optional[float] = None, **kwargs):
        super().__init__(network, preprocessor, **kwargs)
        self.v2 = isinstance(network, AlbertSquadV2)
        self.null_score_diff_threshold = (None if null_score_diff_threshold is None
                                          else float(null_score_diff_threshold))
        length = preprocessor.sequence_length if preprocessor is not None else \
            network.config.max_position_embeddings
        query = max_query_length if max_query_length is not None else (
            64 if 64 <= length - 4 else max(1, length // 2))
        window = length - query - 3
        stride = doc_stride if doc_stride is not None else (
            128 if 128 < window else max(1, window // 2))
        self.options = squad_features.FeatureOptions(length, int(stride), int(query),
                                                     preprocessor is None or
                                                     preprocessor.do_lower_case)
        try:
            self.options.validate()
        except ValueError as error:
            raise UserValueError(f"question-answering: {error}") from None
        if int(n_best_size) < 1 or int(max_answer_length) < 1:
            raise UserValueError("n_best_size and max_answer_length must be at least 1")
        self.n_best_size, self.max_answer_length = int(n_best_size), int(max_answer_length)

    def call(self, features, training=False):
        outputs = self.network(features, training=training)
        names = V1_OUTPUTS if not self.v2 else (
            V2_TRAINING_OUTPUTS if "start_positions" in features else V2_OUTPUTS)
        return {name: outputs[name] if outputs[name].dtype.is_integer
                else tf.cast(outputs[name], tf.float32) for name in names}

    def default_loss(self):
        return None  # `task_loss`: the labels are the start and end positions

    def task_loss(self, y, y_pred):
        return (squad_v2_losses if self.v2 else span_losses)(y_pred, y)["loss"]

    @property
    def input_features(self):
        """The network's inputs: the token features, and v2.0's p_mask."""
        return TOKEN_FEATURES + (("p_mask",) if self.v2 else ())

    @property
    def label_names(self):
        return LABELS + (("is_impossible",) if self.v2 else ())

    def default_metrics(self):
        return None

    # --- questions -> windows ----------------------------------------------------------------

    def windows(self, x, y=None) -> Dict[str, np.ndarray]:
        """run_squad.py's windows of the questions x (with answers y: the training windows,
        the ones whose answer could not be aligned left out, as run_squad.py does):
        `tasks.span_qa.features.features_to_arrays`' arrays, plus the labels."""
        examples = examples_of(x, y, self.v2)
        return self._windows(examples, y is not None)

    def window_features(self, x) -> Dict[str, np.ndarray]:
        """The token features (int32 [N, S]) of the questions x's windows."""
        windows = self.windows(x)
        return {name: windows[name].astype(np.int32) for name in self.input_features}

    def _windows(self, examples, training: bool) -> Dict[str, np.ndarray]:
        featurizer = squad_features.SquadFeaturizer(self.python_tokenizer, self.options)
        found: List = []
        featurizer.convert(examples, training, found.append, log_every=0)
        arrays = squad_features.features_to_arrays(found)
        if not found:
            length = self.options.max_seq_length
            arrays.update({name: np.zeros((0, length), np.int64)
                           for name in squad_features.SEQUENCE_FIELDS +
                           squad_features.PREDICT_FIELDS})
        arrays["start_positions"] = np.array([f.start_position for f in found], np.int32)
        arrays["end_positions"] = np.array([f.end_position for f in found], np.int32)
        arrays["is_impossible"] = np.array([f.is_impossible for f in found], np.int32)
        return arrays

    def dataset(self, x, y=None, batch_size=None, needs_labels=False, shuffle=False):
        if needs_labels and y is None:
            raise UserValueError("question-answering: fit and evaluate need answers: fit(x="
                                 "questions, y=answers), one per question")
        if isinstance(x, dict) and "input_ids" in x:  # windows already made
            inputs = {name: np.asarray(x[name], np.int32) for name in self.input_features}
            labels = None if y is None else {name: np.asarray(y[name], np.int32).reshape(-1)
                                             for name in self.label_names}
            return self._batched(inputs, labels, batch_size, shuffle)
        arrays = self.windows(x, y)
        inputs = {name: arrays[name].astype(np.int32) for name in self.input_features}
        return self._batched(inputs, None if y is None else {name: arrays[name]
                                                             for name in self.label_names},
                             batch_size, shuffle)

    def _batched(self, inputs, labels, batch_size, shuffle) -> tf.data.Dataset:
        if labels is not None and self.v2:  # the end is teacher-forced on the gold start
            inputs = dict(inputs, start_positions=labels["start_positions"])
        dataset = tf.data.Dataset.from_tensor_slices((inputs, labels) if labels is not None
                                                     else inputs)
        count = len(inputs["input_ids"])
        if shuffle and count:
            dataset = dataset.shuffle(count, reshuffle_each_iteration=True)
        return dataset.batch(batch_size or DEFAULT_BATCH_SIZE).prefetch(tf.data.AUTOTUNE)

    # --- answers ------------------------------------------------------------------------------

    def predictions(self, x, batch_size=None, **kwargs):
        """run_squad.py's post-processing of the questions x: a
        `tasks.span_qa.postprocess.SquadPredictions` (answers, n-best lists and, for v2.0,
        null odds, keyed by the question's index as a string)."""
        examples = examples_of(self.in_memory(x)[0], None, self.v2)
        arrays = self._windows(examples, False)
        results = {"unique_ids": arrays["unique_ids"]}
        if len(arrays["input_ids"]):
            inputs = {name: arrays[name].astype(np.int32) for name in self.input_features}
            dataset = tf.data.Dataset.from_tensor_slices(inputs).batch(
                batch_size or DEFAULT_BATCH_SIZE)
            results.update(keras.Model.predict(self, dataset, **kwargs))
        options = squad_postprocess.PostprocessOptions(
            n_best_size=self.n_best_size, max_answer_length=self.max_answer_length,
            version_2_with_negative=self.v2,
            null_score_diff_threshold=self.null_score_diff_threshold)
        return squad_postprocess.postprocess(examples, arrays, results, options)

    def predict_nbest(self, x, batch_size=None, **kwargs) -> List[List[Dict]]:
        """Each question's n-best answers, best first: {"text", "probability",
        "start_log_prob", "end_log_prob"} as run_squad.py's nbest_predictions.json."""
        nbest = self.predictions(x, batch_size, **kwargs).nbest
        return [[dict(entry) for entry in entries] for entries in nbest.values()]

    def predict(self, x, batch_size=None, **kwargs) -> List[str]:
        """Each question's answer: a span of its context (run_squad.py's best answer), or
        "" (v2.0) where the null odds exceed null_score_diff_threshold."""
        return list(self.predictions(x, batch_size, **kwargs).answers.values())

    def export(self, filepath, format="saved_model", verbose=None, input_signature=None, *,
               int8: bool = False, fp16: bool = False, check_data=None, **kwargs):
        """Writes run_squad.py's export to `filepath`: a SavedModel answering questions on
        raw text (`serving_default`: question, context -> answer) and token windows
        (`serve_tokens`), and / or "onnx", "tflite" ("litert") on token windows, with the
        vocabulary and albert_tf_export.json, for
        `albert_tf.pipeline("question-answering", ...)`. `check_data`: questions (as x)
        whose windows check the int8 files. Returns {"export_dir", and the portable files'
        paths}."""
        from albert_tf.keras_tasks import exporting

        exporting.check_arguments(input_signature, kwargs, "raw text and token windows",
                                  "format, int8, fp16, check_data, int8_min_agreement")
        return exporting.export_question_answerer(self, filepath, format, int8=int8,
                                                  fp16=fp16, check_data=check_data, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update(doc_stride=self.options.doc_stride,
                      max_query_length=self.options.max_query_length,
                      n_best_size=self.n_best_size, max_answer_length=self.max_answer_length,
                      null_score_diff_threshold=self.null_score_diff_threshold)
        return config


def examples_of(x, y=None, unanswerable: bool = False) -> List[SquadExample]:
    """x (and answers y) as run_squad.py's SquadExamples; one line otherwise.
    `unanswerable` (SQuAD v2.0): an answer "" or None marks the question unanswerable."""
    if isinstance(x, tf.data.Dataset):
        raise UserValueError("question-answering takes questions in memory (a dict of columns "
                             "or a list of rows): its windows are made in Python, as "
                             "run_squad.py's")
    if isinstance(x, dict):
        columns = {("context" if k == "paragraph" else k): v for k, v in x.items()}
        missing = [name for name in ("question", "context") if name not in columns]
        if missing:
            raise UserValueError(f"question-answering: x has no {missing[0]!r} column (it "
                                 "takes 'question' and 'context')")
        if len(columns["question"]) != len(columns["context"]):
            raise UserValueError(f"{len(columns['question'])} questions but "
                                 f"{len(columns['context'])} contexts")
        rows = [{"question": q, "context": c}
                for q, c in zip(columns["question"], columns["context"])]
    elif isinstance(x, (list, tuple)) and all(isinstance(row, dict) for row in x):
        rows = [{("context" if k == "paragraph" else k): v for k, v in row.items()}
                for row in x]
    else:
        raise UserValueError("question-answering: x is a dict of columns {'question', "
                             "'context'} or a list of such dicts, got " + type(x).__name__)
    if y is not None and (isinstance(y, (str, dict)) or len(y) != len(rows)):
        raise UserValueError(f"{len(rows)} questions but "
                             f"{1 if isinstance(y, (str, dict)) else len(y)} answers")
    examples = []
    for index, row in enumerate(rows):
        question, context = row.get("question"), row.get("context")
        if not isinstance(question, str) or not isinstance(context, str):
            raise UserValueError(f"question {index}: 'question' and 'context' are texts")
        if y is not None and unanswerable and _is_no_answer(y[index]):
            examples.append(SquadExample(str(index), question, context, [],
                                         is_impossible=True))
            continue
        answers = [] if y is None else [_answer(y[index], context, index)]
        examples.append(SquadExample(str(index), question, context, answers))
    return examples


def _is_no_answer(answer) -> bool:
    """"", None, {"text": ""} or SQuAD 2.0's / Hugging Face's empty lists of answers."""
    if isinstance(answer, dict):
        answer = answer.get("text")
    return answer is None or (isinstance(answer, (str, list, tuple)) and len(answer) == 0)


def _answer(answer, context: str, index: int):
    """(text, answer_start) of one answer: a dict with "text" (and "answer_start"), or its
    text (its first occurrence in the context)."""
    if isinstance(answer, dict):
        text, start = answer.get("text"), answer.get("answer_start")
        if isinstance(text, (list, tuple)):  # Hugging Face's datasets: lists of answers
            text = text[0] if text else None
            start = start[0] if isinstance(start, (list, tuple)) and start else None
    else:
        text, start = answer, None
    if not isinstance(text, str) or not text:
        raise UserValueError(f"question {index}: an answer is its text, or {{'text', "
                             f"'answer_start'}}, got {answer!r:.60} (an unanswerable "
                             "question needs a SQuAD v2.0 model: "
                             "version_2_with_negative=True)")
    if start is None:
        start = context.find(text)
        if start < 0:
            raise UserValueError(f"question {index}: the answer {text!r:.40} is not in the "
                                 "context")
    elif not isinstance(start, (int, np.integer)) or context[int(start):int(start) + len(
            text)] != text:
        raise UserValueError(f"question {index}: the context at answer_start={start!r} is "
                             f"not the answer {text!r:.40}")
    return text, int(start)
