"""How much of a TensorFlow unit (a training step) its matrix products take, from a trace.

`matmul_seconds(unit, count)` runs `unit()` `count` times under `tf.profiler`, reads the
host trace (XSpace protobuf: one line per executor thread, one event per kernel, named
"<op name>:<op type>") and returns the wall time during which at least one matrix
product ran (the union of their intervals over all threads, so products running side
by side are not counted twice), per unit. Their share of the traced unit, applied to the
untraced unit's time (tracing slows a step by 2-15%), with the analytic FLOPs of the unit
(bench/flops.py) gives the rate the products reach inside the step, to set against the
matmul probe: the part of a step's shortfall that is the GEMMs themselves, apart from the
step's other ops and idle threads.
"""
from __future__ import annotations

import glob
import os
import shutil
import tempfile
import time
from typing import Callable, Dict, List, Tuple

# Kernel types that are matrix products: TensorFlow's (MatMul, BatchMatMulV2, Einsum)
# and oneDNN's rewrites of them (_MklMatMul, _MklNativeFusedMatMul, _MklBatchMatMulV2, ...).
MATMUL_TYPE_PARTS = ("MatMul", "Einsum")


def is_matmul(op_type: str) -> bool:
    return any(part in op_type for part in MATMUL_TYPE_PARTS)


def union_seconds(intervals: List[Tuple[int, int]]) -> float:
    """Total length of the union of [start, end) intervals given in picoseconds."""
    total, current_start, current_end = 0, None, None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total / 1e12


def kernel_intervals(xspace_path: str) -> Dict[str, List[Tuple[int, int]]]:
    """op type -> [(start_ps, end_ps)] of every kernel event on the host plane."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    space = xplane_pb2.XSpace()
    with open(xspace_path, "rb") as handle:
        space.ParseFromString(handle.read())
    intervals: Dict[str, List[Tuple[int, int]]] = {}
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            base_ps = line.timestamp_ns * 1000
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if ":" not in name:
                    continue  # executor bookkeeping, Python frames
                op_type = name.rsplit(":", 1)[1]
                start = base_ps + event.offset_ps
                intervals.setdefault(op_type, []).append((start, start + event.duration_ps))
    return intervals


def matmul_seconds(unit: Callable[[], None], count: int) -> dict:
    """Runs `unit` `count` times under the profiler; returns per unit: `matmul_seconds`
    (union of the products' intervals), `unit_seconds` (wall time, profiler on) and
    `matmul_types` (the product kernels seen, by their share of the products' time)."""
    import tensorflow as tf
    logdir = tempfile.mkdtemp(prefix="albert_bench_profile_")
    try:
        tf.profiler.experimental.start(logdir)
        started = time.perf_counter()
        for _ in range(count):
            unit()
        wall = time.perf_counter() - started
        tf.profiler.experimental.stop()
        paths = glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)
        if not paths:
            raise RuntimeError(f"the profiler wrote no trace under {logdir}")
        by_type = kernel_intervals(paths[0])
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
    products = {t: spans for t, spans in by_type.items() if is_matmul(t)}
    total = union_seconds([s for spans in products.values() for s in spans])
    return {"matmul_seconds": total / count, "unit_seconds": wall / count,
            "matmul_types": sorted(products, key=lambda t: -union_seconds(products[t]))}
