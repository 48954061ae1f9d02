"""What an int8 ONNX file computes on each kind of CPU, reproducible on any CPU.

A dynamically quantized file (`onnx.quantize_int8`) multiplies uint8 activations by int8
weights in `MatMulInteger` nodes. ONNX Runtime's CPU kernels (MLAS) sum the products in
one of two ways, chosen by the serving CPU:

- **exact**: every product summed in int32. x86 CPUs with VNNI (`vpdpbusd`: AVX512-VNNI,
  AVX-VNNI) or AMX, and ARM.
- **saturating**: x86 CPUs without VNNI (AVX2-only ones, and AVX-512 ones before Cascade
  Lake) use `vpmaddubsw`, which adds the products of adjacent pairs along the summed axis
  (k, k+1 for even k) into int16 *with saturation* before the int32 sum: a pair beyond
  [-32768, 32767] is clipped (255 x 127 x 2 = 64770 is reachable).

So one file can predict differently on two servers. `emulate(model, arithmetic)` rewrites
each `MatMulInteger` of constant int8 weights as float64 ops that compute one of the two
(float64 holds every int32 sum exactly), so that a test or a bench on any CPU can measure
what the file does on the other kind. Shapes: A [..., M, K] uint8, B [K, N] int8 with K
even; the rewrite materialises the [..., M, K/2, N] pair sums (K/2 x N float64 per row:
1.2 GB per 128-token sequence in ALBERT-base's FFN), so it is for measurements on small
batches, not for serving.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

EXACT = "exact"
SATURATING = "saturating"
ARITHMETICS = (EXACT, SATURATING)
INT16_MIN, INT16_MAX = -32768.0, 32767.0
# CPU flags (as /proc/cpuinfo spells them) with which MLAS sums u8 x s8 exactly.
EXACT_X86_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


def local_arithmetic(cpu=None) -> str:
    """The arithmetic ONNX Runtime's int8 kernels use on this CPU (or `cpu`, a
    `precision.CpuInfo`)."""
    from albert_tf.kernels import precision
    cpu = cpu or precision.read_cpu_info()
    if not cpu.is_x86:
        return EXACT
    return EXACT if any(flag in cpu.flags for flag in EXACT_X86_FLAGS) else SATURATING


def emulate(model, arithmetic: str):
    """A copy of the ONNX `model` whose MatMulInteger nodes compute `arithmetic`'s sums
    (see the module docstring) in float64 ops; everything else is unchanged."""
    import onnx
    from onnx import numpy_helper
    if arithmetic not in ARITHMETICS:
        raise ValueError(f"unknown int8 arithmetic {arithmetic!r}; choose one of "
                         f"{', '.join(ARITHMETICS)}")
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    constants = {t.name: t for t in graph.initializer}
    nodes = []
    for index, node in enumerate(graph.node):
        if node.op_type != "MatMulInteger":
            nodes.append(node)
            continue
        weights = constants.get(node.input[1])
        if weights is None:
            raise ValueError(f"MatMulInteger {node.name or index}: its weights "
                             f"{node.input[1]!r} are not a constant of the file")
        new_nodes, new_constants = _emulated_matmul(
            node, numpy_helper.to_array(weights), _zero_point(constants, node, 3),
            arithmetic, prefix=f"int8_emulation_{index}")
        nodes.extend(new_nodes)
        graph.initializer.extend(new_constants)
    del graph.node[:]
    graph.node.extend(nodes)
    # The int8 weights the emulation replaced (it keeps them as float64 halves).
    used = {name for n in graph.node for name in n.input} | {o.name for o in graph.output}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return model


def _zero_point(constants, node, position) -> Optional[np.ndarray]:
    from onnx import numpy_helper
    if len(node.input) <= position or not node.input[position]:
        return None
    return numpy_helper.to_array(constants[node.input[position]])


def _emulated_matmul(node, weights: np.ndarray, weight_zero: Optional[np.ndarray],
                     arithmetic: str, prefix: str):
    """float64 nodes computing MatMulInteger(A, B, a_zero, b_zero) as MLAS does: the sum of
    raw a x raw b (pairs clipped to int16 for u8 x s8 under SATURATING), less the
    zero points' terms, cast to int32."""
    from onnx import TensorProto, helper, numpy_helper
    k = weights.shape[0]
    if weights.ndim != 2 or k % 2:
        raise ValueError(f"MatMulInteger {node.name}: weights of shape {weights.shape} "
                         "(the emulation takes [K, N] with K even)")
    saturate = arithmetic == SATURATING and weights.dtype == np.int8
    b = weights.astype(np.float64)
    b_zero = (np.zeros(b.shape[1]) if weight_zero is None
              else np.ascontiguousarray(np.broadcast_to(weight_zero.astype(np.float64),
                                                        (b.shape[1],))))
    name = lambda part: f"{prefix}/{part}"  # noqa: E731
    doubles = {"b_even": b[0::2], "b_odd": b[1::2], "b_column_sums": b.sum(axis=0),
               "b_zero": b_zero, "k": np.array(float(k)), "low": np.array(INT16_MIN),
               "high": np.array(INT16_MAX)}
    int64s = {"start_even": [0], "start_odd": [1], "end": [k], "axis": [-1], "step": [2],
              "pair_axis": [-2]}
    constants = ([numpy_helper.from_array(value, name(key)) for key, value in doubles.items()]
                 + [numpy_helper.from_array(np.array(value, np.int64), name(key))
                    for key, value in int64s.items()])
    nodes = [helper.make_node("Cast", [node.input[0]], [name("a")], to=TensorProto.DOUBLE)]
    for half in ("even", "odd"):
        nodes.append(helper.make_node("Slice", [name("a"), name(f"start_{half}"), name("end"),
                                                name("axis"), name("step")],
                                      [name(f"a_{half}")]))
    for half in ("even", "odd"):  # [..., M, K/2, 1] x [K/2, N] -> [..., M, K/2, N]
        nodes += [helper.make_node("Unsqueeze", [name(f"a_{half}"), name("axis")],
                                   [name(f"a_{half}_column")]),
                  helper.make_node("Mul", [name(f"a_{half}_column"), name(f"b_{half}")],
                                   [name(f"products_{half}")])]
    nodes.append(helper.make_node("Add", [name("products_even"), name("products_odd")],
                                  [name("pairs")]))
    pairs = name("pairs")
    if saturate:
        nodes.append(helper.make_node("Clip", [pairs, name("low"), name("high")],
                                      [name("pairs_clipped")]))
        pairs = name("pairs_clipped")
    nodes.append(helper.make_node("ReduceSum", [pairs, name("pair_axis")], [name("raw")],
                                  keepdims=0))
    # sum (a - za)(b - zb) = sum ab - za sum_k b - zb sum_k a + K za zb
    a_zero = node.input[2] if len(node.input) > 2 and node.input[2] else None
    result = name("raw")
    if a_zero:
        nodes += [helper.make_node("Cast", [a_zero], [name("a_zero")], to=TensorProto.DOUBLE),
                  helper.make_node("Mul", [name("a_zero"), name("b_column_sums")],
                                   [name("a_zero_term")]),
                  helper.make_node("Sub", [result, name("a_zero_term")], [name("less_a")])]
        result = name("less_a")
    if np.any(b_zero):
        nodes += [helper.make_node("ReduceSum", [name("a"), name("axis")], [name("a_sums")],
                                   keepdims=1),
                  helper.make_node("Mul", [name("a_sums"), name("b_zero")],
                                   [name("b_zero_term")]),
                  helper.make_node("Sub", [result, name("b_zero_term")], [name("less_b")])]
        result = name("less_b")
        if a_zero:
            nodes += [helper.make_node("Mul", [name("a_zero"), name("b_zero")],
                                       [name("zeros")]),
                      helper.make_node("Mul", [name("zeros"), name("k")], [name("k_zeros")]),
                      helper.make_node("Add", [result, name("k_zeros")], [name("with_k")])]
            result = name("with_k")
    nodes.append(helper.make_node("Cast", [result], [node.output[0]], to=TensorProto.INT32))
    used = {name for n in nodes for name in n.input}
    return nodes, [c for c in constants if c.name in used]
