"""sentence-transformers directories of an ALBERT model: read and written.

A sentence-transformers model directory (sentence-transformers 5.x layout) holds:

  modules.json                the modules in order: a Transformer (the Hugging Face model
                              directory, "" = this one), a Pooling, optionally a Normalize
  sentence_bert_config.json   {"max_seq_length": tokens per text, "do_lower_case": lower-case
                              the text first, "tokenizer_args": for AutoTokenizer}
  config.json, model.safetensors, spiece.model | vocab.txt, tokenizer_config.json
                              the Hugging Face AlbertModel (`checkpoints.hf`)
  1_Pooling/config.json       which of the token vectors make the sentence vector:
                              pooling_mode_cls_token / _max_tokens / _mean_tokens /
                              _mean_sqrt_len_tokens (several: concatenated in that order)
  2_Normalize/                present: the sentence vector is scaled to length 1

`read_sentence_transformers_dir` returns what a pipeline needs (`SentenceEncoderSpec`);
`save_sentence_transformers_dir` writes an AlbertEncoder (the weights of any albert-tf
model's `encoder`) with its pooling so that `sentence_transformers.SentenceTransformer(dir)`
loads it. Pure Python but for the weights (written through `checkpoints.hf`).
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import List, Optional, Sequence, Tuple

from albert_tf import fileio
from albert_tf.errors import UserFileNotFoundError, UserValueError

MODULES_FILE = "modules.json"
CONFIG_FILE = "sentence_bert_config.json"
TRANSFORMER = "sentence_transformers.models.Transformer"
POOLING = "sentence_transformers.models.Pooling"
NORMALIZE = "sentence_transformers.models.Normalize"
# Pooling modes in the order sentence-transformers concatenates them, and their config keys.
POOLING_MODES: Tuple[Tuple[str, str], ...] = (
    ("cls", "pooling_mode_cls_token"), ("max", "pooling_mode_max_tokens"),
    ("mean", "pooling_mode_mean_tokens"), ("mean_sqrt_len", "pooling_mode_mean_sqrt_len_tokens"))
UNSUPPORTED_MODES = ("pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")


@dataclasses.dataclass(frozen=True)
class SentenceEncoderSpec:
    """What turns a text into its vector: the Hugging Face model directory, the pooling
    modes (in concatenation order), normalization, the tokens a text keeps, and whether
    sentence-transformers lower-cases a text before its tokenizer sees it."""

    transformer_path: str
    pooling: Tuple[str, ...] = ("mean",)
    normalize: bool = False
    max_seq_length: Optional[int] = None
    lowercase: bool = False


def is_sentence_transformers_dir(path: str) -> bool:
    return os.path.isdir(path) and os.path.exists(os.path.join(path, MODULES_FILE))


def read_sentence_transformers_dir(path: str) -> SentenceEncoderSpec:
    """The spec of a sentence-transformers directory; one line naming the file for a module
    list this library cannot run (another module type, a pooling mode it lacks)."""
    where = os.path.join(path, MODULES_FILE)
    modules = fileio.read_json(where)
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise UserValueError(f"{where}: expected a list of module objects")
    types = [m.get("type") for m in modules]
    if not types or types[0] != TRANSFORMER or types[1:2] != [POOLING] or \
            any(t != NORMALIZE for t in types[2:]) or len(types) > 3:
        raise UserValueError(f"{where}: modules {types}: this library runs Transformer, "
                             "Pooling and an optional Normalize, in that order")
    transformer = os.path.join(path, modules[0].get("path") or "")
    settings_file = os.path.join(transformer, CONFIG_FILE)
    settings = fileio.read_json(settings_file) if os.path.exists(settings_file) else {}
    pooling_file = os.path.join(path, modules[1].get("path") or "", "config.json")
    if not os.path.exists(pooling_file):
        raise UserFileNotFoundError(f"{pooling_file}: the Pooling module's config is missing")
    pooling = fileio.read_json(pooling_file)
    used = [key for key in UNSUPPORTED_MODES if pooling.get(key)]
    if used:
        raise UserValueError(f"{pooling_file}: {used[0]} is not supported (cls, max, mean and "
                             "mean_sqrt_len are)")
    modes = tuple(mode for mode, key in POOLING_MODES if pooling.get(key))
    if not modes:
        raise UserValueError(f"{pooling_file}: no pooling mode is on")
    length = settings.get("max_seq_length")
    return SentenceEncoderSpec(transformer, modes, len(types) == 3,
                               int(length) if length else None,
                               bool(settings.get("do_lower_case", False)))


def save_sentence_transformers_dir(encoder, directory: str, pooling: Sequence[str] = ("mean",),
                                   normalize: bool = False, max_seq_length: int = 128,
                                   spm_model_file: Optional[str] = None,
                                   vocab_file: Optional[str] = None,
                                   do_lower_case: bool = True) -> List[str]:
    """Writes `encoder` (an AlbertEncoder) as a sentence-transformers directory with the
    given pooling modes (of cls, max, mean, mean_sqrt_len; concatenated in that order) and
    normalization; returns the files written, relative to `directory`."""
    from albert_tf.checkpoints import hf

    keys = dict(POOLING_MODES)
    unknown = [mode for mode in pooling if mode not in keys]
    if unknown or not pooling:
        raise UserValueError(f"pooling {list(pooling)}: modes of {', '.join(keys)}")
    os.makedirs(directory, exist_ok=True)
    hf.save_hf_checkpoint(encoder, directory, spm_model_file=spm_model_file,
                          vocab_file=vocab_file, do_lower_case=do_lower_case)
    modules = [{"idx": 0, "name": "0", "path": "", "type": TRANSFORMER},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": POOLING}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": NORMALIZE})
        os.makedirs(os.path.join(directory, "2_Normalize"), exist_ok=True)
    config = {key: False for _, key in POOLING_MODES + tuple((k, k) for k in UNSUPPORTED_MODES)}
    config.update({keys[mode]: True for mode in pooling})
    config.update(word_embedding_dimension=int(encoder.config.hidden_size), include_prompt=True)
    settings = {"max_seq_length": int(max_seq_length), "do_lower_case": False}
    if spm_model_file:
        # transformers' fast ALBERT tokenizer splits words at the model's user-defined
        # pieces ("jean-luc"); the slow one gives the original SentencePiece ids, which
        # the model was trained on.
        settings["tokenizer_args"] = {"use_fast": False}
    files = {MODULES_FILE: modules, CONFIG_FILE: settings,
             os.path.join("1_Pooling", "config.json"): config}
    os.makedirs(os.path.join(directory, "1_Pooling"), exist_ok=True)
    for name, value in files.items():
        fileio.atomic_write_text(os.path.join(directory, name),
                                 json.dumps(value, indent=2) + "\n")
    return sorted(files) + ["config.json", "model.safetensors"]
