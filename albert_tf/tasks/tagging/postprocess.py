"""Prediction files of token classification, written and scored.

  predictions.txt       column formats (CoNLL-2003, MSRA, custom columns): one line per
                        word, `word gold predicted` separated by single spaces (`word
                        predicted` for unlabelled data), a blank line after each
                        sentence, no -DOCSTART- lines: conlleval's input. Tags are in the
                        data file's own scheme (IOB1 for CoNLL-2003's files). White space
                        inside a word (MSRA has space characters as words) is written as
                        `_`, so that every line keeps three fields.
  cluener_predict.json  CLUENER: CLUE's submission lines `{"id": ..., "label": {type:
                        {entity text: [[start, end]]}}}` with inclusive ends, one per
                        input line, in order.
  entities.jsonl        custom JSON lines: `{"id", "text", "entities": [{"type", "start",
                        "end", "text"}]}` with exclusive ends.

Which one a data set writes is its record's `prediction_format` (`datasets`): a
`PredictionFormat` (the file's name, its text, the predicted tags read back) or, for custom
files, `ByExtension` (entities.jsonl for JSON lines data, else predictions.txt).
`score_prediction_file` reads a predictions file back against the gold data file
(what `python -m albert_tf.tasks.tagging evaluate` runs).
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Callable, Dict, List, Sequence

from albert_tf import fileio
from albert_tf.tasks import registry
from albert_tf.tasks.tagging import metrics, readers, schemes
from albert_tf.tasks.tagging.readers import TaggedSentence, TaggingDataError

PREDICTIONS_FILE = "predictions.txt"
CLUENER_FILE = "cluener_predict.json"
ENTITIES_FILE = "entities.jsonl"


def prediction_format(task_name: str, data_path: str) -> "PredictionFormat":
    """The predictions file format of `task_name`'s data set for the data file at
    `data_path` (see the module docstring)."""
    return registry.get(readers.FAMILY, task_name).settings["prediction_format"].for_file(
        data_path)


def prediction_file_name(task_name: str, data_path: str) -> str:
    """The predictions file a task writes (see the module docstring)."""
    return prediction_format(task_name, data_path).file_name


def column_word(word: str) -> str:
    """A word as predictions.txt writes it: white space (which would add fields) as `_`."""
    return "".join("_" if char.isspace() else char for char in word) or "_"


def column_lines(sentences: Sequence[TaggedSentence], predicted: Sequence[Sequence[str]],
                 scheme: str) -> str:
    """predictions.txt's text; `predicted` holds IOB2 tags, written in `scheme`."""
    lines: List[str] = []
    for sentence, tags in zip(sentences, predicted):
        tags = schemes.convert(tags, "iob2", scheme)
        gold = sentence.tags
        for i, word in enumerate(sentence.words):
            word = column_word(word)
            lines.append(f"{word} {gold[i]} {tags[i]}" if gold is not None
                         else f"{word} {tags[i]}")
        lines.append("")
    return "\n".join(lines) + ("\n" if lines else "")


def entity_records(sentences: Sequence[TaggedSentence], predicted: Sequence[Sequence[str]]
                   ) -> List[Dict]:
    """Per sentence: the predicted entities with their character spans in its text."""
    records = []
    for index, (sentence, tags) in enumerate(zip(sentences, predicted)):
        entities = []
        for entity in schemes.entities(tags):
            start, end = sentence.char_span(entity.start, entity.end)
            entities.append({"type": entity.type, "start": start, "end": end,
                             "text": sentence.text[start:end]})
        example_id = sentence.example_id if sentence.example_id is not None else index
        records.append({"id": example_id, "text": sentence.text, "entities": entities})
    return records


def cluener_lines(records: Sequence[Dict]) -> str:
    """cluener_predict.json's text from `entity_records` (inclusive ends, as CLUE wants)."""
    lines = []
    for record in records:
        label: Dict[str, Dict[str, List[List[int]]]] = {}
        for entity in record["entities"]:
            label.setdefault(entity["type"], {}).setdefault(entity["text"], []).append(
                [entity["start"], entity["end"] - 1])
        lines.append(json.dumps({"id": record["id"], "label": label}, ensure_ascii=False))
    return "".join(line + "\n" for line in lines)


def write_predictions(output_dir: str, task_name: str, data_path: str,
                      sentences: Sequence[TaggedSentence], predicted: Sequence[Sequence[str]],
                      scheme: str) -> str:
    """Writes the task's predictions file (atomically) into output_dir; returns its path.

    predicted: IOB2 tags per word per sentence; `scheme` is the data file's own.
    """
    form = prediction_format(task_name, data_path)
    path = os.path.join(output_dir, form.file_name)
    fileio.atomic_write_text(path, form.text(sentences, predicted, scheme))
    return path


def cluener_text(sentences: Sequence[TaggedSentence], predicted: Sequence[Sequence[str]],
                 scheme: str) -> str:
    """cluener_predict.json's text (`scheme` unused: entities have none)."""
    return cluener_lines(entity_records(sentences, predicted))


def entities_text(sentences: Sequence[TaggedSentence], predicted: Sequence[Sequence[str]],
                  scheme: str) -> str:
    """entities.jsonl's text (`scheme` unused: entities have none)."""
    return "".join(json.dumps(record, ensure_ascii=False) + "\n"
                   for record in entity_records(sentences, predicted))


def _predicted_from_columns(path: str, gold: Sequence[TaggedSentence], scheme: str
                            ) -> List[List[str]]:
    """The predicted column of predictions.txt (in the data file's `scheme`) as IOB2 tags,
    checked word by word against the gold file."""
    blocks: List[List[List[str]]] = [[]]
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            fields = line.rstrip("\n").split(" ")
            if fields == [""]:
                if blocks[-1]:
                    blocks.append([])
                continue
            if len(fields) != 3:
                raise TaggingDataError(f"{path}:{line_no}: expected `word gold predicted` "
                                       f"separated by single spaces, got {len(fields)} fields")
            blocks[-1].append(fields + [str(line_no)])
    blocks = [block for block in blocks if block]
    if len(blocks) != len(gold):
        raise TaggingDataError(f"{path}: {len(blocks)} sentences, but the data file has "
                               f"{len(gold)}")
    predicted = []
    for block, sentence in zip(blocks, gold):
        words = [fields[0] for fields in block]
        expected = [column_word(word) for word in sentence.words]
        if words != expected:
            first = next((i for i, (a, b) in enumerate(zip(words, expected)) if a != b),
                         min(len(words), len(expected)))
            line_no = block[min(first, len(block) - 1)][3]
            raise TaggingDataError(f"{path}:{line_no}: the words differ from the data file's "
                                   f"sentence at {sentence.source}")
        for fields in block:
            _check_tag(fields[2], path, fields[3])
        try:
            predicted.append(schemes.to_iob2([fields[2] for fields in block], scheme))
        except ValueError as err:  # e.g. S-PER against IOB1 gold
            raise TaggingDataError(f"{path}:{block[0][3]}: {err} (the data file's tags are "
                                   f"{scheme})") from None
    return predicted


def _check_tag(tag: str, path: str, line_no) -> None:
    try:
        schemes.split_tag(tag)
    except ValueError as err:
        raise TaggingDataError(f"{path}:{line_no}: {err}") from None


def _predicted_from_entities(path: str, gold: Sequence[TaggedSentence], inclusive: bool
                             ) -> List[List[str]]:
    """Per-word IOB2 tags of a CLUENER / entities.jsonl predictions file (one line per
    gold sentence, in order)."""
    with open(path, encoding="utf-8") as handle:
        lines = [line for line in handle if line.strip()]
    if len(lines) != len(gold):
        raise TaggingDataError(f"{path}: {len(lines)} lines, but the data file has "
                               f"{len(gold)} sentences")
    predicted = []
    for line_no, (line, sentence) in enumerate(zip(lines, gold), start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise TaggingDataError(f"{path}:{line_no}: not valid JSON ({err.msg})") from err
        try:
            spans = _record_spans(record, inclusive)
        except (AttributeError, KeyError, TypeError, ValueError):
            shape = ('{"label": {type: {entity text: [[start, end]]}}}' if inclusive
                     else '{"entities": [{"type", "start", "end"}]}')
            raise TaggingDataError(f"{path}:{line_no}: expected {shape}") from None
        starts = {start: i for i, (start, _) in enumerate(sentence.offsets)}
        ends = {end: i + 1 for i, (_, end) in enumerate(sentence.offsets)}
        chunks = []
        for kind, start, end, text in sorted(set(spans), key=lambda span: span[1:3]):
            if start not in starts or end not in ends:
                raise TaggingDataError(f"{path}:{line_no}: entity {kind} [{start}, {end}) does "
                                       "not begin and end at word boundaries of the text")
            if text is not None and sentence.text[start:end] != text:
                raise TaggingDataError(f"{path}:{line_no}: entity {kind} {text!r} [{start}, "
                                       f"{end}) is {sentence.text[start:end]!r} in the text")
            chunks.append((kind, starts[start], ends[end]))
        try:
            predicted.append(schemes.from_entities(chunks, len(sentence.words), "iob2"))
        except ValueError as err:  # overlapping entities: flat tags cannot hold them
            raise TaggingDataError(f"{path}:{line_no}: {err}") from None
    return predicted


def _record_spans(record: Dict, inclusive: bool):
    """(type, start, end exclusive, entity text or None) of a predictions line (malformed
    shapes raise)."""
    if inclusive:  # CLUENER: {"label": {type: {text: [[start, end]]}}}
        return [(str(kind), int(start), int(end) + 1, str(text))
                for kind, found in (record.get("label") or {}).items()
                for text, spans in found.items() for start, end in spans]
    return [(str(e["type"]), int(e["start"]), int(e["end"]), e.get("text"))
            for e in record.get("entities") or []]


def score_prediction_file(task_name: str, data_file: str, prediction_file: str,
                          **reader_options) -> Dict:
    """Entity-level figures (`metrics.entity_scores`) of a predictions file against the
    gold data file it was predicted from."""
    gold = readers.read_sentences(task_name, data_file, **reader_options)
    if any(sentence.tags is None for sentence in gold):
        raise TaggingDataError(f"{data_file}: unlabelled data: nothing to score against")
    scheme = schemes.detect_scheme([s.tags for s in gold])
    predicted = prediction_format(task_name, data_file).read(prediction_file, gold, scheme)
    gold_tags = [schemes.to_iob2(s.tags, scheme) for s in gold]
    return metrics.entity_scores(gold_tags, predicted)


def _predicted_from_cluener(path: str, gold: Sequence[TaggedSentence], scheme: str
                            ) -> List[List[str]]:
    return _predicted_from_entities(path, gold, inclusive=True)


def _predicted_from_entities_jsonl(path: str, gold: Sequence[TaggedSentence], scheme: str
                                   ) -> List[List[str]]:
    return _predicted_from_entities(path, gold, inclusive=False)


@dataclasses.dataclass(frozen=True)
class PredictionFormat:
    """One predictions file: its name in output_dir, `text(sentences, predicted IOB2
    tags, the data file's scheme)` -> its contents, and `read(path, gold sentences,
    scheme)` -> the predicted IOB2 tags per word (checked against the gold)."""

    file_name: str
    text: Callable[[Sequence[TaggedSentence], Sequence[Sequence[str]], str], str]
    read: Callable[[str, Sequence[TaggedSentence], str], List[List[str]]]

    def for_file(self, data_path: str) -> "PredictionFormat":
        return self


COLUMNS = PredictionFormat(PREDICTIONS_FILE, column_lines, _predicted_from_columns)
CLUENER = PredictionFormat(CLUENER_FILE, cluener_text, _predicted_from_cluener)
ENTITIES = PredictionFormat(ENTITIES_FILE, entities_text, _predicted_from_entities_jsonl)


@dataclasses.dataclass(frozen=True)
class ByExtension:
    """The format by the data file's extension: `json` for JSON lines data, else
    `columns` (custom files)."""

    json: PredictionFormat = ENTITIES
    columns: PredictionFormat = COLUMNS

    def for_file(self, data_path: str) -> PredictionFormat:
        return self.json if readers.is_json_file(data_path) else self.columns
