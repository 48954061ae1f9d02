"""Predictions files of token classification written and scored back, on the real samples.

`postprocess.write_predictions` then `postprocess.score_prediction_file` (and its CLI,
`python -m albert_tf.tasks.tagging evaluate`) on the shared CoNLL-2003 (IOB1), MSRA
(BIO) and CLUENER2020 (JSON, inclusive ends) samples: the files' layout, gold tags as
predictions scoring 1.0, perturbed predictions scoring exactly what seqeval 1.2.2's
default mode gives, the CLI printing the same JSON, and one-line errors naming
file:line for a predictions file that does not match its data file. No training.
"""
import json
import os
import pathlib
import random
import subprocess
import sys
import warnings

import pytest

from albert_tf.tasks.tagging import postprocess, readers, schemes
from albert_tf.tasks.tagging.readers import TaggingDataError
from tests.conftest import REPO_ROOT

seqeval_metrics = pytest.importorskip("seqeval.metrics", reason="seqeval is the test reference")

PROG = "python -m albert_tf.tasks.tagging evaluate"


@pytest.fixture(scope="module")
def samples(shared_data):
    paths = {"conll2003": shared_data / "ner" / "conll2003" / "eng.train",
             "msra": shared_data / "ner" / "msra" / "train.txt",
             "cluener": shared_data / "ner" / "cluener" / "train.json"}
    for path in paths.values():
        if not path.exists():
            pytest.skip(f"{path} not found (shared NER samples)")
    return {task: str(path) for task, path in paths.items()}


def read(task, path):
    return list(readers.read_sentences(task, path))


def read_text(path):
    return pathlib.Path(path).read_text(encoding="utf-8")


def json_lines(path):
    """The non-empty lines of a JSON-lines file (split at "\\n" only, as the readers do)."""
    return [line for line in read_text(path).split("\n") if line]


def evaluate_cli(task, data_file, prediction_file):
    return subprocess.run([sys.executable, "-m", "albert_tf.tasks.tagging", "evaluate",
                           "--task_name", task, "--data_file", str(data_file),
                           "--prediction_file", str(prediction_file)],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120, check=False,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def assert_user_error(done, prog, *needles):
    """tests.cli.test_errors' check of the one-line error contract (exit 2, one
    `<prog>: error:` line, no traceback); imported here as that module imports TensorFlow."""
    from tests.cli.test_errors import assert_user_error as check

    return check(done, prog, *needles)


def seqeval_figures(gold, predicted):
    """seqeval 1.2.2's default-mode figures in `metrics.entity_scores`'s shape."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # UndefinedMetricWarning on zero divisions
        report = seqeval_metrics.classification_report(gold, predicted, output_dict=True)
        return {
            "precision": seqeval_metrics.precision_score(gold, predicted),
            "recall": seqeval_metrics.recall_score(gold, predicted),
            "f1": seqeval_metrics.f1_score(gold, predicted),
            "support": int(report["micro avg"]["support"]),
            "token_accuracy": seqeval_metrics.accuracy_score(gold, predicted),
            "per_type": {name: {"precision": row["precision"], "recall": row["recall"],
                                "f1": row["f1-score"], "support": int(row["support"])}
                         for name, row in report.items() if not name.endswith(" avg")},
        }


def assert_same_figures(ours, reference):
    for key in ("precision", "recall", "f1", "support", "token_accuracy"):
        assert ours[key] == reference[key], (key, ours[key], reference[key])
    assert ours["per_type"] == reference["per_type"]


def perturb(gold_iob2, seed=0):
    """Predictions made from IOB2 gold tags with every kind of mistake: entities dropped,
    retyped, cut short, extended, spurious ones, and invalid `I-X` after `O` (conlleval
    reads it as a chunk start). Types only come from `types`."""
    rng = random.Random(seed)
    types = sorted({schemes.split_tag(t)[1] for tags in gold_iob2 for t in tags if t != "O"})
    out = []
    for tags in gold_iob2:
        tags = list(tags)
        chunks = schemes.entities(tags)
        kind = rng.randrange(7)
        if kind == 0 and chunks:  # drop an entity
            c = rng.choice(chunks)
            tags[c.start:c.end] = ["O"] * (c.end - c.start)
        elif kind == 1 and chunks:  # retype an entity
            c = rng.choice(chunks)
            other = rng.choice([t for t in types if t != c.type] or types)
            tags[c.start:c.end] = [f"B-{other}"] + [f"I-{other}"] * (c.end - c.start - 1)
        elif kind == 2 and any(c.end - c.start > 1 for c in chunks):  # cut one short
            c = rng.choice([c for c in chunks if c.end - c.start > 1])
            tags[c.end - 1] = "O"
        elif kind == 3 and chunks and chunks[-1].end < len(tags) and tags[chunks[-1].end] == "O":
            c = chunks[-1]  # extend the last one over an O
            tags[c.end] = f"I-{c.type}"
        elif kind == 4:  # a spurious entity on an O word
            outside = [i for i, t in enumerate(tags) if t == "O"]
            if outside:
                tags[rng.choice(outside)] = f"B-{rng.choice(types)}"
        elif kind == 5:  # invalid IOB2: I-X right after O
            spots = [i for i, t in enumerate(tags) if t == "O" and (i == 0 or tags[i - 1] == "O")]
            if spots:
                tags[rng.choice(spots)] = f"I-{rng.choice(types)}"
        out.append(tags)  # kind 6: unchanged
    return out


def column_blocks(path):
    """predictions.txt as sentences of [word, gold, predicted] (checking its layout)."""
    content = read_text(path)
    assert content.endswith("\n\n") and "\n\n\n" not in content and "\t" not in content
    blocks = [[line.split(" ") for line in block.split("\n")]
              for block in content[:-2].split("\n\n")]
    for block in blocks:
        for fields in block:
            assert len(fields) == 3 and all(fields), fields  # single spaces, 3 fields
    return blocks


# --- column formats: CoNLL-2003 (IOB1) and MSRA (BIO) -------------------------------------

@pytest.mark.parametrize("task, file_scheme", [("conll2003", "iob1"), ("msra", "iob2")])
def test_column_predictions_round_trip(samples, tmp_path, task, file_scheme):
    data = samples[task]
    sentences = read(task, data)
    gold = [s.tags for s in sentences]
    assert schemes.detect_scheme(gold) == file_scheme
    gold_iob2 = [schemes.to_iob2(tags, file_scheme) for tags in gold]

    # Gold tags as predictions: the file repeats the data file's words and tags in order.
    path = postprocess.write_predictions(str(tmp_path), task, data, sentences, gold_iob2,
                                         file_scheme)
    assert path == str(tmp_path / "predictions.txt")
    blocks = column_blocks(path)
    assert len(blocks) == len(sentences)
    for block, sentence in zip(blocks, sentences):
        assert [f[0] for f in block] == sentence.words
        assert [f[1] for f in block] == sentence.tags  # the file's own spelling
        assert [f[2] for f in block] == sentence.tags  # written back in the file's scheme
    if task == "conll2003":  # the sample's word and tag columns, -DOCSTART- dropped
        lines = [line.split() for line in read_text(data).splitlines()
                 if line.strip() and not line.startswith("-DOCSTART-")]
        assert [(f[0], f[1]) for b in blocks for f in b] == [(l[0], l[3]) for l in lines]
        assert "-DOCSTART-" not in read_text(path)
    perfect = postprocess.score_prediction_file(task, data, path)
    assert perfect["f1"] == perfect["precision"] == perfect["recall"] == 1.0
    assert perfect["token_accuracy"] == 1.0
    assert perfect["support"] == perfect["predicted"] == perfect["correct"] == sum(
        len(schemes.entities(tags)) for tags in gold)
    assert all(row["f1"] == 1.0 for row in perfect["per_type"].values())

    # Perturbed predictions: written in the file's scheme, scored exactly as seqeval.
    predicted = perturb(gold_iob2)
    path = postprocess.write_predictions(str(tmp_path), task, data, sentences, predicted,
                                         file_scheme)
    written = [[f[2] for f in block] for block in column_blocks(path)]
    assert all(schemes.is_valid(tags, file_scheme) for tags in written)
    assert [schemes.entities(t) for t in written] == [schemes.entities(t) for t in predicted]
    scores = postprocess.score_prediction_file(task, data, path)
    assert 0.5 < scores["f1"] < 0.95 and scores["correct"] < scores["support"]
    # seqeval on the columns as written (IOB1 for CoNLL) gives the same entity figures,
    reference = seqeval_figures(gold, written)
    assert_same_figures(dict(scores, token_accuracy=reference["token_accuracy"]), reference)
    # and token_accuracy is seqeval's accuracy of the tags spelled in IOB2.
    iob2 = seqeval_figures(gold_iob2, [schemes.to_iob2(t, file_scheme) for t in written])
    assert_same_figures(scores, iob2)
    assert_same_figures(scores, seqeval_figures(gold_iob2, predicted))

    # The CLI prints the same figures as one JSON object on its last line.
    done = evaluate_cli(task, data, path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == json.loads(json.dumps(scores))


def test_unlabelled_sentences_are_written_word_predicted(tmp_path):
    data = tmp_path / "test.txt"
    data.write_text("EU\nrejects\n\nPeter\n")
    sentences = read("custom", str(data))
    assert all(s.tags is None for s in sentences)
    path = postprocess.write_predictions(str(tmp_path), "custom", str(data), sentences,
                                         [["B-ORG", "O"], ["B-PER"]], "iob1")
    assert read_text(path) == "EU I-ORG\nrejects O\n\nPeter I-PER\n\n"
    with pytest.raises(TaggingDataError, match="unlabelled data: nothing to score against"):
        postprocess.score_prediction_file("custom", str(data), path)


# --- CLUENER2020: cluener_predict.json ------------------------------------------------------

def label_spans(label):
    """{(type, entity text, start, end inclusive)} of a CLUENER "label" object."""
    return {(kind, text, start, end) for kind, found in label.items()
            for text, spans in found.items() for start, end in spans}


def test_cluener_predictions_round_trip(samples, tmp_path):
    data = samples["cluener"]
    sentences = read("cluener", data)
    gold_lines = [json.loads(line) for line in json_lines(data)]
    assert len(sentences) == len(gold_lines)
    gold = [s.tags for s in sentences]

    path = postprocess.write_predictions(str(tmp_path), "cluener", data, sentences, gold,
                                         "iob2")
    assert path == str(tmp_path / "cluener_predict.json")
    lines = json_lines(path)
    assert len(lines) == len(gold_lines)
    for index, (line, gold_line) in enumerate(zip(lines, gold_lines)):
        record = json.loads(line)
        assert set(record) == {"id", "label"}
        assert record["id"] == index  # the sample has no "id": the line's index
        # The same entities as the data file, CLUE's inclusive ends.
        assert label_spans(record["label"]) == label_spans(gold_line["label"])
        for kind, text, start, end in label_spans(record["label"]):
            assert gold_line["text"][start:end + 1] == text
    assert "\\u" not in "".join(lines) and "浙商银行" in lines[0]  # UTF-8, not \\u escapes
    perfect = postprocess.score_prediction_file("cluener", data, path)
    assert perfect["f1"] == 1.0 and perfect["token_accuracy"] == 1.0
    assert perfect["support"] == sum(len(label_spans(g["label"])) for g in gold_lines)

    predicted = perturb(gold, seed=1)
    path = postprocess.write_predictions(str(tmp_path), "cluener", data, sentences, predicted,
                                         "iob2")
    for line, sentence, tags in zip(json_lines(path), sentences, predicted):
        spans = label_spans(json.loads(line)["label"])
        assert {(k, s, e + 1) for k, _, s, e in spans} == set(schemes.entities(tags))
        assert all(sentence.text[s:e + 1] == text for _, text, s, e in spans)
    scores = postprocess.score_prediction_file("cluener", data, path)
    assert 0.5 < scores["f1"] < 0.95
    # Read back from spans, the prediction is the valid spelling of the perturbed chunks.
    assert_same_figures(scores, seqeval_figures(
        gold, [schemes.convert(tags, "iob2", "iob2") for tags in predicted]))
    assert scores["f1"] == seqeval_figures(gold, predicted)["f1"]

    done = evaluate_cli("cluener", data, path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == json.loads(json.dumps(scores))


def test_cluener_test_file_ids_are_kept_in_order(tmp_path):
    data = tmp_path / "test.json"
    texts = ["浙商银行企业信贷部", "生生不息CSOL生化狂潮"]
    data.write_text("".join(json.dumps({"id": f"t{i}", "text": t}, ensure_ascii=False) + "\n"
                            for i, t in enumerate(texts)), encoding="utf-8")
    sentences = read("cluener", str(data))
    predicted = [["B-company", "I-company", "I-company", "I-company"] + ["O"] * 5,
                 ["O"] * 4 + ["B-game"] + ["I-game"] * 3 + ["O"] * 4]
    path = postprocess.write_predictions(str(tmp_path), "cluener", str(data), sentences,
                                         predicted, "iob2")
    assert [json.loads(line) for line in json_lines(path)] == [
        {"id": "t0", "label": {"company": {"浙商银行": [[0, 3]]}}},
        {"id": "t1", "label": {"game": {"CSOL": [[4, 7]]}}}]


def test_cluener_integer_ids_stay_integers(tmp_path):
    data = tmp_path / "test.json"
    data.write_text(json.dumps({"id": 0, "text": "浙商银行"}, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    sentences = read("cluener", str(data))
    path = postprocess.write_predictions(str(tmp_path), "cluener", str(data), sentences,
                                         [["O"] * 4], "iob2")
    assert json.loads(json_lines(path)[0])["id"] == 0


# --- a predictions file that does not match its data file -------------------------------

@pytest.fixture(scope="module")
def conll_small(samples, tmp_path_factory):
    """The first 20 sentences of the CoNLL sample and their gold predictions.txt."""
    root = tmp_path_factory.mktemp("conll_small")
    blocks = read_text(samples["conll2003"]).split("\n\n")
    data = root / "eng.testb"
    kept = [b.strip("\n") for b in blocks if b.strip() and not b.startswith("-DOCSTART-")][:20]
    data.write_text("-DOCSTART- -X- O O\n\n" + "".join(b + "\n\n" for b in kept))
    sentences = read("conll2003", str(data))
    path = postprocess.write_predictions(
        str(root), "conll2003", str(data), sentences,
        [schemes.to_iob2(s.tags, "iob1") for s in sentences], "iob1")
    return {"data": data, "sentences": sentences,
            "lines": read_text(path).split("\n")}


def write_lines(path, lines):
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def test_mismatched_predictions_file_is_one_line_error(conll_small, tmp_path):
    data, lines, sentences = conll_small["data"], conll_small["lines"], conll_small["sentences"]
    second = len(sentences[0].words) + 1  # index of the second sentence's first line
    assert lines[second - 1] == ""
    # A word that differs (the second sentence's second word: 1-based line second + 2).
    changed = list(lines)
    word, gold, tag = changed[second + 1].split(" ")
    changed[second + 1] = f"{word}x {gold} {tag}"
    path = write_lines(tmp_path / "words.txt", changed)
    with pytest.raises(TaggingDataError) as err:
        postprocess.score_prediction_file("conll2003", str(data), str(path))
    source = sentences[1].source  # eng.testb:<first line of the sentence>
    assert str(err.value) == (f"{path}:{second + 2}: the words differ from the data file's "
                              f"sentence at {source}")
    assert_user_error(evaluate_cli("conll2003", data, path), PROG, f"{path}:{second + 2}: ",
                      "the words differ", source)

    # A line with a wrong number of fields: two, or four (a double space).
    for name, bad_line, count in (("two.txt", "EU I-ORG", 2), ("four.txt", "EU  I-ORG I-ORG", 4)):
        fields = list(lines)
        fields[0] = bad_line
        path = write_lines(tmp_path / name, fields)
        message = (f"{path}:1: expected `word gold predicted` separated by single spaces, "
                   f"got {count} fields")
        with pytest.raises(TaggingDataError) as err:
            postprocess.score_prediction_file("conll2003", str(data), str(path))
        assert str(err.value) == message
        assert_user_error(evaluate_cli("conll2003", data, path), PROG, message)

    # A sentence missing: the counts are named.
    path = write_lines(tmp_path / "short.txt", lines[second:])
    with pytest.raises(TaggingDataError, match="19 sentences, but the data file has 20"):
        postprocess.score_prediction_file("conll2003", str(data), str(path))
    # A sentence with a word missing: the line of its last word.
    path = write_lines(tmp_path / "missing.txt", lines[:second - 2] + lines[second - 1:])
    with pytest.raises(TaggingDataError, match=f"missing.txt:{second - 2}: the words differ"):
        postprocess.score_prediction_file("conll2003", str(data), str(path))


def test_cluener_mismatched_lines(samples, tmp_path):
    data = tmp_path / "dev.json"
    data.write_text("".join(line + "\n" for line in json_lines(samples["cluener"])[:3]),
                    encoding="utf-8")
    good = json.dumps({"id": 0, "label": {}})
    path = write_lines(tmp_path / "p.json", [good, good])
    with pytest.raises(TaggingDataError, match="2 lines, but the data file has 3 sentences"):
        postprocess.score_prediction_file("cluener", str(data), str(path))
    path = write_lines(tmp_path / "p.json", [good, "{not json", good])
    assert_user_error(evaluate_cli("cluener", data, path), PROG, f"{path}:2: not valid JSON")
    # An entity beyond the text (CLUE's ends are inclusive: [0, 3] is 4 characters).
    path = write_lines(tmp_path / "p.json", [good, good, json.dumps(
        {"id": 2, "label": {"name": {"x": [[0, 99]]}}})])
    with pytest.raises(TaggingDataError, match=r"p.json:3: entity name \[0, 100\) does not "
                                               "begin and end at word boundaries"):
        postprocess.score_prediction_file("cluener", str(data), str(path))


# --- predictions files that a careless edit or another tool could produce -----------------

def test_extra_words_at_a_sentence_end(conll_small, tmp_path):
    lines, data = conll_small["lines"], conll_small["data"]
    first = len(conll_small["sentences"][0].words)
    path = write_lines(tmp_path / "extra.txt", lines[:first] + ["extra O O"] + lines[first:])
    with pytest.raises(TaggingDataError, match=f"extra.txt:{first + 1}: "):
        postprocess.score_prediction_file("conll2003", str(data), str(path))


@pytest.mark.parametrize("tag", ["X-PER", "S-PER"])
def test_bad_predicted_tag_names_its_line(conll_small, tmp_path, tag):
    lines = list(conll_small["lines"])
    lines[0] = lines[0].rsplit(" ", 1)[0] + " " + tag
    path = write_lines(tmp_path / "tag.txt", lines)
    with pytest.raises(TaggingDataError, match="tag.txt:1: "):
        postprocess.score_prediction_file("conll2003", str(conll_small["data"]), str(path))


@pytest.mark.parametrize("label", [
    {"company": [[0, 3]]},
    {"company": {"浙商银行": [[0, 3]]}, "name": {"银行": [[2, 3]]}},
    {"company": {"浙商银行": [[0, 3]], "浙商": [[0, 3]]}},
])
def test_malformed_cluener_prediction_names_its_line(tmp_path, label):
    data = write_lines(tmp_path / "dev.json", [json.dumps(
        {"text": "浙商银行企业", "label": {"company": {"浙商银行": [[0, 3]]}}},
        ensure_ascii=False)])
    path = write_lines(tmp_path / "p.json", [json.dumps({"id": 0, "label": label},
                                                        ensure_ascii=False)])
    with pytest.raises(TaggingDataError, match="p.json:1: "):
        postprocess.score_prediction_file("cluener", str(data), str(path))


def test_a_space_character_word_round_trips(tmp_path):
    data = write_lines(tmp_path / "test.txt", ["中\tB-LOC", "国\tI-LOC", " \tO", "人\tO", ""])
    sentences = read("msra", str(data))
    assert sentences[0].words == ["中", "国", " ", "人"]
    path = postprocess.write_predictions(str(tmp_path), "msra", str(data), sentences,
                                         [s.tags for s in sentences], "iob2")
    assert postprocess.score_prediction_file("msra", str(data), path)["f1"] == 1.0


def test_missing_predictions_file_is_one_line_error(conll_small, tmp_path):
    """A wrong path (or a glob the shell did not expand) names the flag, without a traceback."""
    done = evaluate_cli("conll2003", conll_small["data"], tmp_path / "pred*.txt")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"python -m albert_tf.tasks.tagging evaluate: error: --prediction_file="
        f"{tmp_path / 'pred*.txt'}: no such predictions file")
    assert "Traceback" not in done.stderr
