"""Whether TensorFlow runs oneDNN in this process, and albert-tf's choice where
TensorFlow leaves it off.

TensorFlow's x86-64 Linux wheels carry oneDNN (formerly MKL) kernels and graph rewrites,
switched at import by TF_ENABLE_ONEDNN_OPTS ("1"/"true" on, "0"/"false" off, any case).
Unset, TensorFlow turns them on only where the CPU has a neural-network feature
(`TENSORFLOW_DEFAULT_ON_FLAGS`: AVX512-VNNI, AVX512-BF16, AVX-VNNI or AMX; TensorFlow's
`DefaultOneDnnPolicy`), so CPUs without them (AMD Zen 1 to 3, Intel Core before Ice Lake
and Alder Lake, Xeons before Cascade Lake) run its Eigen kernels. For ALBERT oneDNN is
faster there too (training step 1.16x, inference 1.12x on an AMD EPYC Zen 3; 1.13x each
on a Zen 4 capped at AVX2: docs/performance.md, "oneDNN on AVX2-only CPUs"), so the
programs call `configure()` before TensorFlow is imported, which sets
TF_ENABLE_ONEDNN_OPTS=1 on such CPUs (AVX2 + FMA). A value the user set always wins.

`expected_on(cpu, environ)` is what TensorFlow will decide from the CPU and the
environment: the tests assert that the process runs what it says, and choose which
paths (oneDNN's or the plain / XLA ones) to check. `tf_internals.onednn_enabled()` is
what TensorFlow did decide, once imported.

This module never imports TensorFlow: it must run before TensorFlow is imported.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import Mapping, MutableMapping, Optional

from albert_tf.kernels import cpu as cpu_info

SWITCH = "TF_ENABLE_ONEDNN_OPTS"
# Set beside SWITCH when `configure` chose it, so that child processes (workers, the
# tests' subprocesses) say whose choice they inherit.
CHOSEN_MARK = "ALBERT_TF_ONEDNN_CHOSEN"
# /proc/cpuinfo flags with which TensorFlow turns oneDNN on by default on Linux.
TENSORFLOW_DEFAULT_ON_FLAGS = ("avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile",
                               "amx_int8", "amx_bf16")
# Where TensorFlow leaves oneDNN off, albert-tf turns it on on CPUs with these (the
# AVX2 + FMA kernels it was measured with; older CPUs were not measured).
MEASURED_FASTER_FLAGS = ("avx2", "fma")
_TRUE, _FALSE = ("1", "true"), ("0", "false")


@dataclasses.dataclass(frozen=True)
class OneDnnChoice:
    """`on`: whether TensorFlow will run oneDNN; `reason`: why, in words for the log;
    `set_here`: whether `configure` set TF_ENABLE_ONEDNN_OPTS for it."""

    on: bool
    reason: str
    set_here: bool = False

    def describe(self) -> str:
        return f"oneDNN {'on' if self.on else 'off'}: {self.reason}"


def user_setting(environ: Mapping[str, str]) -> Optional[bool]:
    """TF_ENABLE_ONEDNN_OPTS as TensorFlow reads it: True / False, or None where it is
    unset or not one of 0, 1, false, true (TensorFlow then warns and keeps its default)."""
    value = environ.get(SWITCH, "").strip().lower()
    return True if value in _TRUE else False if value in _FALSE else None


def _linux_x86(cpu: cpu_info.CpuInfo) -> bool:
    return sys.platform.startswith("linux") and cpu.is_x86


def _default_on_flag(cpu: cpu_info.CpuInfo) -> Optional[str]:
    """The first of TENSORFLOW_DEFAULT_ON_FLAGS the CPU has, or None."""
    return next((flag for flag in TENSORFLOW_DEFAULT_ON_FLAGS if flag in cpu.flags), None)


def tensorflow_default(cpu: cpu_info.CpuInfo) -> bool:
    """Whether TensorFlow turns oneDNN on here with TF_ENABLE_ONEDNN_OPTS unset: on x86-64
    Linux, where the CPU has one of TENSORFLOW_DEFAULT_ON_FLAGS. (Other platforms: taken
    as off; albert-tf makes no choice there.)"""
    return _linux_x86(cpu) and _default_on_flag(cpu) is not None


def choose(cpu: Optional[cpu_info.CpuInfo] = None,
           environ: Optional[Mapping[str, str]] = None) -> OneDnnChoice:
    """What this process should run, and why (see the module docstring)."""
    cpu = cpu_info.read_cpu_info() if cpu is None else cpu
    environ = os.environ if environ is None else environ
    user = user_setting(environ)
    if user is not None:
        whose = ("albert-tf's choice, inherited" if user and environ.get(CHOSEN_MARK) == "1"
                 else "set by the user")
        return OneDnnChoice(user, f"{SWITCH}={environ[SWITCH].strip()} ({whose})")
    if environ.get(SWITCH, "").strip():  # a value TensorFlow does not read: left alone
        return OneDnnChoice(tensorflow_default(cpu),
                            f"{SWITCH}={environ[SWITCH].strip()!r} is none of 0, 1, false, "
                            "true, so TensorFlow warns and keeps its default on this CPU")
    if not _linux_x86(cpu):
        return OneDnnChoice(False, f"TensorFlow's default on {sys.platform} {cpu.machine}")
    found = _default_on_flag(cpu)
    if found:
        return OneDnnChoice(True, f"TensorFlow's default on a CPU with {found} ({cpu.name})")
    if all(flag in cpu.flags for flag in MEASURED_FASTER_FLAGS):
        return OneDnnChoice(
            True, f"albert-tf's choice: TensorFlow leaves it off on this CPU ({cpu.name}: "
                  f"no {', '.join(TENSORFLOW_DEFAULT_ON_FLAGS)}), and ALBERT trains and infers "
                  f"1.12-1.16x faster with it on there (docs/performance.md, \"oneDNN on "
                  f"AVX2-only CPUs\"); {SWITCH}=0 keeps it off", set_here=True)
    return OneDnnChoice(False, f"TensorFlow's default on a CPU without AVX2 + FMA "
                               f"({cpu.name}), where oneDNN was not measured")


def expected_on(cpu: Optional[cpu_info.CpuInfo] = None,
                environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether TensorFlow, imported with `environ` on `cpu`, runs oneDNN (after
    `configure`, if the program called it): the user's setting, else TensorFlow's default
    from the CPU flags."""
    cpu = cpu_info.read_cpu_info() if cpu is None else cpu
    environ = os.environ if environ is None else environ
    user = user_setting(environ)
    return tensorflow_default(cpu) if user is None else user


_configured: Optional[OneDnnChoice] = None


def configure(environ: Optional[MutableMapping[str, str]] = None,
              cpu: Optional[cpu_info.CpuInfo] = None) -> OneDnnChoice:
    """Makes `choose`'s choice take effect: sets TF_ENABLE_ONEDNN_OPTS=1 (and CHOSEN_MARK)
    in `environ` where albert-tf turns oneDNN on. Call before TensorFlow is imported,
    which reads the variable once; afterwards the choice is reported but cannot change
    what TensorFlow runs (`configured()` then says so)."""
    global _configured
    environ = os.environ if environ is None else environ
    choice = choose(cpu, environ)
    if choice.set_here:
        if "tensorflow" in sys.modules:
            choice = OneDnnChoice(False, "TensorFlow was imported before albert-tf could "
                                         f"turn oneDNN on ({choice.reason})")
        else:
            environ[SWITCH] = "1"
            environ[CHOSEN_MARK] = "1"
    _configured = choice
    return choice


def configured() -> Optional[OneDnnChoice]:
    """The choice `configure` made in this process, or None where it was not called."""
    return _configured
