"""Sentence-embedding examples -> model features: each text packed alone, TFRecord caches,
tf.data pipelines.

A record holds, for each text of the example (`a`; `b` for pairs; `n` for a hard
negative), `input_ids_<t>` and `input_mask_<t>` int64 [S]: `[CLS] text [SEP]` cut to
S - 2 tokens and padded, as sentence-transformers cuts a text at max_seq_length; plus
`score` float (0 when the file gives none) and `is_real_example`. The segment ids are all
0 (one text per row) and are not stored. No TensorFlow at import.
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from absl import logging

from albert_tf.finetuning import feature_cache

TEXTS = ("a", "b", "n")


def pack(ids: Sequence[int], max_seq_length: int, cls_id: int, sep_id: int,
         pad_id: int = 0) -> Tuple[List[int], List[int]]:
    """([CLS] ids [SEP] padded, mask): the first max_seq_length - 2 ids of one text."""
    row = [cls_id] + list(ids)[:max_seq_length - 2] + [sep_id]
    padding = max_seq_length - len(row)
    return row + [pad_id] * padding, [1] * len(row) + [0] * padding


def texts_of(examples: Sequence) -> Tuple[str, ...]:
    """Which of a, b, n the examples have (b and n: every example, or none)."""
    present = ["a"]
    for name, field in (("b", "text_b"), ("n", "negative")):
        values = [getattr(e, field) is not None for e in examples]
        if any(values) and not all(values):
            missing = next(e for e in examples if getattr(e, field) is None)
            raise ValueError(f"{missing.source}: no {field} where other examples have one")
        if all(values) and values:
            present.append(name)
    return tuple(present)


def convert_examples(examples: Sequence, tokenizer, max_seq_length: int
                     ) -> Dict[str, np.ndarray]:
    """int32 [N, S] `input_ids_<t>` / `input_mask_<t>` per text t, float32 `score` [N],
    int32 `is_real_example` [N]."""
    if max_seq_length < 3:
        raise ValueError(f"--max_seq_length must be at least 3, got {max_seq_length}")
    n = len(examples)
    out = {"score": np.array([e.score or 0.0 for e in examples], np.float32),
           "is_real_example": np.ones([n], np.int32)}
    fields = {"a": "text_a", "b": "text_b", "n": "negative"}
    for name in texts_of(examples):
        ids = tokenizer.encode_ids([tokenizer.preprocess(getattr(e, fields[name]))
                                    for e in examples])
        rows = [pack(row, max_seq_length, tokenizer.cls_id, tokenizer.sep_id,
                     max(tokenizer.pad_id, 0)) for row in ids]
        out[f"input_ids_{name}"] = np.array([r[0] for r in rows], np.int32).reshape(n, -1)
        out[f"input_mask_{name}"] = np.array([r[1] for r in rows], np.int32).reshape(n, -1)
    return out


def serialize(features: Dict[str, np.ndarray], index: int) -> bytes:
    import tensorflow as tf

    feature = {}
    for name, values in features.items():
        value = np.reshape(values[index], [-1])
        feature[name] = (tf.train.Feature(float_list=tf.train.FloatList(value=value))
                         if values.dtype == np.float32 else
                         tf.train.Feature(int64_list=tf.train.Int64List(
                             value=[int(v) for v in value])))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def feature_spec(max_seq_length: int, texts: Sequence[str]):
    import tensorflow as tf

    ints = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    spec = {"score": tf.io.FixedLenFeature([], tf.float32),
            "is_real_example": tf.io.FixedLenFeature([], tf.int64)}
    for name in texts:
        spec[f"input_ids_{name}"] = spec[f"input_mask_{name}"] = ints
    return spec


def prepare_features(cached_dir: str, task: str, split: str, examples: Sequence, tokenizer,
                     max_seq_length: int, tokenizer_fingerprint: str) -> str:
    """Writes (or reuses) the TFRecord cache of `examples`; returns its path (its identity:
    task, split, length, vocabulary, casing and the examples' contents)."""
    digest = hashlib.sha1()
    for e in examples:
        digest.update(json.dumps([e.guid, e.text_a, e.text_b, e.score, e.negative]).encode())
    identity = {"task": task, "split": split, "max_seq_length": max_seq_length,
                "vocabulary": tokenizer_fingerprint, "do_lower_case": tokenizer.do_lower_case,
                "examples": digest.hexdigest(), "num_examples": len(examples),
                "texts": list(texts_of(examples)), "format": 1}
    short = hashlib.sha1(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:10]
    path = os.path.join(cached_dir, f"embeddings_{task}_{split}_s{max_seq_length}_{short}"
                                    ".tf_record")

    def write_records(write):
        features = convert_examples(examples, tokenizer, max_seq_length)
        for i in range(len(examples)):
            write(serialize(features, i))
        logging.info("wrote %d %s features to %s", len(examples), split, path)

    feature_cache.prepare(path, identity, write_records,
                          f"{task} {split}, {len(examples)} examples", owned=True)
    return path


def dataset(path: str, max_seq_length: int, texts: Sequence[str], batch_size: int,
            is_training: bool, num_examples: int, seed: Optional[int] = None,
            input_context=None):
    """tf.data over a cache: int32 ids and masks, float32 score (see the module docstring)."""
    import tensorflow as tf

    spec = feature_spec(max_seq_length, texts)

    def parse(record):
        parsed = tf.io.parse_single_example(record, spec)
        return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v
                for k, v in parsed.items()}

    def padding_row():
        row = {"score": tf.zeros([], tf.float32), "is_real_example": tf.zeros([], tf.int32)}
        for name in texts:
            row[f"input_ids_{name}"] = row[f"input_mask_{name}"] = tf.zeros([max_seq_length],
                                                                            tf.int32)
        return row

    return feature_cache.cached_dataset(path, parse, batch_size, is_training, num_examples,
                                        padding_row, seed, input_context)


def text_features(features, name: str):
    """The model inputs of text `name` (a, b or n) of a batch."""
    import tensorflow as tf

    ids = features[f"input_ids_{name}"]
    return {"input_ids": ids, "input_mask": features[f"input_mask_{name}"],
            "segment_ids": tf.zeros_like(ids)}
