"""Exports: SavedModels for TF Serving, the hub-style pretrainer, ONNX.

saved_model.py (token-id signatures, in-graph packing, the classifier's serving
module), hub.py (the pretrainer as a TF-Hub-style SavedModel), onnx.py (tf2onnx
conversion, int8 quantization, metadata).

May import: training, checkpoints, modeling, kernels, tokenization, and the
foundation (config, errors, fileio).
"""
# The public names of the former module albert_tf.export, which this package replaced.
from albert_tf.export.saved_model import (  # noqa: F401
    ClassifierServingModule, TOKEN_FEATURES, call_for_export, model_outputs, op_types,
    pack_pair, save_serving_model, saved_model_proto, token_input_signature,
    truncate_pair_lengths, warn_about_xla_functions, xla_function_names)
