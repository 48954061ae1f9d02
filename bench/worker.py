"""One benchmark runner in its own process, driven line by line by bench/run.py.

    python bench/worker.py --framework ours|ours_ort|keras_hub|hf|hf_ort --case '<json>'

Builds the runner (warm-up included) and prints `@@ {"ready": ..., "setup_seconds": ...}`,
or `@@ {"unavailable": "<reason>"}` when the framework cannot run the case (not
installed, or NotSupported). Then for each stdin line `measure <n>` it runs n
units and prints `@@ {"seconds": [t_1, ..., t_n]}`; for `profile <n>` it runs n units
under TensorFlow's profiler and prints what bench/op_profile.py reads from the trace
(`{"unavailable": ...}` for a runner that is not TensorFlow); EOF ends it. Only lines
starting with "@@ " are protocol, so library output on stdout is harmless.
Keeping the runner alive between windows is what lets run.py interleave
frameworks (ours, peer, ours, peer) without paying set-up twice.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH_DIR)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def reply(message: dict) -> None:
    sys.stdout.write("@@ " + json.dumps(message) + "\n")
    sys.stdout.flush()


def build(framework: str, case: dict):
    if framework in ("ours", "probe"):  # "probe": the matmul probe inside a model row
        import ours
        return ours.make_any_runner(case)
    if framework == "ours_ort":  # our model.onnx beside a LiteRT row (bench/ours.py)
        import ours
        return ours.make_runner(ours.onnx_peer_case(case))
    import peers
    return peers.make_runner(framework, case)


TENSORFLOW_FRAMEWORKS = ("ours", "keras_hub")
# Workers that run albert-tf (and the matmul probe read against it): they take albert-tf's
# oneDNN choice (albert_tf.kernels.onednn).
ALBERT_TF_FRAMEWORKS = ("ours", "ours_ort", "probe")


def profile(framework: str, runner, units: int) -> dict:
    """The matrix products' share of `units` units, from a TensorFlow trace."""
    if framework not in TENSORFLOW_FRAMEWORKS:
        return {"unavailable": f"{framework} does not run on TensorFlow's profiler"}
    import op_profile
    try:
        return op_profile.matmul_seconds(runner.step, units)
    except Exception as err:  # noqa: BLE001 - reported to the driver, which decides
        return {"error": f"{type(err).__name__}: {err}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", required=True,
                        choices=["ours", "ours_ort", "keras_hub", "hf", "hf_ort", "probe"])
    parser.add_argument("--case", required=True, help="the case as a JSON object")
    args = parser.parse_args()
    case = json.loads(args.case)
    if args.framework in ALBERT_TF_FRAMEWORKS:
        # As albert-tf's programs do, before TensorFlow is imported; the peers run with
        # TensorFlow's own default, as their users get it.
        sys.path.insert(0, os.path.dirname(BENCH_DIR))  # as bench/ours.py does
        from albert_tf.kernels import onednn
        onednn.configure()
    start = time.perf_counter()
    try:
        runner = build(args.framework, case)
    except ImportError as err:
        reply({"unavailable": f"not installed ({err.name or err}); pip install -r "
                              "bench/requirements.txt"})
        return
    except NotImplementedError as err:
        reply({"unavailable": str(err)})
        return
    except Exception as err:  # noqa: BLE001 - reported to the driver, which decides
        if type(err).__name__ == "NotSupported":
            reply({"unavailable": str(err)})
            return
        reply({"error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()})
        return
    reply({"ready": True, "setup_seconds": time.perf_counter() - start})
    for line in sys.stdin:
        parts = line.split()
        if not parts:
            continue
        if parts[0] not in ("measure", "profile") or len(parts) != 2:
            reply({"error": f"unknown command {line.strip()!r}"})
            continue
        if parts[0] == "profile":
            reply(profile(args.framework, runner, int(parts[1])))
            continue
        seconds = []
        for _ in range(int(parts[1])):
            begin = time.perf_counter()
            runner.step()
            seconds.append(time.perf_counter() - begin)
        reply({"seconds": seconds})
    close = getattr(runner, "close", None)
    if close:
        close()


if __name__ == "__main__":
    main()
