"""SQuAD v1.1 / v2.0: reading, features, post-processing, official metrics.

The pieces live in small modules; this one re-exports them and runs the
command-line scorer under its former name:

  python -m albert_tf.tasks.squad evaluate ...

is `python -m albert_tf.tasks.span_qa evaluate ...` (same flags, same output; see
`albert_tf.tasks.span_qa.__main__`), with this command's name in its messages.

The pieces live in `albert_tf.tasks.span_qa`: `data` (JSON reading), `alignment`
(paragraph tokens to original characters), `features` (windows, TFRecord caches),
`postprocess` (n-best, predictions files), `metrics` (official metrics),
`cmrc_metrics` (CMRC 2018 metric), `scoring` (a predictions file scored: `evaluate_files`),
`job` (run_squad.py's job), `export` (SavedModel and ONNX with raw-text serving). This
module re-exports the common ones under the path they had before the packages.
"""
from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # the evaluate command: keep TensorFlow's startup lines off stderr
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf.tasks.span_qa import __main__ as span_qa_command  # noqa: E402
from albert_tf.tasks.span_qa.data import (SquadExample, SquadFormatError, load_squad_json,
                                          read_squad_examples)
from albert_tf.tasks.span_qa.features import (ConversionStats, FeatureOptions, SquadFeature,
                                              SquadFeaturizer, align_paragraph)
from albert_tf.tasks.span_qa.metrics import evaluate_v1, evaluate_v2, is_v2_dataset
from albert_tf.tasks.span_qa.postprocess import PostprocessOptions, postprocess
from albert_tf.tasks.span_qa.scoring import METRICS, evaluate_files

__all__ = ["SquadExample", "SquadFormatError", "load_squad_json", "read_squad_examples",
           "ConversionStats", "FeatureOptions", "SquadFeature", "SquadFeaturizer",
           "align_paragraph", "evaluate_v1", "evaluate_v2", "is_v2_dataset",
           "PostprocessOptions", "postprocess", "evaluate_files"]

PROG = "python -m albert_tf.tasks.squad"


def main(argv=None) -> int:
    """`python -m albert_tf.tasks.squad evaluate ...`; returns the exit status (2 and one
    `<prog>: error:` line on stderr for a user error)."""
    return span_qa_command.main(argv, PROG)


if __name__ == "__main__":
    sys.exit(main())
