"""The speed targets of docs/performance.md, checked on a bench run's results.

Per row (float32, the rows a default serving or training run uses):
  train ... fp32            ours >= 1.10x the fastest peer (paired ratio), and the step's
                            matrix products at >= 85% of the probe's float32 rate (their
                            analytic FLOPs over the time a trace shows them running:
                            bench/op_profile.py)
  infer b32 in-process fp32, infer b32 SavedModel fp32
                            ours >= 90% of the probe (the whole pass's analytic matmul
                            FLOPs over its time) and >= 1.00x the fastest peer, Hugging
                            Face's export in ONNX Runtime included
  infer ... ONNX Runtime int8
                            >= 1.00x Hugging Face's export under the same quantization
Across rows:
  batch-1 float32 latency   albert-tf's fastest path (in process, SavedModel, our ONNX in
                            ONNX Runtime, LiteRT) no slower than any peer's fastest path

The ratio read is the paired one (units run back to back) where the row has it. XLA rows
(an option, not the default path), bf16 rows and the LiteRT rows (whose peer is our own
ONNX file: a choice between our paths) carry no target of their own.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Optional

TRAIN_MIN_RATIO = 1.10
TRAIN_MIN_MATMUL_FRACTION = 0.85
INFER_B32_MIN_FRACTION = 0.90
MIN_RATIO = 1.00
# Frameworks whose units are albert-tf's own serving paths (ours_ort: our model.onnx in
# ONNX Runtime beside a LiteRT row).
OURS = ("ours", "ours_ort")
PEERS = ("keras_hub", "hf", "hf_ort")


@dataclasses.dataclass
class Check:
    """One target on one row (or across rows): what was measured against what was asked."""

    target: str
    row: str
    ok: bool
    measured: str  # e.g. "1.07x (paired), products at 88% of the probe"

    def text(self) -> str:
        return f"{'ok' if self.ok else 'MISS'}: {self.measured} (target {self.target})"

    def record(self) -> dict:
        return {"record": "target", **dataclasses.asdict(self)}


def reads_probe(case: dict) -> bool:
    """Whether the row's target is a fraction of the probe: a float32 training step or
    batch-32 pass in process or through the SavedModel, without XLA. bench/run.py times
    the probe inside such rows."""
    if case.get("jit") or case.get("precision") != "float32":
        return False
    if case.get("kind") == "train":
        return True
    return (case.get("kind") == "infer" and case.get("batch_size") == 32
            and case.get("mode") in ("in_process", "saved_model"))


def median_interval(values: List[float], confidence: float = 0.90) -> Optional[tuple]:
    """(low, high): a distribution-free confidence interval for the median of `values`
    (order statistics x(k) and x(n+1-k), k the largest with 2 P(Binomial(n, 1/2) < k)
    <= 1 - confidence), or None where n is too small for that confidence (n < 5 at 90%).
    Read beside a paired ratio: single training units on a shared VM spread by 5-10%, so
    six pairs cannot tell 1.09x from 1.10x, and the interval says so."""
    n = len(values)
    k, at_most_k = 0, 1 / 2 ** n  # at_most_k = P(B <= k)
    while 2 * at_most_k <= 1 - confidence:
        k += 1
        at_most_k += math.comb(n, k) / 2 ** n
    if k == 0:
        return None
    ordered = sorted(values)
    return ordered[k - 1], ordered[n - k]


def _ratio(ratio: Optional[dict]) -> Optional[float]:
    if not ratio:
        return None
    return ratio.get("paired_ratio", ratio["ratio"])


def row_check(row_name: str, case: dict, results: Dict[str, dict],
              ratio: Optional[dict]) -> Optional[Check]:
    """The row's own target, or None for a row without one (or one whose ours did not run)."""
    ours = results.get("ours", {})
    if ours.get("status") != "ok" or case.get("jit") or case.get("kind") not in ("train",
                                                                                 "infer"):
        return None
    value = _ratio(ratio)
    if case["kind"] == "train" and reads_probe(case):
        fraction = ours.get("matmul_fraction_of_peak")
        ok = (value is not None and value >= TRAIN_MIN_RATIO
              and fraction is not None and fraction >= TRAIN_MIN_MATMUL_FRACTION)
        products = (f"products at {fraction:.0%} of the probe" if fraction is not None
                    else "products' rate not measured")
        return Check(f">= {TRAIN_MIN_RATIO:.2f}x, products >= {TRAIN_MIN_MATMUL_FRACTION:.0%}",
                     row_name, ok, f"{_format(value, ratio)}, {products}")
    if case["kind"] == "infer" and reads_probe(case):
        fraction = ours.get("fraction_of_peak")
        ok = (value is not None and value >= MIN_RATIO
              and fraction is not None and fraction >= INFER_B32_MIN_FRACTION)
        share = f"{fraction:.0%} of the probe" if fraction is not None else "no probe"
        return Check(f">= {INFER_B32_MIN_FRACTION:.0%} of the probe, >= {MIN_RATIO:.2f}x",
                     row_name, ok, f"{share}, {_format(value, ratio)}")
    if case["kind"] == "infer" and case.get("mode") == "onnx" and case["precision"] == "int8":
        return Check(f">= {MIN_RATIO:.2f}x", row_name, value is not None and value >= MIN_RATIO,
                     _format(value, ratio))
    return None


def _format(value: Optional[float], ratio: Optional[dict] = None) -> str:
    """e.g. "1.09x (90% interval 1.04-1.13, 6 pairs)"."""
    if value is None:
        return "no peer ran"
    interval = (ratio or {}).get("paired_interval")
    if not interval:
        return f"{value:.2f}x"
    return (f"{value:.2f}x (90% interval {interval[0]:.2f}-{interval[1]:.2f}, "
            f"{ratio['pairs']} pairs)")


def fastest_batch1_path(rows: List[dict], labels: Dict[str, str]) -> Optional[Check]:
    """albert-tf's fastest float32 batch-1 path against every peer's fastest, across the
    rows. `rows`: {"row", "case", "results"} per row that ran; `labels`: framework ->
    name. Rows run minutes apart, so this compares medians, not pairs."""
    candidates = []  # (ms, side, framework, row)
    for entry in rows:
        case = entry["case"]
        if (case.get("kind") != "infer" or case.get("batch_size") != 1 or case.get("jit")
                or case.get("precision") != "float32"):
            continue
        for framework, record in entry["results"].items():
            if record.get("status") == "ok" and framework in OURS + PEERS:
                side = "ours" if framework in OURS else "peer"
                candidates.append((record["value"], side, framework, entry["row"]))
    ours = [c for c in candidates if c[1] == "ours"]
    peers = [c for c in candidates if c[1] == "peer"]
    if not ours or not peers:
        return None
    best, rival = min(ours), min(peers)
    ratio = rival[0] / best[0]
    measured = (f"{labels[best[2]]} ({best[3]}) {best[0]:.1f} ms against "
                f"{labels[rival[2]]} ({rival[3]}) {rival[0]:.1f} ms: {ratio:.2f}x")
    return Check(f">= {MIN_RATIO:.2f}x", "batch-1 float32, fastest path", ratio >= MIN_RATIO,
                 measured)
