"""The span QA data sets: SQuAD v1.1, SQuAD v2.0 and CMRC 2018, as registry records.

run_squad.py has no --task_name: `resolve(metric, version_2_with_negative, dataset)` names
the record from --metric, --version_2_with_negative and the predict file (see
`resolve`), and the job uses the record's fields instead of branching on metric names:

  reader    `data.read_squad_examples(path, is_training, version_2_with_negative,
            data=None)`: every record reads the SQuAD JSON format.
  metric    "f1" (percent): the dev metric that picks the best checkpoint, for all three.
  settings  "scoring": the `scoring.*Scoring` object the job scores and writes its
            predictions with (`.name` is the --metric value that scores the data set:
            "squad" or "cmrc2018"; v2's null-score threshold is tuned or given there).
"""
from __future__ import annotations

from typing import Optional

from absl import logging

from albert_tf.tasks import registry
from albert_tf.tasks.span_qa import data, scoring
from albert_tf.tasks.span_qa.metrics import is_v2_dataset

FAMILY = "span_qa"
CJK_METRIC_THRESHOLD = 0.5  # --metric=auto: cmrc2018 above this share of CJK context characters

SQUAD_V1 = registry.register(registry.DataSet(
    "squad_v1", FAMILY, data.read_squad_examples, "f1", language="en",
    settings={"scoring": scoring.SquadV1Scoring()},
    description="SQuAD v1.1: every question has an answer (official v1.1 script)."))
SQUAD_V2 = registry.register(registry.DataSet(
    "squad_v2", FAMILY, data.read_squad_examples, "f1", language="en",
    settings={"scoring": scoring.SquadV2Scoring()},
    description="SQuAD v2.0 (--version_2_with_negative): questions may have no answer "
                "(official v2.0 script; the null-score threshold tuned or given)."))
CMRC2018 = registry.register(registry.DataSet(
    "cmrc2018", FAMILY, data.read_squad_examples, "f1", language="zh",
    settings={"scoring": scoring.Cmrc2018Scoring()},
    description="CMRC 2018: Chinese span extraction in the SQuAD v1.1 format (official CMRC "
                "2018 metric)."))


def resolve(metric: str, version_2_with_negative: bool, dataset: Optional[list] = None,
            wordpiece: bool = False) -> str:
    """The registry name of the data set run_squad.py runs.

    metric: --metric ("auto", "squad" or "cmrc2018"). --metric=cmrc2018 is CMRC 2018
    (the options refuse it with --version_2_with_negative); else
    --version_2_with_negative is SQuAD v2.0 and --metric=squad SQuAD v1.1. auto with
    `dataset` (the predict file's `data` list): CMRC 2018 when more than half of its
    non-whitespace context characters are CJK ideographs and the file has no
    is_impossible question, else SQuAD v1.1. auto without a file (--hparams, read
    before any file): CMRC 2018 with a WordPiece vocabulary (`wordpiece`: the Chinese
    models), else SQuAD v1.1 / v2.0 by --version_2_with_negative.
    """
    if metric == "cmrc2018":
        return CMRC2018.name
    if dataset is None and metric == "auto" and wordpiece:
        return CMRC2018.name
    if version_2_with_negative:
        return SQUAD_V2.name
    if metric != "auto" or dataset is None or is_v2_dataset(dataset):
        return SQUAD_V1.name
    share = data.cjk_fraction(dataset)
    chosen = CMRC2018 if share > CJK_METRIC_THRESHOLD else SQUAD_V1
    logging.info("--metric=auto: %.1f%% of the context characters are CJK ideographs -> %s",
                 100 * share, chosen.settings["scoring"].name)
    return chosen.name


def get(name: str) -> registry.DataSet:
    """The span QA data set `name` (`registry.get`)."""
    return registry.get(FAMILY, name)
