r"""Fine-tune ALBERT on RACE (English) or C3 (Chinese) multiple-choice reading comprehension.

Flags follow the original run_race.py (defaults included: --do_train and
--do_eval are on, lr 1e-5, 12000 steps, 1000 warmup, save every 100).
Additions: --task_name (race or c3), --vocab_file (WordPiece; --spm_model_file
wins when both are given, as the original's FullTokenizer), --init_from_group0,
--predict_split, --export_dir, --strategy, --mixed_precision, --jit_compile,
--gradient_accumulation_steps, --seed.
RACE: --data_dir holds RACE/{train,dev,test}/{middle,high}/ with either the
download's N.txt files or the original's all.txt. C3: --data_dir holds
c3-{m,d}-{train,dev,test}.json (or a folder c3/ or data/ holding them).
Feature caches (--train_file, --eval_file, --predict_file) default to
--output_dir and are rebuilt when the data or the settings change.

Example:
  python run_race.py --data_dir=data --albert_config_file=albert_base/albert_config.json \
    --spm_model_file=albert_base/30k-clean.model --init_checkpoint=albert_base \
    --output_dir=runs/race --max_seq_length=512 --max_qa_length=128 \
    --train_batch_size=32 --learning_rate=1e-5 --train_step=12000 --warmup_step=1000 \
    --save_checkpoints_steps=100 --do_predict --export_dir=runs/race/export
  python run_race.py --task_name=c3 --data_dir=c3/data \
    --albert_config_file=albert_base_zh/albert_config.json \
    --vocab_file=albert_base_zh/vocab_chinese.txt --init_checkpoint=albert_base_zh \
    --output_dir=runs/c3 --max_seq_length=512 --train_batch_size=16 \
    --learning_rate=2e-5 --train_step=6000 --warmup_step=600 --do_predict \
    --export_dir=runs/c3/export
Outputs: eval_results.txt (eval_accuracy for all, eval_accuracy_middle,
eval_accuracy_high; C3: eval_accuracy_m, eval_accuracy_d), model.ckpt-best.*,
predictions.jsonl (C3: also c3_predict.json), predict_results.txt, and the
SavedModel (raw-text signature) in --export_dir.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf.kernels import onednn  # noqa: E402

onednn.configure()  # before TensorFlow is imported: it reads the oneDNN switch once

from absl import flags  # noqa: E402

from albert_tf import cli, cli_finetuning, cli_options  # noqa: E402
from albert_tf.tasks.multiple_choice.job import MultipleChoiceJob  # noqa: E402

FLAGS = flags.FLAGS
cli_finetuning.define_flags(MultipleChoiceJob)
for module in (cli_options, cli_finetuning, cli):
    flags.adopt_module_key_flags(module)  # list them in --help

if __name__ == "__main__":
    cli.run(cli_finetuning.main(MultipleChoiceJob), interrupted=lambda: cli.resume_hint(FLAGS.output_dir))
