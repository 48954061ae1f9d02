r"""Fine-tune ALBERT on SQuAD v1.1 or v2.0 (the original run_squad_v1.py / run_squad_v2.py).

Flags follow the original scripts; --version_2_with_negative selects v2.0 (the
XLNet-style head with answerability). Additions: --vocab_file (a WordPiece
vocabulary: the Chinese models, CMRC 2018; --spm_model_file wins when both are
given), --metric, --null_score_diff_threshold, --export_dir, --strategy,
--mixed_precision, --jit_compile, --gradient_accumulation_steps, --seed.
Feature caches are plain TFRecords (--train_feature_file /
--predict_feature_file, default in --output_dir).

Example (SQuAD v2.0):
  python run_squad.py --albert_config_file=albert_base/albert_config.json \
    --spm_model_file=albert_base/30k-clean.model --init_checkpoint=albert_base \
    --train_file=train-v2.0.json --predict_file=dev-v2.0.json \
    --output_dir=runs/squad2 --version_2_with_negative --do_train --do_predict \
    --max_seq_length=384 --train_batch_size=48 --learning_rate=3e-5
Example (CMRC 2018 with a Chinese model; the CMRC metric is chosen automatically):
  python run_squad.py --albert_config_file=albert_base_zh/albert_config.json \
    --vocab_file=albert_base_zh/vocab_chinese.txt --init_checkpoint=albert_base_zh \
    --train_file=cmrc2018_train.json --predict_file=cmrc2018_dev.json \
    --output_dir=runs/cmrc --do_train --do_predict --max_seq_length=512 \
    --doc_stride=128 --max_answer_length=50 --train_batch_size=32 --learning_rate=3e-5
Score any predictions file with the official metrics (`albert_tf.tasks.squad`, the former
name, works too):
  python -m albert_tf.tasks.span_qa evaluate --data_file=dev-v2.0.json \
    --prediction_file=runs/squad2/predictions.json --na_prob_file=runs/squad2/null_odds.json
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf.kernels import onednn  # noqa: E402

onednn.configure()  # before TensorFlow is imported: it reads the oneDNN switch once

from absl import flags  # noqa: E402

from albert_tf import cli, cli_finetuning, cli_options  # noqa: E402
from albert_tf.tasks.span_qa.job import SpanQaJob  # noqa: E402

FLAGS = flags.FLAGS
cli_finetuning.define_flags(SpanQaJob)
for module in (cli_options, cli_finetuning, cli):
    flags.adopt_module_key_flags(module)  # list them in --help

if __name__ == "__main__":
    cli.run(cli_finetuning.main(SpanQaJob), interrupted=lambda: cli.resume_hint(FLAGS.output_dir))
