"""The SentencePiece tokenizer (the English checkpoints), in Python.

  * `SentencePieceTokenizer`: a `FullTokenizer`-like tokenizer (`tokenize`,
    `convert_tokens_to_ids`, `convert_ids_to_tokens`) plus a fast batch path
    `encode_ids` that gives the same ids as `convert_tokens_to_ids(tokenize(text))`
    for every input;
  * `is_start_piece_sp`: the original's whole-word rule for pieces;
  * `digit_comma_expansions`: the digit-comma post-processing as an id -> ids
    table (what the in-graph tokenizer applies with a gather).

Facts from the original (google-research/albert tokenization.py, last version):
  * `encode_pieces` post-processes pieces that end in a digit followed by a
    comma (e.g. "▁1999,"): the piece without the comma is re-encoded without
    its leading "▁" (kept only if the original piece had it) and "," is
    appended as its own piece.
  * Ids come from `PieceToId(piece)`; the "vocabulary" is every piece of the
    model, so a random replacement token is uniform over [0, vocab_size).
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence

from albert_tf.tokenization.base import (CLS_PIECE, MASK_PIECE, PAD_PIECE, SEP_PIECE,
                                         SPIECE_UNDERLINE, UNK_PIECE, Tokenizer,
                                         preprocess_text)


def _needs_digit_comma_split(piece: str) -> bool:
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


class SentencePieceTokenizer(Tokenizer):
    """ALBERT's SentencePiece tokenizer: pieces, ids and the special-piece ids.

    Attributes (ids are ints, -1 when the model lacks the piece):
      vocab_size, pad_id, unk_id, cls_id, sep_id, mask_id.
    `tokenize` does not normalise; call `preprocess` (or `preprocess_text`)
    first, as create_pretraining_data does.
    """

    kind = "sentencepiece"

    def __init__(self, spm_model_file: str, do_lower_case: bool = True):
        import sentencepiece as spm  # local import keeps `import albert_tf` light

        with open(spm_model_file, "rb") as handle:
            proto = handle.read()
        self.spm_model_file = self.vocab_file = spm_model_file
        self.do_lower_case = do_lower_case
        self.sp_model = spm.SentencePieceProcessor()
        self.sp_model.LoadFromSerializedProto(proto)
        self.vocab_size = self.sp_model.GetPieceSize()
        self.pad_id = self._special_id(PAD_PIECE)
        self.unk_id = self.sp_model.unk_id()
        self.cls_id = self._special_id(CLS_PIECE)
        self.sep_id = self._special_id(SEP_PIECE)
        self.mask_id = self._special_id(MASK_PIECE)
        self._digit_comma_ids = frozenset(
            i for i in range(self.vocab_size)
            if _needs_digit_comma_split(self.sp_model.IdToPiece(i)))
        self._vocab: Optional[Dict[str, int]] = None

    def _special_id(self, piece: str) -> int:
        pid = self.sp_model.PieceToId(piece)
        if pid == self.sp_model.unk_id() and piece != UNK_PIECE:
            return -1
        return pid

    @property
    def vocab(self) -> Dict[str, int]:
        """piece -> id for every piece of the model (the original's `FullTokenizer.vocab`)."""
        if self._vocab is None:
            self._vocab = {self.sp_model.IdToPiece(i): i for i in range(self.vocab_size)}
        return self._vocab

    def preprocess(self, text: str) -> str:
        """`preprocess_text(text, lower=do_lower_case)`."""
        return preprocess_text(text, lower=self.do_lower_case)

    def splits_digit_comma(self, token_id: int) -> bool:
        """Whether `tokenize` splits this piece ("▁1999," -> "▁1999" ",")."""
        return token_id in self._digit_comma_ids

    def digit_comma_pieces(self, piece: str) -> List[str]:
        """The pieces `tokenize` turns a digit-comma piece into."""
        return self._split_digit_comma(piece)

    def _split_digit_comma(self, piece: str) -> List[str]:
        sub = self.sp_model.EncodeAsPieces(piece[:-1].replace(SPIECE_UNDERLINE, ""))
        if piece[0] != SPIECE_UNDERLINE and sub and sub[0][0] == SPIECE_UNDERLINE:
            if len(sub[0]) == 1:
                sub = sub[1:]
            else:
                sub[0] = sub[0][1:]
        sub.append(piece[-1])
        return sub

    def tokenize(self, text: str) -> List[str]:
        """Pieces of `text`, with the original's digit-comma post-processing."""
        pieces = []
        for piece in self.sp_model.EncodeAsPieces(text):
            if _needs_digit_comma_split(piece):
                pieces.extend(self._split_digit_comma(piece))
            else:
                pieces.append(piece)
        return pieces

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> List[int]:
        return [self.sp_model.PieceToId(token) for token in tokens]

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> List[str]:
        return [self.sp_model.IdToPiece(int(i)) for i in ids]

    def encode_ids(self, texts: Sequence[str], num_threads: int = 1) -> List[List[int]]:
        """Ids of each text; equals `convert_tokens_to_ids(tokenize(t))` for every t.

        Uses SentencePiece's batch encoder (C++, `num_threads` threads) and only
        falls back to the piece path for texts containing a digit-comma piece.
        """
        if not texts:
            return []
        batch = self.sp_model.Encode(list(texts), out_type=int, num_threads=num_threads)
        special = self._digit_comma_ids
        for index, ids in enumerate(batch):
            if not special.isdisjoint(ids):
                batch[index] = self.convert_tokens_to_ids(self.tokenize(texts[index]))
        return batch

    def is_start_piece_table(self) -> List[bool]:
        """For each id, whether the original's SentencePiece rule makes it a word start."""
        return [is_start_piece_sp(self.sp_model.IdToPiece(i)) for i in range(self.vocab_size)]

    def token_text(self, token: str) -> str:
        return token.replace(SPIECE_UNDERLINE, " ").strip() or token


# The original's `_is_start_piece_sp` tests membership in a set of ASCII
# punctuation plus the *UTF-8 bytes* of "€" and "£"; in Python 3 a str piece is
# never equal to those bytes, so in effect only ASCII punctuation counts.
_SP_PUNCTUATION = frozenset('!"#$%&"()*+,-./:;?@[\\]^_`{|}~')
_SP_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz") | _SP_PUNCTUATION


def is_start_piece_sp(piece: str) -> bool:
    """The original's whole-word rule for SentencePiece pieces.

    A piece starts a new word if it starts with "▁" or "<", is a single ASCII
    punctuation piece, or contains any character that is not (after
    lower-casing) an ASCII letter or ASCII punctuation (digits and non-English
    characters make a piece its own word).
    """
    return (piece.startswith(SPIECE_UNDERLINE) or piece.startswith("<")
            or piece in _SP_PUNCTUATION
            or not all(ch.lower() in _SP_WORD_CHARS for ch in piece))


def digit_comma_expansions(tokenizer: SentencePieceTokenizer) -> List[List[int]]:
    """For every id, the ids `tokenize` turns that piece into ([id] for most pieces).

    The original splits pieces like "3," into re-encoded digits plus ","; the
    result depends only on the piece, which makes it a fixed table.
    """
    table = [[i] for i in range(tokenizer.vocab_size)]
    for i in sorted(tokenizer._digit_comma_ids):
        piece = tokenizer.sp_model.IdToPiece(i)
        table[i] = tokenizer.convert_tokens_to_ids(tokenizer._split_digit_comma(piece))
    return table

