"""The data sets each task family fine-tunes on, by name: one table instead of branches.

A *data set* is what `--task_name` names (GLUE's MRPC, CLUE's TNEWS, RACE, C3, CoNLL-2003,
SQuAD v2.0, ...); a *task family* is the package that fine-tunes on it
(`albert_tf.tasks.<family>`: model head, features, job); a *training objective* is the
loss (`albert_tf.training.Objective`). Each family lists its data sets in its
`datasets.py` as `DataSet` records, and its job asks `get(family, name)` for the one the
run names instead of branching on the name: adding a data set to a family is one record
(docs/architecture.md has the worked example).

Pure Python: a family's `datasets.py` is imported on the first `get` / `names` of that
family, so this module imports no TensorFlow and no family.
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Callable, Dict, Mapping, Optional, Tuple

from albert_tf.errors import UserValueError

FAMILIES = ("classification", "embeddings", "multiple_choice", "span_qa", "tagging")


@dataclasses.dataclass(frozen=True)
class DataSet:
    """One data set of one task family.

    name: the `--task_name` value (lower case).
    family: the task family (one of `FAMILIES`).
    reader: the family's way to read it; its signature is the family's (see the
        family's `datasets.py`), e.g. (data_dir, split, options) -> examples.
    labels: the label strings, in the order of the model's outputs; None where the labels
        are read from the training files (CLUE, custom tasks) or there are none
        (regression, span QA).
    metric: the dev metric that picks the best checkpoint (higher is better).
    default_rules: the `albert_tf.cli_defaults` rules this data set adds to its family's:
        its flag defaults, computed from the other flags (RACE's `max_qa_length:race`).
        Published hyperparameters (`--hparams=paper`) are `finetuning.hparams`' table,
        keyed by the same names.
    language: "en" or "zh": which official checkpoints and tokenizer it goes with.
    settings: what else the family's code needs to know about it (family-specific
        keys: a GLUE `TaskSpec`, C3's option mask, the reader's scheme, ...).
    """

    name: str
    family: str
    reader: Callable
    metric: str
    labels: Optional[Tuple[str, ...]] = None
    default_rules: Tuple[str, ...] = ()
    language: str = "en"
    settings: Mapping[str, object] = dataclasses.field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"data set {self.name!r}: family {self.family!r} is not one of "
                             f"{', '.join(FAMILIES)}")
        if self.name != self.name.lower():
            raise ValueError(f"data set {self.name!r}: names are lower case")


_DATA_SETS: Dict[str, Dict[str, DataSet]] = {family: {} for family in FAMILIES}
_LOADED: set = set()


def register(data_set: DataSet) -> DataSet:
    """Adds a data set to its family's table (a name taken twice is an error)."""
    table = _DATA_SETS[data_set.family]
    if data_set.name in table and table[data_set.name] is not data_set:
        raise ValueError(f"data set {data_set.name!r} is already registered for "
                         f"{data_set.family}")
    table[data_set.name] = data_set
    return data_set


def _table(family: str) -> Dict[str, DataSet]:
    if family not in FAMILIES:
        raise ValueError(f"task family {family!r} is not one of {', '.join(FAMILIES)}")
    if family not in _LOADED:  # the family's records register themselves on import
        importlib.import_module(f"albert_tf.tasks.{family}.datasets")
        _LOADED.add(family)
    return _DATA_SETS[family]


def names(family: str) -> Tuple[str, ...]:
    """The data set names of a family, in the order its `datasets.py` lists them."""
    return tuple(_table(family))


def get(family: str, name: str, flag: str = "--task_name") -> DataSet:
    """The data set `name` (any case) of `family`; a name the family does not know is a
    UserValueError naming `flag` and the names it knows."""
    table = _table(family)
    data_set = table.get(str(name).lower())
    if data_set is None:
        raise UserValueError(f"{flag} {name!r} is not a {family.replace('_', ' ')} data set: "
                             f"one of {', '.join(table)}")
    return data_set


def all_data_sets() -> Tuple[DataSet, ...]:
    """Every family's data sets, family by family."""
    return tuple(data_set for family in FAMILIES for data_set in _table(family).values())
