"""The best checkpoint of a run: every evaluation recorded, the best one exported.

`BestCheckpointTracker` appends each evaluation to eval_results.txt and keeps the best
weights as `model.ckpt-best` in the official TF1 format (pretraining by held-out
masked-LM accuracy, fine-tuning by the task's metric); `evaluate_unrecorded_checkpoint`
makes a resumed run evaluate the checkpoint an interruption left unevaluated.
"""
from __future__ import annotations

import json
import math
import os
from typing import Callable, Dict

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import fileio
from albert_tf.checkpoints import tf1
from albert_tf.training import loop

BEST_PREFIX = "model.ckpt-best"
CHECKPOINT_SUBDIR = "checkpoints"


class BestCheckpointTracker:
    """Appends evaluations to eval_results.txt and exports the best weights as TF1.

    eval_results.txt holds the original's `key = value` lines, one block per
    evaluation (a bool, e.g. `collapsed`, written `true` / `false`; `parse_value` reads
    a value back). The best evaluation (by `metric`) is kept in `best_eval.json`
    and `best_trial.txt` (`global_step:best_step:best_value`, as the original),
    and its weights in `model.ckpt-best.{index,data-*}`. State survives restarts.
    Non-chief workers (`write=False`) track but write nothing.

    Interruptions: an evaluation's block is appended to eval_results.txt last,
    after a new best's export, best_trial.txt and best_eval.json (in that
    order), so a step missing from eval_results.txt was not fully recorded and
    `evaluated_steps` lets the resumed run evaluate it again.
    """

    def __init__(self, output_dir: str, metric: str, higher_is_better: bool = True,
                 write: bool = True):
        self.output_dir = output_dir
        self.metric = metric
        self.higher_is_better = higher_is_better
        self.write = write
        self.state_path = os.path.join(output_dir, "best_eval.json")
        self.best = None
        if tf.io.gfile.exists(self.state_path):
            with tf.io.gfile.GFile(self.state_path) as handle:
                self.best = json.load(handle)

    def evaluated_steps(self) -> set:
        """The global steps whose evaluation eval_results.txt records."""
        path = os.path.join(self.output_dir, "eval_results.txt")
        if not tf.io.gfile.exists(path):
            return set()
        with tf.io.gfile.GFile(path) as handle:
            return {int(float(line.split("=", 1)[1])) for line in handle.read().splitlines()
                    if line.startswith("global_step =")}

    def _improves(self, value: float) -> bool:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
            raise TypeError(f"the metric {self.metric!r} must be a number, got {value!r}")
        if not math.isfinite(value):  # a NaN or infinite evaluation is never the best
            return False
        if self.best is None:
            return True
        return value > self.best[self.metric] if self.higher_is_better \
            else value < self.best[self.metric]

    def record(self, step: int, metrics: Dict[str, float], model,
               summary_writer=None) -> bool:
        """Records one evaluation; returns True when it is the new best (and was exported)."""
        if self.metric not in metrics:
            raise KeyError(f"evaluation returned no {self.metric!r} (got {sorted(metrics)})")
        # NumPy bools as Python's: JSON `true`, never a number.
        metrics = {key: bool(value) if isinstance(value, np.bool_) else value
                   for key, value in metrics.items()}
        # No file holds a NaN or infinite figure: such a metric is named, not written.
        nonfinite = sorted(key for key, value in metrics.items()
                           if isinstance(value, (float, np.floating))
                           and not math.isfinite(value))
        if nonfinite:
            logging.warning("eval at step %d: %s not finite; not recorded, and this "
                            "checkpoint cannot be the best", step, ", ".join(nonfinite))
            metrics = {key: value for key, value in metrics.items() if key not in nonfinite}
            metrics["nonfinite_metrics"] = ",".join(nonfinite)
        results = dict(metrics, global_step=step)
        # Per-class values (`f1/<label>`) go to the files, not to the one log line.
        grouped = sum("/" in k for k in metrics)
        logging.info("eval at step %d: %s%s", step,
                     " | ".join(f"{k} {format_value(v)}" if isinstance(v, bool) else
                                f"{k} {v:.4g}" for k, v in sorted(metrics.items())
                                if isinstance(v, (int, float)) and "/" not in k),
                     f" (and {grouped} per-label values: eval_results.txt)" if grouped else "")
        improved = self.metric in metrics and self._improves(metrics[self.metric])
        if not self.write:
            self.best = results if improved else self.best
            return improved
        if summary_writer is not None:
            with summary_writer.as_default(step=step):
                for key, value in metrics.items():
                    if isinstance(value, (int, float)):  # a bool as 0 / 1
                        tf.summary.scalar(key, float(value))
            # Now: a preempted or failed run ends with os._exit, which flushes nothing.
            summary_writer.flush()
        if improved:
            tf1.save_tf1_checkpoint(model, os.path.join(self.output_dir, BEST_PREFIX),
                                            global_step=step)
            fileio.atomic_write_text(os.path.join(self.output_dir, "best_trial.txt"),
                                     f"{step}:{step}:{metrics[self.metric]}\n")
            fileio.atomic_write_text(self.state_path,
                                     json.dumps(results, indent=2, default=float) + "\n")
            self.best = results
            logging.info("new best %s %.4g: exported %s", self.metric, metrics[self.metric],
                         BEST_PREFIX)
        path = os.path.join(self.output_dir, "eval_results.txt")
        previous = ""
        if tf.io.gfile.exists(path):
            with tf.io.gfile.GFile(path) as handle:
                previous = handle.read()
        lines = [f"{key} = {format_value(results[key])}" for key in sorted(results)]
        fileio.atomic_write_text(path, previous + "\n".join(lines) + "\n")
        return improved


def format_value(value) -> str:
    """A value as eval_results.txt writes it: bools `true` / `false`, the rest by str()."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    return str(value)


def parse_value(text: str):
    """A value of eval_results.txt back: `true` / `false` as bools, numbers as int or
    float (`nan`, `inf` included), anything else as the string."""
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_eval_results(output_dir: str):
    """The evaluations output_dir/eval_results.txt records, in order: one dict per block
    (each block's keys are sorted, so a key not after the previous one starts the next
    block), values as `parse_value` reads them."""
    path = os.path.join(output_dir, "eval_results.txt")
    if not tf.io.gfile.exists(path):
        return []
    blocks, previous = [], None
    with tf.io.gfile.GFile(path) as handle:
        for line in handle.read().splitlines():
            if " = " not in line:
                continue
            key, value = line.split(" = ", 1)
            if previous is None or key <= previous:
                blocks.append({})
            blocks[-1][key] = parse_value(value)
            previous = key
    return blocks


def evaluate_unrecorded_checkpoint(trainer: loop.Trainer, tracker: BestCheckpointTracker,
                                   evaluate_now: Callable[[int], None]) -> None:
    """Before a resumed run trains on: evaluates the latest checkpoint if eval_results.txt
    does not record it (the previous run was interrupted between saving and recording it),
    so that every checkpoint is evaluated once, as in an uninterrupted run."""
    latest = tf.train.latest_checkpoint(trainer.config.output_dir)
    if latest is None:
        return
    step = int(latest.rsplit("-", 1)[1])
    if step in tracker.evaluated_steps():
        return
    if not trainer.config.scheduled_checkpoint(step):
        return  # a preempted run's checkpoint, off the schedule: not an evaluation point
    trainer.restore_latest()
    logging.info("%s was saved but not evaluated (an interrupted run): evaluating it first",
                 latest)
    evaluate_now(step)
