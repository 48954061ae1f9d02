"""text-classification: labels and scores of texts and text pairs (Hugging Face's arguments).

    classify = albert_tf.pipeline("text-classification", model="hf/albert-sst2")
    classify("A gripping film.")                    # [{"label": "positive", "score": 0.98}]
    classify(["one", "two"])                        # [{...}, {...}]: the top label of each
    classify("one", top_k=None)                     # every label, best first
    classify({"text": "A man plays.", "text_pair": "Someone plays."})

Scores: softmax for single-label models, sigmoid for multi-label ones
(`problem_type: multi_label_classification`) and one-output models, the raw value for
regression; `function_to_apply` ("softmax", "sigmoid", "none") overrides. Without `top_k`
the result is the top label (and a lone string's result is wrapped in a list, as Hugging
Face's is); with `top_k` (an int, or None for all) a list of labels, best first.
A text longer than the model is an error unless `truncation=True` (then the longer of the
pair loses tokens first, as the original's `_truncate_seq_pair`).
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional

import numpy as np

from albert_tf.errors import UserValueError
from albert_tf.pipelines import base
from albert_tf.pipelines.encoding import Packed, truncate_pair

_LEGACY = ""  # top_k not given: Hugging Face's legacy output (the top label only)
FUNCTIONS = ("softmax", "sigmoid", "none")


class TextClassificationPipeline(base.Pipeline):
    task = "text-classification"
    HEADS = ("classifier",)
    OPTIONS = {"top_k": _LEGACY, "function_to_apply": None, "truncation": False}

    def __call__(self, inputs, **options):
        result = super().__call__(inputs, **options)
        if isinstance(inputs, str) and "top_k" not in options:
            return [result]  # as Hugging Face's (also when top_k was given to the pipeline)
        return result

    def resolve_options(self, options: Mapping) -> Dict:
        values = super().resolve_options(options)
        top_k = values["top_k"]
        if top_k not in (_LEGACY, None) and (not isinstance(top_k, int) or top_k < 1):
            raise UserValueError(f"top_k={top_k!r}: a positive int, or None for every label")
        self.function(values)  # checks function_to_apply
        return values

    def encode(self, text: str, text_pair: Optional[str], truncation: bool,
               budget: int) -> Packed:
        first = self.encoder.tokens(text, offsets=False)
        second = (self.encoder.tokens(text_pair, offsets=False) if text_pair is not None
                  else None)
        length = len(first) + (len(second) if second is not None else 0)
        if length > budget:
            if not truncation:
                raise self.too_long(length + self.max_length - budget)
            first, second = truncate_pair(first, second, budget)
        return self.encoder.pack(first, second)

    def rows(self, item, options: Mapping) -> List[Packed]:
        if isinstance(item, dict):
            unknown = sorted(set(item) - {"text", "text_pair"})
            if "text" not in item or unknown:
                raise UserValueError(f"{self.task}: a pair is {{'text': ..., 'text_pair': ...}}"
                                     f", got keys {sorted(item)}")
            text, pair = item["text"], item.get("text_pair")
            if not isinstance(text, str) or not isinstance(pair, (str, type(None))):
                raise UserValueError(f"{self.task}: 'text' and 'text_pair' are strings")
        elif isinstance(item, str):
            text, pair = item, None
        else:
            raise UserValueError(f"{self.task}: an input is a string or {{'text', "
                                 f"'text_pair'}}, not {type(item).__name__}")
        budget = self.max_length - (3 if pair is not None else 2)
        return [self.encode(text, pair, options["truncation"], budget)]

    def function(self, options: Mapping) -> str:
        chosen = options["function_to_apply"]
        if chosen is not None:
            chosen = str(chosen).lower()
            if chosen not in FUNCTIONS:
                raise UserValueError(f"function_to_apply={chosen!r}: one of {FUNCTIONS}")
            return chosen
        problem = self.source.problem_type
        if problem == "regression":
            return "none"
        if problem == "multi_label_classification" or self.source.num_outputs == 1:
            return "sigmoid"
        return "softmax"

    def scores(self, logits: np.ndarray, options: Mapping) -> np.ndarray:
        function = self.function(options)
        if function == "sigmoid":
            return base.sigmoid(logits)
        if function == "softmax":
            return base.softmax(logits)
        return logits

    def answer(self, item, rows, outputs: Dict[str, np.ndarray], options: Mapping):
        scores = self.scores(outputs["logits"][0], options)
        top_k = options["top_k"]
        if top_k == _LEGACY:
            best = int(scores.argmax())
            return {"label": self.source.label(best), "score": float(scores[best])}
        ranked = sorted(({"label": self.source.label(i), "score": float(s)}
                         for i, s in enumerate(scores)), key=lambda x: x["score"], reverse=True)
        return ranked if top_k is None else ranked[:int(top_k)]
