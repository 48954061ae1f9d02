"""Multiple-choice features: examples -> 4 token rows each, TFRecord caches, tf.data.

RACE (`featurize_race`, as the original's race_utils): for each of the 4 options the
question+option text ("qa", `RaceExample.qa_texts`) is packed as
`[CLS] article [SEP] qa [SEP]` (segment 0 up to and including the first [SEP], 1 after),
where qa keeps its *last* `max_qa_length` tokens and the article is cut at the end to fit
`max_seq_length`.

C3 (`featurize_c3`, as C3's own baseline, nlpdata/c3 bert/run_classifier.py, copied by
CLUE's run_c3.py): per option `[CLS] context [SEP] question [SEP] option [SEP]`, context,
option and question cut to fit `max_seq_length - 4` tokens by the baseline's
`_truncate_seq_tuple` (`truncate_lengths`). Questions with fewer than 4 options are padded
with empty options (`padded_options`), whose rows `choice_mask` marks 0.

TFRecords (one `tf.train.Example` per question; S = max_seq_length, C = 4):
  input_ids, input_mask, segment_ids   int64 [C * S]  (the original's flattened layout)
  label_ids                            int64 [1]      0 = A ... 3 = D (0 when unlabelled)
  is_real_example                      int64 [1]      0 for batch padding
  level_ids                            int64 [1]      RACE: 0 = middle, 1 = high (`LEVELS`);
                                                      C3: 0 = C3-M, 1 = C3-D (`SUBSETS`)
  example_index                        int64 [1]      position in the example list (ours)
  choice_mask                          int64 [C]      C3 only: 1 for a real option
A description `<file>.json` records the settings and a fingerprint of the examples
so a cache is reused only when it matches (`prepare_race_cache`, `prepare_c3_cache`,
`finetuning.feature_cache`).

The record layout's constants live here (the readers `race` and `c3` import them, so this
module imports neither): the answer letters, the levels / subsets that `level_ids` number,
the cache formats. `examples` are `race.RaceExample`s (RACE) or `c3.C3Example`s (C3).
"""
from __future__ import annotations

import hashlib
import json
import random
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from absl import logging

from albert_tf.errors import UserValueError

LABELS = ("A", "B", "C", "D")  # RACE's answer letters; choice c of a record is LABELS[c]
NUM_CHOICES = len(LABELS)
LEVELS = ("middle", "high")  # RACE's level_ids 0 and 1
SUBSETS = ("m", "d")  # C3's level_ids 0 and 1: C3-M (mixed genre), C3-D (dialogue)
RACE_CACHE_FORMAT = "albert_tf.race.v1"
C3_CACHE_FORMAT = "albert_tf.c3.v1"
TRAIN_SHUFFLE_SEED = 12345


# --- RACE ----------------------------------------------------------------------------------------


def validate_race_lengths(max_seq_length: int, max_qa_length: int) -> None:
    """The original's truncation needs room for [CLS], [SEP], [SEP] and the whole qa."""
    if max_qa_length <= 0:
        raise UserValueError(f"--max_qa_length must be positive, got {max_qa_length}")
    if max_qa_length > max_seq_length - 3:
        raise UserValueError(
            f"--max_qa_length {max_qa_length} leaves no room in --max_seq_length "
            f"{max_seq_length}: it must be at most max_seq_length - 3 = {max_seq_length - 3}")


def race_choice_ids(context_ids: Sequence[int], qa_ids: Sequence[int], max_seq_length: int,
               max_qa_length: int, cls_id: int, sep_id: int
               ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One option's (input_ids, input_mask, segment_ids), int32 [S] each.

    qa keeps its last `max_qa_length` ids; the context is cut at the end so that
    [CLS] context [SEP] qa [SEP] fits in `max_seq_length`.
    """
    qa = list(qa_ids)[-max_qa_length:]
    context = list(context_ids)[:max_seq_length - 3 - len(qa)]
    return pack_row([cls_id] + context + [sep_id] + qa + [sep_id], len(context) + 2,
                    max_seq_length)


def pack_row(tokens: Sequence[int], second_segment: int, max_seq_length: int
             ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input_ids, input_mask, segment_ids) int32 [S] of one row's `tokens`, zero-padded;
    segment 1 from position `second_segment` to the end of the tokens."""
    ids = np.zeros(max_seq_length, np.int32)
    mask = np.zeros(max_seq_length, np.int32)
    segments = np.zeros(max_seq_length, np.int32)
    ids[:len(tokens)] = tokens
    mask[:len(tokens)] = 1
    segments[second_segment:len(tokens)] = 1
    return ids, mask, segments


def example_features(rows, label: Optional[int], level_id: int, index: int,
                     choice_mask: Optional[np.ndarray] = None) -> Dict[str, np.ndarray]:
    """One example's features from its per-choice `rows` of `pack_row` triples:
    input_ids / input_mask / segment_ids int32 [C, S], (choice_mask int32 [C]),
    label_ids (0 when unlabelled), is_real_example, level_ids, example_index."""
    features = {"input_ids": np.stack([r[0] for r in rows]),
                "input_mask": np.stack([r[1] for r in rows]),
                "segment_ids": np.stack([r[2] for r in rows])}
    if choice_mask is not None:
        features["choice_mask"] = choice_mask
    features.update(label_ids=np.int32(label if label is not None else 0),
                    is_real_example=np.int32(1), level_ids=np.int32(level_id),
                    example_index=np.int32(index))
    return features


def featurize_race(examples: Sequence, tokenizer, max_seq_length: int,
              max_qa_length: int, order: Optional[Sequence[int]] = None,
              chunk_size: int = 512, log_examples: int = 1
              ) -> Iterator[Dict[str, np.ndarray]]:
    """Features of `examples[i]` for each i of `order` (default: all, in order).

    Yields dicts of int32 arrays `input_ids`, `input_mask`, `segment_ids` [4, S]
    and scalars `label_ids`, `is_real_example`, `level_ids`, `example_index` (= i).
    `tokenizer` is a `tokenization.Tokenizer` (SentencePiece or WordPiece) and the
    examples' texts are already normalised for it (`read_examples(normalize=...)`);
    ids are its `encode_ids`, which equal the original's
    `convert_tokens_to_ids(tokenize(text))`. Each distinct
    article is tokenized once (kept as int32 arrays: about 40 MB for all of RACE).
    """
    validate_race_lengths(max_seq_length, max_qa_length)
    cls_id, sep_id = tokenizer.cls_id, tokenizer.sep_id
    if cls_id < 0 or sep_id < 0:
        raise UserValueError(f"{tokenizer.vocab_file} has no [CLS]/[SEP] piece "
                         "(--spm_model_file / --vocab_file)")
    order = list(range(len(examples))) if order is None else list(order)
    articles = list(dict.fromkeys(e.article for e in examples))
    article_ids: Dict[str, np.ndarray] = {}
    for start in range(0, len(articles), chunk_size):
        batch = articles[start:start + chunk_size]
        article_ids.update((text, np.asarray(ids, np.int32))
                           for text, ids in zip(batch, tokenizer.encode_ids(batch)))
    for start in range(0, len(order), chunk_size):
        chunk = order[start:start + chunk_size]
        qa_ids = tokenizer.encode_ids([qa for i in chunk for qa in examples[i].qa_texts()])
        for offset, index in enumerate(chunk):
            example = examples[index]
            rows = [race_choice_ids(article_ids[example.article], qa_ids[offset * NUM_CHOICES + c],
                               max_seq_length, max_qa_length, cls_id, sep_id)
                    for c in range(NUM_CHOICES)]
            features = example_features(rows, example.label, LEVELS.index(example.level),
                                        index)
            if start + offset < log_examples:
                _log_race_example(example, features, tokenizer)
            yield features
        if (start // chunk_size) % 20 == 19:
            logging.info("RACE features: %d of %d examples", start + len(chunk), len(order))


def _log_race_example(example, features, tokenizer) -> None:
    logging.info("*** Example *** id %s question %d (%s)", example.example_id,
                 example.question_index, example.source)
    for choice in range(NUM_CHOICES):
        length = int(features["input_mask"][choice].sum())
        tokens = tokenizer.convert_ids_to_tokens(features["input_ids"][choice][:length])
        logging.info("choice %s: %s", LABELS[choice], " ".join(tokens))
    logging.info("label: %s", LABELS[example.label] if example.label is not None else None)


# --- C3 ------------------------------------------------------------------------------------------


def validate_c3_length(max_seq_length: int) -> None:
    if max_seq_length < 5:
        raise ValueError(f"--max_seq_length must be at least 5 for C3 ([CLS] and three [SEP] "
                         f"plus one token), got {max_seq_length}")


def truncate_lengths(lengths: Sequence[int], budget: int) -> List[int]:
    """The lengths C3's baseline `_truncate_seq_tuple(a, b, c, budget)` leaves.

    The baseline pops one token at a time from the longest list (ties: the
    first of a, b, c) until the total fits. Equivalently: every list is cut to
    a common level L (the smallest that removes at most the excess) and the
    remaining r pops take one more token from the first r lists (in order)
    that reach L. Computed here without the loop (`tests/tasks/multiple_choice/test_c3.py` checks it
    against the loop).
    """
    lengths = [int(x) for x in lengths]
    excess = sum(lengths) - budget
    if excess <= 0:
        return lengths
    lo, hi = 0, max(lengths)
    while lo < hi:
        mid = (lo + hi) // 2
        if sum(max(x - mid, 0) for x in lengths) <= excess:
            hi = mid
        else:
            lo = mid + 1
    rest = excess - sum(max(x - lo, 0) for x in lengths)
    out = []
    for x in lengths:
        if x >= lo and rest > 0:
            out.append(lo - 1)
            rest -= 1
        else:
            out.append(min(x, lo))
    return out


def c3_choice_ids(context_ids: Sequence[int], question_ids: Sequence[int],
               option_ids: Sequence[int], max_seq_length: int, cls_id: int, sep_id: int
               ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One option's (input_ids, input_mask, segment_ids), int32 [S] each:
    `[CLS] context [SEP] question [SEP] option [SEP]`, truncated as the baseline."""
    n_context, n_option, n_question = truncate_lengths(
        [len(context_ids), len(option_ids), len(question_ids)], max_seq_length - 4)
    tokens = ([cls_id] + list(context_ids[:n_context]) + [sep_id]
              + list(question_ids[:n_question]) + [sep_id] + list(option_ids[:n_option])
              + [sep_id])
    return pack_row(tokens, n_context + 2, max_seq_length)


def padded_options(options: Sequence[str]) -> List[str]:
    """The options padded to 4 with empty texts (their rows are masked)."""
    return list(options) + [""] * (NUM_CHOICES - len(options))


def featurize_c3(examples: Sequence, tokenizer, max_seq_length: int,
              order: Optional[Sequence[int]] = None, chunk_size: int = 512,
              log_examples: int = 1) -> Iterator[Dict[str, np.ndarray]]:
    """Features of `examples[i]` for each i of `order` (default: all, in order).

    Yields dicts of int32 arrays `input_ids`, `input_mask`, `segment_ids` [4, S],
    `choice_mask` [4] (1 for a real option) and scalars `label_ids` (0 when
    unlabelled), `is_real_example`, `level_ids` (0 = C3-M, 1 = C3-D),
    `example_index` (= i). `tokenizer` is either kind (`tokenization.Tokenizer`).
    """
    validate_c3_length(max_seq_length)
    cls_id, sep_id = tokenizer.cls_id, tokenizer.sep_id
    if cls_id < 0 or sep_id < 0:
        raise UserValueError(f"{tokenizer.vocab_file} has no [CLS]/[SEP] token")
    prep = tokenizer.preprocess
    order = list(range(len(examples))) if order is None else list(order)
    contexts = list(dict.fromkeys(e.context for e in examples))
    context_ids: Dict[str, List[int]] = {}
    for start in range(0, len(contexts), chunk_size):
        batch = contexts[start:start + chunk_size]
        context_ids.update(zip(batch, tokenizer.encode_ids([prep(t) for t in batch])))
    for start in range(0, len(order), chunk_size):
        chunk = order[start:start + chunk_size]
        texts = []
        for i in chunk:
            texts.append(prep(examples[i].question))
            texts.extend(prep(o) for o in padded_options(examples[i].options))
        ids = tokenizer.encode_ids(texts)
        for offset, index in enumerate(chunk):
            example = examples[index]
            base = offset * (NUM_CHOICES + 1)
            rows = [c3_choice_ids(context_ids[example.context], ids[base], ids[base + 1 + c],
                               max_seq_length, cls_id, sep_id) for c in range(NUM_CHOICES)]
            features = example_features(
                rows, example.label, SUBSETS.index(example.subset), index,
                choice_mask=(np.arange(NUM_CHOICES) < len(example.options)).astype(np.int32))
            if start + offset < log_examples:
                _log_c3_example(example, features, tokenizer)
            yield features


def _log_c3_example(example, features, tokenizer) -> None:
    logging.info("*** Example *** %s", example.source)
    for choice in range(NUM_CHOICES):
        length = int(features["input_mask"][choice].sum())
        tokens = tokenizer.convert_ids_to_tokens(features["input_ids"][choice][:length])
        masked = "" if features["choice_mask"][choice] else " (padding, masked)"
        logging.info("choice %d%s: %s", choice, masked, " ".join(tokens))
    logging.info("label: %s", example.label)


def c3_fingerprint(examples: Iterable) -> str:
    """sha256 over every field that features depend on (texts, labels, subsets, order)."""
    digest = hashlib.sha256()
    for e in examples:
        digest.update(json.dumps([e.example_id, e.question_index, e.subset, e.context,
                                  e.question, list(e.options), e.label],
                                 ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()


def prepare_c3_cache(path: str, examples: Sequence, tokenizer, max_seq_length: int,
                  shuffle_seed: Optional[int] = None, owned: bool = False) -> Dict:
    """Writes the TFRecord `path` (+ `path.json`) unless a matching cache exists
    (as `prepare_race_cache`)."""
    from albert_tf import tokenization

    identity = {"format": C3_CACHE_FORMAT, "max_seq_length": max_seq_length,
                "do_lower_case": tokenizer.do_lower_case,
                "vocabulary": tokenization.vocabulary_fingerprint(tokenizer),
                "shuffle_seed": shuffle_seed, "num_examples": len(examples),
                "examples_sha256": c3_fingerprint(examples)}
    return write_cache(
        path, identity, len(examples), shuffle_seed,
        lambda order: featurize_c3(examples, tokenizer, max_seq_length, order), what="C3",
        owned=owned)


# --- TFRecord cache ------------------------------------------------------------------------------


def feature_spec(max_seq_length: int, choice_mask: bool = False):
    """The records' schema; `choice_mask` [4] is in C3's records only
    (`featurize_c3`)."""
    import tensorflow as tf

    flat = NUM_CHOICES * max_seq_length
    spec = {name: tf.io.FixedLenFeature([flat], tf.int64)
            for name in ("input_ids", "input_mask", "segment_ids")}
    for name in ("label_ids", "is_real_example", "level_ids", "example_index"):
        spec[name] = tf.io.FixedLenFeature([1], tf.int64)
    if choice_mask:
        spec["choice_mask"] = tf.io.FixedLenFeature([NUM_CHOICES], tf.int64)
    return spec


def serialize(features: Dict[str, np.ndarray]) -> bytes:
    """One `tf.train.Example` in the schema of the module docstring."""
    import tensorflow as tf

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(
            value=np.asarray(values, np.int64).reshape(-1).tolist()))

    return tf.train.Example(features=tf.train.Features(
        feature={name: ints(value) for name, value in features.items()})).SerializeToString()


def race_fingerprint(examples: Iterable) -> str:
    """sha256 over every field that features depend on (texts, labels, levels, order)."""
    digest = hashlib.sha256()
    for e in examples:
        digest.update(json.dumps([e.example_id, e.question_index, e.level, e.article,
                                  e.question, list(e.options), e.label]).encode("utf-8"))
    return digest.hexdigest()


def cache_identity(examples: Sequence, tokenizer, max_seq_length: int,
                   max_qa_length: int, shuffle_seed: Optional[int]) -> Dict:
    """What a cache must match to be reused (the vocabulary: `spm_model_sha256` for a
    SentencePiece model, `vocabulary` for a WordPiece one)."""
    from albert_tf import tokenization

    identity = {"format": RACE_CACHE_FORMAT, "max_seq_length": max_seq_length,
                "max_qa_length": max_qa_length, "do_lower_case": tokenizer.do_lower_case}
    if tokenizer.kind == "sentencepiece":
        with open(tokenizer.vocab_file, "rb") as handle:
            identity["spm_model_sha256"] = hashlib.sha256(handle.read()).hexdigest()
    else:
        identity["vocabulary"] = tokenization.vocabulary_fingerprint(tokenizer)
    identity.update({"shuffle_seed": shuffle_seed, "num_examples": len(examples),
                     "examples_sha256": race_fingerprint(examples)})
    return identity


def record_order(num_examples: int, shuffle_seed: Optional[int]) -> List[int]:
    """Example indices in the order they are written (shuffled for training)."""
    order = list(range(num_examples))
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(order)
    return order


def prepare_race_cache(path: str, examples: Sequence, tokenizer, max_seq_length: int,
                  max_qa_length: int, shuffle_seed: Optional[int] = None,
                  owned: bool = False) -> Dict:
    """Writes the TFRecord `path` (+ `path.json`) unless a matching cache exists
    (`finetuning.feature_cache`; `owned`: albert_tf chose the path); returns its description.

    Training caches are written in a seeded shuffled order (`shuffle_seed`): the
    original reads levels and files in order and shuffles with a 100-record
    buffer, which would feed all middle-school questions first.
    """
    identity = cache_identity(examples, tokenizer, max_seq_length, max_qa_length, shuffle_seed)
    return write_cache(path, identity, len(examples), shuffle_seed,
                       lambda order: featurize_race(examples, tokenizer, max_seq_length,
                                               max_qa_length, order), owned=owned)


def write_cache(path: str, identity: Dict, num_examples: int, shuffle_seed: Optional[int],
                features_in_order: Callable[[List[int]], Iterable[Dict[str, np.ndarray]]],
                what: str = "RACE", owned: bool = False) -> Dict:
    """`prepare_cache` for any feature generator: `features_in_order(order)` yields the
    features of those example indices (RACE's and C3's records)."""
    from albert_tf.finetuning import feature_cache

    def write_records(write):
        order = record_order(num_examples, shuffle_seed)
        logging.info("writing %s features of %d examples to %s", what, num_examples, path)
        for features in features_in_order(order):
            write(serialize(features))

    return feature_cache.prepare(path, identity, write_records, what, owned)


def _padding_features(max_seq_length: int, choice_mask: bool = False) -> Dict[str, np.ndarray]:
    zeros = np.zeros((NUM_CHOICES, max_seq_length), np.int32)
    features = {"input_ids": zeros, "input_mask": zeros, "segment_ids": zeros,
                "label_ids": np.int32(0), "is_real_example": np.int32(0),
                "level_ids": np.int32(-1), "example_index": np.int32(-1)}
    if choice_mask:
        features["choice_mask"] = np.ones(NUM_CHOICES, np.int32)
    return features


def dataset(path: str, max_seq_length: int, batch_size: int, is_training: bool,
            num_examples: Optional[int] = None, input_context=None, seed: Optional[int] = None,
            choice_mask: bool = False, batch_is_per_replica: bool = False):
    """tf.data over a RACE TFRecord: dicts of int32 `input_ids`, `input_mask`,
    `segment_ids` [b, 4, S] and `label_ids`, `is_real_example`, `level_ids`,
    `example_index` [b] (and `choice_mask` [b, 4] with `choice_mask`, for C3's records).

    batch_size: the global batch size; with `input_context` the dataset is
    sharded and batched per replica (batch_size / replicas), or, with
    `batch_is_per_replica`, batched by `batch_size` itself (a training job's
    `per_replica_train_batch`: no second division by the replicas). Training
    repeats, shuffles (100-record buffer, as the original) and drops the remainder.
    Otherwise the records are
    read once and padded with `is_real_example = 0` records up to a multiple of
    `batch_size` (needs `num_examples`), so every batch has the same size.
    """
    import tensorflow as tf

    spec = feature_spec(max_seq_length, choice_mask)

    def parse(record):
        parsed = tf.io.parse_single_example(record, spec)
        out = {}
        for name, value in parsed.items():
            value = tf.cast(value, tf.int32)
            if name == "choice_mask":
                out[name] = value
            else:
                out[name] = (tf.reshape(value, [NUM_CHOICES, max_seq_length])
                             if value.shape[0] != 1 else value[0])
        return out

    ds = tf.data.TFRecordDataset([path])
    per_replica = batch_size
    if input_context is not None and not batch_is_per_replica:
        per_replica = input_context.get_per_replica_batch_size(batch_size)
    if is_training:
        if input_context is not None and input_context.num_input_pipelines > 1:
            ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        ds = ds.repeat().shuffle(100, seed=seed)
        return ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE).batch(
            per_replica, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    if num_examples is None:
        raise ValueError("an evaluation dataset needs num_examples to pad the last batch")
    padding = -num_examples % batch_size
    if padding:
        ds = ds.concatenate(tf.data.Dataset.from_tensors(
            _padding_features(max_seq_length, choice_mask)).repeat(padding))
    if input_context is not None and input_context.num_input_pipelines > 1:
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    return ds.batch(per_replica).prefetch(tf.data.AUTOTUNE)
