"""--mixed_precision=auto: bf16 only where the device multiplies it faster than float32."""
import math

import keras
import pytest

from albert_tf.kernels import precision
from albert_tf.kernels.precision import CpuInfo, GemmRates

# Flags as /proc/cpuinfo lists them on the machines this project has run on.
AVX2_EPYC = CpuInfo("AMD EPYC 7B13", frozenset("fpu sse2 avx avx2 fma bmi2".split()), "x86_64")
ZEN5_EPYC = CpuInfo("AMD EPYC 9B45", frozenset(
    "avx avx2 fma avx512f avx512bw avx512_vnni avx512_bf16".split()), "x86_64")
SAPPHIRE_RAPIDS = CpuInfo("Intel(R) Xeon(R) Platinum 8481C", frozenset(
    "avx2 fma avx512f avx512_vnni avx512_bf16 amx_tile amx_bf16 amx_int8".split()), "x86_64")
AMX_ONLY = CpuInfo("Intel(R) Xeon(R) Processor", frozenset(
    "avx2 fma avx512f amx_tile amx_bf16".split()), "x86_64")
SKYLAKE = CpuInfo("Intel(R) Xeon(R) Gold 6154", frozenset("avx2 fma avx512f avx512bw".split()),
                  "x86_64")
# An Emerald Rapids VM whose hypervisor hides AMX: AVX512-BF16 without its speed.
XEON_AMX_HIDDEN = CpuInfo("Intel(R) Xeon(R) Processor", frozenset(
    "avx2 fma avx512f avx512_vnni avx512_bf16 avx512_fp16".split()), "x86_64", "6", "207")

# Probe readings as measured: Zen 4 (probe rows of make bench) and the Xeon above.
ZEN_RATES = GemmRates(float32=217.0, bfloat16=422.0)
XEON_RATES = GemmRates(float32=208.0, bfloat16=137.0)


def probe_returning(rates, calls=None):
    def probe():
        if calls is not None:
            calls.append(1)
        return rates
    return probe


def no_probe():
    raise AssertionError("the GEMM probe ran where the flags decide")


@pytest.mark.parametrize("cpu,want", [(AVX2_EPYC, "float32"), (SKYLAKE, "float32"),
                                      (SAPPHIRE_RAPIDS, "mixed_bfloat16"),
                                      (AMX_ONLY, "mixed_bfloat16")])
def test_auto_follows_the_flags_where_they_decide(cpu, want):
    choice = precision.choose("auto", cpu=cpu, environ={}, gemm_probe=no_probe)
    assert choice.policy == want
    assert cpu.model in choice.reason
    if want == "float32":
        assert "no native bf16" in choice.reason and "emulated" in choice.reason
    else:
        assert "natively (amx_bf16)" in choice.reason


@pytest.mark.parametrize("cpu,rates,want", [(ZEN5_EPYC, ZEN_RATES, "mixed_bfloat16"),
                                            (XEON_AMX_HIDDEN, XEON_RATES, "float32"),
                                            # at the threshold bf16 is taken, just below not
                                            (ZEN5_EPYC, GemmRates(100.0, 130.0), "mixed_bfloat16"),
                                            (ZEN5_EPYC, GemmRates(100.0, 129.0), "float32")])
def test_auto_measures_avx512_bf16_without_amx(cpu, rates, want):
    calls = []
    choice = precision.choose("auto", cpu=cpu, environ={},
                              gemm_probe=probe_returning(rates, calls))
    assert calls == [1]
    assert choice.policy == want
    assert cpu.name in choice.reason and "avx512_bf16" in choice.reason
    # The reason gives the measurement, so a log reader sees why.
    assert f"{rates.bf16_speedup:.2f}x float32" in choice.reason
    assert f"{rates.bfloat16:.0f} against {rates.float32:.0f} GFLOP/s" in choice.reason
    if want == "float32":
        assert "and no AMX" in choice.reason and "below the 1.3x" in choice.reason


def test_auto_is_float32_when_the_probe_fails():
    def broken():
        raise RuntimeError("oneDNN said no")
    choice = precision.choose("auto", cpu=ZEN5_EPYC, environ={}, gemm_probe=broken)
    assert choice.policy == "float32"
    assert "could not be measured (oneDNN said no)" in choice.reason


def test_measure_gemm_rates_measures_this_cpu():
    rates = precision.measure_gemm_rates()
    assert math.isfinite(rates.float32) and rates.float32 > 1.0
    assert math.isfinite(rates.bfloat16) and rates.bfloat16 > 0.1
    assert precision.measure_gemm_rates() is rates  # once per process


def test_auto_respects_onednn_switches():
    capped = precision.choose("auto", cpu=SAPPHIRE_RAPIDS, environ={"ONEDNN_MAX_CPU_ISA": "AVX2"},
                              gemm_probe=no_probe)
    assert capped.policy == "float32" and "ONEDNN_MAX_CPU_ISA=AVX2" in capped.reason
    uncapped = precision.choose("auto", cpu=SAPPHIRE_RAPIDS,
                                environ={"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"},
                                gemm_probe=no_probe)
    assert uncapped.policy == "mixed_bfloat16"
    # Capped below AMX, an AMX CPU is one with AVX512-BF16 only: measured.
    calls = []
    below_amx = precision.choose("auto", cpu=SAPPHIRE_RAPIDS,
                                 environ={"ONEDNN_MAX_CPU_ISA": "avx512_core_bf16"},
                                 gemm_probe=probe_returning(XEON_RATES, calls))
    assert below_amx.policy == "float32" and calls == [1]
    assert "AMX, which ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 keeps oneDNN below" in below_amx.reason
    amx_only = precision.choose("auto", cpu=AMX_ONLY,
                                environ={"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_FP16"},
                                gemm_probe=no_probe)
    assert amx_only.policy == "float32"
    assert "AMX, which ONEDNN_MAX_CPU_ISA=AVX512_CORE_FP16 keeps oneDNN below" in amx_only.reason
    assert "emulated" in amx_only.reason
    off = precision.choose("auto", cpu=ZEN5_EPYC, environ={"TF_ENABLE_ONEDNN_OPTS": "0"},
                           gemm_probe=no_probe)
    assert off.policy == "float32" and "TF_ENABLE_ONEDNN_OPTS=0" in off.reason


def test_auto_unknown_cpu_features_is_float32():
    choice = precision.choose("auto", cpu=CpuInfo("Apple M2", frozenset(), "arm64"), environ={})
    assert choice.policy == "float32" and "unknown" in choice.reason


@pytest.mark.parametrize("capabilities,want", [((( 8, 0),), "mixed_bfloat16"),
                                               (((9, 0), (8, 6)), "mixed_bfloat16"),
                                               (((7, 5),), "float32"),
                                               (((8, 0), (7, 0)), "float32"),
                                               ((), "float32")])
def test_auto_on_gpus_needs_compute_capability_8(capabilities, want):
    choice = precision.choose("auto", device_kind="GPU", gpu_capabilities=capabilities)
    assert choice.policy == want


def test_auto_on_tpu_and_explicit_values():
    assert precision.choose("auto", device_kind="TPU").policy == "mixed_bfloat16"
    for name in precision.POLICIES:  # an explicit value is kept, whatever the CPU
        assert precision.choose(name, cpu=AVX2_EPYC, environ={}).policy == name
    with pytest.raises(ValueError, match="--mixed_precision 'bf16' is not one of auto, float32"):
        precision.choose("bf16")


def test_read_cpu_info_parses_x86_and_aarch64(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
                   "model name\t: AMD EPYC\nflags\t\t: fpu avx2 fma\n\nprocessor\t: 1\n"
                   "cpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n"
                   "flags\t\t: fpu avx2 fma\n")
    info = precision.read_cpu_info(str(x86))
    assert info.model == "AMD EPYC" and info.flags == {"fpu", "avx2", "fma"}
    # A bare "AMD EPYC" covers several generations: the numbers tell them apart.
    assert info.name == "AMD EPYC (family 25, model 17)"
    assert "AMD EPYC (family 25, model 17)" in precision.choose(
        "auto", cpu=info, environ={}, gemm_probe=no_probe).reason
    assert info.shown_flags() == "avx2 fma"
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\nCPU part\t: 0xd4f\n")
    arm_info = precision.read_cpu_info(str(arm))
    assert "bf16" in arm_info.flags and arm_info.name == arm_info.model
    missing = precision.read_cpu_info(str(tmp_path / "absent"))
    assert missing.flags == frozenset() and missing.model


@pytest.mark.parametrize("cpu,want", [(AVX2_EPYC, "float32"), (ZEN5_EPYC, "mixed_bfloat16"),
                                      (XEON_AMX_HIDDEN, "float32")])
def test_auto_reaches_the_keras_policy_of_a_training_run(tmp_path, monkeypatch, cpu, want):
    from tests.finetuning.test_job import run

    monkeypatch.setattr(precision, "read_cpu_info", lambda: cpu)
    rates = XEON_RATES if cpu is XEON_AMX_HIDDEN else ZEN_RATES
    monkeypatch.setattr(precision, "measure_gemm_rates", probe_returning(rates))
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    logged = []  # absl's handler may not reach pytest's caplog once absl is set up
    monkeypatch.setattr(precision.logging, "info", lambda fmt, *args: logged.append(fmt % args))
    results = run(tmp_path, mixed_precision="auto", train_step=2, save_checkpoints_steps=2,
                  iterations_per_loop=2, warmup_step=0, do_eval=False, do_predict=False)
    assert results["model"].dtype_policy.name == want
    assert keras.mixed_precision.dtype_policy().name == "float32"  # the global one untouched
    line = [message for message in logged if "--mixed_precision=auto" in message]
    assert line == [f"--mixed_precision=auto chose {want}: "
                    f"{precision.choose('auto', cpu=cpu, environ={}, gemm_probe=lambda: rates).reason}"]
