"""What an `AlbertMultipleChoice` task's fit / evaluate / predict take, as run_race.py's
features.

    x: columns   {"article": [...], "question": [...], "options": [[4 options], ...]}
       or rows   [{"article": ..., "question": ..., "options": [...]}, ...]
       ("context" is read as "article")
    y: answers   [N] option indices 0-3, RACE's letters "A"-"D", or (C3) the answer's text

Each question becomes 4 rows, exactly as run_race.py packs them (`packing`):
  "race"  `[CLS] article [SEP] question+option [SEP]` (`features.featurize_race`: the
          question's "_" replaced by the option, else the option appended; the qa text
          keeps its last `max_qa_length` tokens; the article is cut to fit), 4 options
  "c3"    `[CLS] context [SEP] question [SEP] option [SEP]` (`features.featurize_c3`:
          C3's baseline truncation of the three), 2-4 options, the absent ones masked
          (`choice_mask`: probability 0, never the answer)
with the texts normalised as run_race.py reads them (`Tokenizer.preprocess`). This runs in
Python, before the dataset.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from albert_tf.errors import UserValueError
from albert_tf.tasks.multiple_choice import features
from albert_tf.tasks.multiple_choice.c3 import C3Example
from albert_tf.tasks.multiple_choice.race import RaceExample

FIELDS = ("article", "question", "options")
TOKEN_FEATURES = ("input_ids", "input_mask", "segment_ids")
PACKINGS = ("race", "c3")


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


def examples_of(x, y, normalize, packing: str = "race") -> List:
    """x (and y) as run_race.py's `RaceExample`s (texts through `normalize`), or, for
    packing "c3", `C3Example`s (raw texts: the featurizer normalises them)."""
    rows = rows_of(x)
    answers = [None] * len(rows) if y is None else _answers(y, len(rows))
    examples = []
    for index, (row, answer) in enumerate(zip(rows, answers)):
        texts = [row.get(name) for name in ("article", "question")]
        options = row.get("options")
        if any(not isinstance(text, str) for text in texts):
            raise UserValueError(f"question {index}: 'article' and 'question' are texts")
        counts = (features.NUM_CHOICES,) if packing == "race" else (2, 3, 4)
        if not isinstance(options, (list, tuple)) or len(options) not in counts or \
                not all(isinstance(option, str) for option in options):
            raise UserValueError(f"question {index}: 'options' is a list of "
                                 f"{' to '.join(map(str, counts[::2]))} texts, got "
                                 f"{options!r:.80}")
        label = None if answer is None else _label(answer, options, index, packing)
        if packing == "race":
            examples.append(RaceExample(
                example_id=str(index), question_index=0, level=features.LEVELS[0],
                article=normalize(texts[0]), question=normalize(texts[1]),
                options=tuple(normalize(option) for option in options), label=label,
                source=f"question {index}"))
        else:
            examples.append(C3Example(
                example_id=str(index), question_index=0, subset=features.SUBSETS[0],
                context=texts[0], question=texts[1], options=tuple(options), label=label,
                question_id=None, source=f"question {index}"))
    return examples


def _answers(y, count: int) -> List:
    values = list(np.asarray(y, dtype=object).reshape(-1)) if not isinstance(y, list) else y
    if len(values) != count:
        raise UserValueError(f"{count} questions but {len(values)} answers")
    return [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in values]


def _label(answer, options, index: int, packing: str) -> int:
    """An answer as its option's index: an index, RACE's letter, or (C3) the option's text."""
    if packing == "race" and isinstance(answer, str) and answer in features.LABELS:
        return features.LABELS.index(answer)
    if packing == "c3" and isinstance(answer, str) and answer in options:
        return list(options).index(answer)
    if isinstance(answer, (int, np.integer)) and not isinstance(answer, bool) and \
            0 <= answer < len(options):
        return int(answer)
    what = ("a letter A-D" if packing == "race" else "the text of one of the options")
    raise UserValueError(f"question {index}: the answer is an option index 0-"
                         f"{len(options) - 1} or {what}, got {answer!r}")


def packed(examples, tokenizer, max_seq_length: int, max_qa_length: int,
           packing: str = "race") -> Dict[str, np.ndarray]:
    """run_race.py's features of `examples`: input_ids, input_mask, segment_ids int32
    [N, 4, S], label_ids int32 [N] (0 when unlabelled), and for "c3" choice_mask int32
    [N, 4]."""
    if packing == "race":
        rows = features.featurize_race(examples, tokenizer, max_seq_length, max_qa_length,
                                       log_examples=0)
    else:
        rows = features.featurize_c3(examples, tokenizer, max_seq_length, log_examples=0)
    rows = list(rows)
    names = TOKEN_FEATURES + ("label_ids",) + (("choice_mask",) if packing == "c3" else ())
    if not rows:
        empty = {name: np.zeros((0, features.NUM_CHOICES, max_seq_length), np.int32)
                 for name in TOKEN_FEATURES}
        empty["label_ids"] = np.zeros((0,), np.int32)
        if packing == "c3":
            empty["choice_mask"] = np.zeros((0, features.NUM_CHOICES), np.int32)
        return empty
    return {name: np.stack([r[name] for r in rows]).astype(np.int32) for name in names}


def model_features(arrays: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """The model's inputs among `packed`'s arrays (the token features, and choice_mask)."""
    return {name: arrays[name] for name in TOKEN_FEATURES + ("choice_mask",)
            if name in arrays}


def choice_dataset(arrays: Dict[str, np.ndarray], labelled: bool, batch_size: int,
                   shuffle: bool) -> tf.data.Dataset:
    """Batches of (token features [B, 4, S], answers int32 [B]), or of features alone."""
    inputs = model_features(arrays)
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
