"""int8 ONNX files as each kind of CPU computes them (albert_tf.export.int8_arithmetic)."""
import numpy as np
import pytest

from albert_tf.export import int8_arithmetic
from albert_tf.kernels.precision import CpuInfo

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def matmul_integer_model(weights, weight_zero=None, with_activation_zero=True):
    """One MatMulInteger: a [M, K] uint8 input and its zero point against constant
    weights [K, N]."""
    from onnx import TensorProto, helper, numpy_helper
    inputs = [helper.make_tensor_value_info("a", TensorProto.UINT8, ["m", weights.shape[0]])]
    names = ["a", "b"]
    initializers = [numpy_helper.from_array(weights, "b")]
    if with_activation_zero:
        inputs.append(helper.make_tensor_value_info("a_zero", TensorProto.UINT8, []))
        names.append("a_zero")
    if weight_zero is not None:
        names += [""] * (3 - len(names)) + ["b_zero"]
        initializers.append(numpy_helper.from_array(weight_zero, "b_zero"))
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", names, ["y"])], "g", inputs,
        [helper.make_tensor_value_info("y", TensorProto.INT32, ["m", weights.shape[1]])],
        initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run(model, **feeds):
    session = ort.InferenceSession(model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def test_pairs_saturate_at_int16_without_vnni_and_sum_exactly_with_it():
    # 255 x 127 + 255 x 127 = 64770: beyond int16, so vpmaddubsw clips the pair to 32767.
    weights = np.array([[127, 1], [127, 1], [-100, 2], [-100, 3]], np.int8)
    a = np.array([[255, 255, 10, 20], [1, 2, 3, 4]], np.uint8)
    zero = np.array(128, np.uint8)
    model = matmul_integer_model(weights)
    raw = a.astype(np.int64) @ weights.astype(np.int64)  # zero point 0 first
    exact = run(int8_arithmetic.emulate(model, "exact"), a=a, a_zero=np.array(0, np.uint8))
    np.testing.assert_array_equal(exact, raw)
    saturating = run(int8_arithmetic.emulate(model, "saturating"), a=a,
                     a_zero=np.array(0, np.uint8))
    # Row 0, column 0: pair (255, 255) -> 32767, pair (10, 20) -> -3000.
    assert saturating[0, 0] == 32767 - 3000 and raw[0, 0] == 64770 - 3000
    np.testing.assert_array_equal(saturating[1], raw[1])  # small pairs: no clipping
    np.testing.assert_array_equal(saturating[:, 1], raw[:, 1])
    # The zero point is taken off after the raw (clipped) sums: 128 x column sum.
    shifted = run(int8_arithmetic.emulate(model, "saturating"), a=a, a_zero=zero)
    assert shifted[0, 0] == 32767 - 3000 - 128 * (127 + 127 - 100 - 100)
    reference = (a.astype(np.int64) - 128) @ weights.astype(np.int64)
    np.testing.assert_array_equal(run(int8_arithmetic.emulate(model, "exact"), a=a,
                                      a_zero=zero), reference)
    np.testing.assert_array_equal(run(model, a=a, a_zero=zero)[1], reference[1])


def test_unsigned_weights_and_their_zero_points_sum_exactly_on_every_cpu():
    rng = np.random.default_rng(0)
    weights = rng.integers(0, 256, (6, 3)).astype(np.uint8)
    weight_zero = np.array([120, 128, 131], np.uint8)
    a = rng.integers(0, 256, (5, 6)).astype(np.uint8)
    model = matmul_integer_model(weights, weight_zero)
    reference = (a.astype(np.int64) - 7) @ (weights.astype(np.int64) - weight_zero)
    for arithmetic in int8_arithmetic.ARITHMETICS:  # u8 x u8 never saturates
        got = run(int8_arithmetic.emulate(model, arithmetic), a=a, a_zero=np.array(7, np.uint8))
        np.testing.assert_array_equal(got, reference)
    np.testing.assert_array_equal(run(model, a=a, a_zero=np.array(7, np.uint8)), reference)


def test_this_cpus_onnx_runtime_computes_its_own_arithmetic():
    """Large pairs on purpose: the emulation of this CPU's kind matches ONNX Runtime's
    own kernels exactly, the other kind's does not."""
    rng = np.random.default_rng(1)
    weights = rng.integers(-127, 128, (64, 16)).astype(np.int8)
    a = rng.integers(200, 256, (8, 64)).astype(np.uint8)
    model = matmul_integer_model(weights)
    feeds = dict(a=a, a_zero=np.array(0, np.uint8))
    local = int8_arithmetic.local_arithmetic()
    np.testing.assert_array_equal(run(model, **feeds),
                                  run(int8_arithmetic.emulate(model, local), **feeds))
    other = ({"exact", "saturating"} - {local}).pop()
    assert np.any(run(model, **feeds) != run(int8_arithmetic.emulate(model, other), **feeds))


@pytest.mark.parametrize("flags,machine,want", [
    ("avx2 fma", "x86_64", "saturating"),
    ("avx2 fma avx512f avx512bw", "x86_64", "saturating"),  # Skylake-SP: no VNNI
    ("avx2 fma avx512f avx512_vnni", "x86_64", "exact"),
    ("avx2 fma avx_vnni", "x86_64", "exact"),
    ("avx2 amx_int8 amx_tile", "x86_64", "exact"),
    ("asimd asimddp", "aarch64", "exact")])
def test_which_cpus_saturate(flags, machine, want):
    cpu = CpuInfo("cpu", frozenset(flags.split()), machine)
    assert int8_arithmetic.local_arithmetic(cpu) == want


def test_emulation_names_what_it_cannot_take():
    from onnx import helper, TensorProto
    odd = matmul_integer_model(np.ones((3, 2), np.int8))
    with pytest.raises(ValueError, match=r"weights of shape \(3, 2\).*K even"):
        int8_arithmetic.emulate(odd, "exact")
    with pytest.raises(ValueError, match="unknown int8 arithmetic 'vnni'"):
        int8_arithmetic.emulate(odd, "vnni")
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [1, 2]),
         helper.make_tensor_value_info("b", TensorProto.INT8, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 2])])
    with pytest.raises(ValueError, match="weights 'b' are not a constant"):
        int8_arithmetic.emulate(helper.make_model(graph), "exact")
