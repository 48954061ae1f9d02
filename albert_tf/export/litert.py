"""LiteRT (TensorFlow Lite) export of albert-tf models (token ids in): float32, float16
and int8 files, with metadata.

    to_tflite(fn, input_signature, metadata, quantization)   the flatbuffer's bytes
    write_tflite(fn, input_signature, path, ...)              the same, written atomically
    export_model_dir(export_dir, fn, signature, ...)          model.tflite (+ fp16, int8)
                                                              and the vocabulary

How a function becomes a file, and why each step:
  1. `fn` is traced as for ONNX (`fused_ops.portable_graph`: plain TensorFlow ops, no XLA
     functions or oneDNN-internal ops, which LiteRT has no kernels for).
  2. Its variables are frozen into constants (`tf_internals.freeze_variables`). Given
     variables, TensorFlow 2.21's converter keeps them as resource variables that nothing
     initialises: a 0.2 MB file without its weights whose outputs are NaN. Frozen, every
     weight is one constant however many layers read it, so ALBERT's shared layer is
     stored once (ALBERT-base: 46.90 MB for 46.74 MB of float32 parameters).
  3. The frozen function is saved as a SavedModel (in a temporary directory) and that is
     converted with `TFLiteConverter.from_saved_model`, which keeps the signature's input
     and output names (a frozen function converted directly loses them).
  4. The converter runs with LiteRT's builtin ops only: an op that would need the
     TensorFlow ("Flex") runtime fails the export with one line naming it, instead of
     writing a file a phone cannot run.
  5. The metadata is added to the flatbuffer as one "albert_tf" entry holding JSON
     (`litert_runtime.read_metadata`).

Quantization (`QUANTIZATIONS`): "float32"; "float16" (weights stored in float16, half the
size; XNNPACK computes in float32 on CPUs, or float16 where the hardware has it);
"int8" (dynamic-range quantization: weights int8 with a scale per output channel,
activations quantized per call from their range, so no calibration data is needed;
XNNPACK runs the matmuls in int8).
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Callable, Dict, Mapping, Optional

import tensorflow as tf
from absl import logging

from albert_tf import errors, fileio
from albert_tf.export import litert_runtime, litert_tables
from albert_tf.kernels import fused_ops, tf_internals

TFLITE_FILE = "model.tflite"
FP16_FILE = "model.fp16.tflite"
INT8_FILE = "model.int8.tflite"
QUANTIZATIONS = ("float32", "float16", "int8")
FILES = {"float32": TFLITE_FILE, "float16": FP16_FILE, "int8": INT8_FILE}
RESULT_KEYS = {"float32": "tflite", "float16": "tflite_fp16", "int8": "tflite_int8"}


class LiteRTConversionError(errors.UserValueError):
    """The converter cannot lower the model to LiteRT's builtin ops (one line; the CLIs
    print it as their error, after the SavedModel and ONNX files are written)."""


def frozen_serving_function(fn: Callable, input_signature: Mapping[str, tf.TensorSpec]):
    """A `tf.function(features) -> {name: tensor}` computing `fn` with every weight a
    constant, traced with the portable ops and the named signature."""
    signature = {name: tf.TensorSpec(spec.shape, spec.dtype, name=name)
                 for name, spec in input_signature.items()}
    traced = tf.function(lambda features: fn(features), input_signature=[signature],
                         autograph=False)
    with fused_ops.portable_graph(litert=True):
        concrete = traced.get_concrete_function()
    frozen = tf_internals.freeze_variables(concrete)
    structure = concrete.structured_outputs
    names = sorted(signature)  # the flat inputs are the dict's values in key order

    @tf.function(input_signature=[signature], autograph=False)
    def serve(features):
        return tf.nest.pack_sequence_as(structure, frozen(*[features[n] for n in names]))
    return serve


def _converter(saved_model_dir: str, quantization: str):
    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir,
                                                         signature_keys=["serving_default"])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quantization == "float16":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_types = [tf.float16]
    elif quantization == "int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    return converter


def _convert(serve, quantization: str) -> bytes:
    with tempfile.TemporaryDirectory() as scratch, _quiet_converter():
        # No custom gradients: the fused kernels' gradient functions capture tensors of
        # the un-frozen graph, and serving has no gradients.
        tf.saved_model.save(tf.Module(), scratch,
                            signatures={"serving_default": serve.get_concrete_function()},
                            options=tf.saved_model.SaveOptions(
                                experimental_custom_gradients=False))
        try:
            return _converter(scratch, quantization).convert()
        except Exception as err:  # the converter's own error is pages of MLIR
            raise LiteRTConversionError(_conversion_failure(err)) from err


def _conversion_failure(err: Exception) -> str:
    text = str(err)
    for line in text.splitlines():
        if line.strip().startswith("TF Select ops:"):
            ops = line.split(":", 1)[-1].strip()
            return (f"LiteRT has no builtin kernel for the TensorFlow ops {ops} of this "
                    f"model (--export_format=tflite); export saved_model or onnx instead")
    first = next((line.strip() for line in text.splitlines() if "error" in line.lower()),
                 text.strip().splitlines()[0] if text.strip() else type(err).__name__)
    return f"the LiteRT converter failed (--export_format=tflite): {first[:300]}"


@contextlib.contextmanager
def _quiet_converter():
    """Saving and converting log each stage through absl (and warn that the frozen
    function has no gradients, which serving never asks for): kept to errors."""
    # The absl logger's own level, restored as it was (NOTSET included: absl's
    # get_verbosity would answer the root's level, and restoring that would pin it).
    absl_logger = logging.get_absl_logger()
    level = absl_logger.level
    absl_logger.setLevel(logging.converter.absl_to_standard(logging.ERROR))
    try:
        yield
    finally:
        absl_logger.setLevel(level)


def _schema():
    """The flatbuffer classes: ai_edge_litert's when installed, else TensorFlow's."""
    try:
        from ai_edge_litert import schema_py_generated
        return schema_py_generated
    except ImportError:
        schema = tf_internals.tflite_schema()
        if schema is None:
            raise NotImplementedError("writing LiteRT metadata needs ai_edge_litert or "
                                      "TensorFlow's LiteRT schema module")
        return schema


def with_metadata(model_bytes: bytes, metadata: Mapping[str, object]) -> bytes:
    """`model_bytes` with `metadata` (JSON values) stored as the flatbuffer's
    "albert_tf" metadata entry (replacing an earlier one)."""
    import flatbuffers
    import numpy as np

    schema = _schema()
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAs(model_bytes, 0))
    buffer = schema.BufferT()
    buffer.data = np.frombuffer(json.dumps(dict(metadata)).encode("utf-8"), np.uint8)
    model.buffers.append(buffer)
    entry = schema.MetadataT()
    entry.name = litert_runtime.METADATA_NAME
    entry.buffer = len(model.buffers) - 1
    model.metadata = [m for m in (model.metadata or [])
                      if m.name not in (litert_runtime.METADATA_NAME,
                                        litert_runtime.METADATA_NAME.encode())] + [entry]
    builder = flatbuffers.Builder(len(model_bytes) + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def input_shapes(input_signature: Mapping[str, tf.TensorSpec]) -> Dict[str, list]:
    """name -> shape with -1 for a free dimension, as the metadata records them."""
    return {name: [-1 if d is None else int(d) for d in spec.shape]
            for name, spec in input_signature.items()}


def to_tflite(fn: Callable, input_signature: Mapping[str, tf.TensorSpec],
              metadata: Optional[Mapping[str, object]] = None,
              quantization: str = "float32", serve=None) -> bytes:
    """The LiteRT flatbuffer of `fn(features) -> {name: tensor}` (see the module's
    docstring). input_signature: name -> TensorSpec (the signature's inputs keep these
    names; outputs keep the dict's keys). metadata: JSON values, stored with the
    quantization and the input shapes added. `serve`: a `frozen_serving_function` of
    the same fn, to convert several quantizations from one trace."""
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization must be one of {', '.join(QUANTIZATIONS)}; "
                         f"got {quantization!r}")
    serve = serve or frozen_serving_function(fn, input_signature)
    data = _convert(serve, quantization)
    if quantization == "int8":  # the tied embeddings stored once (litert_tables)
        data = litert_tables.share_tied_tables(data, _schema())
    stored = dict(metadata or {}, quantization=quantization,
                  inputs=input_shapes(input_signature))
    return with_metadata(data, stored)


def write_tflite(fn: Callable, input_signature: Mapping[str, tf.TensorSpec], path: str,
                 metadata: Optional[Mapping[str, object]] = None,
                 quantization: str = "float32", serve=None) -> str:
    """Converts `fn` (see `to_tflite`) and writes it to `path` atomically."""
    data = to_tflite(fn, input_signature, metadata, quantization, serve)
    with fileio.atomic_open(path, "wb") as handle:
        handle.write(data)
    logging.info("exported LiteRT model (%s, %.1f MB) to %s", quantization, len(data) / 1e6,
                 path)
    return path


def export_model_dir(export_dir: str, fn: Callable,
                     input_signature: Mapping[str, tf.TensorSpec],
                     metadata: Mapping[str, object], fp16: bool = False, int8: bool = False
                     ) -> Dict[str, str]:
    """Writes `export_dir`/model.tflite, and model.fp16.tflite with `fp16`,
    model.int8.tflite with `int8` (a file of an earlier export that this one does not
    write is removed: it would not match model.tflite). Returns {"tflite": path[,
    "tflite_fp16": path][, "tflite_int8": path]}. The vocabulary is the caller's
    (`portable.export_model_dir` copies it and names it in `metadata`)."""
    serve = frozen_serving_function(fn, input_signature)
    wanted = {"float32": True, "float16": fp16, "int8": int8}
    written = {}
    for quantization, want in wanted.items():
        path = os.path.join(export_dir, FILES[quantization])
        if want:
            written[RESULT_KEYS[quantization]] = write_tflite(
                fn, input_signature, path, metadata, quantization, serve)
        elif os.path.exists(path):
            os.remove(path)
            logging.info("removed %s of an earlier export", path)
    return written
