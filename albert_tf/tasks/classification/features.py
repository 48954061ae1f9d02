"""Classification examples -> model features: packing, TFRecord caches, tf.data pipelines.

Features follow the original's TFRecord schema (`input_ids`, `input_mask`,
`segment_ids` int64 [S], `label_ids` int64, or float for regression, or int64 [K]
multi-hot for a multi-label task as google-research's GoEmotions classifier writes it,
`is_real_example`) and are cached per task, split, sequence length,
vocabulary and data (see `prepare_features`). `examples` are `glue.InputExample`s
and `spec` a `glue.TaskSpec` (GLUE, CLUE and custom tasks alike); this module only
reads their fields and does not import glue.py, which re-exports its names for old
imports (an import back would be a cycle).

No TensorFlow at import: data preparation and ONNX clients use the packing.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from absl import logging

from albert_tf.finetuning import feature_cache
from albert_tf.tasks.classification import long_text as long_text_rules
from albert_tf.tasks.classification.long_text import LongText


def truncate_seq_pair(tokens_a: List[int], tokens_b: List[int], max_length: int) -> None:
    """The original's `_truncate_seq_pair`, in place: pop from the end of the longer list
    (from B on a tie) until the total fits."""
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def pack_pair(ids_a: List[int], ids_b: Optional[List[int]], max_seq_length: int, cls_id: int,
              sep_id: int, pad_id: int = 0) -> Tuple[List[int], List[int], List[int]]:
    """`[CLS] A [SEP] (B [SEP])`: (input_ids, input_mask, segment_ids), each of max_seq_length.

    Exactly the original's convert_single_example: pairs truncated by
    `truncate_seq_pair` to max_seq_length - 3, single sentences cut to
    max_seq_length - 2; B is dropped when it has no token.
    """
    ids_a, ids_b = list(ids_a), list(ids_b or [])
    if ids_b:
        truncate_seq_pair(ids_a, ids_b, max_seq_length - 3)
    else:
        ids_a = ids_a[:max_seq_length - 2]
    input_ids = [cls_id] + ids_a + [sep_id]
    segment_ids = [0] * len(input_ids)
    if ids_b:
        input_ids += ids_b + [sep_id]
        segment_ids += [1] * (len(ids_b) + 1)
    input_mask = [1] * len(input_ids)
    padding = max_seq_length - len(input_ids)
    return (input_ids + [pad_id] * padding, input_mask + [0] * padding,
            segment_ids + [0] * padding)


def convert_examples(examples: Sequence, tokenizer, max_seq_length: int,
                     labels: Optional[Sequence[str]], num_threads: int = 1,
                     multi_label: bool = False, long_text=None) -> Dict[str, np.ndarray]:
    """Features of `examples` as arrays: int32 [F, S] ids/mask/segments, label_ids [F]
    (int32 class index, float32 for regression, 0 for unlabelled examples; int32 [F, K]
    multi-hot with `multi_label`), is_real_example.

    F = N, one feature per example, unless `long_text` (a `long_text.LongText`) reads
    windows: then each window is a feature with its example's label, and `example_index`
    int32 [F] says whose. Pairs are always cut by the original's rule; under `truncate`
    the log counts the examples that were cut.
    """
    if max_seq_length < 3:
        raise ValueError(f"--max_seq_length must be at least 3, got {max_seq_length}")
    texts_a = [tokenizer.preprocess(e.text_a) for e in examples]
    texts_b = [tokenizer.preprocess(e.text_b) if e.text_b else "" for e in examples]
    ids_a = tokenizer.encode_ids(texts_a, num_threads=num_threads)
    ids_b = tokenizer.encode_ids(texts_b, num_threads=num_threads)
    rule = long_text or LongText()
    pieces = [[(a, b)] if b or rule.mode == "truncate" else
              [(piece, None) for piece in long_text_rules.pieces(a, max_seq_length - 2, rule)]
              for a, b in zip(ids_a, ids_b)]
    _log_cut(ids_a, ids_b, max_seq_length, rule)
    example_index = np.array([i for i, parts in enumerate(pieces) for _ in parts], np.int32)
    pieces = [piece for parts in pieces for piece in parts]
    n = len(pieces)
    out = {name: np.zeros([n, max_seq_length], np.int32)
           for name in ("input_ids", "input_mask", "segment_ids")}
    regression = labels is None
    out["label_ids"] = (np.zeros([n, len(labels)], np.int32) if multi_label
                        else np.zeros([n], np.float32 if regression else np.int32))
    out["is_real_example"] = np.ones([n], np.int32)
    label_map = None if regression else {label: i for i, label in enumerate(labels)}
    for i, (piece_a, piece_b) in enumerate(pieces):
        example = examples[example_index[i]]
        packed = pack_pair(piece_a, piece_b, max_seq_length, tokenizer.cls_id,
                           tokenizer.sep_id, max(tokenizer.pad_id, 0))
        out["input_ids"][i], out["input_mask"][i], out["segment_ids"][i] = packed
        if i % 10000 == 0 and i:
            logging.info("converted %d of %d examples", i, n)
        if example.label is None:
            continue
        if multi_label:
            out["label_ids"][i, [label_map[name] for name in example.label]] = 1
        else:
            out["label_ids"][i] = float(example.label) if regression else label_map[example.label]
    for i in range(min(n, 3)):
        example = examples[example_index[i]]
        logging.info("example %s: %s -> %s", example.guid, example.text_a[:80],
                     " ".join(tokenizer.convert_ids_to_tokens(
                         out["input_ids"][i][:int(out["input_mask"][i].sum())])))
    if rule.mode == "windows":
        out["example_index"] = example_index
        logging.info("%d examples read as %d windows (--long_text=windows)", len(examples), n)
    return out


def _log_cut(ids_a, ids_b, max_seq_length: int, rule) -> None:
    """Logs how many texts were longer than the model reads whole."""
    cut = sum(len(a) + len(b) > max_seq_length - (3 if b else 2) for a, b in zip(ids_a, ids_b))
    if not cut:
        return
    if rule.mode == "truncate":
        logging.info("%d of %d examples are longer than --max_seq_length %d and were cut to "
                     "their first tokens (--long_text=head_tail or windows reads the rest)",
                     cut, len(ids_a), max_seq_length)
    else:
        logging.info("%d of %d examples are longer than --max_seq_length %d: read by "
                     "--long_text=%s", cut, len(ids_a), max_seq_length, rule.mode)


def feature_spec(max_seq_length: int, regression: bool, num_multi_labels: Optional[int] = None,
                 windows: bool = False):
    """tf.io parsing spec of the original's classifier TFRecords (`label_ids` [K] with
    `num_multi_labels` K; `example_index` with `windows`)."""
    import tensorflow as tf

    ints = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    label_shape = [] if num_multi_labels is None else [num_multi_labels]
    spec = {"input_ids": ints, "input_mask": ints, "segment_ids": ints,
            "label_ids": tf.io.FixedLenFeature(label_shape,
                                               tf.float32 if regression else tf.int64),
            "is_real_example": tf.io.FixedLenFeature([], tf.int64)}
    if windows:
        spec["example_index"] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def serialize(features: Dict[str, np.ndarray], index: int, regression: bool) -> bytes:
    import tensorflow as tf

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

    feature = {name: ints(features[name][index])
               for name in ("input_ids", "input_mask", "segment_ids")}
    label = np.reshape(features["label_ids"][index], [-1])  # [K] multi-hot, else one value
    feature["label_ids"] = (tf.train.Feature(float_list=tf.train.FloatList(value=label))
                            if regression else ints(label))
    feature["is_real_example"] = ints([features["is_real_example"][index]])
    if "example_index" in features:
        feature["example_index"] = ints([features["example_index"][index]])
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def cache_identity(task: str, split: str, max_seq_length: int, tokenizer_fingerprint: str,
                   do_lower_case: bool, examples: Sequence,
                   labels: Optional[Sequence[str]], multi_label: bool = False,
                   long_text: Optional[Dict[str, object]] = None) -> Dict[str, object]:
    """Everything the cached features depend on (compared before reusing a cache);
    `long_text`: the reading rule's settings, other than truncation's."""
    digest = hashlib.sha1()
    for e in examples:
        digest.update(json.dumps([e.guid, e.text_a, e.text_b, e.label]).encode("utf-8"))
    return {"task": task, "split": split, "max_seq_length": max_seq_length,
            "vocabulary": tokenizer_fingerprint, "do_lower_case": do_lower_case,
            "labels": None if labels is None else list(labels),
            "examples": digest.hexdigest(), "num_examples": len(examples),
            "format": 1, **({"multi_label": True} if multi_label else {}),
            **(long_text or {})}


def cache_path(cached_dir: str, identity: Dict[str, object]) -> str:
    """`{task}_{split}_s{S}_{hash}.tf_record`: one file per task/split/length/vocab/data."""
    short = _sha1(json.dumps(identity, sort_keys=True).encode("utf-8"))[:10]
    return os.path.join(cached_dir, f"{identity['task']}_{identity['split']}_"
                                    f"s{identity['max_seq_length']}_{short}.tf_record")


def prepare_features(cached_dir: str, spec, split: str,
                     examples: Sequence, tokenizer, max_seq_length: int,
                     tokenizer_fingerprint: str, long_text=None,
                     unlabelled: bool = False) -> str:
    """Writes (or reuses) the TFRecord cache of `examples`; returns its path. `unlabelled`:
    every record's is_real_example is 0 (distillation's transfer text: the labels' loss
    skips them).

    The cache's identity (`cache_identity`: task, split, sequence length, vocabulary,
    lower-casing, labels and example contents) is its description and, hashed, part of
    its file name; reuse and rebuilding follow `finetuning.feature_cache`.
    """
    rule = long_text or LongText()
    identity = cache_identity(spec.name, split, max_seq_length, tokenizer_fingerprint,
                              tokenizer.do_lower_case, examples, spec.labels,
                              spec.multi_label, None if rule.mode == "truncate"
                              else rule.describe(max_seq_length - 2))
    path = cache_path(cached_dir, identity)

    def write_records(write):
        features = convert_examples(examples, tokenizer, max_seq_length, spec.labels,
                                    multi_label=spec.multi_label, long_text=rule)
        if unlabelled:
            features["is_real_example"][:] = 0
        for i in range(len(features["input_ids"])):
            write(serialize(features, i, spec.is_regression))
        logging.info("wrote %d %s features to %s", len(features["input_ids"]), split, path)

    # The name is ours (it carries the identity's hash): records without a description
    # there are an interrupted write, rebuilt.
    feature_cache.prepare(path, identity, write_records,
                          f"{spec.name} {split}, {len(examples)} examples", owned=True)
    return path


def dataset(path, max_seq_length: int, regression: bool, batch_size: int,
            is_training: bool, num_examples: int, seed: Optional[int] = None,
            input_context=None, num_multi_labels: Optional[int] = None,
            windows: bool = False):
    """tf.data over a feature cache (or a list of them: `cached_dataset`): int32 features, float32 labels for regression, int32
    label_ids [K] with `num_multi_labels` K, `example_index` with `windows` (then
    num_examples counts the windows: the cache's records).

    Training: shuffled (buffer min(num_examples, 100000), seeded) and repeated,
    whole batches; sharded per input pipeline under distribution.
    Evaluation: in file order, padded with `is_real_example = 0` rows up to a
    multiple of batch_size (as the original pads for TPUs), whole batches.
    """
    import tensorflow as tf

    spec = feature_spec(max_seq_length, regression, num_multi_labels, windows)
    label_shape = [] if num_multi_labels is None else [num_multi_labels]

    def parse(record):
        parsed = tf.io.parse_single_example(record, spec)
        return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v
                for k, v in parsed.items()}

    def padding_row():
        extra = {"example_index": tf.zeros([], tf.int32)} if windows else {}
        return {**extra, "input_ids": tf.zeros([max_seq_length], tf.int32),
                "input_mask": tf.zeros([max_seq_length], tf.int32),
                "segment_ids": tf.zeros([max_seq_length], tf.int32),
                "label_ids": tf.zeros(label_shape, tf.float32 if regression else tf.int32),
                "is_real_example": tf.zeros([], tf.int32)}

    return feature_cache.cached_dataset(path, parse, batch_size, is_training, num_examples,
                                        padding_row, seed, input_context)


def read_example_index(path: str) -> np.ndarray:
    """int32 [F]: each record's `example_index` in a windows cache, in file order."""
    import tensorflow as tf

    spec = {"example_index": tf.io.FixedLenFeature([], tf.int64)}
    data = tf.data.TFRecordDataset(path).batch(4096).map(
        lambda records: tf.io.parse_example(records, spec)["example_index"])
    parts = [batch.astype(np.int32) for batch in data.as_numpy_iterator()]
    return np.concatenate(parts) if parts else np.zeros([0], np.int32)
