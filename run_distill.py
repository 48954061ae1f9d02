r"""Distil a fine-tuned ALBERT into a smaller student (docs/fast_inference.md).

The teacher (--teacher) is any fine-tuned text classifier, NER tagger, multiple-choice
(RACE / C3) model or SQuAD v1.1 / CMRC 2018 reader albert_tf reads: a run_classifier.py,
run_ner.py, run_race.py (or run_squad.py's export) run or export directory, a Hugging Face
directory with its head, or a .keras file. Its family chooses the job and the flags:
run_classifier.py's, run_ner.py's, run_race.py's or run_squad.py's (give --teacher to see
them in --help). The student (--student) is `tiny` (4 layers,
H=312, as brightmart's albert_tiny), `small` (6 layers, H=384) or `layers:k` (the
teacher's own config at k layers, starting from the teacher's weights: ALBERT shares the
layer). It reads the teacher's vocabulary, and is trained on --task_name's training set
with the loss

    --distill_alpha x the labels' loss + (1 - --distill_alpha) x T^2 x KL(teacher || student)
      + --hidden_weight x the hidden states' squared difference (TinyBERT)
      + --attention_weight x the last layer's self-attention relations' KL (MiniLMv2)

at temperature T = --temperature (per example; per labelled word for NER; the start and
end positions' mean for SQuAD). The hidden
states of a student narrower or wider than its teacher are compared through a learned
projection. Everything else is the family's CLI: the flags (less
--albert_config_file and the vocabulary, which come from the teacher; a teacher run
without an export holds no vocabulary: give its --spm_model_file / --vocab_file), the evaluation,
the best checkpoint, the prediction files and the exports (--export_dir: SavedModel,
model.onnx, model.tflite, int8), so that pipelines and `python -m albert_tf.predict` read
the student as any classifier.

Example (the SST-2 teacher of run_classifier.py, two layers):
  python run_distill.py --teacher=runs/sst2 --student=layers:2 --task_name=sst-2 \
    --data_dir=glue_data --output_dir=runs/sst2_student --do_train --do_eval \
    --max_seq_length=128 --train_batch_size=32 --learning_rate=1e-4 --train_step=1000 \
    --export_dir=runs/sst2_student/export
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf.kernels import onednn  # noqa: E402

onednn.configure()  # before TensorFlow is imported: it reads the oneDNN switch once

from absl import flags, logging  # noqa: E402

from albert_tf import cli, cli_finetuning, cli_options, errors  # noqa: E402
from albert_tf.distillation import job as jobs, teacher as teachers  # noqa: E402

FLAGS = flags.FLAGS


def _given(name: str, argv) -> str:
    """The value of --name in argv, before the flags are parsed ('' when absent)."""
    for index, argument in enumerate(argv):
        if argument.startswith(f"--{name}="):
            return argument.split("=", 1)[1]
        if argument == f"--{name}" and index + 1 < len(argv):
            return argv[index + 1]
    return ""


# The teacher's family decides the flags (its CLI's), so it is read before they are.
JOB = jobs.JOBS[teachers.teacher_family(_given("teacher", sys.argv[1:]))]
cli_finetuning.define_flags(JOB)
for module in (cli_options, cli_finetuning, cli):
    flags.adopt_module_key_flags(module)  # list them in --help


def main(argv):
    """Reads the teacher, writes the student's config and vocabulary into
    <output_dir>/student/, then runs the family's CLI main on them."""
    from albert_tf.distillation import students, teacher as teachers

    cli.require("teacher", "output_dir")
    if FLAGS.albert_config_file:
        raise errors.UserValueError("--albert_config_file: the student's config comes from "
                                    "the teacher and --student")
    given = FLAGS.spm_model_file or FLAGS.vocab_file
    # A teacher run without an export holds no vocabulary: the one given is its.
    teacher = teachers.load_teacher(FLAGS.teacher, given)
    _fit_sequence_length(teacher)
    config = students.student_config(teacher.config, FLAGS.student)
    directory = os.path.join(FLAGS.output_dir, "student")
    if not given:  # the teacher's (a vocabulary given is checked against it by the job)
        vocabulary = teacher.write_vocabulary(directory)
        FLAGS.spm_model_file = vocabulary if teacher.tokenizer_kind == "sentencepiece" else None
        FLAGS.vocab_file = vocabulary if teacher.tokenizer_kind == "wordpiece" else None
    os.makedirs(directory, exist_ok=True)
    FLAGS.do_lower_case = teacher.do_lower_case
    FLAGS.albert_config_file = os.path.join(directory, "albert_config.json")
    with open(FLAGS.albert_config_file, "w", encoding="utf-8") as handle:
        json.dump(config.to_dict(), handle, indent=2)
    return cli_finetuning.main(JOB)(argv)


def _fit_sequence_length(teacher) -> None:
    """--max_seq_length, when not given, is at most the teacher's (the family's default may
    be longer than the teacher reads); a given one beyond its positions is one line."""
    positions = teacher.config.max_position_embeddings
    if FLAGS["max_seq_length"].present:
        if FLAGS.max_seq_length > positions:
            raise errors.UserValueError(f"--max_seq_length={FLAGS.max_seq_length} exceeds the "
                                        f"teacher's {positions} positions "
                                        f"(--teacher={FLAGS.teacher})")
    elif FLAGS.max_seq_length > teacher.max_length:
        logging.info("--max_seq_length=%d: the teacher's (the default %d is longer)",
                     teacher.max_length, FLAGS.max_seq_length)
        FLAGS.max_seq_length = teacher.max_length
        FLAGS["max_seq_length"].present = 1  # kept by --hparams too


if __name__ == "__main__":
    cli.run(main, interrupted=lambda: cli.resume_hint(FLAGS.output_dir))
