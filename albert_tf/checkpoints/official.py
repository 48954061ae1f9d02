"""Official download directories: config, vocabulary and weights found and loaded in one call."""
from __future__ import annotations

import dataclasses
import fnmatch
import logging
import os
from typing import List, Optional, Sequence, Tuple

import numpy as np

from albert_tf.checkpoints.assign import CheckpointMismatchError, LoadReport
from albert_tf.checkpoints.restore import detect_format, restore_for_training
from albert_tf.checkpoints.tf1 import read_tf1_variables
from albert_tf.config import AlbertConfig
from albert_tf.errors import UserFileNotFoundError, UserValueError

logger = logging.getLogger(__name__)


MASK_TOKEN = "[MASK]"
CONFIG_FILE = "albert_config.json"
CONFIG_PATTERN = "albert_config_*.json"  # community releases: albert_config_base.json, ..._tiny
SPM_MODEL_FILE = "30k-clean.model"
WORDPIECE_VOCAB_FILES = ("vocab_chinese.txt", "vocab.txt")  # albert_*_zh, community releases


@dataclasses.dataclass
class OfficialModel:
    """What `from_official_dir` returns: config, tokenizer, model with weights, load report."""

    config: AlbertConfig
    tokenizer: object
    model: object
    report: LoadReport

    def encode_with_masks(self, text: str) -> Tuple[List[int], List[int]]:
        """(ids of `[CLS] text [SEP]`, positions of each literal `[MASK]` in `text`): see
        `encode_with_masks` (the module function)."""
        return encode_with_masks(self.tokenizer, text, self.config.max_position_embeddings)

    def fill_mask(self, text: str, top_k: int = 5) -> List[List[Tuple[str, float]]]:
        """For each `[MASK]` in `text`, the `top_k` (token, probability) of the MLM head.

        Tokens are vocabulary entries ("▁paris", "##ing"); `tokenizer.token_text`
        makes display text of them. Needs a model with an MLM head
        (`AlbertPretrainer`, the default of `from_official_dir`).
        """
        ids, positions = self.encode_with_masks(text)
        if not positions:
            raise UserValueError(f"no {MASK_TOKEN} in {text!r}")
        outputs = self.model({"input_ids": np.array([ids], np.int32),
                              "masked_lm_positions": np.array([positions], np.int32)})
        logits = np.asarray(outputs["mlm_logits"], np.float64)[0]
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        result = []
        for row in probs:
            best = np.argsort(-row, kind="stable")[:top_k]
            tokens = self.tokenizer.convert_ids_to_tokens([int(i) for i in best])
            result.append(list(zip(tokens, row[best].tolist())))
        return result


def encode_with_masks(tokenizer, text: str, limit: int,
                      limit_name: str = "max_position_embeddings") -> Tuple[List[int], List[int]]:
    """(ids of `[CLS] text [SEP]`, positions of each literal `[MASK]` in `text`).

    Neither tokenizer keeps `[MASK]` whole inside text (SentencePiece does not
    know control symbols; WordPiece's BasicTokenizer splits it into `[`, `mask`,
    `]`), so the text is split at `[MASK]`, each part tokenized on its own and
    the mask id inserted between them. SentencePiece starts every part with a
    word boundary; a lone "▁" piece that this puts between `[MASK]` and text
    written right after it ("[MASK]." -> "▁", ".") is dropped, as the text
    would be tokenized with a word in place of the mask.
    `limit`: the most ids, named `limit_name` in the error (max_position_embeddings, or a
    task's sequence_length).
    """
    tok = tokenizer
    if tok.mask_id < 0:
        raise UserValueError(f"the vocabulary {tok.vocab_file} has no {MASK_TOKEN} token")
    ids, positions = [tok.cls_id], []
    for index, part in enumerate(text.split(MASK_TOKEN)):
        if index:
            positions.append(len(ids))
            ids.append(tok.mask_id)
        if not part.strip():
            continue
        part_ids = tok.encode_ids([tok.preprocess(part)])[0]
        if (index and not part[0].isspace() and tok.kind == "sentencepiece" and part_ids
                and tok.convert_ids_to_tokens(part_ids[:1]) == ["\u2581"]):
            part_ids = part_ids[1:]
        ids.extend(part_ids)
    ids.append(tok.sep_id)
    if len(ids) > limit:
        raise UserValueError(f"{text[:40]!r}...: {len(ids)} tokens with [CLS] and [SEP], more "
                             f"than {limit_name} ({limit})")
    return ids, positions


def _search_dirs(directory: str) -> List[str]:
    """`directory`, then its `assets/` (a TF-Hub module or our SavedModel export)."""
    return [d for d in (directory, os.path.join(directory, "assets")) if os.path.isdir(d)]


def _matching(base: str, names: Sequence[str] = (), pattern: Optional[str] = None) -> List[str]:
    found = [name for name in names if os.path.isfile(os.path.join(base, name))]
    if pattern:
        found += sorted(name for name in os.listdir(base) if fnmatch.fnmatchcase(name, pattern)
                        and name not in found and os.path.isfile(os.path.join(base, name)))
    return [os.path.join(base, name) for name in found]


def find_config_file(directory: str) -> str:
    """The model's config in a download: `albert_config.json` or `albert_config_*.json`.

    Searched in `directory`, then in `directory/assets`. Raises FileNotFoundError
    when there is none and ValueError when a directory holds several.
    """
    for base in _search_dirs(directory):
        found = _matching(base, [CONFIG_FILE], CONFIG_PATTERN)
        if len(found) > 1:
            listed = ", ".join(map(os.path.basename, found))
            raise UserValueError(f"{base}: several config files ({listed}); keep only the one "
                                 "that belongs to the checkpoint")
        if found:
            return found[0]
    raise UserFileNotFoundError(f"{directory}: no config file (looked for {CONFIG_FILE} and "
                                f"{CONFIG_PATTERN}, also under assets/)")


def find_vocabulary(directory: str) -> Tuple[str, str]:
    """("sentencepiece" | "wordpiece", path) of the vocabulary in a download.

    A SentencePiece model (`30k-clean.model`, else the one `*.model`) wins, as
    `--spm_model_file` does in the original; otherwise a WordPiece
    `vocab_chinese.txt` or `vocab.txt`. Searched in `directory`, then in
    `directory/assets`. Raises FileNotFoundError when there is none and
    ValueError when the choice is ambiguous.
    """
    for base in _search_dirs(directory):
        spm = _matching(base, [SPM_MODEL_FILE]) or _matching(base, pattern="*.model")
        if len(spm) > 1:
            raise UserValueError(f"{base}: several SentencePiece models "
                                 f"({', '.join(map(os.path.basename, spm))}); keep only the one "
                                 "that belongs to the checkpoint")
        if spm:
            return "sentencepiece", spm[0]
        vocab = _matching(base, WORDPIECE_VOCAB_FILES)
        if len(vocab) > 1:
            contents = set()
            for path in vocab:
                with open(path, "rb") as handle:
                    contents.add(handle.read())
            if len(contents) > 1:
                names = " and ".join(map(os.path.basename, vocab))
                raise UserValueError(f"{base}: {names} differ; "
                                     "keep only the vocabulary that belongs to the checkpoint")
        if vocab:
            return "wordpiece", vocab[0]
    raise UserFileNotFoundError(
        f"{directory}: no vocabulary (looked for a SentencePiece {SPM_MODEL_FILE} or *.model "
        f"and a WordPiece {' or '.join(WORDPIECE_VOCAB_FILES)}, also under assets/)")


def check_vocab_size(tokenizer, config: AlbertConfig, config_source: str,
                     checkpoint: Optional[str] = None) -> None:
    """Raises CheckpointMismatchError unless the vocabulary, the config's `vocab_size` and
    (when `checkpoint` is a TF1 checkpoint or its directory) the checkpoint's word
    embeddings all have the same number of tokens. The message names each number and
    its file.
    """
    sizes = [(f"the vocabulary {tokenizer.vocab_file}", tokenizer.vocab_size, "tokens"),
             (f"the config {config_source}", config.vocab_size, "vocab_size")]
    if checkpoint is not None and detect_format(checkpoint) == "tf1":
        prefix, shapes, _ = read_tf1_variables(checkpoint)
        embeddings = shapes.get("bert/embeddings/word_embeddings")
        if embeddings:
            sizes.append((f"the checkpoint {prefix}", embeddings[0],
                          f"rows of bert/embeddings/word_embeddings {list(embeddings)}"))
    if len({size for _, size, _ in sizes}) > 1:
        raise CheckpointMismatchError(
            "vocabulary sizes differ: " + "; ".join(f"{what} has {size} {unit}"
                                                   for what, size, unit in sizes)
            + ". The vocabulary, albert_config.json and the checkpoint must come from the same "
              "model.")


def from_official_dir(directory: str, model_class=None, init_from_group0: bool = False,
                      do_lower_case: bool = True, **model_kwargs) -> OfficialModel:
    """Config + tokenizer + model with weights, from an official or community download.

    `directory` holds
      * the config: `albert_config.json`, or one `albert_config_*.json` (community
        Chinese releases: `albert_config_base.json`, `albert_config_tiny.json`, ...);
      * the vocabulary: a SentencePiece `30k-clean.model` (any single `*.model`;
        the English models), else a WordPiece `vocab_chinese.txt` or `vocab.txt`
        (`albert_*_zh` and the community Chinese models);
      * a TF1 checkpoint: `model.ckpt-best.*` or `albert_model.ckpt.*` (any single
        prefix), with or without a `checkpoint` file.
    A TF-Hub module directory (files under `assets/`, weights under `variables/`)
    works too, and so does a SavedModel of `hub_export.export_pretrainer`.
    `model_class` defaults to `AlbertPretrainer` (encoder + MLM + SOP);
    `model_kwargs` go to its constructor (e.g. `num_labels=3`).
    Raises FileNotFoundError naming the directory and what was looked for when
    a file is absent, CheckpointMismatchError when the vocabulary, the config and
    the checkpoint disagree on the vocabulary size (or on any other field).
    """
    from albert_tf import tokenization
    from albert_tf.modeling import models

    model_class = model_class or models.AlbertPretrainer
    if not os.path.isdir(directory):
        raise UserFileNotFoundError(f"{directory}: not a directory (expected a model download "
                                    "with albert_config.json, a vocabulary and a checkpoint)")
    config_file = find_config_file(directory)
    config = AlbertConfig.from_json_file(config_file)
    kind, vocab_file = find_vocabulary(directory)
    tokenizer = tokenization.load_tokenizer(
        spm_model_file=vocab_file if kind == "sentencepiece" else None,
        vocab_file=vocab_file if kind == "wordpiece" else None, do_lower_case=do_lower_case)
    check_vocab_size(tokenizer, config, config_file, checkpoint=directory)
    model = model_class(config, **model_kwargs)
    report = restore_for_training(model, directory, init_from_group0=init_from_group0)
    return OfficialModel(config=config, tokenizer=tokenizer, model=model, report=report)
