"""Several fine-tunings of one task with different seeds: the paper's median-of-N protocol.

`run_seeds` runs one job per seed, one after another, each in `<output_dir>/seed_<s>/`
(a complete run directory of its own: checkpoints, eval_results.txt, model.ckpt-best,
predictions), then reports each seed's best dev figure, their median and the best seed,
in the log and in `<output_dir>/seed_results.json`, and exports the best seed's weights
to --export_dir. A finished seed leaves `seed_<s>/seed_result.json`; a rerun of the same
command skips those seeds and resumes the interrupted one from its checkpoints. A seed
that diverges (the guard stops it) is recorded as diverged and the next one runs; the
median and the best are over the seeds that finished.
"""
from __future__ import annotations

import dataclasses
import gc
import json
import os
import statistics
from typing import Callable, Dict, List, Optional, Sequence

import keras
import tensorflow as tf
from absl import logging

from albert_tf import errors, fileio
from albert_tf.export import formats
from albert_tf.finetuning.options import TaskOptions
from albert_tf.training.loop import DivergenceError

SEED_RESULT = "seed_result.json"
SEED_RESULTS = "seed_results.json"
_NO_EVALUATION = ("{what} a multi-seed run compares the seeds on the dev set: it needs "
                  "--do_eval (run_squad.py: --do_predict on a file with answers)")


def seed_dir(output_dir: str, seed: int) -> str:
    return os.path.join(output_dir, f"seed_{seed}")


def run_seeds(make_job: Callable, options: TaskOptions, seeds: Sequence[int],
              strategy: Optional[tf.distribute.Strategy] = None) -> Dict:
    """Fine-tunes once per seed of `seeds` and summarises; returns the summary dict
    (`metric`, `seeds`: [{seed, value, step, collapsed, output_dir}], `median`,
    `best_seed`, `best_value`, `best_output_dir`, and when exported `export_dir` and the
    paths of the ONNX / LiteRT files, as a job's results name them).

    make_job(options, strategy) -> a FinetuningJob (e.g. ClassificationJob). The jobs are compared
    by their dev metric, so the run must evaluate (--do_eval; SQuAD: --do_predict on a
    file with answers). Each seed's feature caches go to `cached_dir` (the parent
    output_dir by default) where the task has one, so they are built once.
    """
    if not seeds:
        raise errors.UserValueError("--num_seeds / --seeds: no seed to run")
    records: List[Dict] = []
    metric, higher_is_better = None, True
    for index, seed in enumerate(seeds):
        job = make_job(_seed_options(options, seed), strategy)
        metric, higher_is_better = job.metric, job.higher_is_better
        if not job.evaluates():
            raise errors.UserValueError(_NO_EVALUATION.format(what="--num_seeds / --seeds:"))
        record = _finished(job.options)
        if record is not None:
            logging.info("seed %d (%d of %d): finished earlier%s", seed, index + 1, len(seeds),
                         ", diverged" if record["value"] is None else
                         f", {record['metric']} {record['value']:.4g}")
        else:
            logging.info("seed %d (%d of %d): fine-tuning in %s", seed, index + 1, len(seeds),
                         job.options.output_dir)
            record = _run_one(job, seed)
            _release_memory()
        records.append(record)
    summary = _summarise(records, metric, higher_is_better, options.output_dir)
    if options.export_dir:
        # No training, and export_trained neither evaluates nor predicts; --do_predict is
        # kept as given: run_squad.py's job needs it (or --do_train) to be a job at all, and
        # its int8 check reads the predict file's features.
        best = make_job(dataclasses.replace(
            _seed_options(options, summary["best_seed"]), export_dir=options.export_dir,
            export_format=options.export_format, export_int8=options.export_int8,
            export_fp16=options.export_fp16, do_train=False), strategy)
        exported = best.export_trained()
        summary.update({key: value for key, value in exported.items()
                        if key == "export_dir" or key.startswith(("onnx", "tflite"))})
        _write_summary(options.output_dir, summary)  # now with what was exported
    return summary


def _seed_options(options: TaskOptions, seed: int) -> TaskOptions:
    """One seed's run: its own output_dir, no export (the best seed's comes at the end)."""
    changes = dict(output_dir=seed_dir(options.output_dir, seed), seed=seed, export_dir=None,
                   export_format=formats.DEFAULT_EXPORT_FORMATS, export_int8=False,
                   export_fp16=False)
    if hasattr(options, "cached_dir") and not getattr(options, "cached_dir"):
        changes["cached_dir"] = options.output_dir
    return dataclasses.replace(options, **changes)


# The options a finished seed must share with the rerun that skips it.
SETTINGS = ("learning_rate", "train_batch_size", "train_step", "warmup_step",
            "num_train_epochs", "warmup_proportion", "max_seq_length", "optimizer")


def _settings(options: TaskOptions) -> Dict:
    return {name: getattr(options, name) for name in SETTINGS if hasattr(options, name)}


def _finished(options: TaskOptions) -> Optional[Dict]:
    """The record of a seed that finished earlier with these settings, None when it has
    not; a UserError when it finished with other settings (the summary would mix them)."""
    path = os.path.join(options.output_dir, SEED_RESULT)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as handle:
        record = json.load(handle)
    now = _settings(options)
    changed = [f"--{name} {record['settings'][name]} (now {now[name]})" for name in now
               if name in record.get("settings", {}) and record["settings"][name] != now[name]]
    if changed:
        raise errors.UserValueError(
            f"{options.output_dir} finished with other settings: {', '.join(changed)}; give "
            f"another --output_dir, or delete {options.output_dir} to run it again")
    return record


def _run_one(job, seed: int) -> Dict:
    """Runs one seed's job; records its best evaluation (or its divergence: the guard
    stopped it) in seed_<s>/seed_result.json."""
    try:
        results = job.run()
    except DivergenceError as err:
        logging.warning("seed %d diverged and stopped: %s", seed, err)
        record = {"seed": seed, "metric": job.metric, "value": None, "diverged": str(err),
                  "output_dir": job.options.output_dir, "settings": _settings(job.options)}
        _write_record(job, record)
        return record
    best = results.get("best")
    if not best or job.metric not in best:
        raise errors.UserValueError(_NO_EVALUATION.format(
            what=f"seed {seed}: the run recorded no {job.metric} to compare the seeds by;"))
    record = {"seed": seed, "metric": job.metric, "value": float(best[job.metric]),
              "step": int(best.get("global_step", results.get("global_step", 0))),
              "collapsed": bool(best.get("collapsed", False)),
              "output_dir": job.options.output_dir, "settings": _settings(job.options)}
    _write_record(job, record)
    return record


def _write_record(job, record: Dict) -> None:
    if job.chief:
        fileio.atomic_write_text(os.path.join(job.options.output_dir, SEED_RESULT),
                                 json.dumps(record, indent=2) + "\n")


def _release_memory() -> None:
    """Frees the finished seed's model before the next one is built."""
    keras.backend.clear_session()
    gc.collect()


def _summarise(records: List[Dict], metric: str, higher_is_better: bool,
               output_dir: str) -> Dict:
    finished = [record for record in records if record["value"] is not None]
    for record in records:
        if record["value"] is None:
            logging.info("seed %d: diverged (%s)", record["seed"], record["diverged"])
        else:
            logging.info("seed %d: %s %.4g at step %d%s", record["seed"], metric,
                         record["value"], record["step"],
                         " (collapsed)" if record["collapsed"] else "")
    if not finished:
        raise DivergenceError(f"all {len(records)} seeds diverged; see the seed_<s>/ "
                              "directories' logs (try a lower --learning_rate or "
                              "--hparams=paper)")
    best = (max if higher_is_better else min)(finished, key=lambda record: record["value"])
    summary = {"metric": metric, "seeds": records,
               "median": statistics.median([record["value"] for record in finished]),
               "diverged": len(records) - len(finished),
               "best_seed": best["seed"], "best_value": best["value"],
               "best_output_dir": best["output_dir"]}
    diverged = f" ({summary['diverged']} diverged)" if summary["diverged"] else ""
    logging.info("%d seeds%s: median %s %.4g; best seed %d (%.4g) in %s", len(records),
                 diverged, metric, summary["median"], best["seed"], best["value"],
                 best["output_dir"])
    _write_summary(output_dir, summary)
    return summary


def _write_summary(output_dir: str, summary: Dict) -> None:
    fileio.atomic_write_text(os.path.join(output_dir, SEED_RESULTS),
                             json.dumps(summary, indent=2) + "\n")
