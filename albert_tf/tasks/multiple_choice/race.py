"""RACE multiple-choice reading comprehension: reading the files into examples.

Data layouts under `data_dir` (the original's `--data_dir`: the folder holding
`RACE/`; the `RACE/` folder itself, or any folder holding `{train,dev,test}/`,
is accepted too, see `race_dir`):
  * the RACE download: `RACE/{train,dev,test}/{middle,high}/N.txt`, one JSON
    object per file;
  * the original's `all.txt` in each level directory: one JSON object per line.
    When `all.txt` is present it is the only file read in that directory (the
    numbered files would duplicate it).
Each object has `article` (str), `questions` (list of str), `options` (one list
of 4 str per question), `answers` (one letter A-D per question; may be absent
for unlabelled data) and `id` (e.g. "high132.txt"). Every question is one
example. Malformed input raises `RaceDataError` naming the file, the line and
the question index.

Texts are normalised with `preprocess_text(text, lower=do_lower_case)` (or the
tokenizer's `preprocess`). Example order is the original's: levels middle then high;
files in numeric order (the original uses `os.listdir` order, which is arbitrary).

The features, TFRecord caches and tf.data pipelines are in
`albert_tf.tasks.multiple_choice.features` (their old names here still work), the
accuracies in `albert_tf.tasks.multiple_choice.metrics`.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Callable, Iterator, List, Optional, Tuple

from absl import logging

from albert_tf.errors import UserError, UserValueError
from albert_tf.tokenization import preprocess_text
# The record layout's constants, and the features' and metrics' old names here.
from albert_tf.tasks.multiple_choice.features import (  # noqa: F401
    LABELS, LEVELS, NUM_CHOICES, RACE_CACHE_FORMAT as CACHE_FORMAT, TRAIN_SHUFFLE_SEED,
    cache_identity, dataset, example_features, feature_spec, pack_row,
    race_choice_ids as choice_ids, featurize_race as featurize, race_fingerprint as
    examples_fingerprint, prepare_race_cache as prepare_cache, record_order, serialize,
    validate_race_lengths as validate_lengths, write_cache)
from albert_tf.tasks.multiple_choice.metrics import accuracy_by_level  # noqa: F401

SPLITS = ("train", "dev", "test")


class RaceDataError(UserError, ValueError):
    """A RACE file is missing or malformed; the message names the file, line and question."""


@dataclasses.dataclass(frozen=True)
class RaceExample:
    """One question of a passage, with normalised texts.

    example_id: the passage's `id` field (e.g. "high132.txt").
    question_index: position of the question in the passage (0-based).
    level: "middle" or "high".
    label: 0-3 for A-D, or None when the file has no answers.
    source: "path:line" of the passage.
    """

    example_id: str
    question_index: int
    level: str
    article: str
    question: str
    options: Tuple[str, ...]
    label: Optional[int]
    source: str

    def qa_texts(self) -> List[str]:
        """The 4 question+option texts (see `question_option_text`)."""
        return [question_option_text(self.question, option) for option in self.options]


def question_option_text(question: str, option: str) -> str:
    """The original's qa text: every "_" of the question replaced by the option,
    or, when the question has no "_", question + " " + option."""
    if "_" in question:
        return question.replace("_", option)
    return question + " " + option


def levels_for(high_only: bool = False, middle_only: bool = False) -> Tuple[str, ...]:
    """The levels to read for the original's --high_only / --middle_only flags."""
    if high_only and middle_only:
        raise UserValueError("--high_only and --middle_only cannot both be set")
    if high_only:
        return ("high",)
    if middle_only:
        return ("middle",)
    return LEVELS


def _numeric_key(name: str):
    stem = os.path.splitext(name)[0]
    return (0, int(stem), name) if stem.isdigit() else (1, 0, name)


def level_files(level_dir: str) -> List[str]:
    """The files to read in one level directory: all.txt alone if present, else every
    *.txt in numeric order."""
    import tensorflow as tf  # gfile: local paths and object stores alike

    names = tf.io.gfile.listdir(level_dir)
    if "all.txt" in names:
        others = [n for n in names if n.endswith(".txt") and n != "all.txt"]
        if others:
            logging.info("%s: reading all.txt only (ignoring %d other .txt files)", level_dir,
                         len(others))
        return [os.path.join(level_dir, "all.txt")]
    return [os.path.join(level_dir, n) for n in sorted(names, key=_numeric_key)
            if n.endswith(".txt")]


def parse_passages(path: str, text: str) -> Iterator[Tuple[int, dict]]:
    """(line number, JSON object) for each passage of a file's text.

    A file holding a single JSON value (the RACE download, possibly
    pretty-printed) gives one passage at line 1; otherwise every non-blank line
    must be one JSON object (the original's all.txt).
    """
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    else:
        if not isinstance(whole, dict):
            raise RaceDataError(f"{path}:1: expected a JSON object, got {type(whole).__name__}")
        yield 1, whole
        return
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            raise RaceDataError(f"{path}:{line_no}: not valid JSON ({err.msg} at column "
                                f"{err.colno})") from None
        if not isinstance(value, dict):
            raise RaceDataError(f"{path}:{line_no}: expected a JSON object, got "
                                f"{type(value).__name__}")
        yield line_no, value


def _require(passage: dict, key: str, kind, where: str):
    if key not in passage:
        raise RaceDataError(f"{where}: missing field {key!r}")
    value = passage[key]
    if not isinstance(value, kind):
        raise RaceDataError(f"{where}: field {key!r} must be a {kind.__name__}, got "
                            f"{type(value).__name__}")
    return value


def examples_from_passage(passage: dict, where: str, level: str,
                          do_lower_case: bool = True,
                          normalize: Optional[Callable[[str], str]] = None) -> List[RaceExample]:
    """Validates one passage and returns one `RaceExample` per question.

    `where` is "path:line", used in error messages. `normalize` is applied to
    every text (default `preprocess_text(text, lower=do_lower_case)`, the
    original's; give `tokenizer.preprocess`, the identity for WordPiece).
    """
    def process(text):
        if normalize is not None:
            return normalize(text)
        return preprocess_text(text, lower=do_lower_case)

    example_id = _require(passage, "id", str, where)
    article = _require(passage, "article", str, where)
    questions = _require(passage, "questions", list, where)
    options = _require(passage, "options", list, where)
    answers = passage.get("answers")
    if answers is not None and not isinstance(answers, list):
        raise RaceDataError(f"{where}: field 'answers' must be a list, got "
                            f"{type(answers).__name__}")
    if len(options) != len(questions) or (answers is not None
                                          and len(answers) != len(questions)):
        counts = f"{len(questions)} questions, {len(options)} option lists"
        if answers is not None:
            counts += f", {len(answers)} answers"
        raise RaceDataError(f"{where} (id {example_id}): mismatched list lengths: {counts}")
    context = process(article)
    examples = []
    for index, question in enumerate(questions):
        at = f"{where} (id {example_id}) question {index}"
        choices = options[index]
        if not isinstance(question, str):
            raise RaceDataError(f"{at}: the question must be a string")
        if not isinstance(choices, list) or len(choices) != NUM_CHOICES:
            got = len(choices) if isinstance(choices, list) else type(choices).__name__
            raise RaceDataError(f"{at}: expected {NUM_CHOICES} options, got {got}")
        if not all(isinstance(choice, str) for choice in choices):
            raise RaceDataError(f"{at}: every option must be a string")
        label = None
        if answers is not None:
            answer = answers[index]
            if answer not in LABELS:
                raise RaceDataError(f"{at}: answer {answer!r} is not one of "
                                    f"{', '.join(LABELS)}")
            label = LABELS.index(answer)
        examples.append(RaceExample(
            example_id=example_id, question_index=index, level=level, article=context,
            question=process(question), options=tuple(process(c) for c in choices),
            label=label, source=where))
    return examples


def race_dir(data_dir: str) -> str:
    """The folder holding the split folders `{train,dev,test}/`: `data_dir/RACE` when
    --data_dir is RACE's parent (the original's layout), else `data_dir` itself (the
    RACE folder, or any folder holding the splits); the first of the two that holds any
    split folder. RaceDataError naming --data_dir and both places when neither does."""
    import tensorflow as tf

    candidates = (os.path.join(data_dir, "RACE"), data_dir)
    for directory in candidates:
        if any(tf.io.gfile.isdir(os.path.join(directory, split)) for split in SPLITS):
            return directory
    raise RaceDataError(f"--data_dir {data_dir}: no RACE data: found no {{train,dev,test}}/ "
                        f"folder in {candidates[0]} (--data_dir as the folder holding RACE/) "
                        f"or in {candidates[1]} (--data_dir as the RACE folder)")


def read_examples(data_dir: str, split: str, do_lower_case: bool = True,
                  high_only: bool = False, middle_only: bool = False,
                  normalize: Optional[Callable[[str], str]] = None) -> List[RaceExample]:
    """Every question of `<split>/{middle,high}` in `race_dir(data_dir)` (see the module
    docstring); `normalize` as in `examples_from_passage`."""
    import tensorflow as tf

    if split not in SPLITS:
        raise ValueError(f"unknown RACE split {split!r}; expected one of {', '.join(SPLITS)}")
    split_dir = os.path.join(race_dir(data_dir), split)
    examples: List[RaceExample] = []
    for level in levels_for(high_only, middle_only):
        level_dir = os.path.join(split_dir, level)
        if not tf.io.gfile.isdir(level_dir):
            hint = " (use --high_only or --middle_only to read one level)" \
                if not (high_only or middle_only) else ""
            raise RaceDataError(f"{level_dir} does not exist: --data_dir must hold "
                                f"RACE/{split}/{{middle,high}} or {split}/{{middle,high}}{hint}")
        files = level_files(level_dir)
        if not files:
            raise RaceDataError(f"{level_dir} holds no .txt file (--data_dir)")
        before = len(examples)
        for path in files:
            with tf.io.gfile.GFile(path, "rb") as handle:
                raw = handle.read()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise RaceDataError(f"{path}: not UTF-8 ({err})") from None
            for line_no, passage in parse_passages(path, text):
                examples.extend(examples_from_passage(passage, f"{path}:{line_no}", level,
                                                      do_lower_case, normalize))
        logging.info("RACE %s/%s: %d questions from %d files in %s", split, level,
                     len(examples) - before, len(files), level_dir)
    if not examples:
        raise RaceDataError(f"{split_dir}: no questions found (--data_dir)")
    return examples
