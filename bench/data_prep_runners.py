"""Wall time of create_pretraining_data on its three runners, and the byte-identity check.

The same input and flags on: the local runner (--num_workers=2), Beam's DirectRunner
(multi_processing, 2 workers) and Beam's DaskRunner against a localhost
dask.distributed cluster of a scheduler and 2 workers of 1 thread each (started
before the timing, as a long-lived cluster would be; tests/helpers/dask_cluster.py).
Each run is the CLI in a fresh process, so the wall time includes interpreter start
and imports (Beam's take about 2 s). Input: the shared Gutenberg books (all 13 by
default) in raw format, seq 128, 20 predictions, dupe_factor 5, 8 output files.

Needs apache-beam, dask and distributed: run it with the Beam venv,
  .venv-beam/bin/python bench/data_prep_runners.py [--books 13] [--repeats 1]
Prints one table: instances, tokens, seconds (best of --repeats) and the ratio to
the local runner's time; exits 1 if the outputs differ.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
SHARED = pathlib.Path(os.environ.get("ALBERT_TF_SHARED_DATA", REPO.parent / "shared" / "data"))
sys.path.insert(0, str(REPO))

from tests.helpers.dask_cluster import local_cluster  # noqa: E402

# Runner -> its flags, given the Dask scheduler's address.
RUNNERS = {
    "local (2 workers)": lambda address: ["--runner=local", "--num_workers=2"],
    "DirectRunner (multi_processing, 2 workers)": lambda address: [
        "--runner=DirectRunner", "--beam_pipeline_options=--direct_num_workers=2 "
        "--direct_running_mode=multi_processing"],
    "DaskRunner (localhost, 2 workers x 1 thread)": lambda address: [
        "--runner=DaskRunner", f"--beam_pipeline_options=--dask_client_address={address}"],
}


def cpu_name() -> str:
    """The model name of /proc/cpuinfo, with its family and model numbers."""
    fields = {}
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or "unknown CPU"
    return (f"{fields.get('model name', '?')} (family {fields.get('cpu family', '?')}, "
            f"model {fields.get('model', '?')}), {os.cpu_count()} CPUs")


def run_once(files, output: pathlib.Path, runner_flags) -> dict:
    cmd = [sys.executable, "-m", "data_prep.create_pretraining_data",
           f"--input_file={','.join(files)}", "--input_format=raw",
           f"--output_file={output}@8",
           f"--spm_model_file={SHARED / 'spm' / 'albert_style_pd8k.model'}",
           "--max_seq_length=128", "--max_predictions_per_seq=20", "--dupe_factor=5",
           *runner_flags]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=REPO,
                   env=dict(os.environ, PYTHONPATH=str(REPO)))
    wall = time.perf_counter() - start
    summary = json.loads((output.parent / f"{output.name}.summary.json").read_text())
    digest = hashlib.sha256()
    for index in range(8):
        digest.update((output.parent / f"{output.name}-{index:05d}-of-00008").read_bytes())
    return {"wall": wall, "instances": summary["instances"], "tokens": summary["tokens"],
            "digest": digest.hexdigest()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--books", type=int, default=13, help="how many shared books")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    books = sorted((SHARED / "corpus" / "gutenberg").glob("*.txt"))[:args.books]
    if not books:
        sys.exit(f"shared data not found at {SHARED}")
    files = [str(b) for b in books]
    size = sum(b.stat().st_size for b in books)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        with local_cluster(tmp / "cluster", workers=2, threads=1) as cluster:
            results = {}
            for name, flags in RUNNERS.items():
                output = tmp / f"out-{len(results)}"
                runs = [run_once(files, output, flags(cluster.address))
                        for _ in range(args.repeats)]
                results[name] = min(runs, key=lambda r: r["wall"])
    print(f"input: {len(files)} books, {size:,} bytes, raw; seq 128, 20 predictions, "
          f"dupe_factor 5, 8 files; {cpu_name()}; best of {args.repeats}")
    local = results[next(iter(RUNNERS))]["wall"]
    print(f"{'runner':<46} {'instances':>9} {'tokens':>10} {'seconds':>8} {'x local':>8}")
    for name, result in results.items():
        print(f"{name:<46} {result['instances']:>9,} {result['tokens']:>10,} "
              f"{result['wall']:>8.2f} {result['wall'] / local:>8.2f}")
    identical = len({r["digest"] for r in results.values()}) == 1
    print(f"outputs byte-identical across runners: {identical}")
    if not identical:
        sys.exit(1)


if __name__ == "__main__":
    main()
