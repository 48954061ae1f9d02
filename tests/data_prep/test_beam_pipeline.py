"""The Beam pipeline (DirectRunner) writes the same bytes as the local runner.

apache-beam is an optional extra that pins protobuf<7, so it is usually not in
the main venv; this module is skipped there. Run it with a venv that has the
`beam` extra, e.g. `.venv-beam/bin/python -m pytest tests/data_prep/test_beam_pipeline.py`.
The DaskRunner's tests are in test_beam_dask.py.
"""
import pathlib

import pytest

pytest.importorskip(
    "apache_beam", reason="apache_beam is not importable (optional extra: pip install .[beam]; "
    "it needs protobuf<7, so use a separate venv such as .venv-beam)")

from data_prep import beam_pipeline, runner  # noqa: E402
from tests.helpers.beam_corpus import assert_same_outputs, small_corpus  # noqa: E402


def test_beam_direct_runner_matches_local_runner(tmp_path, shared_data):
    files, options = small_corpus(shared_data)
    local = [str(tmp_path / f"local-{i}") for i in range(2)]
    beam = [str(tmp_path / f"beam-{i}") for i in range(2)]
    summary = runner.create_pretraining_data(files, local, options, log=lambda m: None)
    beam_pipeline.run(",".join(files), beam, options,
                      pipeline_args=["--direct_num_workers=2",
                                     "--direct_running_mode=multi_processing"])
    assert_same_outputs(local, beam, summary)  # summary: _beam-0.summary.json
    assert summary["input"]["documents_split_at_block_chars"] > 0  # long books were cut
    assert summary["instances"] > 500
    assert not list(tmp_path.glob(".*"))  # no temporary file left


def test_unknown_runner_is_one_line(tmp_path, shared_data):
    files, options = small_corpus(shared_data)
    with pytest.raises(beam_pipeline.UserError, match=r"^--runner=NoSuchRunner: "):
        beam_pipeline.run(",".join(files), [str(tmp_path / "out")], options,
                          runner="NoSuchRunner")


def test_writes_leave_no_temporary_file(tmp_path):
    """A file is written under a temporary name unique to the attempt; the last step removes
    the temporaries of attempts that died (those of these outputs only)."""
    outputs = [str(tmp_path / "train-00000-of-00002"), str(tmp_path / "train-00001-of-00002")]
    first = beam_pipeline._temporary_name(outputs[0])
    assert first != beam_pipeline._temporary_name(outputs[0])  # one name per attempt
    for name in (first, str(tmp_path / ".train-00001-of-00002.tmp-0123456789ab"),
                 str(tmp_path / ".other.tmp-0123456789ab")):
        pathlib.Path(name).write_bytes(b"partial")
    written = list(beam_pipeline._write_file((0, [(1, 2, b"cd"), (0, 1, b"ab")]), outputs))
    assert pathlib.Path(outputs[0]).read_bytes() == b"abcd"
    assert written[0][1].files == {outputs[0]: 3}
    beam_pipeline._remove_leftovers(outputs)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.tmp-0123456789ab",
                                                         "train-00000-of-00002"]
