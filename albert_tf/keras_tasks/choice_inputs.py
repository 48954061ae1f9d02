"""What an `AlbertMultipleChoice` task's fit / evaluate / predict take, as run_race.py's
features.

    x: columns   {"article": [...], "question": [...], "options": [[4 options], ...]}
       or rows   [{"article": ..., "question": ..., "options": [...]}, ...]
       ("context" is read as "article")
    y: answers   [N] option indices 0-3, or RACE's letters "A"-"D"

Each question becomes 4 rows `[CLS] article [SEP] question+option [SEP]`, exactly as
run_race.py packs RACE (`tasks.multiple_choice.features.featurize_race`: the question's
"_" replaced by the option, else the option appended; the qa text keeps its last
`max_qa_length` tokens; the article is cut to fit), with the texts normalised as
run_race.py reads them (`Tokenizer.preprocess`). This runs in Python, before the dataset.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from albert_tf.errors import UserValueError
from albert_tf.tasks.multiple_choice import features
from albert_tf.tasks.multiple_choice.race import RaceExample

FIELDS = ("article", "question", "options")
TOKEN_FEATURES = ("input_ids", "input_mask", "segment_ids")


def rows_of(x) -> List[Dict]:
    """x as a list of {"article", "question", "options"} rows; one line otherwise."""
    if isinstance(x, tf.data.Dataset):
        raise UserValueError("multiple-choice takes questions in memory (a dict of columns "
                             "or a list of rows): its rows are packed in Python, as "
                             "run_race.py's; read a dataset into lists first")
    if isinstance(x, dict):
        columns = {_field(key): value for key, value in x.items()}
        missing = [name for name in FIELDS if name not in columns]
        if missing:
            raise UserValueError(f"multiple-choice: x has no {missing[0]!r} column (it takes "
                                 f"{', '.join(FIELDS)}; 'context' for 'article')")
        counts = {name: len(columns[name]) for name in FIELDS}
        if len(set(counts.values())) > 1:
            raise UserValueError(f"multiple-choice: columns of different lengths {counts}")
        return [{name: columns[name][i] for name in FIELDS} for i in range(counts["article"])]
    if isinstance(x, (list, tuple)) and all(isinstance(row, dict) for row in x):
        return [{_field(key): value for key, value in row.items()} for row in x]
    raise UserValueError("multiple-choice: x is a dict of columns {'article', 'question', "
                         "'options'} or a list of such dicts, got " + type(x).__name__)


def _field(key: str) -> str:
    return "article" if key == "context" else key


def examples_of(x, y, normalize) -> List[RaceExample]:
    """x (and y) as run_race.py's `RaceExample`s, texts through `normalize`."""
    rows = rows_of(x)
    labels = [None] * len(rows) if y is None else _labels(y, len(rows))
    examples = []
    for index, (row, label) in enumerate(zip(rows, labels)):
        texts = [row.get(name) for name in ("article", "question")]
        options = row.get("options")
        if any(not isinstance(text, str) for text in texts):
            raise UserValueError(f"question {index}: 'article' and 'question' are texts")
        if not isinstance(options, (list, tuple)) or len(options) != features.NUM_CHOICES or \
                not all(isinstance(option, str) for option in options):
            raise UserValueError(f"question {index}: 'options' is a list of "
                                 f"{features.NUM_CHOICES} texts, got {options!r:.80}")
        examples.append(RaceExample(
            example_id=str(index), question_index=0, level=features.LEVELS[0],
            article=normalize(texts[0]), question=normalize(texts[1]),
            options=tuple(normalize(option) for option in options), label=label,
            source=f"question {index}"))
    return examples


def _labels(y, count: int) -> List[int]:
    values = list(np.asarray(y, dtype=object).reshape(-1)) if not isinstance(y, list) else y
    if len(values) != count:
        raise UserValueError(f"{count} questions but {len(values)} answers")
    out = []
    for index, value in enumerate(values):
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        if isinstance(value, str) and value in features.LABELS:
            value = features.LABELS.index(value)
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and \
                0 <= value < features.NUM_CHOICES:
            out.append(int(value))
            continue
        raise UserValueError(f"question {index}: the answer is an option index 0-"
                             f"{features.NUM_CHOICES - 1} or a letter "
                             f"{'-'.join(features.LABELS[::3])}, got {value!r}")
    return out


def packed(examples, tokenizer, max_seq_length: int, max_qa_length: int
           ) -> Dict[str, np.ndarray]:
    """run_race.py's features of `examples`: input_ids, input_mask, segment_ids int32
    [N, 4, S] and label_ids int32 [N] (0 when unlabelled)."""
    rows = list(features.featurize_race(examples, tokenizer, max_seq_length, max_qa_length,
                                        log_examples=0))
    if not rows:
        empty = np.zeros((0, features.NUM_CHOICES, max_seq_length), np.int32)
        return {**{name: empty for name in TOKEN_FEATURES},
                "label_ids": np.zeros((0,), np.int32)}
    return {name: np.stack([r[name] for r in rows]).astype(np.int32)
            for name in TOKEN_FEATURES + ("label_ids",)}


def choice_dataset(arrays: Dict[str, np.ndarray], labelled: bool, batch_size: int,
                   shuffle: bool) -> tf.data.Dataset:
    """Batches of (token features [B, 4, S], answers int32 [B]), or of features alone."""
    inputs = {name: arrays[name] for name in TOKEN_FEATURES}
    dataset = tf.data.Dataset.from_tensor_slices((inputs, arrays["label_ids"]) if labelled
                                                 else inputs)
    count = len(arrays["input_ids"])
    if shuffle and count:
        dataset = dataset.shuffle(count, reshuffle_each_iteration=True)
    return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def default_qa_length(max_seq_length: int) -> int:
    """run_race.py's --max_qa_length default: 128, or half the row where 128 does not fit."""
    return 128 if 128 <= max_seq_length - 3 else max(1, max_seq_length // 2)


def check_qa_length(max_qa_length: Optional[int], max_seq_length: int) -> int:
    value = default_qa_length(max_seq_length) if max_qa_length is None else int(max_qa_length)
    if not 0 < value <= max_seq_length - 3:
        raise UserValueError(f"max_qa_length={value}: must be in [1, sequence_length - 3 = "
                             f"{max_seq_length - 3}]")
    return value
