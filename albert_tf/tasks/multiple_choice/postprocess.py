"""Model outputs -> predictions: probabilities of a cached split, the prediction files.

Output files in `output_dir` (see `write_predictions`):
  predictions.jsonl   RACE: one JSON object per question of the predicted split:
                      {"id", "question_index", "level", "prediction" (A-D),
                       "probabilities" [4], "answer" (A-D or null)}
                      C3: {"id" (document id), "question_index", "subset" ("m"/"d"),
                       "prediction" (option index), "prediction_text",
                       "probabilities" [number of options], "answer" (index or null)}
  predict_results.txt `key = value` accuracies of the predicted split when it has
                      answers (the original's file name)
  c3_predict.json     C3 only: CLUE's submission lines {"id", "label" (option index)}, in
                      the file's question order; id = the question's `id` when the file
                      has one (CLUE's test files), else "<document id>-<question index>"
What differs by data set is asked of its record (`datasets.MultipleChoiceData`).
`score_prediction_file` scores a predictions.jsonl against a split's answers (the
`python -m albert_tf.tasks.multiple_choice evaluate` command).
"""
from __future__ import annotations

import json
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from absl import logging

from albert_tf import fileio
from albert_tf.errors import UserValueError
from albert_tf.tasks import registry
from albert_tf.tasks.multiple_choice import features

PREDICTIONS_FILE = "predictions.jsonl"
PREDICT_RESULTS_FILE = "predict_results.txt"
C3_SUBMISSION_FILE = "c3_predict.json"


def predict_probabilities(strategy, model, path: str, max_seq_length: int, batch_size: int,
                          num_examples: int, masked: bool = False) -> np.ndarray:
    """Probabilities float32 [num_examples, 4] of a cached split, in example order
    (`masked`: C3's records, whose `choice_mask` gives padding options probability 0).
    `strategy`: the tf.distribute.Strategy the model was built under."""
    # TensorFlow only here: writing and scoring prediction files do without it.
    import tensorflow as tf
    from albert_tf.finetuning import predict

    ds = features.dataset(path, max_seq_length, batch_size, is_training=False,
                          num_examples=num_examples, choice_mask=masked)

    def outputs_of(model, batch):
        probabilities = model(batch, training=False)["probabilities"]
        return {"index": batch["example_index"],
                "probabilities": tf.cast(probabilities, tf.float32)}

    outputs = predict.predict_outputs(strategy, model, ds, outputs_of, "questions")
    result = np.full((num_examples, features.NUM_CHOICES), np.nan, np.float32)
    real = outputs["index"] >= 0  # the padding examples of the last batch have index -1
    result[outputs["index"][real]] = outputs["probabilities"][real]
    missing = np.isnan(result).any(axis=1)
    if missing.any():
        raise RuntimeError(f"{path}: no prediction for {int(missing.sum())} of {num_examples} "
                           "examples (is the cache complete?)")
    return result


def prediction_records(examples: Sequence, probabilities: np.ndarray) -> List[Dict]:
    """One RACE predictions.jsonl record per `race.RaceExample` (see the module docstring)."""
    records = []
    for example, probs in zip(examples, probabilities):
        records.append({
            "id": example.example_id, "question_index": example.question_index,
            "level": example.level, "prediction": features.LABELS[int(np.argmax(probs))],
            "probabilities": [float(p) for p in probs],
            "answer": features.LABELS[example.label] if example.label is not None else None})
    return records


def c3_prediction_records(examples: Sequence, probabilities: np.ndarray) -> List[Dict]:
    """One C3 predictions.jsonl record per `c3.C3Example` (see the module docstring)."""
    records = []
    for example, probs in zip(examples, probabilities):
        probs = probs[:len(example.options)]
        choice = int(np.argmax(probs))
        records.append({
            "id": example.example_id, "question_index": example.question_index,
            "subset": example.subset, "prediction": choice,
            "prediction_text": example.options[choice],
            "probabilities": [float(p) for p in probs], "answer": example.label})
    return records


def c3_submission(examples: Sequence, records: Sequence[Dict]) -> str:
    """c3_predict.json's text: CLUE's {"id", "label"} line per question."""
    return "".join(json.dumps({"id": e.submission_id, "label": r["prediction"]},
                              ensure_ascii=False) + "\n" for e, r in zip(examples, records))


def jsonl(records: Sequence[Dict], ensure_ascii: bool = True) -> str:
    """One JSON object per line (`ensure_ascii` False keeps Chinese readable)."""
    return "".join(json.dumps(r, ensure_ascii=ensure_ascii) + "\n" for r in records)


def write_predictions(output_dir: str, examples: Sequence, probabilities: np.ndarray,
                      task_name: str = "race") -> Dict[str, float]:
    """Writes predictions.jsonl (C3: and c3_predict.json), and predict_results.txt when
    the split has answers, atomically; returns the accuracies (empty without answers).
    probabilities: float32 [len(examples), 4]."""
    data = registry.get("multiple_choice", task_name).settings["data"]
    records = data.prediction_records(examples, probabilities)
    submission: Optional[str] = data.submission(examples, records)
    if submission is not None:
        fileio.atomic_write_text(os.path.join(output_dir, data.submission_file), submission)
    accuracies = data.accuracy(examples, [data.prediction_index(r) for r in records])
    fileio.atomic_write_text(os.path.join(output_dir, PREDICTIONS_FILE),
                             jsonl(records, data.ensure_ascii))
    if accuracies:
        lines = [f"{key} = {accuracies[key]}" for key in sorted(accuracies)]
        fileio.atomic_write_text(os.path.join(output_dir, PREDICT_RESULTS_FILE),
                                 "\n".join(lines) + "\n")
        logging.info("prediction accuracy: %s", " | ".join(
            f"{k} {v:.4g}" for k, v in sorted(accuracies.items()) if k.startswith("accuracy")))
    logging.info("wrote %d predictions to %s", len(records),
                 os.path.join(output_dir, PREDICTIONS_FILE))
    return accuracies


def question_key(record) -> tuple:
    """(id, question_index, level) naming a question, of an example or a record's fields."""
    return (str(record[0]), record[1], record[2])


def read_predictions(path: str, data) -> Dict[tuple, Tuple[int, int]]:
    """{(id, question_index, level): (chosen option index, line number)} of a
    predictions.jsonl file; `data` (a `datasets.MultipleChoiceData`) reads each record's
    choice and names its level field. UserValueError "<path>:<line>: ..." for a line that
    is not such a record."""
    import tensorflow as tf  # gfile: local paths and object stores alike

    fields = ("id", "question_index", data.level_field)
    chosen: Dict[tuple, Tuple[int, int]] = {}
    with tf.io.gfile.GFile(path, "rb") as handle:
        lines = handle.read().decode("utf-8", errors="replace").splitlines()
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{line_no}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise UserValueError(f"{where}: not valid JSON ({err.msg} at column "
                                 f"{err.colno})") from None
        if not isinstance(record, dict) or not all(field in record for field in fields):
            raise UserValueError(f"{where}: expected a predictions.jsonl record with "
                                 f"{', '.join(fields)} and prediction")
        try:
            choice = data.prediction_index(record)
        except ValueError as err:
            raise UserValueError(f"{where}: {err}") from None
        key = question_key([record[field] for field in fields])
        if key in chosen:
            raise UserValueError(f"{where}: a second prediction for question {_named(key)} "
                                 f"(first at line {chosen[key][1]})")
        chosen[key] = (choice, line_no)
    return chosen


def _named(key: tuple) -> str:
    return f"{key[0]!r} #{key[1]} ({key[2]})"


def score_prediction_file(task_name: str, data_dir: str, path: str, split: str = "dev"
                          ) -> Dict[str, float]:
    """The accuracies of a predictions.jsonl file on the gold answers of `split`, as
    `write_predictions` computes them (`datasets.MultipleChoiceData.accuracy`).

    Every question of the split needs one prediction and every prediction one question
    (UserValueError naming the file, and the line of an unknown question)."""
    data_set = registry.get("multiple_choice", task_name)
    data = data_set.settings["data"]
    examples = data_set.reader(data_dir, split)
    chosen = read_predictions(path, data)
    keys = [question_key((e.example_id, e.question_index, e.level)) for e in examples]
    unknown = sorted(set(chosen) - set(keys), key=lambda key: chosen[key][1])
    if unknown:
        raise UserValueError(f"{path}:{chosen[unknown[0]][1]}: question {_named(unknown[0])} "
                             f"is not in the {split} split of --data_dir {data_dir} "
                             f"({len(unknown)} unknown questions)")
    missing = [key for key in keys if key not in chosen]
    if missing:
        raise UserValueError(f"{path}: no prediction for question {_named(missing[0])} of the "
                             f"{split} split ({len(missing)} of {len(keys)} questions missing)")
    accuracies = data.accuracy(examples, [chosen[key][0] for key in keys])
    if not accuracies:
        raise UserValueError(f"--data_dir {data_dir}: the {split} split has no answers to "
                             "score against")
    return accuracies
