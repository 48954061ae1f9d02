"""The original's vocabulary file, rebuilt from a Hugging Face `tokenizer.json`.

transformers 5 saves an ALBERT tokenizer as `tokenizer.json` alone (no spiece.model, no
vocab.txt), and so do the sentence-transformers 6.x directories over it. That file holds
everything the original's vocabulary holds:
  Unigram (the English models)  the pieces in id order with their scores, the unknown
                                piece, the special tokens, and SentencePiece's
                                normalization table (the "Precompiled" normalizer's
                                precompiled_charsmap)
  WordPiece (the Chinese ones)  the tokens with their ids
so the SentencePiece model or vocab.txt is rebuilt from it and read as the original reads
it, with SentencePiece's own Unigram segmentation. transformers' tokenizers-backed ALBERT
tokenizer is not used: it splits words at the model's user-defined pieces (" ( ) - .),
which the original does not.

Piece types of a rebuilt SentencePiece model, as Google's 30k-clean.model has them: the
unknown token UNKNOWN, the other special tokens CONTROL, the other pieces with score 0
USER_DEFINED (the original trains every normal piece to a negative log-probability),
the rest NORMAL.

    kind, content = vocabulary_from_tokenizer_json("hf_dir/tokenizer.json")
    # ("sentencepiece", ModelProto bytes) or ("wordpiece", vocab.txt bytes)
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
from typing import Dict, List, Tuple

from albert_tf import fileio
from albert_tf.errors import UserValueError

# sentencepiece_model.proto's ModelProto.SentencePiece.Type values.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED = 1, 2, 3, 4
UNIGRAM = 1  # TrainerSpec.ModelType


def vocabulary_file_from_tokenizer_json(path: str) -> Tuple[str, str]:
    """(kind, the path of the rebuilt vocabulary file): written once per content under the
    temporary directory (albert_tf_vocabulary/<sha256>.model or .txt), atomically, so that
    the tokenizers that take a file read it."""
    kind, content = vocabulary_from_tokenizer_json(path)
    directory = os.path.join(tempfile.gettempdir(), "albert_tf_vocabulary")
    os.makedirs(directory, exist_ok=True)
    name = hashlib.sha256(content).hexdigest()[:32]
    target = os.path.join(directory, name + (".model" if kind == "sentencepiece" else ".txt"))
    if not os.path.exists(target):
        with fileio.atomic_open(target, "wb") as handle:
            handle.write(content)
    return kind, target


def vocabulary_from_tokenizer_json(path: str) -> Tuple[str, bytes]:
    """("sentencepiece", a SentencePiece model's bytes) for a Unigram tokenizer.json, or
    ("wordpiece", vocab.txt's bytes) for a WordPiece one; one line naming the file for any
    other model type."""
    try:
        with open(path, encoding="utf-8") as handle:
            tokenizer = json.load(handle)
        model = tokenizer["model"]
        kind = model.get("type")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise UserValueError(f"{path}: not a tokenizers tokenizer.json ({error})") from None
    if kind == "Unigram":
        return "sentencepiece", _sentencepiece_model(tokenizer, path)
    if kind == "WordPiece":
        return "wordpiece", _wordpiece_vocabulary(model, path)
    raise UserValueError(f"{path}: a {kind} tokenizer; ALBERT's are Unigram (SentencePiece) "
                         "or WordPiece")


def _sentencepiece_model(tokenizer: Dict, path: str) -> bytes:
    from sentencepiece import sentencepiece_model_pb2

    model = tokenizer["model"]
    pieces: List = model.get("vocab") or []
    unk_id = model.get("unk_id")
    if not pieces or unk_id is None:
        raise UserValueError(f"{path}: a Unigram model without a vocabulary or unk_id")
    special = {token["id"] for token in tokenizer.get("added_tokens") or []
               if token.get("special")}
    proto = sentencepiece_model_pb2.ModelProto()
    for index, (piece, score) in enumerate(pieces):
        entry = proto.pieces.add()
        entry.piece, entry.score = piece, float(score)
        if index == unk_id:
            entry.type = UNKNOWN
        elif index in special:
            entry.type = CONTROL
        elif float(score) == 0.0:
            entry.type = USER_DEFINED
        else:
            entry.type = NORMAL
    ids = {piece: index for index, (piece, _) in enumerate(pieces)}
    trainer = proto.trainer_spec
    trainer.model_type = UNIGRAM
    trainer.vocab_size = len(pieces)
    trainer.unk_id, trainer.bos_id, trainer.eos_id = unk_id, -1, -1
    trainer.pad_id = ids.get("<pad>", -1)
    trainer.unk_piece = pieces[unk_id][0]
    normalizer = proto.normalizer_spec
    normalizer.name = "nmt_nfkc"
    normalizer.precompiled_charsmap = _precompiled_charsmap(tokenizer.get("normalizer"))
    normalizer.add_dummy_prefix = _prepends_space(tokenizer.get("pre_tokenizer"))
    normalizer.remove_extra_whitespaces = True
    normalizer.normalization_rule_tsv = ""
    return proto.SerializeToString()


def _precompiled_charsmap(normalizer) -> bytes:
    """The "Precompiled" normalizer's table (b"" without one: no normalization)."""
    for step in _steps(normalizer, "normalizers"):
        if step.get("type") == "Precompiled":
            return base64.b64decode(step.get("precompiled_charsmap") or "")
    return b""


def _prepends_space(pre_tokenizer) -> bool:
    """Whether the Metaspace step puts "▁" before the text (SentencePiece's dummy prefix)."""
    for step in _steps(pre_tokenizer, "pretokenizers"):
        if step.get("type") == "Metaspace":
            scheme = step.get("prepend_scheme")
            return scheme != "never" if scheme else bool(step.get("add_prefix_space", True))
    return True


def _steps(component, key: str) -> List[Dict]:
    if not component:
        return []
    return list(component.get(key) or []) if component.get("type") == "Sequence" \
        else [component]


def _wordpiece_vocabulary(model: Dict, path: str) -> bytes:
    vocab = model.get("vocab") or {}
    by_id = sorted(vocab.items(), key=lambda item: item[1])
    if [index for _, index in by_id] != list(range(len(by_id))):
        raise UserValueError(f"{path}: the WordPiece ids are not 0..{len(by_id) - 1}")
    return "".join(token + "\n" for token, _ in by_id).encode("utf-8")
