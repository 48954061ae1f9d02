"""tf.data readers for the pretraining TFRecord schema of the original release.

Features (tf.train.Example, fixed length; S = max_seq_length, P = max_predictions_per_seq):
  input_ids, input_mask, segment_ids, token_boundary   int64 [S]
  masked_lm_positions, masked_lm_ids                   int64 [P]
  masked_lm_weights                                    float [P]
  next_sentence_labels                                 int64 [1]   (SOP: 1 = swapped)
The reader yields int32 (and float32 weights), as the original's input_fn.
"""
from __future__ import annotations

import dataclasses
import glob
import re
from typing import Dict, List, Optional, Sequence, Set, Tuple, Union

import tensorflow as tf
from absl import logging

from albert_tf.errors import UserError

INT64 = "int64"
FLOAT = "float"


def pretraining_schema(max_seq_length: int, max_predictions_per_seq: int) -> Dict[str, tuple]:
    """Feature name -> (kind, length) of the pretraining TFRecords."""
    s, p = max_seq_length, max_predictions_per_seq
    return {
        "input_ids": (INT64, s),
        "input_mask": (INT64, s),
        "segment_ids": (INT64, s),
        "token_boundary": (INT64, s),
        "masked_lm_positions": (INT64, p),
        "masked_lm_ids": (INT64, p),
        "masked_lm_weights": (FLOAT, p),
        "next_sentence_labels": (INT64, 1),
    }


def feature_spec(schema: Dict[str, tuple]) -> Dict[str, tf.io.FixedLenFeature]:
    return {name: tf.io.FixedLenFeature([length], tf.int64 if kind == INT64 else tf.float32)
            for name, (kind, length) in schema.items()}


class InputError(UserError, ValueError):
    """An input file is missing, malformed or does not match the expected schema."""


# data_prep's JSON summary (`train.summary.json`; `train.tfrecord.summary.json` before).
SUMMARY_SUFFIX = ".summary.json"
# Skips already logged in this process: the readers expand the same patterns at
# every evaluation and for every input pipeline, the log should say it once.
_LOGGED_SKIPS: Set[Tuple[str, ...]] = set()


def expand_patterns(patterns: Union[str, Sequence[str]]) -> List[str]:
    """Comma lists and globs -> sorted unique file list; a pattern matching nothing is an error.

    A data-prep summary (`*.summary.json`) matched by a glob is skipped (logged
    once per process); one named explicitly is an error.
    """
    if isinstance(patterns, str):
        patterns = [patterns]
    files, skipped = [], []
    for item in patterns:
        for pattern in filter(None, (p.strip() for p in item.split(","))):
            if not glob.has_magic(pattern):
                if not tf.io.gfile.exists(pattern):
                    raise InputError(f"input pattern {pattern!r} matches no file")
                if pattern.endswith(SUMMARY_SUFFIX):
                    raise InputError(f"{pattern}: a data-prep summary (JSON), not a TFRecord "
                                     "file; give the TFRecord files it describes")
                files.append(pattern)
                continue
            matched = sorted(tf.io.gfile.glob(pattern))
            kept = [path for path in matched if not path.endswith(SUMMARY_SUFFIX)]
            if not matched:
                raise InputError(f"input pattern {pattern!r} matches no file")
            if not kept:
                raise InputError(f"input pattern {pattern!r} matches only data-prep summaries "
                                 f"({', '.join(matched)}), no TFRecord file")
            skipped.extend(path for path in matched if path.endswith(SUMMARY_SUFFIX))
            files.extend(kept)
    if not files:
        raise InputError("no input files given")
    skipped = tuple(dict.fromkeys(skipped))
    if skipped and skipped not in _LOGGED_SKIPS:
        _LOGGED_SKIPS.add(skipped)
        logging.info("input: skipped %d data-prep summary file(s) matched by a glob (not "
                     "TFRecords): %s", len(skipped), ", ".join(skipped))
    return list(dict.fromkeys(files))


def _example_kinds(example: tf.train.Example) -> Dict[str, tuple]:
    kinds = {}
    for name, feature in example.features.feature.items():
        which = feature.WhichOneof("kind")
        values = getattr(feature, which).value if which else []
        kind = {"int64_list": INT64, "float_list": FLOAT, "bytes_list": "bytes"}.get(which, "empty")
        kinds[name] = (kind, len(values))
    return kinds


def validate_file(path: str, schema: Dict[str, tuple]) -> None:
    """Checks the first record of `path` against `schema`; errors name the feature and the file."""
    if tf.io.gfile.isdir(path):
        raise InputError(f"{path}: a directory, not a TFRecord file")
    try:
        record = next(iter(tf.data.TFRecordDataset([path]).take(1)), None)
    except tf.errors.DataLossError as err:
        raise InputError(f"{path}: not a readable TFRecord file ({_reason(err)})") from err
    if record is None:
        size = tf.io.gfile.stat(path).length
        if size:  # shorter than a record header: TensorFlow reads it as no records
            raise InputError(f"{path}: not a readable TFRecord file ({size} bytes, no "
                             "complete record)")
        raise InputError(f"{path}: contains no records")
    try:
        example = tf.train.Example.FromString(record.numpy())
    except Exception as err:  # protobuf's DecodeError
        raise InputError(f"{path}: first record is not a tf.train.Example ({err})") from err
    found = _example_kinds(example)
    for name, (kind, length) in schema.items():
        if name not in found:
            raise InputError(f"{path}: feature '{name}' is missing (found: "
                             f"{', '.join(sorted(found))})")
        if found[name] != (kind, length):
            raise InputError(f"{path}: feature '{name}' is {found[name][0]}[{found[name][1]}], "
                             f"expected {kind}[{length}] (check --max_seq_length / "
                             "--max_predictions_per_seq against the data)")


def locate_corruption(files: Sequence[str]) -> None:
    """Reads every file to the end; raises InputError naming the first corrupted one.

    TensorFlow's own DataLossError does not say which file failed; the training
    loop calls this when it sees one.
    """
    for path in files:
        try:
            for _ in tf.data.TFRecordDataset([path]):
                pass
        except tf.errors.DataLossError as err:
            raise InputError(f"{path}: corrupted TFRecord ({_reason(err)})") from err


def _reason(err: tf.errors.OpError) -> str:
    """TensorFlow's message without the op and function names around it."""
    message = re.sub(r"\{\{[^}]*\}\}\s*", "", err.message)
    return re.sub(r"\s*\[Op:[^\]]*\].*$", "", message, flags=re.S).strip()


@dataclasses.dataclass
class PretrainingInputConfig:
    """Options of the pretraining reader (defaults = the original's input_fn)."""

    file_patterns: Union[str, Sequence[str]]
    max_seq_length: int
    max_predictions_per_seq: int
    is_training: bool = True
    shuffle_buffer_size: int = 100  # the original's record shuffle buffer
    cycle_length: int = 4  # files read in parallel, at most
    seed: Optional[int] = None
    deterministic: bool = False  # True: fixed order for a given seed (slower interleave)
    validate: bool = True


def _parse_fn(schema):
    spec = feature_spec(schema)

    def parse(record):
        features = tf.io.parse_single_example(record, spec)
        return {name: tf.cast(value, tf.float32 if value.dtype == tf.float32 else tf.int32)
                for name, value in features.items()}

    return parse


def pretraining_dataset(config: PretrainingInputConfig, batch_size: int,
                        input_context: Optional[tf.distribute.InputContext] = None
                        ) -> tf.data.Dataset:
    """Batches of pretraining features ([batch_size, ...] int32 / float32 dicts).

    Training: files shuffled and repeated, read `cycle_length` at a time
    (interleaved, non-deterministic unless `deterministic`), records shuffled,
    batched with drop_remainder, prefetched. Evaluation: files in order, read once,
    the last partial batch kept.
    `batch_size` is per replica; with an `input_context` the files (or, when there
    are fewer files than pipelines, the records) are sharded per input pipeline.
    """
    files = expand_patterns(config.file_patterns)
    schema = pretraining_schema(config.max_seq_length, config.max_predictions_per_seq)
    if config.validate:
        for path in files:
            validate_file(path, schema)
    dataset = tf.data.Dataset.from_tensor_slices(tf.constant(files))
    shard_records = False
    if input_context and input_context.num_input_pipelines > 1:
        if len(files) >= input_context.num_input_pipelines:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        else:
            shard_records = True
    options = tf.data.Options()
    options.deterministic = config.deterministic or not config.is_training
    if config.is_training:
        dataset = dataset.shuffle(len(files), seed=config.seed).repeat()
        dataset = dataset.interleave(tf.data.TFRecordDataset,
                                     cycle_length=min(config.cycle_length, len(files)),
                                     num_parallel_calls=tf.data.AUTOTUNE)
        if shard_records:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
        dataset = dataset.shuffle(config.shuffle_buffer_size, seed=config.seed)
    else:
        dataset = tf.data.TFRecordDataset(dataset)
        if shard_records:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
    dataset = dataset.map(_parse_fn(schema), num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.batch(batch_size, drop_remainder=config.is_training)
    return dataset.prefetch(tf.data.AUTOTUNE).with_options(options)
