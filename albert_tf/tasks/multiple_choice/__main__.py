"""`python -m albert_tf.tasks.multiple_choice evaluate`: accuracy of a predictions file.

  python -m albert_tf.tasks.multiple_choice evaluate --task_name race \\
      --data_dir DIR --prediction_file predictions.jsonl [--split dev]

scores the predictions.jsonl that run_race.py --do_predict writes (one record per question,
see `albert_tf.tasks.multiple_choice.postprocess`) against the gold answers of the split
read from --data_dir as the job reads it, and prints one JSON object: `accuracy` and
`examples` over all questions, and per level (RACE: `accuracy_middle`, `accuracy_high`;
C3: `accuracy_m`, `accuracy_d`, by subset) with `examples_<level>`; the numbers
predict_results.txt holds. Every question of the split needs one prediction; a file that
is missing, a line that is not a record, an unknown or a missing question is one error
line naming the file (and the line), exit status 2.
"""
import functools
import os
import sys

if __name__ == "__main__":  # keep TensorFlow's startup lines off stderr
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf import cli  # noqa: E402  (after the variable above)

PROG = "python -m albert_tf.tasks.multiple_choice"


def _evaluate_main(argv) -> dict:
    from albert_tf.errors import check_file
    from albert_tf.tasks import registry
    from albert_tf.tasks.multiple_choice import postprocess
    from albert_tf.tasks.multiple_choice.datasets import FAMILY
    from albert_tf.tasks.multiple_choice.race import SPLITS

    parser = cli.ArgumentParser(prog=f"{PROG} evaluate",
                                description="Accuracy (overall and per level or subset) of "
                                            "run_race.py's predictions.jsonl.")
    parser.add_argument("--task_name", required=True, choices=registry.names(FAMILY))
    parser.add_argument("--data_dir", required=True,
                        help="The data set's folder, as run_race.py's --data_dir.")
    parser.add_argument("--prediction_file", required=True,
                        help="predictions.jsonl written by run_race.py --do_predict.")
    parser.add_argument("--split", default="dev", choices=SPLITS,
                        help="The split the predictions are of (run_race.py's "
                             "--predict_split).")
    args = parser.parse_args(argv)
    check_file(args.prediction_file, "--prediction_file", "predictions file")
    result = postprocess.score_prediction_file(args.task_name, args.data_dir,
                                               args.prediction_file, args.split)
    return result


# main(argv=None) -> the exit status (2 and one `<prog>: error:` line on stderr for a
# user error).
main = functools.partial(cli.evaluate_command, PROG, _evaluate_main)


if __name__ == "__main__":
    sys.exit(main())
