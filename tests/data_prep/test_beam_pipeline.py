"""The Beam pipeline (DirectRunner) writes the same bytes as the local runner.

apache-beam is an optional extra that pins protobuf<7, so it is usually not in
the main venv; this module is skipped there. Run it with a venv that has the
`beam` extra, e.g. `.venv-beam/bin/python -m pytest tests/data_prep/test_beam_pipeline.py`.
"""
import json

import pytest

pytest.importorskip(
    "apache_beam", reason="apache_beam is not importable (optional extra: pip install .[beam]; "
    "it needs protobuf<7, so use a separate venv such as .venv-beam)")

from data_prep import beam_pipeline, pipeline, runner  # noqa: E402
from data_prep.masking import MaskingOptions  # noqa: E402
from data_prep.text_input import ReaderOptions  # noqa: E402


def test_beam_direct_runner_matches_local_runner(tmp_path, shared_data):
    model = shared_data / "spm" / "albert_style_pd8k.model"
    corpus = shared_data / "corpus" / "gutenberg"
    files = [str(corpus / "pg20170.txt"), str(corpus / "pg20249.txt"), str(corpus / "pg11563.txt")]
    options = runner.RunOptions(
        spm_model_file=str(model), reader=ReaderOptions(input_format="raw"),
        instances=pipeline.InstanceOptions(max_seq_length=64, dupe_factor=2,
                                           masking=MaskingOptions(max_predictions_per_seq=10)),
        layout=pipeline.LayoutOptions(block_documents=2, task_tokens=20_000,
                                      shuffle_buckets_per_file=3, block_chars=40_000))
    local = [str(tmp_path / f"local-{i}") for i in range(2)]
    beam = [str(tmp_path / f"beam-{i}") for i in range(2)]
    summary = runner.create_pretraining_data(files, local, options, log=lambda m: None)
    beam_pipeline.run(",".join(files), beam, options,
                      pipeline_args=["--direct_num_workers=2",
                                     "--direct_running_mode=multi_processing"])
    for ours, theirs in zip(local, beam):
        with open(ours, "rb") as a, open(theirs, "rb") as b:
            assert a.read() == b.read()
    with open(runner.default_summary_path(beam)) as handle:  # _beam-0.summary.json
        beam_summary = json.load(handle)
    for key in ("instances", "tokens", "masked_tokens", "ngram_spans", "sop_labels",
                "random_document_b", "input"):
        assert beam_summary[key] == summary[key]
    assert summary["input"]["documents_split_at_block_chars"] > 0  # long books were cut
    assert summary["instances"] > 500
