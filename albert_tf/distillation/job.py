"""run_distill.py's jobs: a family's fine-tuning job (run_classifier.py's, run_ner.py's,
run_race.py's, run_squad.py's) with a student model and the distillation loss. The run directory,
evaluation, best checkpoint, prediction files and exports are the family's, so that
pipelines, predict, ONNX, LiteRT and int8 read the student as any fine-tuned model of it.

`JOBS[family]` is the job of a teacher's family (`teacher.FAMILIES`).
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Dict, List, Optional

from absl import logging

from albert_tf.distillation import objective, students, teacher as teachers
from albert_tf.errors import UserFileNotFoundError, UserValueError
from albert_tf.option_fields import POSITIVE, option
from albert_tf.tasks.classification.job import ClassificationJob, ClassificationOptions
from albert_tf.tasks.multiple_choice.job import MultipleChoiceJob, MultipleChoiceOptions
from albert_tf.tasks.span_qa.job import SpanQaJob, SpanQaOptions
from albert_tf.tasks.tagging.job import TaggingJob, TaggingOptions


@dataclasses.dataclass(kw_only=True)
class DistillationFields:
    """What run_distill.py adds to a family's options: the teacher, the student and the
    loss's settings. `albert_config` is the student's (`students.student_config`)."""

    teacher: str = option(help="The fine-tuned teacher: a run or export directory, a "
                               "Hugging Face directory with a head, or a .keras file of a "
                               "text classifier, NER tagger, multiple-choice model or "
                               "SQuAD v1.1 / CMRC 2018 reader.")
    student: str = option("tiny", help="tiny (4 layers, H=312), small (6 layers, H=384), or "
                                       "layers:k (the teacher's own layer run k times, "
                                       "starting from the teacher's weights).")
    temperature: float = option(2.0, check=POSITIVE,
                                help="Softmax temperature of the soft targets.")
    distill_alpha: float = option(0.5, help="Weight of the labels' loss in [0, 1]; the "
                                            "teacher's soft targets get 1 - it.")
    hidden_weight: float = option(0.0, help="Weight of the hidden-state loss (TinyBERT: each "
                                            "student layer against a teacher layer, through "
                                            "a learned projection when the widths differ); "
                                            "0: off.")
    attention_weight: float = option(0.0, help="Weight of the self-attention relations' "
                                               "loss (MiniLMv2: the last layer's query, key "
                                               "and value relations, any widths); 0: off.")

    transfer_file: Optional[str] = option(
        None, help="Unlabelled text the student also learns from, with the teacher's soft "
                   "targets alone: one example per line (a pair task's two texts separated "
                   "by a tab). Text classification.")

    def validate_distillation(self) -> None:
        if not 0.0 <= self.distill_alpha <= 1.0:
            raise ValueError(f"--distill_alpha must be in [0, 1], got {self.distill_alpha}")
        for name in ("hidden_weight", "attention_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"--{name} must be >= 0, got {getattr(self, name)}")


def _options_class(family_options: type) -> type:
    """The family's options plus `DistillationFields`."""

    @dataclasses.dataclass(kw_only=True)
    class Options(DistillationFields, family_options):
        def validate(self, num_replicas: int = 1) -> None:
            super().validate(num_replicas)
            self.validate_distillation()

    Options.__name__ = Options.__qualname__ = "Distillation" + family_options.__name__
    return Options


class Distillation:
    """What distilling adds to a family's job (the first base of each job below): the
    teacher, its checks, the student made from it, and the loss."""

    FAMILY = "classification"

    @property
    def teacher(self) -> teachers.Teacher:
        return teachers.load_teacher(self.options.teacher,
                                     self.options.spm_model_file or self.options.vocab_file)

    def validate(self, num_replicas: int) -> None:
        super().validate(num_replicas)
        teacher = self.teacher
        if teacher.family != self.FAMILY:
            raise UserValueError(
                f"--teacher={self.options.teacher} is a "
                f"{teachers.FAMILY_MODELS[teacher.family]}; this job distils a "
                f"{teachers.FAMILY_MODELS[self.FAMILY]} (run_distill.py reads the family "
                f"from --teacher)")
        self.check_teacher_outputs(teacher)
        if self.options.transfer_file:
            self.check_transfer_file()
        given = self.options.spm_model_file or self.options.vocab_file
        with open(given, "rb") as handle:
            if handle.read() != teacher.vocabulary:
                raise UserValueError(f"{given}: a different vocabulary from the teacher's; "
                                     f"the student reads the teacher's tokens (leave "
                                     f"--spm_model_file / --vocab_file out)")
        # A student made from its teacher starts at its final loss: a spike must also
        # exceed chance level (the divergence guard's floor), not only that first loss.
        chance = self.chance_loss()
        if chance is not None:
            self.options.divergence = dataclasses.replace(self.options.divergence,
                                                          loss_floor=chance)

    def check_teacher_outputs(self, teacher: teachers.Teacher) -> None:
        """One line when the teacher's outputs do not match the task's."""

    def check_transfer_file(self) -> None:
        """One line when --transfer_file cannot be read by this family."""
        raise UserValueError(f"--transfer_file: unlabelled transfer text is read for text "
                             f"classification teachers; this teacher is a "
                             f"{teachers.FAMILY_MODELS[self.FAMILY]}")

    def chance_loss(self) -> Optional[float]:
        """The loss of a uniform guess (None: no such level, regression)."""
        return None

    def build_model(self, dtype_policy: str = "float32"):
        student = super().build_model(dtype_policy)
        student.build()
        students.initialise_from_teacher(student, self.teacher.network)
        return student

    def soft_kind(self) -> str:
        return "single_label"

    def objective(self):
        teacher = self.teacher
        options = self.options
        with self.strategy.scope():  # the hidden-state projection's weights
            transfer = objective.TransferTerms(teacher.config, options.albert_config,
                                               options.hidden_weight, options.attention_weight)
            return objective.DistillationObjective(
                super().objective(), teacher.network,
                objective.family_targets(teacher.network, self.soft_kind()),
                temperature=options.temperature, alpha=options.distill_alpha,
                transfer=transfer)


def _labels_line(teacher: teachers.Teacher, option: str, theirs, ours) -> str:
    return (f"--teacher={teacher.path} predicts {theirs}; {option} has {ours}: the "
            f"student's outputs must be the teacher's, in the same order")


class ClassificationDistillationJob(Distillation, ClassificationJob):
    """run_distill.py with a text classifier teacher (run_classifier.py's job)."""

    OPTIONS = _options_class(ClassificationOptions)
    COMMAND_LINE = dataclasses.replace(
        ClassificationJob.COMMAND_LINE, required=("teacher", "data_dir", "task_name",
                                                  "output_dir"))

    def check_teacher_outputs(self, teacher):
        ours = None if self.regression else list(self.spec.labels)
        theirs = teacher.labels or None
        if ours and theirs == [f"LABEL_{index}" for index in range(len(ours))]:
            # A Hugging Face head without label names: its outputs are read in order.
            logging.info("the teacher's labels are unnamed (LABEL_0..%d): read as %s, in "
                         "that order", len(ours) - 1, ours)
            return
        if theirs != ours:
            raise UserValueError(_labels_line(
                teacher, f"--task_name={self.options.task_name}",
                teacher.labels or "a score", ours or "a score"))

    def check_transfer_file(self):
        path = self.options.transfer_file
        if not os.path.isfile(path):
            raise UserFileNotFoundError(f"--transfer_file={path}: no such file")
        if self.options.long_text_rule().mode != "truncate":
            raise UserValueError("--transfer_file reads its texts with --long_text=truncate")

    def transfer_examples(self) -> List:
        """The transfer file's examples (read once): one per non-blank line, no label."""
        return self.once("transfer", lambda: read_transfer_file(self.options.transfer_file,
                                                                self.spec))

    def transfer_cache(self) -> str:
        """The transfer examples' feature cache (every is_real_example 0), built once."""
        return self.once("transfer cache", lambda: self.feature_cache(
            "transfer", self.transfer_examples(), unlabelled=True))

    def prepare(self) -> None:
        super().prepare()
        if self.options.do_train and self.options.transfer_file:
            self.transfer_cache()
            logging.info("transfer text: %d unlabelled examples from %s (the teacher's soft "
                         "targets alone)", len(self.transfer_examples()),
                         self.options.transfer_file)

    def training_records(self):
        # Labelled rows and transfer rows mix in every batch, in proportion to their counts.
        paths, count = super().training_records()
        if not self.options.transfer_file:
            return paths, count
        return paths + [self.transfer_cache()], count + len(self.transfer_examples())

    def chance_loss(self):
        if self.regression:
            return None
        return math.log(2.0) if self.multi_label else math.log(len(self.spec.labels))

    def soft_kind(self):
        return ("regression" if self.regression else "multi_label" if self.multi_label
                else "single_label")


class TaggingDistillationJob(Distillation, TaggingJob):
    """run_distill.py with a NER tagger teacher (run_ner.py's job; a CRF student too)."""

    FAMILY = "tagging"
    OPTIONS = _options_class(TaggingOptions)
    COMMAND_LINE = dataclasses.replace(
        TaggingJob.COMMAND_LINE, required=("teacher", "task_name", "data_dir", "output_dir"))

    def check_teacher_outputs(self, teacher):
        if list(teacher.labels or ()) != list(self.labels):
            raise UserValueError(_labels_line(
                teacher, f"--task_name={self.options.task_name} (tag scheme "
                         f"{self.scheme})", teacher.labels, self.labels))

    def chance_loss(self):
        return math.log(len(self.labels))


class MultipleChoiceDistillationJob(Distillation, MultipleChoiceJob):
    """run_distill.py with a RACE / C3 teacher (run_race.py's job)."""

    FAMILY = "multiple_choice"
    OPTIONS = _options_class(MultipleChoiceOptions)
    COMMAND_LINE = dataclasses.replace(
        MultipleChoiceJob.COMMAND_LINE, required=("teacher", "data_dir", "output_dir"))

    def chance_loss(self):
        from albert_tf.tasks.multiple_choice.features import NUM_CHOICES

        return math.log(NUM_CHOICES)


class SpanQaDistillationJob(Distillation, SpanQaJob):
    """run_distill.py with a SQuAD v1.1 / CMRC 2018 reader teacher (run_squad.py's job)."""

    FAMILY = "span_qa"
    OPTIONS = _options_class(SpanQaOptions)
    COMMAND_LINE = dataclasses.replace(SpanQaJob.COMMAND_LINE,
                                       required=("teacher", "output_dir"))

    def check_teacher_outputs(self, teacher):
        if self.v2:
            raise UserValueError("--version_2_with_negative: a SQuAD v2.0 student needs a "
                                 "v2.0 teacher (its answerability head), which run_distill.py "
                                 "does not read yet; distil a v1.1 / CMRC 2018 reader")

    def chance_loss(self):
        return math.log(self.options.max_seq_length)  # a uniform guess over the positions


JOBS: Dict[str, type] = {"classification": ClassificationDistillationJob,
                         "tagging": TaggingDistillationJob,
                         "multiple_choice": MultipleChoiceDistillationJob,
                         "span_qa": SpanQaDistillationJob}
def read_transfer_file(path: str, spec) -> List:
    """The unlabelled examples of a transfer file for task `spec`: one per non-blank line,
    a pair task's two texts separated by a tab; one line naming file and line otherwise."""
    from albert_tf.tasks.classification.glue import InputExample

    pair = spec.is_pair
    examples = []
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                line = line.rstrip("\r\n")
                if not line.strip():
                    continue
                fields = line.split("\t")
                if len(fields) != (2 if pair else 1):
                    wanted = ("two texts (a sentence pair) separated by a tab" if pair
                              else "one text with no tab")
                    raise UserValueError(f"{path}:{number}: {len(fields)} tab-separated "
                                         f"fields; {spec.name} reads {wanted} per line")
                examples.append(InputExample(f"transfer-{number}", fields[0],
                                             fields[1] if pair else None, None,
                                             f"{path}:{number}"))
    except UnicodeDecodeError as error:
        raise UserValueError(f"{path}: not UTF-8 text ({error.reason} at byte "
                             f"{error.start})") from None
    if not examples:
        raise UserValueError(f"{path}: no text (one example per line)")
    return examples


# The classification job under its first name.
DistillationJob = ClassificationDistillationJob
DistillationOptions = ClassificationDistillationJob.OPTIONS
