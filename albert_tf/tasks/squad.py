"""SQuAD v1.1 / v2.0: reading, features, post-processing, official metrics.

The pieces live in small modules; this one re-exports them and is the
command-line scorer:

  python -m albert_tf.tasks.squad evaluate --data_file dev-v2.0.json \\
      --prediction_file predictions.json [--na_prob_file null_odds.json] \\
      [--na_prob_thresh 1.0] [--version 2] [--metric {squad,cmrc2018}]

prints one JSON object: v1.1 `{"exact_match", "f1", ...}`, v2.0 `{"exact",
"f1", "total", "HasAns_*", "NoAns_*"[, "best_exact", "best_exact_thresh",
"best_f1", "best_f1_thresh"]}` plus `missing_predictions` (questions without
a prediction score 0; their ids are printed on stderr). The version is the
data file's (v2.0 when any question has `is_impossible`) unless `--version`
says otherwise. `--metric cmrc2018` scores Chinese span extraction with the
official CMRC 2018 definitions instead (`cmrc_metrics`): `{"exact_match",
"f1", "average", "total", "skip", "missing_predictions"}`.

The pieces live in `albert_tf.tasks.span_qa`: `data` (JSON reading), `alignment`
(paragraph tokens to original characters), `features` (windows, TFRecord caches),
`postprocess` (n-best, predictions files), `metrics` (official metrics),
`cmrc_metrics` (CMRC 2018 metric), `job` (run_squad.py's job), `export` (SavedModel
and ONNX with raw-text serving). This module re-exports the common ones under the
path they had before the packages.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Dict, Optional

if __name__ == "__main__":  # the evaluate command: keep TensorFlow's startup lines off stderr
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf.errors import UserError, UserFileNotFoundError, UserValueError  # noqa: E402
from albert_tf.tasks.span_qa import cmrc_metrics
from albert_tf.tasks.span_qa.data import (SquadExample, SquadFormatError, load_squad_json,
                                          read_squad_examples)
from albert_tf.tasks.span_qa.features import (ConversionStats, FeatureOptions, SquadFeature,
                                              SquadFeaturizer, align_paragraph)
from albert_tf.tasks.span_qa.metrics import evaluate_v1, evaluate_v2, is_v2_dataset
from albert_tf.tasks.span_qa.postprocess import PostprocessOptions, postprocess

__all__ = ["SquadExample", "SquadFormatError", "load_squad_json", "read_squad_examples",
           "ConversionStats", "FeatureOptions", "SquadFeature", "SquadFeaturizer",
           "align_paragraph", "evaluate_v1", "evaluate_v2", "is_v2_dataset",
           "PostprocessOptions", "postprocess", "evaluate_files"]


def _load_json_object(path: str, flag: str) -> Dict:
    import tensorflow as tf

    try:
        with tf.io.gfile.GFile(path) as handle:
            value = json.load(handle)
    except tf.errors.NotFoundError as err:
        raise UserFileNotFoundError(f"{flag} {path}: no such file") from err
    except tf.errors.FailedPreconditionError as err:  # e.g. a directory
        raise UserFileNotFoundError(f"{flag} {path}: not a readable file ({err.message})") \
            from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise SquadFormatError(f"{flag} {path}: not valid JSON ({err})") from err
    if not isinstance(value, dict):
        raise SquadFormatError(f"{flag} {path}: expected a JSON object {{question id: ...}}")
    return value


METRICS = ("squad", "cmrc2018")


def evaluate_files(data_file: str, prediction_file: str, na_prob_file: Optional[str] = None,
                   na_prob_thresh: float = 1.0, version: Optional[int] = None,
                   metric: str = "squad") -> Dict:
    """Scores a predictions file against a SQuAD data file (see the module docstring)."""
    if metric not in METRICS:
        raise UserValueError(f"--metric {metric!r}: expected one of {', '.join(METRICS)}")
    if metric == "cmrc2018" and (na_prob_file or version):
        raise UserValueError("--na_prob_file and --version are SQuAD options; --metric cmrc2018 "
                         "takes neither")
    try:
        dataset = load_squad_json(data_file)
    except UserError as err:  # its message names the file; say which flag gave it
        raise UserValueError(f"--data_file {err}") from err
    predictions = _load_json_object(prediction_file, "--prediction_file")
    for qid, text in predictions.items():
        if not isinstance(text, str):
            raise SquadFormatError(f"--prediction_file {prediction_file}: question id {qid}: "
                                   f"the prediction must be a string, got {text!r}")
    if metric == "cmrc2018":
        try:
            return cmrc_metrics.evaluate(dataset, predictions)
        except (KeyError, TypeError, AttributeError) as err:
            raise SquadFormatError(f"--data_file {data_file}: not SQuAD-format questions "
                                   f"({type(err).__name__}: {err})") from err
        except ValueError as err:
            raise SquadFormatError(f"--data_file {data_file}: {err}") from err
    version = version or (2 if is_v2_dataset(dataset) else 1)
    if version == 1:
        if na_prob_file:
            raise UserValueError("--na_prob_file is only meaningful for SQuAD v2.0 data "
                             f"({data_file} has no is_impossible questions; pass --version 2 "
                             "to score it as v2.0)")
        return evaluate_v1(dataset, predictions)
    na_probs = None
    if na_prob_file:
        na_probs = _load_json_object(na_prob_file, "--na_prob_file")
        for qid, value in na_probs.items():
            if not isinstance(value, (int, float)):
                raise SquadFormatError(f"--na_prob_file {na_prob_file}: question id {qid}: "
                                       f"expected a number, got {value!r}")
    return evaluate_v2(dataset, predictions, na_probs, na_prob_thresh)


def _evaluate_main(argv) -> int:
    from albert_tf import cli

    parser = cli.ArgumentParser(
        prog="python -m albert_tf.tasks.squad evaluate",
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
    print(json.dumps(result))
    return 0


def main(argv=None) -> int:
    """`python -m albert_tf.tasks.squad evaluate ...`; returns the exit status (2 and one
    `<prog>: error:` line on stderr for a user error)."""
    from albert_tf import cli

    argv = list(sys.argv[1:] if argv is None else argv)
    prog = "python -m albert_tf.tasks.squad"
    if not argv or argv[0] != "evaluate":
        sys.stderr.write(f"{prog}: error: the command is `evaluate` (see "
                         f"`{prog} evaluate --help`)\n")
        return 2
    return cli.guard(_evaluate_main, argv[1:], f"{prog} evaluate")


if __name__ == "__main__":
    sys.exit(main())
