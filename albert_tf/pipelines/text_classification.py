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
pair loses tokens first, as the original's `_truncate_seq_pair`), or unless `long_text`
says how to read it (single texts; as run_classifier.py's --long_text, whose settings an
export of such a run gives as the defaults): "head_tail" (the first and last tokens) or
"windows" (every window, `doc_stride` tokens apart, the logits' mean or max:
`window_aggregation`).
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional

import numpy as np

from albert_tf.errors import UserValueError
from albert_tf.pipelines import base
from albert_tf.pipelines.encoding import Packed, Tokens, truncate_pair
from albert_tf.tasks.classification import long_text

_LEGACY = ""  # top_k not given: Hugging Face's legacy output (the top label only)
FUNCTIONS = ("softmax", "sigmoid", "none")


class TextClassificationPipeline(base.Pipeline):
    task = "text-classification"
    HEADS = ("classifier",)
    OPTIONS = {"top_k": _LEGACY, "function_to_apply": None, "truncation": False,
               "long_text": None, "doc_stride": None, "window_aggregation": None}

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
        reading = self.source.reading
        for key, default in (("long_text", "truncate"), ("window_aggregation", "mean")):
            if values[key] is None:
                values[key] = reading.get(key, default)
        if values["doc_stride"] is None and values["long_text"] == reading.get("long_text"):
            values["doc_stride"] = reading.get("doc_stride")
        try:
            rule = long_text.LongText(values["long_text"], values["doc_stride"],
                                      values["window_aggregation"])
            rule.stride(self.max_length - 2)
        except ValueError as err:  # the flag names of run_classifier.py, as arguments here
            raise UserValueError(str(err).replace("--long_text", "long_text")
                                 .replace("--window_aggregation", "window_aggregation")
                                 .replace("--doc_stride", "doc_stride")) from None
        values["rule"] = rule
        return values

    def encode(self, text: str, text_pair: Optional[str], truncation: bool,
               budget: int) -> Packed:
        first = self.encoder.tokens(text, offsets=False)
        second = (self.encoder.tokens(text_pair, offsets=False) if text_pair is not None
                  else None)
        length = len(first) + (len(second) if second is not None else 0)
        if length > budget:
            if not truncation:
                raise self.too_long(length + self.max_length - budget, remedy=(
                    "pass truncation=True, or long_text='windows' or 'head_tail' for a single "
                    "text" if second is None else "pass truncation=True"))
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
        rule = options["rule"]
        if rule.mode == "truncate":
            return [self.encode(text, pair, options["truncation"], budget)]
        if pair is not None:
            raise UserValueError(f"{self.task}: long_text={rule.mode!r} reads single texts, "
                                 "not pairs")
        ids = self.encoder.tokens(text, offsets=False).ids
        return [self.encoder.pack(Tokens(piece, [], [], []))
                for piece in long_text.pieces(ids, budget, rule)]

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
        logits = outputs["logits"]
        if len(logits) > 1:  # windows of one text
            logits = long_text.aggregate(logits, np.zeros(len(logits), np.int64), 1,
                                         options["rule"].aggregation)
        scores = self.scores(logits[0], options)
        top_k = options["top_k"]
        # Early exit: the layer the text's answer came from (its deepest window's).
        exits = ({"exit_layer": int(outputs["exit_layer"].max())} if "exit_layer" in outputs
                 else {})
        if top_k == _LEGACY:
            best = int(scores.argmax())
            return {"label": self.source.label(best), "score": float(scores[best]), **exits}
        ranked = sorted(({"label": self.source.label(i), "score": float(s), **exits}
                         for i, s in enumerate(scores)), key=lambda x: x["score"], reverse=True)
        return ranked if top_k is None else ranked[:int(top_k)]
