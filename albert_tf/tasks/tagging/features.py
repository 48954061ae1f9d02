"""Token-classification (NER) features: words to sub-tokens, windows, labels, caches.

Words and labels. Each word of a sentence is tokenized on its own,
`tokenizer.tokenize(tokenizer.preprocess(word))` (SentencePiece: the original's
`preprocess_text`, then pieces, each word starting with "▁"; WordPiece: BERT's
BasicTokenizer + WordPiece, which splits Chinese text per character, so the
characters that are CLUENER's and MSRA's words stay one token each). A word's label
id goes on its FIRST sub-token; its other sub-tokens, [CLS], [SEP] and padding get
`IGNORE` (-1: no loss, not scored). Unlabelled sentences (tags None) are all -1.

Words without sub-tokens. A word that tokenizes to nothing (a lone space among
CLUENER's characters, a control or zero-width character) has no position in any
window: it is not trained on, and `merge_predictions` predicts `outside_id` ('O')
for it. `ConversionStats` counts such words, and those among them whose gold tag is
not 'O' (an entity they sit in is then scored with an 'O' inside it). A sentence
with no sub-token at all gets no window (all its words are predicted 'O').

Windows. A window holds at most `max_seq_length - 2` sub-tokens, laid out
`[CLS] tokens [SEP] pad`, segment ids 0. A sentence that fits is one window; a
longer one is covered by overlapping windows (`word_windows`), SQuAD's sliding
window moved to word boundaries so that no word's sub-tokens are split:

  * a window ends at the last word start that leaves it within the budget (it holds
    whole words only); the last window ends at the sentence's end;
  * the next window starts at the last word start at most `doc_stride` sub-tokens
    after this one's start (SQuAD's step, min(doc_stride, window length), moved
    back: more overlap), or, when no word starts there, at the first word start
    after that step (it is at most this window's end, so no sub-token is skipped).

Only a word longer than the budget is split: when no word boundary is available
the window is cut at the budget and the next window starts exactly `doc_stride`
sub-tokens later (windows inside such a word carry no word start). Every sub-token
is in at least one window, so nothing is cut: every word with sub-tokens has its
first sub-token in one or more windows, and exactly one of them is its max-context
window, SQuAD's rule on that first sub-token: the largest min(left, right context)
+ 0.01 * window length, the first window on ties. Windows record, per position,
the index of the word that starts there (`word_index`, -1 elsewhere) and whether
this is that word's max-context window (`max_context`).

Caches. `prepare_feature_file` writes `convert`'s features as tf.train.Examples
through `finetuning.feature_cache` (reused while the description matches
`cache_identity`: max_seq_length, doc_stride, the label list, the vocabulary's
fingerprint, lower-casing and a sha256 of the sentences' words and tags); `dataset`
reads one for training or evaluation, `read_feature_arrays` for post-processing
(`merge_predictions` takes either those arrays or the in-memory features).

TensorFlow is imported only inside the cache and dataset functions.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
from absl import logging

from albert_tf.errors import UserValueError
from albert_tf.tasks.tagging.readers import TaggedSentence
from albert_tf.tokenization import Tokenizer, vocabulary_fingerprint

IGNORE = -1  # label id of positions with no loss and no score; word_index off word starts
FEATURE_FORMAT = 1  # bump when the records' layout changes (part of the cache identity)
SEQUENCE_FIELDS = ("input_ids", "input_mask", "segment_ids", "label_ids", "word_index",
                   "max_context")
SCALAR_FIELDS = ("sentence_index", "window_index")


@dataclasses.dataclass
class TaggingFeature:
    """One window of one sentence; every list has length max_seq_length (S).

    input_ids, input_mask, segment_ids: `[CLS] tokens [SEP] pad` (segment ids all 0).
    label_ids: the word's label id at its first sub-token, -1 elsewhere.
    word_index: the index (in the sentence's words) of the word whose first sub-token
        is at this position, -1 elsewhere.
    max_context: 1 where a word starts and this window is its max-context window.
    sentence_index: the sentence's index in the converted list; window_index: this
        window's index among the sentence's windows.
    """

    input_ids: List[int]
    input_mask: List[int]
    segment_ids: List[int]
    label_ids: List[int]
    word_index: List[int]
    max_context: List[int]
    sentence_index: int
    window_index: int


@dataclasses.dataclass
class ConversionStats:
    """Counts of one conversion (recorded in the cache's description)."""

    sentences: int = 0
    windows: int = 0
    words: int = 0
    sub_tokens: int = 0
    words_without_sub_tokens: int = 0  # predicted 'O', never scored
    entity_words_without_sub_tokens: int = 0  # of those, gold tag other than 'O'
    split_words: int = 0  # words with more sub-tokens than a window holds
    split_sentences: int = 0  # sentences with more than one window
    empty_sentences: int = 0  # sentences without any sub-token: no window
    longest_sentence: int = 0  # in sub-tokens
    most_windows: int = 0  # of one sentence

    def summary(self) -> str:
        return (f"{self.sentences} sentences ({self.words} words, {self.sub_tokens} "
                f"sub-tokens, the longest {self.longest_sentence}) -> {self.windows} windows "
                f"({self.split_sentences} sentences split, at most {self.most_windows} "
                f"windows); {self.words_without_sub_tokens} words without sub-tokens "
                f"({self.entity_words_without_sub_tokens} inside entities), predicted 'O'; "
                f"{self.split_words} words longer than a window; {self.empty_sentences} "
                "sentences without sub-tokens")


# --- windows ---------------------------------------------------------------------------------


def word_windows(word_starts: Sequence[int], num_tokens: int, max_tokens: int,
                 doc_stride: int) -> List[Tuple[int, int]]:
    """[(start, length)] of the windows over `num_tokens` sub-tokens whose words start at
    `word_starts` (token indices), at most `max_tokens` long, moved at most `doc_stride`
    tokens at a time; the rule is in the module docstring. With a word starting at every
    token this is SQuAD's `doc_spans`."""
    boundary = [False] * (num_tokens + 1)
    for position in word_starts:
        boundary[position] = True
    boundary[num_tokens] = True
    spans: List[Tuple[int, int]] = []
    start = 0
    while start < num_tokens:
        end = min(start + max_tokens, num_tokens)
        # The last word boundary within the budget; none: a word longer than a window.
        end = next((b for b in range(end, start, -1) if boundary[b]), end)
        spans.append((start, end - start))
        if end == num_tokens:
            break
        start = _next_start(boundary, start, end, doc_stride)
    return spans


def _next_start(boundary: Sequence[bool], start: int, end: int, doc_stride: int) -> int:
    """Where the window after [start, end) starts: the last word boundary in (start,
    start + step], else the first in (start + step, end], else start + step (inside a
    word longer than a window); step = min(doc_stride, end - start), as SQuAD's."""
    step_to = start + min(doc_stride, end - start)
    for position in range(step_to, start, -1):
        if boundary[position]:
            return position
    for position in range(step_to + 1, end + 1):
        if boundary[position]:
            return position
    return step_to


def max_context_windows(spans: Sequence[Tuple[int, int]], num_tokens: int) -> List[int]:
    """For each token, the index of its max-context window among `spans` [(start,
    length)]: the largest min(left, right) + 0.01 * length, the first on ties (SQuAD's)."""
    best = [-1] * num_tokens
    best_score = [float("-inf")] * num_tokens
    for span_index, (start, length) in enumerate(spans):
        end = start + length - 1
        for position in range(start, end + 1):
            score = min(position - start, end - position) + 0.01 * length
            if score > best_score[position]:
                best_score[position] = score
                best[position] = span_index
    return best


# --- conversion ------------------------------------------------------------------------------


def word_ids(words: Sequence[str], tokenizer: Tokenizer,
             cache: Optional[Dict[str, List[int]]] = None) -> List[List[int]]:
    """The sub-token ids of each word, tokenized on its own (`preprocess`, `tokenize`);
    `cache` (word -> ids) saves re-tokenizing repeated words."""
    cache = {} if cache is None else cache
    out = []
    for word in words:
        ids = cache.get(word)
        if ids is None:
            ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(tokenizer.preprocess(word)))
            cache[word] = ids
        out.append(ids)
    return out


def _check_options(label_to_id: Mapping[str, int], max_seq_length: int, doc_stride: int):
    if max_seq_length < 3:
        raise UserValueError(f"--max_seq_length must be at least 3 ([CLS], a token, [SEP]), "
                             f"got {max_seq_length}")
    if doc_stride < 1:
        raise UserValueError(f"--doc_stride must be positive, got {doc_stride}")
    if sorted(label_to_id.values()) != list(range(len(label_to_id))):
        raise ValueError(f"label ids must be 0..{len(label_to_id) - 1}, one per label; got "
                         f"{dict(label_to_id)}")


def _label_ids(sentence: TaggedSentence, label_to_id: Mapping[str, int]) -> List[int]:
    """The label id of each word (IGNORE for all of an unlabelled sentence)."""
    if sentence.tags is None:
        return [IGNORE] * len(sentence.words)
    unknown = sorted({tag for tag in sentence.tags if tag not in label_to_id})
    if unknown:
        raise UserValueError(f"{sentence.source}: tag{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(map(repr, unknown))} not in the label list "
                             f"({', '.join(label_to_id)})")
    return [label_to_id[tag] for tag in sentence.tags]


def convert(sentences: Sequence[TaggedSentence], tokenizer: Tokenizer,
            label_to_id: Mapping[str, int], max_seq_length: int, doc_stride: int,
            log_every: int = 10000) -> Tuple[List[TaggingFeature], ConversionStats]:
    """(the windows of every sentence, in order (sentence_index = position in
    `sentences`), the conversion's counts). `label_to_id`: tag -> id, ids 0..L-1; a
    tag not in it is a UserValueError naming the sentence's file:line."""
    _check_options(label_to_id, max_seq_length, doc_stride)
    features: List[TaggingFeature] = []
    stats, cache = ConversionStats(), {}
    for sentence_index, sentence in enumerate(sentences):
        if log_every and sentence_index % log_every == 0 and sentence_index:
            logging.info("converting tagging sentences: %d/%d (%d windows)", sentence_index,
                         len(sentences), len(features))
        windows = sentence_features(sentence, sentence_index, word_ids(sentence.words,
                                    tokenizer, cache), _label_ids(sentence, label_to_id),
                                    tokenizer, max_seq_length, doc_stride, stats)
        features.extend(windows)
    logging.info("tagging conversion: %s", stats.summary())
    return features, stats


def sentence_features(sentence: TaggedSentence, sentence_index: int,
                      ids_per_word: Sequence[Sequence[int]], labels: Sequence[int],
                      tokenizer: Tokenizer, max_seq_length: int, doc_stride: int,
                      stats: ConversionStats) -> List[TaggingFeature]:
    """The windows of one sentence (`ids_per_word`: each word's sub-token ids; `labels`:
    each word's label id), counted into `stats`."""
    max_tokens = max_seq_length - 2
    tokens: List[int] = []
    starts: List[int] = []  # token index of each word's first sub-token, -1 if none
    for word, ids in enumerate(ids_per_word):
        starts.append(len(tokens) if ids else -1)
        tokens.extend(ids)
        stats.split_words += len(ids) > max_tokens
        if not ids:
            stats.words_without_sub_tokens += 1
            tag = sentence.tags[word] if sentence.tags else "O"
            stats.entity_words_without_sub_tokens += tag != "O"
    spans = word_windows([s for s in starts if s >= 0], len(tokens), max_tokens, doc_stride)
    best = max_context_windows(spans, len(tokens))
    word_at = {start: word for word, start in enumerate(starts) if start >= 0}
    windows = [_window(tokens, span, word_at, labels, best, window_index, sentence_index,
                       tokenizer, max_seq_length)
               for window_index, span in enumerate(spans)]
    stats.sentences += 1
    stats.words += len(ids_per_word)
    stats.sub_tokens += len(tokens)
    stats.windows += len(windows)
    stats.split_sentences += len(windows) > 1
    stats.empty_sentences += not tokens
    stats.longest_sentence = max(stats.longest_sentence, len(tokens))
    stats.most_windows = max(stats.most_windows, len(windows))
    return windows


def _window(tokens: Sequence[int], span: Tuple[int, int], word_at: Mapping[int, int],
            labels: Sequence[int], best: Sequence[int], window_index: int,
            sentence_index: int, tokenizer: Tokenizer, max_seq_length: int) -> TaggingFeature:
    """Window `window_index` = `span` (start, length) of a sentence's `tokens`;
    `word_at`: token index -> word starting there; `best`: each token's max-context
    window."""
    start, length = span
    used = length + 2
    padding = max_seq_length - used
    label_ids = [IGNORE] * max_seq_length
    word_index = [IGNORE] * max_seq_length
    max_context = [0] * max_seq_length
    for token in range(start, start + length):
        word = word_at.get(token)
        if word is not None:
            position = 1 + token - start
            label_ids[position] = labels[word]
            word_index[position] = word
            max_context[position] = int(best[token] == window_index)
    return TaggingFeature(
        input_ids=([tokenizer.cls_id] + list(tokens[start:start + length]) + [tokenizer.sep_id]
                   + [max(tokenizer.pad_id, 0)] * padding),
        input_mask=[1] * used + [0] * padding, segment_ids=[0] * max_seq_length,
        label_ids=label_ids, word_index=word_index, max_context=max_context,
        sentence_index=sentence_index, window_index=window_index)


# --- predictions -----------------------------------------------------------------------------


def features_to_arrays(features: Sequence[TaggingFeature]) -> Dict[str, np.ndarray]:
    """In-memory features as the int64 arrays `read_feature_arrays` returns: [N, S] per
    position field, [N] sentence_index / window_index."""
    length = len(features[0].input_ids) if features else 0
    out = {name: np.array([getattr(f, name) for f in features], np.int64).reshape(-1, length)
           for name in SEQUENCE_FIELDS}
    for name in SCALAR_FIELDS:
        out[name] = np.array([getattr(f, name) for f in features], np.int64)
    return out


def merge_predictions(features: Union[Sequence[TaggingFeature], Mapping[str, np.ndarray]],
                      predicted_ids, num_words_per_sentence: Sequence[int],
                      outside_id: int) -> List[List[int]]:
    """One predicted label id per word of each sentence, from the word's max-context window.

    features: the windows (`convert`'s, or the arrays of `read_feature_arrays`), N
        of them; predicted_ids: int [>= N, S], row i for window i (rows past N, the eval
        dataset's padding, are ignored); num_words_per_sentence: len(words) of each
        sentence, indexed by sentence_index. Words without sub-tokens get `outside_id`.
    """
    arrays = features if isinstance(features, Mapping) else features_to_arrays(features)
    word_index, max_context = arrays["word_index"], arrays["max_context"]
    sentence_index = arrays["sentence_index"]
    predicted = np.asarray(predicted_ids)
    num_windows = len(sentence_index)
    if num_windows and (predicted.ndim != 2 or predicted.shape[0] < num_windows
                        or predicted.shape[1] != word_index.shape[1]):
        raise ValueError(f"predicted_ids has shape {predicted.shape}; expected at least "
                         f"{num_windows} rows of {word_index.shape[1]} (one per window)")
    merged = [[outside_id] * count for count in num_words_per_sentence]
    scored = set()
    rows, positions = np.nonzero((max_context[:num_windows] == 1)
                                 & (word_index[:num_windows] >= 0))
    for row, position in zip(rows.tolist(), positions.tolist()):
        sentence, word = int(sentence_index[row]), int(word_index[row, position])
        if sentence >= len(merged) or word >= len(merged[sentence]):
            raise ValueError(f"window {row} scores word {word} of sentence {sentence}, beyond "
                             "num_words_per_sentence (features of other sentences?)")
        if (sentence, word) in scored:
            raise ValueError(f"word {word} of sentence {sentence} has two max-context windows")
        scored.add((sentence, word))
        merged[sentence][word] = int(predicted[row, position])
    return merged


# --- TFRecord cache --------------------------------------------------------------------------


def cache_identity(sentences: Sequence[TaggedSentence], tokenizer: Tokenizer,
                   labels: Sequence[str], max_seq_length: int, doc_stride: int) -> Dict:
    """What a tagging feature cache must match to be reused: the window settings, the
    label list (`labels`, in id order), the vocabulary, lower-casing and the sentences'
    words and tags (sha256)."""
    digest = hashlib.sha256()
    for sentence in sentences:
        digest.update(json.dumps([sentence.words, sentence.tags],
                                 ensure_ascii=False).encode("utf-8") + b"\n")
    return {"task": "tagging", "format": FEATURE_FORMAT, "max_seq_length": max_seq_length,
            "doc_stride": doc_stride,
            "labels": list(labels),
            "vocabulary": vocabulary_fingerprint(tokenizer),
            "do_lower_case": bool(tokenizer.do_lower_case),
            "sentences_sha256": digest.hexdigest()}


def serialize(feature: TaggingFeature) -> bytes:
    """The feature as a serialized tf.train.Example (int64 lists)."""
    import tensorflow as tf

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    fields = {name: ints(getattr(feature, name)) for name in SEQUENCE_FIELDS}
    fields.update({name: ints([getattr(feature, name)]) for name in SCALAR_FIELDS})
    return tf.train.Example(features=tf.train.Features(feature=fields)).SerializeToString()


def prepare_feature_file(path: str, features: Sequence[TaggingFeature],
                         sentences: Sequence[TaggedSentence], tokenizer: Tokenizer,
                         labels: Sequence[str], max_seq_length: int, doc_stride: int, *,
                         stats: Optional[ConversionStats] = None, source: str = "",
                         owned: bool = False) -> Dict:
    """The feature cache at `path` of `features`, `convert`'s windows of `sentences`
    (with `labels` in id order, `max_seq_length`, `doc_stride`): reused when its
    description matches `cache_identity`, else written (`finetuning.feature_cache`;
    `owned`: albert_tf chose the path). Returns the description: the identity,
    `windows` (the number of records), the conversion's counts when `stats` is given,
    `source` and `vocabulary_file`."""
    from albert_tf.finetuning import feature_cache

    def write_records(write):
        for feature in features:
            write(serialize(feature))
        counts = dataclasses.asdict(stats) if stats is not None else {}
        return dict(counts, windows=len(features), source=source,
                    vocabulary_file=tokenizer.vocab_file)

    identity = cache_identity(sentences, tokenizer, labels, max_seq_length, doc_stride)
    what = f"tagging{' ' + source if source else ''}, {len(sentences)} sentences"
    return feature_cache.prepare(path, identity, write_records, what, owned)


def feature_spec(max_seq_length: int):
    """tf.io parsing spec of the records: int64 [S] per position field, scalars."""
    import tensorflow as tf

    spec = {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in SEQUENCE_FIELDS}
    spec.update({name: tf.io.FixedLenFeature([], tf.int64) for name in SCALAR_FIELDS})
    return spec


def parse_features(serialized, max_seq_length: int):
    """One serialized record (scalar string tensor) or a batch ([B]) as int32 tensors:
    [S] / [B, S] per position field, [] / [B] sentence_index and window_index."""
    import tensorflow as tf

    rank = serialized.shape.rank
    parse = tf.io.parse_example if rank == 1 else tf.io.parse_single_example
    parsed = parse(serialized, feature_spec(max_seq_length))
    return {name: tf.cast(value, tf.int32) for name, value in parsed.items()}


def dataset(path: str, max_seq_length: int, batch_size: int, is_training: bool,
            num_features: int, seed: Optional[int] = None, input_context=None):
    """tf.data over a feature cache: dicts of int32 [B, S] position fields, [B]
    sentence_index, window_index and is_real_example.

    Training: sharded per input pipeline under distribution, shuffled (buffer
    min(num_features, 100000), seeded), repeated, whole batches. Evaluation: in file
    order, padded up to a multiple of batch_size with rows whose labels, word_index,
    sentence_index and window_index are -1 and is_real_example 0
    (`finetuning.feature_cache.cached_dataset`).
    """
    import tensorflow as tf

    from albert_tf.finetuning import feature_cache

    def parse(record):
        return dict(parse_features(record, max_seq_length),
                    is_real_example=tf.ones([], tf.int32))

    def padding_row():
        row = {name: tf.fill([max_seq_length], tf.constant(
            0 if name in ("input_ids", "input_mask", "segment_ids", "max_context") else IGNORE))
            for name in SEQUENCE_FIELDS}
        row.update({name: tf.constant(IGNORE) for name in SCALAR_FIELDS},
                   is_real_example=tf.constant(0))
        return row

    return feature_cache.cached_dataset(path, parse, batch_size, is_training, num_features,
                                        padding_row, seed, input_context)


def read_feature_arrays(path: str, max_seq_length: int) -> Dict[str, np.ndarray]:
    """Every record of a cache as int64 NumPy arrays (`features_to_arrays`'s layout)."""
    import tensorflow as tf

    data = tf.data.TFRecordDataset(path).batch(1024).map(
        lambda records: parse_features(records, max_seq_length))
    columns: Dict[str, List[np.ndarray]] = {}
    for batch in data:
        for name, value in batch.items():
            columns.setdefault(name, []).append(value.numpy().astype(np.int64))
    if not columns:
        return {name: np.zeros((0, max_seq_length) if name in SEQUENCE_FIELDS else (0,),
                               np.int64) for name in SEQUENCE_FIELDS + SCALAR_FIELDS}
    return {name: np.concatenate(parts) for name, parts in columns.items()}
