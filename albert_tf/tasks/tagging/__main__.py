"""`python -m albert_tf.tasks.tagging evaluate`: entity-level scores of a predictions file.

  python -m albert_tf.tasks.tagging evaluate --task_name conll2003 \\
      --data_file eng.testb --prediction_file predictions.txt

prints one JSON object on its last line: `precision`, `recall`, `f1` (micro over all
entities, as seqeval 1.2.2's default mode), `support`, `predicted`, `correct`,
`token_accuracy` and `per_type` ({type: precision, recall, f1, support}). The predictions
file is the one run_ner.py writes for the task (`predictions.txt`, `cluener_predict.json`
or `entities.jsonl`, see `albert_tf.tasks.tagging.postprocess`).
"""
import functools
import os
import sys

if __name__ == "__main__":  # keep TensorFlow's startup lines off stderr
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf import cli  # noqa: E402  (after the variable above)

PROG = "python -m albert_tf.tasks.tagging"


def _evaluate_main(argv) -> dict:
    from albert_tf.errors import check_file
    from albert_tf.tasks.tagging import postprocess, readers

    parser = cli.ArgumentParser(prog=f"{PROG} evaluate",
                                description="Entity-level precision, recall and F1 (seqeval's "
                                            "default mode) of a predictions file.")
    parser.add_argument("--task_name", required=True, choices=readers.TASKS)
    parser.add_argument("--data_file", required=True, help="The gold data file.")
    parser.add_argument("--prediction_file", required=True,
                        help="predictions.txt (column formats), cluener_predict.json (CLUENER) "
                             "or entities.jsonl (custom JSON lines).")
    parser.add_argument("--token_column", type=int, default=None,
                        help="custom column files: the word's column (default 0).")
    parser.add_argument("--label_column", type=int, default=None,
                        help="custom column files: the tag's column (default -1).")
    parser.add_argument("--delimiter", default=None,
                        help="custom column files: the column separator (default whitespace).")
    args = parser.parse_args(argv)
    check_file(args.data_file, "--data_file", "data file")
    check_file(args.prediction_file, "--prediction_file", "predictions file")
    options = {name: getattr(args, name) for name in ("token_column", "label_column",
                                                      "delimiter")
               if getattr(args, name) is not None}
    result = postprocess.score_prediction_file(args.task_name, args.data_file,
                                               args.prediction_file, **options)
    return result


# main(argv=None) -> the exit status (2 and one `<prog>: error:` line on stderr for a
# user error).
main = functools.partial(cli.evaluate_command, PROG, _evaluate_main)


if __name__ == "__main__":
    sys.exit(main())
