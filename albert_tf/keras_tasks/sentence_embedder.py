"""`AlbertSentenceEmbedder`: texts -> sentence embeddings (a bi-encoder), run_embeddings.py's
model, packing and losses.

    embedder = albert_tf.from_pretrained("albert_base_v2", "sentence-embedding",
                                         pooling="mean")
    embedder.compile()
    embedder.fit((texts_a, texts_b), scores, epochs=2)   # CoSENT on scored pairs
    embedder.fit((questions, answers))                  # in-batch negatives ranking
    embedder.fit(texts)                                 # unsupervised SimCSE
    embedder.predict(["a text"])                         # float32 [1, D]
    embedder.score((texts_a, texts_b), scores)           # Spearman / Pearson of cosines

Each text is packed alone, `[CLS] text [SEP]` cut to the sequence length, and pooled by
`pooling` (cls, max, mean, mean_sqrt_len; several concatenated), as sentence-transformers
pools (`modeling.sentence_encoder`). The loss follows the data, as run_embeddings.py's
`--loss=auto`: CoSENT for pairs with scores, MultipleNegativesRanking for pairs (and
triplets (anchors, positives, hard negatives)) without, SimCSE (each text its own positive
under two dropout masks) for texts alone; the in-batch negatives are the batch's other rows.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from albert_tf.errors import UserValueError
from albert_tf.keras_tasks.inputs import DEFAULT_BATCH_SIZE
from albert_tf.keras_tasks.task import Task
from albert_tf.modeling.sentence_encoder import (AlbertSentenceEncoder, cosent_loss,
                                                 ranking_loss)
from albert_tf.tasks.embeddings import features as embedding_features
from albert_tf.tasks.embeddings.metrics import cosine_similarities, similarity_metrics

TEXTS = ("a", "b", "n")


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSentenceEmbedder(Task):
    """An `AlbertSentenceEncoder` network on texts (see the module docstring). `scale`:
    the losses' scale of the cosine similarities (sentence-transformers' 20). Calling it on
    {"input_ids_<t>", "input_mask_<t>"} for t in a (b, n) returns {t: float32 [B, D]}."""

    task_name = "sentence-embedding"
    inputs_in_python = True  # a tf.data.Dataset is read into memory (dataset_rows)
    text_columns = True  # x may be (texts_a, texts_b)
    reads_pooled_output = False

    def __init__(self, network: AlbertSentenceEncoder, preprocessor=None, scale: float = 20.0,
                 **kwargs):
        super().__init__(network, preprocessor, **kwargs)
        if float(scale) <= 0:
            raise UserValueError(f"scale must be positive, got {scale}")
        self.scale = float(scale)

    def call(self, features, training=False):
        out = {}
        for name in TEXTS:
            if f"input_ids_{name}" in features:
                inputs = embedding_features.text_features(features, name)
                out[name] = tf.cast(self.network(inputs, training=training)["embedding"],
                                    tf.float32)
        if training and set(out) == {"a"}:  # SimCSE: the same texts under other dropout
            inputs = embedding_features.text_features(features, "a")
            out["a_again"] = tf.cast(self.network(inputs, training=True)["embedding"],
                                     tf.float32)
        return out

    # --- loss ---------------------------------------------------------------------------------

    def default_loss(self):
        return None  # `task_loss`: chosen by the data (see the module docstring)

    def default_metrics(self):
        return None

    def task_loss(self, y, y_pred):
        if "b" not in y_pred:  # SimCSE (fit on texts alone; evaluate refuses them)
            return ranking_loss(y_pred["a"], y_pred["a_again"], self.scale)
        if y is not None and "score" in y:
            return cosent_loss(y_pred["a"], y_pred["b"], y["score"], self.scale)
        candidates = [y_pred["b"]] + ([y_pred["n"]] if "n" in y_pred else [])
        return ranking_loss(y_pred["a"], tf.concat(candidates, axis=0), self.scale)

    # --- data ---------------------------------------------------------------------------------

    def packed(self, x) -> Dict[str, np.ndarray]:
        """run_embeddings.py's rows of texts x (a list; a pair (texts_a, texts_b); a triplet
        (anchors, positives, negatives)): input_ids_<t>, input_mask_<t> int32 [N, S]."""
        columns = _columns(x)
        tokenizer = self.python_tokenizer
        length = self.preprocessor.sequence_length
        out = {}
        for name, texts in zip(TEXTS, columns):
            ids = tokenizer.encode_ids([tokenizer.preprocess(t) for t in texts])
            rows = [embedding_features.pack(row, length, tokenizer.cls_id, tokenizer.sep_id,
                                            max(tokenizer.pad_id, 0)) for row in ids]
            out[f"input_ids_{name}"] = np.array([r[0] for r in rows], np.int32).reshape(-1,
                                                                                        length)
            out[f"input_mask_{name}"] = np.array([r[1] for r in rows], np.int32).reshape(
                -1, length)
        return out

    def dataset(self, x, y=None, batch_size=None, needs_labels=False, shuffle=False):
        features = self.packed(x)
        count = len(features["input_ids_a"])
        labels = None
        if y is not None:
            scores = np.asarray(y, np.float32).reshape(-1)
            if "input_ids_b" not in features:
                raise UserValueError("sentence-embedding: scores go with pairs (texts_a, "
                                     "texts_b); texts alone train without labels (SimCSE)")
            if len(scores) != count:
                raise UserValueError(f"{count} pairs but {len(scores)} scores")
            labels = {"score": scores}
        config = self.config
        if "input_ids_b" not in features and not (config.hidden_dropout_prob or
                                                  config.attention_probs_dropout_prob):
            raise UserValueError("sentence-embedding: texts alone train by SimCSE, which needs "
                                 "dropout (each text is its own positive under two dropout "
                                 "masks), and this model's dropouts are 0")
        dataset = tf.data.Dataset.from_tensor_slices((features, labels) if labels is not None
                                                     else (features,))
        if shuffle and count:
            dataset = dataset.shuffle(count, reshuffle_each_iteration=True)
        return dataset.batch(batch_size or DEFAULT_BATCH_SIZE).prefetch(tf.data.AUTOTUNE)

    def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
        """The loss on pairs (with scores: CoSENT) or triplets; see `score` for the
        correlations run_embeddings.py reports."""
        x, y = self.in_memory(x, y)
        if not kwargs.get("_use_cached_eval_dataset") and not _is_columns(x):
            raise UserValueError("sentence-embedding: evaluate takes pairs (texts_a, texts_b) "
                                 "(and their scores) or triplets")
        return super().evaluate(x, y, batch_size, **kwargs)

    # --- embeddings and scores ---------------------------------------------------------------

    def predict(self, x, batch_size=None, **kwargs) -> np.ndarray:
        """Each text's embedding, float32 [N, D]."""
        x = self.in_memory(x)[0]
        features = self.packed(list(x) if not isinstance(x, (list, tuple)) else x)
        if "input_ids_b" in features:
            raise UserValueError("sentence-embedding: predict embeds a list of texts (embed "
                                 "each side of pairs on its own)")
        if not len(features["input_ids_a"]):
            width = self.config.hidden_size * len(self.network.pooling)
            return np.zeros((0, width), np.float32)
        dataset = tf.data.Dataset.from_tensor_slices(features).batch(
            batch_size or DEFAULT_BATCH_SIZE)
        return keras.Model.predict(self, dataset, **kwargs)["a"]

    def score(self, pairs, scores, batch_size=None, **kwargs) -> Dict[str, float]:
        """run_embeddings.py's evaluation: the Spearman (and Pearson) correlation of the
        pairs' cosine similarities with the gold scores."""
        texts_a, texts_b = _columns(pairs)[:2] if _is_columns(pairs) else (None, None)
        if texts_b is None:
            raise UserValueError("score takes pairs (texts_a, texts_b) and their scores")
        a = self.predict(list(texts_a), batch_size, **kwargs)
        b = self.predict(list(texts_b), batch_size, **kwargs)
        return similarity_metrics(cosine_similarities(a, b), np.asarray(scores, np.float64))

    def export(self, filepath, format="saved_model", verbose=None, input_signature=None, *,
               int8: bool = False, fp16: bool = False, check_data=None, **kwargs):
        """Writes run_embeddings.py's export to `filepath`: a SavedModel embedding raw text
        (`serving_default`) and token ids (`serve_tokens`) with its sentence-transformers
        directory (`sentence-transformers/`), and / or "onnx", "tflite" ("litert") on token
        ids, with the vocabulary and albert_tf_export.json, for
        `albert_tf.pipeline("sentence-embedding", ...)`. `check_data`: texts the int8 files
        are checked on. Returns {"export_dir", "sentence_transformers_dir", and the
        portable files' paths}."""
        from albert_tf.keras_tasks import exporting

        exporting.check_arguments(input_signature, kwargs, "raw text and token ids",
                                  "format, int8, fp16, check_data, int8_min_agreement")
        return exporting.export_sentence_embedder(self, filepath, format, int8=int8,
                                                  fp16=fp16, check_data=check_data, **kwargs)

    def get_config(self):
        return dict(super().get_config(), scale=self.scale)


def _is_columns(x) -> bool:
    return isinstance(x, tuple) and len(x) in (2, 3) and all(
        isinstance(c, (list, tuple, np.ndarray)) for c in x)


def _columns(x) -> Sequence[Sequence[str]]:
    """x as its text columns: (texts,), (texts_a, texts_b) or (anchors, positives,
    negatives), each a list of str; one line otherwise."""
    if isinstance(x, (str, bytes)):
        raise UserValueError("x is one text: give a list of texts")
    if isinstance(x, tf.data.Dataset):
        raise UserValueError("sentence-embedding takes texts in memory (lists)")
    columns = list(x) if _is_columns(x) else [x]
    if not isinstance(columns[0], (list, tuple, np.ndarray)):
        raise UserValueError("sentence-embedding: x is a list of texts, a pair (texts_a, "
                             "texts_b) or a triplet (anchors, positives, negatives)")
    out = []
    for position, column in enumerate(columns):
        texts = [t.decode("utf-8") if isinstance(t, bytes) else t for t in column]
        bad = next((t for t in texts if not isinstance(t, str)), None)
        if bad is not None:
            raise UserValueError(f"text column {position}: texts are strings, got {bad!r:.40}")
        out.append(texts)
    if len({len(c) for c in out}) > 1:
        raise UserValueError(f"text columns of different lengths {[len(c) for c in out]}")
    return out
