"""The pretraining-data pipeline as pure, deterministic steps shared by the local and Beam runners.

Flow (every step is a function of its inputs and the seed only):

  documents (text_input) --group--> raw blocks --tokenize--> TokenizedBlock
      --split--> Tasks (block, dupe pass, document range) --run_task--> records
      --route--> buckets (output file, sub-bucket) --shuffle_bucket--> files

Determinism contract:
  * Document d (its ordinal in the input stream) in duplicate pass p uses its
    own `random.Random(derive_seed(random_seed, "pairs+masks", d, p))` for
    every pairing and masking draw, and `derive_seed(random_seed, "route", d, p)`
    to route each instance to a bucket. No draw depends on which process runs
    the task or on how tasks are grouped, so the records are identical for
    any `num_workers` and for the Beam runner.
  * Random-document B is drawn from the document's *block*: consecutive
    documents grouped until `block_documents` documents or `block_chars`
    characters (whichever first). Blocks depend only on the input, so the pool
    is the same everywhere; memory is bounded by two blocks.
  * Shuffle: each instance goes to a uniformly random bucket (file f, sub-bucket
    s) of `num_files * shuffle_buckets_per_file`; a bucket holds its records in
    canonical order (block, pass, document, instance), is permuted with
    `derive_seed(random_seed, "shuffle", bucket)`, and file f is the
    concatenation of its sub-buckets. This is a uniform random permutation of
    each file's instances, with memory bounded by one bucket (about
    output size / buckets), instead of the original's in-RAM global shuffle
    and round-robin.
"""
from __future__ import annotations

import dataclasses
import random
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from albert_tf.errors import UserValueError
from data_prep import tokenization, zh_words
from data_prep.example_codec import ExampleEncoder, FLOAT, INT64
from albert_tf.instances.masking import MaskingOptions, MaskStats, mask_pair
from albert_tf.instances.pairing import DocView, Pair, create_pairs
from albert_tf.instances.seeds import derive_seed
from data_prep.text_input import Document, ReadCounts
from data_prep.tfrecord import frame_records

# ---------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """How instances are built (the original's flags of the same names)."""
    max_seq_length: int = 512
    short_seq_prob: float = 0.1
    random_next_sentence: bool = False
    dupe_factor: int = 40
    random_seed: int = 12345
    masking: MaskingOptions = MaskingOptions()

    def validate(self) -> None:
        """Raises ValueError with the flag name for impossible settings."""
        if self.max_seq_length < 5:
            raise UserValueError(f"--max_seq_length={self.max_seq_length} is too small: "
                                 "[CLS] A [SEP] B [SEP] needs at least 5 positions")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise UserValueError(f"--short_seq_prob={self.short_seq_prob} must be in [0, 1]")
        if self.dupe_factor < 1:
            raise UserValueError(f"--dupe_factor={self.dupe_factor} must be >= 1")
        m = self.masking
        if not 0.0 <= m.masked_lm_prob <= 1.0:
            raise UserValueError(f"--masked_lm_prob={m.masked_lm_prob} must be in [0, 1]")
        if m.max_predictions_per_seq < 1:
            raise UserValueError(f"--max_predictions_per_seq={m.max_predictions_per_seq} must be "
                                 ">= 1")
        if m.ngram < 1:
            raise UserValueError(f"--ngram={m.ngram} must be >= 1")


@dataclasses.dataclass(frozen=True)
class LayoutOptions:
    """How work and output are partitioned (never changes an instance's content)."""
    num_files: int = 1
    shuffle_buckets_per_file: int = 4
    block_documents: int = 10000
    block_chars: int = 64 << 20
    task_tokens: int = 200_000

    @property
    def num_buckets(self) -> int:
        return self.num_files * self.shuffle_buckets_per_file

    def validate(self) -> None:
        for name in ("num_files", "shuffle_buckets_per_file", "block_documents",
                     "block_chars", "task_tokens"):
            if getattr(self, name) < 1:
                raise UserValueError(f"{name} must be >= 1, got {getattr(self, name)}")


def feature_schema(max_seq_length: int, max_predictions_per_seq: int) -> Dict[str, Tuple[str, int]]:
    """The original's features: name -> (dtype, length)."""
    s, p = max_seq_length, max_predictions_per_seq
    return {
        "input_ids": (INT64, s),
        "input_mask": (INT64, s),
        "segment_ids": (INT64, s),
        "token_boundary": (INT64, s),
        "masked_lm_positions": (INT64, p),
        "masked_lm_ids": (INT64, p),
        "masked_lm_weights": (FLOAT, p),
        "next_sentence_labels": (INT64, 1),
    }


# ---------------------------------------------------------------------------
# Blocks
# ---------------------------------------------------------------------------


def iter_raw_blocks(documents: Iterable[Document], block_documents: int,
                    block_chars: int) -> Iterator[Tuple[int, List[Document]]]:
    """Groups consecutive documents into (block_index, documents) blocks."""
    block: List[Document] = []
    chars = 0
    index = 0
    for document in documents:
        block.append(document)
        chars += sum(len(s) for s in document.sentences)
        if len(block) >= block_documents or chars >= block_chars:
            yield index, block
            index += 1
            block, chars = [], 0
    if block:
        yield index, block


@dataclasses.dataclass
class TokenizedBlock:
    """A block of tokenized documents, flat arrays.

    doc_indices int64 [D] global document ordinals; doc_bounds int64 [D+1]
    sentence ranges; sent_bounds int64 [S+1] token ranges; ids int32 [T];
    continues bool [T] or None: tokens that continue the previous word
    whatever their piece says (Chinese whole-word masking).
    Sentences that tokenize to nothing and documents left empty are dropped.
    """
    block_index: int
    doc_indices: np.ndarray
    doc_bounds: np.ndarray
    sent_bounds: np.ndarray
    ids: np.ndarray
    num_sentences_in: int = 0
    continues: Optional[np.ndarray] = None

    @property
    def num_docs(self) -> int:
        return len(self.doc_indices)

    def doc_tokens(self, doc_pos: int) -> int:
        s0, s1 = self.doc_bounds[doc_pos], self.doc_bounds[doc_pos + 1]
        return int(self.sent_bounds[s1] - self.sent_bounds[s0])

    def save(self, path: str) -> None:
        extra = {} if self.continues is None else {"continues": self.continues}
        with open(path, "wb") as handle:
            np.savez(handle, block_index=self.block_index, doc_indices=self.doc_indices,
                     doc_bounds=self.doc_bounds, sent_bounds=self.sent_bounds, ids=self.ids,
                     num_sentences_in=self.num_sentences_in, **extra)

    @classmethod
    def load(cls, path: str) -> "TokenizedBlock":
        with np.load(path) as data:
            return cls(int(data["block_index"]), data["doc_indices"], data["doc_bounds"],
                       data["sent_bounds"], data["ids"], int(data["num_sentences_in"]),
                       data["continues"] if "continues" in data.files else None)


def tokenize_block(block_index: int, documents: Sequence[Document], tokenizer,
                   num_threads: int = 1,
                   segmenter: Optional[Callable[[str], List[str]]] = None) -> TokenizedBlock:
    """Tokenizes every sentence of the block (the tokenizer's batch `encode_ids`).

    With `segmenter` (Chinese whole-word masking, WordPiece only) also records
    which tokens continue a segmented word (`continues`).
    """
    sentences = [s for d in documents for s in d.sentences]
    lengths, ids, continues = _encode_in_chunks(sentences, tokenizer, num_threads, segmenter)
    doc_of_sentence = np.repeat(np.arange(len(documents)),
                                [len(d.sentences) for d in documents])
    keep = lengths > 0
    kept_docs, kept_counts = np.unique(doc_of_sentence[keep], return_counts=True)
    sent_bounds = np.concatenate([[0], np.cumsum(lengths[keep])]).astype(np.int64)
    doc_bounds = np.concatenate([[0], np.cumsum(kept_counts)]).astype(np.int64)
    doc_indices = np.array([documents[k].index for k in kept_docs], dtype=np.int64)
    return TokenizedBlock(block_index, doc_indices, doc_bounds, sent_bounds, ids,
                          num_sentences_in=len(sentences), continues=continues)


# Sentences encoded per tokenizer call: the token lists of a call are Python ints
# (about 36 bytes a token), so a whole 64 Mi-character block at once would need
# ~600 MB; chunks keep that to a few tens of MB. The ids do not depend on it.
_ENCODE_CHUNK = 1 << 15


def _encode_in_chunks(sentences: Sequence[str], tokenizer, num_threads: int,
                      segmenter) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
    """(tokens per sentence int64 [S], all ids int32 [T], continues bool [T] or None)."""
    lengths, ids, continues = [np.zeros(0, np.int64)], [np.zeros(0, np.int32)], []
    for lo in range(0, len(sentences), _ENCODE_CHUNK):
        part = sentences[lo:lo + _ENCODE_CHUNK]
        encoded = tokenizer.encode_ids(part, num_threads=num_threads)
        lengths.append(np.fromiter((len(e) for e in encoded), dtype=np.int64,
                                   count=len(encoded)))
        ids.append(np.fromiter((t for e in encoded for t in e), dtype=np.int32,
                               count=int(lengths[-1].sum())))
        if segmenter is not None:
            to_token = tokenizer.convert_ids_to_tokens
            continues.append(np.fromiter(
                (flag for text, e in zip(part, encoded) if e
                 for flag in zh_words.continuation_flags(text, to_token(e), segmenter)),
                dtype=bool, count=len(ids[-1])))
    flags = None if segmenter is None else np.concatenate([np.zeros(0, bool)] + continues)
    return np.concatenate(lengths), np.concatenate(ids), flags


def no_token_counts(block: TokenizedBlock, num_documents: int) -> ReadCounts:
    """ReadCounts of the sentences and documents `tokenize_block` dropped from a block of
    `num_documents` documents because they have no token."""
    counts = ReadCounts()
    counts.no_token_sentences = block.num_sentences_in - (len(block.sent_bounds) - 1)
    counts.no_token_documents = num_documents - block.num_docs
    return counts


# ---------------------------------------------------------------------------
# Tasks
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Task:
    """Work unit: duplicate pass `dupe` over documents [doc_lo, doc_hi) of a block."""
    block_index: int
    dupe: int
    doc_lo: int
    doc_hi: int


def make_tasks(block: TokenizedBlock, instance_options: InstanceOptions,
               task_tokens: int) -> List[Task]:
    """Tasks of one block in canonical order (pass-major, then documents)."""
    ranges = []
    lo, tokens = 0, 0
    for pos in range(block.num_docs):
        tokens += block.doc_tokens(pos)
        if tokens >= task_tokens:
            ranges.append((lo, pos + 1))
            lo, tokens = pos + 1, 0
    if lo < block.num_docs:
        ranges.append((lo, block.num_docs))
    return [Task(block.block_index, dupe, lo, hi)
            for dupe in range(instance_options.dupe_factor) for lo, hi in ranges]


class Stats:
    """Additive counters of a run (JSON friendly through `to_dict`)."""

    def __init__(self, ngram: int):
        self.ngram = ngram
        self.documents = 0
        self.sentences_in = 0
        self.input_tokens = 0
        self.instances = 0
        self.tokens = 0          # real (non-pad) tokens written
        self.labels = [0, 0]     # next_sentence_labels 0 / 1
        self.random_doc_b = 0    # pairs whose B came from another document
        self.mask = MaskStats(ngram)

    def merge(self, other: "Stats") -> None:
        for name in ("documents", "sentences_in", "input_tokens", "instances", "tokens",
                     "random_doc_b"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.labels = [a + b for a, b in zip(self.labels, other.labels)]
        for name in ("masked", "to_predict", "replaced_mask", "kept", "replaced_random"):
            setattr(self.mask, name, getattr(self.mask, name) + getattr(other.mask, name))
        mine, theirs = self.mask, other.mask
        mine.ngram_drawn = [a + b for a, b in zip(mine.ngram_drawn, theirs.ngram_drawn)]
        mine.ngram_used = [a + b for a, b in zip(mine.ngram_used, theirs.ngram_used)]

    def to_dict(self) -> dict:
        m = self.mask

        def frac(a, b):
            return a / b if b else 0.0

        used_total = sum(m.ngram_used)
        drawn_total = sum(m.ngram_drawn)
        return {
            "documents": self.documents,
            "input_sentences": self.sentences_in,
            "input_tokens": self.input_tokens,
            "instances": self.instances,
            "tokens": self.tokens,
            "masked_tokens": m.masked,
            "masked_fraction": frac(m.masked, self.tokens),
            "masked_per_instance": frac(m.masked, self.instances),
            "masked_vs_budget": frac(m.masked, m.to_predict),
            "replacement": {"mask": frac(m.replaced_mask, m.masked),
                            "keep": frac(m.kept, m.masked),
                            "random": frac(m.replaced_random, m.masked)},
            "ngram_histogram": {str(n): frac(m.ngram_used[n], used_total)
                                for n in range(1, self.ngram + 1)},
            "ngram_spans": {str(n): m.ngram_used[n] for n in range(1, self.ngram + 1)},
            "ngram_drawn_histogram": {str(n): frac(m.ngram_drawn[n], drawn_total)
                                      for n in range(1, self.ngram + 1)},
            "sop_labels": {"0": self.labels[0], "1": self.labels[1],
                           "fraction_1": frac(self.labels[1], self.instances)},
            "random_document_b": self.random_doc_b,
        }


class WorkerContext:
    """Per-process state: tokenizer constants, word-start table, example encoder.

    The tokenizer is SentencePiece when `spm_model_file` is given (it wins over
    `vocab_file`, as in the original), else WordPiece from `vocab_file`.
    `zh_whole_word_mask` (WordPiece only) loads the Chinese segmenter
    (`segmenter`, used by `tokenize_block`).
    """

    def __init__(self, spm_model_file: Optional[str], do_lower_case: bool,
                 instance_options: InstanceOptions, layout: LayoutOptions,
                 vocab_file: Optional[str] = None, zh_whole_word_mask: bool = False):
        if spm_model_file:
            tokenizer = tokenization.SentencePieceTokenizer(spm_model_file, do_lower_case)
            missing = [name for name in ("cls_id", "sep_id", "mask_id")
                       if getattr(tokenizer, name) < 0]
            if missing:
                raise UserValueError(f"SentencePiece model {spm_model_file} lacks "
                                     f"{', '.join(n[:-3].upper() for n in missing)} pieces; "
                                     "train it with data_prep/train_sentencepiece.py")
            if zh_whole_word_mask:
                raise UserValueError("--zh_whole_word_mask needs the WordPiece path "
                                     "(--vocab_file without --spm_model_file)")
        else:
            # Raises TokenizerError (a ValueError) naming --vocab_file for a missing
            # file or a vocabulary without [CLS]/[SEP]/[MASK]/[UNK].
            tokenizer = tokenization.load_tokenizer(vocab_file=vocab_file,
                                                    do_lower_case=do_lower_case)
        if zh_whole_word_mask and not instance_options.masking.do_whole_word_mask:
            raise UserValueError("--zh_whole_word_mask needs --do_whole_word_mask")
        self.tokenizer = tokenizer
        self.segmenter = zh_words.load_segmenter() if zh_whole_word_mask else None
        self.start_table = np.array(tokenizer.is_start_piece_table(), dtype=bool)
        # One Python int per vocabulary id, shared by every DocView token list:
        # `ndarray.tolist()` would make a new 28-byte object per token.
        self.id_objects = np.array(list(range(len(self.start_table))), dtype=object)
        self.instance_options = instance_options
        self.layout = layout
        masking = instance_options.masking
        self.cumulative = masking.ngram_cumulative()
        self.encoder = ExampleEncoder(feature_schema(instance_options.max_seq_length,
                                                     masking.max_predictions_per_seq))
        self._block: Optional[TokenizedBlock] = None

    def block(self, ref) -> TokenizedBlock:
        """`ref` is a TokenizedBlock or the path of a saved one (cached per process)."""
        if isinstance(ref, TokenizedBlock):
            return ref
        if self._block is None or getattr(self, "_block_path", None) != ref:
            self._block = TokenizedBlock.load(ref)
            self._block_path = ref
        return self._block


@dataclasses.dataclass
class TaskResult:
    """Framed TFRecord records with their bucket and canonical sort key, and counters."""
    task: Task
    buckets: List[int]
    keys: List[Tuple[int, int, int, int]]
    records: List[bytes]
    stats: Stats


def run_task(context: WorkerContext, block_ref, task: Task) -> TaskResult:
    """Builds, masks, encodes and frames all instances of one task."""
    block = context.block(block_ref)
    opts = context.instance_options
    stats = Stats(opts.masking.ngram)
    get_doc = _doc_views(block, context.start_table, context.id_objects)
    instances = _Instances()
    for doc_pos in range(task.doc_lo, task.doc_hi):
        _add_document(context, block, task, doc_pos, get_doc, instances, stats)
    count = len(instances.lengths)
    stats.instances = count
    stats.tokens = len(instances.ids)
    stats.labels = [count - sum(instances.labels), sum(instances.labels)]
    if count == 0:
        return TaskResult(task, [], [], [], stats)
    records: List[bytes] = []
    for features in instances.features_in_chunks(opts.max_seq_length,
                                                 opts.masking.max_predictions_per_seq,
                                                 _ENCODE_INSTANCES):
        records.extend(frame_records(context.encoder.encode(features)))
    return TaskResult(task, instances.buckets, instances.keys, records, stats)


# Instances per feature-array batch: the int64 [count, max_seq_length] arrays of a
# task that is one long document (~130 k instances of 128 tokens) would take ~0.5 GB.
_ENCODE_INSTANCES = 4096


def _doc_views(block: TokenizedBlock, start_table: np.ndarray,
               id_objects: Optional[np.ndarray] = None) -> Callable[[int], DocView]:
    """`get_doc(pos)`: block document `pos` as a DocView, built once per position.

    Its flags are the word starts of `start_table` (bool [vocab_size]), less
    the tokens that `block.continues` marks; its sentence bounds count from its
    first token.
    """
    views: Dict[int, DocView] = {}

    def get_doc(pos: int) -> DocView:
        view = views.get(pos)
        if view is None:
            s0, s1 = int(block.doc_bounds[pos]), int(block.doc_bounds[pos + 1])
            t0 = int(block.sent_bounds[s0])
            t1 = int(block.sent_bounds[s1])
            ids_np = block.ids[t0:t1]
            starts = start_table[ids_np]
            if block.continues is not None:
                starts = starts & ~block.continues[t0:t1]
            ids = id_objects[ids_np].tolist() if id_objects is not None else ids_np.tolist()
            view = DocView(ids, starts.tolist(),
                           (block.sent_bounds[s0:s1 + 1] - t0).tolist())
            views[pos] = view
        return view

    return get_doc


@dataclasses.dataclass
class _Instances:
    """A task's instances in canonical order, as flat Python lists.

    Concatenated over instances: `ids` and `boundary` (per token), `positions`
    and `masked_ids` (per prediction). Per instance: `lengths` (tokens),
    `b_starts` (the first position of B: len(A) + 2), `num_predictions`,
    `labels` (next_sentence_labels), `buckets` and `keys` (TaskResult's).
    """
    ids: List[int] = dataclasses.field(default_factory=list)
    boundary: List[int] = dataclasses.field(default_factory=list)
    positions: List[int] = dataclasses.field(default_factory=list)
    masked_ids: List[int] = dataclasses.field(default_factory=list)
    lengths: List[int] = dataclasses.field(default_factory=list)
    b_starts: List[int] = dataclasses.field(default_factory=list)
    num_predictions: List[int] = dataclasses.field(default_factory=list)
    labels: List[int] = dataclasses.field(default_factory=list)
    buckets: List[int] = dataclasses.field(default_factory=list)
    keys: List[Tuple[int, int, int, int]] = dataclasses.field(default_factory=list)

    def add(self, pair: Pair, masked: Tuple[List[int], List[int], List[int], List[int]],
            bucket: int, key: Tuple[int, int, int, int]) -> None:
        """Appends one instance: `pair` and what `mask_pair` made of it."""
        ids, boundary, positions, masked_ids = masked
        self.ids.extend(ids)
        self.boundary.extend(boundary)
        self.positions.extend(positions)
        self.masked_ids.extend(masked_ids)
        self.lengths.append(len(ids))
        self.b_starts.append(len(pair.a_ids) + 2)
        self.num_predictions.append(len(positions))
        self.labels.append(int(pair.is_random_next))
        self.buckets.append(bucket)
        self.keys.append(key)

    def features_in_chunks(self, seq_len: int, num_pred: int,
                           chunk: int) -> Iterator[Dict[str, np.ndarray]]:
        """`features` of instances [0, chunk), [chunk, 2 * chunk), ... in turn."""
        tokens = np.concatenate([[0], np.cumsum(self.lengths, dtype=np.int64)])
        preds = np.concatenate([[0], np.cumsum(self.num_predictions, dtype=np.int64)])
        for lo in range(0, len(self.lengths), chunk):
            hi = min(lo + chunk, len(self.lengths))
            t0, t1, p0, p1 = int(tokens[lo]), int(tokens[hi]), int(preds[lo]), int(preds[hi])
            part = _Instances(ids=self.ids[t0:t1], boundary=self.boundary[t0:t1],
                              positions=self.positions[p0:p1],
                              masked_ids=self.masked_ids[p0:p1], lengths=self.lengths[lo:hi],
                              b_starts=self.b_starts[lo:hi],
                              num_predictions=self.num_predictions[lo:hi],
                              labels=self.labels[lo:hi])
            yield part.features(seq_len, num_pred)

    def features(self, seq_len: int, num_pred: int) -> Dict[str, np.ndarray]:
        """The instances as `feature_schema` arrays: [count, seq_len] and
        [count, num_pred], zero padded, and next_sentence_labels [count, 1]."""
        count = len(self.lengths)
        cols = np.arange(seq_len)[None, :]
        real = cols < np.array(self.lengths, dtype=np.int64)[:, None]
        input_ids = np.zeros((count, seq_len), dtype=np.int64)
        input_ids[real] = self.ids
        token_boundary = np.zeros((count, seq_len), dtype=np.int64)
        token_boundary[real] = self.boundary
        segment_ids = (real & (cols >= np.array(self.b_starts)[:, None])).astype(np.int64)
        counts_np = np.array(self.num_predictions, dtype=np.int64)
        pred_real = np.arange(num_pred)[None, :] < counts_np[:, None]
        positions = np.zeros((count, num_pred), dtype=np.int64)
        positions[pred_real] = self.positions
        masked_lm_ids = np.zeros((count, num_pred), dtype=np.int64)
        masked_lm_ids[pred_real] = self.masked_ids
        return {
            "input_ids": input_ids,
            "input_mask": real.astype(np.int64),
            "segment_ids": segment_ids,
            "token_boundary": token_boundary,
            "masked_lm_positions": positions,
            "masked_lm_ids": masked_lm_ids,
            "masked_lm_weights": pred_real.astype(np.float32),
            "next_sentence_labels": np.array(self.labels, dtype=np.int64)[:, None],
        }


def _add_document(context: WorkerContext, block: TokenizedBlock, task: Task, doc_pos: int,
                  get_doc: Callable[[int], DocView], instances: _Instances,
                  stats: Stats) -> None:
    """Appends the instances of block document `doc_pos` in the task's pass to `instances`.

    The document's own seeded generators make its pairs, masks and buckets
    independent of how documents are grouped into tasks and processes.
    """
    opts = context.instance_options
    tok = context.tokenizer
    doc_index = int(block.doc_indices[doc_pos])
    rng = random.Random(derive_seed(opts.random_seed, "pairs+masks", doc_index, task.dupe))
    route = random.Random(derive_seed(opts.random_seed, "route", doc_index, task.dupe))
    doc = get_doc(doc_pos)
    if task.dupe == 0:  # the input is counted once, not once per duplicate pass
        stats.documents += 1
        stats.input_tokens += len(doc.ids)
        stats.sentences_in += len(doc.bounds) - 1
    pairs = create_pairs(doc, doc_pos, block.num_docs, get_doc, opts.max_seq_length,
                         opts.short_seq_prob, opts.random_next_sentence, rng)
    for k, pair in enumerate(pairs):
        masked = mask_pair(
            pair.a_ids, pair.a_flags, pair.b_ids, pair.b_flags, tok.cls_id, tok.sep_id,
            tok.mask_id, tok.vocab_size, opts.masking, context.cumulative, rng, stats.mask)
        stats.random_doc_b += pair.b_from_random_document
        instances.add(pair, masked, route.randrange(context.layout.num_buckets),
                      (task.block_index, task.dupe, doc_index, k))


def shuffle_bucket(records: List[bytes], random_seed: int, bucket: int) -> List[bytes]:
    """A bucket's records (canonical order in) permuted by its own seeded generator."""
    if len(records) < 2:
        return list(records)
    generator = np.random.Generator(np.random.PCG64(derive_seed(random_seed, "shuffle", bucket)))
    return [records[i] for i in generator.permutation(len(records))]
