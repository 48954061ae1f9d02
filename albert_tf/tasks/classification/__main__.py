"""`python -m albert_tf.tasks.classification evaluate`: the task's metrics of a predictions file.

  python -m albert_tf.tasks.classification evaluate --task_name mrpc --data_dir glue \\
      --prediction_file submit_results.tsv [--split dev]

scores an `index<TAB>prediction` file (with that header: the job's submit_results.tsv
format; the prediction is a label, or a float for STS-B), or for a multi-label task
(goemotions, custom --multi_label) the job's predictions.jsonl (`{"id", "labels"}` lines),
against the gold labels of the split (`--data_dir` as run_classifier.py takes it) and prints one JSON object: the
metrics the job reports on dev (`metrics.prediction_metrics`, which the job's
`compute_metrics` calls: eval_accuracy [+ f1, matthew_corr], or pearson, spearman,
MSE, eval_loss; multi-label: micro_f1, macro_f1, micro_precision, micro_recall,
hamming_loss, subset_accuracy and f1/<label>, as scikit-learn computes them with
zero_division=0), without the classification eval_loss a label file cannot give, plus
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
    parser.add_argument("--data_dir",
                        help="The task's data, as run_classifier.py's --data_dir.")
    parser.add_argument("--prediction_file", required=True,
                        help="`index<TAB>prediction` file (header first), e.g. "
                             "submit_results.tsv; for a multi-label task the job's "
                             "predictions.jsonl.")
    parser.add_argument("--split", default="dev", choices=("train", "dev", "test"),
                        help="The split whose gold labels score it (default dev; test when "
                             "its file is labelled, as GoEmotions').")
    parser.add_argument("--data_file",
                        help="Score against this file (in the task's format) instead of "
                             "--data_dir's split (GoEmotions: --data_dir may still say where "
                             "emotions.txt is; default the file's directory).")
    parser.add_argument("--do_lower_case", default=True, type=_boolean,
                        help="Normalise GLUE labels as the job does (default true).")
    custom = parser.add_argument_group("custom task (as run_classifier.py's flags)")
    custom.add_argument("--text_a_column")
    custom.add_argument("--label_column")
    custom.add_argument("--text_b_column")
    custom.add_argument("--id_column")
    custom.add_argument("--has_header", default=True, type=_boolean)
    custom.add_argument("--regression", default=False, type=_boolean)
    custom.add_argument("--multi_label", default=False, type=_boolean)
    return parser


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false", "1", "0"):
        raise ValueError(text)
    return text.lower() in ("true", "1")


def _evaluate_main(argv) -> dict:
    from albert_tf.errors import UserValueError, check_file
    from albert_tf.tasks.classification import datasets, metrics, postprocess

    args = _parser().parse_args(argv)
    data_set = datasets.get(args.task_name)
    if args.data_file:
        check_file(args.data_file, "--data_file", "data file")
        if args.data_dir and not data_set.settings.get("multi_label"):
            raise UserValueError("give --data_file or --data_dir (with --split), not both")
        args.data_dir = args.data_dir or os.path.dirname(os.path.abspath(args.data_file))
    elif not args.data_dir:
        raise UserValueError("give --data_dir (with --split) or --data_file")
    args.custom = datasets.custom_options(args)
    check_file(args.prediction_file, "--prediction_file", "predictions file")
    task = data_set.reader(args)
    examples = _gold_examples(task, args)
    if task.spec.multi_label:
        predicted = postprocess.read_label_sets(args.prediction_file, task.spec, examples)
    else:
        predicted = postprocess.predicted_values(
            task.spec, examples, postprocess.read_predictions(args.prediction_file),
            args.prediction_file)
    result = metrics.prediction_metrics(task.spec, predicted,
                                        metrics.gold_label_ids(task.spec, examples))
    result["eval_examples"] = len(examples)
    return result


def _gold_examples(task, args):
    """The labelled examples that score the predictions: --data_file's, or --split's."""
    from albert_tf.errors import UserValueError

    if not args.data_file:
        examples = task.read(args.split)
    elif task.read_file is not None:
        examples = task.read_file(args.data_file)
    else:
        split = os.path.splitext(os.path.basename(args.data_file))[0]
        if split not in ("train", "dev", "test"):
            raise UserValueError(f"--data_file {args.data_file}: this task reads files named "
                                 "train, dev or test (with its extension); or give "
                                 "--data_dir and --split")
        examples = task.read(split)
    unlabelled = [e.source for e in examples if e.label is None]
    if unlabelled:
        raise UserValueError(f"{unlabelled[0]}: no gold label to score against "
                             f"({len(unlabelled)} unlabelled examples)")
    return examples


# main(argv=None) -> the exit status (2 and one `<prog>: error:` line on stderr for a
# user error).
main = functools.partial(cli.evaluate_command, PROG, _evaluate_main)


if __name__ == "__main__":
    sys.exit(main())
