"""SQuAD SavedModel: raw question + context in, best answer out, all in the graph.

Signatures:
  serving_default(question tf.string [B], context tf.string [B]) ->
      answer tf.string [B]: the best span's original text ("" when no span is
          valid in v2, "empty" in v1 as the original; v2 also "" when
          null_score > the exported null_score_diff_threshold, if one is set),
      score float32 [B]: its start + end logits (v1) / log-probabilities (v2),
      null_score float32 [B]: v2 only, min cls_logits over the windows.
  serve_tokens(input_ids, input_mask, segment_ids, p_mask int32 [N, S]) ->
      the model's raw outputs (v1 start_logits / end_logits [N, S]; v2 the beam
      and cls_logits), for callers that do their own featurisation.

In the graph, per question (tf.map_fn over B): the question is tokenized with
`tokenization.InGraphTokenizer`; the context is normalised one character at a
time (the same per-character `preprocess_text` as `squad_features`, so each
normalised byte knows its original character), split into pieces by
tensorflow-text's FastSentencepieceTokenizer (exact ids) with byte offsets
from tensorflow-text's SentencepieceTokenizer (when its ids agree; otherwise
offsets come from the pieces' lengths), with the digit-comma expansion;
then the original's windows, p_mask and max-context rule, the model, and the
n-best span rules of `squad_postprocess` (top-1 only: de-duplication and
probabilities do not change the best answer).

With a WordPiece vocabulary (`vocab_file`, the Chinese models: CMRC 2018)
the module is `WordPieceSquadServingModule`: the question through
`InGraphWordPieceTokenizer`, the context through the BasicTokenizer's
character rules applied one character at a time (as `squad_wordpiece`) and
tensorflow-text's FastWordpieceTokenizer with byte offsets per word; the
windows and the span search are the same.

Loading needs only TensorFlow and tensorflow-text.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import tensorflow as tf

from albert_tf import export as export_lib
from albert_tf.kernels import fused_ops
from albert_tf import tokenization
from albert_tf.tasks.span_qa.features import FeatureOptions
from albert_tf.tasks.span_qa.postprocess import V1_EMPTY_TEXT

NEG_INF = -1e30


@dataclasses.dataclass
class ExportOptions(FeatureOptions):
    """The serving settings: the conversion's (`features.FeatureOptions`: the same
    windows as training and prediction), then post-processing's and the LayerNorm's."""

    n_best_size: int = 20
    max_answer_length: int = 30
    version_2_with_negative: bool = False
    null_score_diff_threshold: Optional[float] = None
    layer_norm: str = "auto"  # see export.call_for_export


def _expansion_offsets(tokenizer: tokenization.SentencePieceTokenizer):
    """Per id: expansion ids and each sub-piece's (start, end) distance from the piece end.

    A start distance of 2**30 means "the piece's own start" (the first sub-piece).
    Mirrors `alignment._split_offsets`.
    """
    ids, rel_start, rel_end, lengths = [], [], [], []
    for expansion in tokenization.digit_comma_expansions(tokenizer):
        if len(expansion) == 1:
            ids.append(expansion[0])
            rel_start.append(2 ** 30)
            rel_end.append(0)
            lengths.append(1)
            continue
        pieces = tokenizer.convert_ids_to_tokens(expansion)
        starts, ends = [1], [0]  # the trailing ","
        cursor = 1
        for index in range(len(pieces) - 2, -1, -1):
            length = len(pieces[index].replace(tokenization.SPIECE_UNDERLINE, "").encode())
            ends.append(cursor)
            cursor += length
            starts.append(2 ** 30 if index == 0 else cursor)
        ids.extend(expansion)
        rel_start.extend(starts[::-1])
        rel_end.extend(ends[::-1])
        lengths.append(len(expansion))
    return ids, rel_start, rel_end, lengths


def _at(grid, index):
    """grid [W, S] gathered at per-window positions index [W, K] -> [W, K]."""
    return tf.gather(grid, index, batch_dims=1)


def _max_context_windows(num_tokens, win_start, win_len):
    """Each context token's max-context window int32 [num_tokens]: the first window with
    the best min(left, right) + 0.01 * window length (win_start, win_len int32 [W])."""
    token_index = tf.range(num_tokens)[None]
    inside = ((token_index >= win_start[:, None])
              & (token_index < (win_start + win_len)[:, None]))
    context_score = (tf.cast(tf.minimum(token_index - win_start[:, None],
                                        (win_start + win_len - 1)[:, None] - token_index),
                             tf.float32)
                     + 0.01 * tf.cast(win_len[:, None], tf.float32))
    context_score = tf.where(inside, context_score, NEG_INF)
    return tf.cast(tf.argmax(context_score, axis=0), tf.int32)  # first max on ties


class _SpanServingModule(tf.Module):
    """The Keras model, the windows and the span search; subclasses align the context.

    A subclass sets `self.tokenizer` (in-graph, raw question [1] -> ragged ids),
    `cls_id`, `sep_id` and implements `_context_alignment`.
    """

    def __init__(self, model, options: ExportOptions):
        fused_ops.check_export_layer_norm(options.layer_norm)
        super().__init__()
        self.model = model
        self.options = options

    def _context_alignment(self, context):
        """-> chars [n] (original characters), is_space [n] (Python str.isspace),
        ids int32 [T] and each token's first / last original character int32 [T]."""
        raise NotImplementedError

    # --- the per-question search ------------------------------------------------

    def _answer_one(self, question, context):
        """One question (tf.string []) about one context (tf.string []) ->
        (answer tf.string [], score float32 [], null_score float32 [])."""
        query, query_length = self._query_ids(question)
        chars, is_space, ids, tok_orig_start, tok_orig_end = self._context_alignment(context)
        num_tokens = tf.size(ids)
        num_windows, win_start, win_len = self._windows(num_tokens, query_length)
        best_window = _max_context_windows(num_tokens, win_start, win_len)
        inputs, in_doc, token, max_context = self._window_features(
            query, query_length, ids, num_tokens, num_windows, win_start, win_len, best_window)
        outputs = export_lib.call_for_export(self.model, inputs, self.options.layer_norm)
        start_index, end_index, start_score, end_score, null_score = (
            self._candidate_spans(outputs))
        any_valid, best_score, first_tok, last_tok = self._best_span(
            start_index, end_index, start_score, end_score, in_doc, max_context, token)
        # (Padded: a context without tokens has no valid span, but the gathers still run.)
        text = self._span_text(context, chars, is_space,
                               tf.gather(tf.concat([tok_orig_start, [0]], 0), first_tok),
                               tf.gather(tf.concat([tok_orig_end, [0]], 0), last_tok))
        return self._answer_or_empty(text, any_valid, best_score, null_score)

    def _query_ids(self, question):
        """-> the question's ids int32 [Q] (at most max_query_length) and Q (int32 [])."""
        query = self.tokenizer(tf.reshape(question, [1]))[0][:self.options.max_query_length]
        query = tf.cast(query, tf.int32)
        return query, tf.size(query)

    def _windows(self, num_tokens, query_length):
        """The original's sliding windows over num_tokens (int32 []) context tokens ->
        num_windows W (int32 []), each window's first token and its length (int32 [W])."""
        max_doc = self.options.max_seq_length - query_length - 3  # [CLS], [SEP], [SEP]
        stride = tf.minimum(self.options.doc_stride, max_doc)
        num_windows = tf.where(num_tokens <= max_doc, 1,
                               (num_tokens - max_doc + stride - 1) // stride + 1)
        win_start = tf.range(num_windows) * stride
        win_len = tf.minimum(num_tokens - win_start, max_doc)
        return num_windows, win_start, win_len

    def _window_features(self, query, query_length, ids, num_tokens, num_windows, win_start,
                         win_len, best_window):
        """The [W, S] grids of `[CLS] query [SEP] doc [SEP] pad` per window.

        Returns (the model's inputs: input_ids, input_mask, segment_ids, p_mask int32;
        in_doc bool, True at document tokens; token int32, the context token at each
        position, clipped into range off the document; max_context bool, True where this
        window is the token's max-context window).
        """
        position = tf.range(self.options.max_seq_length)[None]
        doc_pos = position - (query_length + 2)
        in_doc = (doc_pos >= 0) & (doc_pos < win_len[:, None])
        token = tf.clip_by_value(win_start[:, None] + doc_pos, 0, tf.maximum(num_tokens - 1, 0))
        padded_ids = tf.concat([ids, [0]], 0)
        doc_ids = tf.gather(padded_ids, tf.where(in_doc, token, num_tokens))
        query_ids = tf.gather(tf.concat([query, [0]], 0),
                              tf.clip_by_value(position - 1, 0, query_length))
        grid_shape = tf.shape(in_doc)
        input_ids = tf.where(position == 0, self.cls_id, tf.where(
            position <= query_length, query_ids, tf.where(
                position == query_length + 1, self.sep_id, tf.where(
                    in_doc, doc_ids, tf.where(
                        position == query_length + 2 + win_len[:, None], self.sep_id, 0)))))
        input_ids = tf.broadcast_to(input_ids, grid_shape)
        input_mask = tf.cast(tf.broadcast_to(position < query_length + 3 + win_len[:, None],
                                             grid_shape), tf.int32)
        segment_ids = tf.cast((position >= query_length + 2)
                              & (position <= query_length + 2 + win_len[:, None]), tf.int32)
        p_mask = 1 - tf.cast((position == 0) | in_doc, tf.int32)
        window_index = tf.range(num_windows)[:, None]
        max_context = in_doc & tf.equal(
            tf.gather(tf.concat([best_window, [-1]], 0), token), window_index)  # padded: no tokens
        inputs = {"input_ids": input_ids, "input_mask": input_mask,
                  "segment_ids": tf.broadcast_to(segment_ids, grid_shape), "p_mask": p_mask}
        return inputs, in_doc, token, max_context

    def _candidate_spans(self, outputs):
        """The model's candidate (start, end) position pairs per window ->
        start_index, end_index int32 [W, K], start_score, end_score float32 [W, K] and
        null_score float32 [] (0 in v1).

        v2: the beam's start_n_top x end_n_top pairs with their log-probabilities; v1: all
        pairs of the n_best_size highest start and end logits.
        """
        if self.options.version_2_with_negative:
            start_n_top = tf.shape(outputs["start_top_index"])[1]
            end_n_top = tf.shape(outputs["end_top_index"])[1] // start_n_top
            start_index = tf.repeat(outputs["start_top_index"], end_n_top, axis=1)
            end_index = outputs["end_top_index"]
            start_score = tf.repeat(outputs["start_top_log_probs"], end_n_top, axis=1)
            end_score = outputs["end_top_log_probs"]
            null_score = tf.reduce_min(outputs["cls_logits"])
        else:
            n_best = tf.minimum(self.options.n_best_size, self.options.max_seq_length)
            start_top_logits, start_top_index = tf.math.top_k(outputs["start_logits"], n_best)
            end_top_logits, end_top_index = tf.math.top_k(outputs["end_logits"], n_best)
            start_index = tf.repeat(start_top_index, n_best, axis=1)
            end_index = tf.tile(end_top_index, [1, n_best])
            start_score = tf.repeat(start_top_logits, n_best, axis=1)
            end_score = tf.tile(end_top_logits, [1, n_best])
            null_score = tf.constant(0.0)
        start_index, end_index = tf.cast(start_index, tf.int32), tf.cast(end_index, tf.int32)
        return start_index, end_index, start_score, end_score, null_score

    def _best_span(self, start_index, end_index, start_score, end_score, in_doc, max_context,
                   token):
        """The highest-scoring valid candidate (the first on ties) of `_candidate_spans`.

        Valid: start and end on document tokens, the start in its max-context window,
        end >= start, at most max_answer_length tokens. Returns any_valid bool [], its
        score float32 [] (NEG_INF when none) and its first and last context token int32 [].
        """
        valid = (_at(in_doc, start_index) & _at(in_doc, end_index)
                 & _at(max_context, start_index) & (end_index >= start_index)
                 & (end_index - start_index + 1 <= self.options.max_answer_length))
        span_score = tf.reshape(tf.where(valid, start_score + end_score, NEG_INF), [-1])
        flat_valid = tf.reshape(valid, [-1])
        best_score = tf.reduce_max(tf.concat([span_score, [NEG_INF]], 0))
        best = tf.cast(tf.reduce_min(tf.concat([
            tf.where(flat_valid & tf.equal(span_score, best_score))[:, 0],
            [tf.cast(tf.size(span_score), tf.int64)]], 0)), tf.int32)
        any_valid = tf.reduce_any(flat_valid)
        best = tf.minimum(best, tf.maximum(tf.size(span_score) - 1, 0))
        num_candidates = tf.shape(start_index)[1]
        best_window = best // tf.maximum(num_candidates, 1)
        best_candidate = best % tf.maximum(num_candidates, 1)
        first_tok = tf.gather(token[best_window], start_index[best_window, best_candidate])
        last_tok = tf.gather(token[best_window], end_index[best_window, best_candidate])
        return any_valid, best_score, first_tok, last_tok

    def _answer_or_empty(self, text, any_valid, best_score, null_score):
        """-> (answer, score, null_score): the original's empty answer and score when no
        span is valid, and in v2 "" when null_score exceeds the exported threshold."""
        v2 = self.options.version_2_with_negative
        text = tf.where(any_valid, text, "" if v2 else V1_EMPTY_TEXT)
        score = tf.where(any_valid, best_score, -2e6 if v2 else 0.0)
        threshold = self.options.null_score_diff_threshold
        if v2 and threshold is not None:
            text = tf.where(null_score > threshold, "", text)
        return text, score, null_score

    def _span_text(self, context, chars, is_space, first, last):
        """Original characters [first, last] with Python's str.strip() applied."""
        n = tf.size(chars)
        index = tf.range(n)
        keep = (index >= first) & (index <= last) & ~is_space
        kept = tf.boolean_mask(index, keep)
        lo = tf.reduce_min(tf.concat([kept, [n]], 0))
        hi = tf.reduce_max(tf.concat([kept, [-1]], 0))
        ends = tf.cumsum(tf.strings.length(chars))
        starts = ends - tf.strings.length(chars)
        safe = tf.concat([starts, [0]], 0)
        safe_end = tf.concat([ends, [0]], 0)
        begin = tf.gather(safe, tf.minimum(lo, n))
        length = tf.gather(safe_end, tf.maximum(hi, 0)) - begin
        return tf.where(hi >= lo, tf.strings.substr(context, begin, tf.maximum(length, 0)), "")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="question"),
                                  tf.TensorSpec([None], tf.string, name="context")])
    def serve_text(self, question, context):
        answer, score, null = tf.map_fn(
            lambda qc: self._answer_one(qc[0], qc[1]), (question, context),
            fn_output_signature=(tf.TensorSpec([], tf.string), tf.TensorSpec([], tf.float32),
                                 tf.TensorSpec([], tf.float32)))
        outputs = {"answer": answer, "score": score}
        if self.options.version_2_with_negative:
            outputs["null_score"] = null
        return outputs

    @tf.function(input_signature=[{name: tf.TensorSpec([None, None], tf.int32, name=name)
                                   for name in ("input_ids", "input_mask", "segment_ids",
                                                "p_mask")}])
    def serve_tokens(self, features):
        outputs = export_lib.call_for_export(self.model, features, self.options.layer_norm)
        names = (("start_top_log_probs", "start_top_index", "end_top_log_probs",
                  "end_top_index", "cls_logits") if self.options.version_2_with_negative
                 else ("start_logits", "end_logits"))
        return {name: outputs[name] for name in names}


class SquadServingModule(_SpanServingModule):
    """The SavedModel's module with a SentencePiece model (see the module docstring)."""

    def __init__(self, model, spm_model_file: str, options: ExportOptions):
        super().__init__(model, options)
        with open(spm_model_file, "rb") as handle:
            proto = handle.read()
        import tensorflow_text as tf_text

        python_tokenizer = tokenization.SentencePieceTokenizer(spm_model_file,
                                                               options.do_lower_case)
        self.tokenizer = tokenization.InGraphTokenizer(model_proto=proto,
                                                       do_lower_case=options.do_lower_case)
        self._fast = tf_text.FastSentencepieceTokenizer(proto)
        self._offsets = tf_text.SentencepieceTokenizer(proto)
        self._whitespace = tokenization.whitespace_regex()
        self._combining = tokenization.combining_regex()
        self.cls_id, self.sep_id = python_tokenizer.cls_id, python_tokenizer.sep_id
        ids, rel_start, rel_end, lengths = _expansion_offsets(python_tokenizer)
        self._exp_ids = tf.constant(ids, tf.int32)
        self._exp_start = tf.constant(rel_start, tf.int32)
        self._exp_end = tf.constant(rel_end, tf.int32)
        self._exp_lengths = tf.constant(lengths, tf.int64)
        piece_bytes = []
        for i in range(python_tokenizer.vocab_size):
            piece = python_tokenizer.sp_model.IdToPiece(i)
            unknown = python_tokenizer.sp_model.IsUnknown(i) or python_tokenizer.sp_model.IsControl(i)
            piece_bytes.append(1 if unknown else
                               len(piece.replace(tokenization.SPIECE_UNDERLINE, " ").encode()))
        self._piece_bytes = tf.constant(piece_bytes, tf.int32)

    def _context_alignment(self, context):
        chars, is_space, normalized, cumulative = self._normalize_context(context)
        ids, byte_start, byte_end = self._context_tokens(normalized)
        # Byte offset -> original character: first char whose cumulative end exceeds it.
        byte_end = tf.maximum(byte_end, byte_start + 1)
        last_char = tf.maximum(tf.size(chars) - 1, 0)
        tok_orig_start = tf.minimum(tf.searchsorted(cumulative, byte_start, side="right"),
                                    last_char)
        tok_orig_end = tf.minimum(tf.searchsorted(cumulative, byte_end - 1, side="right"),
                                  last_char)
        return chars, is_space, ids, tok_orig_start, tok_orig_end

    # --- context normalisation with a byte -> original character map --------------

    def _normalize_context(self, context):
        """-> (chars [n], is_space [n], normalised string, cumulative bytes [n])."""
        chars = tf.strings.unicode_split(context, "UTF-8")
        n = tf.size(chars)
        is_space = tf.strings.regex_full_match(chars, self._whitespace)
        index = tf.range(n)
        non_space = tf.boolean_mask(index, tf.logical_not(is_space))
        first = tf.reduce_min(tf.concat([non_space, [n]], 0))
        last = tf.reduce_max(tf.concat([non_space, [-1]], 0))
        previous_space = tf.concat([[False], is_space[:-1]], 0)
        keep_space = is_space & ~previous_space & (index > first) & (index < last)
        import tensorflow_text as tf_text

        normalized = tf_text.normalize_utf8(chars, "NFKD")
        normalized = tf.strings.regex_replace(normalized, self._combining, "")
        if self.options.do_lower_case:
            normalized = tf.strings.lower(normalized, encoding="utf-8")
        out = tf.where(is_space, tf.where(keep_space, " ", ""), normalized)
        cumulative = tf.cumsum(tf.strings.length(out))
        return chars, is_space, tf.strings.reduce_join(out), cumulative

    def _context_tokens(self, normalized):
        """ids [T] and byte offsets [T] (start, end) into `normalized`, expanded."""
        ids = tf.cast(self._fast.tokenize(normalized), tf.int32)
        other, starts, ends = self._offsets.tokenize_with_offsets(normalized)
        other = tf.cast(other, tf.int32)
        same = tf.logical_and(tf.equal(tf.size(other), tf.size(ids)),
                              tf.reduce_all(tf.equal(
                                  tf.pad(other, [[0, tf.maximum(tf.size(ids) - tf.size(other), 0)]]),
                                  tf.pad(ids, [[0, tf.maximum(tf.size(other) - tf.size(ids), 0)]]))))

        def from_lengths():
            lengths = tf.gather(self._piece_bytes, ids)
            end = tf.cumsum(lengths) - 1  # the dummy-prefix "▁" has no source byte
            return tf.maximum(end - lengths, 0), tf.maximum(end, 0)

        starts, ends = tf.cond(same, lambda: (tf.cast(starts, tf.int32), tf.cast(ends, tf.int32)),
                               from_lengths)
        table = tf.RaggedTensor.from_row_lengths(self._exp_ids, self._exp_lengths)
        rows = tf.gather(table, ids)
        row_of = tf.cast(rows.value_rowids(), tf.int32)
        flat = tf.range(tf.size(self._exp_ids))
        positions = tf.gather(tf.RaggedTensor.from_row_lengths(flat, self._exp_lengths),
                              ids).flat_values
        sub_start = tf.gather(self._exp_start, positions)
        sub_end = tf.gather(self._exp_end, positions)
        b, e = tf.gather(starts, row_of), tf.gather(ends, row_of)
        new_start = tf.maximum(b, e - sub_start)
        new_end = tf.maximum(new_start + 1, e - sub_end)
        return rows.flat_values, new_start, new_end


class WordPieceSquadServingModule(_SpanServingModule):
    """The SavedModel's module with a WordPiece vocabulary (the Chinese models, CMRC 2018).

    The question goes through `tokenization.InGraphWordPieceTokenizer`. The
    context follows `squad_wordpiece.basic_words_with_origin` as TensorFlow
    ops: the BasicTokenizer's character rules one original character at a
    time (control characters dropped, whitespace separating, lower-casing, NFD
    and mark stripping per character, CJK ideographs and punctuation as words
    of their own), so every normalised character knows its original one; the
    words go through tensorflow-text's FastWordpieceTokenizer with byte
    offsets inside each word, which map back to original characters.
    """

    def __init__(self, model, vocab_file: str, options: ExportOptions):
        super().__init__(model, options)
        self.tokenizer = tokenization.InGraphWordPieceTokenizer(
            vocab_file, do_lower_case=options.do_lower_case)
        self.cls_id, self.sep_id = self.tokenizer.cls_id, self.tokenizer.sep_id
        self._regex = self.tokenizer.regexes

    def _normalized_chars(self, chars):
        """Original chars [n] -> normalised characters [m] with origin, last origin, is_cjk."""
        import tensorflow_text as tf_text

        regex = self._regex
        n = tf.size(chars)
        is_control = tf.strings.regex_full_match(chars, regex["control"])
        is_space = tf.strings.regex_full_match(chars, regex["whitespace"]) & ~is_control
        is_cjk = tf.strings.regex_full_match(chars, regex["cjk"])
        normalized = chars
        if self.options.do_lower_case:
            normalized = tf.strings.lower(normalized, encoding="utf-8")
            normalized = tf_text.normalize_utf8(normalized, "NFD")
            normalized = tf.strings.regex_replace(normalized, regex["marks"], "")
        normalized = tf.where(is_space, " ", tf.where(is_control, "", normalized))
        # A character that normalises to nothing extends the previous character's range
        # (up to the next control, whitespace or visible character).
        vanishes = ~is_control & ~is_space & tf.equal(normalized, "")
        stops = tf.concat([tf.cast(tf.where(~vanishes)[:, 0], tf.int32), [n]], 0)
        extended = tf.gather(stops, tf.searchsorted(stops, tf.range(n), side="right")) - 1
        split = tf.strings.unicode_split(normalized, "UTF-8")
        origin = tf.cast(split.value_rowids(), tf.int32)
        flat = split.flat_values
        last_of_origin = tf.not_equal(origin, tf.concat([origin[1:], [-1]], 0))
        origin_end = tf.where(last_of_origin, tf.gather(extended, origin), origin)
        return flat, origin, origin_end, tf.gather(is_cjk, origin)

    def _context_alignment(self, context):
        regex = self._regex
        chars = tf.strings.unicode_split(context, "UTF-8")
        flat, origin, origin_end, cjk = self._normalized_chars(chars)
        m = tf.size(flat)
        space = tf.strings.regex_full_match(flat, regex["whitespace"])
        punct = tf.strings.regex_full_match(flat, regex["punctuation"])

        def previous(values, first):
            return tf.concat([[first], values], 0)[:m]

        begins = ~space & (tf.equal(tf.range(m), 0) | previous(space, True) | punct
                           | previous(punct, False)
                           | (tf.not_equal(origin, previous(origin, -1))
                              & (cjk | previous(cjk, False))))
        keep = ~space
        kept = tf.boolean_mask(flat, keep)
        kept_start = tf.boolean_mask(origin, keep)
        kept_end = tf.boolean_mask(origin_end, keep)
        word_of = tf.cumsum(tf.cast(tf.boolean_mask(begins, keep), tf.int32)) - 1
        num_words = tf.reduce_max(tf.concat([word_of, [-1]], 0)) + 1
        word_chars = tf.RaggedTensor.from_value_rowids(kept, word_of, nrows=num_words)
        words = tf.strings.reduce_join(word_chars, axis=1)
        ids, starts, ends = self.tokenizer.wordpiece_with_offsets(words)
        word = tf.cast(ids.value_rowids(), tf.int32)
        # Byte offsets inside a word -> indexes of kept characters.
        char_bytes = tf.strings.length(kept)
        byte_end = tf.cumsum(char_bytes)
        word_start = tf.gather(byte_end - char_bytes, tf.cast(word_chars.row_starts(), tf.int32))
        word_bytes = tf.gather(tf.concat([[0], byte_end], 0),
                               tf.cast(word_chars.row_limits(), tf.int32)) - word_start
        limit = tf.gather(word_bytes, word)
        first_byte = tf.gather(word_start, word) + tf.minimum(
            tf.cast(starts.flat_values, tf.int32), limit - 1)
        last_byte = tf.gather(word_start, word) + tf.minimum(
            tf.cast(ends.flat_values, tf.int32), limit) - 1
        first_char = tf.searchsorted(byte_end, first_byte, side="right")
        last_char = tf.searchsorted(byte_end, last_byte, side="right")
        is_space = tf.strings.regex_full_match(chars, regex["whitespace"])
        return (chars, is_space, tf.cast(ids.flat_values, tf.int32),
                tf.gather(kept_start, first_char), tf.gather(kept_end, last_char))


def export_saved_model(model, export_dir: str, spm_model_file: Optional[str] = None,
                       options: Optional[ExportOptions] = None,
                       vocab_file: Optional[str] = None) -> str:
    """Writes the SavedModel (signatures serving_default and serve_tokens) atomically.

    The tokenizer: `spm_model_file` (SentencePiece) or `vocab_file` (WordPiece);
    SentencePiece wins when both are given, as in the original.
    """
    options = options or ExportOptions()
    if spm_model_file:
        module = SquadServingModule(model, spm_model_file, options)
    elif vocab_file:
        module = WordPieceSquadServingModule(model, vocab_file, options)
    else:
        raise ValueError("export_saved_model needs spm_model_file or vocab_file")
    return export_lib.save_serving_model(export_dir, module,
                                         {"serving_default": module.serve_text,
                                          "serve_tokens": module.serve_tokens})


def portable_model(model, options: ExportOptions):
    """The span model's ONNX / LiteRT function (an `export.portable.PortableModel`): int32
    [B, S] `input_ids`, `input_mask`, `segment_ids` (and `p_mask`, 1 where an answer
    cannot start or end, for SQuAD v2) -> `start_logits`, `end_logits` (v1), or the top-k
    `start_top_log_probs`, `start_top_index`, `end_top_log_probs`, `end_top_index` and
    `cls_logits` (v2), as `serve_tokens` returns. The post-processing to answer text stays
    with the caller (`albert_tf.tasks.span_qa.postprocess`). An int8 file is checked on
    the most likely start and end (v1: the argmax of each logits over the passage; v2: the
    top-1 indices, which the model already restricts to the passage)."""
    from albert_tf.export import onnx as onnx_export, portable

    v2 = options.version_2_with_negative
    names = (["start_top_log_probs", "start_top_index", "end_top_log_probs",
              "end_top_index", "cls_logits"] if v2 else ["start_logits", "end_logits"])
    signature = export_lib.token_input_signature()
    if v2:
        signature["p_mask"] = tf.TensorSpec([None, None], tf.int32, name="p_mask")
    metadata = {"task": "squad_v2" if v2 else "squad_v1",
                "max_seq_length": options.max_seq_length, "doc_stride": options.doc_stride,
                "max_query_length": options.max_query_length,
                "do_lower_case": options.do_lower_case, "n_best_size": options.n_best_size,
                "max_answer_length": options.max_answer_length,
                "null_score_diff_threshold": options.null_score_diff_threshold}
    compare = ((("start_top_index", "first"), ("end_top_index", "first")) if v2 else
               (("start_logits", "context_argmax"), ("end_logits", "context_argmax")))
    return portable.PortableModel(onnx_export.model_function(model, names), signature,
                                  metadata, compare=compare)
