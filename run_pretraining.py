"""Pretrain ALBERT with masked-LM + sentence-order prediction (the original's flags).

Not implemented yet (issue #5): this CLI only documents its flags. Running it
without --help exits with status 2 and says so; it never pretends to work.
"""
import sys

from absl import app, flags

flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model to pretrain.")
flags.DEFINE_string("input_file", None, "Comma list / globs of pretraining TFRecords.")
flags.DEFINE_string("output_dir", None, "Where checkpoints and summaries are written.")
flags.DEFINE_string("init_checkpoint", None, "Checkpoint to start from.")
flags.DEFINE_integer("max_seq_length", 512, "Sequence length of the TFRecords.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per sequence.")
flags.DEFINE_integer("train_batch_size", 4096, "Global training batch size.")
flags.DEFINE_float("learning_rate", 0.00176, "Peak learning rate.")
flags.DEFINE_integer("num_train_steps", 125000, "Training steps.")
flags.DEFINE_integer("num_warmup_steps", 3125, "Linear warmup steps.")
flags.DEFINE_enum("optimizer", "lamb", ["lamb", "adamw"], "Optimizer.")


def main(argv):
    del argv
    print("run_pretraining.py is not implemented yet (tracked in issue #5); only --help works.",
          file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    app.run(main)
