"""albert-tf's pipelines against transformers' (4.57, torch) on the same weights and inputs.

Run by `make test-oracle`, which builds .venv-oracle (torch CPU + transformers) and sets
ALBERT_TF_ORACLE_PYTHON; skipped elsewhere. Each head is a small random ALBERT written as a
Hugging Face directory with the real 30k-clean.model (tests/helpers/hf_models.py); the
oracle program runs transformers.pipeline on it in its own process.

Equal means: labels, entity groups, words, tokens and answers identical; character spans
identical once Hugging Face's leading space is trimmed (its ALBERT offsets include the
space before a word, albert-tf's point at the word); scores within 1e-4.
"""
import json
import os
import re
import subprocess

import numpy as np
import pytest

from tests.helpers import hf_models

ORACLE = os.environ.get("ALBERT_TF_ORACLE_PYTHON")
pytestmark = [pytest.mark.oracle,
              pytest.mark.skipif(not ORACLE, reason="transformers oracle not set up: run "
                                                    "`make test-oracle`")]
SCRIPT = os.path.join(os.path.dirname(os.path.dirname(__file__)), "helpers",
                      "hf_pipeline_oracle.py")
TOLERANCE = 1e-4

SHORT = [
    "Anna Smith lives in New York and works for the United Nations.",
    "Café Müller opened in Zürich in 1999, said Jean - Luc.",
    "He said: don't stop   the 35 million dollars!",
    "tabs\tand\nnewlines between words",
    "",
]
# Where transformers' fast ALBERT tokenizer differs from the original's SentencePiece (and
# from its own slow tokenizer): it splits the text at the model's user-defined pieces
# ( ) " - . – £ € and starts the text after each with "▁" ("jean-luc" -> "▁jean" "-" "▁luc",
# SentencePiece: "▁jean" "-" "luc"). albert-tf keeps the original's ids; the comparison
# texts keep those pieces apart from the next word, and `test_tokenizer_ids` checks both
# tokenizers on texts with and without them.
GLUED = ["said Jean-Luc.", "the U.S.A. (1999) cost £5 or 3.5 €", 'a "quoted" word']
_SYMBOLS = re.compile(r'([()"\-.–£€])(?=\S)')


def long_text(shared_data) -> str:
    path = shared_data / "corpus" / "gutenberg"
    book = sorted(p for p in path.iterdir() if p.suffix == ".txt")[0]
    words = book.read_text(encoding="utf-8", errors="replace").split()
    return _SYMBOLS.sub(r"\1 ", " ".join(words[2000:2260]))


ZH = ["玩家以水枪、小枪、锤子或是水炸弹泡封敌人(玩家或NPC)，即为一泡封。",
      "ALBERT 模型在 2019 年发布，Google 的 Lan 等人提出。", "中国的首都是北京。"]


def cmrc_context(shared_data) -> str:
    trial = json.loads((shared_data / "chinese" / "cmrc2018" / "cmrc2018_trial.json")
                       .read_text(encoding="utf-8"))
    return trial["data"][0]["paragraphs"][0]["context"]


@pytest.fixture(scope="module")
def models(tmp_path_factory, shared_data):
    spm = str(shared_data / "spm_official" / "30k-clean.model")
    vocab = str(shared_data / "chinese" / "vocab" / "vocab_chinese.txt")
    root = tmp_path_factory.mktemp("hf")
    write = hf_models.write_hf_dir
    return {
        "zh_ner": write(str(root / "zh_ner"), "token_classifier", None, hf_models.NER_LABELS,
                        seed=9, vocab_file=vocab),
        "zh_qa": write(str(root / "zh_qa"), "span", None, seed=10, vocab_file=vocab),
        "zh_mlm": write(str(root / "zh_mlm"), "masked_lm", None, seed=11, vocab_file=vocab),
        "sentiment": write(str(root / "sentiment"), "classifier", spm,
                           hf_models.SENTIMENT_LABELS, seed=1),
        "nli": write(str(root / "nli"), "classifier", spm, hf_models.NLI_LABELS, seed=2),
        "multilabel": write(str(root / "multilabel"), "classifier", spm,
                            hf_models.GOEMOTIONS_LABELS, seed=3,
                            problem_type="multi_label_classification"),
        "regression": write(str(root / "regression"), "classifier", spm, None, seed=4,
                            problem_type="regression"),
        "ner": write(str(root / "ner"), "token_classifier", spm, hf_models.NER_LABELS, seed=5),
        "qa": write(str(root / "qa"), "span", spm, seed=6),
        "mlm": write(str(root / "mlm"), "masked_lm", spm, seed=7),
        "mc": write(str(root / "mc"), "multiple_choice", spm, seed=8),
    }


def cases(models, long, chinese_context):
    out = []

    def add(task, model, inputs, **kwargs):
        out.append({"task": task, "model": models[model], "inputs": inputs, "kwargs": kwargs})

    texts = [t for t in SHORT if t]
    out.append({"task": "tokenize", "model": models["mlm"], "inputs": SHORT + [long] + GLUED,
                "kwargs": {}})
    add("text-classification", "sentiment", texts[0])
    add("text-classification", "sentiment", texts)
    add("text-classification", "sentiment", texts[1], top_k=None)
    add("text-classification", "sentiment", texts, top_k=1)
    add("text-classification", "sentiment", {"text": texts[0], "text_pair": texts[1]})
    add("text-classification", "sentiment", texts[2], function_to_apply="sigmoid")
    add("text-classification", "sentiment", long, truncation=True)
    add("text-classification", "multilabel", texts, top_k=None)
    add("text-classification", "regression", texts)
    for strategy in ("none", "simple", "first", "average", "max"):
        add("token-classification", "ner", texts, aggregation_strategy=strategy)
    for strategy in ("simple", "first", "average", "max"):
        add("token-classification", "ner", long, aggregation_strategy=strategy, stride=16)
    add("token-classification", "ner", texts[0], ignore_labels=[])
    add("question-answering", "qa", {"question": "Where does Anna live?", "context": texts[0]})
    add("question-answering", "qa", {"question": "Who opened it?", "context": texts[1]},
        top_k=3)
    add("question-answering", "qa", {"question": "What did they see?", "context": long},
        top_k=5)
    add("question-answering", "qa", {"question": "What did they see?", "context": long},
        handle_impossible_answer=True, max_answer_len=5, doc_stride=20)
    add("question-answering", "qa", {"question": "How much?", "context": texts[2]},
        align_to_words=False, top_k=4)
    add("fill-mask", "mlm", "The capital of France is [MASK].")
    add("fill-mask", "mlm", ["The [MASK] sat on the mat.", "A [MASK] day."], top_k=3)
    add("fill-mask", "mlm", "The [MASK] sat on the [MASK].", top_k=2)
    add("fill-mask", "mlm", "I like [MASK] music.", targets=["▁jazz", "▁rock", "classical"])
    add("feature-extraction", "mlm", texts[1])
    add("zero-shot-classification", "nli", texts[0],
        candidate_labels=["politics", "sport", "travel"])
    add("zero-shot-classification", "nli", texts[:2], candidate_labels="sport, music",
        multi_label=True, hypothesis_template="The topic is {}.")
    add("zero-shot-classification", "nli", texts[1], candidate_labels=["food"])
    add("multiple-choice", "mc", {"question": "Where is Paris?",
                                  "choices": ["In France.", "In Peru.", "On the moon."]})
    # Chinese: WordPiece (the official vocabulary as vocab.txt, BertTokenizer)
    out.append({"task": "tokenize", "model": models["zh_ner"],
                "inputs": ZH + [chinese_context], "kwargs": {}})
    for strategy in ("none", "simple", "first", "average", "max"):
        add("token-classification", "zh_ner", ZH, aggregation_strategy=strategy)
    add("token-classification", "zh_ner", chinese_context, aggregation_strategy="first",
        stride=16)
    add("question-answering", "zh_qa", {"question": "生命数耗完即算为什么？",
                                        "context": chinese_context}, top_k=3)
    add("question-answering", "zh_qa", {"question": "谁开发的？", "context": ZH[1]},
        align_to_words=False, top_k=2)
    add("fill-mask", "zh_mlm", "中国的首都是[MASK]京。", top_k=3)
    return out


def run_ours(case):
    from albert_tf import pipeline

    runner = pipeline(case["task"], model=case["model"])
    inputs, kwargs = case["inputs"], case["kwargs"]
    if case["task"] in ("question-answering", "multiple-choice"):
        return runner(**inputs, **kwargs)
    return runner(inputs, **kwargs)


def trimmed(text, start, end):
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def same_span(ours, theirs, text) -> bool:
    """Hugging Face's span with its surrounding spaces trimmed; one of spaces only (a lone
    "▁" token) matches any empty span inside it."""
    start, end = theirs
    if not text[start:end].strip():
        return ours[0] == ours[1] and start <= ours[0] <= end
    return tuple(ours) == trimmed(text, start, end)


def compare(ours, theirs, where, text=None):
    """Asserts `ours` equals `theirs` (see the module docstring); `text` is what the
    character offsets index."""
    if isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), (where, ours, theirs)
        for index, (a, b) in enumerate(zip(ours, theirs)):
            compare(a, b, f"{where}[{index}]", text)
        return
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and set(ours) == set(theirs), (where, ours, theirs)
        if "start" in theirs and text is not None:
            assert same_span((ours["start"], ours["end"]), (theirs["start"], theirs["end"]),
                             text), (where, ours, theirs)
        for key, value in theirs.items():
            if key in ("start", "end") and text is not None:
                continue
            if key in ("word", "answer"):
                assert ours[key].strip() == value.strip(), (where, key, ours, theirs)
            else:
                compare(ours[key], value, f"{where}.{key}", text)
        return
    if isinstance(theirs, float):
        assert ours == pytest.approx(theirs, abs=TOLERANCE), (where, ours, theirs)
        return
    assert ours == theirs, (where, ours, theirs)


def offsets_text(case, index):
    inputs = case["inputs"]
    if case["task"] == "question-answering":
        return inputs["context"]
    if case["task"] == "token-classification":
        return inputs[index] if isinstance(inputs, list) else inputs
    return None


def check_tokenizer_ids(case, theirs):
    """albert-tf's ids equal the slow (SentencePiece) tokenizer's on every text, and the
    fast tokenizer's on every text but those with a user-defined piece glued to a word."""
    from albert_tf.pipelines.encoding import TextEncoder
    from albert_tf.pipelines.sources import load_source

    encoder = TextEncoder(load_source(case["model"]).tokenizer)
    for text, fast, slow in zip(case["inputs"], theirs["fast"], theirs["slow"]):
        ours = encoder.pack(encoder.tokens(text)).input_ids
        assert ours == slow, (text, ours, slow)
        differs = encoder.sentencepiece and text in GLUED
        assert (ours == fast) != differs, (text, ours, fast)


def test_pipelines_equal_transformers(models, shared_data, tmp_path):
    all_cases = cases(models, long_text(shared_data), cmrc_context(shared_data))
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(all_cases))
    done = subprocess.run([ORACLE, SCRIPT, str(spec)], capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["transformers"].startswith("4.57"), report["transformers"]
    failures = []
    for number, (case, theirs) in enumerate(zip(all_cases, report["results"])):
        if case["task"] == "tokenize":
            check_tokenizer_ids(case, theirs)
            continue
        ours = run_ours(case)
        where = f"case {number} {case['task']} {case['kwargs']}"
        try:
            if case["task"] == "feature-extraction":
                np.testing.assert_allclose(np.array(ours), np.array(theirs), atol=TOLERANCE)
            elif isinstance(case["inputs"], list) and case["task"] == "token-classification":
                for index, (a, b) in enumerate(zip(ours, theirs)):
                    compare(a, b, f"{where}[{index}]", offsets_text(case, index))
            else:
                compare(ours, theirs, where, offsets_text(case, 0))
        except AssertionError as error:
            failures.append(str(error)[:1500])
    assert not failures, "\n".join(failures)
