"""sentence-transformers directories of an ALBERT model: read and written.

A sentence-transformers model directory holds:

  modules.json                the modules in order: a Transformer (the Hugging Face model
                              directory, "" = this one), a Pooling, optionally a Normalize
  sentence_bert_config.json   the Transformer's settings
  config.json, model.safetensors, spiece.model | vocab.txt, tokenizer_config.json
                              the Hugging Face AlbertModel (`checkpoints.hf`)
  1_Pooling/config.json       which of the token vectors make the sentence vector
                              (several modes: concatenated)
  2_Normalize/                present: the sentence vector is scaled to length 1

Two generations of the layout are read and written (`GENERATIONS`):
  5  sentence-transformers <= 5.x: module types `sentence_transformers.models.<Name>`;
     sentence_bert_config.json {"max_seq_length", "do_lower_case", "tokenizer_args"}; the
     pooling as booleans pooling_mode_cls_token / _max_tokens / _mean_tokens /
     _mean_sqrt_len_tokens (concatenated in that order), word_embedding_dimension.
  6  sentence-transformers 6.x: module types under `sentence_transformers.base.modules`
     (Transformer, Normalize) and `sentence_transformers.sentence_transformer.modules`
     (Pooling); sentence_bert_config.json {"transformer_task", "modality_config",
     "module_output_name"}, the tokens a text keeps as the tokenizer's model_max_length
     (tokenizer_config.json, capped at max_position_embeddings); the pooling as
     "pooling_mode": a mode or a list (concatenated in the list's order),
     embedding_dimension.
sentence-transformers 6.x reads both; 5.x reads only its own, so 5 is what albert-tf writes
unless asked.

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
GENERATIONS = (5, 6)
# The module types of each generation (modules.json "type").
TRANSFORMER = {5: "sentence_transformers.models.Transformer",
               6: "sentence_transformers.base.modules.transformer.Transformer"}
POOLING = {5: "sentence_transformers.models.Pooling",
           6: "sentence_transformers.sentence_transformer.modules.pooling.Pooling"}
NORMALIZE = {5: "sentence_transformers.models.Normalize",
             6: "sentence_transformers.base.modules.normalize.Normalize"}
# 6.x's pooling_mode names of the modes this library runs (its own names are 5.x's keys').
MODE_NAMES_6 = {"cls": "cls", "max": "max", "mean": "mean",
                "mean_sqrt_len": "mean_sqrt_len_tokens"}
UNSUPPORTED_MODES_6 = ("weightedmean", "lasttoken")
# What 6.x writes for a text model's token vectors (its TRANSFORMER_TASK_DEFAULTS).
TRANSFORMER_SETTINGS_6 = {
    "transformer_task": "feature-extraction",
    "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
    "module_output_name": "token_embeddings"}
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
    """The spec of a sentence-transformers directory of either generation; one line naming
    the file for a module list this library cannot run (another module type, a pooling mode
    it lacks)."""
    where = os.path.join(path, MODULES_FILE)
    modules = fileio.read_json(where)
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise UserValueError(f"{where}: expected a list of module objects")
    types = [m.get("type") for m in modules]
    if not types or types[0] not in TRANSFORMER.values() or \
            types[1:2] not in ([name] for name in POOLING.values()) or \
            any(t not in NORMALIZE.values() for t in types[2:]) or len(types) > 3:
        raise UserValueError(f"{where}: modules {types}: this library runs Transformer, "
                             "Pooling and an optional Normalize, in that order "
                             "(sentence-transformers 5.x or 6.x module types)")
    transformer = os.path.join(path, modules[0].get("path") or "")
    settings_file = os.path.join(transformer, CONFIG_FILE)
    settings = fileio.read_json(settings_file) if os.path.exists(settings_file) else {}
    pooling_file = os.path.join(path, modules[1].get("path") or "", "config.json")
    if not os.path.exists(pooling_file):
        raise UserFileNotFoundError(f"{pooling_file}: the Pooling module's config is missing")
    modes = pooling_modes(fileio.read_json(pooling_file), pooling_file)
    # 5.x: max_seq_length; 6.x: the tokenizer's model_max_length (read with the Hugging Face
    # directory), unless the module's processor arguments set it.
    tokenizer_args = settings.get("processor_kwargs") or settings.get("tokenizer_args") or {}
    length = settings.get("max_seq_length") or tokenizer_args.get("model_max_length")
    return SentenceEncoderSpec(transformer, modes, len(types) == 3,
                               int(length) if length else None,
                               bool(settings.get("do_lower_case", False)))


def pooling_modes(pooling: dict, where: str) -> Tuple[str, ...]:
    """A Pooling config's modes, in concatenation order: 6.x's "pooling_mode" (a name or a
    list), else 5.x's pooling_mode_* booleans."""
    if "pooling_mode" in pooling:
        named = pooling["pooling_mode"]
        named = [named] if isinstance(named, str) else list(named or [])
        ours = {name: mode for mode, name in MODE_NAMES_6.items()}
        unknown = [name for name in named if name not in ours]
        if unknown:
            supported = ", ".join(MODE_NAMES_6.values())
            raise UserValueError(f"{where}: pooling mode {unknown[0]!r} is not supported "
                                 f"({supported} are)")
        modes = tuple(ours[name] for name in named)
    else:
        used = [key for key in UNSUPPORTED_MODES if pooling.get(key)]
        if used:
            raise UserValueError(f"{where}: {used[0]} is not supported (cls, max, mean and "
                                 "mean_sqrt_len are)")
        modes = tuple(mode for mode, key in POOLING_MODES if pooling.get(key))
    if not modes:
        raise UserValueError(f"{where}: no pooling mode is on")
    return modes


def save_sentence_transformers_dir(encoder, directory: str, pooling: Sequence[str] = ("mean",),
                                   normalize: bool = False, max_seq_length: int = 128,
                                   spm_model_file: Optional[str] = None,
                                   vocab_file: Optional[str] = None,
                                   do_lower_case: bool = True, generation: int = 5) -> List[str]:
    """Writes `encoder` (an AlbertEncoder) as a sentence-transformers directory with the
    given pooling modes (of cls, max, mean, mean_sqrt_len; 5.x concatenates them in that
    order, 6.x in the order given) and normalization, in the layout of sentence-transformers `generation` (5 or 6, see the
    module docstring); returns the files written, relative to `directory`."""
    from albert_tf.checkpoints import hf

    keys = dict(POOLING_MODES)
    unknown = [mode for mode in pooling if mode not in keys]
    if unknown or not pooling:
        raise UserValueError(f"pooling {list(pooling)}: modes of {', '.join(keys)}")
    if generation not in GENERATIONS:
        raise UserValueError(f"generation {generation}: sentence-transformers layouts "
                             f"{GENERATIONS}")
    os.makedirs(directory, exist_ok=True)
    hf.save_hf_checkpoint(encoder, directory, spm_model_file=spm_model_file,
                          vocab_file=vocab_file, do_lower_case=do_lower_case)
    modules = [{"idx": 0, "name": "0", "path": "", "type": TRANSFORMER[generation]},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": POOLING[generation]}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": NORMALIZE[generation]})
        os.makedirs(os.path.join(directory, "2_Normalize"), exist_ok=True)
    width = int(encoder.config.hidden_size)
    if generation == 5:
        config = {key: False for _, key in POOLING_MODES + tuple((k, k) for k in UNSUPPORTED_MODES)}
        config.update({keys[mode]: True for mode in pooling})
        config.update(word_embedding_dimension=width, include_prompt=True)
        settings = {"max_seq_length": int(max_seq_length), "do_lower_case": False}
        if spm_model_file:
            # transformers' fast ALBERT tokenizer splits words at the model's user-defined
            # pieces ("jean-luc"); the slow one gives the original SentencePiece ids, which
            # the model was trained on.
            settings["tokenizer_args"] = {"use_fast": False}
    else:
        named = [MODE_NAMES_6[mode] for mode in pooling]
        config = {"embedding_dimension": width,
                  "pooling_mode": named[0] if len(named) == 1 else named,
                  "include_prompt": True}
        settings = dict(TRANSFORMER_SETTINGS_6)
        _set_model_max_length(directory, int(max_seq_length))
    files = {MODULES_FILE: modules, CONFIG_FILE: settings,
             os.path.join("1_Pooling", "config.json"): config}
    os.makedirs(os.path.join(directory, "1_Pooling"), exist_ok=True)
    for name, value in files.items():
        fileio.atomic_write_text(os.path.join(directory, name),
                                 json.dumps(value, indent=2) + "\n")
    return sorted(files) + ["config.json", "model.safetensors"]


def _set_model_max_length(directory: str, length: int) -> None:
    """6.x keeps the tokens a text keeps as the tokenizer's model_max_length."""
    path = os.path.join(directory, "tokenizer_config.json")
    settings = fileio.read_json(path) if os.path.exists(path) else {}
    settings["model_max_length"] = length
    fileio.atomic_write_text(path, json.dumps(settings, indent=2) + "\n")
