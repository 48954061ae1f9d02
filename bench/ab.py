"""A paired A/B of two albert-tf variants of one bench row, on this machine.

    .venv-bench/bin/python bench/ab.py --row "train base s128 b16 fp32" \
        --a jit=0 --b jit=1 [--units 8] [--env_b XLA_FLAGS=...]

Both variants run in worker processes of their own (bench/worker.py, framework
"ours"), built and warmed up side by side; then single units (a training step or a
forward pass) alternate A, B, B, A, ... so that each unit of A has a unit of B
next to it. Prints each side's median unit time and the median of the per-pair
ratios (B's time over A's: > 1 means A is faster), which cancels the drift of a
shared VM that unpaired rows minutes apart do not (docs/performance.md).

`--a` / `--b` override case fields of the row (`jit=1`, `precision=float32`,
`mode=saved_model`, `batch_size=8`); `--env_a` / `--env_b` set environment
variables of one side's worker only (e.g. `TF_ENABLE_ONEDNN_OPTS=0`).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
from typing import Dict, List

import run as bench  # bench/run.py (puts bench/ and the repository on sys.path)


def parse_pairs(items: List[str], flag: str) -> Dict[str, str]:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"ab.py: error: {flag} takes KEY=VALUE; got {item!r}")
        pairs[key] = value
    return pairs


def case_with(case: dict, overrides: Dict[str, str], flag: str) -> dict:
    """The row's case with `overrides` (JSON values where they parse, strings otherwise)."""
    case = dict(case)
    for key, text in overrides.items():
        if key not in case:
            raise SystemExit(f"ab.py: error: {flag}: the case has no field {key!r} "
                             f"(fields: {', '.join(sorted(case))})")
        try:
            case[key] = json.loads(text)
        except json.JSONDecodeError:
            case[key] = text
    return case


def alternate(first, second, units: int) -> List[List[float]]:
    """`units` pairs of single units, the first place alternating; returns [a, b] seconds."""
    times: List[List[float]] = [[], []]
    for unit in range(units):
        order = (0, 1) if unit % 2 == 0 else (1, 0)
        for side in order:
            times[side].extend((first, second)[side].measure(1))
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--row", required=True, help="a row name of the suite, e.g. "
                        "'train base s128 b16 fp32' or 'infer base s128 b32 SavedModel fp32'")
    parser.add_argument("--suite", choices=["quick", "full"], default="full")
    parser.add_argument("--a", nargs="*", default=[], help="case overrides of side A")
    parser.add_argument("--b", nargs="*", default=[], help="case overrides of side B")
    parser.add_argument("--env_a", nargs="*", default=[], help="environment of side A")
    parser.add_argument("--env_b", nargs="*", default=[], help="environment of side B")
    parser.add_argument("--units", type=int, default=8, help="pairs of units to time")
    parser.add_argument("--tiny", action="store_true",
                        help="the suite's 2-layer H=32 rows (harness tests)")
    args = parser.parse_args(argv)
    if args.units < 1:
        parser.error(f"--units must be at least 1; got {args.units}")
    rows = {row.name: row for row in bench.suite_rows(args.suite, tiny=args.tiny)}
    if args.row not in rows:
        parser.error(f"--row {args.row!r} is not a row of the {args.suite} suite; rows: "
                     + "; ".join(name for name in rows if not name.startswith("probe")))
    row = rows[args.row]
    cases = [case_with(row.case, parse_pairs(args.a, "--a"), "--a"),
             case_with(row.case, parse_pairs(args.b, "--b"), "--b")]
    envs = [parse_pairs(args.env_a, "--env_a"), parse_pairs(args.env_b, "--env_b")]
    info = bench.machine_info()
    print(f"A/B of '{row.name}' on {info['cpu']} ({info['cpu_flags']}), {args.units} pairs\n"
          f"  A: {args.a or '(the row)'} {args.env_a or ''}\n"
          f"  B: {args.b or '(the row)'} {args.env_b or ''}", flush=True)
    log_dir = pathlib.Path(tempfile.mkdtemp(prefix="albert_ab_logs_"))
    workers = [bench.Worker("ours", case, log_dir, sys.executable, env=env)
               for case, env in zip(cases, envs)]
    try:
        for side, worker in zip("AB", workers):
            status = worker.read()
            if "ready" not in status:
                print(f"{side}: {status.get('error') or status.get('unavailable')} "
                      f"(log: {worker.log_path})")
                return 1
        times = alternate(workers[0], workers[1], args.units)
    finally:
        for worker in workers:
            worker.close()
    ratios = [b / a for a, b in zip(*times)]
    for side, seconds in zip("AB", times):
        print(f"  {side}: median {statistics.median(seconds) * 1000:.1f} ms per unit "
              f"(min {min(seconds) * 1000:.1f})")
    interval = bench.targets.median_interval(ratios)
    spread = (f"90% interval {interval[0]:.3f}-{interval[1]:.3f}, " if interval else "")
    print(f"  B/A per-pair ratio: median {statistics.median(ratios):.3f} "
          f"({spread}min {min(ratios):.3f}, max {max(ratios):.3f}); > 1: A is faster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
