"""Every CLI keeps its flags: names, types, defaults and what --help lists, as recorded in
tests/cli/flags_record.json before the flags moved beside their options (issue 45).

A flag may be added (listed in ADDED with why); none may disappear or change."""
import json
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

RECORD = REPO_ROOT / "tests" / "cli" / "flags_record.json"
CLIS = ("run_classifier", "run_squad", "run_race", "run_ner", "run_pretraining")
# Every training CLI's runtime flags gained since the record, and why.
RUNTIME_ADDED = {"worker_timeout_seconds": "a lost worker stops the others (issue 48)"}
# Every fine-tuning CLI's light inference (issue 56): fewer layers, exits, early exit.
LIGHT_INFERENCE = {flag: "light inference (issue 56)" for flag in (
    "exit_heads", "inference_layers", "patience", "exit_confidence", "exit_tolerance")}
# Flags a CLI gained since the record, and why.
ADDED = {
    # One name for the task head's dropout in every CLI; --dropout_prob (the original's
    # name in these two) is still accepted, with a warning.
    "run_race": {"classifier_dropout": "one dropout flag name", **RUNTIME_ADDED,
                 **LIGHT_INFERENCE},
    "run_squad": {"classifier_dropout": "one dropout flag name", **RUNTIME_ADDED,
                  **LIGHT_INFERENCE},
    # Multi-label classification (GoEmotions, custom --multi_label) and its thresholds.
    "run_classifier": {"multi_label": "custom multi-label task",
                       "multi_label_threshold": "multi-label decision thresholds",
                       "long_text": "texts longer than the model",
                       "doc_stride": "--long_text=windows' step (run_squad.py's name)",
                       "window_aggregation": "--long_text=windows' aggregation",
                       **RUNTIME_ADDED, **LIGHT_INFERENCE},
    "run_ner": {**RUNTIME_ADDED, **LIGHT_INFERENCE},
    "run_pretraining": RUNTIME_ADDED,
}


@pytest.fixture(scope="module")
def current():
    """Each CLI's flags now, recorded in one subprocess per CLI (absl's flags are global)."""
    runs = {cli: subprocess.Popen([sys.executable, "tests/helpers/cli_flag_record.py", cli],
                                  cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env={**__import__("os").environ,
                                                  "PYTHONPATH": str(REPO_ROOT)})
            for cli in CLIS}
    out = {}
    for cli, run in runs.items():
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr
        out[cli] = json.loads(stdout)
    return out


@pytest.mark.parametrize("cli", CLIS)
def test_every_recorded_flag_keeps_its_type_default_and_help_listing(current, cli):
    recorded = json.loads(RECORD.read_text())[cli]
    now = current[cli]
    missing = sorted(set(recorded) - set(now))
    assert not missing, f"{cli} lost flags: {missing}"
    changed = {name: (recorded[name], now[name]) for name in recorded
               if recorded[name] != now[name]}
    assert not changed, f"{cli} changed flags: {changed}"


@pytest.mark.parametrize("cli", CLIS)
def test_added_flags_are_the_declared_ones(current, cli):
    recorded = json.loads(RECORD.read_text())[cli]
    assert sorted(set(current[cli]) - set(recorded)) == sorted(ADDED.get(cli, {}))
