"""`--hparams=paper` data: the tables equal their sources; lookup, as_flags, describe.

The expected values are written out here independently of albert_tf.finetuning.hparams:
the ALBERT paper's appendix A.4 Table 14 row by row, and the CLUE baselines' scripts and
README. Pure Python: no TensorFlow.
"""
import dataclasses
import subprocess
import sys

import pytest

from albert_tf.errors import UserError, UserValueError
from albert_tf.finetuning import hparams
from tests.conftest import REPO_ROOT

# ALBERT paper (arXiv 1909.11942), appendix A.4, Table 14:
# task, LR, BSZ, ALBERT DR, Classifier DR, TS, WS, MSL
PAPER_TABLE_14 = [
    ("cola", 1e-5, 16, 0.0, 0.1, 5336, 320, 512),
    ("sts-b", 2e-5, 16, 0.0, 0.1, 3598, 214, 512),
    ("sst-2", 1e-5, 32, 0.0, 0.1, 20935, 1256, 512),
    ("mnli", 3e-5, 128, 0.0, 0.1, 10000, 1000, 512),
    ("qnli", 1e-5, 32, 0.0, 0.1, 33112, 1986, 512),
    ("qqp", 5e-5, 128, 0.1, 0.1, 14000, 1000, 512),
    ("rte", 3e-5, 32, 0.1, 0.1, 800, 200, 512),
    ("mrpc", 2e-5, 32, 0.0, 0.1, 800, 200, 512),
    ("wnli", 2e-5, 16, 0.1, 0.1, 2000, 250, 512),
    ("squad_v1", 5e-5, 48, 0.0, 0.1, 3649, 365, 384),
    ("squad_v2", 3e-5, 48, 0.0, 0.1, 8144, 814, 512),
    ("race", 2e-5, 32, 0.1, 0.1, 12000, 1000, 512),
]

# google-research/albert run_glue.sh: run_task TASK WS LR TS SAVE BSZ (max_seq_length 512).
RUN_GLUE_SH = [
    ("sst-2", 1256, 1e-5, 20935, 32),
    ("mnli", 1000, 3e-5, 10000, 128),
    ("cola", 320, 1e-5, 5336, 16),
    ("qnli", 1986, 1e-5, 33112, 32),
    ("qqp", 1000, 5e-5, 14000, 128),
    ("rte", 200, 3e-5, 800, 32),
    ("sts-b", 214, 2e-5, 3598, 16),
    ("mrpc", 200, 2e-5, 800, 32),
]

# CLUE: task, LR, batch, max length, epochs, warmup proportion, ALBERT DR, classifier DR
CLUE_TABLE = [
    # baselines/models/albert/run_classifier_<task>.sh (albert_xlarge_zh) + run_classifier.py
    ("afqmc", 3e-5, 16, 128, 2.0, 0.1, None, 0.1),
    ("tnews", 3e-5, 16, 128, 2.0, 0.1, None, 0.1),
    ("iflytek", 3e-5, 16, 128, 2.0, 0.1, None, 0.1),
    ("cmnli", 3e-5, 16, 128, 2.0, 0.1, None, 0.1),
    ("csl", 3e-5, 16, 128, 2.0, 0.1, None, 0.1),
    # CLUE README: CMRC2018 ALBERT-base..xxlarge, C3 ALBERT-base/large/xlarge
    ("cmrc2018", 3e-5, 32, 512, 2.0, 0.1, None, None),
    ("c3", 2e-5, 24, 512, 8.0, 0.1, None, None),
    # No ALBERT baseline: OCNLI repo BERT setting; CLUENER2020 pytorch run_ner_crf.sh (BERT)
    ("ocnli", 2e-5, 32, 128, 3.0, 0.1, None, 0.1),
    ("cluener", 3e-5, 24, 128, 4.0, 0.1, None, 0.1),
]


@pytest.mark.parametrize("row", PAPER_TABLE_14, ids=[r[0] for r in PAPER_TABLE_14])
def test_paper_entries_equal_table_14(row):
    task, lr, bsz, albert_dr, classifier_dr, ts, ws, msl = row
    hp = hparams.lookup(task)
    assert hp is hparams.PAPER[task]
    assert (hp.learning_rate, hp.train_batch_size, hp.albert_dropout, hp.classifier_dropout,
            hp.train_step, hp.warmup_step, hp.max_seq_length) == (lr, bsz, albert_dr,
                                                                  classifier_dr, ts, ws, msl)
    assert "Table 14" in hp.source


def test_paper_table_is_complete():
    expected = {row[0] for row in PAPER_TABLE_14} | {"mismnli"}
    assert set(hparams.PAPER) == expected
    assert hparams.PAPER["mismnli"] == hparams.PAPER["mnli"]


@pytest.mark.parametrize("row", RUN_GLUE_SH, ids=[r[0] for r in RUN_GLUE_SH])
def test_glue_entries_match_run_glue_sh(row):
    task, ws, lr, ts, bsz = row
    hp = hparams.lookup(task)
    assert (hp.warmup_step, hp.learning_rate, hp.train_step, hp.train_batch_size,
            hp.max_seq_length) == (ws, lr, ts, bsz, 512)
    assert "run_glue.sh" in hp.source


def test_glue_entries_give_steps_not_epochs():
    for task in ("cola", "sts-b", "sst-2", "mnli", "qnli", "qqp", "rte", "mrpc", "wnli",
                 "race"):
        hp = hparams.lookup(task)
        assert hp.num_train_epochs is None and hp.warmup_proportion is None, task


def test_squad_entries_carry_equivalent_epochs():
    """run_squad.py counts in epochs: int(examples / batch * epochs) must give the paper's steps."""
    for task, examples, epochs, steps, warmup in (("squad_v1", 87599, 2.0, 3649, 365),
                                                  ("squad_v2", 130319, 3.0, 8144, 814)):
        hp = hparams.lookup(task)
        assert hp.num_train_epochs == epochs and hp.warmup_proportion == 0.1
        assert int(examples / hp.train_batch_size * hp.num_train_epochs) == steps == hp.train_step
        assert hp.warmup_step == warmup
        assert abs(hp.warmup_step - hp.train_step * hp.warmup_proportion) <= 1
        assert "epoch" in hp.note


def test_race_note_names_the_v2_setting():
    note = hparams.lookup("race").note
    assert "1e-5" in note and "v2" in note and "--albert_dropout=0" in note


@pytest.mark.parametrize("row", CLUE_TABLE, ids=[r[0] for r in CLUE_TABLE])
def test_clue_entries(row):
    task, lr, bsz, msl, epochs, warmup, albert_dr, classifier_dr = row
    hp = hparams.lookup(task)
    assert hp is hparams.CLUE[task]
    assert (hp.learning_rate, hp.train_batch_size, hp.max_seq_length, hp.num_train_epochs,
            hp.warmup_proportion, hp.albert_dropout, hp.classifier_dropout) == (
        lr, bsz, msl, epochs, warmup, albert_dr, classifier_dr)
    assert hp.train_step is None and hp.warmup_step is None
    assert "CLUE" in hp.source


def test_clue_table_is_complete_and_sources_are_specific():
    assert set(hparams.CLUE) == {row[0] for row in CLUE_TABLE}
    for task in ("afqmc", "tnews", "iflytek", "cmnli", "csl"):
        source = hparams.CLUE[task].source
        assert f"run_classifier_{task}.sh" in source and "albert_xlarge_zh" in source
    for task in ("ocnli", "cluener"):
        assert "not ALBERT-specific" in hparams.CLUE[task].note


def test_every_entry_has_a_source():
    for task, hp in hparams.TABLE.items():
        assert hp.source.strip(), task


def test_entries_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        hparams.lookup("rte").learning_rate = 1.0


@pytest.mark.parametrize("alias,task", [
    ("SST-2", "sst-2"), ("sst2", "sst-2"), ("stsb", "sts-b"), ("STS-B", "sts-b"),
    ("CoLA", "cola"), ("MNLI", "mnli"), ("mismnli", "mnli"), ("squad", "squad_v1"),
    ("squad1.1", "squad_v1"), ("SQuAD_v1", "squad_v1"), ("squad2.0", "squad_v2"),
    ("squad_v2", "squad_v2"), ("cmrc", "cmrc2018"), ("CMRC2018", "cmrc2018"),
    (" afqmc ", "afqmc"), ("RACE", "race"), ("C3", "c3"), ("CLUENER", "cluener"),
])
def test_aliases(alias, task):
    assert hparams.lookup(alias) == hparams.TABLE[task]


@pytest.mark.parametrize("task", ["conll2003", "msra", "custom", "", "squad3"])
def test_unknown_task_is_one_line_naming_the_flag(task):
    with pytest.raises(UserValueError) as info:
        hparams.lookup(task)
    message = str(info.value)
    assert isinstance(info.value, UserError) and isinstance(info.value, ValueError)
    assert "\n" not in message
    assert message.startswith("--hparams=paper")
    assert f"'{task}'" in message
    assert "cola" in message and "squad_v2" in message and "afqmc" in message


def test_as_flags_classifier():
    flags = hparams.as_flags(hparams.lookup("rte"), hparams.VALUE_FIELDS)
    assert flags == {"learning_rate": 3e-5, "train_batch_size": 32, "max_seq_length": 512,
                     "train_step": 800, "warmup_step": 200, "albert_dropout": 0.1,
                     "classifier_dropout": 0.1}


def test_as_flags_skips_fields_the_cli_lacks():
    squad_cli = [name for name in hparams.VALUE_FIELDS
                 if name not in ("train_step", "warmup_step")]  # run_squad counts epochs
    flags = hparams.as_flags(hparams.lookup("squad2.0"), squad_cli)
    assert flags == {"learning_rate": 3e-5, "train_batch_size": 48, "max_seq_length": 512,
                     "num_train_epochs": 3.0, "warmup_proportion": 0.1, "albert_dropout": 0.0,
                     "classifier_dropout": 0.1}
    only_lr = hparams.as_flags(hparams.lookup("cola"), ["learning_rate"])
    assert only_lr == {"learning_rate": 1e-5}


def test_as_flags_omits_unpublished_values():
    flags = hparams.as_flags(hparams.lookup("afqmc"), hparams.VALUE_FIELDS)
    assert flags == {"learning_rate": 3e-5, "train_batch_size": 16, "max_seq_length": 128,
                     "num_train_epochs": 2.0, "warmup_proportion": 0.1,
                     "classifier_dropout": 0.1}
    race = hparams.as_flags(hparams.lookup("race"), hparams.VALUE_FIELDS)
    assert race["classifier_dropout"] == 0.1
    assert race["train_step"] == 12000 and race["warmup_step"] == 1000


def test_describe_is_one_line_with_values_and_source():
    hp = hparams.lookup("cola")
    line = hparams.describe(hp)
    assert "\n" not in line
    assert hp.source in line
    for text in ("learning_rate=1e-05", "train_batch_size=16", "train_step=5336",
                 "warmup_step=320", "max_seq_length=512", "albert_dropout=0",
                 "classifier_dropout=0.1"):
        assert text in line
    assert "cola" in hparams.describe(hp, task="cola")
    assert "CLUENER2020" in hparams.describe(hparams.lookup("cluener"))


def test_module_does_not_import_tensorflow():
    code = ("import sys; import albert_tf.finetuning.hparams; "
            "print('tensorflow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO_ROOT, check=True)
    assert done.stdout.strip() == "False", done.stderr
