"""RACE multiple-choice reading comprehension: reading, features, TFRecord caches.

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

Features, as the original's race_utils: every text is normalised with
`preprocess_text(text, lower=do_lower_case)`; for each of the 4 options the
question+option text ("qa") is the question with every "_" replaced by the
option, else question + " " + option; per option the layout is
`[CLS] article [SEP] qa [SEP]` (segment 0 up to and including the first [SEP],
1 after), where qa keeps its *last* `max_qa_length` tokens and the article is
cut at the end to fit `max_seq_length`. Example order is the original's:
levels middle then high; files in numeric order (the original uses
`os.listdir` order, which is arbitrary).

TFRecords (one `tf.train.Example` per question; S = max_seq_length, C = 4):
  input_ids, input_mask, segment_ids   int64 [C * S]  (the original's flattened layout)
  label_ids                            int64 [1]      0 = A ... 3 = D (0 when unlabelled)
  is_real_example                      int64 [1]      0 for batch padding
  level_ids                            int64 [1]      0 = middle, 1 = high (ours)
  example_index                        int64 [1]      position in the example list (ours)
A description `<file>.json` records the settings and a fingerprint of the examples
so a cache is reused only when it matches (`prepare_cache`, `finetuning.feature_cache`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from absl import logging

from albert_tf.errors import UserError, UserValueError
from albert_tf.tokenization import preprocess_text

LABELS = ("A", "B", "C", "D")
NUM_CHOICES = len(LABELS)
LEVELS = ("middle", "high")
SPLITS = ("train", "dev", "test")
CACHE_FORMAT = "albert_tf.race.v1"
TRAIN_SHUFFLE_SEED = 12345


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


# --- features ------------------------------------------------------------------------------------


def validate_lengths(max_seq_length: int, max_qa_length: int) -> None:
    """The original's truncation needs room for [CLS], [SEP], [SEP] and the whole qa."""
    if max_qa_length <= 0:
        raise UserValueError(f"--max_qa_length must be positive, got {max_qa_length}")
    if max_qa_length > max_seq_length - 3:
        raise UserValueError(
            f"--max_qa_length {max_qa_length} leaves no room in --max_seq_length "
            f"{max_seq_length}: it must be at most max_seq_length - 3 = {max_seq_length - 3}")


def choice_ids(context_ids: Sequence[int], qa_ids: Sequence[int], max_seq_length: int,
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


def featurize(examples: Sequence[RaceExample], tokenizer, max_seq_length: int,
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
    validate_lengths(max_seq_length, max_qa_length)
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
            rows = [choice_ids(article_ids[example.article], qa_ids[offset * NUM_CHOICES + c],
                               max_seq_length, max_qa_length, cls_id, sep_id)
                    for c in range(NUM_CHOICES)]
            features = example_features(rows, example.label, LEVELS.index(example.level),
                                        index)
            if start + offset < log_examples:
                _log_example(example, features, tokenizer)
            yield features
        if (start // chunk_size) % 20 == 19:
            logging.info("RACE features: %d of %d examples", start + len(chunk), len(order))


def _log_example(example: RaceExample, features, tokenizer) -> None:
    logging.info("*** Example *** id %s question %d (%s)", example.example_id,
                 example.question_index, example.source)
    for choice in range(NUM_CHOICES):
        length = int(features["input_mask"][choice].sum())
        tokens = tokenizer.convert_ids_to_tokens(features["input_ids"][choice][:length])
        logging.info("choice %s: %s", LABELS[choice], " ".join(tokens))
    logging.info("label: %s", LABELS[example.label] if example.label is not None else None)


# --- TFRecord cache ------------------------------------------------------------------------------


def feature_spec(max_seq_length: int, choice_mask: bool = False):
    """The records' schema; `choice_mask` [4] is in C3's records only
    (`albert_tf.tasks.multiple_choice.c3`)."""
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


def examples_fingerprint(examples: Iterable[RaceExample]) -> str:
    """sha256 over every field that features depend on (texts, labels, levels, order)."""
    digest = hashlib.sha256()
    for e in examples:
        digest.update(json.dumps([e.example_id, e.question_index, e.level, e.article,
                                  e.question, list(e.options), e.label]).encode("utf-8"))
    return digest.hexdigest()


def cache_identity(examples: Sequence[RaceExample], tokenizer, max_seq_length: int,
                   max_qa_length: int, shuffle_seed: Optional[int]) -> Dict:
    """What a cache must match to be reused (the vocabulary: `spm_model_sha256` for a
    SentencePiece model, `vocabulary` for a WordPiece one)."""
    from albert_tf import tokenization

    identity = {"format": CACHE_FORMAT, "max_seq_length": max_seq_length,
                "max_qa_length": max_qa_length, "do_lower_case": tokenizer.do_lower_case}
    if tokenizer.kind == "sentencepiece":
        with open(tokenizer.vocab_file, "rb") as handle:
            identity["spm_model_sha256"] = hashlib.sha256(handle.read()).hexdigest()
    else:
        identity["vocabulary"] = tokenization.vocabulary_fingerprint(tokenizer)
    identity.update({"shuffle_seed": shuffle_seed, "num_examples": len(examples),
                     "examples_sha256": examples_fingerprint(examples)})
    return identity


def record_order(num_examples: int, shuffle_seed: Optional[int]) -> List[int]:
    """Example indices in the order they are written (shuffled for training)."""
    order = list(range(num_examples))
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(order)
    return order


def prepare_cache(path: str, examples: Sequence[RaceExample], tokenizer, max_seq_length: int,
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
                       lambda order: featurize(examples, tokenizer, max_seq_length,
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
    repeats, shuffles (100-record buffer, as the original) and drops the remainder. Otherwise the records are
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


def accuracy_by_level(examples: Sequence[RaceExample], predictions: Sequence[int],
                      levels: Sequence[str] = LEVELS) -> Dict[str, float]:
    """Accuracy over `all` and per level present (labelled examples only).

    Keys: accuracy, accuracy_middle, accuracy_high, examples, examples_middle, ...
    (C3: `levels` ("m", "d") give accuracy_m, accuracy_d, ...)
    """
    results: Dict[str, float] = {}
    groups = {"": list(range(len(examples)))}
    for level in levels:
        groups["_" + level] = [i for i, e in enumerate(examples) if e.level == level]
    for suffix, indices in groups.items():
        indices = [i for i in indices if examples[i].label is not None]
        if not indices:
            continue
        correct = sum(int(predictions[i]) == examples[i].label for i in indices)
        results["accuracy" + suffix] = correct / len(indices)
        results["examples" + suffix] = len(indices)
    return results

