r"""Fine-tune ALBERT on GLUE-style classification and regression (the original's flags).

Tasks: cola, sst-2, mrpc, sts-b, qqp, mnli, mismnli, qnli, rte, wnli (files and
columns as the original's processors); the CLUE tasks afqmc, tnews, iflytek,
ocnli, cmnli, csl (JSON lines as CLUE's baseline reads them; --do_predict also
writes the CLUE submission <task>_predict.json); or `custom` for your own
TSV/CSV/TXT files (--text_a_column, --text_b_column, --label_column).

The vocabulary is --spm_model_file (SentencePiece, the English models) or
--vocab_file (WordPiece vocab.txt, the Chinese models); SentencePiece wins
when both are given, as in the original. Every saved checkpoint is
evaluated on the dev set; the best (matthew_corr for CoLA, pearson for STS-B,
eval_accuracy otherwise) is kept as model.ckpt-best and used for prediction
and for the SavedModel written to --export_dir (signatures `serving_default`
on raw text and `serve_tokens` on token ids).

Additions to the original's flags: --classifier_dropout, --strategy,
--mixed_precision, --jit_compile, --gradient_accumulation_steps, --seed,
--export_dir's raw-text signature, the custom-task flags.

Example (MRPC with the run_glue.sh hyperparameters):
  python run_classifier.py --task_name=mrpc --data_dir=glue_data \
    --spm_model_file=albert_base/30k-clean.model \
    --albert_config_file=albert_base/albert_config.json \
    --init_checkpoint=albert_base/model.ckpt-best --output_dir=runs/mrpc \
    --do_train --do_eval --do_predict --max_seq_length=512 --train_batch_size=32 \
    --learning_rate=2e-5 --train_step=800 --warmup_step=200 --save_checkpoints_steps=100 \
    --export_dir=runs/mrpc/export

Example (AFQMC with the official albert_base_zh, WordPiece):
  python run_classifier.py --task_name=afqmc --data_dir=clue_data \
    --vocab_file=albert_base_zh/vocab_chinese.txt \
    --albert_config_file=albert_base_zh/albert_config.json \
    --init_checkpoint=albert_base_zh --output_dir=runs/afqmc \
    --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=32 \
    --learning_rate=2e-5 --train_step=3000 --warmup_step=300 --save_checkpoints_steps=500
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf.kernels import onednn  # noqa: E402

onednn.configure()  # before TensorFlow is imported: it reads the oneDNN switch once

from absl import flags  # noqa: E402

from albert_tf import cli, cli_finetuning, cli_options  # noqa: E402
from albert_tf.tasks.classification.job import ClassificationJob  # noqa: E402

FLAGS = flags.FLAGS
cli_finetuning.define_flags(ClassificationJob)
for module in (cli_options, cli_finetuning, cli):
    flags.adopt_module_key_flags(module)  # list them in --help

if __name__ == "__main__":
    cli.run(cli_finetuning.main(ClassificationJob), interrupted=lambda: cli.resume_hint(FLAGS.output_dir))
