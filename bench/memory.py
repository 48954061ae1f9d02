"""Peak memory and step time of a pretraining step, with and without --recompute_layers.

    python bench/memory.py [--preset albert_base_v2] [--seq_length 512] [--batch_size 4]
                           [--precision float32] [--steps 3]

Each variant runs in a fresh process (peak RSS is per process): build the model,
record the resident set size, run `--steps` training steps through the
production Trainer loop (bench/ours.py; 15% of the positions masked), then read
the peak RSS. "step peak" = peak RSS - RSS before the first step: what the
training step itself (activations kept for the backward pass, gradients,
optimizer slots, workspace, and the one-off graph optimisation and kernel
compilation of the first step) adds. "tensor peak" = the peak of TensorFlow's
CPU allocator (`tf.config.experimental.get_memory_info`), the number that
becomes device memory on a GPU or TPU: weights, optimizer slots and every live
tensor, without the runtime's own heap. Prints a table and one JSON line per
variant.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))


def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def measure(args) -> dict:
    sys.path.insert(0, BENCH_DIR)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import ours
    import run as bench_run
    from albert_tf import AlbertConfig

    config = AlbertConfig.from_preset(args.preset).to_dict()
    model = {key: config[key] for key in bench_run.MODELS["base"]}
    case = {"kind": "train", "model": model, "seq_length": args.seq_length,
            "batch_size": args.batch_size, "max_predictions": round(args.seq_length * 0.15),
            "precision": args.precision, "jit": False, "mode": "in_process"}
    import tensorflow as tf

    ours.WARMUP_STEPS = 0  # the first step belongs to the measured peak
    runner = ours.TrainRunner(case, recompute_layers=args.recompute)
    tf.config.experimental.reset_memory_stats("CPU:0")
    before = rss_mb()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        runner.step()
        times.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tensor_peak = tf.config.experimental.get_memory_info("CPU:0")["peak"] / 2 ** 20
    return {"preset": args.preset, "seq_length": args.seq_length, "batch_size": args.batch_size,
            "precision": args.precision, "recompute_layers": args.recompute,
            "rss_before_step_mb": before, "peak_rss_mb": peak, "step_peak_mb": peak - before,
            "tensor_peak_mb": tensor_peak,
            "step_seconds": min(times[1:]) if len(times) > 1 else times[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="albert_base_v2")
    parser.add_argument("--seq_length", type=int, default=512)
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--recompute", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("@@ " + json.dumps(measure(args)), flush=True)
        return
    rows = []
    for recompute in (False, True):
        cmd = [sys.executable, __file__, "--child", f"--preset={args.preset}",
               f"--seq_length={args.seq_length}", f"--batch_size={args.batch_size}",
               f"--precision={args.precision}", f"--steps={args.steps}"]
        if recompute:
            cmd.append("--recompute")
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        rows.append(json.loads([line for line in out.splitlines() if line.startswith("@@ ")][-1][3:]))
    print(f"\n{args.preset}, seq {args.seq_length}, batch {args.batch_size}, {args.precision}, "
          f"{os.cpu_count()} CPUs")
    print(f"{'recompute_layers':>16} {'peak RSS MB':>12} {'step peak MB':>13} "
          f"{'tensor peak MB':>15} {'s/step':>8}")
    for row in rows:
        print(f"{str(row['recompute_layers']):>16} {row['peak_rss_mb']:12,.0f} "
              f"{row['step_peak_mb']:13,.0f} {row['tensor_peak_mb']:15,.0f} "
              f"{row['step_seconds']:8.2f}")
    base, recompute = rows
    print(f"peak RSS x{recompute['peak_rss_mb'] / base['peak_rss_mb']:.2f}, "
          f"step peak x{recompute['step_peak_mb'] / base['step_peak_mb']:.2f}, "
          f"tensor peak x{recompute['tensor_peak_mb'] / base['tensor_peak_mb']:.2f}, "
          f"time x{recompute['step_seconds'] / base['step_seconds']:.2f}")
    for row in rows:
        print(json.dumps(row))


if __name__ == "__main__":
    main()
