"""SavedModel export of a pretrained ALBERT, with the original export_to_tfhub's signatures.

Signatures (token ids in, int32 [batch, seq]; `mlm_positions` int32 [batch, P]):
  tokens: input_ids, input_mask, segment_ids -> sequence_output [B,S,H], pooled_output [B,H]
  sop:    same inputs -> + sop_log_probs [B,2] (index 1 = swapped)
  mlm:    + mlm_positions -> + mlm_logits [B,P,V]
  serving_default = mlm
Assets: albert_config.json and the vocabulary (the SentencePiece model, or the WordPiece
vocab.txt / vocab_chinese.txt of the Chinese models), so the directory is self-contained
and `checkpoints.from_official_dir` reads it; `tokenization_info` returns the vocabulary
file's path and do_lower_case, as the original's TF-Hub modules do.
The export is written to a temporary directory and renamed into place.

The `mlm` signature's graph (plus sop_log_probs) as portable files, token ids in, the
vocabulary beside them: `export_pretrainer_onnx` (model.onnx, model.int8.onnx) and
`export_pretrainer_tflite` (model.tflite, model.fp16.tflite, model.int8.tflite), both of
`pretrainer_token_model`. Each stores the tied word embeddings once.
"""
from __future__ import annotations

from typing import Dict, Optional

import tensorflow as tf

from albert_tf import export
from albert_tf.kernels import fused_ops
from albert_tf.modeling.models import AlbertPretrainer


# The token inputs every signature takes (int32 [batch, sequence]).
_TOKENS = [tf.TensorSpec([None, None], tf.int32, name)
           for name in ("input_ids", "input_mask", "segment_ids")]


class _PretrainerModule(tf.Module):
    def __init__(self, model: AlbertPretrainer, config_file: str, vocab_file: str,
                 do_lower_case: bool, layer_norm: str = "auto"):
        fused_ops.check_export_layer_norm(layer_norm)
        super().__init__()
        self.model = model
        self.layer_norm = layer_norm
        self.config_asset = tf.saved_model.Asset(config_file)
        self.vocab_asset = tf.saved_model.Asset(vocab_file)
        self.do_lower_case = tf.Variable(do_lower_case, trainable=False)

    def _run(self, input_ids, input_mask, segment_ids, positions=None):
        """(the model's outputs, the float32 encoder outputs every signature returns);
        positions None: one dummy masked position per example (the MLM head is unused)."""
        if positions is None:
            positions = tf.zeros([tf.shape(input_ids)[0], 1], tf.int32)
        inputs = {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
                  "masked_lm_positions": positions}
        out = export.call_for_export(self.model, inputs, self.layer_norm)
        return out, {"sequence_output": tf.cast(out["sequence_output"], tf.float32),
                     "pooled_output": tf.cast(out["pooled_output"], tf.float32)}

    @tf.function(input_signature=_TOKENS)
    def tokens(self, input_ids, input_mask, segment_ids):
        return self._run(input_ids, input_mask, segment_ids)[1]

    @tf.function(input_signature=_TOKENS)
    def sop(self, input_ids, input_mask, segment_ids):
        out, outputs = self._run(input_ids, input_mask, segment_ids)
        return dict(outputs, sop_log_probs=tf.nn.log_softmax(out["sop_logits"]))

    @tf.function(input_signature=_TOKENS + [
        tf.TensorSpec([None, None], tf.int32, "mlm_positions")])
    def mlm(self, input_ids, input_mask, segment_ids, mlm_positions):
        out, outputs = self._run(input_ids, input_mask, segment_ids, mlm_positions)
        return dict(outputs, mlm_logits=out["mlm_logits"])

    @tf.function(input_signature=[])
    def tokenization_info(self):
        return {"vocab_file": self.vocab_asset.asset_path, "do_lower_case": self.do_lower_case}


def export_pretrainer(model: AlbertPretrainer, config_file: str, vocab_file: str,
                      export_dir: str, do_lower_case: bool = True,
                      layer_norm: str = "auto") -> str:
    """Writes the SavedModel to `export_dir` (replacing it only once complete);
    `vocab_file` is the SentencePiece model or the WordPiece vocabulary;
    `layer_norm` as in `export.call_for_export`."""
    module = _PretrainerModule(model, config_file, vocab_file, do_lower_case, layer_norm)
    return export.save_serving_model(export_dir, module, {
        "serving_default": module.mlm, "mlm": module.mlm, "sop": module.sop,
        "tokens": module.tokens, "tokenization_info": module.tokenization_info})


def pretrainer_token_model(model: AlbertPretrainer, do_lower_case: bool = True):
    """The pretrainer's token graph as its ONNX and LiteRT files hold it (a
    `portable.PortableModel`): the `mlm` signature's graph, int32 `input_ids`,
    `input_mask`, `segment_ids` [B, S] and `mlm_positions` [B, P] -> `sequence_output`
    [B, S, H], `pooled_output` [B, H], `mlm_logits` [B, P, V] and `sop_log_probs` [B, 2]
    (index 1 = swapped), all float32; metadata: task, do_lower_case, albert_config."""
    from albert_tf.export import portable

    def fn(features):
        # AlbertPretrainer.call, composed from its parts: its `gather_positions` spells the
        # positions' new axis as a StridedSlice (positions[:, :, None]), which LiteRT has
        # no kernel for; tf.gather over the batch gathers the same vectors.
        with fused_ops.exporting_layer_norms_as("plain"):
            encoded = model.encoder({name: features[name] for name in export.TOKEN_FEATURES},
                                    training=False)
            sequence = encoded["sequence_output"]
            at_positions = tf.gather(sequence, features["mlm_positions"], batch_dims=1)
            mlm_logits = model.masked_lm(at_positions, model.encoder.embedding_table)
            sop_logits = model.sentence_order(encoded["pooled_output"])
        return {"sequence_output": tf.cast(sequence, tf.float32),
                "pooled_output": tf.cast(encoded["pooled_output"], tf.float32),
                "mlm_logits": tf.cast(mlm_logits, tf.float32),
                "sop_log_probs": tf.nn.log_softmax(tf.cast(sop_logits, tf.float32))}

    signature = export.token_input_signature()
    signature["mlm_positions"] = tf.TensorSpec([None, None], tf.int32, "mlm_positions")
    metadata = {"task": "pretrainer", "do_lower_case": do_lower_case,
                "albert_config": model.config.to_dict()}
    return portable.PortableModel(fn, signature, metadata,
                                  compare=(("mlm_logits", "argmax"), ("sop_log_probs", "argmax")))


def _vocabulary_arguments(vocab_file: Optional[str]) -> Dict[str, Optional[str]]:
    """`vocab_file` as `copy_vocabulary`'s spm_model_file (a SentencePiece model, told
    apart by content: the hub layout names either kind vocab_file) or vocab_file."""
    from albert_tf import tokenization
    sentencepiece = bool(vocab_file) and tokenization.is_sentencepiece_model(vocab_file)
    return {"spm_model_file": vocab_file if sentencepiece else None,
            "vocab_file": None if sentencepiece else vocab_file}


def export_pretrainer_onnx(model: AlbertPretrainer, export_dir: str,
                           vocab_file: Optional[str] = None, do_lower_case: bool = True,
                           int8: bool = False) -> Dict[str, str]:
    """Writes export_dir/model.onnx (and model.int8.onnx with `int8`) of
    `pretrainer_token_model` (inputs, outputs and metadata there). `vocab_file` (the
    SentencePiece model or WordPiece vocabulary, told apart by content) is copied beside
    it. Returns {"onnx": path[, "onnx_int8": path]}."""
    from albert_tf.export import onnx as onnx_export

    token_model = pretrainer_token_model(model, do_lower_case)
    return onnx_export.export_model_dir(export_dir, token_model.fn,
                                        token_model.input_signature, token_model.metadata,
                                        int8=int8, **_vocabulary_arguments(vocab_file))


def export_pretrainer_tflite(model: AlbertPretrainer, export_dir: str,
                             vocab_file: Optional[str] = None, do_lower_case: bool = True,
                             fp16: bool = False, int8: bool = False) -> Dict[str, str]:
    """Writes export_dir/model.tflite (and model.fp16.tflite with `fp16`,
    model.int8.tflite with `int8`) of the graph `export_pretrainer_onnx` writes, with the
    same inputs, outputs and metadata (run them with `litert_runtime.LiteRTModel`), and
    the vocabulary beside them. Returns {"tflite": path[, "tflite_fp16": path][,
    "tflite_int8": path]}."""
    from albert_tf.export import litert
    from albert_tf.export.vocabulary import copy_vocabulary

    token_model = pretrainer_token_model(model, do_lower_case)
    metadata = dict(token_model.metadata)
    metadata.update(copy_vocabulary(export_dir, **_vocabulary_arguments(vocab_file)))
    return litert.export_model_dir(export_dir, token_model.fn, token_model.input_signature,
                                   metadata, fp16=fp16, int8=int8)
