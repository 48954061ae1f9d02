"""TensorFlow's private API, as albert_tf uses it (albert_tf.kernels.tf_internals).

The tests here never skip: on the pinned TensorFlow every internal must exist, and on
x86-64 Linux (whose wheel runs oneDNN) the fast paths that depend on them must be on,
so that a TensorFlow upgrade which moves an internal fails here instead of switching a
fast path, and the tests of that path, off without a word. The helpers `onednn_on`,
`require_onednn` and `require_onednn_layer_norm` are the other tests' way to ask: they
assert where the pinned build must have the feature, and skip (saying why) only where
it is genuinely absent on this platform or switched off on purpose.
"""
import pathlib
import platform
import re
import types

import pytest
import tensorflow as tf

from albert_tf.kernels import fused_ops, onednn, tf_internals
from tests.conftest import REPO_ROOT

PINNED_TENSORFLOW = "2.21"


def onednn_expected() -> bool:
    """Whether this process must run oneDNN (`onednn.expected_on`: TF_ENABLE_ONEDNN_OPTS
    as the user or albert-tf's start-up choice set it, else TensorFlow's default from the
    CPU flags). On x86-64 Linux the pinned wheel has oneDNN, so it must then be on."""
    return (platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")
            and onednn.expected_on())


def _why_no_onednn() -> str:
    if platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64"):
        return f"oneDNN is off in this process ({onednn.choose().describe()})"
    return (f"platform-dependent: oneDNN is on by default only in TensorFlow's x86-64 "
            f"Linux wheels, this is {platform.system()} {platform.machine()}")


def _present_where_expected(present: bool, what: str) -> bool:
    """`present`, asserted true where oneDNN is expected (`onednn_expected`)."""
    assert present or not onednn_expected(), (
        f"{what} is off or absent in TensorFlow {tf.__version__} on x86-64 Linux; "
        f"TensorFlow internals missing: {tf_internals.missing_internals()}")
    return present


def onednn_on() -> bool:
    """Whether oneDNN runs in this process; asserts that it does where it must."""
    return _present_where_expected(tf_internals.onednn_enabled(), "oneDNN")


def require_onednn():
    """For a test of a oneDNN path: asserts oneDNN is on where it must be, skips (with
    the reason) where it is absent on this platform or switched off."""
    if not onednn_on():
        pytest.skip(_why_no_onednn())


def require_onednn_layer_norm():
    """As `require_onednn`, for the in-process oneDNN LayerNorm (`_MklLayerNorm`)."""
    require_onednn()
    if tf.config.list_logical_devices("GPU"):
        pytest.skip("platform-dependent: a GPU is visible, and oneDNN's LayerNorm is "
                    "CPU-only (the XLA kernel runs)")
    if not _present_where_expected(fused_ops.onednn_layer_norm_available(),
                                   tf_internals.ONEDNN_LAYER_NORM_OP):
        pytest.skip(f"platform-dependent: this {platform.machine()} TensorFlow has no "
                    f"{tf_internals.ONEDNN_LAYER_NORM_OP}")


def test_the_pinned_tensorflow_has_every_internal_albert_tf_uses():
    assert tf.__version__.startswith(PINNED_TENSORFLOW + "."), (
        f"tf_internals was checked against TensorFlow {PINNED_TENSORFLOW}, this is "
        f"{tf.__version__}: check each of tf_internals.INTERNALS, then update the pin here")
    assert tf_internals.missing_internals() == []


def test_onednn_is_on_exactly_where_expected_and_its_layer_norm_with_it():
    """The process runs what `onednn.expected_on` says (the CPU flags, the user's
    TF_ENABLE_ONEDNN_OPTS, albert-tf's start-up choice), and oneDNN's LayerNorm runs
    exactly where oneDNN does (the op is in the wheel either way)."""
    linux_x86 = platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")
    if linux_x86:
        assert tf_internals.onednn_enabled() == onednn_expected(), onednn.choose().describe()
        assert tf_internals.onednn_layer_norm_op_available()
        gpu = bool(tf.config.list_logical_devices("GPU"))
        assert fused_ops.onednn_layer_norm_available() == (onednn_expected() and not gpu)


@pytest.mark.parametrize("require", [require_onednn, require_onednn_layer_norm])
def test_the_onednn_requirements_fail_rather_than_skip_where_the_wheel_has_onednn(
        require, monkeypatch):
    monkeypatch.setattr(tf_internals, "onednn_enabled", lambda: False)
    with pytest.raises(AssertionError if onednn_expected() else pytest.skip.Exception):
        require()


def _probes():
    return (tf_internals.tracing_for_saved_model(), tf_internals.compiled_by_xla(),
            fused_ops.use_fused())


def test_save_and_xla_probes_inside_and_outside_their_traces(tmp_path):
    seen = {"eager": _probes()}

    @tf.function
    def traced():
        seen["traced"] = _probes()
        return tf.constant(0)

    @tf.function
    def inner():
        seen["inside xla"] = _probes()
        return tf.constant(0)

    @tf.function(jit_compile=True)
    def compiled():
        seen["xla"] = _probes()
        return inner()

    class Export(tf.Module):
        @tf.function(input_signature=[])
        def serve(self):
            seen["saving"] = _probes()
            return tf.constant(0)

    traced()
    compiled()
    tf.saved_model.save(Export(), str(tmp_path / "probe"))
    # (tracing for a SavedModel, compiled by XLA, fused kernels used)
    assert seen == {"eager": (False, False, False), "traced": (False, False, True),
                    "xla": (False, True, False), "inside xla": (False, True, False),
                    "saving": (True, False, False)}


def test_a_tensorflow_without_the_internals_gets_the_plain_paths(monkeypatch, tmp_path):
    monkeypatch.setattr(tf_internals, "_lookup", lambda module, attribute: None)
    assert tf_internals.missing_internals() == [
        f"{module}.{attribute}" for module, attribute in tf_internals.INTERNALS]
    assert not tf_internals.onednn_enabled()
    assert tf_internals.gce_termination_watcher() is None  # SIGTERM still stops training
    assert not tf_internals.configure_worker_heartbeat(
        tf.train.ClusterSpec({"worker": ["127.0.0.1:2222"]}), 5.0)
    # (onednn_layer_norm_op_available is cached: its uncached function)
    assert not tf_internals.onednn_layer_norm_op_available.__wrapped__()
    seen = []

    @tf.function
    def traced():
        seen.append(_probes())
        with pytest.raises(NotImplementedError, match="_MklLayerNorm"):
            tf_internals.make_onednn_layer_norm(
                tf.ones([2, 4]), tf.ones([4]), tf.zeros([4]), 1e-12, "norm")
        return tf.constant(0)

    traced()
    assert seen == [(True, True, False)]  # as if saving and under XLA: plain ops


def test_each_internal_is_looked_up_once(monkeypatch):
    for internal in tf_internals.INTERNALS:
        assert tf_internals._lookup(*internal) is not None, internal

    def no_more_imports(name):
        raise AssertionError(f"{name} imported again")

    monkeypatch.setattr(tf_internals, "importlib", types.SimpleNamespace(
        import_module=no_more_imports))
    seen = []

    @tf.function
    def traced():
        seen.append(_probes() + (tf_internals.onednn_enabled(),))
        return tf.constant(0)

    traced()
    assert seen == [(False, False, True, tf_internals.onednn_enabled())]


# Spellings of TensorFlow internals; the `saved_model_cli` module is run as a command.
INTERNAL_SPELLINGS = re.compile(r"tensorflow\.python|_pywrap|op_def_registry|"
                                r"_create_op_internal|__internal__|control_flow_util|"
                                r"save_context")
ALLOWED = {pathlib.Path("albert_tf/kernels/tf_internals.py"),
           pathlib.Path("tests/kernels/test_tf_internals.py")}


def test_only_tf_internals_touches_tensorflow_internals():
    found = []
    for folder in ("albert_tf", "tests"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            relative = path.relative_to(REPO_ROOT)
            if relative in ALLOWED:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                line = line.replace("tensorflow.python.tools.saved_model_cli", "")
                if INTERNAL_SPELLINGS.search(line):
                    found.append(f"{relative}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
