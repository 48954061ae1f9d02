"""Reads text corpora into documents of normalised sentences, streaming.

Two input formats:
  * "sentences" (the original's): one sentence per line, a blank line (after
    normalisation) ends a document.
  * "raw": each file is one document; paragraphs are runs of non-blank lines,
    joined with spaces and split into sentences by `sentence_split`.

Files may be plain or gzip (detected by magic bytes), UTF-8 with or without a
BOM, with LF or CRLF line ends. Bytes that are not UTF-8 raise `InputError`
naming the file and line, unless `decode_errors="replace"`. With
`strip_gutenberg`, only the body of each Project Gutenberg book is kept
(between each `*** START OF ...` and the next `*** END OF ...` marker or
"End of the Project Gutenberg EBook" footer; a file may hold several books),
and each book ends a document.

`iter_documents(..., split_chars=N)` cuts a document whose text reaches N
characters into pieces (at paragraph ends in "raw"), so that no input, however
large one file or document is, is held whole. `ReadCounts` records where every
input byte went (kept, or dropped and why).

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
from typing import BinaryIO, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

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


# Why input bytes were dropped (keys of ReadCounts.dropped), with the log's wording.
DROP_REASONS = {
    "gutenberg": "Project Gutenberg header/footer/licence text (--strip_gutenberg)",
    "blank": "blank lines (paragraph/document separators)",
    "empty_after_normalisation": "lines or paragraphs that normalise to nothing",
}


@dataclasses.dataclass
class ReadCounts:
    """Where the input went: additive counters filled by the reader (and the tokenizer step).

    Bytes and lines are those of the decompressed input files (line ends and
    BOM included): every line is either kept (some of its text reaches a
    document) or dropped for one reason of DROP_REASONS (`dropped[reason]` =
    [lines, bytes]), so `kept_bytes + sum of dropped bytes == bytes_in`.
    Lines with invalid UTF-8 read with --decode_errors=replace are kept with
    U+FFFD and counted in `replaced_*` as well. Sentences and documents that
    end up empty are counted, not in bytes: in raw format the sentences that
    normalise to nothing (a paragraph with none left counts as dropped bytes
    too), and a document (file, book or piece) with no sentence left; after tokenization
    the sentences and documents with no token (`no_token_*`, set by the runner).
    """
    bytes_in: int = 0
    lines_in: int = 0
    kept_bytes: int = 0
    kept_lines: int = 0
    dropped: Dict[str, List[int]] = dataclasses.field(
        default_factory=lambda: {reason: [0, 0] for reason in DROP_REASONS})
    replaced_lines: int = 0
    replaced_bytes: int = 0
    gutenberg_books: int = 0
    empty_sentences: int = 0
    empty_documents: int = 0
    split_documents: int = 0
    no_token_sentences: int = 0
    no_token_documents: int = 0

    def drop(self, reason: str, lines: int, size: int) -> None:
        """Counts `lines` lines of `size` bytes as dropped for `reason` (a DROP_REASONS key)."""
        entry = self.dropped[reason]
        entry[0] += lines
        entry[1] += size

    def merge(self, other: "ReadCounts") -> None:
        """Adds `other`'s counters to these."""
        for field in dataclasses.fields(self):
            if field.name == "dropped":
                for reason, (lines, size) in other.dropped.items():
                    self.drop(reason, lines, size)
            else:
                setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))

    def to_dict(self) -> dict:
        """The summary's `input` section (JSON friendly)."""
        return {
            "bytes": self.bytes_in, "lines": self.lines_in,
            "kept": {"bytes": self.kept_bytes, "lines": self.kept_lines,
                     "fraction_of_bytes": self.kept_bytes / self.bytes_in
                     if self.bytes_in else 0.0},
            "dropped": {reason: {"lines": lines, "bytes": size}
                        for reason, (lines, size) in self.dropped.items()},
            "invalid_utf8_replaced": {"lines": self.replaced_lines,
                                      "bytes": self.replaced_bytes},
            "gutenberg_books": self.gutenberg_books,
            "documents_split_at_block_chars": self.split_documents,
            "sentences_dropped": {"empty_after_normalisation": self.empty_sentences,
                                  "no_tokens": self.no_token_sentences},
            "documents_dropped": {"empty_after_normalisation": self.empty_documents,
                                  "no_tokens": self.no_token_documents},
        }

    def log_lines(self) -> List[str]:
        """Plain-language lines for the log: kept N of M bytes, then every reason, zeros too."""
        share = 100.0 * self.kept_bytes / self.bytes_in if self.bytes_in else 0.0
        lines = [f"input: kept {self.kept_bytes:,} of {self.bytes_in:,} bytes ({share:.1f}%), "
                 f"{self.kept_lines:,} of {self.lines_in:,} lines"]
        for reason, (count, size) in self.dropped.items():
            lines.append(f"input: dropped {size:,} bytes ({count:,} lines) of "
                         f"{DROP_REASONS[reason]}")
        lines.append(
            f"input: {self.replaced_lines:,} lines ({self.replaced_bytes:,} bytes) with invalid "
            f"UTF-8 kept with U+FFFD (--decode_errors=replace; strict stops at the first); "
            f"{self.gutenberg_books:,} Gutenberg books found; "
            f"{self.split_documents:,} cuts of long documents at --block_chars")
        if self.kept_bytes * 2 < self.bytes_in:
            lines.append("input: WARNING: less than half of the input bytes were kept; "
                         "see the reasons above")
        lines.append(
            f"input: dropped {self.empty_sentences:,} sentences and {self.empty_documents:,} "
            f"documents empty after normalisation, {self.no_token_sentences:,} sentences and "
            f"{self.no_token_documents:,} documents with no token")
        return lines


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
    for number, text, _ in iter_line_items(path, decode_errors, opener):
        yield number, text


def iter_line_items(path: str, decode_errors: str = "strict",
                    opener: Callable[[str], BinaryIO] = _open_binary,
                    counts: Optional["ReadCounts"] = None) -> Iterator[Tuple[int, str, int]]:
    """Yields (1-based line number, decoded line without its line end, bytes) of a text file.

    `bytes` is the line's size in the (decompressed) file, line end and BOM
    included, so the sizes of all lines add up to the file's size; `counts`
    (optional) adds them to `bytes_in`/`lines_in` and counts invalid UTF-8.
    """
    raw = opener(path)
    number = total = 0  # lines and bytes read: added to `counts` at the end (a fast loop)
    try:
        stream = raw if hasattr(raw, "peek") else io.BufferedReader(_RawAdapter(raw))
        if stream.peek(2)[:2] == b"\x1f\x8b":
            stream = gzip.GzipFile(fileobj=stream)
        for number, line in enumerate(stream, start=1):
            size = len(line)
            total += size
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
                if counts is not None:
                    counts.replaced_lines += 1
                    counts.replaced_bytes += size
            yield number, text.rstrip("\r\n"), size
    except (OSError, EOFError, gzip.BadGzipFile) as error:
        raise InputError(f"cannot read input file {path}: {error}") from error
    finally:
        raw.close()
        if counts is not None:
            counts.lines_in += number
            counts.bytes_in += total


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


# Yielded by `strip_gutenberg(..., book_breaks=True)` between two books of one file.
BOOK_BREAK = (0, None, 0)

_HEADER, _MARKER, _BODY, _AFTER_END = range(4)  # strip_gutenberg's states


def strip_gutenberg(lines: Iterator[tuple], counts: Optional[ReadCounts] = None,
                    book_breaks: bool = False) -> Iterator[tuple]:
    """Keeps the body of every Project Gutenberg book in `lines`, drops the rest.

    `lines` are (number, text, ...) tuples, passed on unchanged. A body runs
    from after a START marker (which may span lines, up to one holding `***`
    or a blank line) to before an END marker or the old-style footer line
    ("End of the Project Gutenberg EBook of X"). Text before the first START
    (the header), between an END and the next START (licence, next header)
    and after the last END is dropped: files made by concatenating books keep
    every book. The header is only searched for in the first 400 lines, so a
    file without a START marker streams and is kept up to an END marker (a
    file without markers is kept whole). With `book_breaks`, BOOK_BREAK is
    yielded before each book after the first. Dropped (number, text, bytes)
    tuples are counted in `counts` (reason "gutenberg").
    """
    state, pending = _HEADER, []
    for item in lines:
        line = item[1]
        if state == _BODY:
            if _PG_END.search(line):
                state = _AFTER_END
                _count_gutenberg(counts, [item])
            else:
                yield item
        elif state == _MARKER:  # the rest of a START marker spanning lines
            _count_gutenberg(counts, [item])
            if "***" in line or not line.strip():
                state = _BODY
        elif _PG_START.search(line):
            _count_gutenberg(counts, pending + [item])
            pending = []
            if counts is not None:
                counts.gutenberg_books += 1
            if book_breaks and state == _AFTER_END:
                yield BOOK_BREAK
            stripped = line.strip()
            opened = stripped.count("*") < 6 and not stripped.upper().startswith("*END*")
            state = _MARKER if opened else _BODY
        elif state == _AFTER_END:
            _count_gutenberg(counts, [item])
        else:  # _HEADER: held back until a START marker shows it was a header
            pending.append(item)
            if len(pending) > 400:
                state = _BODY
                yield from pending
                pending = []
    yield from pending


def _count_gutenberg(counts: Optional[ReadCounts], items: List[tuple]) -> None:
    if counts is not None and items:
        counts.drop("gutenberg", len(items), sum(item[2] for item in items if len(item) > 2))


def iter_documents(paths: Sequence[str], options: ReaderOptions,
                   opener: Callable[[str], BinaryIO] = _open_binary,
                   counts: Optional[ReadCounts] = None,
                   split_chars: Optional[int] = None) -> Iterator[Document]:
    """Streams the documents of `paths` in order, numbering them 0, 1, 2, ...

    Each Gutenberg book ends a document (`options.strip_gutenberg`). With
    `split_chars` (the runner's --block_chars), a document is cut once its
    normalised text reaches `split_chars` characters (raw format: at the end of
    the paragraph; a paragraph itself is cut at a line once it reaches that
    size; sentences format: at the line), and each piece is a document, so no
    document held here exceeds about `split_chars` + one paragraph. Where the
    input went is added to `counts` (ReadCounts).
    """
    counts = counts if counts is not None else ReadCounts()
    limit = split_chars if split_chars else float("inf")
    reader = _sentence_documents if options.input_format == "sentences" else _raw_documents
    normalise = _normaliser(options)
    index = 0
    for path in paths:
        lines = iter_line_items(path, options.decode_errors, opener, counts)
        if options.strip_gutenberg:
            lines = strip_gutenberg(lines, counts, book_breaks=True)
        for sentences in reader(lines, normalise, counts, limit):
            yield Document(index, path, tuple(sentences))
            index += 1


def _normaliser(options: ReaderOptions) -> Callable[[str], str]:
    if options.preprocess_text:
        lower = options.do_lower_case
        return lambda text: tokenization.preprocess_text(text, lower=lower)
    return str.strip


def _sentence_documents(lines, normalise: Callable[[str], str], counts: ReadCounts,
                        limit: float) -> Iterator[List[str]]:
    """One sentence per line; a blank line (or one that normalises to nothing) or a book
    break ends a document, and so does reaching `limit` characters (counted as a split)."""
    current: List[str] = []
    chars = 0
    cut = False  # the document was just cut at `limit`: a split if text follows
    kept_lines = kept_bytes = 0  # added to `counts` at the end (a fast loop)
    try:
        for _, line, size in lines:
            text = normalise(line) if line is not None else ""
            if text:
                if cut:
                    counts.split_documents += 1
                current.append(text)
                chars += len(text)
                kept_lines += 1
                kept_bytes += size
                cut = chars >= limit
                if not cut:
                    continue
            else:
                cut = False
                if line is not None:
                    counts.drop("empty_after_normalisation" if line.strip() else "blank", 1,
                                size)
            if current:
                yield current
                current, chars = [], 0
        if current:
            yield current
    finally:
        counts.kept_lines += kept_lines
        counts.kept_bytes += kept_bytes


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


class _RawDocument:
    """The raw reader's current document and paragraph, with their counters."""

    def __init__(self, normalise: Callable[[str], str], counts: ReadCounts):
        self.normalise = normalise
        self.counts = counts
        self.sentences: List[str] = []
        self.chars = 0            # normalised characters of `sentences`
        self.had_text = False     # a non-blank line was read since the last take()
        self.cut = False          # the document was cut at `limit`; counted if text follows
        self.paragraph: List[str] = []
        self.paragraph_chars = 0  # raw characters of `paragraph`
        self.paragraph_bytes = 0

    def add_line(self, line: str, size: int) -> None:
        if self.cut:
            self.counts.split_documents += 1
            self.cut = False
        self.paragraph.append(line)
        self.paragraph_chars += len(line)
        self.paragraph_bytes += size
        self.had_text = True

    def end_paragraph(self) -> None:
        """Splits the paragraph into sentences; its lines count as kept if one survives."""
        if not self.paragraph:
            return
        before = len(self.sentences)
        for sentence in split_sentences(join_lines(self.paragraph)):
            text = self.normalise(sentence)
            if text:
                self.sentences.append(text)
                self.chars += len(text)
            else:
                self.counts.empty_sentences += 1
        if len(self.sentences) > before:
            self.counts.kept_lines += len(self.paragraph)
            self.counts.kept_bytes += self.paragraph_bytes
        else:
            self.counts.drop("empty_after_normalisation", len(self.paragraph),
                             self.paragraph_bytes)
        self.paragraph, self.paragraph_chars, self.paragraph_bytes = [], 0, 0

    def take(self) -> List[str]:
        """The document's sentences (maybe none: then counted as an empty document)."""
        sentences = self.sentences
        if not sentences and self.had_text:
            self.counts.empty_documents += 1
        self.sentences, self.chars, self.had_text = [], 0, False
        return sentences


def _raw_documents(lines, normalise: Callable[[str], str], counts: ReadCounts,
                   limit: float) -> Iterator[List[str]]:
    """A file (or Gutenberg book) is a document of paragraphs (runs of non-blank lines),
    cut into pieces of about `limit` normalised characters at paragraph ends."""
    doc = _RawDocument(normalise, counts)
    for _, line, size in lines:
        if line is None:  # a book break ends the document
            doc.end_paragraph()
            sentences = doc.take()
            doc.cut = False
            if sentences:
                yield sentences
            continue
        if line.strip():
            doc.add_line(line, size)
            if doc.paragraph_chars < limit:
                continue
        else:
            counts.drop("blank", 1, size)
        doc.end_paragraph()
        if doc.chars >= limit:
            doc.cut = True
            yield doc.take()
    doc.end_paragraph()
    sentences = doc.take()
    if sentences:
        yield sentences
