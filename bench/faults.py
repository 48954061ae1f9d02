"""Faults at cluster scale, measured: run_pretraining.py (tiny model) as two
MultiWorkerMirroredStrategy workers on localhost, and as one process, with a fault injected
at a random moment after the first checkpoint.

    .venv/bin/python bench/faults.py [--rounds 3] [--interval 100] [--window 10]
        [--only SUBSTRING] [--output bench/results/faults.json]

Rows:
  kill -9 / frozen (SIGSTOP) worker 1: seconds until worker 0 exits (status 75), and the
      steps lost: the last step worker 0 logged minus the checkpoint a rerun resumes from
      (at most one --save_checkpoints_steps interval);
  SIGTERM to worker 1 / to one process: seconds until every process has exited (143), and
      the steps lost: the last step logged minus the checkpoint saved (target 0).
Windows of `--window` steps (the logging period) make the last logged step exact to a window.
Prints one table and the CPU; writes the JSON record.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.helpers.cluster import Cluster, steps_logged, wait_for_checkpoint  # noqa: E402

CONFIG = dict(vocab_size=40, embedding_size=16, hidden_size=32, num_hidden_layers=2,
              num_attention_heads=4, intermediate_size=64, max_position_embeddings=16)


def make_data(root: pathlib.Path) -> dict:
    from tests.helpers.pretraining_data import make_examples, write_records
    config = root / "albert_config.json"
    config.write_text(json.dumps(CONFIG))
    return {"train": write_records(root / "train.tfrecord", make_examples(160, seed=0)),
            "config": str(config)}


def command(data, output_dir, args, *extra):
    return [str(REPO / "run_pretraining.py"), f"--albert_config_file={data['config']}",
            f"--input_file={data['train']}", f"--output_dir={output_dir}",
            "--train_batch_size=8", "--max_seq_length=16", "--max_predictions_per_seq=4",
            "--num_train_steps=100000", "--num_warmup_steps=4", "--learning_rate=1e-3",
            "--optimizer=adamw", f"--save_checkpoints_steps={args.interval}",
            f"--iterations_per_loop={args.window}", "--seed=7", "--deterministic_input",
            "--nodo_eval", "--strategy=multi_worker_mirrored", *extra]


def last_step(text: str) -> int:
    return max(steps_logged(text), default=0)


def checkpoint_step(ckpt_dir: pathlib.Path) -> int:
    state = (ckpt_dir / "checkpoint").read_text()
    return int(re.search(r'model_checkpoint_path: "ckpt-(\d+)"', state).group(1))


def lost_worker(data, out, args, fault: str, timeout: float) -> dict:
    with Cluster(command(data, out, args, f"--worker_timeout_seconds={timeout}"), 2,
                 out / "logs") as cluster:
        wait_for_checkpoint(out / "checkpoints", args.interval, cluster.procs)
        time.sleep(random.uniform(0, 2.0))  # anywhere in the next interval
        victim = cluster.procs[1]
        victim.send_signal(signal.SIGKILL if fault == "kill -9" else signal.SIGSTOP)
        started = time.time()
        said = None  # when worker 0 printed its line (before its exit)
        while cluster.procs[0].poll() is None and time.time() - started < timeout + 120:
            if said is None and "error: lost worker" in cluster.stderr(0):
                said = time.time() - started
            time.sleep(0.05)
        status = cluster.procs[0].wait(timeout=5)
        seconds = time.time() - started
        victim.kill()
        text = cluster.stderr(0)
    return {"status": status, "seconds": seconds, "line_seconds": said,
            "steps_lost": last_step(text) - checkpoint_step(out / "checkpoints")}


def preempted_cluster(data, out, args) -> dict:
    with Cluster(command(data, out, args), 2, out / "logs") as cluster:
        wait_for_checkpoint(out / "checkpoints", args.interval, cluster.procs)
        time.sleep(random.uniform(0, 2.0))
        cluster.procs[1].send_signal(signal.SIGTERM)
        started = time.time()
        statuses = cluster.wait(timeout=120)
        seconds = time.time() - started
        text = cluster.stderr(0)
    return {"status": statuses, "seconds": seconds,
            "steps_lost": last_step(text) - checkpoint_step(out / "checkpoints")}


def preempted_process(data, out, args) -> dict:
    argv = [sys.executable] + command(data, out, args, "--strategy=one_device")
    log_path = out / "log"
    out.mkdir(parents=True)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, cwd=REPO)
        try:
            wait_for_checkpoint(out / "checkpoints", args.interval, [proc])
            time.sleep(random.uniform(0, 1.0))
            proc.send_signal(signal.SIGTERM)
            started = time.time()
            status = proc.wait(timeout=120)
            seconds = time.time() - started
        finally:
            proc.kill()
    return {"status": status, "seconds": seconds,
            "steps_lost": last_step(log_path.read_text()) - checkpoint_step(out / "checkpoints")}


def summary(runs) -> dict:
    return {"runs": runs, "median_seconds": statistics.median(r["seconds"] for r in runs),
            "max_seconds": max(r["seconds"] for r in runs),
            "max_steps_lost": max(r["steps_lost"] for r in runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--interval", type=int, default=100)
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--only", help="run the rows whose name contains this")
    parser.add_argument("--output", default=str(REPO / "bench" / "results" / "faults.json"))
    args = parser.parse_args()
    from albert_tf.kernels import cpu

    root = pathlib.Path(tempfile.mkdtemp(prefix="albert_tf_faults_"))
    data = make_data(root)
    scenarios = {
        "kill -9 worker 1 (timeout 20 s, the default)": lambda out: lost_worker(
            data, out, args, "kill -9", 20),
        "frozen worker 1 (timeout 20 s, the default)": lambda out: lost_worker(
            data, out, args, "frozen", 20),
        "frozen worker 1 (timeout 5 s)": lambda out: lost_worker(data, out, args,
                                                                 "frozen", 5),
        "SIGTERM worker 1 of 2": lambda out: preempted_cluster(data, out, args),
        "SIGTERM one process": lambda out: preempted_process(data, out, args),
    }
    info = cpu.read_cpu_info()
    record = {"cpu": f"{info.name} ({info.shown_flags()})", "interval": args.interval,
              "window": args.window, "rows": {}}
    chosen = {name: run for name, run in scenarios.items()
              if not args.only or args.only in name}
    if not chosen:
        parser.error(f"--only {args.only!r} names no row; rows: {', '.join(scenarios)}")
    for name, run in chosen.items():
        runs = [run(root / f"{len(record['rows'])}-{i}") for i in range(args.rounds)]
        record["rows"][name] = summary(runs)
        print(f"{name}: {record['rows'][name]}", flush=True)
    print("CPU:", record["cpu"])
    print(f"{'fault':44} {'exit':>9} {'stop s (median/max)':>20} {'steps lost (max)':>17}")
    for name, row in record["rows"].items():
        status = row["runs"][0]["status"]
        print(f"{name:44} {str(status):>9} {row['median_seconds']:>9.1f} /{row['max_seconds']:>6.1f}"
              f"    {row['max_steps_lost']:>12}")
    pathlib.Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.output).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
