"""Token-classification (NER) exports: a SavedModel that finds entities in raw text or in
pre-split words, and ONNX.

SavedModel (`TaggingServingModule`, written by `export_saved_model`):

  serving_default(text: tf.string [B]) -> the entities of each raw text, dense and padded
      (what TF Serving's REST API returns), K = the most entities of a text in the batch:
        entity_type  tf.string [B, K]  the entity's type ("PER", "name", ...); pad ""
        start, end   int32 [B, K]      character offsets in the input, end exclusive:
                                       text[start:end] is the entity, counted in Unicode
                                       code points as Python counts; pad -1
        entity_text  tf.string [B, K]  text[start:end]; pad ""
        score        float32 [B, K]    the mean over the entity's words of the softmax
                                       probability of the word's predicted label at its
                                       first sub-token (with a CRF: the softmax of the
                                       emissions, not the CRF's path probability); pad -1
        num_entities int32 [B]         how many of the K columns of the row are entities
  serve_words(words: tf.string [B, W]) -> the entities of pre-split sentences (CoNLL-style
      input: a row is a sentence's words, padded with ""; its words end at its last
      non-empty one, and an empty word before that is a word without sub-tokens):
        entity_type  tf.string [B, K]  as serving_default
        start_word,  int32 [B, K]      word indices in the row, end exclusive:
        end_word                       words[start_word:end_word] is the entity; pad -1
        score        float32 [B, K]    as serving_default
        num_entities int32 [B]         as serving_default
        tags         tf.string [B, W]  each word's predicted label ("B-PER", "O", ...);
                                       "" for padding
      Each word is tokenized alone, as `features.word_ids` does for the words of a CoNLL
      file (no word split: a word is never cut further into words), then windowed,
      labelled and read into entities exactly as below. A dense string matrix, not a
      RaggedTensor, so TF Serving's REST API takes it as a JSON list of lists.
  serve_tokens(input_ids, input_mask, segment_ids, word_mask: int32 [B, S]) ->
        predictions int32 [B, S] (label id at word starts, -1 elsewhere), logits float32
        [B, S, num_labels]: the model's own outputs, for callers that featurize.

`serving_default` is the Python prediction path (`readers.split_words`, `features.convert`,
the model, `features.merge_predictions`, `schemes.entities`, `TaggedSentence.char_span`)
written as graph ops, step by step:

  * words: `regex_split_with_offsets` at runs of Python whitespace (`str.isspace`), every
    CJK character and every punctuation character a word of its own (the character classes
    of `split_words`, computed from Python's `unicodedata`);
  * sub-tokens: each word on its own through the in-graph twin of the Python tokenizer
    (`tokenization.in_graph_tokenizer`: SentencePiece's `preprocess_text` + pieces, every
    word starting with its own "▁" as `features.word_ids` gives it; or BERT's BasicTokenizer
    + WordPiece), so a word's ids are the Python path's;
  * windows: `features.word_windows` (at most max_seq_length - 2 sub-tokens, moved by at
    most `doc_stride`, at word boundaries) and the max-context rule, `[CLS] tokens [SEP]`,
    `word_mask` at every word start of a window; nothing is truncated: a long text is
    covered by as many windows as the Python path makes, all run in one model call;
  * each word's label from its max-context window (a word without sub-tokens is 'O');
    entities read from the word labels by `schemes.entities`' conlleval rule (IOB2 or
    BIOES alike: a chunk starts at B-X / S-X, or at an I-X / E-X that does not continue the
    previous word's B-X / I-X chunk).

`serve_words` is the same path from the second step on, for the given words (the Python
path of a CoNLL file's sentence: `features.convert` of the reader's words, the model,
`features.merge_predictions`, `schemes.entities`).

What is exact and what may differ from the Python path: the words, their offsets, the
windows and the entity reading are exact; the ids are those of the in-graph tokenizers,
exact but for their documented limit (NFKD from ICU in the graph, Python's `unicodedata`
outside, for SentencePiece). The model is the same graph on the same features, run on a
batch of windows; tags equal the Python path's unless two tag sequences score within float
rounding of each other. Texts and words must be valid UTF-8 (JSON strings always are).

The module also carries, as non-trainable variables, `labels` (tf.string [L]),
`tag_scheme`, `max_seq_length`, `doc_stride` and `do_lower_case`. Loading needs only
TensorFlow and tensorflow-text.

ONNX (`portable_model`, as `export.portable.export_model_dir` writes it): model.onnx takes
int32 [B, S] `input_ids`, `input_mask`, `segment_ids`, `word_mask` (the features of
`serve_tokens`; the caller tokenizes and windows) and returns `logits` float32 [B, S, K]
and `predictions` int32 [B, S] (label id at word starts, -1 elsewhere: `serve_tokens`'
predictions). The Viterbi decoding (the CRF's, or the softmax head's under the scheme's
constraints) is in the graph: its backtracking is a forward `tf.scan` over the reversed
back-pointers (`crf.crf_decode`), because tf2onnx 1.17 stacks the outputs of a reverse=True
scan in the order it runs them, which reversed the path. The decoding also rides in the
model's metadata (`decoding_metadata`: the CRF's transition, start and end scores and the
scheme's allowed masks), and `decode_onnx_logits` (numpy) decodes logits as the model does:
for callers that keep only the logits, or to check model.int8.onnx, whose quantized logits
may decode to other tags than the float model's. The metadata also holds the labels, tag
scheme, max_seq_length, doc_stride, do_lower_case and the vocabulary file's name.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from albert_tf import export
from albert_tf.tasks.tagging import schemes

# Windows of the raw-text signature per model call.
WINDOW_BATCH = 16

PAD_OFFSET = -1  # start / end of a padding column
PAD_SCORE = -1.0  # score of a padding column
DEFAULT_DOC_STRIDE = 64  # run_ner.py's --doc_stride
_PREFIX_CODES = {schemes.OUTSIDE: 0, "B": 1, "I": 2, "E": 3, "S": 4}
_OPEN_CODES = (1, 2)  # B-, I-: an I-/E- of the same type continues their chunk
_CONTINUING_CODES = (2, 3)  # I-, E-
_INT32_MAX = np.iinfo(np.int32).max


# --- words -----------------------------------------------------------------------------------


# How a raw text is split into words, as the task's reader splits its files: "basic"
# (`readers.split_words`: CoNLL-2003, custom) or "characters" (every character a word, white
# space included: CLUENER and MSRA, whose words are characters).
WORD_SPLITS = ("basic", "characters")


def word_split_patterns(word_split: str = "basic") -> Tuple[str, str]:
    """(delimiters, kept delimiters): RE2 patterns with which tensorflow-text's
    `regex_split_with_offsets` splits a text into words. "basic", as `readers.split_words`:
    at runs of `str.isspace` characters (dropped) and at every CJK or punctuation
    character (kept, each a word); "characters": every character a word."""
    if word_split not in WORD_SPLITS:
        raise ValueError(f"word_split must be one of {', '.join(WORD_SPLITS)}, got "
                         f"{word_split!r}")
    if word_split == "characters":
        return "(?s).", "(?s)."
    from albert_tf.tokenization.regex_patterns import regex_class, whitespace_regex
    from albert_tf.tokenization.wordpiece import CJK_RANGES, BasicTokenizerTables

    alone = set(BasicTokenizerTables.get().punctuation_codes)
    alone.update(cp for lo, hi in CJK_RANGES for cp in range(lo, hi + 1))
    alone_class = regex_class(sorted(alone))
    return f"{whitespace_regex()}|{alone_class}", alone_class


def split_words(texts, patterns: Tuple[str, str]):
    """`readers.split_words` in the graph: tf.string [B] -> (words tf.string, byte begin,
    byte end int64), RaggedTensors [B, (W)] (`text[begin:end]` in bytes is the word)."""
    import tensorflow_text as tf_text

    delimiters, kept = patterns
    return tf_text.regex_split_with_offsets(texts, delimiters, kept)


# --- windows ---------------------------------------------------------------------------------


def word_windows(is_start, num_tokens, max_tokens: int, doc_stride: int):
    """`features.word_windows` for a batch of rows, in the graph.

    is_start bool [B, T]: a word starts at this sub-token; num_tokens int32 [B] (<= T).
    Returns (starts, lengths int32 [B, I], valid bool [B, I]): row b's windows are its
    first columns with `valid`, in order (I = the most windows of a row; 0 for a row
    without sub-tokens).

    Linear in T: each step looks only at the max_tokens + 1 positions from its window's
    start, and the windows are written to TensorArrays (not grown by concatenation).
    """
    num_tokens = tf.cast(num_tokens, tf.int32)
    batch, width = tf.shape(is_start)[0], tf.shape(is_start)[1]
    positions = tf.range(width + 1)[None, :]
    boundary = (tf.concat([is_start, tf.zeros([batch, 1], tf.bool)], axis=1)
                | tf.equal(positions, num_tokens[:, None]))
    # Padded so that every position start + [0, max_tokens] can be gathered.
    boundary = tf.concat([boundary, tf.zeros([batch, max_tokens + 1], tf.bool)], axis=1)
    offsets = tf.range(max_tokens + 1)[None, :]

    def step(index, start, active, starts, lengths, valid):
        local = start[:, None] + offsets                       # [B, max_tokens + 1]
        hits = tf.gather(boundary, local, batch_dims=1)

        def last_boundary(low, high):  # the last boundary in (low, high], -1 if none
            hit = hits & (local > low[:, None]) & (local <= high[:, None])
            return tf.reduce_max(tf.where(hit, local, -1), axis=1)

        def first_boundary(low, high):  # the first boundary in (low, high], MAX if none
            hit = hits & (local > low[:, None]) & (local <= high[:, None])
            return tf.reduce_min(tf.where(hit, local, _INT32_MAX), axis=1)

        end = tf.minimum(start + max_tokens, num_tokens)
        last = last_boundary(start, end)
        end = tf.where(last >= 0, last, end)  # none: a word longer than a window
        step_to = start + tf.minimum(doc_stride, end - start)
        back, forward = last_boundary(start, step_to), first_boundary(step_to, end)
        following = tf.where(back >= 0, back,
                             tf.where(forward < _INT32_MAX, forward, step_to))
        more = active & (end < num_tokens)
        return (index + 1, tf.where(more, following, start), more,
                starts.write(index, start), lengths.write(index, end - start),
                valid.write(index, active))

    def columns(dtype):
        return tf.TensorArray(dtype, size=0, dynamic_size=True, element_shape=[None])

    initial = (tf.constant(0), tf.zeros([batch], tf.int32), num_tokens > 0,
               columns(tf.int32), columns(tf.int32), columns(tf.bool))
    _, _, _, starts, lengths, valid = tf.while_loop(
        lambda index, start, active, *_: tf.reduce_any(active), step, initial)

    def matrix(array, dtype):  # [I, B] -> [B, I]; [B, 0] when no row has a token
        stacked = tf.cond(array.size() > 0, array.stack,
                          lambda: tf.zeros([0, batch], dtype))
        return tf.transpose(stacked)

    return matrix(starts, tf.int32), matrix(lengths, tf.int32), matrix(valid, tf.bool)


def max_context_window(token, starts, lengths, valid):
    """`features.max_context_windows` for given tokens: int32 [N], the index (column of
    `starts`) of the max-context window of sub-token `token` [N] among the windows
    `starts`, `lengths`, `valid` [N, I] of its row: the largest min(left, right) + 0.01 *
    length, in float64 as Python computes it, the first on ties; -1 when no window holds it."""
    token = tf.cast(token, tf.int32)[:, None]
    last = starts + lengths - 1
    inside = valid & (token >= starts) & (token <= last)
    score = (tf.cast(tf.minimum(token - starts, last - token), tf.float64)
             + 0.01 * tf.cast(lengths, tf.float64))
    score = tf.where(inside, score, tf.constant(-np.inf, tf.float64))
    best = tf.reduce_max(score, axis=1, keepdims=True)
    columns = tf.range(tf.shape(starts)[1])[None, :]
    first = tf.reduce_min(tf.where(inside & tf.equal(score, best), columns, _INT32_MAX), axis=1)
    return tf.where(first < _INT32_MAX, first, -1)


def max_context_flat(row, token, starts, lengths, valid, max_tokens: int):
    """`max_context_window` without the [N, I] matrices, linear in the text's length: for
    each sub-token (row int32 [N], token int32 [N], its position in the row), the index of
    its max-context window among all valid windows in row-major order (as `tf.where(valid)`
    lists them), -1 when none holds it. starts, lengths, valid [B, I] as `word_windows`
    returns them; a window holds at most `max_tokens` sub-tokens.

    Only the windows starting in (token - max_tokens, token] can hold a token, and a row's
    windows start in increasing order: their range is found by a binary search over all
    windows laid end to end (each row shifted by the tokens of the rows before it)."""
    token, row = tf.cast(token, tf.int32), tf.cast(row, tf.int32)
    where = tf.cast(tf.where(valid), tf.int32)                       # [W, (row, column)]
    window_row = where[:, 0]
    row_width = tf.reduce_max(starts + lengths, axis=1)              # [B]
    shift = tf.cumsum(tf.maximum(row_width, 0), exclusive=True)
    window_start = tf.gather_nd(starts, where) + tf.gather(shift, window_row)       # sorted
    window_length = tf.gather_nd(lengths, where)
    position = token + tf.gather(shift, row)
    high = tf.searchsorted(window_start, position, side="right", out_type=tf.int32)
    low = tf.searchsorted(window_start, position - max_tokens, side="right",
                          out_type=tf.int32)
    count = tf.reduce_max(tf.concat([high - low, [0]], axis=0))
    candidate = low[:, None] + tf.range(count)[None, :]                # [N, C]
    exists = candidate < high[:, None]
    candidate = tf.minimum(candidate, tf.maximum(tf.shape(window_start)[0] - 1, 0))
    start = tf.gather(tf.concat([window_start, [0]], 0), candidate)
    length = tf.gather(tf.concat([window_length, [0]], 0), candidate)
    same_row = tf.equal(tf.gather(tf.concat([window_row, [-1]], 0), candidate), row[:, None])
    last = start + length - 1
    where_token = position[:, None]
    inside = exists & same_row & (where_token >= start) & (where_token <= last)
    score = (tf.cast(tf.minimum(where_token - start, last - where_token), tf.float64)
             + 0.01 * tf.cast(length, tf.float64))
    score = tf.where(inside, score, tf.constant(-np.inf, tf.float64))
    best = tf.reduce_max(score, axis=1, keepdims=True)
    first = tf.reduce_min(tf.where(inside & tf.equal(score, best), candidate, _INT32_MAX),
                          axis=1)
    return tf.where(first < _INT32_MAX, first, -1)


# --- entities --------------------------------------------------------------------------------


def label_tables(labels: Sequence[str]) -> Tuple[List[int], List[int], List[str]]:
    """(prefix code per label (O 0, B 1, I 2, E 3, S 4), type index per label (-1 for O),
    the type names) of a label list (index = label id)."""
    prefixes, type_ids, types = [], [], []
    for label in labels:
        prefix, type_ = schemes.split_tag(label)
        prefixes.append(_PREFIX_CODES[prefix])
        if type_ is not None and type_ not in types:
            types.append(type_)
        type_ids.append(-1 if type_ is None else types.index(type_))
    return prefixes, type_ids, types


def chunk_words(prefix, type_id, first_in_row):
    """`schemes.entities` on flat words: prefix, type_id int32 [N] (`label_tables` codes of
    each word's label), first_in_row bool [N] (the word begins a sentence). Returns
    (first int32 [E], entity_id int32 [N]): the flat index of each entity's first word, in
    order, and the entity each word is in (-1 outside every entity)."""
    previous_prefix = tf.concat([[0], prefix[:-1]], axis=0)
    previous_type = tf.concat([[-1], type_id[:-1]], axis=0)
    continues = (tf.reduce_any(tf.equal(prefix[:, None], _CONTINUING_CODES), axis=1)
                 & tf.reduce_any(tf.equal(previous_prefix[:, None], _OPEN_CODES), axis=1)
                 & tf.equal(previous_type, type_id) & ~first_in_row)
    inside = prefix > 0
    starts = inside & ~continues
    entity_id = tf.cumsum(tf.cast(starts, tf.int32)) - 1
    return (tf.cast(tf.where(starts)[:, 0], tf.int32), tf.where(inside, entity_id, -1))


# --- the serving module ----------------------------------------------------------------------


def token_signature() -> Dict[str, tf.TensorSpec]:
    """int32 [B, S] TensorSpecs of `input_ids`, `input_mask`, `segment_ids`, `word_mask`."""
    signature = export.token_input_signature()
    signature["word_mask"] = tf.TensorSpec([None, None], tf.int32, name="word_mask")
    return signature


def check_settings(labels: Sequence[str], scheme: str, max_seq_length: int,
                   doc_stride: int, num_labels: Optional[int] = None) -> str:
    """The canonical scheme name; raises ValueError for settings the export cannot serve
    (`num_labels`: the model's, which must be len(labels))."""
    scheme = schemes.normalize_scheme(scheme)
    if num_labels is not None and num_labels != len(labels):
        raise ValueError(f"{len(labels)} labels for a model with {num_labels}")
    if schemes.OUTSIDE not in labels:
        raise ValueError(f"the label list has no 'O': {', '.join(labels)}")
    schemes.allowed_transitions(labels, scheme)  # the labels fit the scheme, no repeats
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3, got {max_seq_length}")
    if not 0 < doc_stride <= max_seq_length - 2:
        raise ValueError(f"doc_stride must be in [1, max_seq_length - 2 = "
                         f"{max_seq_length - 2}], got {doc_stride}")
    return scheme


class TaggingServingModule(tf.Module):
    """Serving wrapper of an `AlbertTokenClassifier`: `serving_default` (raw text ->
    entities), `serve_words` (pre-split words -> entities as word indices, tags) and
    `serve_tokens` (ids -> predictions, logits); see the module docstring.

    tokenizer: `tokenization.in_graph_tokenizer(...)` of the model's vocabulary and
    do_lower_case. labels: the label list (index = label id), with 'O'; scheme: the tag
    scheme the model was trained in (iob2 or bioes; entities are read from any).
    doc_stride: the window step (run_ner.py's --doc_stride; default min(64,
    max_seq_length - 2)). word_split: how `serving_default` splits a text into words, as
    the training files were (`WORD_SPLITS`).
    """

    def __init__(self, model, tokenizer, labels: Sequence[str], scheme: str,
                 max_seq_length: int, doc_stride: Optional[int] = None,
                 name: Optional[str] = None, layer_norm: str = "auto",
                 word_split: str = "basic"):
        super().__init__(name=name)
        labels = list(labels)
        if doc_stride is None:
            doc_stride = min(DEFAULT_DOC_STRIDE, max_seq_length - 2)
        scheme = check_settings(labels, scheme, max_seq_length, doc_stride, model.num_labels)
        self.model = model
        self.tokenizer = tokenizer
        self.max_seq_length = tf.Variable(max_seq_length, trainable=False, name="max_seq_length")
        self.doc_stride = tf.Variable(doc_stride, trainable=False, name="doc_stride")
        self.do_lower_case = tf.Variable(bool(tokenizer.do_lower_case), trainable=False,
                                         name="do_lower_case")
        self.labels = tf.Variable(labels, trainable=False, name="labels")
        self.tag_scheme = tf.Variable(scheme, trainable=False, name="tag_scheme")
        self._label_names = labels
        self._settings = (max_seq_length, doc_stride, labels.index(schemes.OUTSIDE))
        prefixes, type_ids, types = label_tables(labels)
        self._prefixes, self._type_ids = prefixes, type_ids
        self._types = types or [""]
        self._patterns = word_split_patterns(word_split)
        self.word_split = tf.Variable(word_split, trainable=False, name="word_split")
        # Early exit: each window's exit layer too; a text's is its deepest window's.
        self.exits = getattr(model, "early_exit", None) is not None
        self._outputs = export.model_outputs(
            model, ["predictions", "logits"] + (["exit_layer"] if self.exits else []),
            layer_norm)
        self.serving_default = tf.function(self._serve_text, input_signature=[
            tf.TensorSpec([None], tf.string, name="text")])
        self.serve_words = tf.function(self._serve_words, input_signature=[
            tf.TensorSpec([None, None], tf.string, name="words")])
        self.serve_tokens = tf.function(self._serve_tokens, input_signature=[token_signature()])

    def signatures(self) -> Dict[str, Callable]:
        return {"serving_default": self.serving_default, "serve_words": self.serve_words,
                "serve_tokens": self.serve_tokens}

    def _serve_tokens(self, features):
        return self._outputs(features)

    # -- raw text --

    def word_ids(self, words):
        """Each word's sub-token ids, the word tokenized alone (as `features.word_ids`):
        tf.string [N] -> int32 RaggedTensor [N, (P)]."""
        tok = self.tokenizer
        ids = tok.encode_preprocessed(tok.preprocess(words))
        return tf.cast(ids, tf.int32).with_row_splits_dtype(tf.int64)

    def window_features(self, tokens, is_start, rows, starts, lengths):
        """`[CLS] tokens[start:start + length] [SEP] pad` windows: tokens int32 [B, T],
        is_start bool [B, T]; rows, starts, lengths int32 [W] (each window's row). Returns
        the model's int32 [W, S] features, `word_mask` at the word starts in each window."""
        max_seq_length = self._settings[0]
        tok = self.tokenizer
        position = tf.range(max_seq_length)[None, :]
        inside = (position >= 1) & (position <= lengths[:, None])
        width = tf.shape(tokens)[1]
        index = tf.clip_by_value(starts[:, None] + position - 1, 0, tf.maximum(width - 1, 0))
        # Each window gathers its own positions from the flat rows ([W, S], never [W, T]:
        # a long text's many windows would make that quadratic in its length).
        flat = rows[:, None] * width + index
        ids = tf.gather(tf.reshape(tokens, [-1]), flat)
        word_start = tf.gather(tf.reshape(is_start, [-1]), flat)
        specials = tf.where(tf.equal(position, 0), tok.cls_id,
                            tf.where(tf.equal(position, lengths[:, None] + 1), tok.sep_id,
                                     max(tok.pad_id, 0)))
        used = position <= lengths[:, None] + 1
        return {"input_ids": tf.where(inside, ids, specials),
                "input_mask": tf.cast(used, tf.int32),
                "segment_ids": tf.zeros_like(ids),
                "word_mask": tf.cast(inside & word_start, tf.int32)}

    def word_labels(self, texts):
        """The Python path's label of every word of raw texts tf.string [B]: (words, byte
        begin, byte end: RaggedTensors [B, (W)] of `split_words`, then `label_words`' label
        int32 [N] and probability float32 [N] per flat word, and its windows' exits)."""
        words, begin, end = split_words(texts, self._patterns)
        return (words, begin, end) + self.label_words(words)

    def label_words(self, words):
        """The Python path's label of every word of `words` (tf.string RaggedTensor [B, (W)],
        each row a sentence, each word tokenized alone): (label int32 [N], its softmax
        probability float32 [N]) per flat word, 'O' and 0 for a word without sub-tokens; and
        the windows' (exit layer int32 [W], row int32 [W]) under early exit, else None."""
        max_seq_length, doc_stride, outside = self._settings
        ids = self.word_ids(words.flat_values)                                 # [N, (P)]
        counts = tf.cast(ids.row_lengths(), tf.int32)
        word_row = tf.cast(words.value_rowids(), tf.int32)
        tokens = words.with_flat_values(ids).merge_dims(1, 2)                  # [B, (T)]
        first_token = (tf.cumsum(counts, exclusive=True)                        # in its row
                       - tf.gather(tf.cast(tokens.row_starts(), tf.int32), word_row))
        scored = tf.cast(tf.where(counts > 0)[:, 0], tf.int32)  # the words with sub-tokens
        row, token = tf.gather(word_row, scored), tf.gather(first_token, scored)
        dense = tokens.to_tensor(0)
        is_start = tf.scatter_nd(tf.stack([row, token], axis=1), tf.ones_like(scored),
                                 tf.shape(dense)) > 0
        starts, lengths, valid = word_windows(is_start, tokens.row_lengths(),
                                              max_seq_length - 2, doc_stride)
        windows = tf.cast(tf.where(valid), tf.int32)                     # [W, (row, column)]
        # A long text's windows go through the model WINDOW_BATCH at a time.
        wanted = {"predictions": (tf.int32, [max_seq_length]),
                  "logits": (tf.float32, [max_seq_length, len(self._label_names)])}
        if self.exits:
            wanted["exit_layer"] = (tf.int32, [])
        outputs = export.in_chunks(self._outputs, self.window_features(
            dense, is_start, windows[:, 0], tf.gather_nd(starts, windows),
            tf.gather_nd(lengths, windows)), WINDOW_BATCH, wanted)
        window = max_context_flat(row, token, starts, lengths, valid, max_seq_length - 2)
        at = tf.stack([window, 1 + token - tf.gather(tf.gather_nd(starts, windows), window)],
                      axis=1)
        label = tf.gather_nd(outputs["predictions"], at)
        probability = tf.gather(tf.nn.softmax(tf.gather_nd(outputs["logits"], at)), label,
                                batch_dims=1)
        num_words = tf.shape(counts)
        labels = tf.tensor_scatter_nd_update(tf.fill(num_words, outside), scored[:, None],
                                             label)
        probabilities = tf.tensor_scatter_nd_update(tf.zeros(num_words), scored[:, None],
                                                    probability)
        exits = (outputs["exit_layer"], windows[:, 0]) if self.exits else None
        return labels, probabilities, exits

    def chunks(self, words, labels, probabilities):
        """The entities in labelled words (words: RaggedTensor [B, (W)]; labels int32 [N],
        probabilities float32 [N] per flat word), in order: (row int64 [E], first and last
        word int64 [E] (flat indices, last inclusive), score float32 [E] (the mean of the
        words' probabilities), entity_type tf.string [E])."""
        word_row = words.value_rowids()
        flat = tf.range(tf.shape(labels)[0], dtype=tf.int64)
        first_in_row = tf.equal(flat, tf.gather(words.row_starts(), word_row))
        first, entity_id = chunk_words(tf.gather(self._prefixes, labels),
                                       tf.gather(self._type_ids, labels), first_in_row)
        count = tf.shape(first)[0]
        member = tf.where(entity_id >= 0)[:, 0]
        member_entity = tf.gather(entity_id, member)
        last = tf.math.unsorted_segment_max(member, member_entity, count)
        score = tf.math.unsorted_segment_mean(tf.gather(probabilities, member), member_entity,
                                              count)
        kind = tf.gather(self._types, tf.gather(self._type_ids, tf.gather(labels, first)))
        first = tf.cast(first, tf.int64)
        return tf.gather(word_row, first), first, last, score, kind

    def entities(self, texts, words, begin, end, labels, probabilities):
        """The entities of `word_labels`' output as the dense `serving_default` outputs."""
        row, first, last, score, kind = self.chunks(words, labels, probabilities)
        byte_begin = tf.gather(begin.flat_values, first)
        entity_text = substrings(texts, row, byte_begin,
                                 tf.gather(end.flat_values, last) - byte_begin)
        start = char_positions(texts, row, byte_begin)
        stop = start + tf.strings.length(entity_text, unit="UTF8_CHAR")
        batch = tf.shape(texts, out_type=tf.int64)[0]
        return {"entity_type": dense_rows(kind, row, batch, ""),
                "start": dense_rows(start, row, batch, PAD_OFFSET),
                "end": dense_rows(stop, row, batch, PAD_OFFSET),
                "entity_text": dense_rows(entity_text, row, batch, ""),
                "score": dense_rows(score, row, batch, PAD_SCORE),
                "num_entities": count_rows(row, batch)}

    def _serve_text(self, text):
        words, begin, end, labels, probabilities, exits = self.word_labels(text)
        outputs = self.entities(text, words, begin, end, labels, probabilities)
        return dict(outputs, **self.exit_outputs(exits, tf.shape(text)[0]))

    def exit_outputs(self, window_exits, batch) -> Dict[str, tf.Tensor]:
        """{"exit_layer": int32 [B], each row's deepest window's} under early exit, else {}
        (window_exits: (exit layer int32 [W], row int32 [W]))."""
        if not self.exits:
            return {}
        layers, row = window_exits
        return {"exit_layer": tf.math.unsorted_segment_max(layers, row, batch)}

    # -- pre-split words --

    def _serve_words(self, words):
        """`serve_words`: words tf.string [B, W], each row a sentence's words padded with ""
        (a row's words end at its last non-empty one) -> the entities as word indices and
        each word's label (see the module docstring)."""
        width = tf.shape(words)[1]
        position = tf.range(width, dtype=tf.int64)[None, :]
        count = tf.reduce_max(tf.where(tf.not_equal(words, ""), position + 1, 0), axis=1)
        ragged = tf.RaggedTensor.from_tensor(words, lengths=tf.maximum(count, 0))
        labels, probabilities, exits = self.label_words(ragged)
        row, first, last, score, kind = self.chunks(ragged, labels, probabilities)
        row_start = tf.gather(ragged.row_starts(), row)
        batch = tf.shape(words, out_type=tf.int64)[0]
        tags = ragged.with_flat_values(tf.gather(self._label_names, labels)).to_tensor("")
        return {"entity_type": dense_rows(kind, row, batch, ""),
                "start_word": dense_rows(tf.cast(first - row_start, tf.int32), row, batch,
                                         PAD_OFFSET),
                "end_word": dense_rows(tf.cast(last + 1 - row_start, tf.int32), row, batch,
                                       PAD_OFFSET),
                "score": dense_rows(score, row, batch, PAD_SCORE),
                "num_entities": count_rows(row, batch),
                "tags": tf.pad(tags, [[0, 0], [0, width - tf.shape(tags)[1]]],
                               constant_values=""),
                **self.exit_outputs(exits, tf.shape(words)[0])}


def substrings(texts, row, byte_begin, byte_length) -> tf.Tensor:
    """tf.string [E]: bytes [begin, begin + length) of texts[row] for each of E spans, rows
    non-decreasing. Each text is read in place (gathering texts[row] per span would copy a
    long text once per entity: quadratic)."""
    batch = tf.shape(texts, out_type=tf.int64)[0]
    counts = tf.math.bincount(tf.cast(row, tf.int32), minlength=tf.cast(batch, tf.int32),
                              maxlength=tf.cast(batch, tf.int32), dtype=tf.int64)
    spans = tf.strings.substr(texts[:, None], dense_rows(byte_begin, row, batch, 0),
                              dense_rows(byte_length, row, batch, 0))        # [B, most]
    return tf.RaggedTensor.from_tensor(spans, lengths=counts).flat_values


def char_positions(texts, row, byte_offset) -> tf.Tensor:
    """int32 [E]: the character index in texts[row] of each byte offset [E] (a character
    boundary). By a binary search over every text's character offsets laid end to end:
    linear in the texts' length (measuring each entity's prefix would be quadratic)."""
    offsets = tf.strings.unicode_decode_with_offsets(texts, "UTF-8")[1]       # [B, (C)]
    shift = tf.cumsum(tf.cast(tf.strings.length(texts), tf.int64), exclusive=True)
    laid = offsets.flat_values + tf.gather(shift, offsets.value_rowids())
    found = tf.searchsorted(laid, tf.gather(shift, row) + tf.cast(byte_offset, tf.int64),
                            side="left", out_type=tf.int64)
    return tf.cast(found - tf.gather(offsets.row_starts(), row), tf.int32)


def dense_rows(values, row, batch, padding) -> tf.Tensor:
    """Values [E] of rows `row` int64 [E] (non-decreasing) as a dense [batch, K] tensor,
    each row's values first, in order, then `padding` (K = the most values of a row)."""
    return tf.RaggedTensor.from_value_rowids(values, row, nrows=batch,
                                             validate=False).to_tensor(padding)


def count_rows(row, batch) -> tf.Tensor:
    """int32 [batch]: how many of `row` int64 [E] are each row."""
    batch = tf.cast(batch, tf.int32)
    return tf.math.bincount(tf.cast(row, tf.int32), minlength=batch, maxlength=batch)


def export_saved_model(model, export_dir: str, labels: Sequence[str], scheme: str, *,
                       spm_model_file: Optional[str] = None, vocab_file: Optional[str] = None,
                       do_lower_case: bool = True, max_seq_length: int = 128,
                       doc_stride: Optional[int] = None, layer_norm: str = "auto",
                       word_split: str = "basic") -> str:
    """Writes `model` (an `AlbertTokenClassifier` with its final weights) as a SavedModel
    with `serving_default` (raw text -> entities), `serve_words` (pre-split words ->
    entities, tags) and `serve_tokens`, atomically; returns
    export_dir. The vocabulary: `spm_model_file` (SentencePiece, wins when both are given)
    or `vocab_file` (WordPiece). `labels`: the label list (index = label id); `scheme`: the
    model's tag scheme; `doc_stride`: run_ner.py's (default min(64, max_seq_length - 2));
    `layer_norm` as in `export.call_for_export`; `word_split`: how raw text becomes words
    (`WORD_SPLITS`: "characters" for CLUENER and MSRA models)."""
    from albert_tf.tokenization import in_graph_tokenizer

    if not spm_model_file and not vocab_file:
        raise ValueError("export_saved_model needs spm_model_file or vocab_file")
    tokenizer = in_graph_tokenizer(vocab_file=vocab_file, spm_model_file=spm_model_file,
                                   do_lower_case=do_lower_case)
    module = TaggingServingModule(model, tokenizer, labels, scheme, max_seq_length,
                                  doc_stride, layer_norm=layer_norm, word_split=word_split)
    return export.save_serving_model(export_dir, module, module.signatures())


# --- ONNX ------------------------------------------------------------------------------------


def decoding_metadata(model) -> Dict[str, object]:
    """How `model` (an `AlbertTokenClassifier`) turns logits into tags, as JSON values for
    the ONNX metadata (`decode_onnx_logits` reads them):

      decoding           "argmax" (softmax head without constraints) or "viterbi"
      emissions          "logits" (CRF) or "log_softmax" (softmax head, constrained)
      transitions        [K][K] float scores of label i followed by label j (the CRF's; zeros
                         for the softmax head); start_transitions, end_transitions [K]
      allowed            [K][K] bool, allowed_start, allowed_end [K]: the scheme's hard
                         constraints, or None (unconstrained)
    """
    use_crf = bool(model.use_crf)
    if not use_crf and model.allowed is None:
        return {"decoding": "argmax"}
    size = model.num_labels
    if use_crf:
        scores = [np.asarray(w.numpy(), np.float32).tolist() for w in
                  (model.crf.transitions, model.crf.start_transitions, model.crf.end_transitions)]
    else:
        scores = [[[0.0] * size for _ in range(size)], [0.0] * size, [0.0] * size]
    allowed = model.allowed or (None, None, None)
    return {"decoding": "viterbi", "emissions": "logits" if use_crf else "log_softmax",
            "transitions": scores[0], "start_transitions": scores[1],
            "end_transitions": scores[2], "allowed": allowed[0], "allowed_start": allowed[1],
            "allowed_end": allowed[2]}


def portable_model(model, labels: Sequence[str], scheme: str, *, max_seq_length: int,
                   do_lower_case: bool, doc_stride: Optional[int] = None):
    """The tagger's ONNX / LiteRT function (an `export.portable.PortableModel`): int32
    [B, S] `input_ids`, `input_mask`, `segment_ids`, `word_mask` (1 at each word's first
    sub-token) -> `logits` float32 [B, S, K] and `predictions` int32 [B, S] (the model's
    decoded label id at word starts, -1 elsewhere, as `serve_tokens`). The metadata: task
    "tagging", labels, tag_scheme, max_seq_length, doc_stride, do_lower_case, use_crf and
    `decoding_metadata`. An int8 file is checked word by word."""
    from albert_tf.export import portable

    labels = list(labels)
    if doc_stride is None:
        doc_stride = min(DEFAULT_DOC_STRIDE, max_seq_length - 2)
    scheme = check_settings(labels, scheme, max_seq_length, doc_stride, model.num_labels)
    metadata = {"task": "tagging", "labels": labels, "tag_scheme": scheme,
                "max_seq_length": max_seq_length, "doc_stride": doc_stride,
                "do_lower_case": do_lower_case, "use_crf": bool(model.use_crf)}
    metadata.update(decoding_metadata(model))
    # The model reads `word_mask` (it decodes the words of each row as one sequence).
    metadata.update(portable.light_inference_metadata(model))
    exits = ["exit_layer"] if getattr(model, "early_exit", None) is not None else []
    fn = export.model_outputs(model, ["logits", "predictions"] + exits, layer_norm="plain")
    return portable.PortableModel(fn, token_signature(), metadata)


def _disallowed_score(emissions, transitions, start, end) -> np.float32:
    """`crf._disallowed_score` in numpy float32: -(1 + 2 * bound), bound = L * (spread of
    emissions + spread of transitions) + spread of start + spread of end."""
    def spread(x):
        x = np.concatenate([np.ravel(x), np.zeros(1, np.float32)])
        return np.float32(x.max() - x.min())

    bound = (np.float32(emissions.shape[1]) * (spread(emissions) + spread(transitions))
             + spread(start) + spread(end))
    return np.float32(-(np.float32(1.0) + np.float32(2.0) * bound))


def viterbi(emissions, lengths, transitions, start, end, allowed=None) -> np.ndarray:
    """`crf.crf_decode`'s tags in numpy (float32 throughout, the same operations in the same
    order, ties to the first label): emissions [B, L, K], lengths [B]; positions >= length
    hold 0. `allowed`: (allowed [K, K], allowed_start [K], allowed_end [K]) or None."""
    emissions = np.asarray(emissions, np.float32)
    out_length = emissions.shape[1]
    if out_length == 0:
        emissions = np.zeros((emissions.shape[0], 1, emissions.shape[2]), np.float32)
    batch, length, size = emissions.shape
    valid = np.arange(length)[None, :] < np.asarray(lengths)[:, None]
    emissions = np.where(valid[:, :, None], emissions, np.float32(0))
    transitions, start, end = (np.asarray(x, np.float32) for x in (transitions, start, end))
    if allowed is not None:
        penalty = _disallowed_score(emissions, transitions, start, end)
        masks = [np.asarray(m, bool) for m in allowed]
        transitions, start, end = (np.where(m, x, x + penalty)
                                   for m, x in zip(masks, (transitions, start, end)))
    best = np.zeros((batch, size), np.float32)
    pointers = np.zeros((length, batch, size), np.int64)
    for t in range(length):
        candidates = best[:, :, None] + transitions
        new_best = start + emissions[:, t] if t == 0 else \
            candidates.max(axis=1) + emissions[:, t]
        best = np.where(valid[:, t, None], new_best, best)
        pointers[t] = np.where(valid[:, t, None], candidates.argmax(axis=1), np.arange(size))
    tags = np.zeros((batch, length), np.int64)
    tag = (best + end).argmax(axis=1)
    tags[:, -1] = tag
    rows = np.arange(batch)
    for t in range(length - 1, 0, -1):
        tag = pointers[t][rows, tag]
        tags[:, t - 1] = tag
    return np.where(valid, tags, 0)[:, :out_length].astype(np.int32)


def _log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def decode_onnx_logits(logits, word_mask, metadata: Mapping[str, object]) -> np.ndarray:
    """The model's `predictions` from model.onnx's `logits`: int32 [B, S], the label id at
    each word start (`word_mask` != 0), -1 elsewhere.

    logits float [B, S, K]; word_mask int [B, S]; metadata: `onnx.read_metadata(path)` (or
    `decoding_metadata(model)`). As the model: the words of a row are decoded as one
    sequence (the positions with word_mask, in order), by argmax, or by Viterbi over the
    CRF's emissions (the logits) or the softmax head's log-probabilities, under the
    scheme's constraints (`viterbi`). The tags equal the SavedModel's unless two tag
    sequences score within float32 rounding of each other (ONNX Runtime's logits differ
    from TensorFlow's in the last bits, and the log-softmax here is numpy's).
    """
    logits = np.asarray(logits, np.float32)
    mask = np.asarray(word_mask) != 0
    if metadata.get("decoding", "argmax") == "argmax":
        return np.where(mask, logits.argmax(axis=-1), -1).astype(np.int32)
    order = np.argsort(~mask, axis=1, kind="stable")  # each row's words first, in order
    emissions = np.take_along_axis(logits, order[:, :, None], axis=1)
    if metadata["emissions"] == "log_softmax":
        emissions = _log_softmax(emissions)
    allowed = None if metadata.get("allowed") is None else (
        metadata["allowed"], metadata["allowed_start"], metadata["allowed_end"])
    tags = viterbi(emissions, mask.sum(axis=1), metadata["transitions"],
                   metadata["start_transitions"], metadata["end_transitions"], allowed)
    at_positions = np.empty_like(tags)
    np.put_along_axis(at_positions, order, tags, axis=1)
    return np.where(mask, at_positions, -1).astype(np.int32)
