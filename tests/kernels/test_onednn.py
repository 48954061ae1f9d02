"""albert_tf.kernels.onednn: whether TensorFlow runs oneDNN, and the start-up choice that
turns it on where TensorFlow leaves it off (AVX2-only CPUs)."""
import subprocess
import sys

import pytest

from albert_tf.kernels import onednn
from albert_tf.kernels.cpu import CpuInfo
from tests.conftest import REPO_ROOT
from tests.kernels.test_precision import AVX2_EPYC, SAPPHIRE_RAPIDS, SKYLAKE, ZEN5_EPYC

ALDER_LAKE = CpuInfo("12th Gen Intel(R) Core(TM) i7-1260P", frozenset(
    "avx avx2 fma avx_vnni".split()), "x86_64")
SANDY_BRIDGE = CpuInfo("Intel(R) Xeon(R) CPU E5-2670", frozenset("sse4_2 avx".split()), "x86_64")
GRAVITON = CpuInfo("Neoverse-V1", frozenset("asimd sve".split()), "aarch64")


def test_tensorflows_default_follows_its_neural_network_flags():
    # TensorFlow's DefaultOneDnnPolicy on Linux: AVX512-VNNI, AVX512-BF16, AVX-VNNI, AMX.
    assert onednn.tensorflow_default(ZEN5_EPYC) and onednn.tensorflow_default(SAPPHIRE_RAPIDS)
    assert onednn.tensorflow_default(ALDER_LAKE)  # AVX-VNNI (the VEX form) counts
    assert not onednn.tensorflow_default(AVX2_EPYC)  # Zen 1-3
    assert not onednn.tensorflow_default(SKYLAKE)  # AVX-512 without VNNI
    assert not onednn.tensorflow_default(GRAVITON)


@pytest.mark.parametrize("value,setting", [
    ("0", False), ("false", False), ("FALSE", False), (" 0 ", False), ("1", True),
    ("true", True), ("True", True), ("", None), ("yes", None), ("2", None)])
def test_the_users_switch_is_read_as_tensorflow_reads_it(value, setting):
    assert onednn.user_setting({onednn.SWITCH: value}) is setting
    assert onednn.user_setting({}) is None


def test_albert_tf_turns_it_on_where_tensorflow_leaves_it_off_on_avx2_cpus():
    for cpu in (AVX2_EPYC, SKYLAKE):
        choice = onednn.choose(cpu, {})
        assert choice.on and choice.set_here, choice
        assert choice.describe().startswith("oneDNN on: albert-tf's choice: TensorFlow "
                                            "leaves it off on this CPU"), choice
        assert "TF_ENABLE_ONEDNN_OPTS=0 keeps it off" in choice.reason
    default = onednn.choose(ZEN5_EPYC, {})
    assert default == onednn.OneDnnChoice(
        True, "TensorFlow's default on a CPU with avx512_vnni (AMD EPYC 9B45)")
    old = onednn.choose(SANDY_BRIDGE, {})  # no AVX2: not measured, TensorFlow's default
    assert not old.on and not old.set_here and "without AVX2 + FMA" in old.reason
    assert not onednn.choose(GRAVITON, {}).on


def test_the_users_setting_always_wins_and_is_named():
    off = onednn.choose(AVX2_EPYC, {onednn.SWITCH: "0"})
    assert off == onednn.OneDnnChoice(False, "TF_ENABLE_ONEDNN_OPTS=0 (set by the user)")
    assert not onednn.choose(ZEN5_EPYC, {onednn.SWITCH: "false"}).on
    assert onednn.choose(SANDY_BRIDGE, {onednn.SWITCH: "1"}).on
    inherited = onednn.choose(AVX2_EPYC, {onednn.SWITCH: "1", onednn.CHOSEN_MARK: "1"})
    assert inherited.describe() == ("oneDNN on: TF_ENABLE_ONEDNN_OPTS=1 (albert-tf's "
                                    "choice, inherited)")
    # The mark means nothing beside a value the user set.
    assert onednn.choose(AVX2_EPYC, {onednn.SWITCH: "0", onednn.CHOSEN_MARK: "1"}).reason == (
        "TF_ENABLE_ONEDNN_OPTS=0 (set by the user)")
    # A value TensorFlow does not read: TensorFlow warns and keeps its default, and
    # albert-tf does not overwrite what the user wrote.
    odd = onednn.choose(AVX2_EPYC, {onednn.SWITCH: "yes"})
    assert not odd.on and not odd.set_here
    assert odd.reason == ("TF_ENABLE_ONEDNN_OPTS='yes' is none of 0, 1, false, true, so "
                          "TensorFlow warns and keeps its default on this CPU")
    assert onednn.choose(ZEN5_EPYC, {onednn.SWITCH: "on"}).on
    environ = {onednn.SWITCH: "yes"}
    onednn.configure(environ, AVX2_EPYC)
    assert environ == {onednn.SWITCH: "yes"}


def test_expected_on_is_what_tensorflow_will_run():
    assert not onednn.expected_on(AVX2_EPYC, {})  # TensorFlow alone: off
    assert onednn.expected_on(AVX2_EPYC, {onednn.SWITCH: "1"})
    assert onednn.expected_on(ZEN5_EPYC, {})
    assert not onednn.expected_on(ZEN5_EPYC, {onednn.SWITCH: "0"})


def test_configure_sets_the_switch_only_where_albert_tf_chooses(monkeypatch):
    monkeypatch.setattr(onednn, "_configured", onednn.configured())  # restored afterwards
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)  # as before TensorFlow's import
    environ = {}
    assert onednn.configure(environ, AVX2_EPYC).on
    assert environ == {onednn.SWITCH: "1", onednn.CHOSEN_MARK: "1"}
    assert onednn.expected_on(AVX2_EPYC, environ)
    for cpu, env in ((ZEN5_EPYC, {}), (AVX2_EPYC, {onednn.SWITCH: "0"}), (SANDY_BRIDGE, {})):
        before = dict(env)
        onednn.configure(env, cpu)
        assert env == before, cpu


def test_configure_after_tensorflow_is_imported_says_it_came_too_late(monkeypatch):
    import tensorflow  # noqa: F401
    monkeypatch.setattr(onednn, "_configured", onednn.configured())  # restored afterwards
    environ = {}
    choice = onednn.configure(environ, AVX2_EPYC)
    assert not choice.on and environ == {}
    assert choice.reason.startswith("TensorFlow was imported before albert-tf could turn "
                                    "oneDNN on")
    assert onednn.configured() is choice


_CONFIGURE_THEN_IMPORT = """
import os, sys
os.environ.pop("TF_ENABLE_ONEDNN_OPTS", None) if sys.argv[1] == "unset" else None
from albert_tf.kernels import cpu, onednn
assert "tensorflow" not in sys.modules
avx2_epyc = cpu.CpuInfo("AMD EPYC 7B13", frozenset("avx avx2 fma".split()), "x86_64")
choice = onednn.configure(cpu=avx2_epyc)
from albert_tf.kernels import tf_internals
print(choice.on, tf_internals.onednn_enabled(), os.environ.get("TF_ENABLE_ONEDNN_OPTS"))
"""


@pytest.mark.parametrize("switch,expected", [
    ("unset", "True True 1"), ("0", "False False 0")])
def test_the_choice_takes_effect_in_tensorflow(switch, expected):
    """On an AVX2-only CPU (its flags given), `configure` before the import turns
    TensorFlow's oneDNN on, whatever this machine's own default; the user's 0 keeps it off."""
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in (onednn.SWITCH, onednn.CHOSEN_MARK)}
    if switch != "unset":
        env[onednn.SWITCH] = switch
    out = subprocess.run([sys.executable, "-c", _CONFIGURE_THEN_IMPORT, switch], env=env,
                         cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == expected, out.stderr[-2000:]


def test_the_programs_log_the_choice_once(tmp_path):
    out = subprocess.run([sys.executable, str(REPO_ROOT / "run_classifier.py"),
                          "--task_name=SST-2", f"--output_dir={tmp_path}"],
                         cwd=REPO_ROOT, capture_output=True, text=True)
    assert out.returncode == 2, out.stderr[-2000:]
    lines = [line for line in out.stderr.splitlines()
             if "] oneDNN on: " in line or "] oneDNN off: " in line]
    assert len(lines) == 1 and onednn.choose().describe() in lines[0], out.stderr[-2000:]
