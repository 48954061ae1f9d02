"""SQuAD v1.1 / v2.0 JSON reading.

`read_squad_examples` turns a SQuAD JSON file into `SquadExample`s, one per
question, in file order. Bad input raises `SquadFormatError` naming the file
and the question id (or the article/paragraph position when there is no id).
"""
from __future__ import annotations

import dataclasses
import json
from typing import List, Optional, Tuple

import tensorflow as tf

from albert_tf.errors import UserError, UserFileNotFoundError


class SquadFormatError(UserError, ValueError):
    """A SQuAD JSON file does not have the expected structure."""


@dataclasses.dataclass
class SquadExample:
    """One question on one paragraph.

    answers: every gold (text, answer_start) pair, answer_start a character
      offset into `paragraph_text` (empty for unanswerable v2 questions).
    plausible_answers: v2.0's `plausible_answers` of unanswerable questions.
    orig_answer_text / start_position: the training target (the first gold
      answer; "" and -1 when impossible or when there is no answer).
    """

    qas_id: str
    question_text: str
    paragraph_text: str
    answers: List[Tuple[str, int]] = dataclasses.field(default_factory=list)
    is_impossible: bool = False
    plausible_answers: List[Tuple[str, int]] = dataclasses.field(default_factory=list)

    @property
    def orig_answer_text(self) -> str:
        return "" if self.is_impossible or not self.answers else self.answers[0][0]

    @property
    def start_position(self) -> int:
        return -1 if self.is_impossible or not self.answers else self.answers[0][1]


def _answers(items, where: str) -> List[Tuple[str, int]]:
    out = []
    for answer in items or []:
        try:
            text, start = answer["text"], int(answer["answer_start"])
        except (KeyError, TypeError, ValueError) as err:
            raise SquadFormatError(f"{where}: answer {answer!r} needs 'text' and an integer "
                                   "'answer_start'") from err
        out.append((text, start))
    return out


def load_squad_json(input_file: str) -> list:
    """The `data` list (articles) of a SQuAD JSON file."""
    try:
        with tf.io.gfile.GFile(input_file, "r") as handle:
            dataset = json.load(handle)
    except json.JSONDecodeError as err:
        raise SquadFormatError(f"{input_file}: not valid JSON ({err})") from err
    except tf.errors.NotFoundError as err:
        raise UserFileNotFoundError(f"{input_file}: no such file") from err
    except tf.errors.FailedPreconditionError as err:  # e.g. a directory
        raise UserFileNotFoundError(f"{input_file}: not a readable file ({err.message})") from err
    except UnicodeDecodeError as err:
        raise SquadFormatError(f"{input_file}: not UTF-8 JSON ({err})") from err
    if not isinstance(dataset, dict) or not isinstance(dataset.get("data"), list):
        raise SquadFormatError(f"{input_file}: expected a JSON object with a 'data' list "
                               "(SQuAD format)")
    return dataset["data"]


def read_squad_examples(input_file: str, is_training: bool = False,
                        version_2_with_negative: bool = False,
                        data: Optional[list] = None) -> List[SquadExample]:
    """Reads every question of a SQuAD v1.1 / v2.0 file.

    For training, an answerable question needs at least one answer (the first
    is the target; the original requires exactly one and raises otherwise, which
    would refuse dev-style files). `is_impossible` is read for v2.0 files;
    without `version_2_with_negative` an impossible question is an error in
    training (SQuAD v1 cannot learn "no answer").
    """
    data = load_squad_json(input_file) if data is None else data
    examples: List[SquadExample] = []
    seen = set()
    for a_index, article in enumerate(data):
        for p_index, paragraph in enumerate(article.get("paragraphs", [])):
            where = f"{input_file}: article {a_index} paragraph {p_index}"
            context = paragraph.get("context")
            if not isinstance(context, str):
                raise SquadFormatError(f"{where}: missing 'context' string")
            for qa in paragraph.get("qas", []):
                qid = qa.get("id")
                if not isinstance(qid, str) or not qid:
                    raise SquadFormatError(f"{where}: a question has no 'id'")
                q_where = f"{input_file}: question id {qid}"
                if qid in seen:
                    raise SquadFormatError(f"{q_where}: duplicate question id")
                seen.add(qid)
                question = qa.get("question")
                if not isinstance(question, str):
                    raise SquadFormatError(f"{q_where}: missing 'question' string")
                impossible = bool(qa.get("is_impossible", False))
                answers = _answers(qa.get("answers"), q_where)
                for text, start in answers:
                    if start < 0 or start + len(text) > len(context):
                        raise SquadFormatError(
                            f"{q_where}: answer {text!r} at answer_start {start} lies outside "
                            f"the {len(context)}-character context")
                if is_training:
                    if impossible and not version_2_with_negative:
                        raise SquadFormatError(
                            f"{q_where}: is_impossible question in SQuAD v1 training data "
                            "(set --version_2_with_negative for SQuAD v2.0)")
                    if not impossible and not answers:
                        raise SquadFormatError(f"{q_where}: answerable training question "
                                               "without answers")
                examples.append(SquadExample(
                    qas_id=qid, question_text=question, paragraph_text=context,
                    answers=[] if impossible else answers, is_impossible=impossible,
                    plausible_answers=_answers(qa.get("plausible_answers"), q_where)))
    return examples


def cjk_fraction(data: list) -> float:
    """Share of the non-whitespace characters of all contexts that are CJK ideographs.

    `data`: the `data` list of a SQuAD-format file. CJK ideographs are the
    original BERT's `_is_chinese_char` ranges (`tokenization.is_cjk_char`);
    punctuation counts as non-CJK. 0.0 for a file without context text.
    """
    from albert_tf.tokenization import is_cjk_char

    cjk = total = 0
    for article in data:
        for paragraph in article.get("paragraphs", []):
            context = paragraph.get("context")
            if not isinstance(context, str):
                continue
            for ch in context:
                if not ch.isspace():
                    total += 1
                    cjk += is_cjk_char(ord(ch))
    return cjk / total if total else 0.0
