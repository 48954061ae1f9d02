"""Pretrain ALBERT with masked-LM + sentence-order prediction.

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

from albert_tf import cli, cli_defaults  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model to pretrain.")
flags.DEFINE_string("input_file", None, "Training TFRecords: comma list and/or globs.")
flags.DEFINE_string("eval_input_file", None,
                    "Held-out TFRecords for --do_eval (comma list and/or globs).")
flags.DEFINE_string("output_dir", None, "Checkpoints, summaries and results are written here.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial weights: TF1 checkpoint (prefix or directory), Hugging Face "
                    "directory, Keras .weights.h5 or tf.train.Checkpoint.")
flags.DEFINE_bool("init_from_group0", False,
                  "Initialise every layer group from group 0 of --init_checkpoint.")
flags.DEFINE_integer("max_seq_length", 512, "Sequence length of the TFRecords.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence in the data.")
flags.DEFINE_bool("do_train", True, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate every saved checkpoint on --eval_input_file.")
flags.DEFINE_integer("train_batch_size", 4096, "Global training batch size.")
flags.DEFINE_integer("eval_batch_size", 64, "Global evaluation batch size.")
flags.DEFINE_enum("optimizer", "lamb", ["lamb", "adamw"], "Optimizer.")
flags.DEFINE_float("learning_rate", 0.00176, "Peak learning rate.")
flags.DEFINE_float("poly_power", 1.0, "Power of the polynomial decay.")
flags.DEFINE_integer("num_train_steps", 125000, "Optimizer steps.")
flags.DEFINE_integer("num_warmup_steps", 3125, "Linear warmup steps.")
flags.DEFINE_integer("start_warmup_step", 0, "Step at which the warmup starts.")
flags.DEFINE_integer("save_checkpoints_steps", 5000, "Checkpoint (and evaluate) every N steps.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Training checkpoints kept.")
flags.DEFINE_integer("iterations_per_loop", 1000,
                     "Steps run on the device per host round trip (also the logging period).")
flags.DEFINE_integer("max_eval_steps", 100, "Evaluation batches per evaluation (0 = all).")
cli.define_runtime_flags()
flags.adopt_module_key_flags(cli)  # list them in --help
flags.DEFINE_bool("deterministic_input", False,
                  "Read the input in a reproducible order (slower interleave).")
flags.DEFINE_bool("recompute_layers", False,
                  "Keep only each layer's input for the backward pass and recompute the rest "
                  "(tf.recompute_grad): much less activation memory at long sequences, "
                  "about a third more compute.")


def main(argv):
    del argv
    from albert_tf.pretraining import inputs
    from albert_tf.pretraining import PretrainingOptions, run_pretraining

    logging.set_verbosity(logging.INFO)
    cli.require("albert_config_file", "output_dir")
    albert_config = cli.load_albert_config(FLAGS.albert_config_file)
    cli.check_init_checkpoint(FLAGS.init_checkpoint)
    strategy = cli.strategy_from_flags(FLAGS)
    cli_defaults.apply(["num_warmup_steps:pretraining", "eval_batch_size:64"],
                       strategy.num_replicas_in_sync)
    options = PretrainingOptions(
        albert_config=albert_config,
        output_dir=FLAGS.output_dir, input_file=FLAGS.input_file,
        eval_input_file=FLAGS.eval_input_file, init_checkpoint=FLAGS.init_checkpoint,
        init_from_group0=FLAGS.init_from_group0, max_seq_length=FLAGS.max_seq_length,
        max_predictions_per_seq=FLAGS.max_predictions_per_seq, do_train=FLAGS.do_train,
        do_eval=FLAGS.do_eval, train_batch_size=FLAGS.train_batch_size,
        eval_batch_size=FLAGS.eval_batch_size, optimizer=FLAGS.optimizer,
        learning_rate=FLAGS.learning_rate, poly_power=FLAGS.poly_power,
        num_train_steps=FLAGS.num_train_steps, num_warmup_steps=FLAGS.num_warmup_steps,
        start_warmup_step=FLAGS.start_warmup_step,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max,
        iterations_per_loop=FLAGS.iterations_per_loop,
        max_eval_steps=FLAGS.max_eval_steps or None, mixed_precision=FLAGS.mixed_precision,
        jit_compile=FLAGS.jit_compile, recompute_layers=FLAGS.recompute_layers,
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
        deterministic_input=FLAGS.deterministic_input, **cli.runtime_options())
    cli.check_options(options.validate, strategy.num_replicas_in_sync)
    for flag, needed in (("input_file", FLAGS.do_train), ("eval_input_file", FLAGS.do_eval)):
        if needed:
            cli.for_flag(f"--{flag}", inputs.expand_patterns, getattr(FLAGS, flag))
    results = run_pretraining(options, strategy)
    logging.info("done at step %d; best: %s", results["global_step"], results.get("best"))


if __name__ == "__main__":
    cli.run(main, interrupted=lambda: cli.resume_hint(FLAGS.output_dir))
