"""zero-shot-classification: an NLI model scores candidate labels (Hugging Face's arguments).

    classify = albert_tf.pipeline("zero-shot-classification", model="hf/albert-mnli")
    classify("The team won the final.", candidate_labels=["sport", "politics"])
    # {"sequence": ..., "labels": ["sport", "politics"], "scores": [0.91, 0.09]}

Each label becomes the hypothesis `hypothesis_template.format(label)` ("This example is
{}.") of a (text, hypothesis) pair. The scores are the softmax of the entailment logits
over the labels, or with `multi_label=True` (or one label) each label's softmax of
(contradiction, entailment). The entailment output is the label whose name starts with
"entail" (config.json's id2label); the text loses tokens when the pair is too long.
"""
from __future__ import annotations

from typing import Dict, List, Mapping

import numpy as np
from absl import logging

from albert_tf.errors import UserValueError
from albert_tf.pipelines import base
from albert_tf.pipelines.encoding import Packed


def parse_labels(labels) -> List[str]:
    if isinstance(labels, str):
        labels = [label.strip() for label in labels.split(",") if label.strip()]
    return list(labels or [])


class ZeroShotClassificationPipeline(base.Pipeline):
    task = "zero-shot-classification"
    HEADS = ("classifier",)
    OPTIONS = {"candidate_labels": None, "hypothesis_template": "This example is {}.",
               "multi_label": False}

    def __call__(self, inputs, candidate_labels=None, **options):
        """`classify(text, ["a", "b"])` or `classify(text, candidate_labels=[...])`."""
        if candidate_labels is not None:
            options["candidate_labels"] = candidate_labels
        return super().__call__(inputs, **options)

    @property
    def entailment_id(self) -> int:
        for index, name in enumerate(self.source.labels or []):
            if name.lower().startswith("entail"):
                return index
        return -1

    def resolve_options(self, options: Mapping) -> Dict:
        values = super().resolve_options(options)
        labels = parse_labels(values["candidate_labels"])
        template = values["hypothesis_template"]
        if not labels:
            raise UserValueError(f"{self.task}: give candidate_labels (at least one)")
        if template.format(labels[0]) == template:
            raise UserValueError(f"{self.task}: hypothesis_template {template!r} has no {{}} "
                                 "where the label goes")
        if self.entailment_id == -1:
            logging.warning("%s: no output label starts with 'entail' (id2label: %s); the "
                            "last output is read as entailment", self.source.path,
                            self.source.labels)
        values["candidate_labels"] = labels
        return values

    def rows(self, item, options: Mapping) -> List[Packed]:
        if not isinstance(item, str):
            raise UserValueError(f"{self.task}: an input is a string, not {type(item).__name__}")
        text = self.encoder.tokens(item, offsets=False)
        rows = []
        for label in options["candidate_labels"]:
            hypothesis = self.encoder.tokens(options["hypothesis_template"].format(label),
                                             offsets=False)
            keep = max(self.max_length - 3 - len(hypothesis), 0)  # only the text is cut
            rows.append(self.encoder.pack(text.window(0, min(len(text), keep)), hypothesis))
        return rows

    def answer(self, item, rows, outputs: Dict[str, np.ndarray], options: Mapping):
        logits = outputs["logits"]
        labels = options["candidate_labels"]
        entail = self.entailment_id
        if options["multi_label"] or len(labels) == 1:
            contradiction = -1 if entail == 0 else 0
            pair = logits[:, [contradiction, entail]]
            scores = (np.exp(pair) / np.exp(pair).sum(-1, keepdims=True))[:, 1]
        else:
            column = logits[:, entail]
            scores = np.exp(column) / np.exp(column).sum()
        order = list(reversed(scores.argsort()))
        return {"sequence": item, "labels": [labels[i] for i in order],
                "scores": [float(scores[i]) for i in order]}
