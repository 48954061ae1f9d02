"""data_prep.pairing against a literal port of the original's create_instances_from_document."""
import random

import pytest

from data_prep.pairing import DocView, create_pairs, truncate_bounds


def reference_truncate(tokens_a, tokens_b, max_num_tokens, rng):
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del trunc[0]
        else:
            trunc.pop()


def reference_pairs(all_documents, document_index, max_seq_length, short_seq_prob,
                    random_next_sentence, rng):
    """The original algorithm on lists of sentences (lists of ids); returns (A, B, label)."""
    document = all_documents[document_index]
    max_num_tokens = max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)
    out = []
    current_chunk, current_length, i = [], 0, 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            a_end = 1
            if len(current_chunk) >= 2:
                a_end = rng.randint(1, len(current_chunk) - 1)
            tokens_a = [t for seg in current_chunk[:a_end] for t in seg]
            tokens_b = []
            if len(current_chunk) == 1 or (random_next_sentence and rng.random() < 0.5):
                is_random_next = True
                target_b_length = target_seq_length - len(tokens_a)
                for _ in range(10):
                    random_document_index = rng.randint(0, len(all_documents) - 1)
                    if random_document_index != document_index:
                        break
                random_document = all_documents[random_document_index]
                random_start = rng.randint(0, len(random_document) - 1)
                for j in range(random_start, len(random_document)):
                    tokens_b.extend(random_document[j])
                    if len(tokens_b) >= target_b_length:
                        break
                i -= len(current_chunk) - a_end
            elif not random_next_sentence and rng.random() < 0.5:
                is_random_next = True
                tokens_b = [t for seg in current_chunk[a_end:] for t in seg]
                tokens_a, tokens_b = tokens_b, tokens_a
            else:
                is_random_next = False
                tokens_b = [t for seg in current_chunk[a_end:] for t in seg]
            reference_truncate(tokens_a, tokens_b, max_num_tokens, rng)
            assert tokens_a and tokens_b
            out.append((tokens_a, tokens_b, is_random_next))
            current_chunk, current_length = [], 0
        i += 1
    return out


def _view(sentences):
    ids, bounds = [], [0]
    for sentence in sentences:
        ids.extend(sentence)
        bounds.append(len(ids))
    return DocView(ids, [t % 3 == 0 for t in ids], bounds)


def _random_corpus(seed, num_docs=6):
    rng = random.Random(seed)
    docs, next_id = [], 10
    for _ in range(num_docs):
        doc = []
        for _ in range(rng.randint(1, 25)):
            length = rng.choice([1, 2, 5, 9, 14, 30, 70])
            doc.append(list(range(next_id, next_id + length)))
            next_id += length
        docs.append(doc)
    return docs


@pytest.mark.parametrize("max_seq_length, short_seq_prob, random_next", [
    (32, 0.1, False), (16, 0.5, False), (64, 0.0, True), (5, 0.1, False), (128, 1.0, True),
])
def test_pairs_equal_reference(max_seq_length, short_seq_prob, random_next):
    for corpus_seed in range(15):
        docs = _random_corpus(corpus_seed)
        views = [_view(d) for d in docs]
        for doc_index in range(len(docs)):
            seed = corpus_seed * 100 + doc_index
            got = create_pairs(views[doc_index], doc_index, len(docs), views.__getitem__,
                               max_seq_length, short_seq_prob, random_next, random.Random(seed))
            want = reference_pairs(docs, doc_index, max_seq_length, short_seq_prob,
                                   random_next, random.Random(seed))
            assert [(p.a_ids, p.b_ids, p.is_random_next) for p in got] == want
            for pair in got:
                assert pair.a_flags == [t % 3 == 0 for t in pair.a_ids]
                assert pair.b_flags == [t % 3 == 0 for t in pair.b_ids]
                assert 2 <= len(pair.a_ids) + len(pair.b_ids) <= max_seq_length - 3


def test_truncate_bounds_equals_reference():
    for seed in range(200):
        rng = random.Random(seed)
        la, lb, limit = rng.randint(1, 60), rng.randint(1, 60), rng.randint(2, 50)
        a, b = list(range(la)), list(range(100, 100 + lb))
        reference_truncate(a, b, limit, random.Random(seed))
        a0, a1, b0, b1 = truncate_bounds(la, lb, limit, random.Random(seed))
        assert (list(range(la))[a0:a1], list(range(100, 100 + lb))[b0:b1]) == (a, b)


def test_sop_semantics_and_balance():
    # One long document of increasing ids: label 0 means A precedes B, label 1 swapped.
    sentences = [list(range(10 + 8 * k, 18 + 8 * k)) for k in range(4000)]
    views = [_view(sentences), _view([[1, 2, 3]])]
    pairs = create_pairs(views[0], 0, 2, views.__getitem__, 64, 0.1, False, random.Random(5))
    labels = [p.is_random_next for p in pairs if not p.b_from_random_document]
    assert len(labels) > 400
    assert abs(sum(labels) / len(labels) - 0.5) < 0.05
    for pair in pairs:
        if pair.b_from_random_document:
            assert pair.is_random_next and set(pair.b_ids) <= {1, 2, 3}
        elif pair.is_random_next:
            assert min(pair.a_ids) > max(pair.b_ids)
        else:
            assert max(pair.a_ids) < min(pair.b_ids)


def test_single_sentence_chunk_takes_random_document_b():
    # Every sentence is longer than the target, so every chunk has one sentence.
    long_doc = _view([list(range(100 + 50 * k, 150 + 50 * k)) for k in range(5)])
    other = _view([[7, 8], [9]])
    views = [long_doc, other]
    pairs = create_pairs(long_doc, 0, 2, views.__getitem__, 32, 0.0, False, random.Random(1))
    assert pairs and all(p.b_from_random_document and p.is_random_next for p in pairs)
    assert all(set(p.b_ids) <= {7, 8, 9} for p in pairs)
