"""C3 multiple-choice reading comprehension (Chinese): reading the files for run_race.py.

Data (nlpdata/c3, also in CLUE): `c3-m-{train,dev,test}.json` (C3-M, mixed
genre) and `c3-d-{...}.json` (C3-D, dialogue), each one JSON list of
documents `[[context lines], [{"question", "choice" (2-4 options),
"answer" (the text of one option; absent for unlabelled data), "id"
(optional, CLUE's question id)}], document id]`. `--data_dir` holds the files
or a folder `c3/` or `data/` holding them (the first of the three that has any
file of the split). A split may have only one of the two subsets (a warning
names the one missing). Every question is one example. Malformed input raises
`C3DataError` naming the file, the document (position and id) and the question.

The features (C3's baseline's, with the padding options masked by `choice_mask`) are in
`albert_tf.tasks.multiple_choice.features`, the per-subset accuracy in
`albert_tf.tasks.multiple_choice.metrics` (their old names here still work). An answer
is the index of its text among the choices (the last one when a text appears twice, as
the baseline).
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import List, Optional, Tuple

import numpy as np
from absl import logging

from albert_tf.tasks.multiple_choice import race
# The record layout's constants, and the features' and metrics' old names here.
from albert_tf.tasks.multiple_choice.features import (  # noqa: F401
    C3_CACHE_FORMAT as CACHE_FORMAT, NUM_CHOICES, SUBSETS, c3_choice_ids as choice_ids,
    c3_fingerprint as examples_fingerprint, featurize_c3 as featurize, padded_options,
    prepare_c3_cache as prepare_cache, truncate_lengths, validate_c3_length as validate_length)
from albert_tf.tasks.multiple_choice.metrics import accuracy_by_subset  # noqa: F401

SUBSET_NAMES = {"m": "C3-M", "d": "C3-D"}
MIN_CHOICES = 2
CONTEXT_SEPARATOR = "\n"  # C3's and CLUE's baselines: "\n".join(context lines)
SEARCHED_FOLDERS = ("", "c3", "data")


class C3DataError(race.RaceDataError):
    """A C3 file is missing or malformed; the message names the file, document and question."""


@dataclasses.dataclass(frozen=True)
class C3Example:
    """One question of a C3 document, with its raw texts.

    example_id: the document id (e.g. "11-67"); question_index: 0-based position
    of the question in the document; subset: "m" or "d"; context: the lines
    joined with "\\n"; options: 2-4 texts; label: index of the answer, or None;
    question_id: the question's own `id` field (CLUE's test files), else None;
    source: "path: document N (id X) question Q".
    """

    example_id: str
    question_index: int
    subset: str
    context: str
    question: str
    options: Tuple[str, ...]
    label: Optional[int]
    question_id: Optional[object]
    source: str

    @property
    def level(self) -> str:
        return self.subset

    @property
    def submission_id(self):
        """The id written to c3_predict.json: the question's `id` when the file has one,
        else "<document id>-<question index>"."""
        if self.question_id is not None:
            return self.question_id
        return f"{self.example_id}-{self.question_index}"


def split_files(data_dir: str, split: str) -> List[Tuple[str, str]]:
    """[(subset, path)] of `split` under data_dir (see the module docstring)."""
    import tensorflow as tf

    if split not in race.SPLITS:
        raise ValueError(f"unknown C3 split {split!r}; expected one of {', '.join(race.SPLITS)}")
    tried = []
    for folder in SEARCHED_FOLDERS:
        directory = os.path.join(data_dir, folder) if folder else data_dir
        found = [(subset, os.path.join(directory, f"c3-{subset}-{split}.json"))
                 for subset in SUBSETS]
        found = [(s, p) for s, p in found if tf.io.gfile.exists(p)]
        tried.append(directory)
        if found:
            if len(found) < len(SUBSETS):
                missing = [SUBSET_NAMES[s] for s in SUBSETS if s not in dict(found)]
                logging.warning("C3 %s: no %s file in %s; reading %s only", split,
                                ", ".join(missing), directory,
                                ", ".join(SUBSET_NAMES[s] for s, _ in found))
            return found
    raise C3DataError(f"no c3-m-{split}.json or c3-d-{split}.json in "
                      f"{' or '.join(tried)} (--data_dir)")


def _string(value, what: str, where: str) -> str:
    if not isinstance(value, str):
        raise C3DataError(f"{where}: {what} must be a string, got {type(value).__name__}")
    return value


def examples_from_document(document, subset: str, where: str) -> List[C3Example]:
    """Validates one `[lines, questions, id]` document; one `C3Example` per question.
    `where` is "path: document N", used in error messages."""
    if not isinstance(document, list) or len(document) != 3:
        raise C3DataError(f"{where}: expected [context lines, questions, id], got "
                          f"{json.dumps(document, ensure_ascii=False)[:80]}")
    lines, questions, doc_id = document
    if not isinstance(doc_id, (str, int)):
        raise C3DataError(f"{where}: the document id must be a string, got "
                          f"{type(doc_id).__name__}")
    doc_id = str(doc_id)
    where = f"{where} (id {doc_id})"
    if not isinstance(lines, list) or not lines:
        raise C3DataError(f"{where}: the context must be a non-empty list of lines")
    context = CONTEXT_SEPARATOR.join(_string(line, "every context line", where) for line in lines)
    if not isinstance(questions, list) or not questions:
        raise C3DataError(f"{where}: expected a non-empty list of questions")
    examples = []
    for index, item in enumerate(questions):
        at = f"{where} question {index}"
        if not isinstance(item, dict):
            raise C3DataError(f"{at}: expected an object with question, choice, answer")
        for key in ("question", "choice"):
            if key not in item:
                raise C3DataError(f"{at}: missing field {key!r}")
        question = _string(item["question"], "the question", at)
        choices = item["choice"]
        if not isinstance(choices, list) or not MIN_CHOICES <= len(choices) <= NUM_CHOICES:
            got = len(choices) if isinstance(choices, list) else type(choices).__name__
            raise C3DataError(f"{at}: expected {MIN_CHOICES} to {NUM_CHOICES} choices, got {got}")
        for choice in choices:
            # "" is how the SavedModel marks an absent option, so a real one may not be empty.
            if not _string(choice, "every choice", at).strip():
                raise C3DataError(f"{at}: a choice is empty")
        label = None
        if "answer" in item:
            answer = _string(item["answer"], "the answer", at)
            if answer not in choices:
                raise C3DataError(f"{at}: the answer {answer!r} is not one of its choices "
                                  f"{json.dumps(choices, ensure_ascii=False)}")
            # The baseline's loop keeps the last matching choice.
            label = len(choices) - 1 - choices[::-1].index(answer)
            if choices.count(answer) > 1:
                logging.warning("%s: the answer %r appears %d times among the choices; the "
                                "last is the label, as C3's baseline", at, answer,
                                choices.count(answer))
        examples.append(C3Example(
            example_id=doc_id, question_index=index, subset=subset, context=context,
            question=question, options=tuple(choices), label=label,
            question_id=item.get("id"), source=at))
    return examples


def read_file(path: str, subset: str) -> List[C3Example]:
    """Every question of one C3 JSON file."""
    import tensorflow as tf

    with tf.io.gfile.GFile(path, "rb") as handle:
        raw = handle.read()
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise C3DataError(f"{path}: not UTF-8 ({err})") from None
    except json.JSONDecodeError as err:
        raise C3DataError(f"{path}:{err.lineno}: not valid JSON ({err.msg} at column "
                          f"{err.colno})") from None
    if not isinstance(data, list):
        raise C3DataError(f"{path}: expected a JSON list of documents, got "
                          f"{type(data).__name__}")
    examples = []
    for position, document in enumerate(data):
        examples.extend(examples_from_document(document, subset,
                                               f"{path}: document {position}"))
    return examples


def read_examples(data_dir: str, split: str) -> List[C3Example]:
    """Every question of the split: C3-M's file, then C3-D's."""
    examples: List[C3Example] = []
    for subset, path in split_files(data_dir, split):
        found = read_file(path, subset)
        counts = np.bincount([len(e.options) for e in found], minlength=NUM_CHOICES + 1)
        logging.info("C3 %s: read %s: %d questions (%s)", split, path, len(found),
                     ", ".join(f"{int(counts[n])} with {n} options"
                               for n in range(MIN_CHOICES, NUM_CHOICES + 1)))
        examples.extend(found)
    if not examples:
        raise C3DataError(f"{data_dir}: no C3 question in the {split} split (--data_dir)")
    return examples
