"""`AlbertMaskedLM`: texts with `[MASK]` -> the masked-LM head's predictions (fill-mask).

    masked_lm = albert_tf.from_pretrained("albert_base_v2", "fill-mask")
    masked_lm.fill_mask(["The capital of France is [MASK]."], top_k=3)
        -> [[[("paris", 0.41), ("lyon", 0.05), ...]]]     one list per [MASK]
    masked_lm.predict(["The [MASK] sat on the [MASK]."])  # logits float32 [1, 2, V]

The network is `AlbertPretrainer` (the encoder, the masked-LM head tied to the word
embeddings, and the sentence-order head), so its weights are the official checkpoints'
and a pretraining run's. A text is encoded as `checkpoints.official.encode_with_masks`
encodes it for `python -m albert_tf.fill_mask` (each literal `[MASK]` one mask token).
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from albert_tf.errors import UserValueError
from albert_tf.keras_tasks.inputs import DEFAULT_BATCH_SIZE
from albert_tf.keras_tasks.task import Task
from albert_tf.modeling.models import AlbertPretrainer


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMaskedLM(Task):
    """An `AlbertPretrainer` network on texts with `[MASK]` (see the module docstring).
    Calling it on token features with `masked_lm_positions` int32 [B, P] returns float32
    logits [B, P, V] at those positions."""

    task_name = "fill-mask"

    def call(self, features, training=False):
        return tf.cast(self.network(features, training=training)["mlm_logits"], tf.float32)

    def masked_features(self, texts: Sequence[str]) -> Dict[str, np.ndarray]:
        """Token features of `texts` (`[CLS] text [SEP]`, each `[MASK]` the mask id) with
        `masked_lm_positions` int32 [N, P] (P the most masks of a text; 0 past a text's
        masks) and `num_masks` int32 [N]."""
        from albert_tf.checkpoints.official import MASK_TOKEN, encode_with_masks

        texts = _texts(texts)
        length = self.preprocessor.sequence_length
        encoded = []
        for index, text in enumerate(texts):
            if MASK_TOKEN not in text:
                raise UserValueError(f"text {index} has no {MASK_TOKEN}: {text[:60]!r}")
            encoded.append(encode_with_masks(self.python_tokenizer, text, length,
                                             "sequence_length"))
        width = max((len(positions) for _, positions in encoded), default=0)
        out = {name: np.zeros((len(texts), length), np.int32)
               for name in ("input_ids", "input_mask", "segment_ids")}
        out["masked_lm_positions"] = np.zeros((len(texts), width), np.int32)
        out["num_masks"] = np.zeros((len(texts),), np.int32)
        pad = self.preprocessor.pad_id
        for row, (ids, positions) in enumerate(encoded):
            out["input_ids"][row] = ids + [pad] * (length - len(ids))
            out["input_mask"][row, :len(ids)] = 1
            out["masked_lm_positions"][row, :len(positions)] = positions
            out["num_masks"][row] = len(positions)
        return out

    def predict(self, x, batch_size=None, **kwargs) -> np.ndarray:
        """The masked-LM logits at each `[MASK]` of each text: float32 [N, P, V], P the
        most masks of a text; rows past a text's own masks are 0."""
        return self._mask_logits(x, batch_size, **kwargs)[0]

    def _mask_logits(self, x, batch_size=None, **kwargs) -> Tuple[np.ndarray, np.ndarray]:
        """(predict's logits, each text's number of masks int32 [N])."""
        arrays = self.masked_features(x)
        counts = arrays.pop("num_masks")
        if not len(counts) or not arrays["masked_lm_positions"].shape[1]:
            return np.zeros((len(counts), 0, self.config.vocab_size), np.float32), counts
        dataset = tf.data.Dataset.from_tensor_slices(arrays).batch(
            batch_size or DEFAULT_BATCH_SIZE)
        logits = keras.Model.predict(self, dataset, **kwargs)
        logits[np.arange(logits.shape[1])[None, :] >= counts[:, None]] = 0.0
        return logits, counts

    def fill_mask(self, x, top_k: int = 5, batch_size=None, **kwargs
                  ) -> List[List[List[Tuple[str, float]]]]:
        """For each text, for each `[MASK]`, the `top_k` (token text, probability) pairs,
        best first (ties by token id), as `python -m albert_tf.fill_mask` prints them."""
        if int(top_k) < 1:
            raise UserValueError(f"top_k must be at least 1, got {top_k}")
        logits, counts = self._mask_logits(x, batch_size, **kwargs)
        logits = logits.astype(np.float64)
        tokenizer = self.python_tokenizer
        results = []
        for row, count in zip(logits, counts):
            masks = []
            for values in row[:count]:
                probabilities = np.exp(values - values.max())
                probabilities /= probabilities.sum()
                best = np.argsort(-probabilities, kind="stable")[:int(top_k)]
                tokens = tokenizer.convert_ids_to_tokens([int(i) for i in best])
                masks.append([(tokenizer.token_text(token) or token, float(probabilities[i]))
                              for token, i in zip(tokens, best)])
            results.append(masks)
        return results

    def save_to_preset(self, preset_dir: str) -> list:
        """Writes a keras-hub `AlbertMaskedLM` preset (backbone, masked-LM head,
        preprocessor, SentencePiece model); returns the files written. keras-hub's head
        normalises with epsilon 1e-5 where the original uses 1e-12 (logits about 1e-4
        relative apart); keras-hub's tokenizer does not lower-case."""
        from albert_tf.keras_tasks import exporting

        return exporting.save_keras_hub_preset(self, preset_dir, "masked_lm")


def _texts(x) -> List[str]:
    if isinstance(x, (str, bytes)):
        raise UserValueError("x is one text: give a list of texts, e.g. [\"" + str(x)[:30] + "\"]")
    if isinstance(x, tf.data.Dataset) or not isinstance(x, (list, tuple, np.ndarray)):
        raise UserValueError(f"fill-mask takes a list of texts with [MASK], got "
                             f"{type(x).__name__}")
    texts = []
    for index, text in enumerate(x):
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if not isinstance(text, str):
            raise UserValueError(f"text {index} is not a text: {text!r:.40}")
        texts.append(text)
    return texts
