"""run_race.py's data sets: RACE and C3, as `albert_tf.tasks.registry.DataSet` records.

Each record's `settings["data"]` is a `MultipleChoiceData`: what the job, its options,
the prediction files, the `evaluate` command and the export ask of the data set (reading
a split, its feature cache, the choice mask, the prediction records, the accuracies, the
serving module), so none of them branches on the data set's name. Its `reader` is the
object's `read(data_dir, split, options=None, tokenizer=None) -> examples`.
Adding a data set is one subclass and one `register` call.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from albert_tf.errors import UserValueError
from albert_tf.tasks import registry
from albert_tf.tasks.multiple_choice import c3, features, metrics, postprocess, race

FAMILY = "multiple_choice"


class MultipleChoiceData:
    """One data set's behaviour (subclasses: `RaceData`, `C3Data`).

    display: its name in logs and warnings; levels: the level names `level_ids` number
    (`features.LEVELS` / `features.SUBSETS`); choice_labels: the choices' names in the
    collapse warning; masked: the records carry `choice_mask` (questions with fewer
    than 4 options); uses_qa_length: --max_qa_length applies; ensure_ascii: how
    predictions.jsonl writes non-ASCII text; submission_file: an extra prediction file;
    level_field: the predictions.jsonl field naming the question's level (with `id` and
    `question_index` it names the question: C3's document ids repeat across subsets).
    """

    display: str
    levels: Tuple[str, ...]
    choice_labels: Tuple[str, ...]
    masked: bool = False
    uses_qa_length: bool = False
    ensure_ascii: bool = True
    submission_file: Optional[str] = None
    level_field: str = "level"

    def read(self, data_dir: str, split: str, options=None, tokenizer=None) -> List:
        """The examples of `split` (`options`: the job's, None for the defaults;
        `tokenizer`: normalises the texts for its vocabulary when given)."""
        raise NotImplementedError

    def prepare_cache(self, path: str, examples: Sequence, tokenizer, options,
                      shuffle_seed: Optional[int], owned: bool) -> Dict:
        """Writes (or reuses) the split's TFRecord cache; returns its description."""
        raise NotImplementedError

    def validate(self, options) -> None:
        """Raises ValueError naming the flag that does not fit this data set."""
        raise NotImplementedError

    def check_flags(self, values) -> None:
        """Refuses flags given on the command line that this data set does not use."""

    def prediction_records(self, examples: Sequence, probabilities: np.ndarray) -> List[Dict]:
        """predictions.jsonl's records (`postprocess`)."""
        raise NotImplementedError

    def prediction_index(self, record: Dict) -> int:
        """The option index a predictions.jsonl record chose (ValueError if malformed)."""
        raise NotImplementedError

    def submission(self, examples: Sequence, records: Sequence[Dict]) -> Optional[str]:
        """The text of `submission_file`, if the data set has one."""
        return None

    def accuracy(self, examples: Sequence, predictions: Sequence[int]) -> Dict[str, float]:
        """Accuracy overall and per level of the chosen option indices (RACE:
        `metrics.accuracy_by_level`; C3: the same by subset, `metrics.accuracy_by_subset`)."""
        return metrics.accuracy_by_level(examples, predictions, self.levels)

    def serving_module(self, model, tokenizer, max_seq_length: int, max_qa_length: int,
                       layer_norm: str):
        """The raw-text SavedModel's module (`export`)."""
        raise NotImplementedError


class RaceData(MultipleChoiceData):
    """RACE: options A-D, levels middle and high, --max_qa_length, --high_only/--middle_only."""

    display = "RACE"
    levels = features.LEVELS
    choice_labels = features.LABELS
    uses_qa_length = True

    def read(self, data_dir, split, options=None, tokenizer=None):
        return race.read_examples(
            data_dir, split, getattr(options, "do_lower_case", True),
            high_only=getattr(options, "high_only", False),
            middle_only=getattr(options, "middle_only", False),
            normalize=tokenizer.preprocess if tokenizer is not None else None)

    def prepare_cache(self, path, examples, tokenizer, options, shuffle_seed, owned):
        return features.prepare_race_cache(path, examples, tokenizer, options.max_seq_length,
                                           options.max_qa_length, shuffle_seed, owned)

    def validate(self, options):
        race.levels_for(options.high_only, options.middle_only)
        features.validate_race_lengths(options.max_seq_length, options.max_qa_length)

    def prediction_records(self, examples, probabilities):
        return postprocess.prediction_records(examples, probabilities)

    def prediction_index(self, record):
        if record.get("prediction") not in self.choice_labels:
            raise ValueError(f"'prediction' must be one of {', '.join(self.choice_labels)}, "
                             f"got {record.get('prediction')!r}")
        return self.choice_labels.index(record["prediction"])

    def serving_module(self, model, tokenizer, max_seq_length, max_qa_length, layer_norm):
        # export needs TensorFlow; reading the registry does not.
        from albert_tf.tasks.multiple_choice import export

        return export.RaceServingModule(model, tokenizer, max_seq_length, max_qa_length,
                                        layer_norm=layer_norm)


class C3Data(MultipleChoiceData):
    """C3: 2-4 options per question (the absent ones masked), subsets C3-M and C3-D,
    CLUE's submission file."""

    display = "C3"
    levels = features.SUBSETS
    choice_labels = tuple(f"option {choice}" for choice in range(features.NUM_CHOICES))
    masked = True
    ensure_ascii = False  # C3's texts stay readable Chinese
    submission_file = postprocess.C3_SUBMISSION_FILE
    level_field = "subset"

    def read(self, data_dir, split, options=None, tokenizer=None):
        return c3.read_examples(data_dir, split)  # the features normalise the texts

    def prepare_cache(self, path, examples, tokenizer, options, shuffle_seed, owned):
        return features.prepare_c3_cache(path, examples, tokenizer, options.max_seq_length,
                                         shuffle_seed, owned)

    def validate(self, options):
        if options.high_only or options.middle_only:
            raise ValueError("--high_only and --middle_only are RACE's levels; C3 reads "
                             "C3-M and C3-D (remove a file from --data_dir to read one)")
        features.validate_c3_length(options.max_seq_length)

    def check_flags(self, values):
        if values["max_qa_length"].present:
            raise UserValueError("--max_qa_length is RACE's; --task_name=c3 truncates "
                                 "context, question and option together as C3's baseline")

    def prediction_records(self, examples, probabilities):
        return postprocess.c3_prediction_records(examples, probabilities)

    def prediction_index(self, record):
        choice = record.get("prediction")
        if isinstance(choice, bool) or not isinstance(choice, int) \
                or not 0 <= choice < features.NUM_CHOICES:
            raise ValueError(f"'prediction' must be an option index 0-"
                             f"{features.NUM_CHOICES - 1}, got {choice!r}")
        return choice

    def submission(self, examples, records):
        return postprocess.c3_submission(examples, records)

    def serving_module(self, model, tokenizer, max_seq_length, max_qa_length, layer_norm):
        from albert_tf.tasks.multiple_choice import export  # TensorFlow, as RaceData's

        return export.C3ServingModule(model, tokenizer, max_seq_length, layer_norm=layer_norm)


def _register(data: MultipleChoiceData, name: str, labels, language: str,
              description: str, default_rules: Tuple[str, ...] = ()) -> registry.DataSet:
    return registry.register(registry.DataSet(
        name=name, family=FAMILY, reader=data.read, metric=metrics.METRIC, labels=labels,
        language=language, settings={"data": data}, description=description,
        default_rules=default_rules))


RACE = _register(RaceData(), "race", features.LABELS, "en",
                 "RACE: English exam reading comprehension, 4 options (A-D) per question.",
                 default_rules=("max_qa_length:race",))  # it follows --max_seq_length
C3 = _register(C3Data(), "c3", None, "zh",
               "C3: Chinese reading comprehension (C3-M, C3-D), 2-4 options per question.")


def data_of(task_name: str) -> MultipleChoiceData:
    """The behaviour of data set `task_name` (UserValueError naming --task_name if unknown)."""
    return registry.get(FAMILY, task_name).settings["data"]
