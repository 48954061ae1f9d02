"""`python -m albert_tf.tasks.classification evaluate`: the task's metrics of a predictions file.

  python -m albert_tf.tasks.classification evaluate --task_name mrpc --data_dir glue \\
      --prediction_file submit_results.tsv [--split dev]

scores an `index<TAB>prediction` file (with that header: the job's submit_results.tsv
format; the prediction is a label, or a float for STS-B) against the gold labels of
the split (`--data_dir` as run_classifier.py takes it) and prints one JSON object: the
metrics the job reports on dev (`metrics.prediction_metrics`, which the job's
`compute_metrics` calls: eval_accuracy [+ f1, matthew_corr], or pearson, spearman,
MSE, eval_loss), without the classification eval_loss a label file cannot give, plus
`eval_examples`. A custom task is read with the same column flags as the job.
"""
import functools
import os
import sys

if __name__ == "__main__":  # keep TensorFlow's startup lines off stderr
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf import cli  # noqa: E402  (after the variable above)

PROG = "python -m albert_tf.tasks.classification"


def _parser():
    parser = cli.ArgumentParser(prog=f"{PROG} evaluate",
                                description="A task's metrics of a submit_results.tsv-style "
                                            "predictions file against a split's gold labels.")
    parser.add_argument("--task_name", required=True,
                        help="A run_classifier.py data set (mrpc, sts-b, afqmc, ..., custom).")
    parser.add_argument("--data_dir", required=True,
                        help="The task's data, as run_classifier.py's --data_dir.")
    parser.add_argument("--prediction_file", required=True,
                        help="`index<TAB>prediction` file (header first), e.g. "
                             "submit_results.tsv.")
    parser.add_argument("--split", default="dev", choices=("train", "dev"),
                        help="The split whose gold labels score it (default dev).")
    parser.add_argument("--do_lower_case", default=True, type=_boolean,
                        help="Normalise GLUE labels as the job does (default true).")
    custom = parser.add_argument_group("custom task (as run_classifier.py's flags)")
    custom.add_argument("--text_a_column")
    custom.add_argument("--label_column")
    custom.add_argument("--text_b_column")
    custom.add_argument("--id_column")
    custom.add_argument("--has_header", default=True, type=_boolean)
    custom.add_argument("--regression", default=False, type=_boolean)
    return parser


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false", "1", "0"):
        raise ValueError(text)
    return text.lower() in ("true", "1")


def _evaluate_main(argv) -> dict:
    from albert_tf.errors import check_file
    from albert_tf.tasks.classification import datasets, metrics, postprocess

    args = _parser().parse_args(argv)
    data_set = datasets.get(args.task_name)
    args.custom = datasets.custom_options(args)
    check_file(args.prediction_file, "--prediction_file", "predictions file")
    task = data_set.reader(args)
    examples = task.read(args.split)
    predicted = postprocess.predicted_values(
        task.spec, examples, postprocess.read_predictions(args.prediction_file),
        args.prediction_file)
    result = metrics.prediction_metrics(task.spec, predicted,
                                        metrics.gold_label_ids(task.spec, examples))
    result["eval_examples"] = len(examples)
    return result


# main(argv=None) -> the exit status (2 and one `<prog>: error:` line on stderr for a
# user error).
main = functools.partial(cli.evaluate_command, PROG, _evaluate_main)


if __name__ == "__main__":
    sys.exit(main())
