"""Exports: SavedModels for TF Serving, the hub-style pretrainer, ONNX, LiteRT.

saved_model.py (token-id signatures, in-graph packing, atomic saving; each task
family's serving module is albert_tf.tasks.<family>.export), hub.py (the pretrainer as
a TF-Hub-style SavedModel), onnx.py (tf2onnx conversion, int8 quantization, metadata),
litert.py (LiteRT conversion: float32, float16 and int8 files, metadata), litert_runtime.py (runs and checks those files with
the `ai_edge_litert` interpreter; imports neither TensorFlow nor the rest of albert_tf),
portable.py (what the ONNX and LiteRT files of a task share: the token-id function, its
metadata, the vocabulary beside it, and the int8 agreement check).

May import: training, checkpoints, modeling, kernels, tokenization, and the
foundation (config, errors, fileio).
"""
from albert_tf import _lazy

# The public names of the former module albert_tf.export, which this package replaced;
# loaded on first use, so that `albert_tf.export.litert_runtime` serves without TensorFlow.
# ClassifierServingModule moved to albert_tf.tasks.classification.export: it still reads
# here, with a DeprecationWarning (albert_tf._moved.MOVED_NAMES).
_EXPORTS = {name: "saved_model" for name in (
    "TOKEN_FEATURES", "call_for_export", "in_chunks", "model_outputs",
    "op_types", "pack_pair", "save_serving_model", "saved_model_proto",
    "token_input_signature", "truncate_pair_lengths", "warn_about_xla_functions",
    "xla_function_names")}
__all__ = list(_EXPORTS)

__getattr__, __dir__ = _lazy.lazy_attributes(__name__, _EXPORTS, globals())
