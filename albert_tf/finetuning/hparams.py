"""Published fine-tuning hyperparameters per task: the data behind `--hparams=paper`.

`PAPER` is the ALBERT paper's appendix table (Lan et al. 2019, arXiv 1909.11942,
appendix A.4, Table 14) for GLUE, SQuAD v1.1 / v2.0 and RACE; `CLUE` is what the
CLUE benchmark's baselines used for the Chinese tasks; `OTHER` the published baselines
of data sets without an ALBERT setting (GoEmotions). `lookup(task)` finds a task's
entry (case-insensitive, with aliases), `as_flags(hp, names)` turns it into the values a
command line should set, `describe(hp)` is the one log line naming the values and their
source. A run gives explicitly passed flags precedence over these values; that merge is
the command line's business, not this module's.

Field meanings (None = not published: keep the command line's default / the config's):
  learning_rate, train_batch_size, max_seq_length
  train_step, warmup_step             the paper's TS / WS columns (optimizer steps)
  num_train_epochs, warmup_proportion what epoch-based scripts (CLUE, run_squad) use
  albert_dropout                      the model's hidden and attention dropout ("ALBERT DR")
  classifier_dropout                  the task head's dropout ("Classifier DR")

The SQuAD entries carry both the paper's steps and the equivalent epochs, because
run_squad.py counts in epochs (--num_train_epochs, --warmup_proportion): 3649 steps at
batch 48 are 2 epochs of SQuAD 1.1's 87,599 training questions (2 x 87,599 / 48 = 3649.96),
8144 steps are 3 epochs of SQuAD 2.0's 130,319 (3 x 130,319 / 48 = 8144.9); the warmup
(365 / 814 steps) is 10% of either. run_squad.py derives int(examples / batch * epochs)
= 3649 / 8144 steps and int(10%) = 364 / 814 warmup steps (the paper: 365 / 814).

Pure Python (no TensorFlow): the command lines import it before building anything.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Sequence, Union

from albert_tf.errors import UserValueError

PAPER_TABLE = "ALBERT paper (arXiv 1909.11942), appendix A.4, Table 14"
RUN_GLUE = "google-research/albert run_glue.sh"
CLUE_ALBERT_SH = ("CLUEbenchmark/CLUE baselines/models/albert/run_classifier_{task}.sh "
                  "(albert_xlarge_zh); warmup: run_classifier.py's default 0.1")
CLUE_README = "CLUEbenchmark/CLUE README.md, detailed results table ({models})"

# Fields that are values a command line sets (source and note are not).
VALUE_FIELDS = ("learning_rate", "train_batch_size", "max_seq_length", "train_step",
                "warmup_step", "num_train_epochs", "warmup_proportion", "albert_dropout",
                "classifier_dropout")


@dataclasses.dataclass(frozen=True)
class Hparams:
    """One task's published fine-tuning hyperparameters and where they come from."""

    learning_rate: float
    train_batch_size: int
    max_seq_length: int
    train_step: Optional[int] = None
    warmup_step: Optional[int] = None
    num_train_epochs: Optional[float] = None
    warmup_proportion: Optional[float] = None
    albert_dropout: Optional[float] = None      # model hidden + attention dropout
    classifier_dropout: Optional[float] = None  # task head dropout
    source: str = ""
    note: str = ""


def _paper(lr: float, bsz: int, albert_dr: float, classifier_dr: float, ts: int, ws: int,
           msl: int, source: str = f"{PAPER_TABLE}; {RUN_GLUE}", note: str = "",
           epochs: Optional[float] = None, warmup_proportion: Optional[float] = None) -> Hparams:
    """A row of Table 14, in its column order: LR, BSZ, ALBERT DR, Classifier DR, TS, WS, MSL."""
    return Hparams(learning_rate=lr, train_batch_size=bsz, max_seq_length=msl, train_step=ts,
                   warmup_step=ws, num_train_epochs=epochs, warmup_proportion=warmup_proportion,
                   albert_dropout=albert_dr, classifier_dropout=classifier_dr,
                   source=source, note=note)


def _squad(lr: float, ts: int, ws: int, msl: int, epochs: float, version: str,
           questions: str, derived_warmup: int, readme: str) -> Hparams:
    """A SQuAD row of Table 14 (batch 48, no ALBERT dropout, head dropout 0.1), whose
    steps are also given as epochs with 10% warmup."""
    return _paper(
        lr, 48, 0.0, 0.1, ts, ws, msl, source=PAPER_TABLE, epochs=epochs, warmup_proportion=0.1,
        note=f"steps and epochs both given: {ts} steps at batch 48 = {epochs:g} epochs of "
             f"SQuAD {version}'s {questions} questions, warmup {ws} steps = 10% (run_squad.py, "
             f"which uses the epochs, derives {ts} and {derived_warmup}). The official "
             f"README's example {readme}")


# The ALBERT paper, appendix A.4, Table 14 ("Hyperparameters for downstream tasks"). The
# GLUE rows' LR / BSZ / TS / WS / MSL=512 are also what google-research/albert run_glue.sh
# passes (run_task TASK WS LR TS SAVE BSZ); WNLI is not in run_glue.sh (paper only).
_MNLI = _paper(3e-5, 128, 0.0, 0.1, 10000, 1000, 512)
PAPER: Dict[str, Hparams] = {
    "cola": _paper(1e-5, 16, 0.0, 0.1, 5336, 320, 512),
    "sts-b": _paper(2e-5, 16, 0.0, 0.1, 3598, 214, 512),
    "sst-2": _paper(1e-5, 32, 0.0, 0.1, 20935, 1256, 512),
    "mnli": _MNLI,
    "mismnli": _MNLI,  # the same fine-tuning (MNLI train), evaluated on dev_mismatched
    "qnli": _paper(1e-5, 32, 0.0, 0.1, 33112, 1986, 512),
    "qqp": _paper(5e-5, 128, 0.1, 0.1, 14000, 1000, 512),
    "rte": _paper(3e-5, 32, 0.1, 0.1, 800, 200, 512),
    "mrpc": _paper(2e-5, 32, 0.0, 0.1, 800, 200, 512),
    "wnli": _paper(2e-5, 16, 0.1, 0.1, 2000, 250, 512, source=PAPER_TABLE),
    "squad_v1": _squad(5e-5, 3649, 365, 384, 2.0, "1.1", "87,599", derived_warmup=364,
                       readme="also uses 384 / 48 / 5e-5 / 2 epochs"),
    "squad_v2": _squad(3e-5, 8144, 814, 512, 3.0, "2.0", "130,319", derived_warmup=814,
                       readme="uses 384 / 48 / 5e-5 / 2 epochs instead"),
    "race": _paper(
        2e-5, 32, 0.1, 0.1, 12000, 1000, 512, source=PAPER_TABLE,
        note="for ALBERT v2 models the official README uses lr 1e-5 and ALBERT dropout 0 "
             "(the v1 setting diverges for v2): pass --learning_rate=1e-5 --albert_dropout=0"),
}


def _epochs(lr: float, bsz: int, msl: int, epochs: float, source: str, note: str,
            classifier_dropout: Optional[float] = None) -> Hparams:
    """A setting given in epochs with 10% warmup, as every CLUE baseline is."""
    return Hparams(learning_rate=lr, train_batch_size=bsz, max_seq_length=msl,
                   num_train_epochs=epochs, warmup_proportion=0.1,
                   classifier_dropout=classifier_dropout, source=source, note=note)


def _clue_sh(task: str) -> Hparams:
    # CLUEbenchmark/CLUE baselines/models/albert/run_classifier_<task>.sh (current: commit
    # c26ff6d2; csl: 29614fcd): --max_seq_length=128 --train_batch_size=16
    # --learning_rate=3e-5 --num_train_epochs=2.0 on albert_xlarge_zh; warmup_proportion is
    # run_classifier.py's default 0.1; its head applies dropout 0.1 (keep_prob=0.9).
    return _epochs(3e-5, 16, 128, 2.0, classifier_dropout=0.1,
                   source=CLUE_ALBERT_SH.format(task=task),
                   note="ALBERT dropout: the checkpoint config's")


CLUE: Dict[str, Hparams] = {
    "afqmc": _clue_sh("afqmc"),
    "tnews": _clue_sh("tnews"),
    "iflytek": _clue_sh("iflytek"),
    "cmnli": _clue_sh("cmnli"),
    "csl": _clue_sh("csl"),
    # CLUE README, CMRC2018 row for ALBERT-base/large/xlarge/xxlarge:
    # batch=32, epoch2, length=512, lr=3e-5, warmup=0.1.
    "cmrc2018": _epochs(
        3e-5, 32, 512, 2.0, source=CLUE_README.format(models="ALBERT-base..xxlarge, CMRC2018"),
        note="dropout not given: the config's and run_squad.py's defaults"),
    # CLUE README, C3 row for ALBERT-base/large/xlarge: batch=24, length=512, epoch=8,
    # lr=2e-5, warmup=0.1 (xxlarge: batch 16).
    "c3": _epochs(
        2e-5, 24, 512, 8.0, source=CLUE_README.format(models="ALBERT-base/large/xlarge, C3"),
        note="dropout not given: the config's and run_race.py's defaults; ALBERT-xxlarge used "
             "batch 16"),
    # No published ALBERT setting: the OCNLI repository's BERT/RoBERTa baseline
    # (CLUEbenchmark/OCNLI README: lr 2e-5, batch 32, 3 epochs, length 128).
    "ocnli": _epochs(
        2e-5, 32, 128, 3.0, classifier_dropout=0.1,
        source="CLUEbenchmark/OCNLI README (BERT/RoBERTa baseline)",
        note="not ALBERT-specific: no ALBERT baseline was published for OCNLI; warmup 0.1 "
             "and head dropout 0.1 are the BERT run_classifier defaults"),
    # No published ALBERT setting: CLUEbenchmark/CLUENER2020 pytorch_version/scripts/
    # run_ner_crf.sh (BERT-base + CRF): train length 128, batch 24, lr 3e-5 (CRF lr 1e-3),
    # 4 epochs; head dropout = BERT's hidden_dropout_prob 0.1 (models/bert_for_ner.py).
    "cluener": _epochs(
        3e-5, 24, 128, 4.0, classifier_dropout=0.1,
        source="CLUEbenchmark/CLUENER2020 pytorch_version/scripts/run_ner_crf.sh (BERT-base CRF)",
        note="not ALBERT-specific: no ALBERT baseline was published for CLUENER; warmup 0.1 "
             "is the default of the upstream script's --warmup_proportion (not verified for "
             "the CLUENER2020 copy); the script's CRF learning rate 1e-3 has no flag here"),
}

# No published ALBERT setting: google-research/google-research goemotions/bert_classifier.py's
# defaults for the GoEmotions paper's BERT-base baseline (Demszky et al. 2020): length 50,
# batch 16, lr 5e-5, 4 epochs, warmup 0.1, head dropout 0.1 (keep_prob 0.9).
OTHER: Dict[str, Hparams] = {
    "goemotions": _epochs(
        5e-5, 16, 50, 4.0, classifier_dropout=0.1,
        source="google-research/google-research goemotions/bert_classifier.py defaults "
               "(BERT-base)",
        note="not ALBERT-specific: no ALBERT setting was published for GoEmotions; the "
             "paper's decision threshold 0.3 is replaced by thresholds tuned on dev "
             "(--multi_label_threshold)"),
}

TABLE: Dict[str, Hparams] = {**PAPER, **CLUE, **OTHER}

ALIASES: Dict[str, str] = {
    "sst2": "sst-2", "sst": "sst-2",
    "stsb": "sts-b", "sts": "sts-b",
    "mnli-m": "mnli", "mnli_m": "mnli", "mnli-mm": "mismnli", "mnli_mm": "mismnli",
    "squad": "squad_v1", "squad1": "squad_v1", "squad1.1": "squad_v1", "squad_v1.1": "squad_v1",
    "squad-v1": "squad_v1", "squadv1": "squad_v1", "squad11": "squad_v1",
    "squad2": "squad_v2", "squad2.0": "squad_v2", "squad_v2.0": "squad_v2",
    "squad-v2": "squad_v2", "squadv2": "squad_v2", "squad20": "squad_v2",
    "cmrc": "cmrc2018", "cmrc-2018": "cmrc2018", "cmrc_2018": "cmrc2018",
    "cluener2020": "cluener",
}

FlagValue = Union[int, float]

def canonical(task: str) -> Optional[str]:
    """The table's key for `task` (case-insensitive, aliases resolved), or None."""
    key = task.strip().lower()
    key = ALIASES.get(key, key)
    return key if key in TABLE else None


def lookup(task: str) -> Hparams:
    """The published hyperparameters of `task`; a one-line UserValueError when there are none."""
    key = canonical(task)
    if key is None:
        raise UserValueError(
            f"--hparams=paper: no published hyperparameters for task '{task}' "
            f"(the table covers: {', '.join(TABLE)}); drop --hparams or set the flags yourself")
    return TABLE[key]


def as_flags(hp: Hparams, flag_names: Sequence[str]) -> Dict[str, FlagValue]:
    """{flag name: value} for every published (non-None) value whose flag (of the same name
    as the field) the CLI has: `flag_names`. Fields it lacks are skipped: run_squad.py has no
    --train_step, so a SQuAD entry gives it --num_train_epochs and --warmup_proportion, which
    reproduce the steps."""
    return {field: getattr(hp, field) for field in VALUE_FIELDS
            if getattr(hp, field) is not None and field in flag_names}


def _fmt(value: FlagValue) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def describe(hp: Hparams, task: Optional[str] = None) -> str:
    """One log line: the published values and where they come from."""
    values = ", ".join(f"{field}={_fmt(getattr(hp, field))}" for field in VALUE_FIELDS
                       if getattr(hp, field) is not None)
    head = f"--hparams=paper ({task}): " if task else "--hparams=paper: "
    note = f"; note: {hp.note}" if hp.note else ""
    return f"{head}{values} (source: {hp.source}{note})"
