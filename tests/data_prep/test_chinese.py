"""data_prep on Chinese text: sentence splitting, the WordPiece path, Chinese whole-word masking.

Corpus: slices of ../shared/data/chinese/corpus (two public-domain classics) plus a
small mixed Chinese/English file, so that `##` words occur; the official
vocab_chinese.txt (21,128 WordPiece tokens).
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from data_prep import pipeline, runner, tfrecord, zh_words
from data_prep.masking import MaskingOptions
from data_prep.sentence_split import split_sentences
from data_prep.text_input import Document, InputError, ReaderOptions, iter_documents, join_lines

from tests.conftest import REPO_ROOT

REPO = str(REPO_ROOT)
SEQ, PRED = 64, 10
MIXED = """\
Transformers are unbelievably overparameterized; ALBERT shares parameters across layers.
机器学习（machine learning）是人工智能的一个分支。ＡＬＢＥＲＴ模型在２０１９年发布！
Tokenization of internationalization and counterrevolutionaries is interesting.

他说：“今天天气很好。”然后走了。Preprocessing matters?真的吗？！是的。
Unsurprisingly, the disproportionately long words split into many wordpieces.
"""


@pytest.fixture(scope="module")
def vocab_file(chinese_vocab_file):
    return chinese_vocab_file


@pytest.fixture(scope="module")
def tokenizer(vocab_file):
    from data_prep import tokenization
    return tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=True)


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory):
    """The first 120 lines of each shared Chinese book, and the mixed file."""
    root = tmp_path_factory.mktemp("zh_corpus")
    files = []
    for name in ("三国演义.txt", "梦溪笔谈.txt"):
        source = shared_data / "chinese" / "corpus" / name
        if not source.exists():
            pytest.skip(f"{source} not found")
        with open(source, encoding="utf-8") as handle:
            lines = [next(handle) for _ in range(120)]
        path = root / name
        path.write_text("".join(lines), encoding="utf-8")
        files.append(str(path))
    mixed = root / "mixed.txt"
    mixed.write_text(MIXED, encoding="utf-8")
    return files + [str(mixed)]


def _options(vocab_file, **overrides):
    values = dict(
        vocab_file=vocab_file, reader=ReaderOptions(input_format="raw"),
        instances=pipeline.InstanceOptions(max_seq_length=SEQ, dupe_factor=2,
                                           masking=MaskingOptions(max_predictions_per_seq=PRED)),
        layout=pipeline.LayoutOptions(block_documents=2, task_tokens=5000))
    values.update(overrides)
    return runner.RunOptions(**values)


def _run(files, outputs, options):
    return runner.create_pretraining_data(files, [str(o) for o in outputs], options,
                                          log=lambda message: None)


def _read(paths):
    """Examples of TFRecord files as dicts of NumPy arrays (feature -> values)."""
    tf = pytest.importorskip("tensorflow")
    out = []
    for path in paths:
        for payload in tfrecord.read_payloads(str(path)):
            feature = tf.train.Example.FromString(payload).features.feature
            out.append({name: np.array(feature[name].int64_list.value
                                       or feature[name].float_list.value)
                        for name in feature})
    return out


def _restored(example):
    """The real ids of an instance (masked positions given back their labels)."""
    count = int(example["masked_lm_weights"].sum())
    ids = example["input_ids"][:int(example["input_mask"].sum())].copy()
    ids[example["masked_lm_positions"][:count]] = example["masked_lm_ids"][:count]
    return ids, set(example["masked_lm_positions"][:count].tolist())


def _assert_whole_words_masked(tokens, boundary, masked):
    """Groups candidates as the original does (a position with token_boundary 0 joins the
    previous word, across the middle [SEP]) and checks every masked word is masked whole."""
    word_of = {}
    last = None
    for i, token in enumerate(tokens):
        if token in ("[CLS]", "[SEP]"):
            continue
        if boundary[i] or last is None:
            last = i
        word_of[i] = last
    for i in masked:
        word = {j for j, w in word_of.items() if w == word_of[i]}
        assert word <= masked, (tokens, sorted(masked))


@pytest.fixture(scope="module")
def wordpiece_run(tmp_path_factory, corpus, vocab_file):
    out = tmp_path_factory.mktemp("zh_wp")
    outputs = [out / "train-0", out / "train-1"]
    summary = _run(corpus, outputs, _options(vocab_file))
    return outputs, summary


# --------------------------------------------------------------------------
# Sentence splitting and reading
# --------------------------------------------------------------------------


@pytest.mark.parametrize("paragraph, expected", [
    ("滚滚长江东逝水，浪花淘尽英雄。是非成败转头空。青山依旧在",
     ["滚滚长江东逝水，浪花淘尽英雄。", "是非成败转头空。", "青山依旧在"]),
    ("曹操曰：“何也？”玄德曰：“吾不知。”遂去。",
     ["曹操曰：“何也？”", "玄德曰：“吾不知。”", "遂去。"]),
    ("他说：「好！」然后『完。』）又", ["他说：「好！」", "然后『完。』）", "又"]),
    ("他说：“好！”，然后走了。真的吗？！是的。", ["他说：“好！”，然后走了。", "真的吗？！", "是的。"]),
    ("什么?你说!然后3.5元. 好", ["什么?", "你说!", "然后3.5元. 好"]),
    ("什么？！，是的｡ 好", ["什么？！，是的｡", "好"]),
    ("他去了。Mr. Smith came home. He sat down!她笑了",
     ["他去了。", "Mr. Smith came home.", "He sat down!", "她笑了"]),
    ("“何也？”曰：“不知。”", ["“何也？”", "曰：“不知。”"]),
    # ASCII quotes: closing after 。 only while one is open.
    ('他走了。"你好"，他说。', ["他走了。", '"你好"，他说。']),
    ('他说："你好。"然后走了。', ['他说："你好。"', "然后走了。"]),
])
def test_split_sentences_chinese(paragraph, expected):
    assert split_sentences(paragraph) == expected


def test_join_lines_keeps_chinese_words_whole():
    assert join_lines(["  话说天下", "大势，分久\u3000", "必合。", "Then", "more text。", "中文"]) == \
        "话说天下大势，分久必合。 Then more text。中文"


def test_raw_reader_splits_the_shared_corpus_into_sentences(corpus, shared_data):
    docs = list(iter_documents(corpus[:2], ReaderOptions(input_format="raw",
                                                         preprocess_text=False)))
    assert len(docs) == 2
    sentences = [s for d in docs for s in d.sentences]
    assert len(sentences) > 800
    for sentence in sentences:
        assert split_sentences(sentence) == [sentence]
    ends = sum(s.rstrip("”’」』）》") [-1:] in "。！？" for s in sentences)
    assert ends / len(sentences) > 0.9
    # Nothing is lost or reordered: the sentences are the text without whitespace.
    with open(corpus[1], encoding="utf-8") as handle:
        original = "".join(handle.read().split())
    assert "".join("".join(s.split()) for s in docs[1].sentences) == original


def test_wordpiece_reader_only_strips(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("  ＡＢＣ Café\u3000\n\n第二篇\n", encoding="utf-8")
    wordpiece = ReaderOptions(preprocess_text=False)
    assert [d.sentences for d in iter_documents([str(path)], wordpiece)] == \
        [("ＡＢＣ Café",), ("第二篇",)]
    assert [d.sentences for d in iter_documents([str(path)], ReaderOptions())] == \
        [("abc cafe",), ("第二篇",)]


# --------------------------------------------------------------------------
# WordPiece pretraining data
# --------------------------------------------------------------------------


def test_wordpiece_output_is_the_original_schema_and_tokenization(wordpiece_run, corpus,
                                                                  tokenizer):
    outputs, summary = wordpiece_run
    examples = _read(outputs)
    assert summary["instances"] == len(examples) > 300
    assert summary["options"]["tokenizer"] == "wordpiece"
    lengths = {"input_ids": SEQ, "input_mask": SEQ, "segment_ids": SEQ, "token_boundary": SEQ,
               "masked_lm_positions": PRED, "masked_lm_ids": PRED, "masked_lm_weights": PRED,
               "next_sentence_labels": 1}
    docs = [d for d in iter_documents(corpus, ReaderOptions(input_format="raw",
                                                            preprocess_text=False))]
    doc_ids = [" ".join(str(i) for s in d.sentences
                        for i in tokenizer.convert_tokens_to_ids(tokenizer.tokenize(s)))
               for d in docs]
    start = np.array(tokenizer.is_start_piece_table())
    as_mask = 0
    for example in examples:
        assert {k: len(v) for k, v in example.items()} == lengths
        assert example["masked_lm_weights"].dtype == np.float32
        ids, masked = _restored(example)
        n = len(ids)
        sep = int(np.flatnonzero(ids == tokenizer.sep_id)[0])
        assert ids[0] == tokenizer.cls_id and ids[-1] == tokenizer.sep_id
        assert example["segment_ids"][:n].tolist() == [0] * (sep + 1) + [1] * (n - sep - 1)
        # A and B are contiguous runs of one document's WordPiece ids.
        for part in (ids[1:sep], ids[sep + 1:n - 1]):
            text = " ".join(str(i) for i in part)
            assert any(f" {text} " in f" {d} " for d in doc_ids)
        expected_boundary = [1] + start[ids[1:sep]].tolist() + [1] + \
            start[ids[sep + 1:n - 1]].tolist() + [1]
        assert example["token_boundary"][:n].tolist() == [int(b) for b in expected_boundary]
        assert not masked & {0, sep, n - 1}
        as_mask += sum(int(example["input_ids"][p] == tokenizer.mask_id) for p in masked)
    masked_total = sum(int(e["masked_lm_weights"].sum()) for e in examples)
    assert 0.75 < as_mask / masked_total < 0.85  # the original's 80% [MASK] replacement
    assert summary["masked_tokens"] == masked_total
    assert 0.13 < summary["masked_fraction"] < 0.16
    assert 0.75 < summary["replacement"]["mask"] < 0.85


def test_masked_spans_never_split_a_wordpiece_word(wordpiece_run, tokenizer):
    outputs, _ = wordpiece_run
    continuation_masks = 0
    for example in _read(outputs):
        ids, masked = _restored(example)
        tokens = tokenizer.convert_ids_to_tokens(ids)
        boundary = [int(not t.startswith("##")) for t in tokens]
        _assert_whole_words_masked(tokens, boundary, masked)
        continuation_masks += sum(tokens[i].startswith("##") for i in masked)
    assert continuation_masks > 10  # the mixed file's English words were masked whole


@pytest.mark.parametrize("options", [MaskingOptions(), MaskingOptions(do_whole_word_mask=False),
                                     MaskingOptions(ngram=4, max_predictions_per_seq=12)])
def test_wordpiece_masking_equals_the_original_port(corpus, tokenizer, options):
    import random

    from data_prep.masking import MaskStats, mask_pair
    from tests.data_prep.test_masking import CLS, MASK, SEP, VOCAB, reference_mask

    docs = iter_documents(corpus, ReaderOptions(input_format="raw", preprocess_text=False))
    sentences = [s for d in docs for s in d.sentences]
    ids = [i for e in tokenizer.encode_ids(sentences[:300] + sentences[-12:]) for i in e]
    assert not {CLS, SEP, MASK} & set(ids)  # [unused] ids stand for the specials below
    vocab = tokenizer.convert_ids_to_tokens(range(tokenizer.vocab_size))
    table = tokenizer.is_start_piece_table()

    def is_start_piece_bert(token_id):  # the original's _is_start_piece_bert
        return not vocab[token_id].startswith("##")

    cumulative = options.ngram_cumulative()
    rng = random.Random(5)
    continuations = 0
    for number in range(300):
        la, lb = rng.randint(1, 50), rng.randint(1, 50)
        x, y = rng.randrange(len(ids) - la), rng.randrange(len(ids) - lb)
        a, b = ids[x:x + la], ids[y:y + lb]
        continuations += sum(not is_start_piece_bert(t) for t in a + b)
        got = mask_pair(a, [table[t] for t in a], b, [table[t] for t in b], CLS, SEP, MASK,
                        VOCAB, options, cumulative, random.Random(number),
                        MaskStats(options.ngram))
        want = reference_mask([CLS, *a, SEP, *b, SEP], is_start_piece_bert, options,
                              random.Random(number))
        assert got == want
    assert continuations > 20


def test_wordpiece_output_is_identical_for_any_number_of_workers(tmp_path, wordpiece_run,
                                                                 corpus, vocab_file):
    outputs, summary = wordpiece_run
    other = [tmp_path / "w-0", tmp_path / "w-1"]
    options = _options(vocab_file, num_workers=2,
                       layout=pipeline.LayoutOptions(block_documents=2, task_tokens=1500))
    second = _run(corpus, other, options)
    for ours, theirs in zip(outputs, other):
        assert ours.read_bytes() == theirs.read_bytes()
    assert second["instances"] == summary["instances"]


def test_tokenize_block_zh_continuations_with_a_fake_segmenter(tokenizer):
    def segment(text):
        return ["我", "来到", "北京", "清华大学", "，", "A股", " ", "abc", "豈", "有", "㐀"]

    text = "我来到北京清华大学，A股 abc豈有㐀"
    tokens = tokenizer.tokenize(text)
    # 豈 (U+F900, a compatibility ideograph) becomes 豈 (U+8C48) under NFD; 㐀 is [UNK].
    assert tokens == ["我", "来", "到", "北", "京", "清", "华", "大", "学", "，", "a", "股",
                      "abc", "\u8c48", "有", "[UNK]"]
    flags = zh_words.continuation_flags(text, tokens, segment)
    assert flags == [False, False, True, False, True, False, True, True, True, False, False,
                     False, False, False, False, False]
    block = pipeline.tokenize_block(0, [Document(0, "x", (text, "。"))], tokenizer,
                                    segmenter=segment)
    assert block.continues.tolist() == flags + [False]


def test_zh_whole_word_mask_groups_segmented_words(tmp_path, corpus, vocab_file, tokenizer):
    pytest.importorskip("rjieba", exc_type=ImportError,
                        reason="optional segmenter for --zh_whole_word_mask "
                                "(pip install rjieba) is not installed")
    block = pipeline.tokenize_block(0, [Document(0, "x", ("我来到北京清华大学",))], tokenizer,
                                    segmenter=zh_words.load_segmenter())
    assert block.continues.tolist() == [False, False, True, False, True, False, True, True, True]

    outputs = [tmp_path / "a"]
    options = _options(vocab_file, zh_whole_word_mask=True)
    summary = _run(corpus, outputs, options)
    two_workers = _run(corpus, [tmp_path / "b"], _options(vocab_file, zh_whole_word_mask=True,
                                                          num_workers=2))
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()
    assert two_workers["instances"] == summary["instances"]
    cjk_tokens = cjk_continuations = masked_continuations = 0
    for example in _read(outputs):
        ids, masked = _restored(example)
        tokens = tokenizer.convert_ids_to_tokens(ids)
        boundary = example["token_boundary"][:len(ids)].tolist()
        _assert_whole_words_masked(tokens, boundary, masked)
        for i, (token, b) in enumerate(zip(tokens, boundary)):
            if len(token) == 1 and zh_words.is_cjk_char(token):
                cjk_tokens += 1
                cjk_continuations += b == 0
                masked_continuations += b == 0 and i in masked
            elif token.startswith("##"):
                assert b == 0
    # The tokens stay characters (no "##" added); a good part of them continue a
    # segmented word, and such words are masked as units.
    assert 0.15 < cjk_continuations / cjk_tokens < 0.6
    assert masked_continuations > 50


def test_zh_whole_word_mask_errors(tmp_path, monkeypatch, corpus, vocab_file, shared_data):
    monkeypatch.setitem(sys.modules, "rjieba", None)  # import fails as if not installed
    with pytest.raises(ImportError, match=r"--zh_whole_word_mask needs .*pip install rjieba"):
        _run(corpus, [tmp_path / "o"], _options(vocab_file, zh_whole_word_mask=True))
    model = shared_data / "spm" / "albert_style_pd8k.model"
    if not model.exists():
        pytest.skip(f"{model} not found")
    with pytest.raises(ValueError, match="--zh_whole_word_mask needs the WordPiece path"):
        _run(corpus, [tmp_path / "o"], _options(vocab_file, spm_model_file=str(model),
                                                zh_whole_word_mask=True))


def test_vocabulary_errors_name_the_flag(tmp_path, corpus):
    with pytest.raises(InputError,
                       match=r"--vocab_file=.*missing.txt: WordPiece vocabulary not found"):
        _run(corpus, [tmp_path / "o"], _options(str(tmp_path / "missing.txt")))
    with pytest.raises(InputError, match=r"--vocab_file=.*: WordPiece vocabulary is a "
                                         r"directory; give the file itself"):
        _run(corpus, [tmp_path / "o"], _options(str(tmp_path)))
    bad = tmp_path / "vocab.txt"
    bad.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n的\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"--vocab_file: .*vocab.txt: the vocabulary has no "
                                         r"\[MASK\]"):
        _run(corpus, [tmp_path / "o"], _options(str(bad)))
    with pytest.raises(ValueError, match="pass --spm_model_file .* or --vocab_file"):
        _run(corpus, [tmp_path / "o"], _options(None))
    assert sorted(os.listdir(tmp_path)) == ["vocab.txt"]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "data_prep.create_pretraining_data", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=300)


def test_cli_vocabulary_flags(tmp_path, corpus, vocab_file, shared_data):
    model = shared_data / "spm" / "albert_style_pd8k.model"
    if not model.exists():
        pytest.skip(f"{model} not found")
    common = [f"--input_file={corpus[2]}", "--input_format=raw", "--max_seq_length=64",
              "--max_predictions_per_seq=10", "--dupe_factor=1"]
    neither = _cli(*common, f"--output_file={tmp_path / 'n'}")
    assert neither.returncode != 0
    assert "no vocabulary: pass --spm_model_file (SentencePiece) or --vocab_file (WordPiece)" \
        in neither.stderr
    both = _cli(*common, f"--output_file={tmp_path / 'both'}", f"--vocab_file={vocab_file}",
                f"--spm_model_file={model}")
    assert both.returncode == 0, both.stderr
    assert "using the SentencePiece model" in both.stderr
    spm_only = _cli(*common, f"--output_file={tmp_path / 'spm'}", f"--spm_model_file={model}")
    assert (tmp_path / "both").read_bytes() == (tmp_path / "spm").read_bytes()
    wordpiece = _cli(*common, f"--output_file={tmp_path / 'wp'}", f"--vocab_file={vocab_file}")
    assert wordpiece.returncode == 0 and spm_only.returncode == 0, wordpiece.stderr
    summary = json.loads((tmp_path / "_wp.summary.json").read_text())  # not matched by wp*
    assert summary["options"]["tokenizer"] == "wordpiece"
    assert summary["options"]["reader"]["preprocess_text"] is False
    assert (tmp_path / "wp").read_bytes() != (tmp_path / "spm").read_bytes()


@pytest.mark.slow  # 7 s
def test_run_pretraining_trains_on_wordpiece_records(wordpiece_run, tmp_path, shared_data):
    pytest.importorskip("tensorflow")  # absent from the Beam venv (requirements-beam.txt)
    from albert_tf import AlbertConfig
    from albert_tf.pretraining import PretrainingOptions, run_pretraining

    outputs, _ = wordpiece_run
    official = json.loads((shared_data / "chinese" / "vocab" / "albert_config.json").read_text())
    config = AlbertConfig.from_dict(dict(official, embedding_size=16, hidden_size=32,
                                         num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=64, max_position_embeddings=SEQ))
    assert config.vocab_size == 21128
    results = run_pretraining(PretrainingOptions(
        albert_config=config, output_dir=str(tmp_path), input_file=str(outputs[0]),
        eval_input_file=str(outputs[1]), max_seq_length=SEQ, max_predictions_per_seq=PRED,
        train_batch_size=8, eval_batch_size=8, optimizer="adamw", learning_rate=1e-3,
        num_train_steps=4, num_warmup_steps=1, save_checkpoints_steps=4,
        iterations_per_loop=2, max_eval_steps=2, seed=3, deterministic_input=True,
        do_eval=True))
    assert results["global_step"] == 4
    assert np.isfinite(results["eval"]["loss"])
    # Untrained: about ln(21128) = 9.96 per masked token.
    assert 8.0 < results["eval"]["masked_lm_loss"] < 11.5
    assert (tmp_path / "model.ckpt-best.index").exists()
