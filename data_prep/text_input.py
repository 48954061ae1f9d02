"""Reads text corpora into documents of normalised sentences, streaming.

Two input formats:
  * "sentences" (the original's): one sentence per line, a blank line (after
    normalisation) ends a document.
  * "raw": each file is one document; paragraphs are runs of non-blank lines,
    joined with spaces and split into sentences by `sentence_split`.

Files may be plain or gzip (detected by magic bytes), UTF-8 with or without a
BOM, with LF or CRLF line ends. Bytes that are not UTF-8 raise `InputError`
naming the file and line, unless `decode_errors="replace"`. Project Gutenberg
headers and footers (everything outside the `*** START OF ...` /
`*** END OF ...` markers, and the "End of the Project Gutenberg EBook" footer)
are dropped when `strip_gutenberg` is set.

Every sentence goes through `preprocess_text(line, lower=do_lower_case)`, as
in the original's SentencePiece path, before documents are handed on; with
`preprocess_text=False` (the original's WordPiece path, whose BasicTokenizer
normalises) a sentence is only stripped. Sentences that normalise to an empty
string are boundaries ("sentences") or dropped ("raw").

In "raw" paragraphs, lines are joined with a space, except between two
Chinese/Japanese characters or marks (text that uses no spaces, wrapped at a
fixed width), where a space would split a word.
"""
from __future__ import annotations

import dataclasses
import glob
import gzip
import io
import re
from typing import Callable, BinaryIO, Iterator, List, Sequence, Tuple

from albert_tf.errors import UserError
from data_prep import tokenization
from data_prep.sentence_split import _HAN, split_sentences

FORMATS = ("sentences", "raw")


class InputError(UserError, ValueError):
    """A problem with an input file, with the file (and line) in the message."""


@dataclasses.dataclass(frozen=True)
class ReaderOptions:
    """How to read text. `input_format` is one of FORMATS; `decode_errors` 'strict'|'replace'.

    `preprocess_text`: normalise each sentence with the original's
    `preprocess_text` (SentencePiece path) or only strip it (WordPiece path).
    """
    input_format: str = "sentences"
    do_lower_case: bool = True
    decode_errors: str = "strict"
    strip_gutenberg: bool = True
    preprocess_text: bool = True

    def __post_init__(self):
        if self.input_format not in FORMATS:
            raise ValueError(f"input_format must be one of {FORMATS}, got {self.input_format!r}")
        if self.decode_errors not in ("strict", "replace"):
            raise ValueError("decode_errors must be 'strict' or 'replace', "
                             f"got {self.decode_errors!r}")


@dataclasses.dataclass(frozen=True)
class Document:
    """One document: `index` is its ordinal in the input stream, `sentences` are normalised."""
    index: int
    source: str
    sentences: Tuple[str, ...]


def expand_input_patterns(spec: str, glob_fn: Callable[[str], List[str]] = glob.glob) -> List[str]:
    """Comma-separated paths or globs -> list of files (each glob sorted), in order given.

    Raises InputError naming any pattern that matches nothing.
    """
    files: List[str] = []
    for pattern in (p.strip() for p in spec.split(",")):
        if not pattern:
            continue
        matches = sorted(glob_fn(pattern))
        if not matches:
            raise InputError(f"input pattern {pattern!r} matches no file")
        files.extend(matches)
    if not files:
        raise InputError("no input files given")
    return files


def _open_binary(path: str) -> BinaryIO:
    try:
        handle = open(path, "rb")
    except OSError as error:
        raise InputError(f"cannot open input file {path}: {error.strerror}") from error
    return handle


def iter_lines(path: str, decode_errors: str = "strict",
               opener: Callable[[str], BinaryIO] = _open_binary) -> Iterator[Tuple[int, str]]:
    """Yields (1-based line number, decoded line without its line end) of a text file."""
    raw = opener(path)
    try:
        stream = raw if hasattr(raw, "peek") else io.BufferedReader(_RawAdapter(raw))
        if stream.peek(2)[:2] == b"\x1f\x8b":
            stream = gzip.GzipFile(fileobj=stream)
        for number, line in enumerate(stream, start=1):
            if number == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as error:
                if decode_errors != "replace":
                    raise InputError(
                        f"{path}:{number}: invalid UTF-8 at byte {error.start} of the line "
                        f"({line[max(0, error.start - 10):error.start + 10]!r}); "
                        "fix the file or pass --decode_errors=replace") from None
                text = line.decode("utf-8", "replace")
            yield number, text.rstrip("\r\n")
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        raise InputError(f"cannot read input file {path}: {error}") from error
    finally:
        raw.close()


class _RawAdapter(io.RawIOBase):
    """Gives any object with `read(n)` the RawIOBase interface (for BufferedReader)."""

    def __init__(self, stream):
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._stream.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


_PG_START = re.compile(r"^\s*\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG|^\*END\*THE SMALL PRINT",
                       re.IGNORECASE)
_PG_END = re.compile(r"^\s*\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG"
                     # "End of the Project Gutenberg EBook of X", "End of Project Gutenberg's X"
                     r"|^\s*End of (the )?Project Gutenberg",
                     re.IGNORECASE)


def strip_gutenberg(lines: Iterator[Tuple[int, str]]) -> Iterator[Tuple[int, str]]:
    """Drops a Project Gutenberg header (up to the START marker) and footer (from the END marker).

    Without a START marker nothing is dropped from the top. The header is only
    searched for in the first 400 lines so that a file without markers streams.
    """
    pending: List[Tuple[int, str]] = []
    started = False
    in_marker = False
    for number, line in lines:
        if not started:
            if in_marker:
                if "***" in line or not line.strip():
                    in_marker = False
                    started = True
                continue
            if _PG_START.search(line):
                pending = []
                stripped = line.strip()
                in_marker = stripped.count("*") < 6 and not stripped.upper().startswith("*END*")
                started = not in_marker
                continue
            pending.append((number, line))
            if len(pending) > 400:
                started = True
                yield from pending
                pending = []
            continue
        if _PG_END.search(line):
            return
        yield number, line
    yield from pending


def iter_documents(paths: Sequence[str], options: ReaderOptions,
                   opener: Callable[[str], BinaryIO] = _open_binary) -> Iterator[Document]:
    """Streams the documents of `paths` in order, numbering them 0, 1, 2, ..."""
    index = 0
    for path in paths:
        lines = iter_lines(path, options.decode_errors, opener)
        if options.strip_gutenberg:
            lines = strip_gutenberg(lines)
        normalise = _normaliser(options)
        if options.input_format == "sentences":
            docs = _sentence_documents(lines, normalise)
        else:
            docs = _raw_documents(lines, normalise)
        for sentences in docs:
            yield Document(index, path, tuple(sentences))
            index += 1


def _normaliser(options: ReaderOptions) -> Callable[[str], str]:
    if options.preprocess_text:
        lower = options.do_lower_case
        return lambda text: tokenization.preprocess_text(text, lower=lower)
    return str.strip


def _sentence_documents(lines, normalise: Callable[[str], str]) -> Iterator[List[str]]:
    current: List[str] = []
    for _, line in lines:
        text = normalise(line)
        if text:
            current.append(text)
        elif current:
            yield current
            current = []
    if current:
        yield current


# Characters of scripts written without spaces: CJK ideographs (with extension
# A and compatibility forms), CJK symbols and punctuation, kana, full-width forms.
_NO_SPACE_SCRIPT = re.compile(f"[\u3000-\u30ff{_HAN}\uff01-\uff60]")


def join_lines(lines: Sequence[str]) -> str:
    """Joins the lines of a paragraph: a space between lines, none between two CJK characters."""
    parts: List[str] = []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        if parts and not (_NO_SPACE_SCRIPT.match(parts[-1][-1])
                          and _NO_SPACE_SCRIPT.match(line[0])):
            parts.append(" ")
        parts.append(line)
    return "".join(parts)


def _raw_documents(lines, normalise: Callable[[str], str]) -> Iterator[List[str]]:
    sentences: List[str] = []
    paragraph: List[str] = []

    def flush():
        for sentence in split_sentences(join_lines(paragraph)):
            text = normalise(sentence)
            if text:
                sentences.append(text)
        paragraph.clear()

    for _, line in lines:
        if line.strip():
            paragraph.append(line)
        elif paragraph:
            flush()
    if paragraph:
        flush()
    if sentences:
        yield sentences
