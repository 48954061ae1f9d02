"""`python -m albert_tf.tasks.embeddings evaluate`: Spearman and Pearson of a similarities file.

  python -m albert_tf.tasks.embeddings evaluate --task_name sts-b --data_dir glue \\
      --prediction_file similarities.tsv [--split dev]

scores an `index<TAB>similarity` file (the job's similarities.tsv) against the gold scores
of the split and prints one JSON object: spearman, pearson, eval_examples (the metrics the
job reports, `metrics.similarity_metrics`).
"""
import functools
import os
import sys

if __name__ == "__main__":  # keep TensorFlow's startup lines off stderr
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf import cli  # noqa: E402  (after the variable above)

PROG = "python -m albert_tf.tasks.embeddings"


def _parser():
    parser = cli.ArgumentParser(prog=f"{PROG} evaluate",
                                description="Spearman and Pearson of a similarities file "
                                            "against a split's gold scores.")
    parser.add_argument("--task_name", required=True, help="sts-b, lcqmc or custom.")
    parser.add_argument("--data_dir", required=True, help="As run_embeddings.py's.")
    parser.add_argument("--prediction_file", required=True,
                        help="`index<TAB>similarity` file (header first): similarities.tsv.")
    parser.add_argument("--split", default="dev", choices=("train", "dev", "test"),
                        help="The split whose gold scores score it (default dev).")
    custom = parser.add_argument_group("custom task (as run_embeddings.py's flags)")
    for flag in ("text_a_column", "text_b_column", "label_column", "negative_column"):
        custom.add_argument(f"--{flag}")
    return parser


def _evaluate_main(argv) -> dict:
    from albert_tf.errors import UserValueError, check_file
    from albert_tf.tasks.embeddings import datasets, metrics, postprocess

    args = _parser().parse_args(argv)
    args.columns = datasets.EmbeddingColumns(args.text_a_column, args.text_b_column,
                                             args.label_column, args.negative_column)
    check_file(args.prediction_file, "--prediction_file", "similarities file")
    examples = datasets.open_task(args).read(args.split)
    unscored = [e.source for e in examples if e.score is None]
    if unscored:
        raise UserValueError(f"{unscored[0]}: no gold score to evaluate against")
    similarities = postprocess.read_similarities(args.prediction_file, examples)
    return metrics.similarity_metrics(similarities, [e.score for e in examples])


main = functools.partial(cli.evaluate_command, PROG, _evaluate_main)


if __name__ == "__main__":
    sys.exit(main())
