"""Whose run an --output_dir holds: refuse to resume or overwrite another task's run.

Every fine-tuning and pretraining run records what it is in
`<output_dir>/albert_tf_run.json` (`RunIdentity`: the task, the model config's
architecture fields and what else fixes the weights' shapes or the metric).
A later run in the same directory must have the same identity: resuming the
same task and model works as before, while another task (a GLUE mrpc run
reused for sts-b), a fine-tuning run in a pretraining run's directory, or
another model config is a `OutputDirError` naming the directory, what it
holds and what to do, raised before anything there is written.

A directory without the record (written before it existed, or by another
tool) is judged by its files: `albert_config.json` beside `checkpoints/` or
`model.ckpt-best.*` is a pretraining run or a downloaded model (refused for
fine-tuning; for pretraining its config must match), a fine-tuning run's
`best_eval.json` must hold this task's metric; anything else is adopted with a
warning. A record naming another task in a directory with no run output yet
(e.g. left by a run that failed at its start) is replaced.
"""
from __future__ import annotations

import dataclasses
import json
import os
import uuid
from typing import Dict, List, Optional

from absl import logging

from albert_tf import errors, fileio

RECORD = "albert_tf_run.json"
FINETUNING = "fine-tuning"
PRETRAINING = "pretraining"
# The config fields that decide the weights' shapes and the computation (not dropout).
ARCHITECTURE_FIELDS = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                       "num_hidden_groups", "num_attention_heads", "intermediate_size",
                       "inner_group_num", "hidden_act", "max_position_embeddings",
                       "type_vocab_size", "parameter_sharing")
# What the runs write that a later run resumes from or overwrites.
RUN_OUTPUTS = ("checkpoints", "model.ckpt-best.index", "best_eval.json", "eval_results.txt",
               "best_trial.txt", "test_results.tsv", "submit_results.tsv", "predictions.json",
               "predictions.jsonl", "predict_results.json", "predict_results.txt")
CONFIG_FILE = "albert_config.json"


class OutputDirError(errors.UserError):
    """--output_dir cannot be written, or holds a run of another task or model."""


@dataclasses.dataclass(frozen=True)
class RunIdentity:
    """What a run is: `kind` (fine-tuning or pretraining), `task` ("mrpc", "race",
    "squad v2.0", "pretraining", ...), `model` (the config's ARCHITECTURE_FIELDS) and
    `details` (e.g. the label list and the best-checkpoint metric)."""

    kind: str
    task: str
    model: Dict[str, object] = dataclasses.field(default_factory=dict)
    details: Dict[str, object] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, kind: str, task: str, config=None, **details) -> "RunIdentity":
        """The identity of a run of `task` with an AlbertConfig `config` (None: unknown)."""
        model = {}
        if config is not None:
            values = config.to_dict()
            model = {name: values[name] for name in ARCHITECTURE_FIELDS if name in values}
        # JSON round trip: tuples become lists, as they are read back from the record.
        return cls(kind, task, model, json.loads(json.dumps(details)))

    def to_json(self) -> Dict[str, object]:
        return {"kind": self.kind, "task": self.task, "model": self.model,
                "details": self.details, "format": 1}

    @classmethod
    def from_json(cls, value: Dict[str, object]) -> "RunIdentity":
        return cls(str(value.get("kind")), str(value.get("task")), dict(value.get("model") or {}),
                   dict(value.get("details") or {}))


def _gfile():
    import tensorflow as tf  # gfile: local paths and object stores alike

    return tf.io.gfile


def held_outputs(output_dir: str) -> List[str]:
    """The RUN_OUTPUTS present in `output_dir` (`checkpoints/` only when not empty)."""
    gfile = _gfile()
    found = []
    for name in RUN_OUTPUTS + (CONFIG_FILE,):
        path = os.path.join(output_dir, name)
        if name == "checkpoints":
            if gfile.isdir(path) and gfile.listdir(path):
                found.append("checkpoints/")
        elif gfile.exists(path):
            found.append(name)
    return found


def describe(identity: RunIdentity) -> str:
    """The run in words: `a pretraining run`, `a fine-tuning run of mrpc`, ..."""
    if identity.kind == PRETRAINING:
        return "a pretraining run"
    return f"a {identity.kind} run of {identity.task}"


def _changed(old: Dict[str, object], new: Dict[str, object]) -> str:
    return "; ".join(f"{k} {old.get(k)} there, {new.get(k)} here"
                     for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k))


def _differences(old: RunIdentity, new: RunIdentity) -> Optional[str]:
    """How `old` (the directory's) differs from `new` (this run's), or None."""
    if (old.kind, old.task) != (new.kind, new.task):
        return f"{describe(old)}, not {describe(new)}"
    if old.model != new.model and old.model and new.model:
        return f"{describe(old)} with another model config: {_changed(old.model, new.model)}"
    if old.details != new.details:
        return f"{describe(old)} with other settings: {_changed(old.details, new.details)}"
    return None


def _refuse(output_dir: str, holds: List[str], what: str) -> OutputDirError:
    return OutputDirError(
        f"--output_dir={output_dir} holds {what} (it has {', '.join(holds)}): give another "
        f"--output_dir, or delete {output_dir} to start over")


def _legacy_owner(output_dir: str, identity: RunIdentity, holds: List[str]) -> Optional[str]:
    """Why a directory without a record is not `identity`'s run (None: it may be)."""
    gfile = _gfile()
    config_path = os.path.join(output_dir, CONFIG_FILE)
    has_model = "checkpoints/" in holds or "model.ckpt-best.index" in holds
    if identity.kind == PRETRAINING:
        if CONFIG_FILE not in holds:
            return "another run, not a pretraining run (which has albert_config.json)"
        if "checkpoints/" not in holds and "model.ckpt-best.index" in holds:
            return "a model without checkpoints/ (a downloaded model?), not a pretraining run"
        try:
            with gfile.GFile(config_path) as handle:
                theirs = json.load(handle)
        except (ValueError, OSError):
            return None
        found = RunIdentity.of(PRETRAINING, PRETRAINING)
        found = dataclasses.replace(found, model={k: theirs[k] for k in identity.model
                                                  if k in theirs})
        return _differences(found, identity)
    if CONFIG_FILE in holds and has_model:
        return f"a pretraining run or a downloaded model, not {describe(identity)}"
    metric = identity.details.get("metric")
    best_path = os.path.join(output_dir, "best_eval.json")
    if metric and "best_eval.json" in holds:
        try:
            with gfile.GFile(best_path) as handle:
                best = json.load(handle)
        except (ValueError, OSError):
            return None
        if isinstance(best, dict) and metric not in best:
            return (f"a run of another task (its best_eval.json has no {metric}), not "
                    f"{describe(identity)}")
    return None


def _check_writable(output_dir: str) -> None:
    import tensorflow as tf

    gfile = _gfile()
    if "://" not in output_dir and os.path.exists(output_dir) \
            and not os.path.isdir(output_dir):
        raise OutputDirError(f"--output_dir={output_dir} is a file, not a directory; give "
                             "a directory")
    try:
        gfile.makedirs(output_dir)
        probe = os.path.join(output_dir, f".albert_tf_write_test-{uuid.uuid4().hex[:8]}")
        with gfile.GFile(probe, "w") as handle:
            handle.write("")
        gfile.remove(probe)
    except (OSError, tf.errors.OpError) as err:
        reason = getattr(err, "message", None) or getattr(err, "strerror", None) or str(err)
        raise OutputDirError(f"--output_dir={output_dir}: cannot create or write it "
                             f"({reason.strip()}); give a writable --output_dir") from None


def read_record(output_dir: str) -> Optional[RunIdentity]:
    """The identity recorded in `output_dir`, None when there is none."""
    gfile = _gfile()
    path = os.path.join(output_dir, RECORD)
    if not gfile.exists(path):
        return None
    try:
        with gfile.GFile(path) as handle:
            value = json.load(handle)
        if not isinstance(value, dict):
            raise ValueError("not a JSON object")
    except ValueError as err:
        raise OutputDirError(f"{path}: unreadable run record ({err}); delete it if "
                             f"{output_dir} holds a run of this task, else give another "
                             "--output_dir") from None
    return RunIdentity.from_json(value)


def check_output_dir(output_dir: str, identity: RunIdentity) -> bool:
    """Creates `output_dir` and checks it may hold `identity`'s run (OutputDirError if not).

    Returns whether the record must be (re)written. Writes nothing but the directory.
    """
    _check_writable(output_dir)
    holds = held_outputs(output_dir)
    recorded = read_record(output_dir)
    if recorded is not None:
        difference = _differences(recorded, identity)
        if difference is None:
            return False
        # albert_config.json alone is not a run output (users keep configs beside runs).
        if [name for name in holds if name != CONFIG_FILE]:
            raise _refuse(output_dir, holds, difference)
        logging.info("%s: replacing the record of %s (no run output yet)", output_dir,
                     recorded.task)
        return True
    if holds:
        reason = _legacy_owner(output_dir, identity, holds)
        if reason is not None:
            raise _refuse(output_dir, holds, reason)
        if [name for name in holds if name != CONFIG_FILE]:
            logging.warning("%s has no %s (a run of an older version?): assuming it holds a "
                            "%s run of %s", output_dir, RECORD, identity.kind, identity.task)
    return True


def claim_output_dir(output_dir: str, identity: RunIdentity, write: bool = True) -> None:
    """`check_output_dir`, then records `identity` in `output_dir` (when `write`: the chief)."""
    if check_output_dir(output_dir, identity) and write:
        fileio.atomic_write_text(os.path.join(output_dir, RECORD),
                                 json.dumps(identity.to_json(), indent=2, sort_keys=True) + "\n")
