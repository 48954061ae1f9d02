"""What the CPU reports (/proc/cpuinfo): its name, family, model and instruction-set flags.

Read by the choices that depend on the CPU (precision, oneDNN, the AVX2 GEMM path, int8
arithmetic); every reader takes a `CpuInfo` argument, so each choice is tested on CPUs
this machine is not. Imports neither TensorFlow nor the rest of albert_tf.
"""
from __future__ import annotations

import dataclasses
import platform

# Flags `make bench` and the log show, in this order, when the CPU has them.
SHOWN_CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile",
                   "amx_bf16", "amx_int8")


@dataclasses.dataclass(frozen=True)
class CpuInfo:
    """What the CPU reports: `model` (e.g. "AMD EPYC 9B45"), `flags` (lower case, as in
    /proc/cpuinfo), `machine` (platform.machine(), e.g. "x86_64"), and x86's `family` and
    `model_number` ("" where not reported)."""

    model: str
    flags: frozenset
    machine: str
    family: str = ""
    model_number: str = ""

    @property
    def name(self) -> str:
        """The model name, with the family and model numbers where the CPU reports them:
        cloud VMs often name only "AMD EPYC", which covers Zen 2 to Zen 5 (families 23, 25
        and 26), e.g. "AMD EPYC (family 25, model 17)"."""
        if self.family and self.model_number:
            return f"{self.model} (family {self.family}, model {self.model_number})"
        return self.model

    @property
    def is_x86(self) -> bool:
        return self.machine.lower() in ("x86_64", "amd64", "i686", "i386", "x86")

    def shown_flags(self) -> str:
        """The performance-relevant flags it has, e.g. "avx2 fma avx512f avx512_bf16"."""
        return " ".join(f for f in SHOWN_CPU_FLAGS if f in self.flags) or "(none of note)"


def read_cpu_info(path: str = "/proc/cpuinfo") -> CpuInfo:
    """This machine's CPU; flags are empty where /proc/cpuinfo does not exist (macOS,
    Windows), which `auto` treats as "no native bf16"."""
    model, flags, numbers = "", frozenset(), {}
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "model name" and not model:
            model = value.strip()
        elif key in ("flags", "features") and not flags:  # x86 / aarch64 spelling
            flags = frozenset(value.lower().split())
        elif key in ("cpu family", "model") and key not in numbers:
            numbers[key] = value.strip()
    return CpuInfo(model or platform.processor() or "unknown CPU", flags, platform.machine(),
                   numbers.get("cpu family", ""), numbers.get("model", ""))
