"""Stores a tied [V, E] table once in an int8 (dynamic-range) LiteRT model.

    share_tied_tables(model_bytes, schema)   the flatbuffer's bytes, the table stored once

Why: the pretrainer's masked-LM decoder is tied to the word embeddings, and LiteRT's int8
converter quantizes the one float [V, E] table twice, each copy as its op wants it:
  - per tensor (one scale) for the embedding lookup: GATHER(int8 [V, E], ids) -> int8
    rows, then DEQUANTIZE -> float32 rows;
  - per row (V scales, quantized_dimension 0) for the decoder: FULLY_CONNECTED(float32
    [N, E], int8 [V, E]) -> float32 [N, V].
For ALBERT-base (V=30000, E=128) the second copy is 3.84 MB of a 16.4 MB file.

The pass keeps the per-row table (the more precise copy: each row has its own scale) and
makes the lookup read it:
  - it checks that both tables round the same float table: for every element,
    |q_f * s_f[row] - q_g * s_g| <= (s_f[row] + s_g) / 2 (both are within half a step
    of the float value), so a table that merely has the same shape is left alone;
  - a DEQUANTIZE op (per-row int8 [V, E] -> float32 [V, E] D) is added first in the
    subgraph; its input is constant, so the interpreter dequantizes it once (on the
    first call) and keeps D (V * E * 4 bytes of memory, not of file);
  - the GATHER reads D and outputs float32 rows; the DEQUANTIZE ops that read its int8
    output are removed, their readers (and subgraph or signature outputs) rewired to it;
  - the per-tensor table's buffer is emptied, so it is not stored.
The lookup's rows are then the per-row int8 values times their row's scale (closer to
the float rows than before). A model without such a pair (a fine-tuned task model has
no decoder) is returned unchanged, the same bytes.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

# DEQUANTIZE of an int8 tensor with a scale per channel is the op's version 5 (LiteRT's
# op_version.cc); a model's own DEQUANTIZE code may be older (version 2: per tensor).
_PER_CHANNEL_DEQUANTIZE_VERSION = 5


def _builtin(model, op) -> int:
    code = model.operatorCodes[op.opcodeIndex]
    return max(code.builtinCode, code.deprecatedBuiltinCode)


def _constant_data(model, tensor) -> Optional[np.ndarray]:
    data = model.buffers[tensor.buffer].data
    return None if data is None or len(data) == 0 else np.asarray(data, np.uint8)


def _int8_table(schema, model, tensor) -> Optional[np.ndarray]:
    """tensor's values as an int8 [V, E] array, for a constant 2-D int8 tensor."""
    if (tensor.type != schema.TensorType.INT8 or tensor.shape is None
            or len(tensor.shape) != 2):
        return None
    data = _constant_data(model, tensor)
    if data is None or data.size != int(np.prod(tensor.shape)):
        return None
    return data.view(np.int8).reshape([int(d) for d in tensor.shape])


def _scales(tensor):
    """(scale, zero point) float64 arrays of a tensor's quantization, or None."""
    q = tensor.quantization
    if q is None or q.scale is None or len(q.scale) == 0:
        return None
    scale = np.asarray(q.scale, np.float64)
    zero = (np.zeros_like(scale) if q.zeroPoint is None or len(q.zeroPoint) == 0
            else np.asarray(q.zeroPoint, np.float64))
    return scale, zero, int(q.quantizedDimension)


def _same_float_table(per_row, row_q, per_tensor, tensor_q) -> bool:
    """Whether the per-row and the per-tensor int8 tables round one float table."""
    s_f, z_f, _ = row_q
    s_g, z_g, _ = tensor_q
    rows = (per_row.astype(np.float64) - z_f[:, None]) * s_f[:, None]
    lookup = (per_tensor.astype(np.float64) - z_g[0]) * s_g[0]
    bound = (s_f[:, None] + s_g[0]) / 2
    return bool(np.all(np.abs(rows - lookup) <= bound * (1 + 1e-5) + 1e-12))


def _find_per_row_twin(schema, model, subgraph, gather_table: np.ndarray, gather_q):
    """The index of a FULLY_CONNECTED weight tensor of `subgraph` that stores the same
    table as the GATHER's per-tensor one with a scale per row, or None."""
    for op in subgraph.operators:
        if (_builtin(model, op) != schema.BuiltinOperator.FULLY_CONNECTED
                or op.inputs is None or len(op.inputs) < 2 or op.inputs[1] < 0):
            continue
        index = int(op.inputs[1])
        tensor = subgraph.tensors[index]
        table = _int8_table(schema, model, tensor)
        row_q = _scales(tensor)
        if (table is None or row_q is None or table.shape != gather_table.shape
                or row_q[2] != 0 or len(row_q[0]) != table.shape[0]
                or len(row_q[1]) not in (1, table.shape[0])):
            continue
        if len(row_q[1]) == 1:
            row_q = (row_q[0], np.full_like(row_q[0], row_q[1][0]), 0)
        if _same_float_table(table, row_q, gather_table, gather_q):
            return index
    return None


def _dequantize_code(schema, model) -> int:
    """The index of a DEQUANTIZE operator code that takes per-channel int8 (added when
    the model has none)."""
    code_of = schema.BuiltinOperator.DEQUANTIZE
    for i, code in enumerate(model.operatorCodes):
        if (max(code.builtinCode, code.deprecatedBuiltinCode) == code_of
                and code.version >= _PER_CHANNEL_DEQUANTIZE_VERSION):
            return i
    code = schema.OperatorCodeT()
    code.builtinCode = code_of
    code.deprecatedBuiltinCode = min(code_of, 127)
    code.version = _PER_CHANNEL_DEQUANTIZE_VERSION
    model.operatorCodes.append(code)
    return len(model.operatorCodes) - 1


def _readers(subgraph, tensor: int) -> List[int]:
    return [i for i, op in enumerate(subgraph.operators)
            if op.inputs is not None and tensor in [int(t) for t in op.inputs]]


def _buffer_users(model, buffer: int) -> int:
    return sum(1 for sg in model.subgraphs for t in sg.tensors if t.buffer == buffer)


def _share_in_subgraph(schema, model, subgraph_index: int) -> bool:
    subgraph = model.subgraphs[subgraph_index]
    outputs = [int(t) for t in (subgraph.outputs if subgraph.outputs is not None else [])]
    dequantized: Dict[int, int] = {}  # per-row table tensor -> its float32 tensor D
    emptied: List[int] = []  # per-tensor table tensors the lookups no longer read
    removed = set()  # ids of DEQUANTIZE ops to drop
    new_ops = []
    changed = False
    for op in list(subgraph.operators):
        if (_builtin(model, op) != schema.BuiltinOperator.GATHER or op.inputs is None
                or len(op.inputs) < 2 or op.outputs is None or len(op.outputs) != 1):
            continue
        table_index, out_index = int(op.inputs[0]), int(op.outputs[0])
        table_tensor = subgraph.tensors[table_index]
        table = _int8_table(schema, model, table_tensor)
        tensor_q = _scales(table_tensor)
        if table is None or tensor_q is None or len(tensor_q[0]) != 1:
            continue
        # every reader of the int8 rows must be a DEQUANTIZE (whose output it becomes)
        readers = _readers(subgraph, out_index)
        if (out_index in outputs or not readers or any(
                _builtin(model, subgraph.operators[i]) != schema.BuiltinOperator.DEQUANTIZE
                for i in readers)):
            continue
        twin = _find_per_row_twin(schema, model, subgraph, table, tensor_q)
        if twin is None:
            continue
        if twin not in dequantized:
            d = schema.TensorT()
            d.shape = np.asarray(table.shape, np.int32)
            d.type = schema.TensorType.FLOAT32
            d.name = (subgraph.tensors[twin].name or b"table") + b"/dequantized"
            buffer = schema.BufferT()
            model.buffers.append(buffer)
            d.buffer = len(model.buffers) - 1
            subgraph.tensors.append(d)
            dequantized[twin] = len(subgraph.tensors) - 1
            dq = schema.OperatorT()
            dq.opcodeIndex = _dequantize_code(schema, model)
            dq.inputs = np.asarray([twin], np.int32)
            dq.outputs = np.asarray([dequantized[twin]], np.int32)
            dq.builtinOptionsType = schema.BuiltinOptions.DequantizeOptions
            dq.builtinOptions = schema.DequantizeOptionsT()
            new_ops.append(dq)
        op.inputs = np.asarray([dequantized[twin]] + [int(t) for t in op.inputs[1:]],
                               np.int32)
        rows = subgraph.tensors[out_index]
        rows.type = schema.TensorType.FLOAT32
        rows.quantization = None
        for i in readers:
            reader = subgraph.operators[i]
            removed.add(id(reader))
            _rewire(model, subgraph_index, int(reader.outputs[0]), out_index)
        emptied.append(table_index)
        changed = True
    if not changed:
        return False
    subgraph.operators = new_ops + [op for op in subgraph.operators
                                    if id(op) not in removed]
    for table_index in emptied:
        buffer = subgraph.tensors[table_index].buffer
        if (not _readers(subgraph, table_index) and _buffer_users(model, buffer) == 1
                and table_index not in outputs):
            model.buffers[buffer].data = None
    return True


def _rewire(model, subgraph_index: int, old: int, new: int) -> None:
    """Readers, subgraph outputs and signature outputs of tensor `old` read `new`."""
    subgraph = model.subgraphs[subgraph_index]
    for op in subgraph.operators:
        if op.inputs is not None:
            op.inputs = np.asarray([new if int(t) == old else int(t) for t in op.inputs],
                                   np.int32)
    if subgraph.outputs is not None:
        subgraph.outputs = np.asarray([new if int(t) == old else int(t)
                                       for t in subgraph.outputs], np.int32)
    for signature in model.signatureDefs or []:
        if signature.subgraphIndex == subgraph_index:
            for output in signature.outputs or []:
                if output.tensorIndex == old:
                    output.tensorIndex = new


def share_tied_tables(model_bytes: bytes, schema) -> bytes:
    """`model_bytes` (an int8 LiteRT flatbuffer) with each per-tensor int8 lookup table
    that a FULLY_CONNECTED also stores per row read from that per-row copy (see the
    module's docstring); the same bytes when there is none. schema: the flatbuffer
    classes' module (`litert._schema()`)."""
    import flatbuffers

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAs(model_bytes, 0))
    changed = [_share_in_subgraph(schema, model, i)
               for i in range(len(model.subgraphs or []))]
    if not any(changed):
        return model_bytes
    builder = flatbuffers.Builder(len(model_bytes) + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())
