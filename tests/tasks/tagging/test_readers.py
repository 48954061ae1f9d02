"""Named-entity readers: the real CoNLL-2003, CLUENER and MSRA samples, the custom
formats, and one exact one-line error (file:line, problem, count) per kind of bad input."""
import json
import subprocess
import sys

import pytest

from albert_tf.errors import UserError
from albert_tf.tasks.tagging import readers
from albert_tf.tasks.tagging.readers import (EntitySpan, TaggingDataError, find_split_file,
                                             label_set, read_sentences)


def write(path, lines, encoding="utf-8"):
    path.write_bytes("".join(line + "\n" for line in lines).encode(encoding))
    return str(path)


def jsonl(path, objects):
    return write(path, [o if isinstance(o, str) else json.dumps(o, ensure_ascii=False)
                        for o in objects])


def bio_spans(tags):
    """(type, first word, end word) of each BIO entity (a B-, then its I-s)."""
    spans, current = [], None
    for index, tag in enumerate(tags + ["O"]):
        if current and tag != f"I-{current[0]}":
            spans.append((current[0], current[1], index))
            current = None
        if tag.startswith("B-"):
            current = (tag[2:], index)
    return spans


def error(call, *args, **kwargs):
    with pytest.raises(TaggingDataError) as info:
        call(*args, **kwargs)
    assert isinstance(info.value, UserError) and isinstance(info.value, ValueError)
    return str(info.value)


# --- the real samples ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ner_dir(shared_data):
    path = shared_data / "ner"
    if not path.is_dir():
        pytest.skip(f"{path} not found (the NER samples)")
    return path


def test_conll2003_sample(ner_dir):
    path = str(ner_dir / "conll2003" / "eng.train")
    sentences = read_sentences("conll2003", path)
    assert len(sentences) == 1016 and sentences.skipped_lines == 0
    assert sentences[0].words[:3] == ["EU", "rejects", "German"]
    assert sentences[0].tags[:3] == ["I-ORG", "O", "I-MISC"]  # IOB1, as the file has it
    assert sentences[0].source == f"{path}:3"  # line 1 is -DOCSTART-, line 2 blank
    assert all(s.text is None and s.offsets is None for s in sentences)
    assert not any("-DOCSTART-" in s.words for s in sentences)
    assert all(len(s.words) == len(s.tags) > 0 for s in sentences)
    assert sum(len(s.words) for s in sentences) == 12378 - 63  # token lines - DOCSTART lines
    assert label_set(sentences) == ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "I-ORG", "I-PER"]


def test_cluener_sample_round_trips(ner_dir):
    path = ner_dir / "cluener" / "train.json"
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    sentences = read_sentences("cluener", str(path))
    # The real train set's one nested-span line is not in this 982-line prefix.
    assert len(raw) == len(sentences) == 982 and sentences.skipped_lines == 0
    for line_no, (obj, sentence) in enumerate(zip(raw, sentences), start=1):
        text = obj["text"]
        assert sentence.source == f"{path}:{line_no}"
        assert sentence.text == text and sentence.words == list(text)
        assert all(text[s:e] == w for w, (s, e) in zip(sentence.words, sentence.offsets))
        expected = {(t, entity, s, e + 1) for t, entities in obj["label"].items()
                    for entity, offsets in entities.items() for s, e in offsets}
        from_tags = set()
        for entity_type, first, end in bio_spans(sentence.tags):
            start, stop = sentence.char_span(first, end)
            from_tags.add((entity_type, text[start:stop], start, stop))
        assert from_tags == expected
        assert {(sp.type, text[sp.start:sp.end], sp.start, sp.end)
                for sp in sentence.spans} == expected
    assert len(label_set(sentences)) == 1 + 2 * 10  # O and B-/I- of CLUENER's 10 types


def test_msra_sample(ner_dir):
    path = str(ner_dir / "msra" / "train.txt")
    sentences = read_sentences("msra", path)
    assert len(sentences) == 365 and sentences.skipped_lines == 0
    assert sum(len(s.words) for s in sentences) == 14781
    for sentence in sentences:
        assert sentence.text == "".join(sentence.words)
        assert [sentence.text[s:e] for s, e in sentence.offsets] == sentence.words
    assert label_set(sentences) == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]


def test_msra_empty_tags_counted_and_skipped(ner_dir, tmp_path):
    """The full MSRA file has `0<TAB>` lines (an empty tag): injected into the sample."""
    lines = (ner_dir / "msra" / "train.txt").read_text(encoding="utf-8").split("\n")[:-1]
    blank = [i for i, line in enumerate(lines) if not line]
    # Three bad lines in two sentences: both lines go into the sentence before blank[9].
    for at in sorted([blank[4] - 1, blank[9] - 2, blank[9] - 1], reverse=True):
        lines.insert(at, "0\t")
    path = write(tmp_path / "train.txt", lines)
    first = blank[4]  # the first injected line's 1-based number
    assert error(read_sentences, "msra", path) == (
        f"{path}:{first}: empty tag (3 such lines in this file; --skip_bad_lines drops the "
        "sentences holding them)")
    sentences = read_sentences("msra", path, skip_bad_lines=True)
    assert (len(sentences), sentences.skipped_lines, sentences.dropped_sentences) == (363, 3, 2)
    assert not any("0" == w for s in sentences for w in s.words)


# --- CoNLL-2003 ----------------------------------------------------------------------------------


CONLL = ["-DOCSTART- -X- -X- O", "", "EU NNP B-NP B-ORG", "rejects VBZ B-VP O", "",
         "", "Peter NNP B-NP B-PER", "Blackburn NNP I-NP I-PER", "",
         "-DOCSTART- -X- -X- O", "", "BRUSSELS NNP B-NP B-LOC"]


def test_conll2003_layout(tmp_path):
    path = write(tmp_path / "eng.train", CONLL)
    sentences = read_sentences("conll2003", path)
    assert [s.words for s in sentences] == [["EU", "rejects"], ["Peter", "Blackburn"],
                                            ["BRUSSELS"]]
    assert [s.tags for s in sentences] == [["B-ORG", "O"], ["B-PER", "I-PER"], ["B-LOC"]]
    assert [s.source for s in sentences] == [f"{path}:3", f"{path}:7", f"{path}:12"]
    # \r\n line ends, a BOM, tabs between columns
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(CONLL).replace(" NNP ", "\tNNP\t")
                     .encode() + b"\r\n")
    assert [s.tags for s in read_sentences("conll2003", str(crlf))] == [s.tags for s in sentences]


def test_conll2003_bad_lines(tmp_path):
    path = write(tmp_path / "eng.train", ["EU NNP B-NP B-ORG", "rejects VBZ B-VP", "",
                                          "Peter NNP B-NP ", "x y", "", "ok NN B-NP O"])
    assert error(read_sentences, "conll2003", path) == (
        f"{path}:2: wrong number of columns: found 3, expected 4: word POS chunk NER "
        "(2 such lines and 1 other bad line in this file: 1 empty tag; --skip_bad_lines drops "
        "the sentences holding them)")
    sentences = read_sentences("conll2003", path, skip_bad_lines=True)
    assert [s.words for s in sentences] == [["ok"]]
    assert (sentences.skipped_lines, sentences.dropped_sentences) == (3, 2)
    one = write(tmp_path / "one.txt", ["EU NNP B-NP B-ORG", "rejects VBZ B-VP\t"])
    assert error(read_sentences, "conll2003", one) == (
        f"{one}:2: empty tag (1 such line in this file; --skip_bad_lines drops the sentence "
        "holding it)")


def test_find_split_file_both_namings(tmp_path):
    original, renamed, empty = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for folder, names in ((original, ("eng.train", "eng.testa", "eng.testb")),
                          (renamed, ("train.txt", "valid.txt", "test.txt"))):
        folder.mkdir()
        for name in names:
            write(folder / name, CONLL)
        found = [find_split_file(str(folder), split) for split in ("train", "dev", "test")]
        assert found == [str(folder / name) for name in names]
        assert len(read_sentences("conll2003", found[0])) == 3
    empty.mkdir()
    assert error(find_split_file, str(empty), "dev") == (
        f"{empty}: no conll2003 dev file: looked for eng.testa, valid.txt, dev.txt")
    write(renamed / "eng.train", CONLL)
    assert error(find_split_file, str(renamed), "train") == (
        f"{renamed}: eng.train and train.txt are all conll2003 train files; keep one")
    assert find_split_file(str(renamed), "test", "msra") == str(renamed / "test.txt")
    assert error(find_split_file, str(tmp_path / "nope"), "train") == (
        f"{tmp_path / 'nope'}: no such directory")


# --- CLUENER -------------------------------------------------------------------------------------


def cluener(text, **label):
    return {"text": text, "label": label}


def test_cluener_unlabelled_test_lines(tmp_path):
    path = jsonl(tmp_path / "test.json", [{"id": 0, "text": "四川敦煌学"},
                                          {"id": 1, "text": "不 至于"}])
    sentences = read_sentences("cluener", path)
    assert [(s.example_id, s.words, s.tags, s.spans) for s in sentences] == [
        (0, list("四川敦煌学"), None, None), (1, ["不", " ", "至", "于"], None, None)]
    assert label_set(sentences) == []


@pytest.mark.parametrize("line, message", [
    ('{"text": "浙商银行", "label": {', "not valid JSON: Expecting property name enclosed in "
     "double quotes at column 28"),
    ('["浙商银行"]', "not a JSON object: got list"),
    ({"label": {}}, "missing 'text'"),
    ({"text": 5, "label": {}}, "'text' is not a string: got int"),
    ({"text": " ", "label": {}}, "empty text"),
    ({"text": "浙商银行", "label": ["company"]},
     "malformed 'label': expected {type: {entity text: [[start, end], ...]}}, got list"),
    (cluener("浙商银行", company={"浙商银行": [0, 3]}),
     "malformed 'label': company '浙商银行': the offsets must be [[start, end], ...], got [0, 3]"),
    (cluener("浙商银行", company={"浙商银行": [[0, 4]]}),
     "span outside the text: company '浙商银行' [0, 4]; the text has 4 characters"),
    (cluener("浙商银行", company={"浙商银行": [[0, 2]]}),
     "span does not match its text: company '浙商银行' [0, 2] is '浙商银' in the text (CLUENER "
     "end offsets are inclusive)"),
    (cluener("浙商银行", company={"浙商银行": [[0, 3]]}, address={"浙商": [[0, 1]]}),
     "overlapping entities: address '浙商' [0, 1] and company '浙商银行' [0, 3]; flat BIO tags "
     "cannot hold nested or overlapping entities"),
    ({"id": 3, "text": "浙商银行"}, "no 'label': the first line (1) has one; a file is all "
     "labelled or all unlabelled"),
])
def test_cluener_bad_lines(tmp_path, line, message):
    good = cluener("叶老桂博士", name={"叶老桂": [[0, 2]]})
    path = jsonl(tmp_path / "train.json", [good, line, good, line])
    assert error(read_sentences, "cluener", path) == (
        f"{path}:2: {message} (2 such lines in this file; --skip_bad_lines skips them)")
    sentences = read_sentences("cluener", path, skip_bad_lines=True)
    assert [s.source for s in sentences] == [f"{path}:1", f"{path}:3"]
    assert (sentences.skipped_lines, sentences.dropped_sentences) == (2, 0)


def test_cluener_counts_every_kind_and_labels_in_unlabelled_files(tmp_path):
    path = jsonl(tmp_path / "test.json", [
        {"text": "四川"}, "", {"text": ""}, cluener("四川", address={"四川": [[0, 1]]}),
        {"text": ""}, "{"])
    assert error(read_sentences, "cluener", path) == (
        f"{path}:3: empty text (2 such lines and 2 other bad lines in this file: 1 'label' in an "
        "unlabelled file, 1 not valid JSON; --skip_bad_lines skips them)")
    assert len(read_sentences("cluener", path, skip_bad_lines=True)) == 1


def test_cluener_repeated_span_and_empty_label(tmp_path):
    path = jsonl(tmp_path / "dev.json", [
        cluener("北京和北京", address={"北京": [[0, 1], [3, 4], [0, 1]]}), cluener("没有")])
    repeated, none = read_sentences("cluener", path)
    assert repeated.tags == ["B-address", "I-address", "O", "B-address", "I-address"]
    assert repeated.spans == [EntitySpan("address", 0, 2), EntitySpan("address", 3, 5)]
    assert none.tags == ["O", "O"] and none.spans == []


# --- MSRA, files, options ------------------------------------------------------------------------


def test_msra_layouts_and_bad_lines(tmp_path):
    path = write(tmp_path / "train.txt", ["中\tB-LOC", "国 I-LOC", "\u3000\tO", "", "", "好\tO"])
    first, second = read_sentences("msra", path)
    assert first.words == ["中", "国", "\u3000"] and first.text == "中国\u3000"
    assert first.tags == ["B-LOC", "I-LOC", "O"] and second.source == f"{path}:6"
    bad = write(tmp_path / "bad.txt", ["中\tB-LOC", "国", "", "好\tO\tO", "\tO", "", "是\tO"])
    assert error(read_sentences, "msra", bad) == (
        f"{bad}:2: wrong number of columns: found 1, expected 2: character tag (2 such lines "
        "and 1 other bad line in this file: 1 empty character; --skip_bad_lines drops the "
        "sentences holding them)")


def test_not_utf8_line(tmp_path):
    path = tmp_path / "train.txt"
    path.write_bytes("中\tO\n".encode() + b"\xff\tO\n\n" + "好\tO\n".encode())
    assert error(read_sentences, "msra", str(path)) == (
        f"{path}:2: not valid UTF-8: invalid start byte at byte 1 of the line (1 such line in "
        "this file; --skip_bad_lines drops the sentence holding it)")
    assert [s.words for s in read_sentences("msra", str(path), skip_bad_lines=True)] == [["好"]]


def test_missing_empty_and_all_bad_files(tmp_path):
    assert error(read_sentences, "msra", str(tmp_path / "no.txt")) == (
        f"{tmp_path / 'no.txt'}: no such file")
    assert error(read_sentences, "msra", str(tmp_path)) == (
        f"{tmp_path} is a directory; give the file itself")
    empty = write(tmp_path / "empty.txt", ["", ""])
    assert error(read_sentences, "conll2003", empty) == (
        f"{empty}: no sentences: the file has none")
    bad = write(tmp_path / "bad.txt", ["x", "", "y"])
    assert error(read_sentences, "msra", bad, skip_bad_lines=True) == (
        f"{bad}: no sentences: all held bad lines (2)")


def test_options_are_checked(tmp_path):
    path = write(tmp_path / "train.txt", ["a O"])
    with pytest.raises(UserError, match="unknown tagging task 'ner'; expected one of conll2003, "
                       "cluener, msra, custom"):
        read_sentences("ner", path)
    with pytest.raises(UserError, match=r"^--delimiter: for custom column files only "
                       r"\(--task_name=msra has a fixed layout\)$"):
        read_sentences("msra", path, delimiter="\t")
    with pytest.raises(UserError, match=r"^--token_column, --label_column: for custom column "
                       r"files only \(.*x.json is read as JSON lines\)$"):
        read_sentences("custom", str(tmp_path / "x.json"), token_column=1, label_column=2)


# --- custom --------------------------------------------------------------------------------------


def test_custom_columns(tmp_path):
    default = write(tmp_path / "train.txt", ["-DOCSTART- O", "", "John NNP B-PER",
                                             "runs VBZ O", "", "Paris NNP B-LOC"])
    sentences = read_sentences("custom", default)
    assert [(s.words, s.tags) for s in sentences] == [(["John", "runs"], ["B-PER", "O"]),
                                                      (["Paris"], ["B-LOC"])]
    tsv = write(tmp_path / "train.tsv", ["B-PER\tNew York\tx", "O\t.\tx"])
    [sentence] = read_sentences("custom", tsv, token_column=1, label_column=0, delimiter="\t")
    assert sentence.words == ["New York", "."] and sentence.tags == ["B-PER", "O"]
    unlabelled = write(tmp_path / "test.txt", ["John", "runs", "", "Paris", "x O"])
    assert error(read_sentences, "custom", unlabelled) == (
        f"{unlabelled}:5: more than one column in an unlabelled file: found 2; the first line "
        "has one (1 such line in this file; --skip_bad_lines drops the sentence holding it)")
    first, = read_sentences("custom", unlabelled, skip_bad_lines=True)
    assert first.words == ["John", "runs"] and first.tags is None
    short = write(tmp_path / "short.txt", ["John B-PER", "runs"])
    assert error(read_sentences, "custom", short) == (
        f"{short}:2: too few columns: found 1; the token column is 0 and the label column -1 "
        "(1 such line in this file; --skip_bad_lines drops the sentence holding it)")
    empty_tag = write(tmp_path / "tags.tsv", ["John\t", "runs\tO"])
    assert error(read_sentences, "custom", empty_tag, delimiter="\t").startswith(
        f"{empty_tag}:1: empty tag (1 such line")


def test_custom_json(tmp_path):
    text = "John Smith visited 北京, twice."
    path = jsonl(tmp_path / "train.jsonl", [
        {"id": "a", "text": text, "entities": [
            {"type": "LOC", "start": 19, "end": 21, "text": "北京"},
            {"type": "PER", "start": 0, "end": 10}]}])
    [sentence] = read_sentences("custom", path)
    assert sentence.words == ["John", "Smith", "visited", "北", "京", ",", "twice", "."]
    assert sentence.tags == ["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "O", "O"]
    assert [text[s:e] for s, e in sentence.offsets] == sentence.words
    assert sentence.spans == [EntitySpan("PER", 0, 10), EntitySpan("LOC", 19, 21)]
    assert sentence.example_id == "a" and sentence.char_span(0, 2) == (0, 10)
    test = jsonl(tmp_path / "test.json", [{"text": "Paris"}])
    assert read_sentences("custom", test)[0].tags is None


@pytest.mark.parametrize("entities, message", [
    ({"type": "PER"}, "malformed 'entities': entity 0 is {\"type\": \"PER\"}; expected "
     "{\"type\": str, \"start\": int, \"end\": int}"),
    ({"type": "PER", "start": 0, "end": 12}, "entity outside the text: PER [0, 12); the text "
     "has 11 characters (end is exclusive)"),
    ({"type": "PER", "start": 3, "end": 3}, "empty entity: PER [3, 3); the text has 11 "
     "characters (end is exclusive)"),
    ({"type": "PER", "start": 0, "end": 4, "text": "Jon"}, "entity text does not match its "
     "offsets: PER [0, 4) is 'John' in the text, not 'Jon' (end is exclusive)"),
    ({"type": "PER", "start": 0, "end": 3}, "entity boundary inside a word: PER [0, 3) 'Joh': "
     "entities must begin and end at word boundaries (whitespace, punctuation, CJK characters)"),
    ({"type": "PER", "start": 0, "end": 5}, "entity boundary inside a word: PER [0, 5) 'John ': "
     "entities must begin and end at word boundaries (whitespace, punctuation, CJK characters)"),
])
def test_custom_json_bad_entities(tmp_path, entities, message):
    text = "John runs ."
    path = jsonl(tmp_path / "train.json", [{"text": text, "entities": []},
                                           {"text": text, "entities": [entities]}])
    assert error(read_sentences, "custom", path) == (
        f"{path}:2: {message} (1 such line in this file; --skip_bad_lines skips it)")


def test_custom_json_overlaps_use_exclusive_ends(tmp_path):
    path = jsonl(tmp_path / "train.json", [{"text": "New York City", "entities": [
        {"type": "LOC", "start": 0, "end": 8}, {"type": "LOC", "start": 4, "end": 13}]}])
    assert error(read_sentences, "custom", path) == (
        f"{path}:1: overlapping entities: LOC 'New York' [0, 8) and LOC 'York City' [4, 13); "
        "flat BIO tags cannot hold nested or overlapping entities (1 such line in this file; "
        "--skip_bad_lines skips it)")


def test_split_words_and_label_set():
    assert [("a.b c,中文")[s:e] for s, e in readers.split_words("a.b c,中文")] == [
        "a", ".", "b", "c", ",", "中", "文"]

    class Sentence:
        def __init__(self, tags):
            self.tags = tags

    assert label_set([Sentence(["I-PER", "O", "B-LOC", "E-LOC", "S-LOC", "I-LOC"]),
                      Sentence(None), Sentence(["B-PER", "MISC"])]) == [
        "O", "B-LOC", "I-LOC", "E-LOC", "S-LOC", "MISC", "B-PER", "I-PER"]


def test_no_tensorflow_import():
    code = ("import sys; import albert_tf.tasks.tagging.readers; "
            "assert 'tensorflow' not in sys.modules, 'readers imported TensorFlow'")
    subprocess.run([sys.executable, "-c", code], check=True)
