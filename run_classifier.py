"""Fine-tune ALBERT on GLUE-style classification and regression (the original's flags).

Not implemented yet (issue #6): this CLI only documents its flags. Running it
without --help exits with status 2 and says so; it never pretends to work.
"""
import sys

from absl import app, flags

flags.DEFINE_string("data_dir", None, "Directory with the task TSV files.")
flags.DEFINE_string("task_name", None, "cola, sst-2, mrpc, sts-b, qqp, mnli, mismnli, qnli, rte or wnli.")
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model.")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model.")
flags.DEFINE_string("init_checkpoint", None, "Checkpoint to initialise from: TF1 prefix or "
                    "directory (official download, TF-Hub module), Hugging Face directory, "
                    "Keras .weights.h5 or tf.train.Checkpoint; read with "
                    "albert_tf.checkpoints.restore_for_training.")
flags.DEFINE_bool("init_from_group0", False, "Initialise every layer group from group 0 "
                  "of --init_checkpoint (the original's flag).")
flags.DEFINE_string("output_dir", None, "Where checkpoints and results are written.")
flags.DEFINE_integer("max_seq_length", 512, "Maximum sequence length.")
flags.DEFINE_bool("do_train", False, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate on the dev set.")
flags.DEFINE_bool("do_predict", False, "Predict on the test set.")


def main(argv):
    del argv
    print("run_classifier.py is not implemented yet (tracked in issue #6); only --help works.",
          file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    app.run(main)
