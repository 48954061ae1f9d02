"""Sentence encoders served: raw text in, one vector out.

  serving_default(text: tf.string [B]) -> embedding float32 [B, D]
  serve_tokens(input_ids, input_mask, segment_ids: int32 [B, S]) -> embedding
The raw text is tokenized in the graph and cut at max_seq_length as the job cuts it.
`portable_model` is the ONNX / LiteRT function (token ids -> embedding) with its
metadata (task "sentence_embedding", pooling, normalize), which `albert_tf.pipeline(
"sentence-embedding", model=export_dir)` reads. `save_sentence_transformers_export` writes
the same model as a sentence-transformers directory.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional

import tensorflow as tf

from albert_tf import export
from albert_tf.checkpoints import sentence_transformers
from albert_tf.export import onnx as onnx_export, portable

TASK = "sentence_embedding"
ST_SUBDIR = "sentence-transformers"


class EmbeddingServingModule(tf.Module):
    """Serving wrapper of an `AlbertSentenceEncoder` (see the module docstring)."""

    def __init__(self, model, tokenizer, max_seq_length: int, layer_norm: str = "auto",
                 name: Optional[str] = None):
        super().__init__(name=name)
        self.model = model
        self.tokenizer = tokenizer
        self.max_seq_length = max_seq_length
        self._outputs = export.model_outputs(model, ["embedding"], layer_norm)
        self.serving_default = tf.function(
            self._serve_text, input_signature=[tf.TensorSpec([None], tf.string, "text")])
        self.serve_tokens = tf.function(self._outputs,
                                        input_signature=[export.token_input_signature()])

    def _serve_text(self, text):
        tok = self.tokenizer
        features = export.pack_pair(tok(text), None, self.max_seq_length, tok.cls_id,
                                    tok.sep_id, max(tok.pad_id, 0))
        # Only as long as the batch's longest text: padding changes no pooled value (the
        # pooling skips it) but costs as much as text.
        longest = tf.maximum(tf.reduce_max(tf.reduce_sum(features["input_mask"], axis=1)), 1)
        return self._outputs({name: value[:, :longest] for name, value in features.items()})

    def signatures(self) -> Dict[str, Callable]:
        return {"serving_default": self.serving_default, "serve_tokens": self.serve_tokens}


def export_saved_model(model, options) -> str:
    """The SavedModel in options.export_dir (`options`: run_embeddings.py's)."""
    module = EmbeddingServingModule(model, options.in_graph_tokenizer(), options.max_seq_length,
                                    layer_norm=options.export_layer_norm)
    return export.save_serving_model(options.export_dir, module, module.signatures())


def portable_model(model, options) -> portable.PortableModel:
    fn = onnx_export.model_function(model, ["embedding"])
    metadata = {"task": TASK, "task_name": options.task_name, "pooling": list(model.pooling),
                "normalize": bool(model.normalize), "max_seq_length": options.max_seq_length,
                "do_lower_case": options.do_lower_case}
    # Agreement of int8 files: the embeddings are compared as values, not labels.
    return portable.PortableModel(fn, export.token_input_signature(), metadata, compare=())


def save_sentence_transformers_export(model, options) -> str:
    """<export_dir>/sentence-transformers: the encoder and its pooling, as
    sentence-transformers lays a model out."""
    directory = f"{options.export_dir.rstrip('/')}/{ST_SUBDIR}"
    sentence_transformers.save_sentence_transformers_dir(
        model, directory, model.pooling, model.normalize, options.max_seq_length,
        spm_model_file=options.spm_model_file,
        vocab_file=None if options.spm_model_file else options.vocab_file,
        do_lower_case=options.do_lower_case)
    return directory
