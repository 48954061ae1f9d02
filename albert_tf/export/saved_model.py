"""SavedModel building blocks: token-id and raw-text serving signatures.

Shared by the task families' serving modules (albert_tf.tasks.<family>.export). The pieces:

  `token_input_signature(...)`   TensorSpecs of `input_ids`, `input_mask`,
                                 `segment_ids` (int32), for `serve_tokens`.
  `model_outputs(model, names)`  calls a Keras task model in inference mode
                                 and returns the chosen outputs (float32).
  `truncate_pair_lengths(...)`   the original's `_truncate_seq_pair` in closed
                                 form, on tensors (pop from the longer side).
  `pack_pair(ids_a, ids_b, ...)` in-graph `[CLS] A [SEP] (B [SEP])` packing of
                                 ragged ids -> fixed-length int32 features,
                                 identical to the original's feature
                                 conversion (tasks/glue.py does it in Python).
  `save_serving_model(...)`      writes a tf.Module's signatures as a
                                 SavedModel atomically.

Tokenization in the graph is `albert_tf.tokenization.in_graph_tokenizer(...)`
(SentencePiece or WordPiece).
A SavedModel written here loads with `tf.saved_model.load` in a process that
has only TensorFlow and tensorflow-text (not albert_tf, not Keras models).

Typical raw-text signature for a new task (see
`albert_tf.tasks.classification.export.ClassifierServingModule`):

    class MyServing(tf.Module):
        def __init__(self, model, tokenizer, max_seq_length):
            super().__init__()
            self.model, self.tokenizer = model, tokenizer
            ...
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve_text(self, text):
            ids = self.tokenizer(text)
            features = pack_pair(ids, None, max_seq_length, cls_id, sep_id)
            return model_outputs(self.model, ["logits"])(features)

    save_serving_model(export_dir, module, {"serving_default": module.serve_text})
"""
from __future__ import annotations

import os
import uuid
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Set

import tensorflow as tf
from absl import logging

from albert_tf.kernels import fused_ops

TOKEN_FEATURES = ("input_ids", "input_mask", "segment_ids")


def token_input_signature(seq_length: Optional[int] = None,
                          batch_dims: Sequence[Optional[int]] = (None,)
                          ) -> Dict[str, tf.TensorSpec]:
    """int32 TensorSpecs for `input_ids`, `input_mask`, `segment_ids`.

    Shape = batch_dims + [seq_length]: [None, S] for GLUE / SQuAD, or
    batch_dims=(None, 4) for RACE's [B, C, S]. seq_length None accepts any length.
    """
    shape = list(batch_dims) + [seq_length]
    return {name: tf.TensorSpec(shape, tf.int32, name=name) for name in TOKEN_FEATURES}


def call_for_export(model, inputs, layer_norm: str = "auto"):
    """model(inputs, training=False), with the LayerNorms spelled as `layer_norm` ("auto",
    "onednn" or "plain") where this is traced for a SavedModel; what each spelling costs
    where is in `fused_ops.exporting_layer_norms_as`. For serving modules' tf.functions."""
    with fused_ops.exporting_layer_norms_as(layer_norm):
        return model(inputs, training=False)


def model_outputs(model, names: Sequence[str],
                  layer_norm: str = "auto") -> Callable[[Mapping], Dict[str, tf.Tensor]]:
    """A function features -> {name: model output} (inference mode, float outputs as float32;
    `layer_norm` as in `call_for_export`).

    Integer outputs (e.g. `predictions`) keep their dtype; floating ones are cast
    to float32 so that a mixed-precision model serves float32.
    """
    fused_ops.check_export_layer_norm(layer_norm)

    def call(features: Mapping) -> Dict[str, tf.Tensor]:
        outputs = call_for_export(model, dict(features), layer_norm)
        result = {}
        for name in names:
            value = tf.convert_to_tensor(outputs[name])
            result[name] = tf.cast(value, tf.float32) if value.dtype.is_floating else value
        return result
    return call


def in_chunks(call: Callable[[Mapping], Mapping], features: Mapping[str, tf.Tensor],
              chunk: int, outputs: Mapping[str, tuple]) -> Dict[str, tf.Tensor]:
    """`call(features)` on `chunk` rows at a time, the outputs concatenated, in the graph.

    A long text's many windows then never go through the model as one batch, whose
    memory (and, past the caches, time per row) would grow with the text. `outputs`: the
    outputs to keep, name -> (dtype, shape of a row), e.g. {"logits": (tf.float32,
    [K])}; with no rows each is empty [0, ...].
    """
    count = tf.shape(next(iter(features.values())))[0]
    arrays = {name: tf.TensorArray(dtype, size=0, dynamic_size=True, infer_shape=False,
                                   element_shape=[None, *shape])
              for name, (dtype, shape) in outputs.items()}

    def body(start, written):
        part = call({name: value[start:start + chunk] for name, value in features.items()})
        return start + chunk, {name: array.write(start // chunk, part[name])
                               for name, array in written.items()}

    _, arrays = tf.while_loop(lambda start, _: start < count, body, (tf.constant(0), arrays))
    return {name: tf.cond(array.size() > 0, array.concat,
                          lambda dtype=outputs[name][0], shape=outputs[name][1]:
                          tf.zeros([0, *shape], dtype))
            for name, array in arrays.items()}


def truncate_pair_lengths(len_a, len_b, budget):
    """Lengths the original's `_truncate_seq_pair` leaves, computed without a loop.

    The original pops one token from the end of the longer list (from B on a
    tie) until len_a + len_b <= budget. Its result is: unchanged when the pair
    fits; otherwise A keeps min(len_a, max(ceil(budget / 2), budget - len_b))
    tokens and B keeps the rest of the budget. Works elementwise on int tensors.
    Returns (new_len_a, new_len_b).
    """
    len_a = tf.convert_to_tensor(len_a)
    len_b = tf.cast(len_b, len_a.dtype)
    budget = tf.cast(budget, len_a.dtype)
    fits = len_a + len_b <= budget
    half_up = (budget + 1) // 2
    keep_a = tf.minimum(len_a, tf.maximum(half_up, budget - len_b))
    keep_b = tf.minimum(len_b, budget - keep_a)
    return tf.where(fits, len_a, keep_a), tf.where(fits, len_b, keep_b)


def _keep_first(ids: tf.RaggedTensor, lengths) -> tf.RaggedTensor:
    """The first lengths[i] items of each row of a 2-D RaggedTensor."""
    positions = tf.ragged.range(ids.row_lengths())
    return tf.ragged.boolean_mask(ids, positions < tf.cast(lengths, positions.dtype)[:, None])


def _constant_rows(value: int, lengths, dtype) -> tf.RaggedTensor:
    """Rows holding `value` repeated lengths[i] times (lengths 0 or 1 here)."""
    lengths = tf.cast(lengths, tf.int64)
    return tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(lengths)], tf.constant(value, dtype)), lengths)


def pack_pair(ids_a: tf.RaggedTensor, ids_b: Optional[tf.RaggedTensor], max_seq_length: int,
              cls_id: int, sep_id: int, pad_id: int = 0) -> Dict[str, tf.Tensor]:
    """`[CLS] A [SEP] (B [SEP])` features, exactly as the original's feature conversion.

    Args:
      ids_a, ids_b: int32 RaggedTensors [B, (T)] of token ids (ids_b may be
        None). A row whose B is empty is packed as a single segment, as the
        original does when `tokens_b` is empty (before or after truncation).
      max_seq_length: S, the packed length (>= 3).
    Truncation: pairs use `truncate_pair_lengths` with budget S - 3; singles
    keep the first S - 2 ids of A.
    Returns int32 [B, S] tensors `input_ids` (padded with pad_id), `input_mask`
    (1 real, 0 pad) and `segment_ids` (0 for [CLS] A [SEP], 1 for B [SEP]).
    """
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be >= 3, got {max_seq_length}")
    ids_a = tf.cast(ids_a, tf.int32).with_row_splits_dtype(tf.int64)
    len_a = ids_a.row_lengths()
    if ids_b is None:
        ids_b = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros_like(len_a))
    ids_b = tf.cast(ids_b, tf.int32).with_row_splits_dtype(tf.int64)
    len_b = ids_b.row_lengths()
    has_b = tf.cast(len_b > 0, tf.int64)
    budget = max_seq_length - 2 - has_b
    keep_a, keep_b = truncate_pair_lengths(len_a, len_b, budget)
    # The original adds B's [SEP] when B is non-empty *after* truncation (only
    # differs for max_seq_length <= 4, where the budget can empty B).
    second_sep = tf.cast(keep_b > 0, tf.int64)
    ones = tf.ones_like(len_a)
    pieces = [_constant_rows(cls_id, ones, tf.int32), _keep_first(ids_a, keep_a),
              _constant_rows(sep_id, ones, tf.int32), _keep_first(ids_b, keep_b),
              _constant_rows(sep_id, second_sep, tf.int32)]
    input_ids = tf.concat(pieces, axis=1)
    first_len = keep_a + 2
    second_len = keep_b + second_sep
    segment_ids = tf.concat([
        tf.RaggedTensor.from_row_lengths(tf.zeros([tf.reduce_sum(first_len)], tf.int32),
                                         first_len),
        tf.RaggedTensor.from_row_lengths(tf.ones([tf.reduce_sum(second_len)], tf.int32),
                                         second_len)], axis=1)
    shape = [None, max_seq_length]
    ids_dense = input_ids.to_tensor(default_value=pad_id, shape=shape)
    mask = tf.ones_like(input_ids).to_tensor(default_value=0, shape=shape)
    return {"input_ids": ids_dense, "input_mask": mask,
            "segment_ids": segment_ids.to_tensor(default_value=0, shape=shape)}


def save_serving_model(export_dir: str, module: tf.Module,
                       signatures: Mapping[str, Callable]) -> str:
    """Saves `module` with `signatures` as a SavedModel at `export_dir`, atomically.

    The SavedModel is written to a temporary sibling directory and renamed
    into place, so `export_dir` never holds a partial export; an existing
    export there is replaced. `signatures` maps signature names to
    `tf.function`s with an input_signature (or concrete functions); include
    "serving_default". Returns export_dir.

    Let the signatures be traced here, not by calls beforehand: graphs traced
    for a SavedModel leave out the XLA kernels of `albert_tf.kernels.fused_ops`, which
    TF Serving does not run by default. A warning names any XLA function that
    reaches the export anyway. How the model's LayerNorms are spelled is the module's
    choice (`call_for_export`).
    """
    if "serving_default" not in signatures:
        raise ValueError(f"signatures need a 'serving_default' entry, got {sorted(signatures)}")
    export_dir = os.path.normpath(export_dir)
    parent = os.path.dirname(export_dir) or "."
    tf.io.gfile.makedirs(parent)
    tag = uuid.uuid4().hex[:8]
    tmp = os.path.join(parent, f".{os.path.basename(export_dir)}.tmp-{tag}")
    old = os.path.join(parent, f".{os.path.basename(export_dir)}.old-{tag}")
    try:
        tf.saved_model.save(module, tmp, signatures=dict(signatures))
        warn_about_xla_functions(tmp)
        if tf.io.gfile.exists(export_dir):
            tf.io.gfile.rename(export_dir, old)
        tf.io.gfile.rename(tmp, export_dir)
    finally:
        for leftover in (tmp, old):
            if tf.io.gfile.exists(leftover):
                tf.io.gfile.rmtree(leftover)
    logging.info("exported SavedModel with signatures %s to %s", sorted(signatures), export_dir)
    return export_dir


def saved_model_proto(saved_model_dir: str):
    """The `SavedModel` protocol buffer of a SavedModel directory (graphs, functions)."""
    from tensorflow.core.protobuf import saved_model_pb2
    proto = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as handle:
        proto.ParseFromString(handle.read())
    return proto


def op_types(saved_model_dir: str) -> Set[str]:
    """The op types in a SavedModel's graphs and functions."""
    found = set()
    for meta_graph in saved_model_proto(saved_model_dir).meta_graphs:
        found.update(node.op for node in meta_graph.graph_def.node)
        for function in meta_graph.graph_def.library.function:
            found.update(node.op for node in function.node_def)
    return found


def xla_function_names(saved_model_dir: str) -> List[str]:
    """Names of the functions in a SavedModel that must be compiled by XLA."""
    return sorted(f.signature.name for graph in saved_model_proto(saved_model_dir).meta_graphs
                  for f in graph.graph_def.library.function if f.attr["_XlaMustCompile"].b)


def warn_about_xla_functions(saved_model_dir: str) -> None:
    names = xla_function_names(saved_model_dir)
    if names:
        logging.warning("the SavedModel holds %d XLA-compiled functions (%s...), which TF "
                        "Serving runs only with --xla_cpu_compilation_enabled; were its "
                        "signatures called before export?", len(names), names[0])
