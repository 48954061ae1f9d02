"""sentence-embedding: one vector per text, as sentence-transformers' `encode` computes it.

    embed = albert_tf.pipeline("sentence-embedding", model="runs/sts/export")
    vectors = embed(["A man plays a guitar.", "Someone plays music."])  # float32 [2, D]
    embed("One text.")                                                # float32 [D]

Model sources: an albert-tf sentence-embedding export (its `embedding` output, pooled in
the model), a sentence-transformers directory (its Pooling and Normalize modules), or any
Hugging Face / official ALBERT directory (pooled here: mean by default, as
sentence-transformers pools a plain Hugging Face model).

Pooling of the last hidden states h [T, H] over the text's tokens ([CLS] and [SEP]
included, padding excluded), as sentence-transformers' Pooling computes it:
  cls            h[0]
  max            the largest value of each dimension
  mean           sum(h) / max(T, 1e-9)
  mean_sqrt_len  sum(h) / sqrt(T)
(several modes asked for: concatenated in that order; a sentence-transformers 6.x directory's
list: in its order), then with normalize h / max(|h|, 1e-12).

Options: `pooling` (a mode or a list of modes), `normalize_embeddings` (as `encode`'s
argument: normalize on top of the model's own), `truncation` (True: a text keeps the
model's first max_length - 2 tokens, as sentence-transformers cuts silently; False: an
error naming the length).

Written in NumPy rather than with the Keras pooling layer so that ONNX and LiteRT sources
run without TensorFlow; `modeling.sentence_encoder` computes the same in the model.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from albert_tf.errors import UserValueError
from albert_tf.pipelines import base
from albert_tf.pipelines.encoding import Packed

MODES = ("cls", "max", "mean", "mean_sqrt_len")


def pool(hidden: np.ndarray, mask: np.ndarray, modes: Sequence[str],
         normalize: bool = False) -> np.ndarray:
    """float32 [B, D]: hidden [B, T, H] pooled over the positions where mask [B, T] is 1,
    the `modes` concatenated in the order given."""
    hidden = np.asarray(hidden, np.float32)
    mask = np.asarray(mask, np.float32)[:, :, None]
    parts = []
    for mode in modes:
        if mode == "cls":
            parts.append(hidden[:, 0])
        elif mode == "max":
            parts.append(np.where(mask > 0, hidden, np.float32(-1e9)).max(axis=1))
        else:
            total = (hidden * mask).sum(axis=1)
            count = np.maximum(mask.sum(axis=1), np.float32(1e-9))
            parts.append(total / (count if mode == "mean" else np.sqrt(count)))
    vectors = np.concatenate(parts, axis=1)
    if normalize:
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True),
                                       np.float32(1e-12))
    return vectors.astype(np.float32)


class SentenceEmbeddingPipeline(base.Pipeline):
    task = "sentence-embedding"
    OPTIONS = {"pooling": None, "normalize_embeddings": False, "truncation": True}

    def __init__(self, source, batch_size: int = 8, **options):
        self.pooled_by_model = source.head == "sentence_embedding"
        if source.kind in ("onnx", "tflite", "saved_model") and not self.pooled_by_model:
            raise UserValueError(f"{source.path}: a {source.head} export holds a task's "
                                 "outputs, not token vectors; use a sentence-embedding export, "
                                 "a sentence-transformers or a Hugging Face directory")
        self.OUTPUTS = ("embedding",) if self.pooled_by_model else ("sequence_output",)
        super().__init__(source, batch_size, **options)

    def __call__(self, inputs, **options):
        if isinstance(inputs, (list, tuple)) and inputs:
            return self._encode_sorted(list(inputs), self.resolve_options(options))
        result = super().__call__(inputs, **options)
        if isinstance(inputs, (list, tuple)):  # no text
            return np.zeros([0, len(self([""])[0])], np.float32)
        return result  # one text: [D]; a stream: one vector at a time

    def _encode_sorted(self, texts: List, options: Mapping) -> np.ndarray:
        """float32 [N, D]: the texts batched longest first, as sentence-transformers' encode
        does, so that a batch's rows need little padding; returned in the input order."""
        self.encoder.prefetch(text for text in texts if isinstance(text, str))
        rows = [self.rows(text, options)[0] for text in texts]
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i].input_ids))
        vectors: List[Optional[np.ndarray]] = [None] * len(rows)
        for start in range(0, len(order), self.batch_size):
            chosen = order[start:start + self.batch_size]
            outputs = self.run_rows([rows[i] for i in chosen])
            for at, index in enumerate(chosen):
                part = {name: value[at:at + 1] for name, value in outputs.items()}
                vectors[index] = self.answer(texts[index], [rows[index]], part, options)
        return np.stack(vectors)

    def resolve_options(self, options: Mapping) -> Dict:
        values = super().resolve_options(options)
        pooling = values["pooling"]
        if pooling is None:
            pooling = self.source.pooling.get("pooling", ("mean",))
        pooling = (pooling,) if isinstance(pooling, str) else tuple(pooling)
        unknown = [mode for mode in pooling if mode not in MODES]
        if unknown or not pooling:
            raise UserValueError(f"pooling={values['pooling']!r}: one or more of "
                                 f"{', '.join(MODES)}")
        if self.pooled_by_model and values["pooling"] is not None:
            raise UserValueError(f"{self.source.path}: the export pools in the model; "
                                 "pooling= cannot change it")
        # Asked for: sentence-transformers' fixed order; a directory's: its own (6.x's
        # pooling_mode list is concatenated in its order).
        values["pooling"] = pooling if values["pooling"] is None else tuple(
            sorted(pooling, key=MODES.index))
        return values

    def rows(self, item, options: Mapping) -> List[Packed]:
        if isinstance(item, str) and self.source.pooling.get("lowercase"):
            item = item.lower()  # sentence_bert_config.json's do_lower_case
        return [self.text_row(item, options["truncation"])]

    def answer(self, item, rows, outputs: Dict[str, np.ndarray], options: Mapping):
        normalize = bool(options["normalize_embeddings"])
        if self.pooled_by_model:
            vector = pool(outputs["embedding"][:1, None, :], np.ones([1, 1]), ("cls",),
                          normalize)
        else:
            length = len(rows[0].input_ids)
            vector = pool(outputs["sequence_output"][:1, :length], np.ones([1, length]),
                          options["pooling"],
                          normalize or bool(self.source.pooling.get("normalize")))
        return vector[0]
