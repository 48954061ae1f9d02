"""question-answering: answer spans of a context (Hugging Face's arguments and decoding).

    answer = albert_tf.pipeline("question-answering", model="hf/albert-squad")
    answer(question="Where does Anna live?", context="Anna lives in New York.")
    # {"score": 0.61, "start": 14, "end": 23, "answer": "New York."}

The context is read in windows of `max_seq_len` tokens (default the model's, at most 384)
that overlap by `doc_stride` tokens (default min(max_seq_len // 2, 128)); the question is
cut to `max_question_len` tokens (64). In each window the start and end scores are the
softmax of the logits over the context tokens and [CLS]; a span's score is start x end,
spans longer than `max_answer_len` tokens (15) are out, and with `align_to_words` (default)
an answer is widened to whole words (`encoding`'s words: Hugging Face's fast tokenizer's). Answers of equal text (any case)
add their scores. `handle_impossible_answer` adds the empty answer scored by the smallest
[CLS] x [CLS] of the windows (SQuAD v2 models). `top_k` answers, best first: a dict for one.
`start`/`end` are character offsets into the context that point at the answer itself
(Hugging Face's include the space before it).

Hugging Face's fast-tokenizer path ignores max_question_len; it is applied here, so a very
long question still leaves room for the context (the results agree for questions of
max_question_len tokens or fewer). When top_k asks for more answers than a window has spans,
Hugging Face pads with zero-score spans (ending before they start, or the [CLS] itself);
those are left out.
"""
from __future__ import annotations

from typing import Dict, List, Mapping

import numpy as np

from albert_tf.errors import UserValueError
from albert_tf.pipelines import base
from albert_tf.pipelines.encoding import Packed
from albert_tf.pipelines.token_classification import windows


def decode_spans(start: np.ndarray, end: np.ndarray, top_k: int, max_answer_len: int,
                 allowed: np.ndarray):
    """The `top_k` best (start, end, score) of one window (Hugging Face's `decode_spans`):
    start [S] and end [S] probabilities, `allowed` [S] 1 where a span may begin or end."""
    outer = np.matmul(start[None, :, None], end[None, None, :])
    candidates = np.tril(np.triu(outer), max_answer_len - 1)
    flat = candidates.flatten()
    if top_k == 1:
        order = [np.argmax(flat)]
    elif len(flat) <= top_k:
        order = np.argsort(-flat)
    else:
        index = np.argpartition(-flat, top_k)[0:top_k]
        order = index[np.argsort(-flat[index])]
    starts, ends = np.unravel_index(order, candidates.shape)[1:]
    # When top_k exceeds the real spans, Hugging Face also returns zero-score ones (ending
    # before they start, or the [CLS]); those are left out here.
    keep = (np.isin(starts, allowed.nonzero()) & np.isin(ends, allowed.nonzero())
            & (candidates[0, starts, ends] > 0))
    starts, ends = starts[keep], ends[keep]
    return starts, ends, candidates[0, starts, ends]


class QuestionAnsweringPipeline(base.Pipeline):
    task = "question-answering"
    HEADS = ("span",)
    OUTPUTS = ("start_logits", "end_logits")
    OPTIONS = {"top_k": 1, "doc_stride": None, "max_answer_len": 15, "max_seq_len": None,
               "max_question_len": 64, "handle_impossible_answer": False,
               "align_to_words": True}

    def __call__(self, inputs=None, question=None, context=None, **options):
        if question is not None or context is not None:
            if inputs is not None:
                raise UserValueError(f"{self.task}: give inputs or question= and context=")
            if question is None or context is None:
                raise UserValueError(f"{self.task}: give both question= and context=")
            if isinstance(question, str) and isinstance(context, str):
                inputs = {"question": question, "context": context}
            elif isinstance(question, str) or isinstance(context, str):
                questions = [question] * len(context) if isinstance(question, str) else question
                contexts = [context] * len(question) if isinstance(context, str) else context
                inputs = [{"question": q, "context": c} for q, c in zip(questions, contexts)]
            else:
                if len(question) != len(context):
                    raise UserValueError(f"{self.task}: {len(question)} questions but "
                                         f"{len(context)} contexts")
                inputs = [{"question": q, "context": c} for q, c in zip(question, context)]
        if isinstance(inputs, (list, tuple)) and len(inputs) == 1:
            inputs = inputs[0]  # a list of one gives one result, as Hugging Face's
        return super().__call__(inputs, **options)

    def resolve_options(self, options: Mapping) -> Dict:
        values = super().resolve_options(options)
        values["max_seq_len"] = base.int_option(values, "max_seq_len", 4, self.max_length,
                                                default=min(self.max_length, 384))
        values["doc_stride"] = base.int_option(values, "doc_stride", 0,
                                               default=min(values["max_seq_len"] // 2, 128))
        for name in ("top_k", "max_answer_len", "max_question_len"):
            values[name] = base.int_option(values, name, 1)
        if values["doc_stride"] > values["max_seq_len"]:
            raise UserValueError(f"doc_stride ({values['doc_stride']}) is larger than "
                                 f"max_seq_len ({values['max_seq_len']})")
        return values

    def rows(self, item, options: Mapping) -> List[Packed]:
        if not (isinstance(item, dict) and isinstance(item.get("question"), str)
                and isinstance(item.get("context"), str)):
            raise UserValueError(f"{self.task}: an input is {{'question': str, 'context': "
                                 f"str}}, got {item!r:.80}")
        if not item["context"].strip():
            raise UserValueError(f"{self.task}: the context is empty")
        question = self.encoder.tokens(item["question"], offsets=False)
        question = question.window(0, min(len(question), options["max_question_len"]))
        context = self.encoder.tokens(item["context"])
        budget = options["max_seq_len"] - len(question) - 3
        if budget <= options["doc_stride"]:
            raise UserValueError(
                f"{self.task}: a question of {len(question)} tokens leaves {max(budget, 0)} "
                f"context tokens per window, not more than doc_stride={options['doc_stride']}: "
                "raise max_seq_len or lower doc_stride / max_question_len")
        return [self.encoder.pack(question, context.window(w.start, w.stop))
                for w in windows(len(context), budget, options["doc_stride"])]

    def answer(self, item, rows, outputs: Dict[str, np.ndarray], options: Mapping):
        context = item["context"]
        top_k = options["top_k"]
        align = options["align_to_words"]
        pre_top_k = top_k * 2 + 10 if align else top_k
        min_null, answers = 1000000.0, []
        for index, row in enumerate(rows):
            n = len(row.input_ids)
            allowed = np.array([1 if s == 1 else 0 for s in row.sequence], np.int64)
            allowed[0] = 1  # [CLS]
            start = np.where(allowed == 0, -10000.0, outputs["start_logits"][index][:n])
            end = np.where(allowed == 0, -10000.0, outputs["end_logits"][index][:n])
            start, end = base.softmax(start), base.softmax(end)
            if options["handle_impossible_answer"]:
                min_null = min(min_null, float(start[0] * end[0]))
            start[0] = end[0] = 0.0
            for s, e, score in zip(*decode_spans(start, end, pre_top_k,
                                                 options["max_answer_len"], allowed)):
                first, last = self.char_span(row, int(s), int(e), align)
                text = context[first:last]
                same = next((a for a in answers if a["answer"].lower() == text.lower()), None)
                if same is not None:
                    same["score"] += float(score)
                else:
                    answers.append({"score": float(score), "start": first, "end": last,
                                    "answer": text})
        if options["handle_impossible_answer"]:
            answers.append({"score": min_null, "start": 0, "end": 0, "answer": ""})
        answers = sorted(answers, key=lambda a: a["score"], reverse=True)[:top_k]
        return answers[0] if len(answers) == 1 else answers

    @staticmethod
    def char_span(row: Packed, s: int, e: int, align: bool):
        """Character [start, end) of tokens s..e: their words' with `align`, else their own."""
        if align and row.words[s] >= 0 and row.words[e] >= 0 and row.sequence[s] == 1:
            spans = row.word_spans[1]
            return spans[row.words[s]][0], spans[row.words[e]][1]
        return row.offsets[s][0], row.offsets[e][1]
