"""fill-mask: the likeliest tokens for each [MASK] (Hugging Face's arguments and outputs).

    fill = albert_tf.pipeline("fill-mask", model="albert_base_v2")   # official or HF
    fill("The capital of France is [MASK].")
    # [{"score": 0.42, "token": 2201, "token_str": "paris",
    #   "sequence": "the capital of france is paris."}, ...]

`top_k` candidates (5) per mask, best first; `targets` (a token or a list) restricts them
to those tokens (a word not in the vocabulary stands for its first token). A text with one
[MASK] gives a list of candidates, with several a list per mask (and their sequences keep
the special tokens, as Hugging Face's do).
"""
from __future__ import annotations

from typing import Dict, List, Mapping

import numpy as np
from absl import logging

from albert_tf.errors import UserValueError
from albert_tf.pipelines import base
from albert_tf.pipelines.encoding import Packed, Tokens

MASK = "[MASK]"


class FillMaskPipeline(base.Pipeline):
    task = "fill-mask"
    HEADS = ("masked_lm",)
    OUTPUTS = ("mlm_logits",)
    OPTIONS = {"top_k": 5, "targets": None}

    def __call__(self, inputs, **options):
        result = super().__call__(inputs, **options)
        if isinstance(inputs, list) and len(inputs) == 1:
            return result[0]  # as Hugging Face's
        return result

    def resolve_options(self, options: Mapping) -> Dict:
        values = super().resolve_options(options)
        values["top_k"] = base.int_option(values, "top_k", 1)
        values["target_ids"] = (None if values["targets"] is None
                                else self.target_ids(values["targets"]))
        return values

    def target_ids(self, targets) -> np.ndarray:
        if isinstance(targets, str):
            targets = [targets]
        vocab = self.tokenizer.vocab
        ids = []
        for target in targets:
            token_id = vocab.get(target)
            if token_id is None:
                pieces = self.encoder.ids(target)
                if not pieces:
                    logging.warning("target %r has no token: ignored", target)
                    continue
                token_id = pieces[0]
                logging.warning("target %r is not in the vocabulary: its first token %r is "
                                "used", target, self.tokenizer.convert_ids_to_tokens([token_id])[0])
            ids.append(token_id)
        if not ids:
            raise UserValueError(f"{self.task}: none of the targets {list(targets)} is a token")
        return np.array(list(set(ids)))

    def rows(self, item, options: Mapping) -> List[Packed]:
        if not isinstance(item, str):
            raise UserValueError(f"{self.task}: an input is a string, not {type(item).__name__}")
        if MASK not in item:
            raise UserValueError(f"{self.task}: no {MASK} in {item!r:.80}")
        ids: List[int] = []
        lone = self.tokenizer.vocab.get("\u2581") if self.encoder.sentencepiece else None
        for index, part in enumerate(item.split(MASK)):
            part_ids = self.encoder.ids(part)
            if index:
                ids.append(self.tokenizer.mask_id)
                # Text glued to the mask continues it: no lone "▁" before a piece that
                # SentencePiece keeps apart ("[MASK]." is [MASK] ".", as in Hugging Face).
                if part[:1] and not part[0].isspace() and part_ids[:1] == [lone]:
                    part_ids = part_ids[1:]
            ids += part_ids
        if len(ids) + 2 > self.max_length:
            raise self.too_long(len(ids) + 2)
        n = len(ids)
        return [self.encoder.pack(Tokens(ids, [(0, 0)] * n, [-1] * n, []))]

    def answer(self, item, rows, outputs: Dict[str, np.ndarray], options: Mapping):
        ids = np.array(rows[0].input_ids)
        positions = np.nonzero(ids == self.tokenizer.mask_id)[0]
        target_ids = options["target_ids"]
        top_k = int(options["top_k"])
        if target_ids is not None:
            top_k = min(top_k, len(target_ids))
        single = len(positions) == 1
        result = []
        for position in positions:
            probs = base.softmax(outputs["mlm_logits"][0][position].astype(np.float32))
            if target_ids is not None:
                probs = probs[target_ids]
            best = np.argsort(-probs, kind="stable")[:top_k]
            row = []
            for index in best:
                token = int(target_ids[index]) if target_ids is not None else int(index)
                filled = ids.copy()
                filled[position] = token
                row.append({"score": float(probs[index]), "token": token,
                            "token_str": self.encoder.token_string(token),
                            "sequence": self.encoder.decode(filled, skip_special_tokens=single)})
            result.append(row)
        return result[0] if single else result
