"""token-classification: named entities with character offsets (Hugging Face's arguments).

    tag = albert_tf.pipeline("token-classification", model="hf/albert-ner",
                             aggregation_strategy="simple")
    tag("Anna lives in New York.")
    # [{"entity_group": "PER", "score": 0.99, "word": "anna", "start": 0, "end": 4}, ...]

aggregation_strategy, as Hugging Face defines them:
  none     one entry per token: entity, score, index (the token's position in its row),
           word (the token), start, end
  simple   adjacent tokens of one entity type grouped (B- starts a new group)
  first / average / max   each word takes the label of its first token / of its tokens'
           mean scores / of its most confident token, then words are grouped as in simple
A word is what Hugging Face calls one: for SentencePiece (its fallback rule) a token starts a
word unless it is glued to the character before it; for WordPiece a "##" piece continues one. `start`/`end` are character
offsets into the input that point at the word itself (Hugging Face's include the space
before it). Labels in `ignore_labels` (default ["O"]) are left out.

A text longer than the model is cut to its first tokens (with a warning) unless `stride` is
given: then it is read in windows of the model's length that overlap by `stride` tokens,
and entities found in two windows are merged (the longer, then the more confident, wins).
"""
from __future__ import annotations

from typing import Dict, List, Mapping

import numpy as np
from absl import logging

from albert_tf.errors import UserValueError
from albert_tf.pipelines import base
from albert_tf.pipelines.encoding import Packed, windows

STRATEGIES = ("none", "simple", "first", "average", "max")


def split_tag(name: str):
    """("B" | "I", type) of a label: B-/I- prefixes, anything else is an I- of itself."""
    if name.startswith("B-"):
        return "B", name[2:]
    if name.startswith("I-"):
        return "I", name[2:]
    return "I", name


class TokenClassificationPipeline(base.Pipeline):
    task = "token-classification"
    HEADS = ("token_classifier",)
    OPTIONS = {"aggregation_strategy": "none", "ignore_labels": None, "stride": None}

    def resolve_options(self, options: Mapping) -> Dict:
        values = super().resolve_options(options)
        strategy = str(values["aggregation_strategy"]).lower()
        if strategy not in STRATEGIES:
            raise UserValueError(f"aggregation_strategy={strategy!r}: one of {STRATEGIES}")
        values["aggregation_strategy"] = strategy
        stride = values["stride"]
        if stride is not None:
            if isinstance(stride, bool) or not isinstance(stride, int) or not (
                    0 <= stride < self.max_length - 2):
                raise UserValueError(f"stride={stride!r}: must be at least 0 and less than the "
                                     f"model's {self.max_length - 2} text tokens per window")
            if strategy == "none":
                raise UserValueError("stride reads the whole text in windows, which needs an "
                                     "aggregation_strategy other than 'none'")
        if values["ignore_labels"] is None:
            values["ignore_labels"] = ["O"]
        return values

    def rows(self, item, options: Mapping) -> List[Packed]:
        if not isinstance(item, str):
            raise UserValueError(f"{self.task}: an input is a string, not {type(item).__name__}")
        tokens = self.encoder.tokens(item)
        size = self.max_length - 2
        if options["stride"] is None:
            if len(tokens) > size:
                logging.warning("%s: a text of %d tokens is cut to the model's %d; pass "
                                "stride= to read all of it", self.task, len(tokens), size)
            spans = [range(0, min(len(tokens), size))]
        else:
            spans = windows(len(tokens), size, int(options["stride"]))
        return [self.encoder.pack(tokens.window(s.start, s.stop)) for s in spans]

    def answer(self, item, rows, outputs: Dict[str, np.ndarray], options: Mapping):
        strategy = options["aggregation_strategy"]
        entities = []
        for index, row in enumerate(rows):
            tokens = self.pre_entities(item, row, outputs["logits"][index])
            grouped = (self.token_entities(tokens) if strategy in ("none", "simple")
                       else [self.word_entity(word, strategy)
                             for word in self.words(tokens)])
            if strategy != "none":
                grouped = self.group(grouped)
            ignore = set(options["ignore_labels"])
            if "exit_layer" in outputs:  # early exit: the layer the row's tags came from
                grouped = [dict(e, exit_layer=int(outputs["exit_layer"][index]))
                           for e in grouped]
            entities += [e for e in grouped
                         if e.get("entity") not in ignore and e.get("entity_group") not in ignore]
        return merge_overlapping(entities) if len(rows) > 1 else entities

    def pre_entities(self, text: str, row: Packed, logits: np.ndarray) -> List[Dict]:
        pieces = self.tokenizer.convert_ids_to_tokens(row.input_ids)
        out = []
        for position, sequence in enumerate(row.sequence):
            if sequence is None:
                continue
            start, end = row.offsets[position]
            word = pieces[position]
            if self.encoder.sentencepiece:  # Hugging Face's rule without a subword prefix
                subword = start > 0 and " " not in text[start - 1:start + 1]
            else:  # ... and with one ("##ing" is longer than "ing")
                subword = len(word) != len(text[start:end])
            if row.input_ids[position] == self.tokenizer.unk_id:
                word, subword = text[start:end], False
            out.append({"word": word, "scores": base.softmax(logits[position]),
                        "start": start, "end": end, "index": position,
                        "is_subword": subword})
        return out

    def token_entities(self, tokens: List[Dict]) -> List[Dict]:
        out = []
        for token in tokens:
            best = int(token["scores"].argmax())
            out.append({"entity": self.source.label(best), "score": float(token["scores"][best]),
                        "index": token["index"], "word": token["word"],
                        "start": token["start"], "end": token["end"]})
        return out

    @staticmethod
    def words(tokens: List[Dict]) -> List[List[Dict]]:
        groups: List[List[Dict]] = []
        for token in tokens:
            if groups and token["is_subword"]:
                groups[-1].append(token)
            else:
                groups.append([token])
        return groups

    def word_entity(self, tokens: List[Dict], strategy: str) -> Dict:
        if strategy == "first":
            scores = tokens[0]["scores"]
        elif strategy == "max":
            scores = max(tokens, key=lambda token: token["scores"].max())["scores"]
        else:
            scores = np.nanmean(np.stack([token["scores"] for token in tokens]), axis=0)
        best = int(scores.argmax())
        return {"entity": self.source.label(best), "score": float(scores[best]),
                "word": self.encoder.tokens_to_string([t["word"] for t in tokens]),
                "start": tokens[0]["start"], "end": tokens[-1]["end"]}

    def group(self, entities: List[Dict]) -> List[Dict]:
        groups: List[List[Dict]] = []
        for entity in entities:
            bi, tag = split_tag(entity["entity"])
            if groups and tag == split_tag(groups[-1][-1]["entity"])[1] and bi != "B":
                groups[-1].append(entity)
            else:
                groups.append([entity])
        return [{"entity_group": g[0]["entity"].split("-", 1)[-1],
                 "score": float(np.mean([e["score"] for e in g])),
                 "word": self.encoder.tokens_to_string([e["word"] for e in g]),
                 "start": g[0]["start"], "end": g[-1]["end"]} for g in groups]


def merge_overlapping(entities: List[Dict]) -> List[Dict]:
    """Entities of overlapping windows: of two that overlap, the longer (then the more
    confident) is kept (Hugging Face's `aggregate_overlapping_entities`)."""
    if not entities:
        return entities
    # An empty span (a lone "▁" token) sorts before the word that starts where it is, as
    # Hugging Face's span of that token (the space) does.
    entities = sorted(entities, key=lambda e: (e["start"], e["end"]))
    kept, previous = [], entities[0]
    for entity in entities:
        # Two empty spans (lone "▁" tokens) at one place are one token seen twice.
        if (previous["start"] <= entity["start"] < previous["end"]
                or previous["start"] == previous["end"] == entity["start"] == entity["end"]):
            length, previous_length = (entity["end"] - entity["start"],
                                       previous["end"] - previous["start"])
            if length > previous_length or (length == previous_length
                                            and entity["score"] > previous["score"]):
                previous = entity
        else:
            kept.append(previous)
            previous = entity
    kept.append(previous)
    return kept
