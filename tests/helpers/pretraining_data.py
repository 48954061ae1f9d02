"""Writes small pretraining TFRecords in the original schema for tests.

The sequences have a learnable pattern: segment A repeats a token x and segment B
the token x+1, so a tiny model learns MLM (copy a neighbour) and SOP (in order
iff B's token follows A's) within a few hundred steps.
"""
import numpy as np
import tensorflow as tf


def make_examples(num, seq_len=16, max_pred=4, vocab=40, seed=0):
    rng = np.random.default_rng(seed)
    examples = []
    for _ in range(num):
        x = rng.integers(5, vocab - 1)
        half = (seq_len - 3) // 2
        a, b = np.full(half, x), np.full(seq_len - 3 - half, x + 1)
        swapped = int(rng.integers(0, 2))
        if swapped:
            a, b = b, a
        ids = np.concatenate([[2], a, [3], b, [3]]).astype(np.int64)  # [CLS] A [SEP] B [SEP]
        segments = np.concatenate([np.zeros(len(a) + 2), np.ones(len(b) + 1)]).astype(np.int64)
        real = rng.integers(seq_len - 4, seq_len + 1)
        mask = (np.arange(seq_len) < real).astype(np.int64)
        ids = ids * mask
        npred = int(rng.integers(1, max_pred + 1))
        candidates = [i for i in range(1, real) if ids[i] not in (2, 3)]
        positions = np.sort(rng.choice(candidates, npred, replace=False))
        labels = ids[positions].copy()
        input_ids = ids.copy()
        input_ids[positions] = 4  # [MASK]
        pad = max_pred - npred
        examples.append({
            "input_ids": input_ids, "input_mask": mask, "segment_ids": segments * mask,
            "token_boundary": mask.copy(),
            "masked_lm_positions": np.concatenate([positions, np.zeros(pad, np.int64)]),
            "masked_lm_ids": np.concatenate([labels, np.zeros(pad, np.int64)]),
            "masked_lm_weights": np.concatenate([np.ones(npred), np.zeros(pad)]).astype(np.float32),
            "next_sentence_labels": np.array([swapped], np.int64),
        })
    return examples


def serialize(example):
    feature = {}
    for name, value in example.items():
        if value.dtype == np.float32:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=value))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=value))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_records(path, examples):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for example in examples:
            writer.write(serialize(example))
    return str(path)
