"""Fine-tune ALBERT on RACE multiple-choice reading comprehension (the original's flags).

Not implemented yet (issue #8): this CLI only documents its flags. Running it
without --help exits with status 2 and says so; it never pretends to work.
"""
import sys

from absl import app, flags

flags.DEFINE_string("data_dir", None, "Directory holding RACE/{train,dev,test}/{middle,high}.")
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model.")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model.")
flags.DEFINE_string("init_checkpoint", None, "Checkpoint to initialise from: TF1 prefix or "
                    "directory (official download, TF-Hub module), Hugging Face directory, "
                    "Keras .weights.h5 or tf.train.Checkpoint; read with "
                    "albert_tf.checkpoints.restore_for_training.")
flags.DEFINE_bool("init_from_group0", False, "Initialise every layer group from group 0 "
                  "of --init_checkpoint (the original's flag).")
flags.DEFINE_string("output_dir", None, "Where checkpoints and predictions are written.")
flags.DEFINE_integer("max_seq_length", 512, "Maximum sequence length.")
flags.DEFINE_integer("max_qa_length", 128, "Maximum question+option length in tokens.")


def main(argv):
    del argv
    print("run_race.py is not implemented yet (tracked in issue #8); only --help works.",
          file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    app.run(main)
