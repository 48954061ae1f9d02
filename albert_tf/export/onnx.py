"""ONNX export of albert-tf models (token ids in), optionally quantized to int8.

    write_onnx(fn, input_signature, path, metadata)   any token function
    share_weights(graph)                               each weight stored once
    quantize_int8(path, int8_path)                     dynamic int8 weights
    export_model_dir(export_dir, fn, signature, ...)   model.onnx (+ int8) and the
                                                       vocabulary, as the run_*.py
                                                       scripts write

The converter is tf2onnx, on a `tf.function` of the model. Keras 3's own
`model.export(format="onnx")` calls the same converter for the TensorFlow backend, but
traces the model's `call` as it runs in process: with our fused kernels (XLA
functions, oneDNN's `_MklLayerNorm`), which ONNX has no ops for, and with one
positional input and Keras' output structure. Here the function is traced as for a
SavedModel (`fused_ops.portable_graph`: plain TensorFlow ops, LayerNorms spelled as
seven plain ops, which ONNX Runtime fuses back into its LayerNormalization kernel),
with named int32 inputs (`input_ids`, `input_mask`, `segment_ids`, ...) and named
outputs.

Tokenization stays with the caller (`albert_tf.tokenization.FullTokenizer`): the
vocabulary file is copied beside model.onnx and named in its metadata.
onnxruntime-extensions (0.15.2, checked against this project's tokenizers) does not
give the original's ids: its SentencepieceTokenizer has none of the original's
preprocessing (whitespace collapsing, NFKD accent stripping, lowercasing) and, even on
preprocessed text, keeps "▁1999," as one piece where the original splits it into
"▁1999" ","; its BertTokenizer (WordPiece) maps the full-width "ＡＢＣ" of Chinese text to
[UNK] where the original lowercases it to "ａ" "##ｂ" "##ｃ".

Each weight is stored once (`share_weights`): tf2onnx folds the transpose that the
pretrainer's masked-LM decoder applies to the tied word embeddings into a second,
transposed copy of the table (ALBERT-base: 15 MB more in a 47 MB file); the copy becomes
a Transpose node of the table, which ONNX Runtime folds in memory when it loads the file.

ONNX files are written to a temporary name and renamed into place.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import fileio
from albert_tf.export import saved_model
# check_export_formats and the format names, here before export/formats.py held them.
from albert_tf.export.formats import (  # noqa: F401
    DEFAULT_EXPORT_FORMATS, EXPORT_FORMATS, check_export_formats)
from albert_tf.export import records
from albert_tf.export.vocabulary import copy_vocabulary
from albert_tf.kernels import fused_ops

OPSET = 17  # LayerNormalization is an ONNX op from opset 17
ONNX_FILE = "model.onnx"
INT8_FILE = "model.int8.onnx"
METADATA_PREFIX = records.ONNX_METADATA_PREFIX

_MISSING = ("ONNX export needs tf2onnx, onnx and onnxruntime (pinned in requirements.txt): "
            "pip install tf2onnx onnx onnxruntime")


def _converter():
    try:
        import tf2onnx  # noqa: F401
        import onnx  # noqa: F401
    except ImportError as err:
        raise ImportError(f"{_MISSING} ({err})") from err
    return tf2onnx


def to_onnx_proto(fn: Callable, input_signature: Mapping[str, tf.TensorSpec],
                  metadata: Optional[Mapping[str, object]] = None):
    """The ONNX ModelProto of `fn(features) -> {name: tensor}`.

    input_signature: name -> TensorSpec of the features dict (the ONNX inputs keep
    these names, and the outputs keep the dict's keys). metadata: stored as the model's
    `metadata_props`, keys prefixed "albert_tf.", values as JSON.
    """
    tf2onnx = _converter()
    signature = {name: tf.TensorSpec(spec.shape, spec.dtype, name=name)
                 for name, spec in input_signature.items()}
    function = tf.function(lambda features: fn(features), input_signature=[signature],
                           autograph=False)
    with fused_ops.portable_graph(), _quiet_converters():
        proto, _ = tf2onnx.convert.from_function(function, input_signature=[signature],
                                                 opset=OPSET)
    unsupported = sorted({node.op_type for node in proto.graph.node
                          if node.domain == "" and not _is_onnx_op(node.op_type)})
    if unsupported:  # tf2onnx keeps an op it cannot convert, and the model will not load
        raise ValueError(f"the model holds TensorFlow ops ONNX has no conversion for: "
                         f"{', '.join(unsupported)}")
    for key, value in (metadata or {}).items():
        entry = proto.metadata_props.add()
        entry.key = METADATA_PREFIX + key
        entry.value = json.dumps(value)
    proto.producer_name = "albert-tf (tf2onnx)"
    share_weights(proto.graph)
    hoist_loop_constants(proto.graph)
    return proto


def _rename_inputs(graph, old: str, new: str) -> None:
    """Every use of `old` in `graph`'s nodes (and their subgraphs) reads `new` instead."""
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name == old:
                node.input[index] = new
        for attribute in node.attribute:
            if attribute.g is not None and attribute.HasField("g"):
                _rename_inputs(attribute.g, old, new)
    for output in graph.output:
        if output.name == old:
            output.name = new


def hoist_loop_constants(graph) -> int:
    """Loop-carried values that a Loop's body passes through unchanged (tf2onnx carries
    every weight a TensorFlow while loop reads that way: the early-exit loop's layer) read
    from the enclosing scope instead, as ONNX allows. ONNX Runtime then sees them as the
    initializers they are: with them carried, it pre-packs no weight for the body's
    matrix products and ALBERT-base's loop ran 1.72x slower at batch 1 (1.09x in
    TensorFlow). Returns how many values were hoisted."""
    hoisted = 0
    outer_uses = {}
    for node in graph.node:
        if node.op_type != "Loop":
            continue
        body = next(a.g for a in node.attribute if a.name == "body")
        producers = {output: n for n in body.node for output in n.output}
        keep = []
        for j, (carried_in, carried_out) in enumerate(zip(body.input[2:], body.output[1:])):
            producer = producers.get(carried_out.name)
            passes = carried_out.name == carried_in.name or (
                producer is not None and producer.op_type == "Identity"
                and producer.input[0] == carried_in.name)
            keep.append(not passes)
        if all(keep):
            continue
        carried = len(keep)
        outer_names = list(node.input[2:2 + carried])
        finals = list(node.output[:carried])
        scans = list(node.output[carried:])
        body_inputs = list(body.input[2:2 + carried])
        body_outputs = list(body.output[1:1 + carried])
        for j, kept in enumerate(keep):
            if not kept:
                _rename_inputs(body, body_inputs[j].name, outer_names[j])
                outer_uses[finals[j]] = outer_names[j]
                hoisted += 1
        # The body's pass-through Identity nodes then read the outer value; harmless.
        del body.input[2:]
        body.input.extend([value for value, kept in zip(body_inputs, keep) if kept])
        extra_outputs = list(body.output[1 + carried:])
        del body.output[1:]
        body.output.extend([value for value, kept in zip(body_outputs, keep) if kept]
                           + extra_outputs)
        del node.input[2:]
        node.input.extend([name for name, kept in zip(outer_names, keep) if kept])
        del node.output[:]
        node.output.extend([name for name, kept in zip(finals, keep) if kept] + scans)
    for old, new in outer_uses.items():  # a hoisted value's final value is its initial one
        _rename_inputs(graph, old, new)
    return hoisted


def model_function(model, names: Sequence[str], argmax_of: Optional[str] = None,
                   choice_mask: bool = False) -> Callable[[Mapping], Dict[str, tf.Tensor]]:
    """features -> {name: output} of a Keras task model in inference mode, for
    `to_onnx_proto`: floating outputs as float32, LayerNorms spelled plain.

    argmax_of: also output `predictions`, int32 [B], the argmax of that output's last
    axis (TensorFlow's argmax: Keras' own adds Bitcast ops, which ONNX lacks).
    choice_mask: multiple choice (C3): an int32 `choice_mask` [B, C] feature masks
    absent choices out of `logits`, `probabilities` and `predictions`, as the SavedModel.
    """
    # A multiple-choice model masks absent choices itself, from its `choice_mask` input.
    call = saved_model.model_outputs(model, [n for n in names if n != "predictions"] +
                                     ([argmax_of] if argmax_of else []), layer_norm="plain")

    def fn(features):
        features = dict(features)
        if not choice_mask:
            features.pop("choice_mask", None)
        outputs = call(features)
        result = {name: outputs[name] for name in names if name != "predictions"}
        if argmax_of:
            result["predictions"] = tf.argmax(outputs[argmax_of], axis=-1,
                                              output_type=tf.int32)
        return result
    return fn


def _is_onnx_op(op_type: str) -> bool:
    import onnx
    try:
        onnx.defs.get_schema(op_type, OPSET)
        return True
    except onnx.defs.SchemaError:
        return False


@contextlib.contextmanager
def _quiet_converters():
    """tf2onnx logs its progress and ONNX Runtime's quantizer a line per tensor (to the
    root logger, which absl shows at INFO): kept to warnings while they run."""
    import logging as std_logging
    converter = std_logging.getLogger("tf2onnx")
    level, disabled = converter.level, std_logging.root.manager.disable
    converter.setLevel(std_logging.WARNING)
    std_logging.disable(std_logging.INFO)
    try:
        yield
    finally:
        converter.setLevel(level)
        std_logging.disable(disabled)


# Weights smaller than this are left as they are: the node that would share one takes
# about as many bytes of the file as it saves.
_MIN_SHARED_BYTES = 1024
_LAST_AXIS = "quantize_lookups/last_axis"  # int64 [1] = [-1]: Unsqueeze's axes


def share_weights(graph) -> int:
    """Stores each weight of `graph` (an ONNX GraphProto, changed in place) once; returns
    the bytes saved.

    An initializer equal to another becomes an Identity node of it; a 2-D initializer
    equal to another's transpose becomes a Transpose node of it (the tied word
    embeddings: tf2onnx folds the MLM decoder's transpose of the [V, E] table into an
    [E, V] copy). The node's output keeps the removed initializer's name, so its readers
    are unchanged, and ONNX Runtime folds the node back into a constant in memory when it
    loads the file. Of a transposed pair, a table that a Gather reads is the one kept (a
    lookup reads rows of the table as stored). Values are compared bit for bit: the
    outputs cannot change.
    """
    from onnx import helper, numpy_helper

    graph_inputs = {value.name for value in graph.input}  # overridable: not constants
    gathered = {node.input[0] for node in graph.node if node.op_type == "Gather"}
    arrays = {init.name: numpy_helper.to_array(init) for init in graph.initializer
              if init.name not in graph_inputs and init.ByteSize() >= _MIN_SHARED_BYTES}
    candidates = list(arrays)  # in the graph's order
    kept: Dict[tuple, str] = {}  # (dtype, shape, bytes) -> the initializer holding them
    shared: Dict[str, Tuple[str, str]] = {}  # removed name -> (op, kept name)
    for name in sorted(candidates, key=lambda n: n not in gathered):  # stable: tables first
        value = arrays[name]
        key = (value.dtype.str, value.shape, value.tobytes())
        if key in kept:
            shared[name] = ("Identity", kept[key])
            continue
        if value.ndim == 2:
            transposed = np.ascontiguousarray(value.T)
            source = kept.get((value.dtype.str, transposed.shape, transposed.tobytes()))
            if source is not None:  # value.T == kept value, so value = kept value.T
                shared[name] = ("Transpose", source)
                continue
        kept[key] = name
    if not shared:
        return 0
    saved = sum(arrays[name].nbytes for name in shared)
    nodes = [helper.make_node(op, [source], [name], name=f"{name}/shared",
                              **({"perm": [1, 0]} if op == "Transpose" else {}))
             for name, (op, source) in shared.items()]
    _remove_initializers(graph, set(shared))
    _prepend_nodes(graph, nodes)
    logging.info("stored %d repeated weights once (%.1f MB less)", len(shared), saved / 1e6)
    return saved


def _remove_initializers(graph, names: Set[str]) -> None:
    for index in reversed(range(len(graph.initializer))):
        if graph.initializer[index].name in names:
            del graph.initializer[index]


def _prepend_nodes(graph, nodes: Sequence) -> None:
    """Puts `nodes` (which read only initializers) first, keeping the graph's nodes in
    topological order, as ONNX requires."""
    existing = list(graph.node)
    del graph.node[:]
    graph.node.extend(list(nodes) + existing)


def _referenced_names(graph) -> Set[str]:
    """Every tensor name a node of `graph` or of its subgraphs (Loop, Scan, If bodies,
    which may read the outer graph's initializers) reads, and the graph's outputs."""
    names = {value.name for value in graph.output}
    for node in graph.node:
        names.update(node.input)
        for attribute in node.attribute:
            for subgraph in list(attribute.graphs) + ([attribute.g] if attribute.HasField("g")
                                                      else []):
                names |= _referenced_names(subgraph)
    return names


def _row_quantized(table):
    """int8 [V, E] and float32 scales [V] of a float32 table [V, E]: symmetric, one scale
    per row (max |row| / 127), so row v is q[v] * scale[v] within scale[v] / 2."""
    absmax = np.abs(table).max(axis=1)
    scale = np.where(absmax > 0, absmax / 127.0, 1.0).astype(np.float32)
    quantized = np.clip(np.rint(table / scale[:, None]), -127, 127).astype(np.int8)
    return quantized, scale


def quantize_lookups(graph) -> List[str]:
    """Rewrites `graph` (in place) so that each float32 [V, E] table a Gather looks rows up
    in (the word embeddings) is stored as int8 with one scale per row (`_row_quantized`),
    and each MatMul by that table's transpose (the tied MLM decoder: [N, E] x [E, V])
    multiplies by the same int8 table; returns the tables' names.

    ONNX Runtime's quantize_dynamic would store a tied table twice: its Gather and its
    MatMul quantizations are separate copies (the MatMul's weight is the [E, V] copy its
    pre-processing folds), and where one initializer feeds both a Gather and a MatMul it
    reuses whichever quantization came first (the Gather's, per tensor, costing the
    decoder its per-channel scales; the other order fails inside the quantizer). One scale
    per row of the table is one scale per output column of the decoder, so a single int8
    table serves both. Lookup: Gather the int8 rows and their scales, Cast, Mul. Decoder:
    DynamicQuantizeLinear, MatMulInteger by the int8 table's Transpose (which ONNX Runtime
    folds into a constant when it loads the file), Cast, Mul by both scales: the ops ONNX
    Runtime builds for its own dynamic MatMuls.
    """
    from onnx import helper, numpy_helper

    tables = _lookup_tables(graph)
    if not tables:
        return []
    transposes = _transposes_of(graph, tables)
    names = {}  # float table -> (int8 table, row scales, int8 table transposed)
    for name, table in tables.items():
        quantized, scale = _row_quantized(table)
        names[name] = (f"{name}/int8", f"{name}/row_scale", f"{name}/int8_transposed")
        graph.initializer.extend([numpy_helper.from_array(quantized, names[name][0]),
                                  numpy_helper.from_array(scale, names[name][1])])
    graph.initializer.append(numpy_helper.from_array(np.array([-1], np.int64), _LAST_AXIS))

    rewritten, decoded = [], set()
    for node in graph.node:
        if node.op_type == "Gather" and node.input[0] in tables:
            int8, scale, _ = names[node.input[0]]
            rewritten += _int8_lookup_nodes(node, int8, scale)
        elif node.op_type == "MatMul" and node.input[1] in transposes:
            table = transposes[node.input[1]]
            decoded.add(table)
            rewritten += _int8_decoder_nodes(node, names[table][2], names[table][1])
        else:
            rewritten.append(node)
    head = [helper.make_node("Transpose", [names[table][0]], [names[table][2]],
                             name=names[table][2], perm=[1, 0]) for table in sorted(decoded)]
    del graph.node[:]
    graph.node.extend(head + rewritten)
    _remove_unused(graph)  # the float tables and their transposed copies
    return sorted(tables)


def _lookup_tables(graph) -> Dict[str, np.ndarray]:
    """name -> value of each float32 2-D initializer that a Gather looks computed ids up
    in along its first axis."""
    from onnx import TensorProto, numpy_helper
    initializers = {init.name: init for init in graph.initializer}
    tables = {}
    for node in graph.node:
        if node.op_type != "Gather" or _attribute(node, "axis", 0) != 0:
            continue
        table = initializers.get(node.input[0])
        if table is not None and node.input[1] not in initializers \
                and table.data_type == TensorProto.FLOAT and len(table.dims) == 2:
            tables[table.name] = numpy_helper.to_array(table)
    return tables


def _transposes_of(graph, tables: Mapping[str, np.ndarray]) -> Dict[str, str]:
    """name -> table, for each tensor of `graph` that is the transpose of one of `tables`:
    an initializer holding exactly its values transposed, or a Transpose node's output."""
    from onnx import numpy_helper
    found = {}
    for init in graph.initializer:
        for name, table in tables.items():
            if tuple(init.dims) == table.shape[::-1] and init.name not in tables:
                value = numpy_helper.to_array(init)
                if value.dtype == table.dtype and np.array_equal(value, table.T):
                    found[init.name] = name
    for node in graph.node:
        if node.op_type == "Transpose" and node.input[0] in tables \
                and list(_attribute(node, "perm", [1, 0])) == [1, 0]:
            found[node.output[0]] = node.input[0]
    return found


def _attribute(node, name: str, default):
    from onnx import helper
    for attribute in node.attribute:
        if attribute.name == name:
            return helper.get_attribute_value(attribute)
    return default


def _int8_lookup_nodes(node, q: str, scale: str) -> list:
    """Gather(table, ids) -> y as Gather(q, ids) * Gather(scale, ids)[..., None]."""
    from onnx import TensorProto, helper
    ids, y = node.input[1], node.output[0]
    return [helper.make_node("Gather", [q, ids], [f"{y}/int8"], name=f"{y}/int8"),
            helper.make_node("Cast", [f"{y}/int8"], [f"{y}/int8_float"], name=f"{y}/cast",
                             to=TensorProto.FLOAT),
            helper.make_node("Gather", [scale, ids], [f"{y}/row_scale"], name=f"{y}/row_scale"),
            helper.make_node("Unsqueeze", [f"{y}/row_scale", _LAST_AXIS],
                             [f"{y}/row_scale_1"], name=f"{y}/row_scale_1"),
            helper.make_node("Mul", [f"{y}/int8_float", f"{y}/row_scale_1"], [y], name=y)]


def _int8_decoder_nodes(node, q_transposed: str, scale: str) -> list:
    """MatMul(a, table^T) -> y as (quantized a) x (int8 table^T), scaled per column by
    a's scale times the table's row scales."""
    from onnx import TensorProto, helper
    a, y = node.input[0], node.output[0]
    return [helper.make_node("DynamicQuantizeLinear", [a],
                             [f"{y}/a_uint8", f"{y}/a_scale", f"{y}/a_zero_point"],
                             name=f"{y}/quantize_a"),
            helper.make_node("MatMulInteger", [f"{y}/a_uint8", q_transposed, f"{y}/a_zero_point"],
                             [f"{y}/int32"], name=f"{y}/int8"),
            helper.make_node("Cast", [f"{y}/int32"], [f"{y}/int32_float"], name=f"{y}/cast",
                             to=TensorProto.FLOAT),
            helper.make_node("Mul", [f"{y}/a_scale", scale], [f"{y}/scale"], name=f"{y}/scale"),
            helper.make_node("Mul", [f"{y}/int32_float", f"{y}/scale"], [y], name=y)]


def _remove_unused(graph) -> None:
    """Drops the nodes and initializers nothing reads any more (repeatedly: a node's
    removal can leave its inputs unread)."""
    while True:
        used = _referenced_names(graph)
        dead = [index for index, node in enumerate(graph.node)
                if not any(out in used for out in node.output)]
        for index in reversed(dead):
            del graph.node[index]
        if not dead:
            break
    _remove_initializers(graph, {init.name for init in graph.initializer} - used)


def write_onnx(fn: Callable, input_signature: Mapping[str, tf.TensorSpec], path: str,
               metadata: Optional[Mapping[str, object]] = None) -> str:
    """Converts `fn` (see `to_onnx_proto`) and writes it to `path` atomically."""
    proto = to_onnx_proto(fn, input_signature, metadata)
    data = proto.SerializeToString()

    with fileio.atomic_open(path, "wb") as handle:
        handle.write(data)
    logging.info("exported ONNX model (%d nodes, opset %d, %.1f MB) to %s",
                 len(proto.graph.node), OPSET, len(data) / 1e6, path)
    return path


@dataclasses.dataclass(frozen=True)
class Int8Settings:
    """ONNX Runtime's dynamic quantization settings for MatMul weights: `weight_type`
    "int8" (u8 x s8 products: VNNI's kernels) or "uint8" (u8 x u8), one scale per output
    column (`per_channel`) or per tensor, and `reduce_range` (7-bit weights).

    The defaults are the file `quantize_int8` writes. `reduce_range` because x86 CPUs
    without VNNI add u8 x s8 products in pairs saturated to int16 (`int8_arithmetic`):
    with 7-bit weights no pair can reach the limit (255 x 64 x 2 = 32640), so the file
    computes the same on every CPU. Measured (docs/quantization.md): with 8-bit weights
    SQuAD start/end agreement with float32 fell from 98.7% to 95.5% where pairs saturate;
    with 7-bit weights 99.3% on both kinds of CPU, at the same speed (ALBERT-base,
    Zen 4); u8 x u8 ("uint8") never saturates either but runs 2x slower on VNNI CPUs."""

    weight_type: str = "int8"
    per_channel: bool = True
    reduce_range: bool = True

    def label(self) -> str:
        return (f"{'s8' if self.weight_type == 'int8' else 'u8'} weights, "
                f"{'per channel' if self.per_channel else 'per tensor'}"
                f"{', reduce_range' if self.reduce_range else ''}")


def quantize_int8(path: str, int8_path: str, settings: Int8Settings = Int8Settings()) -> str:
    """Writes an int8 copy of the float32 ONNX model at `path` to `int8_path`, atomically.

    ONNX Runtime's dynamic quantization: MatMul weights stored as int8 with one scale per
    output column (per channel: on a fine-tuned SST-2 classifier it kept 99.6% of the
    float32 predictions where one scale per tensor kept 98.9%, at the same speed), in 7
    bits by default (`Int8Settings`: the same results on CPUs with and without VNNI),
    activations quantized per call from their observed range, so no calibration data is
    needed. The model is first pre-processed (shape inference and
    constant folding), as ONNX Runtime recommends, so that weights that reach a MatMul
    through a transpose are constants it can quantize.

    The word embeddings, which ONNX Runtime leaves float32 (a third of ALBERT-base's
    weights), are stored as int8 with one scale per row, once even where the MLM decoder
    reads them too (`quantize_lookups`): ALBERT-base's file is 0.27x the float32 weights
    instead of 0.51x. On the demo's pretrained model the int8 file predicts the float32
    file's top masked word at 98.2% of held-out positions (98.3% with float32 embeddings).
    """
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.quantization.shape_inference import quant_pre_process
    except ImportError as err:
        raise ImportError(f"{_MISSING} ({err})") from err
    with tempfile.TemporaryDirectory() as scratch, _quiet_converters():
        prepared = os.path.join(scratch, "prepared.onnx")
        quant_pre_process(path, prepared, skip_symbolic_shape=True)
        model = onnx.load(prepared)
        quantize_lookups(model.graph)
        onnx.save(model, prepared)

        quantized = os.path.join(scratch, "quantized.onnx")
        weight_type = {"int8": QuantType.QInt8, "uint8": QuantType.QUInt8}[settings.weight_type]
        quantize_dynamic(prepared, quantized, weight_type=weight_type,
                         op_types_to_quantize=["MatMul"], per_channel=settings.per_channel,
                         reduce_range=settings.reduce_range)
        model = onnx.load(quantized)
    # The shapes the quantizer's shape inference recorded for intermediate tensors: ONNX
    # Runtime infers them again when it loads the file.
    del model.graph.value_info[:]
    data = model.SerializeToString()
    with fileio.atomic_open(int8_path, "wb") as handle:
        handle.write(data)
    logging.info("exported int8 ONNX model (%.1f MB) to %s", len(data) / 1e6, int8_path)
    return int8_path


def export_model_dir(export_dir: str, fn: Callable,
                     input_signature: Mapping[str, tf.TensorSpec],
                     metadata: Mapping[str, object], int8: bool = False,
                     spm_model_file: Optional[str] = None,
                     vocab_file: Optional[str] = None) -> Dict[str, str]:
    """Writes `export_dir`/model.onnx (and model.int8.onnx with `int8`), plus a copy of
    the vocabulary: `spm_model_file` (SentencePiece; wins when both are given) or
    `vocab_file` (WordPiece), as the SavedModel exports take them. The metadata records
    its base name ("vocabulary_file") and which `FullTokenizer` argument it is
    ("tokenizer": "sentencepiece" or "wordpiece"). Returns {"onnx": path[, "onnx_int8":
    path]}. Beside a SavedModel in the same directory, TensorFlow ignores these files."""
    metadata = dict(metadata)
    metadata.update(copy_vocabulary(export_dir, spm_model_file, vocab_file))
    written = {"onnx": write_onnx(fn, input_signature, os.path.join(export_dir, ONNX_FILE),
                                  metadata)}
    int8_path = os.path.join(export_dir, INT8_FILE)
    if int8:
        written["onnx_int8"] = quantize_int8(written["onnx"], int8_path)
    elif os.path.exists(int8_path):  # an earlier export's: it would not match model.onnx
        os.remove(int8_path)
        logging.info("removed %s of an earlier export", int8_path)
    return written


def read_metadata(path: str) -> Dict[str, object]:
    """The albert_tf metadata of an exported ONNX file (JSON values decoded)."""
    return records.read_onnx_metadata(path)
