"""C3 multiple-choice reading comprehension (Chinese): reading and features for run_race.py.

Data (nlpdata/c3, also in CLUE): `c3-m-{train,dev,test}.json` (C3-M, mixed
genre) and `c3-d-{...}.json` (C3-D, dialogue), each one JSON list of
documents `[[context lines], [{"question", "choice" (2-4 options),
"answer" (the text of one option; absent for unlabelled data), "id"
(optional, CLUE's question id)}], document id]`. `--data_dir` holds the files
or a folder `c3/` or `data/` holding them (the first of the three that has any
file of the split). A split may have only one of the two subsets (a warning
names the one missing). Every question is one example. Malformed input raises
`C3DataError` naming the file, the document (position and id) and the question.

Features, as C3's own baseline (nlpdata/c3 bert/run_classifier.py, copied by
CLUE's run_c3.py): the context lines are joined with "\\n"; for each option the
row is `[CLS] context [SEP] question [SEP] option [SEP]` (segment 0 up to and
including the first [SEP], 1 after), where context, option and question are
cut to fit `max_seq_length - 4` tokens by the baseline's `_truncate_seq_tuple`
(one token at a time from the end of the longest; ties cut the context, then
the option, then the question). Texts go through `tokenizer.preprocess` (the
identity for WordPiece, `preprocess_text` for SentencePiece). Questions with
fewer than 4 options are padded to 4 with empty options, whose rows are the
baseline's `[CLS] context [SEP] question [SEP] [SEP]`, and `choice_mask`
marks them 0: the model masks their logits (`AlbertMultipleChoice`'s `choice_mask`) in the
loss, the metrics, the predictions and the SavedModel, so they can never be
chosen. An answer is the index of its text among the choices (the first one
when a text appears twice).

TFRecords: RACE's schema (`albert_tf.tasks.multiple_choice.race`) with `level_ids` 0 = C3-M,
1 = C3-D, plus `choice_mask` int64 [4].
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from absl import logging

from albert_tf.errors import UserValueError
from albert_tf.tasks.multiple_choice import race

SUBSETS = ("m", "d")  # level_ids 0 and 1: C3-M (mixed genre), C3-D (dialogue)
SUBSET_NAMES = {"m": "C3-M", "d": "C3-D"}
NUM_CHOICES = race.NUM_CHOICES
MIN_CHOICES = 2
CONTEXT_SEPARATOR = "\n"  # C3's and CLUE's baselines: "\n".join(context lines)
CACHE_FORMAT = "albert_tf.c3.v1"
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


# --- features ------------------------------------------------------------------------------------


def validate_length(max_seq_length: int) -> None:
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


def choice_ids(context_ids: Sequence[int], question_ids: Sequence[int],
               option_ids: Sequence[int], max_seq_length: int, cls_id: int, sep_id: int
               ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One option's (input_ids, input_mask, segment_ids), int32 [S] each:
    `[CLS] context [SEP] question [SEP] option [SEP]`, truncated as the baseline."""
    n_context, n_option, n_question = truncate_lengths(
        [len(context_ids), len(option_ids), len(question_ids)], max_seq_length - 4)
    tokens = ([cls_id] + list(context_ids[:n_context]) + [sep_id]
              + list(question_ids[:n_question]) + [sep_id] + list(option_ids[:n_option])
              + [sep_id])
    return race.pack_row(tokens, n_context + 2, max_seq_length)


def padded_options(options: Sequence[str]) -> List[str]:
    """The options padded to 4 with empty texts (their rows are masked)."""
    return list(options) + [""] * (NUM_CHOICES - len(options))


def featurize(examples: Sequence[C3Example], tokenizer, max_seq_length: int,
              order: Optional[Sequence[int]] = None, chunk_size: int = 512,
              log_examples: int = 1) -> Iterator[Dict[str, np.ndarray]]:
    """Features of `examples[i]` for each i of `order` (default: all, in order).

    Yields dicts of int32 arrays `input_ids`, `input_mask`, `segment_ids` [4, S],
    `choice_mask` [4] (1 for a real option) and scalars `label_ids` (0 when
    unlabelled), `is_real_example`, `level_ids` (0 = C3-M, 1 = C3-D),
    `example_index` (= i). `tokenizer` is either kind (`tokenization.Tokenizer`).
    """
    validate_length(max_seq_length)
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
            rows = [choice_ids(context_ids[example.context], ids[base], ids[base + 1 + c],
                               max_seq_length, cls_id, sep_id) for c in range(NUM_CHOICES)]
            features = race.example_features(
                rows, example.label, SUBSETS.index(example.subset), index,
                choice_mask=(np.arange(NUM_CHOICES) < len(example.options)).astype(np.int32))
            if start + offset < log_examples:
                _log_example(example, features, tokenizer)
            yield features


def _log_example(example: C3Example, features, tokenizer) -> None:
    logging.info("*** Example *** %s", example.source)
    for choice in range(NUM_CHOICES):
        length = int(features["input_mask"][choice].sum())
        tokens = tokenizer.convert_ids_to_tokens(features["input_ids"][choice][:length])
        masked = "" if features["choice_mask"][choice] else " (padding, masked)"
        logging.info("choice %d%s: %s", choice, masked, " ".join(tokens))
    logging.info("label: %s", example.label)


def examples_fingerprint(examples: Iterable[C3Example]) -> str:
    """sha256 over every field that features depend on (texts, labels, subsets, order)."""
    digest = hashlib.sha256()
    for e in examples:
        digest.update(json.dumps([e.example_id, e.question_index, e.subset, e.context,
                                  e.question, list(e.options), e.label],
                                 ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()


def prepare_cache(path: str, examples: Sequence[C3Example], tokenizer, max_seq_length: int,
                  shuffle_seed: Optional[int] = None, owned: bool = False) -> Dict:
    """Writes the TFRecord `path` (+ `path.json`) unless a matching cache exists
    (as `race.prepare_cache`)."""
    from albert_tf import tokenization

    identity = {"format": CACHE_FORMAT, "max_seq_length": max_seq_length,
                "do_lower_case": tokenizer.do_lower_case,
                "vocabulary": tokenization.vocabulary_fingerprint(tokenizer),
                "shuffle_seed": shuffle_seed, "num_examples": len(examples),
                "examples_sha256": examples_fingerprint(examples)}
    return race.write_cache(
        path, identity, len(examples), shuffle_seed,
        lambda order: featurize(examples, tokenizer, max_seq_length, order), what="C3",
        owned=owned)


def accuracy_by_subset(examples: Sequence[C3Example], predictions: Sequence[int]
                       ) -> Dict[str, float]:
    """Accuracy over both subsets and each one present (labelled examples only).
    Keys: accuracy, accuracy_m, accuracy_d, examples, examples_m, examples_d."""
    return race.accuracy_by_level(examples, predictions, SUBSETS)
