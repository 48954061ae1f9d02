"""`AlbertMaskedLM`: texts with `[MASK]` -> the masked-LM head's predictions (fill-mask),
and continued pretraining on your documents.

    masked_lm = albert_tf.from_pretrained("albert_base_v2", "fill-mask")
    masked_lm.fill_mask(["The capital of France is [MASK]."], top_k=3)
        -> [[[("paris", 0.41), ("lyon", 0.05), ...]]]     one list per [MASK]
    masked_lm.predict(["The [MASK] sat on the [MASK]."])  # logits float32 [1, 2, V]
    masked_lm.compile()
    masked_lm.fit(documents, epochs=3, batch_size=16)     # masked LM + sentence order

`fit` takes documents: each a text with one sentence a line (the original's input format)
or a list of sentences. Epoch k trains on instances made as data_prep's duplicate pass k
makes them (`instances.passes`: the original's sentence pairs, swapped for the
sentence-order target, and whole-word n-gram masking), so every epoch sees new masks and
pairs (dynamic masking), and epoch k's instances equal those of create_pretraining_data.py
pass k on the same documents and seed. The loss is the original's: masked-LM
cross-entropy over the masked tokens plus the sentence-order cross-entropy. The instances
of a fit are built in memory before it starts: for a corpus, use data_prep and
run_pretraining.py.

The network is `AlbertPretrainer` (the encoder, the masked-LM head tied to the word
embeddings, and the sentence-order head), so its weights are the official checkpoints'
and a pretraining run's. A text is encoded as `checkpoints.official.encode_with_masks`
encodes it for `python -m albert_tf.fill_mask` (each literal `[MASK]` one mask token).
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from albert_tf.errors import UserValueError
from albert_tf.keras_tasks.inputs import DEFAULT_BATCH_SIZE
from albert_tf.keras_tasks.task import Task
from albert_tf.instances import passes
from albert_tf.instances.masking import MaskingOptions
from albert_tf.instances.seeds import derive_seed
from albert_tf.modeling.models import AlbertPretrainer, pretraining_losses

LABELS = ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMaskedLM(Task):
    """An `AlbertPretrainer` network on texts with `[MASK]`, and on documents to pretrain
    on (see the module docstring).

    Args (the original create_pretraining_data.py flags of the same names, for fit):
      masked_lm_prob, max_predictions_per_seq, ngram, do_whole_word_mask: the masking;
      short_seq_prob: the share of instances with a shorter target length;
      random_seed: seeds every pass's draws.
    Calling it on token features with `masked_lm_positions` int32 [B, P] returns
    {"mlm_logits": float32 [B, P, V], "sop_logits": float32 [B, 2]}.
    """

    task_name = "fill-mask"
    inputs_in_python = True  # a tf.data.Dataset is read into memory (dataset_rows)

    def __init__(self, network: AlbertPretrainer, preprocessor=None,
                 masked_lm_prob: float = 0.15, max_predictions_per_seq: int = 20,
                 ngram: int = 3, do_whole_word_mask: bool = True, short_seq_prob: float = 0.1,
                 random_seed: int = 12345, **kwargs):
        super().__init__(network, preprocessor, **kwargs)
        self.masking = MaskingOptions(float(masked_lm_prob), int(max_predictions_per_seq),
                                      int(ngram), True, bool(do_whole_word_mask))
        if not 0.0 < self.masking.masked_lm_prob <= 1.0 or self.masking.ngram < 1 or \
                self.masking.max_predictions_per_seq < 1:
            raise UserValueError("masked_lm_prob must be in (0, 1], ngram and "
                                 "max_predictions_per_seq at least 1")
        if not 0.0 <= float(short_seq_prob) <= 1.0:
            raise UserValueError(f"short_seq_prob must be in [0, 1], got {short_seq_prob}")
        self.short_seq_prob = float(short_seq_prob)
        self.random_seed = int(random_seed)

    def create_state(self) -> None:
        self.masked_lm_accuracy = keras.metrics.Mean(name="masked_lm_accuracy")
        self.sentence_order_accuracy = keras.metrics.Mean(name="sentence_order_accuracy")

    def call(self, features, training=False):
        outputs = self.network(features, training=training)
        return {name: tf.cast(outputs[name], tf.float32)
                for name in ("mlm_logits", "sop_logits")}

    # --- loss and metrics --------------------------------------------------------------------

    def default_loss(self):
        return None  # `task_loss`: the labels are a dict of the masked targets and the order

    def task_loss(self, y, y_pred):
        return pretraining_losses(y_pred, y)["loss"]

    def default_metrics(self):
        return None  # the task's own two (`compute_metrics`): no compiled ones

    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """Task.compile; with the task's loss (loss="auto") the metrics are the original's,
        masked_lm_accuracy and sentence_order_accuracy (Keras' compiled metrics do not
        read the masked targets)."""
        if loss == "auto" and metrics not in ("auto", None):
            raise UserValueError("fill-mask: with the task's loss the metrics are "
                                 "masked_lm_accuracy and sentence_order_accuracy; give "
                                 "metrics with your own loss")
        super().compile(optimizer, loss, metrics, **kwargs)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        if self._task_loss_in_use and y is not None:
            figures = pretraining_losses(y_pred, y)
            self.masked_lm_accuracy.update_state(figures["masked_lm_accuracy"],
                                                 sample_weight=figures["masked_lm_weight"])
            self.sentence_order_accuracy.update_state(figures["sentence_order_accuracy"])
        return super().compute_metrics(x, y, y_pred, sample_weight)

    # --- documents -> instances ----------------------------------------------------------------

    def instances(self, documents, pass_index: int = 0) -> Dict[str, np.ndarray]:
        """Pass `pass_index` of pretraining instances over `documents` (see the module
        docstring): token features and masked_lm_positions [N, S] / [N, P], and the labels
        masked_lm_ids, masked_lm_weights [N, P], next_sentence_labels [N]."""
        views, indices = self._document_views(documents)
        return self._pass(views, indices, pass_index)

    def _pass(self, views, indices, pass_index: int) -> Dict[str, np.ndarray]:
        tokenizer = self.python_tokenizer
        special = passes.SpecialIds(tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id,
                                    tokenizer.vocab_size)
        return passes.pass_features(views, indices, special,
                                    self.preprocessor.sequence_length, self.short_seq_prob,
                                    self.masking, self.random_seed, pass_index)

    def _document_views(self, documents):
        """(DocViews of the documents with tokens, their ordinals among `documents`)."""
        tokenizer = self.python_tokenizer
        if self.preprocessor.sequence_length < 5:
            raise UserValueError("pretraining instances need sequence_length >= 5 ([CLS] A "
                                 "[SEP] B [SEP])")
        is_start = tokenizer.is_start_piece_table() if self.masking.do_whole_word_mask \
            else [True] * tokenizer.vocab_size
        sentencepiece = tokenizer.kind == "sentencepiece"
        views, indices = [], []
        for index, sentences in enumerate(_documents(documents)):
            # As data_prep reads a file: SentencePiece input normalised first.
            texts = [tokenizer.preprocess(s) if sentencepiece else s for s in sentences]
            view = passes.document_view(tokenizer.encode_ids(texts) if texts else [],
                                        is_start)
            if view.ids:
                views.append(view)
                indices.append(index)
        if not views:
            raise UserValueError("the documents hold no token: give texts with one sentence "
                                 "a line, or lists of sentences")
        return views, indices

    # --- fit / evaluate ----------------------------------------------------------------------

    def fit(self, x=None, y=None, batch_size=None, epochs=1, validation_data=None,
            shuffle=True, initial_epoch=0, **kwargs):
        """Continued pretraining on documents `x` (see the module docstring): epoch k on
        pass k, each pass's instances in a seeded random order (`shuffle`). Every epoch
        takes the steps of the longest pass (passes differ by a few instances: the
        shorter target lengths are drawn per pass); a shorter pass repeats its first
        instances to fill them."""
        x, y = self.in_memory(x, y)
        if y is not None:
            raise UserValueError("fill-mask: fit takes documents alone (the targets are the "
                                 "masked tokens and the sentence order)")
        if kwargs.get("steps_per_epoch") is not None:
            raise UserValueError("fill-mask: an epoch is one pass over the documents; "
                                 "steps_per_epoch is not taken")
        kwargs.pop("steps_per_epoch", None)
        batch = int(batch_size or DEFAULT_BATCH_SIZE)
        if int(epochs) <= int(initial_epoch):
            raise UserValueError(f"epochs={epochs} leaves nothing to run after "
                                 f"initial_epoch={initial_epoch}")
        views, indices = self._document_views(x)
        built = [self._pass(views, indices, k) for k in range(int(initial_epoch), int(epochs))]
        steps = max([math.ceil(len(p["input_ids"]) / batch) for p in built] or [1])
        if self._pending_optimizer is not None:
            self._compile_pending(max(steps * len(built), 1))
        if validation_data is not None:
            validation_data = self.dataset(self.in_memory(validation_data)[0], None, batch)
        return keras.Model.fit(self, _pass_batches(built, batch, steps, bool(shuffle),
                                                   self.random_seed, int(initial_epoch)),
                               epochs=epochs, initial_epoch=initial_epoch,
                               steps_per_epoch=steps, validation_data=validation_data,
                               shuffle=False, **kwargs)

    def dataset(self, x, y=None, batch_size=None, needs_labels=False, shuffle=False):
        """evaluate's data: pass 0 of documents x (the same instances each time)."""
        if y is not None:
            raise UserValueError("fill-mask: evaluate takes documents alone")
        arrays = self.instances(x, 0)
        return tf.data.Dataset.from_tensor_slices(_split(arrays)).batch(
            batch_size or DEFAULT_BATCH_SIZE)

    def get_config(self):
        config = super().get_config()
        masking = self.masking
        config.update(masked_lm_prob=masking.masked_lm_prob,
                      max_predictions_per_seq=masking.max_predictions_per_seq,
                      ngram=masking.ngram, do_whole_word_mask=masking.do_whole_word_mask,
                      short_seq_prob=self.short_seq_prob, random_seed=self.random_seed)
        return config

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
        arrays = self.masked_features(self.in_memory(x)[0])
        counts = arrays.pop("num_masks")
        if not len(counts) or not arrays["masked_lm_positions"].shape[1]:
            return np.zeros((len(counts), 0, self.config.vocab_size), np.float32), counts
        dataset = tf.data.Dataset.from_tensor_slices(arrays).batch(
            batch_size or DEFAULT_BATCH_SIZE)
        logits = keras.Model.predict(self, dataset, **kwargs)["mlm_logits"]
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


def _pass_batches(built: List[Dict[str, np.ndarray]], batch: int, steps: int, shuffle: bool,
                  seed: int, first_pass: int) -> tf.data.Dataset:
    """`steps` batches of each pass in turn (pass `first_pass` first): one stream over the
    epochs, as Keras reads a dataset when steps_per_epoch is given."""
    def batches():
        for k, arrays in enumerate(built):
            order = np.arange(len(arrays["input_ids"]))
            if shuffle:
                np.random.default_rng(
                    derive_seed(seed, "fit order", first_pass + k)).shuffle(order)
            rows = np.resize(order, steps * batch)  # the longest pass's steps, all full
            for lo in range(0, len(rows), batch):
                yield _split({name: value[rows[lo:lo + batch]]
                              for name, value in arrays.items()})

    signature = tuple({name: tf.TensorSpec((None,) + value.shape[1:], value.dtype)
                       for name, value in part.items()} for part in _split(built[0]))
    return tf.data.Dataset.from_generator(batches, output_signature=signature)


def _split(arrays: Dict[str, np.ndarray]) -> Tuple[Dict, Dict]:
    """(the model's inputs, the labels) of instance arrays."""
    return ({name: value for name, value in arrays.items() if name not in LABELS},
            {name: arrays[name] for name in LABELS})


def _documents(x) -> List[List[str]]:
    """Documents as lists of sentences: a text is one sentence a line (blank lines
    ignored), as the original's input files hold them."""
    if isinstance(x, (str, bytes)):
        raise UserValueError("x is one text: give a list of documents (each a text with one "
                             "sentence a line, or a list of sentences)")
    if isinstance(x, tf.data.Dataset) or not isinstance(x, (list, tuple)):
        raise UserValueError(f"fill-mask: fit takes a list of documents, got {type(x).__name__}")
    out = []
    for index, document in enumerate(x):
        if isinstance(document, bytes):
            document = document.decode("utf-8")
        if isinstance(document, str):
            document = document.split("\n")
        if not isinstance(document, (list, tuple)) or not all(
                isinstance(s, str) for s in document):
            raise UserValueError(f"document {index}: a text or a list of sentences, got "
                                 f"{document!r:.60}")
        out.append([s.strip() for s in document if s.strip()])
    return out


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
