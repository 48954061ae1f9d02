"""Named-entity data files: CoNLL-2003, CLUENER2020, MSRA and a custom format.

`read_sentences(task_name, path)` returns the file's sentences as `TaggedSentence`s
(words, one tag per word or None for unlabelled data, and "file:line" of the first
line); formats with a text (CLUENER, MSRA, custom JSON) also give the text and each
word's character offsets in it, so predicted tags map back to the text:
`text[start:end]` (end exclusive) is the entity. Tags are read as the file has them
(IOB1 or IOB2); `schemes.py` converts.

Formats (`task_name`):
  * `conll2003`: `word POS chunk NER`, 4 whitespace-separated columns; a blank line
    between sentences; `-DOCSTART-` lines are dropped. Files `eng.train`,
    `eng.testa`, `eng.testb` or `train.txt`, `valid.txt`, `test.txt`
    (`find_split_file`).
  * `cluener`: JSON lines `{"id": ..., "text": "...", "label": {type: {entity text:
    [[start, end], ...]}}}` with INCLUSIVE end offsets (`text[start:end + 1]` is the
    entity); test files have no "label" ("id" is optional). Words are the text's
    characters (every one, whitespace too, so tags stay one per character, as
    CLUENER's baseline reads them), tagged BIO (`B-name`, `I-name`, `O`).
  * `msra`: one character and its tag per line, separated by a tab (or, on a line
    without a tab, by spaces); a blank line between sentences. The text is the
    characters joined.
  * `custom`: by extension. `.json` / `.jsonl`: JSON lines `{"id"?: ..., "text":
    "...", "entities": [{"type": "PER", "start": 0, "end": 5, "text"?: "..."}]}`
    with EXCLUSIVE end offsets (`text[start:end]` is the entity; an entity's
    optional "text" is checked against it) and no "entities" in test files; words
    are split as BERT's BasicTokenizer splits (at whitespace; every CJK character
    and every punctuation character is a word), an entity must begin and end at
    word boundaries, and words are tagged BIO. Any other extension: a column file,
    `token_column` and `label_column` (0-based, negative from the end; defaults 0
    and -1) split by `delimiter` (default: runs of whitespace), a blank line between
    sentences, `-DOCSTART-` lines dropped; a file whose first line has a single
    column is unlabelled (tags None; every line must have one column).

Files are UTF-8 (a BOM is skipped; \\r\\n line ends are fine). Bad input is a
`TaggingDataError` with one line naming file:line, the problem and how many bad
lines the file has, all counted in one pass; nothing is returned from a file with
a bad line unless `skip_bad_lines=True`. Bad lines are: not UTF-8; in column files
the wrong number of columns or an empty tag; in JSON lines invalid JSON, a missing,
non-string or empty text, a malformed label, a span outside the text or not
matching its entity text, overlapping or nested entities (flat BIO tags cannot hold
them), a labelled line in an unlabelled file or the reverse (the first line
decides). With `skip_bad_lines=True` a bad JSON line is skipped, and in a column
file the whole sentence holding a bad line is dropped (a sentence with a line
missing would be read with wrong tags or words); the counts are logged in one
line and kept on the result (`TaggedSentences.skipped_lines`,
`.dropped_sentences`).

Pure Python: TensorFlow is imported (inside a function) only to read a path with
a scheme (gs://, ...).
"""
from __future__ import annotations

import collections
import dataclasses
import json
import os
from typing import (Callable, Iterable, Iterator, List, Optional, Sequence, Tuple,
                    Union)

from absl import logging

from albert_tf.errors import UserError, UserValueError
from albert_tf.tasks import registry
from albert_tf.tokenization.wordpiece import is_cjk_char, is_wordpiece_punctuation

FAMILY = "tagging"
# The data sets' names (`datasets` registers them in this order): --task_name's choices.
TASKS = ("conll2003", "cluener", "msra", "custom")
SPLITS = ("train", "dev", "test")
DOCSTART = "-DOCSTART-"
CONLL_COLUMNS = ("word", "POS", "chunk", "NER")
JSON_EXTENSIONS = (".json", ".jsonl")


def __getattr__(name: str):
    """SPLIT_FILE_NAMES, the file names of every task by task name, now the data sets'
    `split_files` (`datasets`), read lazily: datasets.py imports this module."""
    if name == "SPLIT_FILE_NAMES":
        return {task: registry.get(FAMILY, task).settings["split_files"]
                for task in registry.names(FAMILY)}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class TaggingDataError(UserError, ValueError):
    """A tagging data file is missing or has bad lines; the message names file:line."""


@dataclasses.dataclass(frozen=True)
class EntitySpan:
    """An entity of a text: `text[start:end]` (end exclusive) of type `type`."""

    type: str
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class TaggedSentence:
    """One sentence of a tagging file.

    words: the words (characters for CLUENER and MSRA).
    tags: one tag per word, as the file has them; None for unlabelled data.
    source: "path:line" of the sentence's first line.
    text: the text the words come from (CLUENER, MSRA, custom JSON), else None.
    offsets: per word, (start, end) with `text[start:end] == word` (end exclusive),
        where there is a text.
    spans: the entities as the file gives them (CLUENER, custom JSON; end exclusive).
    example_id: the line's "id" (JSON formats), e.g. for CLUENER's prediction file.
    """

    words: List[str]
    tags: Optional[List[str]]
    source: str
    text: Optional[str] = None
    offsets: Optional[List[Tuple[int, int]]] = None
    spans: Optional[List[EntitySpan]] = None
    example_id: Optional[Union[int, str]] = None

    def char_span(self, first_word: int, end_word: int) -> Tuple[int, int]:
        """(start, end) in `text` of words `first_word` to `end_word` (exclusive): where a
        predicted entity lies in the text (`text[start:end]`)."""
        if self.offsets is None:
            raise ValueError(f"{self.source}: this format has no text to map words into")
        return self.offsets[first_word][0], self.offsets[end_word - 1][1]


class TaggedSentences(list):
    """The sentences of a file (a list of `TaggedSentence`), with what
    `skip_bad_lines=True` left out: `skipped_lines` bad lines, and in column files
    `dropped_sentences` sentences that held them."""

    def __init__(self, sentences: Iterable[TaggedSentence] = (), *, path: str = "",
                 skipped_lines: int = 0, dropped_sentences: int = 0):
        super().__init__(sentences)
        self.path = path
        self.skipped_lines = skipped_lines
        self.dropped_sentences = dropped_sentences


# --- the entry points ----------------------------------------------------------------------------


def read_sentences(task_name: str, path: str, *, skip_bad_lines: bool = False,
                   token_column: Optional[int] = None, label_column: Optional[int] = None,
                   delimiter: Optional[str] = None) -> TaggedSentences:
    """The sentences of one file of `task_name` (see the module docstring).

    `token_column`, `label_column` and `delimiter` apply to custom column files only
    (defaults 0, -1 and runs of whitespace). Bad lines raise `TaggingDataError`,
    or with `skip_bad_lines=True` are skipped and counted.
    """
    data_set = _data_set(task_name)
    column_options = {"token_column": token_column, "label_column": label_column,
                      "delimiter": delimiter}
    given = {name: value for name, value in column_options.items() if value is not None}
    if given and (not data_set.settings["column_options"] or is_json_file(path)):
        what = (f"{path} is read as JSON lines" if data_set.settings["column_options"]
                else f"--task_name={task_name} has a fixed layout")
        raise UserValueError(f"{', '.join('--' + name for name in given)}: for custom column "
                             f"files only ({what})")
    return data_set.reader(path, skip_bad_lines=skip_bad_lines, **given)


def _data_set(task_name: str) -> registry.DataSet:
    """The tagging data set `task_name` (its record in `datasets`); UserValueError naming
    the known ones."""
    if task_name not in registry.names(FAMILY):
        raise UserValueError(f"unknown tagging task {task_name!r}; expected one of "
                             f"{', '.join(registry.names(FAMILY))}")
    return registry.get(FAMILY, task_name)


def read_custom(path: str, *, skip_bad_lines: bool = False, token_column: Optional[int] = None,
                label_column: Optional[int] = None,
                delimiter: Optional[str] = None) -> TaggedSentences:
    """A custom file by its extension: JSON lines (`read_custom_json`, which takes no
    column options) or a column file (`read_custom_columns`; the token column 0, the
    label column -1 and runs of whitespace unless given)."""
    if is_json_file(path):
        return read_custom_json(path, skip_bad_lines=skip_bad_lines)
    return read_custom_columns(path, skip_bad_lines=skip_bad_lines,
                               token_column=0 if token_column is None else token_column,
                               label_column=-1 if label_column is None else label_column,
                               delimiter=delimiter)


def read_conll2003(path: str, *, skip_bad_lines: bool = False) -> TaggedSentences:
    """CoNLL-2003: `word POS chunk NER` lines; words and NER tags."""
    return _read_column_file(path, _conll_fields, skip_bad_lines)


def read_msra(path: str, *, skip_bad_lines: bool = False) -> TaggedSentences:
    """MSRA: `character<TAB>tag` lines; the text is the characters joined."""
    return _read_column_file(path, _msra_fields, skip_bad_lines, with_text=True)


def read_custom_columns(path: str, *, skip_bad_lines: bool = False, token_column: int = 0,
                        label_column: int = -1,
                        delimiter: Optional[str] = None) -> TaggedSentences:
    """A column file: the word in `token_column`, the tag in `label_column`, fields
    split by `delimiter` (None: runs of whitespace). A first line of one column:
    unlabelled."""
    if delimiter == "":
        raise UserValueError("--delimiter must not be empty (leave it unset for whitespace)")
    if token_column == label_column:
        raise UserValueError(f"--token_column and --label_column are both {token_column}")

    labelled: Optional[bool] = None  # the first line decides: one column is unlabelled

    def fields(line: str) -> Tuple[str, Optional[str]]:
        nonlocal labelled
        if delimiter is None:
            values = line.split()
        else:
            values = [field.strip() for field in line.split(delimiter)]
        if labelled is None:
            labelled = len(values) > 1 or token_column not in (0, -1)
        if not labelled:
            if len(values) > 1:
                raise _BadLine("more than one column in an unlabelled file",
                               f"found {len(values)}; the first line has one")
            return values[0], None
        token, label = _column(values, token_column), _column(values, label_column)
        if token is None or label is None or token == label:
            raise _BadLine("too few columns", f"found {len(values)}; the token column is "
                           f"{token_column} and the label column {label_column}")
        if not values[token]:
            raise _BadLine("empty word")
        if not values[label]:
            raise _BadLine("empty tag")
        return values[token], values[label]

    return _read_column_file(path, fields, skip_bad_lines)


def read_cluener(path: str, *, skip_bad_lines: bool = False) -> TaggedSentences:
    """CLUENER2020 JSON lines; one word and one BIO tag per character."""

    def sentence(obj: dict, source: str, labelled: bool) -> TaggedSentence:
        text = _text_field(obj)
        spans = _cluener_spans(obj.get("label"), text) if labelled else None
        offsets = [(i, i + 1) for i in range(len(text))]
        return TaggedSentence(words=list(text), tags=_bio_tags(offsets, spans), source=source,
                              text=text, offsets=offsets, spans=spans,
                              example_id=_example_id(obj))

    return _read_json_lines(path, "label", sentence, skip_bad_lines)


def read_custom_json(path: str, *, skip_bad_lines: bool = False) -> TaggedSentences:
    """Custom JSON lines with `entities` [{"type", "start", "end"}], end EXCLUSIVE;
    words split as BERT's BasicTokenizer does (`split_words`), tagged BIO."""

    def sentence(obj: dict, source: str, labelled: bool) -> TaggedSentence:
        text = _text_field(obj)
        offsets = split_words(text)
        spans = _custom_spans(obj.get("entities"), text, offsets) if labelled else None
        return TaggedSentence(words=[text[s:e] for s, e in offsets],
                              tags=_bio_tags(offsets, spans), source=source, text=text,
                              offsets=offsets, spans=spans, example_id=_example_id(obj))

    return _read_json_lines(path, "entities", sentence, skip_bad_lines)


def split_words(text: str) -> List[Tuple[int, int]]:
    """(start, end) of each word of `text` as BERT's BasicTokenizer splits it: at
    whitespace, with every CJK character and every punctuation character a word."""
    offsets: List[Tuple[int, int]] = []
    start = None
    for i, char in enumerate(text):
        alone = is_cjk_char(ord(char)) or is_wordpiece_punctuation(char)
        if start is not None and (char.isspace() or alone):
            offsets.append((start, i))
            start = None
        if alone:
            offsets.append((i, i + 1))
        elif start is None and not char.isspace():
            start = i
    if start is not None:
        offsets.append((start, len(text)))
    return offsets


def label_set(sentences: Iterable[TaggedSentence]) -> List[str]:
    """The tags present in the labelled sentences: "O" first, then by entity type and
    prefix (B, I, E, S; e.g. O, B-LOC, I-LOC, B-PER, I-PER)."""
    prefix_order = {"B": 0, "I": 1, "E": 2, "S": 3}

    def key(tag: str):
        if tag == "O":
            return (0, "", 0, tag)
        prefix, dash, entity_type = tag.partition("-")
        if not dash:
            return (1, tag, -1, tag)
        return (1, entity_type, prefix_order.get(prefix, len(prefix_order)), tag)

    return sorted({tag for sentence in sentences if sentence.tags for tag in sentence.tags},
                  key=key)


def find_split_file(data_dir: str, split: str, task_name: str = "conll2003") -> str:
    """The file of `split` ("train", "dev" or "test") of `task_name` in `data_dir`:
    for CoNLL-2003 `eng.train`/`eng.testa`/`eng.testb` or `train.txt`/`valid.txt`
    (or `dev.txt`)/`test.txt`; see the data sets' `split_files` (`datasets`).
    TaggingDataError naming the names looked for when none exists, or both when two do."""
    data_set = _data_set(task_name)
    if split not in SPLITS:
        raise UserValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    names = data_set.settings["split_files"][split]
    if "://" in data_dir:
        import tensorflow as tf  # gfile: object stores
        exists = tf.io.gfile.exists
    elif not os.path.isdir(data_dir):
        raise TaggingDataError(f"{data_dir}: no such directory")
    else:
        exists = os.path.isfile
    found = [name for name in names if exists(os.path.join(data_dir, name))]
    if not found:
        raise TaggingDataError(f"{data_dir}: no {task_name} {split} file: looked for "
                               f"{', '.join(names)}")
    if len(found) > 1:
        raise TaggingDataError(f"{data_dir}: {' and '.join(found)} are all {task_name} {split} "
                               "files; keep one")
    return os.path.join(data_dir, found[0])


# --- lines and bad lines -------------------------------------------------------------------------


class _BadLine(Exception):
    """One bad line: `kind` (what the count groups by) and an optional detail."""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(kind)
        self.kind = kind
        self.detail = detail


class _BadLines:
    """The bad lines of one file, gathered in one pass; `check` raises on the first
    with the counts, or (skip_bad_lines) logs the counts."""

    def __init__(self, path: str):
        self.path = path
        self.counts: collections.Counter = collections.Counter()
        self.first: Optional[Tuple[int, _BadLine]] = None

    def add(self, line_no: int, problem: _BadLine) -> None:
        self.counts[problem.kind] += 1
        if self.first is None or line_no < self.first[0]:
            self.first = (line_no, problem)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def check(self, skip_bad_lines: bool, column_file: bool, dropped: int = 0) -> None:
        """Raises TaggingDataError on the first bad line, or logs the counts when skipping
        (`dropped`: the sentences that held them, in a column file)."""
        if not self.counts:
            return
        if skip_bad_lines:
            kinds = ", ".join(f"{n} {kind}" for kind, n in self.counts.most_common())
            lines = f"{self.total} bad line{'s' if self.total != 1 else ''}"
            also = (f", dropping the {dropped} sentence{'s' if dropped != 1 else ''} that held "
                    "them" if dropped else "")
            logging.warning("%s: skipped %s (%s)%s", self.path, lines, kinds, also)
            return
        line_no, problem = self.first
        same = self.counts[problem.kind]
        counts = f"{same} such line{'s' if same != 1 else ''}"
        others = [(kind, n) for kind, n in self.counts.most_common() if kind != problem.kind]
        if others:
            rest = self.total - same
            counts += f" and {rest} other bad line{'s' if rest != 1 else ''}"
        counts += " in this file"
        if others:
            counts += ": " + ", ".join(f"{n} {kind}" for kind, n in others)
        them, s = ("them", "s") if self.total > 1 else ("it", "")
        effect = (f"drops the sentence{s} holding {them}" if column_file else f"skips {them}")
        detail = f": {problem.detail}" if problem.detail else ""
        raise TaggingDataError(f"{self.path}:{line_no}: {problem.kind}{detail} ({counts}; "
                               f"--skip_bad_lines {effect})")


def _read_bytes(path: str) -> bytes:
    if "://" in path:
        import tensorflow as tf  # gfile: object stores (gs://, s3://, ...)

        if not tf.io.gfile.exists(path):
            raise TaggingDataError(f"{path}: no such file")
        with tf.io.gfile.GFile(path, "rb") as handle:
            return handle.read()
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise TaggingDataError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TaggingDataError(f"{path} is a directory; give the file itself") from None
    except OSError as err:
        raise TaggingDataError(f"{path}: cannot read it ({err.strerror})") from None


def _read_lines(path: str, bad: _BadLines) -> List[Tuple[int, Optional[str]]]:
    """(1-based line number, text without its line end) of each line; a line that is
    not UTF-8 is added to `bad` and given as None. Only "\\n" ends a line (not the
    other characters `str.splitlines` splits at, which JSON texts may hold)."""
    raw = _read_bytes(path)
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        pieces: Sequence = raw.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        pieces = raw.split(b"\n")
    if pieces and not pieces[-1]:
        pieces = pieces[:-1]
    lines: List[Tuple[int, Optional[str]]] = []
    for line_no, piece in enumerate(pieces, start=1):
        if isinstance(piece, bytes):
            try:
                piece = piece.decode("utf-8")
            except UnicodeDecodeError as err:
                bad.add(line_no, _BadLine("not valid UTF-8",
                                          f"{err.reason} at byte {err.start + 1} of the line"))
                lines.append((line_no, None))
                continue
        lines.append((line_no, piece[:-1] if piece.endswith("\r") else piece))
    return lines


def _finish(path: str, sentences: List[TaggedSentence], bad: _BadLines, skip_bad_lines: bool,
            column_file: bool, dropped: int = 0) -> TaggedSentences:
    bad.check(skip_bad_lines, column_file, dropped)
    if not sentences:
        why = f"all held bad lines ({bad.total})" if bad.total else "the file has none"
        raise TaggingDataError(f"{path}: no sentences: {why}")
    logging.info("read %d sentences from %s", len(sentences), path)
    return TaggedSentences(sentences, path=path, skipped_lines=bad.total,
                           dropped_sentences=dropped)


# --- column files --------------------------------------------------------------------------------


def _column(values: List[str], column: int) -> Optional[int]:
    """The index `column` (negative from the end) names in `values`, or None."""
    index = column if column >= 0 else len(values) + column
    return index if 0 <= index < len(values) else None


def _fixed_columns(line: str, values: List[str], names: Sequence[str]) -> Tuple[str, str]:
    """(first, last) of a line that must have exactly `names` columns, the tag last."""
    if len(values) == len(names) - 1 and line[-1:].isspace():
        raise _BadLine("empty tag")
    if len(values) != len(names):
        raise _BadLine("wrong number of columns",
                       f"found {len(values)}, expected {len(names)}: {' '.join(names)}")
    if not values[-1].strip():
        raise _BadLine("empty tag")
    return values[0], values[-1].strip()


def _conll_fields(line: str) -> Tuple[str, str]:
    return _fixed_columns(line, line.split(), CONLL_COLUMNS)


def _msra_fields(line: str) -> Tuple[str, str]:
    values = line.split("\t") if "\t" in line else line.split()
    char, tag = _fixed_columns(line, values, ("character", "tag"))
    # A whitespace character before the tab is the character itself.
    char = char.strip() or char
    if not char:
        raise _BadLine("empty character")
    return char, tag


def _is_separator(line: Optional[str]) -> bool:
    """A blank line or a -DOCSTART- line: ends a sentence."""
    return line is not None and (not line.strip() or line.split()[0] == DOCSTART)


def _blocks(lines: List[Tuple[int, Optional[str]]]) -> Iterator[List[Tuple[int, Optional[str]]]]:
    """The runs of lines between separators (`_is_separator`)."""
    block: List[Tuple[int, Optional[str]]] = []
    for line_no, line in lines:
        if _is_separator(line):
            if block:
                yield block
            block = []
        else:
            block.append((line_no, line))
    if block:
        yield block


def _read_column_file(path: str, fields: Callable[[str], Tuple[str, Optional[str]]],
                      skip_bad_lines: bool, with_text: bool = False) -> TaggedSentences:
    """Sentences of a one-word-per-line file; `fields(line)` gives (word, tag or None)
    or raises _BadLine. A sentence holding a bad line is dropped when skipping."""
    bad = _BadLines(path)
    sentences: List[TaggedSentence] = []
    dropped = 0
    for block in _blocks(_read_lines(path, bad)):
        words, tags, broken = [], [], False
        for line_no, line in block:
            if line is None:  # not UTF-8: already counted
                broken = True
                continue
            try:
                word, tag = fields(line)
            except _BadLine as problem:
                bad.add(line_no, problem)
                broken = True
                continue
            words.append(word)
            tags.append(tag)
        if broken:
            dropped += 1
            continue
        text, offsets = None, None
        if with_text:
            text, offsets = "".join(words), []
            for word in words:
                start = offsets[-1][1] if offsets else 0
                offsets.append((start, start + len(word)))
        sentences.append(TaggedSentence(
            words=words, tags=None if None in tags else tags, source=f"{path}:{block[0][0]}",
            text=text, offsets=offsets))
    return _finish(path, sentences, bad, skip_bad_lines, column_file=True, dropped=dropped)


# --- JSON lines ----------------------------------------------------------------------------------


def is_json_file(path: str) -> bool:
    return os.path.splitext(path)[1].lower() in JSON_EXTENSIONS


def _read_json_lines(path: str, label_key: str,
                     sentence: Callable[[dict, str, bool], TaggedSentence],
                     skip_bad_lines: bool) -> TaggedSentences:
    """One sentence per non-blank line; `sentence(obj, source, labelled)` raises
    _BadLine. The first object decides whether the file is labelled (has
    `label_key`); every other line must agree."""
    bad = _BadLines(path)
    sentences: List[TaggedSentence] = []
    labelled: Optional[bool] = None
    for line_no, line in _read_lines(path, bad):
        if line is None or not line.strip():
            continue
        try:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise _BadLine("not valid JSON", f"{err.msg} at column {err.colno}") from None
            if not isinstance(obj, dict):
                raise _BadLine("not a JSON object", f"got {type(obj).__name__}")
            has_label = obj.get(label_key) is not None
            if labelled is None:
                labelled, first_line = has_label, line_no
            elif has_label != labelled:
                kind = f"no '{label_key}'" if labelled else f"'{label_key}' in an unlabelled file"
                raise _BadLine(kind, f"the first line ({first_line}) has "
                               f"{'one' if labelled else 'none'}; a file is all labelled or all "
                               "unlabelled")
            sentences.append(sentence(obj, f"{path}:{line_no}", labelled))
        except _BadLine as problem:
            bad.add(line_no, problem)
    return _finish(path, sentences, bad, skip_bad_lines, column_file=False)


def _text_field(obj: dict) -> str:
    if "text" not in obj:
        raise _BadLine("missing 'text'")
    text = obj["text"]
    if not isinstance(text, str):
        raise _BadLine("'text' is not a string", f"got {type(text).__name__}")
    if not text.strip():
        raise _BadLine("empty text")
    return text


def _example_id(obj: dict):
    """The line's "id" as the file has it (CLUE's test ids are integers), or None."""
    return obj.get("id")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _cluener_spans(label, text: str) -> List[EntitySpan]:
    """The spans of a CLUENER "label" {type: {entity text: [[start, end], ...]}}
    (end inclusive), returned with end exclusive."""
    shape = "expected {type: {entity text: [[start, end], ...]}}"
    if not isinstance(label, dict):
        raise _BadLine("malformed 'label'", f"{shape}, got {type(label).__name__}")
    spans = []
    for entity_type, entities in label.items():
        if not entity_type or not isinstance(entities, dict):
            raise _BadLine("malformed 'label'", f"type {entity_type!r}: {shape}")
        for entity, offsets in entities.items():
            if not isinstance(offsets, list) or not all(
                    isinstance(pair, list) and len(pair) == 2 and all(map(_is_int, pair))
                    for pair in offsets):
                raise _BadLine("malformed 'label'", f"{entity_type} {entity!r}: the offsets "
                               f"must be [[start, end], ...], got {json.dumps(offsets)}")
            for start, end in offsets:
                where = f"{entity_type} {entity!r} [{start}, {end}]"
                if not 0 <= start <= end < len(text):
                    raise _BadLine("span outside the text",
                                   f"{where}; the text has {len(text)} characters")
                if text[start:end + 1] != entity:
                    raise _BadLine("span does not match its text",
                                   f"{where} is {text[start:end + 1]!r} in the text "
                                   "(CLUENER end offsets are inclusive)")
                spans.append(EntitySpan(entity_type, start, end + 1))
    return _check_overlaps(spans, text, inclusive=True)


def _custom_spans(entities, text: str, offsets: List[Tuple[int, int]]) -> List[EntitySpan]:
    """The spans of a custom "entities" [{"type", "start", "end", "text"?}] (end
    exclusive), each beginning and ending at a word boundary."""
    if not isinstance(entities, list):
        raise _BadLine("malformed 'entities'", "expected a list of {\"type\", \"start\", "
                       f"\"end\"}}, got {type(entities).__name__}")
    starts = {start for start, _ in offsets}
    ends = {end for _, end in offsets}
    spans = []
    for index, entity in enumerate(entities):
        if not (isinstance(entity, dict) and isinstance(entity.get("type"), str)
                and entity["type"] and _is_int(entity.get("start"))
                and _is_int(entity.get("end"))):
            raise _BadLine("malformed 'entities'", f"entity {index} is {json.dumps(entity)}; "
                           "expected {\"type\": str, \"start\": int, \"end\": int}")
        span = EntitySpan(entity["type"], entity["start"], entity["end"])
        where = f"{span.type} [{span.start}, {span.end})"
        if not 0 <= span.start < span.end <= len(text):
            raise _BadLine("entity outside the text" if span.start < span.end else "empty entity",
                           f"{where}; the text has {len(text)} characters (end is exclusive)")
        covered = text[span.start:span.end]
        if "text" in entity and entity["text"] != covered:
            raise _BadLine("entity text does not match its offsets",
                           f"{where} is {covered!r} in the text, not {entity['text']!r} "
                           "(end is exclusive)")
        if span.start not in starts or span.end not in ends:
            raise _BadLine("entity boundary inside a word",
                           f"{where} {covered!r}: entities must begin and end at word "
                           "boundaries (whitespace, punctuation, CJK characters)")
        spans.append(span)
    return _check_overlaps(spans, text, inclusive=False)


def _check_overlaps(spans: List[EntitySpan], text: str, inclusive: bool) -> List[EntitySpan]:
    """`spans` sorted, repeats removed; _BadLine if two overlap (flat BIO cannot hold them)."""
    spans = sorted(set(spans), key=lambda span: (span.start, span.end, span.type))

    def show(span: EntitySpan) -> str:
        end = f"{span.end - 1}]" if inclusive else f"{span.end})"
        return f"{span.type} {text[span.start:span.end]!r} [{span.start}, {end}"

    for previous, span in zip(spans, spans[1:]):
        if span.start < previous.end:
            raise _BadLine("overlapping entities", f"{show(previous)} and {show(span)}; "
                           "flat BIO tags cannot hold nested or overlapping entities")
    return spans


def _bio_tags(offsets: List[Tuple[int, int]],
              spans: Optional[List[EntitySpan]]) -> Optional[List[str]]:
    """BIO tags of the words at `offsets` for `spans` (whose ends are word boundaries)."""
    if spans is None:
        return None
    word_at = {start: index for index, (start, _) in enumerate(offsets)}
    tags = ["O"] * len(offsets)
    for span in spans:
        first = word_at[span.start]
        tags[first] = f"B-{span.type}"
        index = first + 1
        while index < len(offsets) and offsets[index][1] <= span.end:
            tags[index] = f"I-{span.type}"
            index += 1
    return tags
