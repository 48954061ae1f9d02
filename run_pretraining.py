r"""Pretrain ALBERT with masked-LM + sentence-order prediction.

Flags follow the original run_pretraining.py; additions: --eval_input_file
(held-out data for evaluation), --strategy, --mixed_precision, --jit_compile,
--gradient_accumulation_steps, --seed. Re-running the same command after an
interruption resumes from the last checkpoint in --output_dir/checkpoints.

Example (one CPU/GPU):
  python run_pretraining.py --albert_config_file=albert_config.json \
    --input_file='data/train-*.tfrecord' --eval_input_file=data/heldout.tfrecord \
    --output_dir=runs/pretrain --do_train --do_eval --train_batch_size=64 \
    --max_seq_length=128 --max_predictions_per_seq=20 --num_train_steps=10000 \
    --num_warmup_steps=500 --learning_rate=0.00176 --save_checkpoints_steps=1000
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf.kernels import onednn  # noqa: E402

onednn.configure()  # before TensorFlow is imported: it reads the oneDNN switch once

from absl import flags, logging  # noqa: E402

from albert_tf import cli, cli_defaults, cli_options  # noqa: E402
from albert_tf.pretraining.job import PretrainingOptions  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model to pretrain.")
cli_options.define_flags(PretrainingOptions)
cli.define_runtime_flags()
for module in (cli_options, cli):
    flags.adopt_module_key_flags(module)  # list them in --help


def main(argv):
    del argv
    from albert_tf.pretraining import inputs, run_pretraining

    logging.set_verbosity(logging.INFO)
    cli.require("albert_config_file", "output_dir")
    albert_config = cli.load_albert_config(FLAGS.albert_config_file)
    cli.check_init_checkpoint(FLAGS.init_checkpoint)
    strategy = cli.strategy_from_flags(FLAGS)
    cli_defaults.apply(["num_warmup_steps:pretraining", "eval_batch_size:64"],
                       strategy.num_replicas_in_sync)
    options = cli_options.options_from_flags(
        PretrainingOptions, albert_config=albert_config,
        max_eval_steps=FLAGS.max_eval_steps or None, **cli.runtime_options())
    cli.check_options(options.validate, strategy.num_replicas_in_sync)
    for flag, needed in (("input_file", FLAGS.do_train), ("eval_input_file", FLAGS.do_eval)):
        if needed:
            cli.for_flag(f"--{flag}", inputs.expand_patterns, getattr(FLAGS, flag))
    results = run_pretraining(options, strategy)
    logging.info("done at step %d; best: %s", results["global_step"], results.get("best"))


if __name__ == "__main__":
    cli.run(main, interrupted=lambda: cli.resume_hint(FLAGS.output_dir))
