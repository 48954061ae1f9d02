"""`python -m albert_tf.tasks.span_qa evaluate`: the SQuAD / CMRC 2018 scorer.

  python -m albert_tf.tasks.span_qa evaluate --data_file dev-v2.0.json \\
      --prediction_file predictions.json [--na_prob_file null_odds.json] \\
      [--na_prob_thresh 1.0] [--version 2] [--metric {squad,cmrc2018}]

prints one JSON object: v1.1 `{"exact_match", "f1", ...}`, v2.0 `{"exact",
"f1", "total", "HasAns_*", "NoAns_*"[, "best_exact", "best_exact_thresh",
"best_f1", "best_f1_thresh"]}` plus `missing_predictions` (questions without
a prediction score 0; their ids are printed on stderr). The version is the
data file's (v2.0 when any question has `is_impossible`) unless `--version`
says otherwise. `--metric cmrc2018` scores Chinese span extraction with the
official CMRC 2018 definitions instead (`cmrc_metrics`): `{"exact_match",
"f1", "average", "total", "skip", "missing_predictions"}`. The scoring itself is
`albert_tf.tasks.span_qa.scoring.evaluate_files`. `python -m albert_tf.tasks.squad
evaluate`, the command's former name, runs this one.
"""
import functools
import json
import os
import sys

if __name__ == "__main__":  # keep TensorFlow's startup lines off stderr
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf.errors import UserValueError  # noqa: E402
from albert_tf.tasks.span_qa.scoring import METRICS, evaluate_files  # noqa: E402

PROG = "python -m albert_tf.tasks.span_qa"


def _evaluate_main(argv, prog: str = PROG) -> None:
    from albert_tf import cli

    parser = cli.ArgumentParser(
        prog=f"{prog} evaluate",
        description="Official SQuAD v1.1 / v2.0 or CMRC 2018 metrics.")
    parser.add_argument("--data_file", required=True, help="SQuAD JSON with gold answers.")
    parser.add_argument("--prediction_file", required=True,
                        help="JSON object {question id: answer text}.")
    parser.add_argument("--na_prob_file", default=None,
                        help="v2.0: JSON object {question id: no-answer score} "
                             "(e.g. null_odds.json).")
    parser.add_argument("--na_prob_thresh", type=float, default=None,
                        help="v2.0: predict no answer when the score is above this "
                             "(official default 1.0).")
    parser.add_argument("--version", type=int, choices=(1, 2), default=None,
                        help="Metric version (default: from the data file).")
    parser.add_argument("--metric", choices=METRICS, default="squad",
                        help="squad: official SQuAD v1.1/v2.0 metrics; cmrc2018: the official "
                             "CMRC 2018 metric (Chinese; mixed segmentation, LCS F1).")
    args = parser.parse_args(argv)
    if args.metric == "cmrc2018" and args.na_prob_thresh is not None:
        raise UserValueError("--na_prob_thresh is a SQuAD v2.0 option; --metric cmrc2018 does "
                             "not take it")
    thresh = 1.0 if args.na_prob_thresh is None else args.na_prob_thresh
    result = evaluate_files(args.data_file, args.prediction_file, args.na_prob_file,
                            thresh, args.version, args.metric)
    missing = result.pop("missing")
    for qid in missing:
        print(f"missing prediction for question id {qid}: scored 0", file=sys.stderr)
    if missing:
        print(f"{len(missing)} questions had no prediction", file=sys.stderr)
    print(json.dumps(result))  # in the official scripts' key order
    return None


def main(argv=None, prog: str = PROG) -> int:
    """`<prog> evaluate ...`; returns the exit status (2 and one `<prog>: error:` line on
    stderr for a user error)."""
    from albert_tf import cli

    return cli.evaluate_command(prog, functools.partial(_evaluate_main, prog=prog), argv)


if __name__ == "__main__":
    sys.exit(main())
