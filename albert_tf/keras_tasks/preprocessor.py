"""`AlbertPreprocessor`: a Keras layer from raw text to ALBERT's token features.

    preprocessor = AlbertPreprocessor("30k-clean.model", sequence_length=128)
    preprocessor(["The cat sat.", "Hello"])                      # single texts
    preprocessor((["A man eats."], ["Someone eats."]))          # pairs: (texts_a, texts_b)
    preprocessor({"text": [...], "text_pair": [...]})            # the same, by name
    -> {"input_ids", "input_mask", "segment_ids"}: int32 [B, sequence_length]

The ids are the original's: `preprocess_text` (whitespace, NFKD, accents, lower-casing
when `do_lower_case`) and SentencePiece with the digit-comma split, or BERT's
BasicTokenizer + WordPiece for a vocabulary file (the Chinese models), all in the graph
(`tokenization.in_graph_tokenizer`); packing is `[CLS] A [SEP] (B [SEP])` with the
original's pair truncation (`export.pack_pair`), exactly as run_classifier.py's features.
It runs inside `tf.data` (the tasks' `fit` / `predict` map it there) and inside a
SavedModel. Saved with the model (`.keras`): the vocabulary file is one of its assets.
"""
from __future__ import annotations

import os
import tempfile
from typing import Dict, Optional

import keras
import tensorflow as tf

from albert_tf import export
from albert_tf.errors import UserFileNotFoundError, UserValueError
from albert_tf.tokenization import in_graph_tokenizer, is_sentencepiece_model

SENTENCEPIECE_ASSET = "spiece.model"
WORDPIECE_ASSET = "vocab.txt"
# Names a pair's texts may have in a dict input (Hugging Face's, then GLUE's).
PAIR_KEYS = (("text", "text_pair"), ("text_a", "text_b"))


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertPreprocessor(keras.layers.Layer):
    """Raw text -> ALBERT token features (see the module docstring).

    Args:
      vocabulary_file: a SentencePiece model (the English models' 30k-clean.model) or a
        WordPiece vocabulary (vocab.txt, one token a line).
      do_lower_case: the original's flag: lower-case (and strip accents) before the
        vocabulary; True for every released ALBERT.
      sequence_length: S, the packed length ([CLS] and [SEP] included), >= 3.
    Attributes: `vocab_size` and the special ids `cls_id`, `sep_id`, `pad_id`, `mask_id`,
    `unk_id`; `tokenizer_kind` "sentencepiece" or "wordpiece".
    """

    def __init__(self, vocabulary_file: Optional[str] = None, do_lower_case: bool = True,
                 sequence_length: int = 512, tokenizer_kind: Optional[str] = None, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        # Strings in, no autocast: what keras-hub's preprocessing layers set too.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True
        if int(sequence_length) < 3:
            raise UserValueError(f"sequence_length must be at least 3 ([CLS] x [SEP]), got "
                                 f"{sequence_length}")
        self.sequence_length = int(sequence_length)
        self.do_lower_case = bool(do_lower_case)
        self.tokenizer_kind = tokenizer_kind
        self._vocabulary = None  # the file's bytes: what a .keras file stores
        self.tokenizer = None
        if vocabulary_file is not None:
            self.set_vocabulary_file(vocabulary_file)

    def set_vocabulary_file(self, path: str) -> None:
        """Reads the vocabulary at `path` (SentencePiece model or WordPiece vocab.txt)."""
        if not os.path.isfile(path):
            raise UserFileNotFoundError(f"vocabulary_file={path}: no such file")
        kind = "sentencepiece" if is_sentencepiece_model(path) else "wordpiece"
        if self.tokenizer_kind not in (None, kind):
            raise UserValueError(f"vocabulary_file={path} is a {kind} vocabulary; this "
                                 f"preprocessor was saved with a {self.tokenizer_kind} one")
        self.tokenizer_kind = kind
        with open(path, "rb") as handle:
            self._vocabulary = handle.read()
        if kind == "sentencepiece":
            self.tokenizer = in_graph_tokenizer(spm_model_file=path,
                                                do_lower_case=self.do_lower_case)
        else:
            self.tokenizer = in_graph_tokenizer(vocab_file=path,
                                                do_lower_case=self.do_lower_case)

    def write_vocabulary(self, directory: str) -> str:
        """Writes the vocabulary file into `directory` (spiece.model or vocab.txt, the
        Hugging Face names); returns its path. The preprocessor holds the file's bytes, so
        this works after the file it was read from is gone (a loaded .keras file's)."""
        self._require_vocabulary()
        name = SENTENCEPIECE_ASSET if self.tokenizer_kind == "sentencepiece" else WORDPIECE_ASSET
        path = os.path.join(directory, name)
        with open(path, "wb") as handle:
            handle.write(self._vocabulary)
        return path

    def with_sequence_length(self, sequence_length: int) -> "AlbertPreprocessor":
        """A new preprocessor with this one's vocabulary and casing, packing to
        `sequence_length`."""
        self._require_vocabulary()
        with tempfile.TemporaryDirectory() as directory:
            return AlbertPreprocessor(self.write_vocabulary(directory), self.do_lower_case,
                                      sequence_length)

    # --- the tokenizer's ids --------------------------------------------------------------

    def _ids(self, name: str) -> int:
        self._require_vocabulary()
        return int(getattr(self.tokenizer, name))

    vocab_size = property(lambda self: self._ids("vocab_size"))
    cls_id = property(lambda self: self._ids("cls_id"))
    sep_id = property(lambda self: self._ids("sep_id"))
    mask_id = property(lambda self: self._ids("mask_id"))
    unk_id = property(lambda self: self._ids("unk_id"))
    # -1 (no <pad> piece) pads with 0, as run_classifier.py's features do.
    pad_id = property(lambda self: max(self._ids("pad_id"), 0))

    def _require_vocabulary(self) -> None:
        if self.tokenizer is None:
            raise UserValueError("AlbertPreprocessor has no vocabulary: give vocabulary_file")

    # --- calling ----------------------------------------------------------------------------

    def call(self, inputs) -> Dict[str, tf.Tensor]:
        """Texts [B] (or a pair of [B], or a dict; see the module docstring) -> features."""
        self._require_vocabulary()
        text_a, text_b = split_texts(inputs)
        ids_b = None if text_b is None else self.tokenizer(text_b)
        return export.pack_pair(self.tokenizer(text_a), ids_b, self.sequence_length,
                                self.cls_id, self.sep_id, self.pad_id)

    def compute_output_spec(self, inputs):
        shape = (None, self.sequence_length)
        return {name: keras.KerasTensor(shape, "int32") for name in export.TOKEN_FEATURES}

    # --- saving -----------------------------------------------------------------------------

    def save_assets(self, dir_path: str) -> None:
        self.write_vocabulary(dir_path)

    def load_assets(self, dir_path: str) -> None:
        name = SENTENCEPIECE_ASSET if self.tokenizer_kind == "sentencepiece" else WORDPIECE_ASSET
        self.set_vocabulary_file(os.path.join(dir_path, name))

    def get_config(self):
        config = super().get_config()
        config.update(do_lower_case=self.do_lower_case, sequence_length=self.sequence_length,
                      tokenizer_kind=self.tokenizer_kind)
        return config


def split_texts(inputs):
    """(texts_a, texts_b or None) as tf.string tensors of one shape, from a tensor or list
    of texts, a (texts_a, texts_b) pair or a dict with "text" / "text_pair" (or "text_a" /
    "text_b")."""
    if isinstance(inputs, dict):
        for first, second in PAIR_KEYS:
            if first in inputs:
                pair = inputs.get(second)
                return _strings(inputs[first]), None if pair is None else _strings(pair)
        raise UserValueError(f"a dict of texts has the keys 'text' (and 'text_pair') or "
                             f"'text_a' (and 'text_b'); got {sorted(inputs)}")
    if isinstance(inputs, (tuple, list)) and len(inputs) == 2 and not isinstance(
            inputs[0], (str, bytes)):
        return _strings(inputs[0]), _strings(inputs[1])
    return _strings(inputs), None


def _strings(texts) -> tf.Tensor:
    texts = tf.convert_to_tensor(texts)
    if texts.dtype != tf.string:
        raise UserValueError(f"texts must be strings, got {texts.dtype.name} values")
    return texts
