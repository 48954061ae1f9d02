"""The sentence-embedding data sets (`--task_name`), as registry records.

  sts-b   GLUE's STS-B TSV files (<data_dir>/STS-B/ or <data_dir>): sentence1, sentence2
          (columns 7, 8), score 0-5 (the last column; none in test.tsv); a header row
  lcqmc   LCQMC / ATEC-style TSV files <data_dir>/{train,dev,test}.{tsv,txt}: text_a,
          text_b, label (0/1; also any number), no header
  custom  <data_dir>/{train,dev,test}.{tsv,csv} with a header, columns named by
          --text_a_column, --text_b_column, --label_column (a score) and --negative_column
          (the last two may be absent from a file: unscored training pairs); or
          {split}.txt, one text per line (unsupervised SimCSE)

Every record's reader takes the run's options (`data_dir`, `columns`) and returns an
`EmbeddingData`: split -> `PairExample`s. `settings["loss"]`: the loss the data set trains
with by default (cosent for scored pairs). Pure Python (no TensorFlow at import).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, List, Optional

from absl import logging

from albert_tf import fileio
from albert_tf.errors import UserError, UserValueError
from albert_tf.option_fields import option
from albert_tf.tasks import registry

FAMILY = "embeddings"
SPLITS = ("train", "dev", "test")


class EmbeddingDataError(UserError, ValueError):
    """A data file is missing or has a malformed row (the message names file and line)."""


@dataclasses.dataclass(frozen=True)
class PairExample:
    """Two texts and how alike they are (`score`, None when the file gives none), or a text
    alone (text_b None: SimCSE), with an optional hard negative; `source` is "file:line"."""

    guid: str
    text_a: str
    text_b: Optional[str] = None
    score: Optional[float] = None
    negative: Optional[str] = None
    source: str = ""


@dataclasses.dataclass
class EmbeddingColumns:
    """A custom task's columns (header names) in {split}.tsv / .csv."""

    text_a_column: Optional[str] = option(None, help="custom task: column of the first text.")
    text_b_column: Optional[str] = option(None, help="custom task: column of the second text "
                                                     "(pairs; without it: single texts).")
    label_column: Optional[str] = option(None, help="custom task: column of the pair's "
                                                    "similarity score (CoSENT).")
    negative_column: Optional[str] = option(None, help="custom task: column of a hard "
                                                       "negative (triplets, ranking loss).")


@dataclasses.dataclass(frozen=True)
class EmbeddingData:
    """A data set opened on --data_dir: split -> examples."""

    name: str
    read: Callable[[str], List[PairExample]]


def _read_text(path: str) -> str:
    import tensorflow as tf

    if not tf.io.gfile.exists(path):
        raise EmbeddingDataError(f"{path}: file not found (check --data_dir and --task_name)")
    return fileio.read_utf8_text(path, EmbeddingDataError)


def _rows(path: str, delimiter: str = "\t"):
    """(line, fields) of a TSV (no quoting, as GLUE) or CSV file; blank lines skipped."""
    return fileio.read_rows(path, delimiter, EmbeddingDataError)


def _score(text: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise EmbeddingDataError(f"{where}: score {text!r} is not a number") from None


def _field(row, column: int, where: str) -> str:
    try:
        return row[column]
    except IndexError:
        raise EmbeddingDataError(f"{where}: expected at least {column + 1 if column >= 0 else -column} "
                                 f"tab-separated columns, found {len(row)}") from None


def _first_existing(directory: str, split: str, extensions) -> str:
    import tensorflow as tf

    for extension in extensions:
        path = os.path.join(directory, f"{split}.{extension}")
        if tf.io.gfile.exists(path):
            return path
    return os.path.join(directory, f"{split}.{extensions[0]}")


def read_stsb(data_dir: str, split: str) -> List[PairExample]:
    import tensorflow as tf

    folder = os.path.join(data_dir, "STS-B")
    directory = folder if tf.io.gfile.isdir(folder) else data_dir
    path = os.path.join(directory, f"{split}.tsv")
    examples = []
    for index, (line, row) in enumerate(_rows(path)):
        if index == 0:
            continue  # the header
        where = f"{path}:{line}"
        score = None if split == "test" else _score(_field(row, -1, where), where)
        examples.append(PairExample(_field(row, 0, where), _field(row, 7, where),
                                    _field(row, 8, where), score, None, where))
    return examples


def read_lcqmc(data_dir: str, split: str) -> List[PairExample]:
    path = _first_existing(data_dir, split, ("tsv", "txt"))
    examples = []
    for index, (line, row) in enumerate(_rows(path)):
        where = f"{path}:{line}"
        if len(row) not in (2, 3):
            raise EmbeddingDataError(f"{where}: expected text_a, text_b and a label (2 or 3 "
                                     f"tab-separated fields), found {len(row)}")
        score = _score(row[2], where) if len(row) == 3 else None
        examples.append(PairExample(f"{split}-{index}", row[0], row[1], score, None, where))
    return examples


def read_custom(columns: EmbeddingColumns, data_dir: str, split: str) -> List[PairExample]:
    """{split}.txt: one text per line; else a TSV / CSV file with a header and the columns."""
    import tensorflow as tf

    text_file = os.path.join(data_dir, f"{split}.txt")
    if tf.io.gfile.exists(text_file):
        return [PairExample(f"{split}-{n}", line.strip(), source=f"{text_file}:{n + 1}")
                for n, line in enumerate(_read_text(text_file).split("\n")) if line.strip()]
    path = _first_existing(data_dir, split, ("tsv", "csv"))
    rows = _rows(path, "," if path.endswith(".csv") else "\t")
    header = next(rows, (0, None))[1]
    if header is None:
        raise EmbeddingDataError(f"{path}: empty file")
    index = {}
    for flag in ("text_a_column", "text_b_column", "label_column", "negative_column"):
        name = getattr(columns, flag)
        if name is None:
            continue
        if name not in header and flag in ("label_column", "negative_column"):
            # A file may lack them (unscored training pairs, a scored dev file).
            logging.info("%s: no column %r (--%s): read without it", path, name, flag)
            continue
        if name not in header:
            raise EmbeddingDataError(f"--{flag}={name!r}: no such column in the header of "
                                     f"{path} (columns: {', '.join(header)})")
        index[flag] = header.index(name)
    examples = []
    for number, (line, row) in enumerate(rows):
        where = f"{path}:{line}"
        if len(row) != len(header):
            raise EmbeddingDataError(f"{where}: {len(row)} columns, the header has {len(header)}")
        get = {flag: row[column] for flag, column in index.items()}
        score = _score(get["label_column"], where) if "label_column" in get else None
        examples.append(PairExample(f"{split}-{number}", get["text_a_column"],
                                    get.get("text_b_column"), score,
                                    get.get("negative_column"), where))
    return examples


def _open(name: str, options) -> EmbeddingData:
    if name == "custom":
        columns = options.columns
        if columns is None or not columns.text_a_column:
            raise UserValueError("--task_name=custom needs --text_a_column (or {split}.txt "
                                 "files of single texts)")
        return EmbeddingData(name, lambda split: read_custom(columns, options.data_dir, split))
    reader = {"sts-b": read_stsb, "lcqmc": read_lcqmc}[name]
    return EmbeddingData(name, lambda split: reader(options.data_dir, split))


for _name, _language, _description in (
        ("sts-b", "en", "GLUE STS-B: sentence pairs scored 0-5"),
        ("lcqmc", "zh", "LCQMC / ATEC-style: Chinese sentence pairs labelled 0/1"),
        ("custom", "en", "Your pairs with scores, pairs or triplets, or single texts")):
    registry.register(registry.DataSet(_name, FAMILY, lambda options, n=_name: _open(n, options),
                                       "spearman", None, language=_language,
                                       description=_description))


def get(name: str) -> registry.DataSet:
    return registry.get(FAMILY, name)


def open_task(options) -> EmbeddingData:
    return get(options.task_name).reader(options)
