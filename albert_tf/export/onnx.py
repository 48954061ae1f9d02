"""ONNX export of albert-tf models (token ids in), optionally quantized to int8.

    write_onnx(fn, input_signature, path, metadata)   any token function
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

ONNX files are written to a temporary name and renamed into place.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Callable, Dict, Mapping, Optional, Sequence

import tensorflow as tf
from absl import logging

from albert_tf import fileio
from albert_tf.export import saved_model
# check_export_formats and the format names, here before export/formats.py held them.
from albert_tf.export.formats import (  # noqa: F401
    DEFAULT_EXPORT_FORMATS, EXPORT_FORMATS, check_export_formats)
from albert_tf.export.vocabulary import copy_vocabulary
from albert_tf.kernels import fused_ops

OPSET = 17  # LayerNormalization is an ONNX op from opset 17
ONNX_FILE = "model.onnx"
INT8_FILE = "model.int8.onnx"
METADATA_PREFIX = "albert_tf."

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
    return proto


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


def quantize_int8(path: str, int8_path: str) -> str:
    """Writes an int8 copy of the float32 ONNX model at `path` to `int8_path`, atomically.

    ONNX Runtime's dynamic quantization: MatMul weights stored as int8 with one scale per
    output column (per channel: on a fine-tuned SST-2 classifier it kept 99.6% of the
    float32 predictions where one scale per tensor kept 98.9%, at the same speed),
    activations quantized per call from their observed range, so no calibration data is
    needed. The model is first pre-processed (shape inference and
    constant folding), as ONNX Runtime recommends, so that weights that reach a MatMul
    through a transpose are constants it can quantize.
    """
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.quantization.shape_inference import quant_pre_process
    except ImportError as err:
        raise ImportError(f"{_MISSING} ({err})") from err
    with tempfile.TemporaryDirectory() as scratch, _quiet_converters():
        prepared = os.path.join(scratch, "prepared.onnx")
        quant_pre_process(path, prepared, skip_symbolic_shape=True)

        with fileio.atomic_path(int8_path) as tmp:
            quantize_dynamic(prepared, tmp, weight_type=QuantType.QInt8,
                             op_types_to_quantize=["MatMul"], per_channel=True)
    logging.info("exported int8 ONNX model (%.1f MB) to %s",
                 os.path.getsize(int8_path) / 1e6, int8_path)
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
    import onnx
    model = onnx.load(path, load_external_data=False)
    return {entry.key[len(METADATA_PREFIX):]: json.loads(entry.value)
            for entry in model.metadata_props if entry.key.startswith(METADATA_PREFIX)}
