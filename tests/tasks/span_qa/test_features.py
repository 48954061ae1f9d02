"""SQuAD reading, aligned feature conversion and post-processing with perfect logits."""
import json
import os

import numpy as np
import pytest

from albert_tf.tokenization import SentencePieceTokenizer, preprocess_text
from albert_tf.finetuning import feature_cache
from albert_tf.tasks.span_qa import (alignment, data as squad_data, features as sf, metrics as squad_metrics,
                                     postprocess as squad_postprocess)


@pytest.fixture(scope="module")
def tokenizer(shared_data):
    return SentencePieceTokenizer(str(shared_data / "spm" / "albert_style_pd8k.model"), True)


def test_every_v1_dev_answer_maps_back_to_its_text(shared_data, tokenizer):
    """All 34,726 gold answers of the v1.1 dev set: exact text or counted (a few)."""
    examples = squad_data.read_squad_examples(str(shared_data / "squad" / "dev-v1.1.json"))
    assert len(examples) == 10570
    featurizer = sf.SquadFeaturizer(tokenizer, sf.FeatureOptions())
    total = exact = 0
    inexact = []
    for example in examples:
        paragraph = featurizer.paragraph(example.paragraph_text)
        assert paragraph.aligned, example.qas_id
        for text, start in example.answers:
            total += 1
            span = sf.answer_token_span(paragraph, text, start)
            assert span is not None, example.qas_id
            got = sf.span_text(example.paragraph_text, paragraph, *span)
            if got == text.strip():
                exact += 1
            else:  # the answer starts or ends inside a piece: the span covers it
                assert text.strip() in got, (example.qas_id, text, got)
                inexact.append(example.qas_id)
    assert total == 34726
    assert total - exact == len(inexact) <= 60  # measured: 50 (0.14 %)


def test_fast_alignment_equals_the_original_lcs(shared_data, tokenizer):
    examples = squad_data.read_squad_examples(str(shared_data / "squad" / "dev-v2.0.sample2.json"))
    paragraphs = list(dict.fromkeys(e.paragraph_text for e in examples))[:25]
    for text in paragraphs:
        fast = sf.align_paragraph(tokenizer, text, True)
        lcs = alignment._lcs_align(tokenizer, text, preprocess_text(text, lower=True), True)
        assert fast.pieces == lcs.pieces == tokenizer.tokenize(preprocess_text(text, lower=True))
        assert fast.tok_start_to_orig == lcs.tok_start_to_orig
        assert fast.tok_end_to_orig == lcs.tok_end_to_orig
    # Accents, spacing, digit-comma pieces: answers map back to their exact text.
    text = "  Caf\u00e9  na\u00efve \u00a8x, in 1999, 2,000\u2009m  "
    fast = sf.align_paragraph(tokenizer, text, True)
    assert fast.pieces == tokenizer.tokenize(preprocess_text(text, lower=True))
    for answer in ("Caf\u00e9", "na\u00efve", "1999", "2,000", "in 1999, 2,000"):
        span = sf.answer_token_span(fast, answer, text.index(answer))
        assert sf.span_text(text, fast, *span) == answer


def test_final_sigma_paragraph_uses_the_lcs_fallback(tokenizer):
    text = "ΟΔΟΣ road"
    assert alignment.normalize_with_char_map(text, True)[0] != preprocess_text(text, lower=True)
    paragraph = sf.align_paragraph(tokenizer, text, True)
    span = sf.answer_token_span(paragraph, "road", 5)
    assert sf.span_text(text, paragraph, *span) == "road"


def test_window_layout_by_hand(tokenizer):
    context = "one two three four five six seven eight nine ten"
    example = squad_data.SquadExample("q1", "which?", context, answers=[("seven", 28)])
    opts = sf.FeatureOptions(max_seq_length=12, doc_stride=3, max_query_length=4)
    featurizer = sf.SquadFeaturizer(tokenizer, opts)
    query = featurizer.query_ids("which?")
    paragraph = featurizer.paragraph(context)
    n = len(paragraph.ids)
    max_doc = 12 - len(query) - 3
    spans = sf.doc_spans(n, max_doc, 3)
    assert spans[0] == (0, max_doc) and all(b[0] - a[0] == 3 for a, b in zip(spans, spans[1:]))
    assert spans[-1][0] + spans[-1][1] == n
    features = []
    stats = featurizer.convert([example], True, features.append)
    assert stats.features == len(spans) == len(features)
    q = len(query)
    for feature, (start, length) in zip(features, spans):
        ids = feature.input_ids
        assert ids[0] == tokenizer.cls_id and ids[1:q + 1] == query and ids[q + 1] == 3
        assert ids[q + 2:q + 2 + length] == paragraph.ids[start:start + length]
        assert ids[q + 2 + length] == tokenizer.sep_id and ids[q + 3 + length:] == [0] * (
            12 - q - 3 - length)
        assert feature.segment_ids == [0] * (q + 2) + [1] * (length + 1) + [0] * (
            12 - q - 3 - length)
        assert feature.p_mask == [0] + [1] * (q + 1) + [0] * length + [1] * (12 - q - 2 - length)
        assert feature.input_mask == [1] * (q + 3 + length) + [0] * (12 - q - 3 - length)
        if feature.is_impossible:  # window without the answer: labelled at [CLS]
            assert feature.start_position == feature.end_position == 0
        else:
            first = feature.start_position - q - 2 + start
            last = feature.end_position - q - 2 + start
            assert sf.span_text(context, paragraph, first, last) == "seven"
    # Max context: every document token is max-context in exactly one window.
    counts = np.zeros(n, int)
    for feature, (start, length) in zip(features, spans):
        for i in range(length):
            counts[start + i] += feature.max_context[q + 2 + i]
    assert counts.tolist() == [1] * n
    # Token 5 of windows starting at 0, 3 (length 6): scores min(5,0)+.06 vs min(2,3)+.06.
    assert sf.max_context_windows([(0, 6), (3, 6)], 9)[5] == 1


def test_unalignable_answer_is_reported_and_skipped(tokenizer, caplog):
    good = squad_data.SquadExample("ok", "q", "alpha beta gamma", answers=[("beta", 6)])
    bad = squad_data.SquadExample("bad1", "q", "alpha beta gamma", answers=[("gamma", 0)])
    blank = squad_data.SquadExample("bad2", "q", "alpha   beta", answers=[("  ", 6)])
    out = []
    stats = sf.SquadFeaturizer(tokenizer, sf.FeatureOptions(64, 16, 8)).convert(
        [good, bad, blank], True, out.append)
    assert stats.unalignable == ["bad1", "bad2"] and stats.features == 1
    assert "bad1" in caplog.text and "2 answers could not be aligned" in stats.summary()


def test_reader_errors(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"data": [{"paragraphs": [{"context": "abc", "qas": [
        {"id": "q9", "question": "?", "answers": [{"text": "zzzz", "answer_start": 2}]}]}]}]}))
    with pytest.raises(squad_data.SquadFormatError, match="x.json: question id q9: answer"):
        squad_data.read_squad_examples(str(path))
    path.write_text(json.dumps({"data": [{"paragraphs": [{"context": "abc", "qas": [
        {"id": "q1", "question": "?", "answers": [], "is_impossible": True}]}]}]}))
    with pytest.raises(squad_data.SquadFormatError, match="q1: is_impossible.*version_2"):
        squad_data.read_squad_examples(str(path), is_training=True)
    assert squad_data.read_squad_examples(str(path), True, True)[0].start_position == -1
    path.write_text("{")
    with pytest.raises(squad_data.SquadFormatError, match="not valid JSON"):
        squad_data.read_squad_examples(str(path))


def _perfect_results(examples, features, v2, no_exact):
    """Logits that put all the mass on a gold answer that aligns exactly (if any).

    Questions whose every gold answer starts or ends inside a piece, or is longer
    than max_answer_length (30) tokens, are added to `no_exact`.
    """
    featurizer_rows = features
    results = {"unique_ids": featurizer_rows["unique_ids"]}
    seq = featurizer_rows["input_ids"].shape[1]
    count = len(results["unique_ids"])
    starts, ends = np.zeros(count, int), np.zeros(count, int)
    found = set()
    for row in range(count):
        example = examples[featurizer_rows["example_index"][row]]
        orig_start, orig_end = featurizer_rows["orig_start"][row], featurizer_rows["orig_end"][row]
        for text, char_start in example.answers:
            char_end = char_start + len(text) - 1
            s = [i for i in range(seq) if orig_start[i] >= 0 and orig_end[i] >= char_start]
            e = [i for i in range(seq) if 0 <= orig_start[i] <= char_end]
            if s and e and s[0] <= e[-1] < s[0] + 30 and example.paragraph_text[
                    orig_start[s[0]]:orig_end[e[-1]] + 1].strip() == text.strip():
                starts[row], ends[row] = s[0], e[-1]
                found.add(example.qas_id)
                break
    no_exact.update(e.qas_id for e in examples if not e.is_impossible and e.qas_id not in found)
    if not v2:
        start_logits = np.full((count, seq), -10.0)
        end_logits = np.full((count, seq), -10.0)
        start_logits[np.arange(count), starts] = 10.0
        end_logits[np.arange(count), ends] = 10.0
        results.update(start_logits=start_logits, end_logits=end_logits)
        return results
    impossible = np.array([examples[i].is_impossible for i in featurizer_rows["example_index"]])
    results.update(
        start_top_index=np.stack([starts, (starts + 1) % seq], 1),
        start_top_log_probs=np.tile([[-0.1, -5.0]], (count, 1)),
        end_top_index=np.stack([ends, ends, ends, ends], 1),
        end_top_log_probs=np.tile([[-0.1, -6.0, -0.2, -7.0]], (count, 1)),
        cls_logits=np.where(impossible, 5.0, -5.0))
    return results


@pytest.mark.parametrize("name,v2", [("dev-v1.1.json", False), ("dev-v2.0.sample2.json", True)])
def test_gold_answers_as_perfect_logits_score_100(shared_data, tokenizer, name, v2):
    path = str(shared_data / "squad" / name)
    data = squad_data.load_squad_json(path)
    if not v2:
        data = data[:4]  # 4 articles, 1.3k questions: keeps the test fast
    examples = squad_data.read_squad_examples(path, data=data)
    feats = []
    sf.SquadFeaturizer(tokenizer, sf.FeatureOptions(max_seq_length=160, doc_stride=64)).convert(
        examples, False, feats.append)
    arrays = sf.features_to_arrays(feats)
    no_exact = set()
    results = _perfect_results(examples, arrays, v2, no_exact)
    preds = squad_postprocess.postprocess(
        examples, arrays, results,
        squad_postprocess.PostprocessOptions(version_2_with_negative=v2,
                                             null_score_diff_threshold=0.0 if v2 else None))
    if v2:
        metrics = squad_metrics.evaluate_v2(data, preds.answers, preds.null_odds)
        assert metrics["exact"] == metrics["f1"] == 100.0 and metrics["total"] == 626
        assert metrics["best_f1"] == 100.0
    else:
        # Measured: 2 of 1,120 (a 33-token answer; "four" inside the piece "fourth").
        assert len(no_exact) <= 3
        for article in data:
            for paragraph in article["paragraphs"]:
                paragraph["qas"] = [q for q in paragraph["qas"] if q["id"] not in no_exact]
        metrics = squad_metrics.evaluate_v1(data, preds.answers)
        assert metrics["exact_match"] == metrics["f1"] == 100.0
    nbest = preds.nbest[examples[0].qas_id]
    assert abs(sum(e["probability"] for e in nbest) - 1.0) < 1e-9


def test_feature_cache_round_trip_reuse_and_rebuild(tmp_path, tokenizer, caplog):
    examples = [squad_data.SquadExample("a", "what", "alpha beta gamma delta " * 10,
                                        answers=[("gamma", 11)])]
    opts = sf.FeatureOptions(32, 8, 6)
    featurizer = sf.SquadFeaturizer(tokenizer, opts)
    path = str(tmp_path / "p.tf_record")
    description = sf.prepare_feature_file(path, featurizer, examples, False, "mem")
    arrays = sf.read_feature_arrays(path, 32)
    direct = []
    featurizer.convert(examples, False, direct.append)
    want = sf.features_to_arrays(direct)
    assert description["features"] == len(direct) > 1 and description["source"] == "mem"
    for key, value in want.items():
        np.testing.assert_array_equal(arrays[key], value)
    # The one cache policy (finetuning.feature_cache): reused when the identity matches,
    # rebuilt with a warning naming what changed, refused without its description.
    stamp = os.stat(path).st_mtime_ns
    assert sf.prepare_feature_file(path, featurizer, examples, False, "mem") == description
    assert os.stat(path).st_mtime_ns == stamp
    longer = sf.SquadFeaturizer(tokenizer, sf.FeatureOptions(64, 8, 6))
    assert sf.prepare_feature_file(path, longer, examples, False, "mem")["max_seq_length"] == 64
    assert "rebuilding SQuAD prediction feature cache" in caplog.text
    assert "max_seq_length changed" in caplog.text
    training = sf.prepare_feature_file(path, longer, examples, True, "mem")
    assert training["is_training"] and "is_training changed" in caplog.text
    os.remove(path + ".json")
    with pytest.raises(feature_cache.FeatureCacheError, match="exists without p.tf_record.json"):
        sf.prepare_feature_file(path, longer, examples, True, "mem")
