"""run_distill.py's job: run_classifier.py's job with a student model and the distillation
loss. The run directory, evaluation, best checkpoint, prediction files and exports are the
classification job's, so that pipelines, predict, ONNX, LiteRT and int8 read the student
as any fine-tuned classifier."""
from __future__ import annotations

import dataclasses
import math

from albert_tf.distillation import objective, students, teacher as teachers
from albert_tf.errors import UserValueError
from albert_tf.finetuning.command_line import CommandLine
from albert_tf.option_fields import POSITIVE, option
from albert_tf.tasks.classification.job import ClassificationJob, ClassificationOptions


@dataclasses.dataclass(kw_only=True)
class DistillationOptions(ClassificationOptions):
    """run_classifier.py's options plus the teacher, the student and the loss's settings.
    `albert_config` is the student's (`students.student_config`)."""

    teacher: str = option(help="The fine-tuned teacher: a run or export directory, a "
                               "Hugging Face directory with a classification head, or a "
                               ".keras file.")
    student: str = option("tiny", help="tiny (4 layers, H=312), small (6 layers, H=384), or "
                                       "layers:k (the teacher's own layer run k times, "
                                       "starting from the teacher's weights).")
    temperature: float = option(2.0, check=POSITIVE,
                                help="Softmax temperature of the soft targets.")
    distill_alpha: float = option(0.5, help="Weight of the labels' loss in [0, 1]; the "
                                            "teacher's soft targets get 1 - it.")

    def validate(self, num_replicas: int) -> None:
        super().validate(num_replicas)
        if not 0.0 <= self.distill_alpha <= 1.0:
            raise ValueError(f"--distill_alpha must be in [0, 1], got {self.distill_alpha}")


class DistillationJob(ClassificationJob):
    """The classification job whose model is the student (see the module docstring)."""

    OPTIONS = DistillationOptions
    COMMAND_LINE = CommandLine(
        required=("teacher", "data_dir", "task_name", "output_dir"),
        hparams_task=lambda values: values.task_name,
        default_rules=lambda values: ["eval_batch_size:8", "predict_batch_size:8"])

    @property
    def teacher(self) -> teachers.Teacher:
        return teachers.load_teacher(self.options.teacher,
                                     self.options.spm_model_file or self.options.vocab_file)

    def validate(self, num_replicas: int) -> None:
        super().validate(num_replicas)
        teacher = self.teacher
        if (teacher.labels or None) != (None if self.regression else list(self.spec.labels)):
            raise UserValueError(f"--teacher={self.options.teacher} predicts "
                                 f"{teacher.labels or 'a score'}; --task_name="
                                 f"{self.options.task_name} has "
                                 f"{'a score' if self.regression else list(self.spec.labels)}")
        given = self.options.spm_model_file or self.options.vocab_file
        with open(given, "rb") as handle:
            if handle.read() != teacher.vocabulary:
                raise UserValueError(f"{given}: a different vocabulary from the teacher's; "
                                     f"the student reads the teacher's tokens (leave "
                                     f"--spm_model_file / --vocab_file out)")
        # A student made from its teacher starts at its final loss: a spike must also
        # exceed chance level (the divergence guard's floor), not only that first loss.
        if not self.regression:
            chance = math.log(2.0) if self.multi_label else math.log(len(self.spec.labels))
            self.options.divergence = dataclasses.replace(self.options.divergence,
                                                          loss_floor=chance)

    def build_model(self, dtype_policy: str = "float32"):
        student = super().build_model(dtype_policy)
        student.build()
        students.initialise_from_teacher(student, self.teacher.network)
        return student

    def objective(self):
        kind = ("regression" if self.regression else "multi_label" if self.multi_label
                else "single_label")
        return objective.DistillationObjective(self.teacher.network, kind,
                                               self.options.temperature,
                                               self.options.distill_alpha)
