"""albert-tf against its peers, measured side by side on this machine.

    .venv-bench/bin/python bench/run.py --suite quick|full [--output FILE] [--markdown FILE]

(`make bench` builds .venv-bench from requirements.txt + bench/requirements.txt.)

Every row starts one worker process per framework (bench/worker.py: ours,
keras-hub's AlbertBackbone on TensorFlow, Hugging Face AlbertForPreTraining on
PyTorch, and for inference Hugging Face's AlbertModel exported to ONNX and run by
ONNX Runtime), lets each build and warm up, then times single units (a step or a
forward pass) in turn, ours, peer, peer, then peer, peer, ours, ..., so that
machine drift hits every framework alike. A round is `window` such cycles. A
row's value is the median of its round means (latency rows: the median call);
its ratio is the fastest peer's time over ours, and its paired ratio the
median of the per-unit ratios of units that ran within one cycle. Rows:

  probe     matmul peak (GFLOP/s) on the FFN's GEMM shapes, float32 and bf16
  train     forward + MLM/SOP loss + backward + optimizer update (ours: LAMB via
            the production Trainer; keras-hub: keras Lamb; HF: AdamW), s/step,
            with the fraction of the probe's peak reached (bench/flops.py)
  infer     encoder forward at batch 32 (sequences/s) and batch 1 (latency, ms),
            in process, through the exported SavedModel, through our ONNX export
            in ONNX Runtime (float32 and int8, against HF's ONNX export, same
            runtime and quantization), and through our LiteRT export in the
            ai_edge_litert interpreter with XNNPACK (model.tflite, model.fp16.tflite,
            model.int8.tflite, against our own model.onnx of the same precision in
            ONNX Runtime: framework "ours_ort", float32 beside fp16), with the
            fraction of the probe's peak reached
  data      data_prep tokens/s (one worker) and the tf.data reader's examples/s,
            which must be at least 20x the fastest training row's consumption

Peers that are not installed, or cannot run a row (HF has no XLA or SavedModel
path), show "n/a" with the reason in the JSON lines. Quick: ALBERT-base, seq
128, 2 rounds (~22 min on 2 cores, ~7 of them the six LiteRT rows). Full: 3
rounds, XLA inference rows, and ALBERT-large at sequence 512 (batch 2).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, TextIO, Tuple

BENCH_DIR = pathlib.Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(1, str(REPO))

import flops  # noqa: E402
import targets  # noqa: E402
from albert_tf.kernels import onednn, precision  # noqa: E402

FRAMEWORKS = ("ours", "keras_hub", "hf", "hf_ort", "ours_ort")
PEER_LABELS = {"ours": "albert-tf", "keras_hub": "keras-hub", "hf": "HF torch",
               "hf_ort": "HF ONNX Runtime", "ours_ort": "albert-tf ONNX Runtime",
               "probe": "probe (GFLOP/s)"}
# The matmul probe timed inside a row, its units interleaved with the row's (not a peer):
# the rows whose target is a fraction of the probe (targets.reads_probe) read it from
# there, so that the machine's drift between the probe rows and theirs cancels.
PROBE = "probe"
TRAIN_FRAMEWORKS = ("ours", "keras_hub", "hf")  # the ONNX Runtime peer serves only
# The float32 in-process and SavedModel rows: every peer that serves.
SERVING_FRAMEWORKS = ("ours", "keras_hub", "hf", "hf_ort")
ONNX_FRAMEWORKS = ("ours", "hf_ort")  # same runtime, same quantization
# The LiteRT rows: the question is whether to ship model.tflite or model.onnx, so the
# peer is our own ONNX export of the same model (bench/ours.py, onnx_peer_case).
LITERT_FRAMEWORKS = ("ours", "ours_ort")
LITERT_PRECISIONS = ("float32", "float16", "int8")
INPUT_PIPELINE_MIN_RATIO = 20.0
# Training units traced per TensorFlow framework after the timed rounds, for the matrix
# products' share of the step (bench/op_profile.py); the profiler's overhead never
# reaches the timed units.
PROFILE_UNITS = 2

# The official albert_{base,large}_v2 shapes (albert_tf.config presets; a test checks).
MODELS = {
    "base": dict(vocab_size=30000, embedding_size=128, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072, max_position_embeddings=512,
                 type_vocab_size=2, num_hidden_groups=1, inner_group_num=1, hidden_act="gelu"),
    "large": dict(vocab_size=30000, embedding_size=128, hidden_size=1024, num_hidden_layers=24,
                  num_attention_heads=16, intermediate_size=4096, max_position_embeddings=512,
                  type_vocab_size=2, num_hidden_groups=1, inner_group_num=1, hidden_act="gelu"),
}
# `--tiny` (the harness's own tests): 2 layers, H=32.
MODELS["tiny"] = dict(MODELS["base"], vocab_size=1000, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, embedding_size=16)
PRECISION_LABELS = {"float32": "fp32", "mixed_bfloat16": "bf16", "float16": "fp16",
                    "int8": "int8"}


@dataclasses.dataclass
class Row:
    """One line of the table: a case, the frameworks that run it, and the window size."""

    name: str
    case: dict
    frameworks: tuple
    window: int  # units (steps / forward passes / batches) per framework per round
    unit: str  # "s/step", "seq/s", "ms", "GFLOP/s", "examples/s"


def model_case(kind, model, seq, batch, precision, jit=False, mode="in_process",
               max_predictions=20, guard=True) -> dict:
    """max_predictions: the original's default (20, at every sequence length). guard:
    training with the divergence guard's per-step records and checks (the CLIs' default);
    `bench/ab.py --a guard=0 --b guard=1` measures what it costs."""
    return {"kind": kind, "model": MODELS[model], "model_name": model, "seq_length": seq,
            "batch_size": batch, "max_predictions": max_predictions, "precision": precision,
            "jit": jit, "mode": mode, "guard": guard}


def suite_rows(suite: str, tiny: bool = False, bf16: bool = True) -> List[Row]:
    """The rows of a suite. `tiny` swaps in a 2-layer H=32 model (for the harness's tests);
    `bf16` False keeps only the bf16 matmul probe (for CPUs that emulate bf16)."""
    rows = [Row(f"probe {PRECISION_LABELS[p]}", {"kind": "probe", "precision": p}, ("ours",),
                2, "GFLOP/s") for p in ("float32", "mixed_bfloat16")]
    model = "tiny" if tiny else "base"
    seq = 16 if tiny else 128
    precisions = ("float32", "mixed_bfloat16") if bf16 else ("float32",)
    for jit in (False, True):
        for p in precisions:
            rows.append(Row(f"train {model} s{seq} b16 {PRECISION_LABELS[p]}"
                            f"{' xla' if jit else ''}",
                            model_case("train", model, seq, 16, p, jit,
                                       max_predictions=4 if tiny else 20),
                            TRAIN_FRAMEWORKS, 3, "s/step"))
    infer_jit = (False, True) if suite == "full" else (False,)
    mode_labels = {"in_process": "in-process", "saved_model": "SavedModel",
                   "onnx": "ONNX Runtime", "litert": "LiteRT"}
    mode_precisions = {"onnx": ("float32", "int8"), "litert": LITERT_PRECISIONS}
    mode_frameworks = {"onnx": ONNX_FRAMEWORKS, "litert": LITERT_FRAMEWORKS}
    for batch, unit, window in ((32, "seq/s", 3), (1, "ms", 20)):
        for mode in ("in_process", "saved_model", "onnx", "litert"):
            for jit in infer_jit:
                if jit and mode != "in_process":
                    continue
                for p in mode_precisions.get(mode, precisions):
                    label = mode_labels[mode]
                    rows.append(Row(
                        f"infer {model} s{seq} b{batch} {label} {PRECISION_LABELS[p]}"
                        f"{' xla' if jit else ''}",
                        model_case("infer", model, seq, batch, p, jit, mode,
                                   max_predictions=4 if tiny else 20),
                        mode_frameworks.get(mode, SERVING_FRAMEWORKS), window, unit))
    if suite == "full":
        # Batch 2: three ALBERT-large workers at sequence 512 must fit in memory together.
        for p in precisions:
            rows.append(Row(f"train large s512 b2 {PRECISION_LABELS[p]}",
                            model_case("train", "large", 512, 2, p), TRAIN_FRAMEWORKS, 2,
                            "s/step"))
    return rows


class Worker:
    """A bench/worker.py process hosting one framework's runner for one row."""

    def __init__(self, framework: str, case: dict, log_dir: pathlib.Path, python: str,
                 env: Optional[Dict[str, str]] = None):
        """env: variables set for this worker only (bench/ab.py)."""
        self.framework = framework
        self.log_path = log_dir / f"{framework}-{os.getpid()}-{time.time_ns()}.log"
        self._log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [python, str(BENCH_DIR / "worker.py"), "--framework", framework,
             "--case", json.dumps(probe_case(case) if framework == PROBE else case)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
            cwd=REPO, env=dict(os.environ, **(env or {})))
        self.status: Optional[dict] = None

    def read(self) -> dict:
        for line in self.process.stdout:
            if line.startswith("@@ "):
                return json.loads(line[3:])
        return {"error": f"worker exited (code {self.process.wait()}); see {self.log_path}"}

    def measure(self, units: int) -> List[float]:
        self.process.stdin.write(f"measure {units}\n")
        self.process.stdin.flush()
        answer = self.read()
        if "seconds" not in answer:
            raise RuntimeError(f"{self.framework}: {answer.get('error', answer)}")
        return answer["seconds"]

    def profile(self, units: int) -> dict:
        """`units` units under TensorFlow's profiler: bench/op_profile.py's reply, or
        {"unavailable"/"error": reason}."""
        self.process.stdin.write(f"profile {units}\n")
        self.process.stdin.flush()
        return self.read()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self._log.close()


def probe_case(case: dict) -> dict:
    """The probe that runs inside a model row: its precision, ours (bench/ours.py)."""
    return {"kind": "probe", "precision": case["precision"]}


def run_row(row: Row, rounds: int, frameworks: tuple, log_dir: pathlib.Path, python: str,
            log=print) -> Dict[str, dict]:
    """Starts the row's workers together, then times `rounds` rounds of interleaved units."""
    cap = precision.onednn_cap_below_bf16()
    if row.case["kind"] == "probe" and row.case["precision"] == "mixed_bfloat16" and cap:
        # oneDNN aborts the process on a bf16 GEMM under such a cap (seen: AVX2).
        reason = f"ONEDNN_MAX_CPU_ISA={cap} stops oneDNN below its bf16 instructions"
        log(f"  albert-tf: n/a ({reason})")
        return {"ours": {"status": "n/a", "reason": reason}}
    names = [f for f in row.frameworks if f in frameworks]
    if "ours" in names and targets.reads_probe(row.case):
        names.append(PROBE)
    workers = [Worker(f, row.case, log_dir, python) for f in names]
    results: Dict[str, dict] = {}
    try:
        for worker in workers:
            worker.status = worker.read()
            if "ready" not in worker.status:
                reason = worker.status.get("unavailable") or worker.status.get("error")
                results[worker.framework] = {"status": "n/a", "reason": reason}
                if "error" in worker.status:
                    log(f"  {worker.framework}: ERROR {reason} (log: {worker.log_path})")
        ready = [w for w in workers if w.status and "ready" in w.status]
        windows = interleave(ready, rounds, row.window) if ready else {}
        for worker in ready:
            summary_row = (Row(row.name, probe_case(row.case), (PROBE,), row.window, "GFLOP/s")
                           if worker.framework == PROBE else row)
            results[worker.framework] = summarize(summary_row, windows[worker.framework],
                                                  worker.status["setup_seconds"])
            # XLA rows: the products are inside compiled clusters, not kernels of the trace.
            if (row.case["kind"] == "train" and not row.case["jit"]
                    and worker.framework != PROBE):
                reply = worker.profile(PROFILE_UNITS)
                if "matmul_seconds" in reply:
                    results[worker.framework]["matmul"] = reply
    finally:
        for worker in workers:
            worker.close()
    return results


def interleave(workers: list, rounds: int, units: int) -> Dict[str, List[List[float]]]:
    """Times `rounds` x `units` units of each worker; returns framework -> rounds -> seconds.

    Several workers take one unit each in turn, the first place rotating, so each
    unit of ours has a unit of every peer within one cycle (seconds) of it: its pair
    for the paired ratio (see speedup), and no framework always goes first. One
    worker measures whole rounds (no switching to pay for).
    """
    if len(workers) == 1:
        return {workers[0].framework: [workers[0].measure(units) for _ in range(rounds)]}
    windows = {w.framework: [] for w in workers}
    for _ in range(rounds):
        for worker in workers:
            windows[worker.framework].append([])
        for unit in range(units):
            first = unit % len(workers)
            for worker in workers[first:] + workers[:first]:
                windows[worker.framework][-1].extend(worker.measure(1))
    return windows


def summarize(row: Row, windows: List[List[float]], setup_seconds: float) -> dict:
    """Median of the round means (unit seconds) and the row's headline value.

    windows: one list of unit seconds per round (kept in the record as `windows`).
    """
    window_means = [statistics.fmean(w) for w in windows]
    record = {"status": "ok", "setup_seconds": setup_seconds, "window_means": window_means,
              "windows": windows}
    if row.unit == "ms":  # latency: the median single call
        unit_seconds = statistics.median(t for w in windows for t in w)
        record["window_medians"] = [statistics.median(w) for w in windows]
    else:
        unit_seconds = statistics.median(window_means)
    record["unit_seconds"] = unit_seconds
    case = row.case
    if row.unit == "s/step":
        record["value"] = unit_seconds
        record["sequences_per_sec"] = case["batch_size"] / unit_seconds
    elif row.unit == "seq/s":
        record["value"] = case["batch_size"] / unit_seconds
    elif row.unit == "ms":
        record["value"] = 1000.0 * unit_seconds
    elif row.unit == "GFLOP/s":  # a peak: the best window, not the median
        record["value"] = flops.probe_step_flops() / min(record["window_means"]) / 1e9
    elif row.unit == "examples/s":
        record["value"] = case["batch_size"] / unit_seconds
    if case.get("kind") in ("train", "infer"):
        record["gflop_per_unit"] = flops.case_flops(case) / 1e9
    return record


def speedup(row: Row, results: Dict[str, dict]) -> Optional[dict]:
    """Ours against the fastest peer that ran: >1 means ours is faster."""
    ours = results.get("ours", {})
    peers = {f: r for f, r in results.items()
             if f not in ("ours", PROBE) and r.get("status") == "ok"}
    if ours.get("status") != "ok" or not peers:
        return None
    fastest = min(peers, key=lambda f: peers[f]["unit_seconds"])
    result = {"fastest_peer": fastest,
              "ratio": peers[fastest]["unit_seconds"] / ours["unit_seconds"]}
    # Each unit of ours ran within one cycle of the peer's unit of the same place
    # (interleave), so the median of their per-unit ratios cancels the machine's drift
    # between and within rounds, which the ratio of medians keeps.
    own_units, peer_units = ours.get("windows"), peers[fastest].get("windows")
    if own_units and peer_units and [len(w) for w in own_units] == [len(w) for w in peer_units]:
        pair_ratios = [peer / own for own_window, peer_window in zip(own_units, peer_units)
                       for own, peer in zip(own_window, peer_window)]
        result["paired_ratio"] = statistics.median(pair_ratios)
        result["pairs"] = len(pair_ratios)
        interval = targets.median_interval(pair_ratios)
        if interval:
            result["paired_interval"] = list(interval)
    return result


def auto_precision() -> precision.PrecisionChoice:
    """What `--mixed_precision=auto` picks here, decided in a child process: on a CPU with
    AVX512-BF16 and no AMX it times GEMMs in TensorFlow, which this process never loads."""
    code = ("import json; from albert_tf.kernels import precision; c = precision.choose('auto'); "
            "print(json.dumps([c.policy, c.reason]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    if done.returncode != 0:
        raise RuntimeError(f"--mixed_precision=auto failed in a child process:\n{done.stderr}")
    policy, reason = json.loads(done.stdout.strip().splitlines()[-1])
    return precision.PrecisionChoice(policy, reason)


def machine_info() -> dict:
    info = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}
    cpu = precision.read_cpu_info()
    bf16 = auto_precision()
    # native_bf16: what --mixed_precision=auto picks (bf16 where it multiplies faster).
    info.update(cpu=cpu.name, cpu_flags=cpu.shown_flags(),
                native_bf16=bf16.policy == "mixed_bfloat16", bf16_reason=bf16.reason,
                onednn_max_cpu_isa=os.environ.get("ONEDNN_MAX_CPU_ISA"),
                xla_flags=os.environ.get("XLA_FLAGS"),
                tf_enable_onednn_opts=os.environ.get(onednn.SWITCH),
                # What albert-tf's workers run (they call onednn.configure); peers keep
                # TensorFlow's default.
                onednn=onednn.choose(cpu).describe())
    from importlib import metadata
    for package in ("tensorflow", "keras", "keras-hub", "torch", "transformers", "onnxruntime",
                    "ai-edge-litert"):
        try:
            info[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            info[package] = None
    return info


def data_rows(python: str, log_dir: pathlib.Path, best_train_seq_per_sec: Optional[float],
              log=print) -> List[dict]:
    """data_prep tokens/s on the shared books, then the tf.data reader on its output."""
    # bench/data_prep.py, loaded under another name: "data_prep" is the package it runs.
    import importlib.util
    spec = importlib.util.spec_from_file_location("bench_data_prep", BENCH_DIR / "data_prep.py")
    data_prep_bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(data_prep_bench)
    shared = data_prep_bench.SHARED
    if not (shared / "corpus").is_dir():
        return [{"row": "data", "status": "n/a", "reason": f"shared data not found at {shared}"}]
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        corpus = tmp / "books.txt"
        data_prep_bench.build_corpus(corpus)
        output = tmp / "pretraining.tfrecord"
        result = data_prep_bench.run_once(corpus, output, workers=1)
        records.append({"row": "data_prep (1 worker)", "unit": "tokens/s", "status": "ok",
                        "value": result["tokens"] / result["wall"], "tokens": result["tokens"],
                        "wall_seconds": result["wall"],
                        "vs_original": result["tokens"] / result["wall"]
                        / data_prep_bench.REFERENCE_TOKENS_PER_SECOND})
        log(f"  data_prep: {records[-1]['value']:,.0f} tokens/s")
        row = Row("tf.data reader b16", {"kind": "input_pipeline", "files": [str(output)],
                                         "seq_length": 128, "max_predictions": 20,
                                         "batch_size": 16}, ("ours",), 200, "examples/s")
        result = run_row(row, 2, ("ours",), log_dir, python, log)["ours"]
        record = {"row": row.name, "unit": "examples/s", **result}
        if result.get("status") == "ok" and best_train_seq_per_sec:
            record["x_training_consumption"] = result["value"] / best_train_seq_per_sec
            record["meets_20x"] = record["x_training_consumption"] >= INPUT_PIPELINE_MIN_RATIO
        records.append(record)
    return records


def format_value(unit: str, record: Optional[dict]) -> str:
    if not record or record.get("status") != "ok":
        return "n/a"
    value = record["value"]
    if unit == "s/step":
        return f"{value:.3f}"
    if unit in ("seq/s", "examples/s", "GFLOP/s"):
        return f"{value:,.1f}"
    return f"{value:.1f}"


def peak_fraction(row: Row, record: Optional[dict], peaks: Dict[str, float]) -> Optional[float]:
    """Analytic matmul FLOPs per second over the probe's peak for the row's precision."""
    kind = row.case.get("kind")
    if not record or record.get("status") != "ok" or kind not in ("train", "infer"):
        return None
    peak = peaks.get(row.case["precision"])  # GFLOP/s
    if not peak:
        return None
    return record["gflop_per_unit"] / record["unit_seconds"] / peak


def add_fractions(row: Row, record: dict, peaks: Dict[str, float]) -> None:
    """Adds to `record` its fraction of the probe's peak and, for a traced training
    step, the rate of its matrix products alone (their FLOPs over the time they ran: the
    timed step times their share of the traced one) as a fraction of the peak."""
    fraction = peak_fraction(row, record, peaks)
    if fraction is None:
        return
    record["fraction_of_peak"] = fraction
    matmul = record.get("matmul")
    if matmul and matmul["matmul_seconds"] > 0:
        # The products' share of the traced step, applied to the timed step: tracing slows
        # a step (1.02x to 1.15x measured), and its products with it.
        record["matmul_share"] = matmul["matmul_seconds"] / matmul["unit_seconds"]
        record["trace_slowdown"] = matmul["unit_seconds"] / record["unit_seconds"]
        record["matmul_fraction_of_peak"] = fraction / record["matmul_share"]


def isa_caps(info: dict, separator: str) -> str:
    """The ISA caps in force (they make this CPU stand in for an older one: docs/
    performance.md, "Per CPU"), each after `separator`; "" without caps."""
    return "".join(f"{separator}{name}={info[key]}" for name, key in (
        ("TF_ENABLE_ONEDNN_OPTS", "tf_enable_onednn_opts"),
        ("ONEDNN_MAX_CPU_ISA", "onednn_max_cpu_isa"), ("XLA_FLAGS", "xla_flags"))
        if info.get(key))


def target_lines(checks: List[targets.Check], row_names: List[str]) -> List[str]:
    """The targets' summary under the table: the misses, and the checks across rows
    (which have no row of their own)."""
    if not checks:
        return []
    missed = [c for c in checks if not c.ok]
    lines = ["", f"Targets: {len(checks) - len(missed)} of {len(checks)} met."]
    lines += [f"- {c.row}: {c.text()}" for c in checks if not c.ok or c.row not in row_names]
    return lines


def markdown_table(info: dict, table: List[dict], data: List[dict],
                   checks: Optional[List[targets.Check]] = None) -> str:
    isa = isa_caps(info, ", ")
    lines = [f"Measured {info['date'][:10]} on {info.get('cpu', 'unknown CPU')}, "
             f"{info['cpus']} cores (flags: {info.get('cpu_flags', '?')}{isa}); "
             f"TensorFlow {info['tensorflow']}, Keras {info['keras']}, "
             f"keras-hub {info['keras-hub']}, PyTorch {info['torch']}, "
             f"transformers {info['transformers']}, ONNX Runtime {info.get('onnxruntime')}, "
             f"ai-edge-litert {info.get('ai-edge-litert')}. Medians of interleaved units; "
             "ratio = ours vs the fastest peer (>1: ours faster); paired = the median of "
             "the per-unit ratios of units run back to back; % peak = analytic matmul "
             "FLOPs / time / this run's matmul probe (training rows: in brackets, the "
             "products alone, their FLOPs over the time a trace shows them running). "
             "LiteRT rows: albert-tf = our LiteRT file (XNNPACK), against our ONNX file of "
             "the same precision (float32 beside fp16) in ONNX Runtime. target: "
             "bench/targets.py (docs/performance.md, \"Targets\").", "",
             "| row | unit | albert-tf | keras-hub | HF torch | HF ONNX Runtime | "
             "albert-tf ONNX Runtime | ratio | paired | % peak (ours / peers) | target |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for entry in table:
        lines.append(f"| {entry['row']} | {entry['unit']} | {entry['ours']} | "
                     f"{entry['keras_hub']} | {entry['hf']} | {entry['hf_ort']} | "
                     f"{entry['ours_ort']} | {entry['ratio']} | {entry['paired']} | "
                     f"{entry['peak']} | {entry.get('target', '')} |")
    for record in data:
        if record.get("status") != "ok":
            lines.append(f"| {record['row']} | | n/a ({record.get('reason')}) | | | | | | | | |")
            continue
        extra = ""
        if "x_training_consumption" in record:
            extra = f"{record['x_training_consumption']:.0f}x training consumption"
        elif "vs_original" in record:
            extra = f"{record['vs_original']:.1f}x the original script"
        lines.append(f"| {record['row']} | {record['unit']} | {record['value']:,.0f} | | | | "
                     f"| {extra} | | | |")
    lines += target_lines(checks or [], [entry["row"] for entry in table])
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argument_parser()
    args = parser.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        parser.error(f"--rounds must be at least 1; got {args.rounds}")
    rounds = args.rounds or (3 if args.suite == "full" else 2)
    frameworks = tuple(f for f in args.frameworks.split(",") if f)
    unknown = set(frameworks) - set(FRAMEWORKS)
    if unknown:
        parser.error(f"--frameworks: unknown {', '.join(sorted(unknown))}")
    info = dict(machine_info(), suite=args.suite, rounds=rounds)
    bf16 = args.bf16 == "always" or (args.bf16 == "auto" and info["native_bf16"])
    rows = selected_rows(args, bf16)
    if args.only and all(row.case["kind"] == "probe" for row in rows):
        names = [r.name for r in suite_rows(args.suite, tiny=args.tiny, bf16=bf16)
                 if r.case["kind"] != "probe"]
        parser.error(f"--only {args.only!r} names no row of the {args.suite} suite"
                     f"{'' if bf16 else ' without bf16 rows'}; its rows: {', '.join(names)}")
    output = output_path(args)
    partial = output.with_name(output.name + ".partial")
    log_dir = pathlib.Path(tempfile.mkdtemp(prefix="albert_bench_logs_"))
    print_header(info, bf16, log_dir)
    log = lambda message: print(message, flush=True)  # noqa: E731
    started = time.time()
    with open(partial, "w") as sink:
        sink.write(json.dumps({"record": "machine", **info}) + "\n")
        table, best_train, checks = run_rows(rows, rounds, frameworks, log_dir, sink, log)
        data = [] if args.skip_data else data_rows(sys.executable, log_dir, best_train, log)
        for record in data:
            sink.write(json.dumps({"record": "data", **record}) + "\n")
    os.replace(partial, output)
    print_results(markdown_table(info, table, data, checks), output, started, args.markdown)
    failed = [r for r in data if r.get("meets_20x") is False]
    if failed:
        print("FAIL: the tf.data reader is slower than 20x the training consumption")
        return 1
    return 0


def argument_parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=["quick", "full"], default="quick")
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds of interleaved units per framework (quick 2, full 3)")
    parser.add_argument("--only", default="",
                        help="comma list of substrings: run only rows whose name has one "
                             "(a name ending in $: that row only)")
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--skip_data", action="store_true", help="skip the data rows")
    parser.add_argument("--tiny", action="store_true",
                        help="a 2-layer H=32 model instead of ALBERT-base (harness tests)")
    parser.add_argument("--output", default=None,
                        help="JSON lines (default bench/results/<suite>-<date>.jsonl)")
    parser.add_argument("--markdown", default=None, help="also write the table as Markdown")
    parser.add_argument("--bf16", choices=["auto", "always", "never"], default="auto",
                        help="bf16 training and inference rows: auto = only where "
                             "--mixed_precision=auto picks bf16 (AMX, or AVX512-BF16 whose "
                             "GEMMs measure faster than float32)")
    return parser


def output_path(args: argparse.Namespace) -> pathlib.Path:
    """--output, else bench/results/<suite>-<date>-<time>.jsonl; its folder is created."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    output = pathlib.Path(args.output or BENCH_DIR / "results" / f"{args.suite}-{stamp}.jsonl")
    output.parent.mkdir(parents=True, exist_ok=True)
    return output


def print_header(info: dict, bf16: bool, log_dir: pathlib.Path) -> None:
    """The run's first lines: suite, machine, and whether the bf16 rows run and why."""
    isa = isa_caps(info, "; ")
    print(f"albert-tf bench, suite {info['suite']}, {info['rounds']} rounds; "
          f"worker logs in {log_dir}\n"
          f"CPU: {info['cpu']}, {info['cpus']} cores; flags: {info['cpu_flags']}{isa}\n"
          f"albert-tf's workers: {info['onednn']}\n"
          f"bf16: {'auto picks it' if info['native_bf16'] else 'auto keeps float32'} "
          f"({info['bf16_reason']}); "
          f"bf16 rows {'on' if bf16 else 'off (--bf16=always to add them)'}", flush=True)


def selected_rows(args: argparse.Namespace, bf16: bool) -> List[Row]:
    """The suite's rows that `--only` names, with bf16 rows only if `bf16`."""
    rows = suite_rows(args.suite, tiny=args.tiny, bf16=bf16)
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        # The probes always run: the train rows' % of peak needs them.
        # "name$": that row only; otherwise rows whose name contains the text.
        rows = [r for r in rows
                if r.case["kind"] == "probe" or any(r.name == w[:-1] if w.endswith("$")
                                                    else w in r.name for w in wanted)]
    return rows


def run_rows(rows: List[Row], rounds: int, frameworks: tuple, log_dir: pathlib.Path,
             sink: TextIO, log) -> Tuple[List[dict], Optional[float], List[targets.Check]]:
    """Runs the rows in turn, writing each one's JSON lines to `sink` as it ends.

    Returns the table entries, our fastest training rate (sequences/s; None
    without a train row that ran), which the data rows compare against, and the
    targets checked (bench/targets.py).
    """
    peaks: Dict[str, float] = {}  # precision -> our probe's GFLOP/s
    table: List[dict] = []
    checks: List[targets.Check] = []
    ran: List[dict] = []  # for the checks across rows
    best_train = None
    for row in rows:
        log(f"{row.name} ...")
        results = run_row(row, rounds, frameworks, log_dir, sys.executable, log)
        ours_ran = results.get("ours", {}).get("status") == "ok"
        if row.case["kind"] == "probe" and ours_ran:
            peaks[row.case["precision"]] = results["ours"]["value"]
        ratio = speedup(row, results)
        row_peaks = dict(peaks)
        if results.get(PROBE, {}).get("status") == "ok":
            row_peaks[row.case["precision"]] = results[PROBE]["value"]
        for framework, record in results.items():
            if framework != PROBE:
                add_fractions(row, record, row_peaks)
        check = targets.row_check(row.name, row.case, results, ratio)
        write_row_records(sink, row, results, ratio, check)
        if row.case["kind"] == "train" and ours_ran:
            best_train = max(best_train or 0.0, results["ours"]["sequences_per_sec"])
        entry = table_entry(row, results, ratio, check)
        table.append(entry)
        ran.append({"row": row.name, "case": row.case, "results": results})
        checks += [check] if check else []
        paired = f" (paired {entry['paired']})" if entry["paired"] else ""
        log(f"  {'  '.join(f'{PEER_LABELS[f]} {entry[f]}' for f in row.frameworks)}  "
            f"{entry['ratio']}{paired}  {entry['peak']}  {entry['target']}")
    across = targets.fastest_batch1_path(ran, PEER_LABELS)
    if across:
        checks.append(across)
        sink.write(json.dumps(across.record()) + "\n")
        log(f"{across.row}: {across.text()}")
    return table, best_train, checks


def print_results(markdown: str, output: pathlib.Path, started: float,
                  markdown_file: Optional[str]) -> None:
    """Prints the table and where the JSON lines are, with the minutes since `started`
    (time.time()); writes the table to `markdown_file` too if given."""
    print("\n" + markdown)
    print(f"JSON lines: {output}  ({(time.time() - started) / 60:.1f} min)")
    if markdown_file:
        tmp = pathlib.Path(markdown_file + ".tmp")
        tmp.write_text(markdown)
        os.replace(tmp, markdown_file)


def write_row_records(sink: TextIO, row: Row, results: Dict[str, dict],
                      ratio: Optional[dict], check: Optional[targets.Check] = None) -> None:
    """A row's JSON lines: one result per framework, then the ratio and the target's
    check if there are."""
    for framework, record in results.items():
        sink.write(json.dumps({"record": "result", "row": row.name, "unit": row.unit,
                               "framework": framework, "case": row.case, **record}) + "\n")
    if ratio:
        sink.write(json.dumps({"record": "ratio", "row": row.name, **ratio}) + "\n")
    if check:
        sink.write(json.dumps(check.record()) + "\n")
    sink.flush()


def table_entry(row: Row, results: Dict[str, dict], ratio: Optional[dict],
                check: Optional[targets.Check] = None) -> dict:
    """A row of the printed table: each framework's value, the ratios, % of peak and the
    target's check, as text."""
    in_row = results.get(PROBE, {})
    probe_note = (f" (in-row probe {in_row['value']:.0f} GFLOP/s)"
                  if in_row.get("status") == "ok" else "")
    return {"row": row.name, "unit": row.unit, "target": check.text() if check else "",
            "probe_note": probe_note,
            **{f: format_value(row.unit, results.get(f)) for f in FRAMEWORKS},
            "ratio": f"{ratio['ratio']:.2f}x" if ratio else "",
            "paired": (f"{ratio['paired_ratio']:.2f}x"
                       if ratio and "paired_ratio" in ratio else ""),
            "peak": " / ".join(peak_text(results[f]) for f in FRAMEWORKS
                               if "fraction_of_peak" in results.get(f, {})) + probe_note}


def peak_text(record: dict) -> str:
    """e.g. "87%", or "87% (products 93%)" for a traced training step."""
    text = f"{record['fraction_of_peak']:.0%}"
    if "matmul_fraction_of_peak" in record:
        text += f" (products {record['matmul_fraction_of_peak']:.0%})"
    return text


if __name__ == "__main__":
    sys.exit(main())
