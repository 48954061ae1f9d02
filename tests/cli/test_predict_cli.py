"""python -m albert_tf.predict as users run it: a file in, JSON lines out, kill -9 resumed."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import hf_models


@pytest.fixture(scope="module")
def sentiment(tmp_path_factory, shared_data):
    spm = str(shared_data / "spm_official" / "30k-clean.model")
    directory = str(tmp_path_factory.mktemp("hf") / "sentiment")
    return hf_models.write_hf_dir(directory, "classifier", spm, hf_models.SENTIMENT_LABELS)


def predict(*args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "albert_tf.predict", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), **kwargs)


def test_a_file_in_json_lines_out(sentiment, tmp_path):
    source = tmp_path / "reviews.jsonl"
    source.write_text('{"id": "r1", "text": "A gripping film."}\n\n{"text": "Dull."}\n')
    output = tmp_path / "labels.jsonl"
    done = predict("--model", sentiment, "--task", "sentiment-analysis", "--input",
                   str(source), "--output", str(output), "--options", '{"top_k": null}')
    stdout, stderr = done.communicate(timeout=300)
    assert done.returncode == 0, stderr
    assert stdout.strip() == f"predict: wrote {output} (3 input lines)"
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert [(x["line"], x.get("id")) for x in lines] == [(1, "r1"), (3, None)]
    assert [len(x["result"]) for x in lines] == [2, 2]
    again = predict("--model", sentiment, "--task", "ner", "--input", str(source), "--output",
                    str(output))
    _, stderr = again.communicate(timeout=300)
    assert again.returncode == 2
    assert stderr.strip().splitlines()[-1] == (
        f"predict.py: error: --output={output} exists (a finished run): delete it or choose "
        "another --output")


def test_options_must_be_a_json_object(sentiment, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("text\n")
    done = predict("--model", sentiment, "--task", "text-classification", "--input",
                   str(source), "--output", str(tmp_path / "o.jsonl"), "--options", "top_k=3")
    _, stderr = done.communicate(timeout=300)
    assert done.returncode == 2
    assert stderr.strip().splitlines()[-1].startswith(
        "predict.py: error: --options is not a JSON object: Expecting value")


@pytest.mark.slow  # two runs of 30,000 lines and an interrupted one: ~40 s
def test_kill_9_midway_then_rerun_gives_the_same_bytes(sentiment, tmp_path):
    words = "anna smith lives in new york and works for the united nations".split()
    source = tmp_path / "lines.txt"
    source.write_text("".join(" ".join(words[(i + j) % len(words)] for j in range(3 + i % 9))
                              + "\n" for i in range(30000)))
    flags = ["--model", sentiment, "--task", "text-classification", "--input", str(source),
             "--batch_size", "16"]
    whole = tmp_path / "whole.jsonl"
    assert predict(*flags, "--output", str(whole)).wait(timeout=600) == 0
    output = tmp_path / "resumed.jsonl"
    state = tmp_path / "resumed.jsonl.partial.json"
    process = predict(*flags, "--output", str(output))
    deadline = time.monotonic() + 300
    while not (state.exists() and json.loads(state.read_text() or "{}").get("lines", 0) > 1000):
        assert process.poll() is None and time.monotonic() < deadline, "no progress recorded"
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    lines_done = json.loads(state.read_text())["lines"]
    assert 0 < lines_done < 30000 and not output.exists()
    rerun = predict(*flags, "--output", str(output))
    stdout, stderr = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, stderr
    assert output.read_bytes() == whole.read_bytes()
