"""SQuAD feature conversion: the original's windows, p_mask and max-context rule.

Each paragraph is first aligned to its tokens (`alignment.align_paragraph` for
SentencePiece, `wordpiece.align_paragraph` for WordPiece: the Chinese models,
CMRC 2018), so that a token span maps back to exact original text.

Layout of a window (the original's): `[CLS] query [SEP] doc [SEP] pad`,
segment ids 0 for `[CLS] query [SEP]`, 1 for `doc [SEP]`; `p_mask` 0 for
`[CLS]` and document tokens, 1 elsewhere. Windows cover the document with a
stride of `doc_stride` tokens; a token's "max context" window is the one where
`min(left, right) + 0.01 * window_length` is largest (first on ties).
Training windows that do not contain the answer are labelled at `[CLS]`
(start = end = 0) with `is_impossible = 1`, as the original (also for v1).

With a WordPiece vocabulary the question is `tokenizer.encode_ids` of the raw
text; everything after the alignment (windows, labels, caches) is shared.

Per-position metadata needed by post-processing is stored in the feature
itself (and in the TFRecord cache, no pickle): `orig_start` / `orig_end` [S]
(inclusive character range of the original paragraph of each document token,
-1 elsewhere) and `max_context` [S] (1 where this window is the token's max
context).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from absl import logging

from albert_tf.tokenization import (Tokenizer,
                                    preprocess_text, vocabulary_fingerprint)
from albert_tf.tasks.span_qa import wordpiece as squad_wordpiece
from albert_tf.tasks.span_qa.alignment import ParagraphTokens, align_paragraph
from albert_tf.tasks.span_qa.data import SquadExample

FIRST_UNIQUE_ID = 1000000000  # the original's first feature id
TRAIN_SHUFFLE_SEED = 12345  # the original shuffles training examples with Random(12345)


# ---------------------------------------------------------------------------
# Windows and features
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class FeatureOptions:
    """The original's conversion flags."""

    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64
    do_lower_case: bool = True

    def validate(self):
        if self.max_query_length > self.max_seq_length - 4:
            raise ValueError(f"--max_query_length ({self.max_query_length}) must be smaller "
                             f"than --max_seq_length - 3 ({self.max_seq_length - 3}) so that "
                             "at least one document token fits")
        if self.doc_stride <= 0:
            raise ValueError(f"--doc_stride must be positive, got {self.doc_stride}")


@dataclasses.dataclass
class SquadFeature:
    """One window of one example; lists have length max_seq_length (S)."""

    unique_id: int
    example_index: int
    doc_span_index: int
    input_ids: List[int]
    input_mask: List[int]
    segment_ids: List[int]
    p_mask: List[int]
    orig_start: List[int]
    orig_end: List[int]
    max_context: List[int]
    start_position: int = 0
    end_position: int = 0
    is_impossible: int = 0


@dataclasses.dataclass
class ConversionStats:
    """What happened to the answers during conversion (training mode)."""

    examples: int = 0
    features: int = 0
    positive_features: int = 0
    negative_features: int = 0
    unalignable: List[str] = dataclasses.field(default_factory=list)  # skipped qids
    inexact: List[str] = dataclasses.field(default_factory=list)  # kept, covering span

    def summary(self) -> str:
        return (f"{self.examples} examples -> {self.features} features "
                f"(pos {self.positive_features}, neg {self.negative_features}); "
                f"{len(self.unalignable)} answers could not be aligned and were skipped"
                + (f" (e.g. {', '.join(self.unalignable[:5])})" if self.unalignable else "")
                + f"; {len(self.inexact)} answers start or end inside a piece (trained on the "
                "covering pieces, as the original)")


def doc_spans(num_tokens: int, max_tokens_for_doc: int, doc_stride: int
              ) -> List[Tuple[int, int]]:
    """The original's sliding windows: [(start, length)]."""
    spans = []
    start = 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_for_doc)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return spans


def max_context_windows(spans: Sequence[Tuple[int, int]], num_tokens: int) -> List[int]:
    """For each document token, the index of its max-context window (first on ties)."""
    best = [-1] * num_tokens
    best_score = [None] * num_tokens
    for span_index, (start, length) in enumerate(spans):
        end = start + length - 1
        for position in range(start, end + 1):
            score = min(position - start, end - position) + 0.01 * length
            if best_score[position] is None or score > best_score[position]:
                best_score[position] = score
                best[position] = span_index
    return best


def answer_token_span(paragraph: ParagraphTokens, text: str, start: int
                      ) -> Optional[Tuple[int, int]]:
    """Token span (inclusive) covering the answer's characters, or None."""
    if not paragraph.aligned or not text.strip():
        return None
    return paragraph.char_span_to_tokens(start, start + len(text) - 1)


def span_text(paragraph_text: str, paragraph: ParagraphTokens, first: int, last: int) -> str:
    """The original's answer text of a token span: the original characters, stripped."""
    return paragraph_text[paragraph.tok_start_to_orig[first]:
                          paragraph.tok_end_to_orig[last] + 1].strip()


class SquadFeaturizer:
    """Converts SquadExamples to SquadFeatures (the original's convert_examples_to_features).

    Paragraph alignments are cached by text, since SQuAD asks several questions
    about each paragraph. `tokenizer`: a SentencePieceTokenizer or a
    WordPieceTokenizer (see the module docstring).
    """

    def __init__(self, tokenizer: Tokenizer, options: FeatureOptions):
        options.validate()
        self.tokenizer = tokenizer
        self.options = options
        self._cache: Dict[str, ParagraphTokens] = {}

    def paragraph(self, text: str) -> ParagraphTokens:
        cached = self._cache.get(text)
        if cached is None:
            if len(self._cache) > 4096:
                self._cache.clear()
            if self.tokenizer.kind == "wordpiece":

                cached = squad_wordpiece.align_paragraph(self.tokenizer, text)
            else:
                cached = align_paragraph(self.tokenizer, text, self.options.do_lower_case)
            self._cache[text] = cached
        return cached

    def query_ids(self, question: str) -> List[int]:
        if self.tokenizer.kind == "wordpiece":  # it normalises inside tokenize
            ids = self.tokenizer.encode_ids([question])[0]
        else:
            ids = self.tokenizer.encode_ids(
                [preprocess_text(question, lower=self.options.do_lower_case)])[0]
        return ids[:self.options.max_query_length]

    def convert(self, examples: Sequence[SquadExample], is_training: bool,
                output_fn: Callable[[SquadFeature], None],
                stats: Optional[ConversionStats] = None,
                log_every: int = 1000) -> ConversionStats:
        """Calls output_fn on every feature in order; returns the conversion counts."""
        stats = stats or ConversionStats()
        unique_id = FIRST_UNIQUE_ID + stats.features
        for example_index, example in enumerate(examples):
            if log_every and example_index % log_every == 0:
                logging.info("converting SQuAD examples: %d/%d (%d features)", example_index,
                             len(examples), stats.features)
            stats.examples += 1
            query = self.query_ids(example.question_text)
            paragraph = self.paragraph(example.paragraph_text)
            if not paragraph.aligned:
                logging.warning("question id %s: the paragraph could not be aligned to its "
                                "pieces (the original's MISMATCH); skipped", example.qas_id)
                stats.unalignable.append(example.qas_id)
                continue
            answer_span = None
            if is_training and not example.is_impossible:
                answer_span = _training_answer_span(example, paragraph, stats)
                if answer_span is None:
                    continue
            for feature in self._window_features(example_index, example, query, paragraph,
                                                 answer_span, unique_id):
                output_fn(feature)
                unique_id += 1
                _count_feature(stats, feature)
        logging.info("SQuAD conversion: %s", stats.summary())
        return stats

    def _window_features(self, example_index: int, example: SquadExample, query: List[int],
                         paragraph: ParagraphTokens, answer_span: Optional[Tuple[int, int]],
                         first_unique_id: int) -> Iterator[SquadFeature]:
        """One feature per window over the paragraph's tokens, numbered from first_unique_id.

        `query`: the question's ids (at most max_query_length); `answer_span`: the answer's
        inclusive token span in the paragraph, None when there is nothing to label.
        """
        num_tokens = len(paragraph.ids)
        max_doc_tokens = self.options.max_seq_length - len(query) - 3  # [CLS], [SEP], [SEP]
        spans = doc_spans(num_tokens, max_doc_tokens, self.options.doc_stride)
        best_window = max_context_windows(spans, num_tokens)
        doc_offset = len(query) + 2  # the first document token's position: after [CLS] q [SEP]
        for span_index, (span_start, span_length) in enumerate(spans):
            start_position, end_position, impossible = _window_labels(
                answer_span, span_start, span_length, doc_offset, example.is_impossible)
            yield SquadFeature(
                unique_id=first_unique_id + span_index, example_index=example_index,
                doc_span_index=span_index,
                **self._window_inputs(query, paragraph.ids[span_start:span_start + span_length]),
                **self._window_metadata(paragraph, span_start, span_length, doc_offset,
                                        best_window, span_index),
                start_position=start_position, end_position=end_position,
                is_impossible=impossible)

    def _window_inputs(self, query: List[int], doc_ids: List[int]) -> Dict[str, List[int]]:
        """The model inputs of `[CLS] query [SEP] doc [SEP] pad`, each a list of length S:
        input_ids, input_mask, segment_ids and p_mask."""
        max_seq_length = self.options.max_seq_length
        doc_offset = len(query) + 2
        input_ids = [self.tokenizer.cls_id] + query + [self.tokenizer.sep_id]
        input_ids += doc_ids + [self.tokenizer.sep_id]
        num_used = len(input_ids)
        num_padding = max_seq_length - num_used
        return {
            "input_ids": input_ids + [0] * num_padding,
            "input_mask": [1] * num_used + [0] * num_padding,
            "segment_ids": [0] * doc_offset + [1] * (len(doc_ids) + 1) + [0] * num_padding,
            "p_mask": ([0] + [1] * (doc_offset - 1) + [0] * len(doc_ids)
                       + [1] * (1 + num_padding))}

    def _window_metadata(self, paragraph: ParagraphTokens, span_start: int, span_length: int,
                         doc_offset: int, best_window: Sequence[int], span_index: int
                         ) -> Dict[str, List[int]]:
        """Post-processing metadata of window `span_index`, each a list of length S, -1 / 0
        off the document: orig_start / orig_end (inclusive original character range of each
        document token) and max_context (1 where this window is the token's max-context
        window; `best_window`: each paragraph token's, from `max_context_windows`)."""
        max_seq_length = self.options.max_seq_length
        orig_start = [-1] * max_seq_length
        orig_end = [-1] * max_seq_length
        max_context = [0] * max_seq_length
        for offset in range(span_length):
            token = span_start + offset
            orig_start[doc_offset + offset] = paragraph.tok_start_to_orig[token]
            orig_end[doc_offset + offset] = paragraph.tok_end_to_orig[token]
            max_context[doc_offset + offset] = int(best_window[token] == span_index)
        return {"orig_start": orig_start, "orig_end": orig_end, "max_context": max_context}


def _training_answer_span(example: SquadExample, paragraph: ParagraphTokens,
                          stats: ConversionStats) -> Optional[Tuple[int, int]]:
    """The answer's inclusive token span in the (aligned) paragraph, or None.

    None when the answer's characters cannot be aligned to the paragraph's pieces (logged,
    and counted in stats.unalignable); a span whose text is not exactly the answer is kept
    and counted in stats.inexact.
    """
    text, start = example.orig_answer_text, example.start_position
    answer_span = answer_token_span(paragraph, text, start)
    if answer_span is None or example.paragraph_text[start:start + len(text)] != text:
        logging.warning("question id %s: answer %r at %d cannot be aligned to the "
                        "paragraph's pieces; skipped", example.qas_id, text, start)
        stats.unalignable.append(example.qas_id)
        return None
    if span_text(example.paragraph_text, paragraph, *answer_span) != text.strip():
        stats.inexact.append(example.qas_id)
    return answer_span


def _window_labels(answer_span: Optional[Tuple[int, int]], span_start: int, span_length: int,
                   doc_offset: int, example_is_impossible: bool) -> Tuple[int, int, int]:
    """(start_position, end_position, is_impossible) of one window.

    Positions index the window's sequence [S]. A window that does not hold the whole
    answer is labelled at [CLS] (0, 0) and impossible, as the original; without an
    answer span (prediction, or an unanswerable question) the labels are (0, 0) and the
    example's own flag.
    """
    start_position = end_position = 0
    impossible = 1 if example_is_impossible else 0
    if answer_span is not None:
        answer_first, answer_last = answer_span
        if span_start <= answer_first and answer_last <= span_start + span_length - 1:
            start_position = answer_first - span_start + doc_offset
            end_position = answer_last - span_start + doc_offset
        else:
            impossible = 1
    return start_position, end_position, impossible


def _count_feature(stats: ConversionStats, feature: SquadFeature) -> None:
    """Counts one written feature as positive or negative (impossible)."""
    stats.features += 1
    if feature.is_impossible:
        stats.negative_features += 1
    else:
        stats.positive_features += 1


def shuffle_for_training(examples: Sequence[SquadExample], seed: int = TRAIN_SHUFFLE_SEED
                         ) -> List[SquadExample]:
    """The original's pre-shuffle of the training examples (random.Random(12345))."""
    examples = list(examples)
    random.Random(seed).shuffle(examples)
    return examples


# ---------------------------------------------------------------------------
# TFRecord cache (plain tf.train.Examples; the original's names)
# ---------------------------------------------------------------------------

SEQUENCE_FIELDS = ("input_ids", "input_mask", "segment_ids", "p_mask")
PREDICT_FIELDS = ("orig_start", "orig_end", "max_context")
TRAIN_SCALARS = ("start_positions", "end_positions", "is_impossible")


def feature_to_example(feature: SquadFeature, is_training: bool):
    """A tf.train.Example with the original's names (+ post-processing metadata)."""
    import tensorflow as tf

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    fields = {"unique_ids": ints([feature.unique_id])}
    for name in SEQUENCE_FIELDS:
        fields[name] = ints(getattr(feature, name))
    if is_training:
        fields["start_positions"] = ints([feature.start_position])
        fields["end_positions"] = ints([feature.end_position])
        fields["is_impossible"] = ints([feature.is_impossible])
    else:
        fields["example_index"] = ints([feature.example_index])
        for name in PREDICT_FIELDS:
            fields[name] = ints(getattr(feature, name))
    return tf.train.Example(features=tf.train.Features(feature=fields))


def feature_spec(max_seq_length: int, is_training: bool):
    import tensorflow as tf

    spec = {"unique_ids": tf.io.FixedLenFeature([], tf.int64)}
    for name in SEQUENCE_FIELDS:
        spec[name] = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    if is_training:
        for name in TRAIN_SCALARS:
            spec[name] = tf.io.FixedLenFeature([], tf.int64)
    else:
        spec["example_index"] = tf.io.FixedLenFeature([], tf.int64)
        for name in PREDICT_FIELDS:
            spec[name] = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    return spec


def cache_identity(options: FeatureOptions, is_training: bool, tokenizer: Tokenizer,
                   examples: Sequence[SquadExample]) -> Dict:
    """What a SQuAD feature cache must match to be reused: the conversion flags, training
    or prediction, the vocabulary, and the examples (in their written order)."""
    digest = hashlib.sha256()
    for example in examples:
        digest.update(json.dumps(dataclasses.asdict(example), sort_keys=True, default=str,
                                 ensure_ascii=False).encode("utf-8"))
    return dict(dataclasses.asdict(options), is_training=is_training,
                vocabulary=vocabulary_fingerprint(tokenizer),
                examples_sha256=digest.hexdigest())


def write_features(write: Callable[[bytes], None], featurizer: "SquadFeaturizer",
                   examples: Sequence[SquadExample], is_training: bool) -> ConversionStats:
    """Converts `examples` and writes each feature's serialized Example through `write`."""
    return featurizer.convert(
        examples, is_training,
        lambda f: write(feature_to_example(f, is_training).SerializeToString()))


def prepare_feature_file(path: str, featurizer: "SquadFeaturizer",
                         examples: Sequence[SquadExample], is_training: bool,
                         source: str, owned: bool = False) -> Dict:
    """The feature cache at `path`: reused when its description matches, else (re)built
    (`finetuning.feature_cache`; `owned`: albert_tf chose the path); returns the description, with the counts of the
    conversion (`examples`, `features`, `unalignable`, `inexact`) and its `source`."""
    from albert_tf.finetuning import feature_cache

    tokenizer = featurizer.tokenizer

    def write_records(write):
        stats = write_features(write, featurizer, examples, is_training)
        return dict(source=source, vocabulary_file=tokenizer.vocab_file,
                    examples=stats.examples, features=stats.features,
                    unalignable=stats.unalignable, inexact=len(stats.inexact))

    what = "SQuAD " + ("training" if is_training else "prediction")
    identity = cache_identity(featurizer.options, is_training, tokenizer, examples)
    return feature_cache.prepare(path, identity, write_records, what, owned)


def parse_features(serialized, max_seq_length: int, is_training: bool):
    """Parses a batch (or one) serialized Example(s) into int32 tensors."""
    import tensorflow as tf

    spec = feature_spec(max_seq_length, is_training)
    parse = tf.io.parse_example if serialized.shape.rank == 1 else tf.io.parse_single_example
    parsed = parse(serialized, spec)
    return {name: tf.cast(value, tf.int32) if name != "unique_ids" else value
            for name, value in parsed.items()}


def read_feature_arrays(path: str, max_seq_length: int) -> Dict[str, np.ndarray]:
    """All prediction features of a file as NumPy arrays (for post-processing)."""
    import tensorflow as tf

    dataset = tf.data.TFRecordDataset(path).batch(1024).map(
        lambda s: parse_features(s, max_seq_length, False))
    columns: Dict[str, List[np.ndarray]] = {}
    for batch in dataset:
        for name, value in batch.items():
            columns.setdefault(name, []).append(value.numpy())
    if not columns:
        return {name: np.zeros((0,) if name in ("unique_ids", "example_index")
                               else (0, max_seq_length), np.int64)
                for name in feature_spec(max_seq_length, False)}
    return {name: np.concatenate(parts) for name, parts in columns.items()}


def features_to_arrays(features: Iterable[SquadFeature]) -> Dict[str, np.ndarray]:
    """In-memory SquadFeatures as the arrays `read_feature_arrays` returns."""
    features = list(features)
    out = {"unique_ids": np.array([f.unique_id for f in features], np.int64),
           "example_index": np.array([f.example_index for f in features], np.int64)}
    for name in SEQUENCE_FIELDS + PREDICT_FIELDS:
        out[name] = np.array([getattr(f, name) for f in features], np.int64)
    return out
