"""`--mixed_precision=auto`: bf16 where the device multiplies it faster than float32,
float32 elsewhere.

bf16 pays only where the hardware multiplies bf16 at a higher rate than float32: CPUs with
AMX (amx_bf16), GPUs of compute capability 8.0 or more, TPUs. Without any bf16 instruction
(AVX2-only or plain AVX-512 CPUs, older GPUs) oneDNN and cuBLAS emulate it by converting to
float32 and back, and a bf16 model runs slower than a float32 one (measured on an AMD EPYC
with AVX2 only: the demo model 78-97 sequences/s in float32, 70-87 in bf16).

AVX512-BF16 without AMX is decided by measurement, because the instruction alone does not
tell: its dot product (VDPBF16PS) doubles the float32 multiply rate on AMD's Zen 4 and Zen 5
(probe 422 against 217 GFLOP/s; the demo model 1.28x) but not on Intel Xeons whose AMX the
hypervisor hides (family 6 model 207: bf16 GEMMs 0.54-0.76x float32, the demo model 383
against 650 sequences/s). There `auto` times oneDNN's float32 and bf16 matmul of the FFN's
shape in this process (about half a second, once per process) and picks bf16 only at
MIN_BF16_GEMM_SPEEDUP or more.

Everything the choice reads can be injected (`CpuInfo`, `gpu_capabilities`, `environ`,
`gemm_probe`), so it is tested on CPUs this machine is not.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import time
from typing import Callable, Mapping, Optional, Sequence, Tuple

from absl import logging

from albert_tf.kernels import onednn
# The CPU's description, read here before it had a module of its own: still importable from here.
from albert_tf.kernels.cpu import SHOWN_CPU_FLAGS, CpuInfo, read_cpu_info  # noqa: F401

AUTO = "auto"
POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
CHOICES = (AUTO,) + POLICIES

# x86 flags (Linux /proc/cpuinfo spelling) with which oneDNN multiplies bf16 natively:
# AMX's tiles always beat float32; AVX512-BF16 alone does on some cores only (measured).
AMX_BF16_FLAG = "amx_bf16"
AVX512_BF16_FLAG = "avx512_bf16"
NATIVE_BF16_CPU_FLAGS = (AMX_BF16_FLAG, AVX512_BF16_FLAG)
# With AVX512-BF16 and no AMX, `auto` picks bf16 only where the probe's bf16 GEMM is at least
# this much faster than its float32 one: the rest of a training step gains less (Zen 4: GEMMs
# 1.94x, the demo model 1.28x), and casts cost extra.
MIN_BF16_GEMM_SPEEDUP = 1.3
# ONEDNN_MAX_CPU_ISA values (oneDNN's spelling, any case) that stop below AVX-512, and
# those that stop below its bf16 instructions.
ONEDNN_ISAS_BELOW_AVX512 = ("sse41", "avx", "avx2", "avx2_vnni", "avx2_vnni_2")
_ONEDNN_ISAS_WITHOUT_BF16 = ONEDNN_ISAS_BELOW_AVX512 + ("avx512_core", "avx512_core_vnni")
# ... and those that allow AVX512-BF16 but stop below AMX.
_ONEDNN_ISAS_WITHOUT_AMX = _ONEDNN_ISAS_WITHOUT_BF16 + ("avx512_core_bf16", "avx512_core_fp16",
                                                       "avx10_1_512")


def check(requested: str) -> None:
    """Raises ValueError naming --mixed_precision unless `requested` is one of CHOICES."""
    if requested not in CHOICES:
        raise ValueError(f"--mixed_precision {requested!r} is not one of {', '.join(CHOICES)}")


@dataclasses.dataclass(frozen=True)
class PrecisionChoice:
    """The Keras dtype policy to use (`policy`) and why, in words (`reason`)."""

    policy: str
    reason: str


@dataclasses.dataclass(frozen=True)
class GemmRates:
    """oneDNN's matmul rates measured on this CPU, in GFLOP/s."""

    float32: float
    bfloat16: float

    @property
    def bf16_speedup(self) -> float:
        return self.bfloat16 / self.float32

    def describe(self) -> str:
        return (f"bf16 GEMMs {self.bf16_speedup:.2f}x float32: {self.bfloat16:.0f} against "
                f"{self.float32:.0f} GFLOP/s")


# ALBERT-base's first FFN product for two sequences of 128: [256, 768] x [768, 3072].
_PROBE_SHAPE = (256, 768, 3072)
_PROBE_WARMUP_ROUNDS, _PROBE_ROUNDS = 2, 7


@functools.cache
def measure_gemm_rates() -> GemmRates:
    """Times oneDNN's float32 and bf16 matmul of `_PROBE_SHAPE` on this process's CPU
    (traced, as the models run), alternating the two; each rate is its best round, so a busy
    moment of a shared machine costs a round, not the choice. About half a second; measured
    once per process (a failure raises, and is not cached)."""
    import tensorflow as tf

    m, k, n = _PROBE_SHAPE
    best = {}
    with tf.device("/CPU:0"):  # the CPU even where a GPU is the default device
        operands = {}
        for dtype in (tf.float32, tf.bfloat16):
            a = tf.cast(tf.random.stateless_normal([m, k], seed=(0, 1)), dtype)
            b = tf.cast(tf.random.stateless_normal([k, n], seed=(0, 2)), dtype)
            operands[dtype] = (a, b)
            best[dtype] = float("inf")
        product = tf.function(tf.linalg.matmul)
        for round_index in range(_PROBE_WARMUP_ROUNDS + _PROBE_ROUNDS):
            for dtype, (a, b) in operands.items():
                start = time.perf_counter()
                product(a, b).numpy()
                if round_index >= _PROBE_WARMUP_ROUNDS:
                    best[dtype] = min(best[dtype], time.perf_counter() - start)
    flops = 2.0 * m * k * n / 1e9
    return GemmRates(float32=flops / best[tf.float32], bfloat16=flops / best[tf.bfloat16])


def onednn_cap_below_bf16(environ: Mapping[str, str] = os.environ) -> Optional[str]:
    """ONEDNN_MAX_CPU_ISA's value (upper case) where it stops oneDNN below the bf16
    instructions, else None."""
    max_isa = environ.get("ONEDNN_MAX_CPU_ISA", "").strip().lower()
    return max_isa.upper() if max_isa in _ONEDNN_ISAS_WITHOUT_BF16 else None


def _cpu_choice(cpu: CpuInfo, environ: Mapping[str, str],
                gemm_probe: Callable[[], GemmRates]) -> PrecisionChoice:
    if onednn.user_setting(environ) is False:
        return PrecisionChoice("float32", f"{onednn.SWITCH}={environ[onednn.SWITCH].strip()} "
                                          "turns oneDNN off, and TensorFlow's own bf16 CPU "
                                          "kernels are slower than float32")
    max_isa = environ.get("ONEDNN_MAX_CPU_ISA", "").strip().lower()
    cap = onednn_cap_below_bf16(environ)
    if cap:
        return PrecisionChoice("float32", f"ONEDNN_MAX_CPU_ISA={cap} keeps oneDNN "
                                          "below the bf16 instructions, so bf16 would be "
                                          "emulated (slower than float32)")
    has_amx = AMX_BF16_FLAG in cpu.flags
    if has_amx and max_isa not in _ONEDNN_ISAS_WITHOUT_AMX:
        return PrecisionChoice("mixed_bfloat16", f"the CPU ({cpu.name}) computes bf16 "
                                                 f"natively ({AMX_BF16_FLAG})")
    no_amx = (f"AMX, which ONEDNN_MAX_CPU_ISA={max_isa.upper()} keeps oneDNN below" if has_amx
              else "no AMX")
    if AVX512_BF16_FLAG in cpu.flags:
        try:
            rates = gemm_probe()
        except Exception as error:  # noqa: BLE001 - any failure means "not known to be faster"
            return PrecisionChoice("float32", f"the CPU ({cpu.name}) has {AVX512_BF16_FLAG} "
                                              f"and {no_amx}, and its bf16 rate could not be "
                                              f"measured ({error})")
        if rates.bf16_speedup >= MIN_BF16_GEMM_SPEEDUP:
            return PrecisionChoice("mixed_bfloat16", f"the CPU ({cpu.name}) computes bf16 "
                                                     f"natively ({AVX512_BF16_FLAG}; measured "
                                                     f"{rates.describe()})")
        return PrecisionChoice("float32", f"the CPU ({cpu.name}) has {AVX512_BF16_FLAG} and "
                                          f"{no_amx}, and measured {rates.describe()}: below "
                                          f"the {MIN_BF16_GEMM_SPEEDUP}x at which a bf16 model "
                                          "gains enough over float32 to pay")
    if has_amx:
        return PrecisionChoice("float32", f"the CPU ({cpu.name}) has {no_amx}, and no "
                                          f"{AVX512_BF16_FLAG}: bf16 would be emulated, slower "
                                          "than float32")
    if not cpu.flags:
        return PrecisionChoice("float32", f"the CPU's features are unknown ({cpu.machine}; no "
                                          "/proc/cpuinfo), so bf16 is not known to be native")
    return PrecisionChoice("float32", f"the CPU ({cpu.name}) has no native bf16 (neither "
                                      f"{' nor '.join(NATIVE_BF16_CPU_FLAGS)}): bf16 would be "
                                      "emulated, slower than float32")


def choose(requested: str, *, device_kind: str = "CPU", cpu: Optional[CpuInfo] = None,
           gpu_capabilities: Sequence[Tuple[int, int]] = (),
           environ: Optional[Mapping[str, str]] = None,
           gemm_probe: Optional[Callable[[], GemmRates]] = None) -> PrecisionChoice:
    """The policy for `requested` ("auto" or a Keras policy name, which is kept as is).

    device_kind: "TPU", "GPU" or "CPU", what the model runs on.
    gpu_capabilities: (major, minor) compute capability of each GPU used (device_kind GPU).
    gemm_probe: measures this CPU's float32 and bf16 GEMM rates; called only for a CPU with
      AVX512-BF16 and no AMX (default `measure_gemm_rates`).
    """
    check(requested)
    if requested != AUTO:
        return PrecisionChoice(requested, "as requested")
    if device_kind == "TPU":
        return PrecisionChoice("mixed_bfloat16", "TPUs compute bf16 natively")
    if device_kind == "GPU":
        if gpu_capabilities and all(tuple(c) >= (8, 0) for c in gpu_capabilities):
            shown = ", ".join(f"{c[0]}.{c[1]}" for c in gpu_capabilities)
            return PrecisionChoice("mixed_bfloat16", f"the GPUs compute bf16 natively (compute "
                                                     f"capability {shown} >= 8.0)")
        shown = ", ".join(f"{c[0]}.{c[1]}" for c in gpu_capabilities) or "unknown"
        return PrecisionChoice("float32", f"not every GPU has native bf16 (compute capability "
                                          f"{shown}; 8.0 or more needed)")
    return _cpu_choice(cpu if cpu is not None else read_cpu_info(),
                       os.environ if environ is None else environ,
                       gemm_probe if gemm_probe is not None else measure_gemm_rates)


def _device_kind(strategy) -> Tuple[str, Tuple[Tuple[int, int], ...]]:
    """("TPU" | "GPU" | "CPU", GPU compute capabilities) of what `strategy` runs on."""
    import tensorflow as tf

    if strategy is not None and "TPU" in type(strategy).__name__:
        return "TPU", ()
    try:
        devices = list(strategy.extended.worker_devices) if strategy is not None else []
    except RuntimeError:  # the default strategy has no device list
        devices = []
    uses_gpu = any("GPU" in d.upper() for d in devices) if devices else bool(
        tf.config.list_logical_devices("GPU"))
    if not uses_gpu:
        return "CPU", ()
    capabilities = []
    for gpu in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(gpu)
        capabilities.append(tuple(details.get("compute_capability", (0, 0))))
    return "GPU", tuple(capabilities)


def resolve(requested: str, strategy=None) -> str:
    """The Keras policy for `requested` on the devices of `strategy` (default: the current
    one); for "auto", logs one line saying what was chosen and why."""
    if requested != AUTO:
        check(requested)
        return requested
    kind, capabilities = _device_kind(strategy)
    choice = choose(AUTO, device_kind=kind, gpu_capabilities=capabilities)
    logging.info("--mixed_precision=auto chose %s: %s", choice.policy, choice.reason)
    return choice.policy
