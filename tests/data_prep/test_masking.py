"""data_prep.masking against a literal, token-by-token port of the original's algorithm.

The reference below follows the original create_masked_lm_predictions line by
line (lists of word index lists, `sum(...)` of n-grams, a covered-index set),
with this project's two documented changes: n is drawn with `rng.random()`
from the seeded generator, and the shuffle is consumed lazily from the end.
The fast implementation must produce identical outputs from the same seed.
"""
import random

import pytest

from data_prep import tokenization as tok
from data_prep.masking import MaskingOptions, MaskStats, mask_pair

CLS, SEP, MASK, VOCAB = 2, 3, 4, 8000


def reference_mask(tokens, is_start, options, rng):
    cand_indexes = []
    boundary = [0] * len(tokens)
    for i, token in enumerate(tokens):
        if i == 0 or token == SEP:
            boundary[i] = 1
            continue
        if options.do_whole_word_mask and cand_indexes and not is_start(token):
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])
            if is_start(token):
                boundary[i] = 1
    output = list(tokens)
    num_to_predict = min(options.max_predictions_per_seq,
                         max(1, int(round(len(tokens) * options.masked_lm_prob))))
    ngram_indexes = [[cand_indexes[idx:idx + n] for n in range(1, options.ngram + 1)]
                     for idx in range(len(cand_indexes))]
    cumulative = options.ngram_cumulative()
    masked, covered = [], set()
    order = list(range(len(ngram_indexes)))
    for k in range(len(order) - 1, -1, -1):
        if len(masked) >= num_to_predict:
            break
        if k:
            j = rng.randrange(k + 1)
            order[k], order[j] = order[j], order[k]
        cand_index_set = ngram_indexes[order[k]]
        u = rng.random()
        n = next(i + 1 for i, c in enumerate(cumulative) if u < c or i + 1 == len(cumulative))
        index_set = sum(cand_index_set[n - 1], [])
        n -= 1
        while len(masked) + len(index_set) > num_to_predict:
            if n == 0:
                break
            index_set = sum(cand_index_set[n - 1], [])
            n -= 1
        if len(masked) + len(index_set) > num_to_predict:
            continue
        if any(index in covered for index in index_set):
            continue
        for index in index_set:
            covered.add(index)
            if rng.random() < 0.8:
                output[index] = MASK
            elif rng.random() < 0.5:
                pass
            else:
                output[index] = rng.randint(0, VOCAB - 1)
            masked.append((index, tokens[index]))
    masked.sort()
    return output, boundary, [p for p, _ in masked], [t for _, t in masked]


@pytest.fixture(scope="module")
def corpus_ids(shared_data):
    path = shared_data / "spm" / "albert_style_pd8k.model"
    if not path.exists():
        pytest.skip(f"{path} not found")
    tokenizer = tok.SentencePieceTokenizer(str(path))
    from data_prep.text_input import ReaderOptions, iter_documents
    doc = next(iter_documents([str(shared_data / "corpus" / "gutenberg" / "pg972.txt")],
                              ReaderOptions(input_format="raw")))
    ids = [t for s in tokenizer.encode_ids(list(doc.sentences[:3000])) for t in s]
    table = tokenizer.is_start_piece_table()
    return ids, table


def _random_pairs(ids, count, seed, max_len=70):
    rng = random.Random(seed)
    for _ in range(count):
        la, lb = rng.randint(1, max_len), rng.randint(1, max_len)
        x, y = rng.randrange(len(ids) - la), rng.randrange(len(ids) - lb)
        yield ids[x:x + la], ids[y:y + lb]


@pytest.mark.parametrize("options", [
    MaskingOptions(),
    MaskingOptions(do_whole_word_mask=False),
    MaskingOptions(favor_shorter_ngram=False, ngram=4, max_predictions_per_seq=7),
    MaskingOptions(masked_lm_prob=0.5, max_predictions_per_seq=80, ngram=1),
])
def test_fast_masking_equals_reference(corpus_ids, options):
    ids, table = corpus_ids
    cumulative = options.ngram_cumulative()
    for number, (a, b) in enumerate(_random_pairs(ids, 400, seed=hash(options) % 1000)):
        seed = 1000 + number
        got = mask_pair(a, [table[t] for t in a], b, [table[t] for t in b], CLS, SEP, MASK,
                        VOCAB, options, cumulative, random.Random(seed), MaskStats(options.ngram))
        want = reference_mask([CLS, *a, SEP, *b, SEP], table.__getitem__, options,
                              random.Random(seed))
        assert got == want, (a, b)


def test_hand_computed_words_and_boundaries():
    # Pieces: A = "▁new" "york" "▁is", B = "er" (continues A's last word across [SEP]) "▁big".
    start = {10: True, 11: False, 12: True, 13: False, 14: True}
    options = MaskingOptions(masked_lm_prob=1.0, max_predictions_per_seq=100, ngram=1)
    out, boundary, positions, labels = mask_pair(
        [10, 11, 12], [start[t] for t in (10, 11, 12)], [13, 14], [start[13], start[14]],
        CLS, SEP, MASK, VOCAB, options, options.ngram_cumulative(), random.Random(0),
        MaskStats(1))
    assert boundary == [1, 1, 0, 1, 1, 0, 1, 1]
    # Budget = min(100, round(8 * 1.0)) = 8 > 5 candidates: every candidate is masked,
    # [CLS] (0) and both [SEP]s (4, 7) never.
    assert positions == [1, 2, 3, 5, 6]
    assert labels == [10, 11, 12, 13, 14]
    assert out[0] == CLS and out[4] == SEP and out[7] == SEP


def test_whole_words_are_masked_together():
    # Words: [1,2] [3] [4,5,6] in A; budget allows everything with ngram=1.
    flags = {20: True, 21: False, 22: True, 23: True, 24: False, 25: False}
    a = [20, 21, 22, 23, 24, 25]
    options = MaskingOptions(masked_lm_prob=0.4, max_predictions_per_seq=20, ngram=1)
    for seed in range(50):
        _, _, positions, _ = mask_pair(a, [flags[t] for t in a], [22], [True], CLS, SEP, MASK,
                                       VOCAB, options, options.ngram_cumulative(),
                                       random.Random(seed), MaskStats(1))
        # round(10 * 0.4) = 4 tokens: any union of whole words with 4 tokens.
        assert len(positions) <= 4
        words = [{1, 2}, {3}, {4, 5, 6}, {8}]
        covered = set(positions)
        for word in words:
            assert word <= covered or not word & covered


def test_distributions_over_many_instances(corpus_ids):
    ids, table = corpus_ids
    options = MaskingOptions()
    cumulative = options.ngram_cumulative()
    stats = MaskStats(options.ngram)
    rng = random.Random(7)
    counts_ok = 0
    total = 0
    for a, b in _random_pairs(ids, 6000, seed=3, max_len=62):
        out, _, positions, labels = mask_pair(
            a, [table[t] for t in a], b, [table[t] for t in b], CLS, SEP, MASK, VOCAB,
            options, cumulative, rng, stats)
        length = len(a) + len(b) + 3
        total += 1
        counts_ok += len(positions) == min(20, max(1, round(length * 0.15)))
        assert positions == sorted(set(positions))
        assert 0 not in positions and len(a) + 1 not in positions and length - 1 not in positions
    assert counts_ok / total > 0.99
    drawn = stats.ngram_drawn[1:]
    for got, want in zip(drawn, (6 / 11, 3 / 11, 2 / 11)):
        assert abs(got / sum(drawn) - want) < 0.02
    masked = stats.masked
    assert abs(stats.replaced_mask / masked - 0.8) < 0.02
    assert abs(stats.kept / masked - 0.1) < 0.02
    assert abs(stats.replaced_random / masked - 0.1) < 0.02
