"""The small corpus and options that the Beam runners' tests run, and their checks.

Three Project Gutenberg books in raw format, cut into 40,000-character pieces and
blocks of two documents, so that even this small input makes several blocks and
tasks for the runners to spread.
"""
from __future__ import annotations

import json
import pathlib
from typing import List, Sequence, Tuple

from data_prep import pipeline, runner
from data_prep.masking import MaskingOptions
from data_prep.text_input import ReaderOptions

BOOKS = ("pg20170.txt", "pg20249.txt", "pg11563.txt")
# The summary fields that must not depend on the runner.
SUMMARY_KEYS = ("instances", "tokens", "masked_tokens", "ngram_spans", "sop_labels",
                "random_document_b", "input")


def small_corpus(shared_data: pathlib.Path, dupe_factor: int = 2
                 ) -> Tuple[List[str], runner.RunOptions]:
    corpus = shared_data / "corpus" / "gutenberg"
    options = runner.RunOptions(
        spm_model_file=str(shared_data / "spm" / "albert_style_pd8k.model"),
        reader=ReaderOptions(input_format="raw"),
        instances=pipeline.InstanceOptions(max_seq_length=64, dupe_factor=dupe_factor,
                                           masking=MaskingOptions(max_predictions_per_seq=10)),
        layout=pipeline.LayoutOptions(block_documents=2, task_tokens=20_000,
                                      shuffle_buckets_per_file=3, block_chars=40_000))
    return [str(corpus / name) for name in BOOKS], options


def assert_same_outputs(expected: Sequence[str], actual: Sequence[str],
                        expected_summary: dict) -> None:
    """Byte-identical files, and the runner-independent summary fields of `actual`'s
    default summary equal to `expected_summary`."""
    for ours, theirs in zip(expected, actual):
        assert pathlib.Path(theirs).read_bytes() == pathlib.Path(ours).read_bytes(), theirs
    with open(runner.default_summary_path(actual)) as handle:
        summary = json.load(handle)
    for key in SUMMARY_KEYS:
        assert summary[key] == expected_summary[key], key
    assert [f["instances"] for f in summary["output_files"]] == \
        [f["instances"] for f in expected_summary["output_files"]]
