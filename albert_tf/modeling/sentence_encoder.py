"""Sentence embeddings: the encoder's token vectors pooled into one vector per text, and the
losses that train them (as sentence-transformers defines them).

`AlbertSentenceEncoder(config, pooling=("mean",), normalize=False)`: the encoder's outputs
plus `embedding` float32 [B, D] (D = H times the number of pooling modes), the last hidden
states pooled over the text's positions (input_mask 1: [CLS] and [SEP] included):
  cls            h[0]
  max            each dimension's largest value (padding set to -1e9 first)
  mean           sum(h) / max(tokens, 1e-9)
  mean_sqrt_len  sum(h) / sqrt(tokens)
(several modes: concatenated in that order), then with `normalize` h / max(|h|, 1e-12).

Losses (cosine similarities of float32 embeddings):
  cosent_loss(a, b, scores, scale=20)    CoSENT (Su 2022; sentence-transformers'
      CoSENTLoss): log(1 + sum over pairs (i, j) with score_i < score_j of
      exp(scale * (cos_i - cos_j))), one value for the batch
  ranking_loss(anchors, candidates, scale=20)  MultipleNegativesRankingLoss: the mean
      cross-entropy of softmax(scale * cos(anchor_i, candidate_j)) over j, the right answer
      j = i (the other rows' positives, and any hard negatives appended, are negatives);
      unsupervised SimCSE is this loss with each text its own positive under dropout
"""
from __future__ import annotations

from typing import Dict, Sequence

import keras
from keras import ops

from albert_tf.config import AlbertConfig
from albert_tf.modeling.models import FineTuningModel

MODES = ("cls", "max", "mean", "mean_sqrt_len")


@keras.saving.register_keras_serializable(package="albert_tf")
class SentencePooling(keras.layers.Layer):
    """[B, T, H] hidden states and [B, T] mask -> [B, D] (see the module docstring)."""

    def __init__(self, pooling: Sequence[str] = ("mean",), normalize: bool = False, **kwargs):
        super().__init__(**kwargs)
        unknown = [mode for mode in pooling if mode not in MODES]
        if unknown or not pooling:
            raise ValueError(f"--pooling {','.join(pooling)}: one or more of {', '.join(MODES)}")
        self.pooling = tuple(sorted(pooling, key=MODES.index))
        self.normalize = normalize

    def build(self, input_shape=None):
        self.built = True  # no weights

    def call(self, hidden, mask):
        hidden = ops.cast(hidden, "float32")
        mask = ops.expand_dims(ops.cast(mask, "float32"), -1)  # (LiteRT lacks new-axis slices)
        parts = []
        for mode in self.pooling:
            if mode == "cls":
                parts.append(hidden[:, 0])
            elif mode == "max":
                parts.append(ops.max(ops.where(mask > 0, hidden, -1e9), axis=1))
            else:
                total = ops.sum(hidden * mask, axis=1)
                count = ops.maximum(ops.sum(mask, axis=1), 1e-9)
                parts.append(total / (count if mode == "mean" else ops.sqrt(count)))
        vectors = parts[0] if len(parts) == 1 else ops.concatenate(parts, axis=-1)
        if self.normalize:
            norm = ops.sqrt(ops.sum(ops.square(vectors), axis=-1, keepdims=True))
            vectors = vectors / ops.maximum(norm, 1e-12)
        return vectors

    def get_config(self):
        return dict(super().get_config(), pooling=list(self.pooling), normalize=self.normalize)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSentenceEncoder(FineTuningModel):
    """The encoder and its pooling: outputs the encoder's plus `embedding` [B, D]."""

    _EXTRA_ARGS = ("pooling", "normalize")
    _HEAD = "pooler_head"

    def __init__(self, config: AlbertConfig, pooling: Sequence[str] = ("mean",),
                 normalize: bool = False, **kwargs):
        super().__init__(config, **kwargs)
        self.pooler_head = SentencePooling(pooling, normalize, name="pooling")
        self.pooling = list(self.pooler_head.pooling)
        self.normalize = normalize

    def call(self, inputs: Dict, training=False):
        outputs = dict(self.encoder(inputs, training=training))
        outputs["embedding"] = self.pooler_head(outputs["sequence_output"],
                                                inputs["input_mask"])
        return outputs


def _cosine_matrix(a, b):
    """[Na, Nb] cosine similarities of float32 rows."""
    a = a / ops.maximum(ops.sqrt(ops.sum(ops.square(a), -1, keepdims=True)), 1e-12)
    b = b / ops.maximum(ops.sqrt(ops.sum(ops.square(b), -1, keepdims=True)), 1e-12)
    return ops.matmul(a, ops.transpose(b))


def pair_cosines(a, b):
    """[B] cosine similarity of each row of a with the same row of b."""
    a = a / ops.maximum(ops.sqrt(ops.sum(ops.square(a), -1, keepdims=True)), 1e-12)
    b = b / ops.maximum(ops.sqrt(ops.sum(ops.square(b), -1, keepdims=True)), 1e-12)
    return ops.sum(a * b, axis=-1)


def cosent_loss(a, b, scores, scale: float = 20.0):
    """CoSENT of the batch: log(1 + sum_{s_i < s_j} exp(scale (cos_i - cos_j)))."""
    cos = pair_cosines(ops.cast(a, "float32"), ops.cast(b, "float32")) * scale
    scores = ops.cast(scores, "float32")
    differences = cos[:, None] - cos[None, :]
    ordered = ops.cast(scores[:, None] < scores[None, :], "float32")
    differences = differences - (1.0 - ordered) * 1e12
    flat = ops.concatenate([ops.zeros([1]), ops.reshape(differences, [-1])], axis=0)
    return ops.logsumexp(flat, axis=0)


def ranking_loss(anchors, candidates, scale: float = 20.0):
    """MultipleNegativesRanking of the batch: candidates [B + extra, D], row i's answer i."""
    logits = _cosine_matrix(ops.cast(anchors, "float32"), ops.cast(candidates, "float32"))
    logits = logits * scale
    rows = ops.shape(logits)[0]
    log_probs = ops.log_softmax(logits, axis=-1)
    right = ops.take_along_axis(log_probs, ops.arange(rows)[:, None], axis=-1)[:, 0]
    return -ops.mean(right)
