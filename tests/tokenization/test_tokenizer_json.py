"""A Hugging Face directory with only tokenizer.json (what transformers 5 saves) reads as
the original's vocabulary: the SentencePiece model rebuilt piece for piece (types, scores,
normalization table) and vocab.txt token for token. The tokenizer.json files here are
written in the layout transformers 5 writes (observed on files it saved); the oracle test
reads files transformers 5 wrote itself (test_sentence_transformers_oracle, st6)."""
import base64
import json
import os

import numpy as np
import pytest
from sentencepiece import sentencepiece_model_pb2

from albert_tf import pipeline
from albert_tf.errors import UserError
from albert_tf.tokenization import tokenizer_json
from tests.helpers import hf_models

TEXTS = ['the U.S.A. (1999) cost £5 or 3.5 € "quoted", said Jean-Luc.', "Café Müller ﬁ ＡＢＣ",
         "  tabs\tand\nnewlines  "]


def unigram_tokenizer_json(spm_file: str) -> dict:
    """tokenizer.json as transformers 5 writes an ALBERT tokenizer."""
    proto = sentencepiece_model_pb2.ModelProto()
    with open(spm_file, "rb") as handle:
        proto.ParseFromString(handle.read())
    special = [i for i, p in enumerate(proto.pieces) if p.type in (2, 3)]
    charsmap = base64.b64encode(proto.normalizer_spec.precompiled_charsmap).decode()
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": proto.pieces[i].piece, "special": True,
                          "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False} for i in special],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Replace", "pattern": {"String": "``"}, "content": '"'},
            {"type": "Replace", "pattern": {"String": "''"}, "content": '"'},
            {"type": "NFKD"}, {"type": "StripAccents"}, {"type": "Lowercase"},
            {"type": "Precompiled", "precompiled_charsmap": charsmap}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"},
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
             "split": True}]},
        "post_processor": None, "decoder": None,
        "model": {"type": "Unigram", "unk_id": proto.trainer_spec.unk_id,
                  "vocab": [[p.piece, p.score] for p in proto.pieces], "byte_fallback": False},
    }


def test_the_sentencepiece_model_is_rebuilt_piece_for_piece(official_spm, tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(unigram_tokenizer_json(official_spm)))
    kind, content = tokenizer_json.vocabulary_from_tokenizer_json(str(path))
    assert kind == "sentencepiece"
    original, rebuilt = (sentencepiece_model_pb2.ModelProto() for _ in range(2))
    with open(official_spm, "rb") as handle:
        original.ParseFromString(handle.read())
    rebuilt.ParseFromString(content)
    assert [(p.piece, p.score, p.type) for p in rebuilt.pieces] == \
        [(p.piece, p.score, p.type) for p in original.pieces]
    assert rebuilt.normalizer_spec == original.normalizer_spec
    for field in ("model_type", "unk_id", "bos_id", "eos_id", "pad_id"):
        assert getattr(rebuilt.trainer_spec, field) == getattr(original.trainer_spec, field)


def test_a_directory_with_only_tokenizer_json_answers_as_with_spiece_model(official_spm,
                                                                         tmp_path):
    original = hf_models.write_hf_dir(str(tmp_path / "original"), "encoder", official_spm,
                                      seed=3)
    bare = hf_models.write_hf_dir(str(tmp_path / "bare"), "encoder", official_spm, seed=3)
    os.remove(os.path.join(bare, "spiece.model"))
    with open(os.path.join(bare, "tokenizer.json"), "w") as handle:
        json.dump(unigram_tokenizer_json(official_spm), handle)
    want = pipeline("sentence-embedding", model=original)(TEXTS)
    got = pipeline("sentence-embedding", model=bare)(TEXTS)
    np.testing.assert_array_equal(got, want)


def test_a_wordpiece_tokenizer_json_is_vocab_txt(chinese_vocab_file, tmp_path):
    with open(chinese_vocab_file, encoding="utf-8") as handle:
        tokens = handle.read().split("\n")[:-1]
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"model": {"type": "WordPiece", "unk_token": "[UNK]",
                                          "vocab": {t: i for i, t in enumerate(tokens)}}}))
    kind, content = tokenizer_json.vocabulary_from_tokenizer_json(str(path))
    assert kind == "wordpiece"
    assert content.decode("utf-8").split("\n")[:-1] == tokens


@pytest.mark.parametrize("text, message", [
    ("{", "tokenizer.json: not a tokenizers tokenizer.json"),
    ('{"model": {"type": "BPE"}}', "tokenizer.json: a BPE tokenizer; ALBERT's are Unigram"),
    ('{"model": {"type": "Unigram", "vocab": []}}', "without a vocabulary or unk_id"),
    ('{"model": {"type": "WordPiece", "vocab": {"a": 0, "b": 2}}}', "ids are not 0..1"),
])
def test_other_files_are_refused_in_one_line(tmp_path, text, message):
    path = tmp_path / "tokenizer.json"
    path.write_text(text)
    with pytest.raises(UserError, match=message):
        tokenizer_json.vocabulary_from_tokenizer_json(str(path))
