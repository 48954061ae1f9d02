"""multiple-choice: a question's choices ranked by the model (no Hugging Face pipeline has it).

    choose = albert_tf.pipeline("multiple-choice", model="hf/albert-race")
    choose(question="Where is Paris?", choices=["France", "Peru"],
           context="Paris is the capital of France.")       # context is optional
    # [{"index": 0, "choice": "France", "score": 0.93}, {"index": 1, ...}]

Each choice is one row, `[CLS] question [SEP] choice [SEP]`, or with a `context` (RACE's
layout) `[CLS] context [SEP] question choice [SEP]`; the longer part loses tokens first
when a row exceeds `max_seq_len` (default the model's). The scores are the softmax of the
choices' logits (AlbertForMultipleChoice's), best first.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Sequence

import numpy as np

from albert_tf.errors import UserValueError
from albert_tf.pipelines import base
from albert_tf.pipelines.encoding import Packed, truncate_pair


class MultipleChoicePipeline(base.Pipeline):
    task = "multiple-choice"
    HEADS = ("multiple_choice",)
    OPTIONS = {"max_seq_len": None}

    def __call__(self, inputs=None, question=None, choices=None, context=None, **options):
        if question is not None or choices is not None:
            if inputs is not None:
                raise UserValueError(f"{self.task}: give inputs or question= and choices=")
            inputs = {"question": question, "choices": choices}
            if context is not None:
                inputs["context"] = context
        return super().__call__(inputs, **options)

    def resolve_options(self, options: Mapping) -> Dict:
        values = super().resolve_options(options)
        values["max_seq_len"] = base.int_option(values, "max_seq_len", 4, self.max_length,
                                                default=self.max_length)
        return values

    def rows(self, item, options: Mapping) -> List[Packed]:
        if not (isinstance(item, dict) and isinstance(item.get("question"), str)
                and isinstance(item.get("choices"), (list, tuple)) and item["choices"]
                and all(isinstance(c, str) for c in item["choices"])
                and isinstance(item.get("context"), (str, type(None)))):
            raise UserValueError(f"{self.task}: an input is {{'question': str, 'choices': "
                                 f"[str, ...], 'context': str (optional)}}, got {item!r:.80}")
        max_seq_len = options["max_seq_len"]
        context = item.get("context")
        rows = []
        for choice in item["choices"]:
            if context is None:
                first = self.encoder.tokens(item["question"], offsets=False)
                second = self.encoder.tokens(choice, offsets=False)
            else:
                first = self.encoder.tokens(context, offsets=False)
                second = self.encoder.tokens(f"{item['question']} {choice}",
                                                  offsets=False)
            first, second = truncate_pair(first, second, max_seq_len - 3)
            rows.append(self.encoder.pack(first, second))
        return rows

    def run_items(self, items_rows: Sequence[List[Packed]]) -> Dict[str, np.ndarray]:
        """Under early exit, whole questions go through the model together (their choices
        exit at one layer): about `batch_size` rows at a time, each question padded to the
        most choices of its batch (absent choices masked); else the rows as one stream."""
        run_choices = self.source.run_choices
        if run_choices is None:
            return super().run_items(items_rows)
        logits, exits = [], []
        most = max((len(rows) for rows in items_rows), default=1)
        per_call = max(1, self.batch_size // most)
        for start in range(0, len(items_rows), per_call):
            group = items_rows[start:start + per_call]
            width = max(len(rows) for rows in group)
            padded = [row for rows in group for row in rows + [rows[0]] * (width - len(rows))]
            features = {name: value.reshape(len(group), width, -1) for name, value in
                        base.pad_rows(padded, self.encoder.pad_id).items()}
            features["choice_mask"] = np.array([[1] * len(rows) + [0] * (width - len(rows))
                                                for rows in group], np.int32)
            outputs = run_choices(features)
            for index, rows in enumerate(group):
                logits.append(outputs["logits"][index, :len(rows)])
                exits.append(np.full(len(rows), outputs["exit_layer"][index], np.int32))
        if not logits:
            return {}
        return {"logits": np.concatenate(logits), "exit_layer": np.concatenate(exits)}

    def answer(self, item, rows, outputs: Dict[str, np.ndarray], options: Mapping):
        scores = base.softmax(outputs["logits"].astype(np.float64))
        order = np.argsort(-scores, kind="stable")
        # Early exit: the layer the question's choices exited at, on each of them.
        exits = ({"exit_layer": int(outputs["exit_layer"][0])} if "exit_layer" in outputs
                 else {})
        return [{"index": int(i), "choice": item["choices"][i], "score": float(scores[i]),
                 **exits} for i in order]
