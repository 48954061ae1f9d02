"""albert_tf.predict: batch prediction over files, in order, resumable, bad lines named."""
import json

import pytest

from albert_tf import pipeline, predict
from albert_tf.errors import UserError
from tests.helpers import hf_models

LINES = ["Anna Smith lives in New York.", "Bob works for the United Nations.",
         "Paris is nice.", "Zürich, 1999.", "The end."]


@pytest.fixture(scope="module")
def ner(tmp_path_factory, shared_data):
    spm = str(shared_data / "spm_official" / "30k-clean.model")
    directory = str(tmp_path_factory.mktemp("hf") / "ner")
    hf_models.write_hf_dir(directory, "token_classifier", spm, hf_models.NER_LABELS, seed=5)
    return pipeline("token-classification", model=directory, batch_size=2,
                    aggregation_strategy="simple")


def same_entities(got, expected):
    """Equal entities; scores to 1e-5 (a batch pads its rows, a lone text does not)."""
    assert [{k: v for k, v in e.items() if k != "score"} for e in got] == \
        [{k: v for k, v in e.items() if k != "score"} for e in expected]
    assert [e["score"] for e in got] == pytest.approx([e["score"] for e in expected], abs=1e-5)


def run(ner, tmp_path, text, name="in.txt", **kwargs):
    source = tmp_path / name
    source.write_text(text, encoding="utf-8")
    output = tmp_path / (name + ".out.jsonl")
    progress = predict.predict_file(ner, "token-classification", str(source), str(output),
                                    **kwargs)
    return progress, output


def test_one_line_per_input_in_order_with_ids(ner, tmp_path):
    records = [{"id": f"doc-{i}", "text": text} for i, text in enumerate(LINES)]
    _, output = run(ner, tmp_path, "".join(json.dumps(r) + "\n" for r in records), "in.jsonl")
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert [(x["line"], x["id"]) for x in lines] == [(i + 1, f"doc-{i}") for i in range(5)]
    for got, text in zip(lines, LINES):
        same_entities(got["result"], ner(text))
    assert not (tmp_path / "in.jsonl.out.jsonl.partial").exists()


def test_plain_text_and_tsv_inputs(ner, tmp_path):
    _, text_out = run(ner, tmp_path, "\n".join(LINES[:2]) + "\n\n" + LINES[2] + "\n")
    assert [json.loads(x)["line"] for x in text_out.read_text().splitlines()] == [1, 2, 4]
    tsv = "id\ttext\n" + "".join(f"{i}\t{t}\n" for i, t in enumerate(LINES[:3]))
    _, tsv_out = run(ner, tmp_path, tsv, "in.tsv")
    assert [json.loads(x)["id"] for x in tsv_out.read_text().splitlines()] == ["0", "1", "2"]


def test_bad_lines_are_named_or_skipped_and_counted(ner, tmp_path):
    text = '{"text": "fine"}\nnot json\n{"txt": "typo"}\n{"text": "fine too"}\n'
    with pytest.raises(UserError, match=r"in.jsonl line 2: not JSON .*\(--skip_bad_lines "
                                        "skips such lines\)"):
        run(ner, tmp_path, text, "in.jsonl")
    (tmp_path / "in.jsonl.out.jsonl.partial").unlink()
    (tmp_path / "in.jsonl.out.jsonl.partial.json").unlink()
    progress, output = run(ner, tmp_path, text, "in.jsonl", skip_bad_lines=True)
    assert progress.skipped == 2 and "in.jsonl line 2: not JSON" in progress.first_skipped
    assert [json.loads(x)["line"] for x in output.read_text().splitlines()] == [1, 4]


def test_tsv_quotes_and_byte_order_marks_are_text(ner, tmp_path):
    tsv = '\ufeffid\ttext\n1\t"Hello" she said\n2\t"unmatched quote\n'
    _, output = run(ner, tmp_path, tsv, "quotes.tsv")
    lines = [json.loads(x) for x in output.read_text().splitlines()]
    assert [x["id"] for x in lines] == ["1", "2"]
    same_entities(lines[0]["result"], ner('"Hello" she said'))
    _, output = run(ner, tmp_path, '\ufeff{"text": "Anna."}\n', "bom.jsonl")
    assert json.loads(output.read_text())["line"] == 1


def test_fields_of_the_wrong_type_are_bad_lines(ner, tmp_path):
    text = '{"text": 5}\n{"text": "\\ud83d cut emoji"}\n{"text": "fine", "id": "\\ud83d"}\n'
    progress, output = run(ner, tmp_path, text, "types.jsonl", skip_bad_lines=True)
    assert progress.skipped == 2
    assert "types.jsonl line 1: 'text' is a int, not a string" in progress.first_skipped
    line = json.loads(output.read_text())
    assert line["line"] == 3 and line["id"] == "\ud83d"


def test_a_text_the_task_cannot_read_names_its_line(tmp_path, ner):
    fill = pipeline("fill-mask", model=str(tmp_path_factory_mlm(tmp_path)))
    source = tmp_path / "masks.txt"
    source.write_text("A [MASK] day.\nNo mask here.\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"masks.txt line 2: fill-mask: no \[MASK\] in"):
        predict.predict_file(fill, "fill-mask", str(source), str(tmp_path / "out.jsonl"))


def tmp_path_factory_mlm(tmp_path):
    import pathlib

    from tests.conftest import SHARED_DATA

    directory = tmp_path / "mlm"
    hf_models.write_hf_dir(str(directory), "masked_lm",
                           str(pathlib.Path(SHARED_DATA) / "spm_official" / "30k-clean.model"))
    return directory


class Interrupting:
    """A pipeline that raises KeyboardInterrupt after `after` results (as Ctrl-C would)."""

    def __init__(self, runner, after):
        self.runner, self.after, self.count = runner, after, 0
        self.batch_size = runner.batch_size

    def resolve_options(self, options):
        return self.runner.resolve_options(options)

    def keyed(self, pairs, options, skip_errors=False):
        for pair in self.runner.keyed(pairs, options, skip_errors):
            if self.count == self.after:
                raise KeyboardInterrupt
            self.count += 1
            yield pair


def test_an_interrupted_run_resumes_to_the_same_bytes(ner, tmp_path):
    lines = [json.dumps({"text": f"{LINES[i % 5]} {i}"}) if i % 4 else "not json"
             for i in range(24)]
    text = "\n".join(lines) + "\n"
    whole_progress, whole = run(ner, tmp_path, text, "whole.jsonl", skip_bad_lines=True)
    assert whole_progress.skipped == 6
    source = tmp_path / "parts.jsonl"
    source.write_text(text, encoding="utf-8")
    output = tmp_path / "parts.out.jsonl"
    for after in (3, 5, 7):  # each rerun resumes, then stops again mid-group
        with pytest.raises(KeyboardInterrupt):
            predict.predict_file(Interrupting(ner, after), "token-classification", str(source),
                                 str(output), skip_bad_lines=True, fingerprint="f")
        state = json.loads((tmp_path / "parts.out.jsonl.partial.json").read_text())
        assert state["lines"] > 0 and state["lines"] % ner.batch_size == 0
        # a kill after the last flush leaves more bytes than recorded: cut on resume
        with open(tmp_path / "parts.out.jsonl.partial", "ab") as partial:
            partial.write(b'{"line": 999, "half a li')
    progress = predict.predict_file(ner, "token-classification", str(source), str(output),
                                    skip_bad_lines=True, fingerprint="f")
    assert output.read_bytes() == whole.read_bytes()
    assert (progress.skipped, progress.first_skipped) == (
        whole_progress.skipped, whole_progress.first_skipped.replace("whole", "parts"))


def test_a_partial_run_of_other_flags_is_refused(ner, tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    output = tmp_path / "out.jsonl"
    with pytest.raises(KeyboardInterrupt):
        predict.predict_file(Interrupting(ner, 2), "token-classification", str(source),
                             str(output), fingerprint="one")
    with pytest.raises(UserError, match="out.jsonl.partial is left by a run with other flags"):
        predict.predict_file(ner, "token-classification", str(source), str(output),
                             fingerprint="two")
