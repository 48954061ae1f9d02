"""Tagging (NER) features: sub-tokens per word, windows, max context, caches, merging."""
import logging
import os
import random
import re

import numpy as np
import pytest

from albert_tf.errors import UserValueError
from albert_tf.tasks.tagging import features as tf_features
from albert_tf.tasks.tagging.features import (IGNORE, convert, features_to_arrays,
                                              max_context_windows, merge_predictions,
                                              prepare_feature_file, read_feature_arrays,
                                              word_ids, word_windows)
from albert_tf.tasks.tagging.readers import TaggedSentence, label_set, read_sentences
from albert_tf.tokenization import SentencePieceTokenizer, WordPieceTokenizer

NUM_SENTENCES = 200


@pytest.fixture(scope="module")
def sp_tokenizer(spm_model):
    return SentencePieceTokenizer(spm_model, do_lower_case=True)


@pytest.fixture(scope="module")
def wp_tokenizer(chinese_vocab_file):
    return WordPieceTokenizer(chinese_vocab_file, do_lower_case=True)


@pytest.fixture(scope="module")
def samples(shared_data, sp_tokenizer, wp_tokenizer):
    """name -> (all sentences, tokenizer, label_to_id) of the shared NER samples."""
    files = {"conll2003": ("conll2003/eng.train", sp_tokenizer),
             "cluener": ("cluener/train.json", wp_tokenizer),
             "msra": ("msra/train.txt", wp_tokenizer)}
    out = {}
    for name, (path, tokenizer) in files.items():
        full = shared_data / "ner" / path
        if not full.exists():
            pytest.skip(f"{full} not found (the NER samples)")
        sentences = read_sentences(name, str(full))
        out[name] = (sentences, tokenizer,
                     {tag: i for i, tag in enumerate(label_set(sentences))})
    return out


def label_ids(sentences, label_to_id):
    return [[label_to_id[tag] for tag in s.tags] for s in sentences]


# --- the windowing rule ----------------------------------------------------------------------


def test_windows_with_a_word_at_every_token_are_squads_doc_spans():
    from albert_tf.tasks.span_qa.features import doc_spans
    from albert_tf.tasks.span_qa.features import max_context_windows as squad_max_context

    for n in range(0, 40):
        for max_tokens in (1, 3, 7, 14):
            for stride in (1, 4, 9, 20):
                spans = word_windows(range(n), n, max_tokens, stride)
                assert spans == (doc_spans(n, max_tokens, stride) if n else [])
                assert max_context_windows(spans, n) == squad_max_context(spans, n)


def test_windows_hold_whole_words_and_cover_every_token():
    rng = random.Random(0)
    for _ in range(300):
        max_tokens, stride = rng.randint(4, 20), rng.randint(1, 12)
        lengths = [rng.randint(1, max_tokens) for _ in range(rng.randint(1, 25))]
        starts = list(np.cumsum([0] + lengths[:-1]))
        n = sum(lengths)
        spans = word_windows(starts, n, max_tokens, stride)
        boundaries = set(starts) | {n}
        covered = set()
        for i, (start, length) in enumerate(spans):
            assert start in boundaries and start + length in boundaries
            assert 0 < length <= max_tokens
            covered.update(range(start, start + length))
            if i:  # SQuAD's step moved back to a word start, or forward when none
                previous, previous_length = spans[i - 1]
                step = min(stride, previous_length)
                assert previous < start <= previous + previous_length
                assert start <= previous + step or not (
                    boundaries & set(range(previous + 1, previous + step + 1)))
        assert covered == set(range(n)) and spans[-1][0] + spans[-1][1] == n


def test_a_word_longer_than_a_window_is_split_and_only_it():
    # Words of 3, 20 and 2 tokens; windows of 8, stride 3.
    spans = word_windows([0, 3, 23], 25, 8, 3)
    # The first window stops before the long word, which then fills windows of 8 starting
    # 3 apart; (15, 8) ends at the last word's start, where the next window begins.
    assert spans == [(0, 3), (3, 8), (6, 8), (9, 8), (12, 8), (15, 8), (23, 2)]
    best = max_context_windows(spans, 25)
    assert [best[s] for s in (0, 3, 23)] == [0, 1, 6]


# --- the real samples ------------------------------------------------------------------------


def decoded_matches(tokenizer, ids, word) -> bool:
    """The word's sub-tokens spell the word (normalised as the tokenizer normalises);
    an unknown token matches any text."""
    tokens = tokenizer.convert_ids_to_tokens(ids)
    if tokenizer.kind == "sentencepiece":
        expected = tokenizer.preprocess(word).replace(" ", "")
        parts = [t.replace("\u2581", "") for t in tokens]
    else:
        expected = "".join(tokenizer.basic_tokenize(word))
        parts = [t[2:] if t.startswith("##") else t for t in tokens]
    pattern = "".join(".+" if i == tokenizer.unk_id else re.escape(p)
                      for i, p in zip(ids, parts))
    return re.fullmatch(pattern, expected) is not None


def check_features(sentences, features, tokenizer, label_to_id, max_seq_length):
    """Every invariant of the module docstring, on every window; returns windows per
    sentence."""
    ids = [word_ids(s.words, tokenizer) for s in sentences]
    scored = {}
    windows = [0] * len(sentences)
    for f in features:
        assert [len(getattr(f, name)) for name in tf_features.SEQUENCE_FIELDS] == [
            max_seq_length] * 6
        used = sum(f.input_mask)
        assert f.input_mask == [1] * used + [0] * (max_seq_length - used)
        assert f.input_ids[0] == tokenizer.cls_id and f.input_ids[used - 1] == tokenizer.sep_id
        assert f.input_ids[used:] == [max(tokenizer.pad_id, 0)] * (max_seq_length - used)
        assert f.segment_ids == [0] * max_seq_length
        assert f.window_index == windows[f.sentence_index]
        windows[f.sentence_index] += 1
        sentence = sentences[f.sentence_index]
        starts = [p for p in range(max_seq_length) if f.word_index[p] >= 0]
        assert starts and starts[0] == 1  # windows start at a word (no long words here)
        for p, next_p in zip(starts, starts[1:] + [used - 1]):
            word = f.word_index[p]
            # The word's sub-tokens, whole, spelling the word; its label on the first.
            assert f.input_ids[p:next_p] == ids[f.sentence_index][word]
            assert decoded_matches(tokenizer, f.input_ids[p:next_p], sentence.words[word])
            assert f.label_ids[p] == label_to_id[sentence.tags[word]]
            if f.max_context[p]:
                key = (f.sentence_index, word)
                assert key not in scored
                scored[key] = f.label_ids[p]
        others = set(range(max_seq_length)) - set(starts)
        assert {f.label_ids[p] for p in others} == {IGNORE}
        assert {f.max_context[p] for p in others} <= {0}
    with_tokens = {(s, w) for s, word_list in enumerate(ids)
                   for w, word in enumerate(word_list) if word}
    assert set(scored) == with_tokens and len(scored) == sum(map(len, ids))
    gold = label_ids(sentences, label_to_id)
    assert merge_predictions(features, np.array([f.label_ids for f in features]),
                             [len(s.words) for s in sentences],
                             label_to_id["O"]) == gold
    return windows


@pytest.mark.parametrize("name", ["conll2003", "cluener", "msra"])
def test_real_samples_every_word_scored_once_with_its_label(samples, name):
    sentences, tokenizer, label_to_id = samples[name]
    sentences = sentences[:NUM_SENTENCES]
    for max_seq_length, stride in ((128, 32), (16, 4)):
        features, stats = convert(sentences, tokenizer, label_to_id, max_seq_length, stride)
        windows = check_features(sentences, features, tokenizer, label_to_id, max_seq_length)
        lengths = [sum(map(len, word_ids(s.words, tokenizer))) for s in sentences]
        assert stats.sentences == len(sentences) and stats.windows == len(features)
        assert stats.words == sum(len(s.words) for s in sentences)
        assert stats.sub_tokens == sum(lengths) and stats.longest_sentence == max(lengths)
        assert stats.words_without_sub_tokens == stats.split_words == 0
        assert [w > 1 for w in windows] == [n > max_seq_length - 2 for n in lengths]
        assert stats.split_sentences == sum(w > 1 for w in windows)
        assert stats.most_windows == max(windows)
        if max_seq_length == 16:
            assert stats.split_sentences > 20 and stats.most_windows >= 4


def test_conll_word_longer_than_a_window(samples):
    """CoNLL's 24-dash rule lines are 25 pieces: split across windows, scored once."""
    sentences, tokenizer, label_to_id = samples["conll2003"]
    sentence = next(s for s in sentences if "-" * 24 in s.words)
    features, stats = convert([sentence], tokenizer, label_to_id, 16, 4)
    assert stats.split_words == 1
    long_word = sentence.words.index("-" * 24)
    starting = [f for f in features if long_word in f.word_index]
    assert len(starting) == 1 and starting[0].input_mask == [1] * 16  # cut at the budget
    assert any(max(f.word_index) == -1 for f in features)  # windows inside the word
    gold = label_ids([sentence], label_to_id)
    assert merge_predictions(features, np.array([f.label_ids for f in features]),
                             [len(sentence.words)], label_to_id["O"]) == gold
    covered = sum(f.input_mask.count(1) - 2 for f in features)
    assert covered >= stats.sub_tokens


# --- words without sub-tokens, unlabelled sentences, errors ----------------------------------


@pytest.mark.parametrize("kind", ["wordpiece", "sentencepiece"])
def test_words_without_sub_tokens_are_predicted_outside(kind, sp_tokenizer, wp_tokenizer):
    tokenizer = wp_tokenizer if kind == "wordpiece" else sp_tokenizer
    words = (["中", " ", "国", "\x00", "人"] if kind == "wordpiece"
             else ["New", " ", "York", "\u200b", "runs"])
    sentence = TaggedSentence(words=words, tags=["B-LOC", "I-LOC", "I-LOC", "O", "O"],
                              source="x:1")
    blank = TaggedSentence(words=[" ", " "], tags=["O", "O"], source="x:2")
    label_to_id = {"O": 0, "B-LOC": 1, "I-LOC": 2}
    features, stats = convert([sentence, blank], tokenizer, label_to_id, 16, 4)
    assert [f.sentence_index for f in features] == [0]  # no window for no sub-token
    assert [w for w in features[0].word_index if w >= 0] == [0, 2, 4]
    assert (stats.words_without_sub_tokens, stats.entity_words_without_sub_tokens,
            stats.empty_sentences) == (4, 1, 1)
    predicted = np.array([features[0].label_ids])
    assert merge_predictions(features, predicted, [5, 2], outside_id=0) == [
        [1, 0, 2, 0, 0], [0, 0]]


def test_unlabelled_sentences_have_no_labels(samples):
    sentences, tokenizer, label_to_id = samples["msra"]
    unlabelled = [TaggedSentence(words=s.words, tags=None, source=s.source)
                  for s in sentences[:20]]
    features, _ = convert(unlabelled, tokenizer, label_to_id, 32, 8)
    assert {v for f in features for v in f.label_ids} == {IGNORE}
    predicted = np.full([len(features) + 3, 32], 5)  # with eval padding rows
    merged = merge_predictions(features, predicted, [len(s.words) for s in unlabelled], 0)
    assert merged == [[5] * len(s.words) for s in unlabelled]


def test_bad_tags_and_options(sp_tokenizer):
    sentence = TaggedSentence(words=["EU", "rejects"], tags=["B-ORG", "X"], source="f.txt:3")
    with pytest.raises(UserValueError, match=r"f.txt:3: tags 'B-ORG', 'X' not in the label "
                                             r"list \(O, I-ORG\)"):
        convert([sentence], sp_tokenizer, {"O": 0, "I-ORG": 1}, 16, 4)
    with pytest.raises(UserValueError, match="--max_seq_length must be at least 3"):
        convert([sentence], sp_tokenizer, {"O": 0}, 2, 4)
    with pytest.raises(UserValueError, match="--doc_stride must be positive"):
        convert([sentence], sp_tokenizer, {"O": 0}, 16, 0)
    with pytest.raises(ValueError, match="label ids must be 0..1"):
        convert([sentence], sp_tokenizer, {"O": 0, "X": 2}, 16, 4)


# --- cache and datasets ----------------------------------------------------------------------


def assert_arrays_equal(actual, expected):
    assert sorted(actual) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


def prepare(path, sentences, tokenizer, label_to_id, max_seq_length, doc_stride, **kwargs):
    features, stats = convert(sentences, tokenizer, label_to_id, max_seq_length, doc_stride)
    described = prepare_feature_file(path, features, sentences, tokenizer, list(label_to_id),
                                     max_seq_length, doc_stride, stats=stats, **kwargs)
    return described, features


def test_cache_round_trip_reuse_and_rebuild(samples, tmp_path, caplog):
    sentences, tokenizer, label_to_id = samples["cluener"]
    sentences = sentences[:60]
    path = str(tmp_path / "train.tf_record")
    caplog.set_level(logging.INFO, logger="absl")
    first, features = prepare(path, sentences, tokenizer, label_to_id, 32, 8,
                              source="train.json", owned=True)
    assert first["windows"] == len(features) > len(sentences) == first["sentences"]
    assert first["labels"] == list(label_to_id) and first["doc_stride"] == 8
    assert first["source"] == "train.json" and first["do_lower_case"] is True
    assert_arrays_equal(read_feature_arrays(path, 32), features_to_arrays(features))
    stamp = os.stat(path).st_mtime_ns
    again, _ = prepare(path, sentences, tokenizer, label_to_id, 32, 8, source="train.json",
                       owned=True)
    assert again == first and os.stat(path).st_mtime_ns == stamp  # reused, not rewritten
    assert "reusing cached features" in caplog.text
    rebuilt, longer = prepare(path, sentences, tokenizer, label_to_id, 64, 8, owned=True)
    assert rebuilt["max_seq_length"] == 64 and rebuilt["windows"] == len(sentences)
    assert_arrays_equal(read_feature_arrays(path, 64), features_to_arrays(longer))
    other_tags = [TaggedSentence(s.words, ["O"] * len(s.words), s.source) for s in sentences]
    changed, _ = prepare(path, other_tags, tokenizer, label_to_id, 64, 8, owned=True)
    assert changed["sentences_sha256"] != rebuilt["sentences_sha256"]
    assert "sentences_sha256 changed" in caplog.text
    assert (read_feature_arrays(path, 64)["label_ids"] <= label_to_id["O"]).all()


def test_eval_dataset_padding_and_training_batches(samples, tmp_path):
    sentences, tokenizer, label_to_id = samples["msra"]
    sentences = sentences[:12]
    path = str(tmp_path / "dev.tf_record")
    described, _ = prepare(path, sentences, tokenizer, label_to_id, 16, 4)
    num = described["windows"]
    batch_size = 8
    assert num % batch_size  # padding needed
    batches = list(tf_features.dataset(path, 16, batch_size, False, num).as_numpy_iterator())
    rows = {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}
    padded = -(-num // batch_size) * batch_size
    assert len(rows["is_real_example"]) == padded
    assert rows["is_real_example"].tolist() == [1] * num + [0] * (padded - num)
    real = {name: value[:num] for name, value in rows.items() if name != "is_real_example"}
    assert_arrays_equal(real, read_feature_arrays(path, 16))
    pad = {name: value[num:] for name, value in rows.items()}
    assert (pad["label_ids"] == IGNORE).all() and (pad["word_index"] == IGNORE).all()
    assert (pad["sentence_index"] == IGNORE).all() and not pad["input_mask"].any()
    assert not pad["max_context"].any() and rows["input_ids"].dtype == np.int32
    merged = merge_predictions(read_feature_arrays(path, 16), rows["label_ids"],
                               [len(s.words) for s in sentences], label_to_id["O"])
    assert merged == label_ids(sentences, label_to_id)
    train = tf_features.dataset(path, 16, batch_size, True, num, seed=1)
    batch = next(iter(train))
    assert batch["input_ids"].shape == (batch_size, 16)
    assert set(batch["is_real_example"].numpy().tolist()) == {1}
