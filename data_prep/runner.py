"""Local runner: streams the corpus through `pipeline` with N worker processes.

Memory stays bounded: at most two tokenized blocks are alive, at most
`2 * num_workers` tasks are in flight, records are spilled to bucket files on
disk as they arrive (in canonical order), and the final pass holds one bucket
at a time. Outputs appear atomically (`albert_tf.fileio.atomic_open`); the
spill directory sits next to the first output and is removed at the end.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import logging
import multiprocessing
import os
import re
import shutil
import sys
import tempfile
import time
from typing import Callable, Deque, Dict, Iterable, Iterator, List, Optional, Sequence

from data_prep import fileio, pipeline
from data_prep.text_input import (Document, InputError, ReaderOptions, ReadCounts,
                                  iter_documents)
from data_prep.tfrecord import split_records

_LOG = logging.getLogger("data_prep")


def expand_output_spec(spec: str) -> List[str]:
    """`--output_file` -> output paths: `a,b` -> [a, b]; `path@N` -> N shard names
    `path-0000i-of-0000N`. InputError (a user error) for a bad spec."""
    outputs: List[str] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if "@" in item:
            base, _, count = item.rpartition("@")
            if not count.isdigit() or int(count) < 1:
                raise InputError(f"--output_file: bad shard spec {item!r}: expected path@N "
                                 "with N >= 1")
            n = int(count)
            outputs.extend(f"{base}-{i:05d}-of-{n:05d}" for i in range(n))
        else:
            outputs.append(item)
    if not outputs:
        raise InputError("--output_file is empty")
    if len(set(outputs)) != len(outputs):
        raise InputError("--output_file names a file twice")
    return outputs


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """Everything a run needs besides the file lists.

    The vocabulary: `spm_model_file` (SentencePiece; wins when both are given,
    as in the original) or `vocab_file` alone (WordPiece: lines are only
    stripped, the tokenizer normalises). `zh_whole_word_mask`: Chinese
    whole-word masking (WordPiece only, needs rjieba).
    """
    spm_model_file: Optional[str] = None
    reader: ReaderOptions = ReaderOptions()
    instances: pipeline.InstanceOptions = pipeline.InstanceOptions()
    layout: pipeline.LayoutOptions = pipeline.LayoutOptions()
    num_workers: int = 1
    progress_seconds: float = 30.0
    vocab_file: Optional[str] = None
    zh_whole_word_mask: bool = False

    @property
    def wordpiece(self) -> bool:
        return not self.spm_model_file

    def vocabulary_file(self) -> str:
        """The file that defines the vocabulary; ValueError naming both flags if neither is set."""
        path = self.spm_model_file or self.vocab_file
        if not path:
            raise ValueError("no vocabulary: pass --spm_model_file (SentencePiece) or "
                             "--vocab_file (WordPiece)")
        return path

    def effective_reader(self) -> ReaderOptions:
        """The reader options with the normalisation of the tokenizer's path."""
        return dataclasses.replace(self.reader, preprocess_text=not self.wordpiece)


def make_context(options: RunOptions, layout: pipeline.LayoutOptions,
                 localize: Callable[[str], str] = str) -> pipeline.WorkerContext:
    """The worker state of a run; `localize` maps the vocabulary path to a local file."""
    spm = localize(options.spm_model_file) if options.spm_model_file else None
    vocab = localize(options.vocab_file) if not spm and options.vocab_file else None
    return pipeline.WorkerContext(spm, options.reader.do_lower_case, options.instances, layout,
                                  vocab_file=vocab,
                                  zh_whole_word_mask=options.zh_whole_word_mask)


# Per-process worker state (set by the pool initializer).
_CONTEXT: Optional[pipeline.WorkerContext] = None


def _init_worker(options: RunOptions, layout: pipeline.LayoutOptions):
    global _CONTEXT
    _CONTEXT = make_context(options, layout)


def _run_in_worker(block_path: str, task: pipeline.Task) -> pipeline.TaskResult:
    result = pipeline.run_task(_CONTEXT, block_path, task)
    result.keys = []  # the local runner keeps canonical order by itself
    return result


def _process_context():
    """`fork` (fast start) unless TensorFlow is loaded here, whose threads make fork unsafe."""
    if "tensorflow" in sys.modules or "fork" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    return multiprocessing.get_context("fork")


class _SpillWriter:
    """Appends framed records to one file per bucket, buffering in memory."""

    # 8 MB: large enough appends for any disk, small next to a block's memory.
    def __init__(self, directory: str, num_buckets: int, flush_bytes: int = 8 << 20):
        self.directory = directory
        self.num_buckets = num_buckets
        self.flush_bytes = flush_bytes
        self._buffers: Dict[int, List[bytes]] = collections.defaultdict(list)
        self._buffered = 0

    def path(self, bucket: int) -> str:
        return os.path.join(self.directory, f"bucket-{bucket:05d}")

    def add(self, buckets: Sequence[int], records: Sequence[bytes]) -> None:
        for bucket, record in zip(buckets, records):
            self._buffers[bucket].append(record)
            self._buffered += len(record)
        if self._buffered >= self.flush_bytes:
            self.flush()

    def flush(self) -> None:
        for bucket, records in self._buffers.items():
            with open(self.path(bucket), "ab") as handle:
                handle.write(b"".join(records))
        self._buffers.clear()
        self._buffered = 0

    def read(self, bucket: int) -> bytes:
        path = self.path(bucket)
        if not os.path.exists(path):
            return b""
        with open(path, "rb") as handle:
            return handle.read()


class _Progress:
    def __init__(self, interval: float, log: Callable[[str], None]):
        self.interval = interval
        self.log = log
        self.start = time.monotonic()
        self.last = self.start

    def maybe_log(self, stats: pipeline.Stats, blocks_read: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < self.interval:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        self.log(f"progress: {blocks_read} blocks read, {stats.documents} documents, "
                 f"{stats.instances} instances, {stats.tokens} tokens, "
                 f"{stats.documents / elapsed:.1f} docs/s, {stats.instances / elapsed:.0f} "
                 f"instances/s, {stats.tokens / elapsed:,.0f} tokens/s")


def create_pretraining_data(input_files: Sequence[str], output_files: Sequence[str],
                            options: RunOptions, summary_file: Optional[str] = None,
                            log: Callable[[str], None] = _LOG.info) -> dict:
    """Runs the whole pipeline locally; returns the summary dict (also written as JSON).

    The summary goes to `summary_file` or `default_summary_path(output_files)`;
    an old-style `<output>.summary.json` beside a rewritten output is removed.
    Raises InputError for unreadable or empty input, an output named like a
    summary, or a default summary path that holds another run's summary, and
    ValueError for bad options; all before any work is done.
    """
    summary_file = resolve_summary_path(output_files, summary_file)
    layout = _checked_layout(options, len(output_files))
    start = time.monotonic()
    context = make_context(options, layout)
    stats = pipeline.Stats(options.instances.masking.ngram)
    counts = ReadCounts()
    per_file = _make_outputs(input_files, output_files, options, layout, context, stats, log,
                             counts)
    elapsed = time.monotonic() - start
    summary = stats.to_dict()
    summary.update({
        "input": counts.to_dict(),
        "seconds": round(elapsed, 3),
        "tokens_per_second": stats.tokens / elapsed if elapsed else 0.0,
        "num_workers": options.num_workers,
        "input_files": list(input_files),
        "output_files": [{"path": p, "instances": n} for p, n in zip(output_files, per_file)],
        "options": options_dict(options, layout),
    })
    _write_summary(summary, summary_file, output_files, log)
    log(f"wrote {stats.instances} instances ({stats.tokens} tokens) to {len(output_files)} "
        f"file(s) in {elapsed:.1f}s ({summary['tokens_per_second']:,.0f} tokens/s); "
        f"summary: {summary_file}; pretrain on them with "
        f"--input_file='{input_file_spec(output_files)}'")
    return summary


def _make_outputs(input_files: Sequence[str], output_files: Sequence[str], options: RunOptions,
                  layout: pipeline.LayoutOptions, context: pipeline.WorkerContext,
                  stats: pipeline.Stats, log: Callable[[str], None],
                  counts: ReadCounts) -> List[int]:
    """Runs every task, spilling the records to bucket files, then writes the outputs
    from the buckets; returns each output's instance count. Counters go to `stats`,
    where the input went to `counts` (logged once the input is read, even when it
    gave no instance).

    The spill directory sits beside the first output and is removed at the end.
    """
    first_dir = os.path.dirname(os.path.abspath(output_files[0]))
    os.makedirs(first_dir, exist_ok=True)
    spill_dir = tempfile.mkdtemp(prefix=".spill-", dir=first_dir)
    progress = _Progress(options.progress_seconds, log)
    try:
        spill = _SpillWriter(spill_dir, layout.num_buckets)
        sink = _ResultSink(spill, stats, progress)
        # Documents longer than a block are cut into block-sized pieces, so memory
        # stays bounded by the block size whatever the input (one huge raw file).
        documents = iter_documents(input_files, options.effective_reader(), counts=counts,
                                   split_chars=layout.block_chars)
        _run_tasks(_tokenized_blocks(documents, options, layout, context, sink, counts),
                   options, layout, context, sink, spill_dir)
        spill.flush()
        for line in counts.log_lines():
            log(line)
        if stats.instances == 0:
            raise InputError("no training instances were created: the input has no "
                             f"non-empty documents ({', '.join(input_files[:3])}"
                             f"{', ...' if len(input_files) > 3 else ''})")
        per_file = _write_outputs(output_files, spill, layout, options.instances.random_seed)
        progress.maybe_log(stats, sink.blocks_read, force=True)
    finally:
        shutil.rmtree(spill_dir, ignore_errors=True)
    return per_file


def _checked_layout(options: RunOptions, num_files: int) -> pipeline.LayoutOptions:
    """The run's layout (`options.layout` with `num_files` outputs), once the options are
    valid and the vocabulary file exists; ValueError or InputError naming the flag if not."""
    options.instances.validate()
    layout = dataclasses.replace(options.layout, num_files=num_files)
    layout.validate()
    if options.num_workers < 1:
        raise ValueError(f"--num_workers={options.num_workers} must be >= 1")
    vocabulary = options.vocabulary_file()
    if not os.path.isfile(vocabulary):
        kind, flag = (("WordPiece vocabulary", "--vocab_file") if options.wordpiece
                      else ("SentencePiece model", "--spm_model_file"))
        problem = ("is a directory; give the file itself" if os.path.isdir(vocabulary)
                   else "not found")
        raise InputError(f"{flag}={vocabulary}: {kind} {problem}")
    return layout


class _ResultSink:
    """Takes task results in canonical order: records to the spill files, counters to
    `stats`, and a progress line now and then (with `blocks_read`, kept by the reader)."""

    def __init__(self, spill: _SpillWriter, stats: pipeline.Stats, progress: _Progress):
        self.spill = spill
        self.stats = stats
        self.progress = progress
        self.blocks_read = 0

    def add(self, result: pipeline.TaskResult) -> None:
        self.spill.add(result.buckets, result.records)
        self.stats.merge(result.stats)
        self.progress.maybe_log(self.stats, self.blocks_read)


def _tokenized_blocks(documents: Iterable[Document], options: RunOptions,
                      layout: pipeline.LayoutOptions, context: pipeline.WorkerContext,
                      sink: _ResultSink, counts: ReadCounts) -> Iterator[pipeline.TokenizedBlock]:
    """The documents' blocks, tokenized one at a time (with `num_workers` threads), each
    counted in `sink.blocks_read` before its tasks run; sentences and documents left
    without a token are added to `counts`. (Reading and tokenizing happen in this
    process only, so these counts need no merging across workers.)"""
    for block_index, raw_block in pipeline.iter_raw_blocks(documents, layout.block_documents,
                                                           layout.block_chars):
        sink.blocks_read += 1
        block = pipeline.tokenize_block(block_index, raw_block, context.tokenizer,
                                        num_threads=options.num_workers,
                                        segmenter=context.segmenter)
        counts.merge(pipeline.no_token_counts(block, len(raw_block)))
        yield block


def _run_tasks(blocks: Iterable[pipeline.TokenizedBlock], options: RunOptions,
               layout: pipeline.LayoutOptions, context: pipeline.WorkerContext,
               sink: _ResultSink, block_dir: str) -> None:
    """Runs every task of the blocks, in this process or in a pool of `num_workers`."""
    if options.num_workers == 1:
        for block in blocks:
            for task in pipeline.make_tasks(block, options.instances, layout.task_tokens):
                sink.add(pipeline.run_task(context, block, task))
    else:
        _run_in_pool(blocks, options, layout, block_dir, sink)


def _run_in_pool(blocks: Iterable[pipeline.TokenizedBlock], options: RunOptions,
                 layout: pipeline.LayoutOptions, block_dir: str, sink: _ResultSink) -> None:
    """Runs the blocks' tasks in `num_workers` processes, at most 2 per process in flight.

    Each block is saved to `block_dir` for the workers to load, and removed once
    its last task is done. Results reach `sink` in submission (canonical) order.
    """
    pool = _process_context().Pool(options.num_workers, initializer=_init_worker,
                                   initargs=(options, layout))
    try:
        queue = _TaskQueue(pool, sink, max_inflight=2 * options.num_workers)
        for block in blocks:
            path = os.path.join(block_dir, f"block-{block.block_index:08d}.npz")
            block.save(path)
            queue.submit(path, pipeline.make_tasks(block, options.instances, layout.task_tokens))
        queue.drain(0)
        pool.close()
        pool.join()
        pool = None
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()


class _TaskQueue:
    """Tasks in flight in the pool, oldest first, and each saved block's unfinished tasks."""

    def __init__(self, pool, sink: _ResultSink, max_inflight: int):
        self.pool = pool
        self.sink = sink
        self.max_inflight = max_inflight
        self._inflight: Deque = collections.deque()  # (block path, AsyncResult)
        self._unfinished: Dict[str, int] = {}  # block path -> its tasks not yet drained

    def submit(self, path: str, tasks: Sequence[pipeline.Task]) -> None:
        """Queues the tasks of the block saved at `path`, waiting for room first."""
        self._unfinished[path] = len(tasks)
        for task in tasks:
            self.drain(self.max_inflight)
            self._inflight.append((path, self.pool.apply_async(_run_in_worker, (path, task))))
        if not tasks:
            self._remove_block(path)

    def drain(self, limit: int) -> None:
        """Hands the oldest results to the sink until at most `limit` tasks are in flight."""
        while len(self._inflight) > limit:
            path, handle = self._inflight.popleft()
            self.sink.add(handle.get())
            self._unfinished[path] -= 1
            if self._unfinished[path] == 0:
                self._remove_block(path)

    def _remove_block(self, path: str) -> None:
        os.remove(path)
        del self._unfinished[path]


def _write_outputs(output_files: Sequence[str], spill: _SpillWriter,
                   layout: pipeline.LayoutOptions, random_seed: int) -> List[int]:
    """Writes each output file as its shuffled buckets in turn; returns its instance count.

    File f holds buckets f * k .. f * k + k - 1 (k = shuffle_buckets_per_file).
    """
    per_file = [0] * layout.num_files
    for file_index, path in enumerate(output_files):
        with fileio.atomic_open(path, "wb") as out:
            for sub in range(layout.shuffle_buckets_per_file):
                bucket = file_index * layout.shuffle_buckets_per_file + sub
                records = split_records(spill.read(bucket))
                for record in pipeline.shuffle_bucket(records, random_seed, bucket):
                    out.write(record)
                per_file[file_index] += len(records)
    return per_file


def _write_summary(summary: dict, summary_file: str, output_files: Sequence[str],
                   log: Callable[[str], None]) -> None:
    """Writes the summary as JSON and removes older versions' summaries of the outputs."""
    fileio.atomic_write_text(summary_file, json.dumps(summary, indent=2, sort_keys=True) + "\n")
    for old in old_style_summaries(output_files, summary_file):
        os.remove(old)
        log(f"removed {old}: an older version's summary of the output rewritten now")


# albert_tf.pretraining.inputs skips files so named that a glob matches
SUMMARY_SUFFIX = ".summary.json"
_SHARD_SUFFIX = re.compile(r"-\d{5,}-of-\d{5,}$")  # `path@N` -> path-0000i-of-0000N


def default_summary_path(output_files: Sequence[str]) -> str:
    """Where a run's summary goes: `<stem>.summary.json` beside the first output.

    `<stem>` is the first output's name without its shard suffix and extension:
    `data/train.tfrecord` and `data/train.tfrecord@8` (or `data/train@8`) give
    `data/train.summary.json`, a comma list is named after its first file. No
    glob `<output>*` of any output may match the summary, so when an output's
    name is a prefix of that name (outputs without extension: `data/train`) it
    is prefixed with `_` (`data/_train.summary.json`), as Hadoop-style readers
    mark metadata.
    """
    directory, name = os.path.split(output_files[0])
    stem = os.path.splitext(_SHARD_SUFFIX.sub("", name) or name)[0] or name
    summary = stem + SUMMARY_SUFFIX
    if _prefixed_by_an_output(os.path.join(directory, summary), output_files):
        summary = "_" + summary
    return os.path.join(directory, summary)


def _prefixed_by_an_output(summary: str, output_files: Sequence[str]) -> bool:
    """Whether a glob `<output>*` of some output matches `summary`."""
    directory, name = os.path.split(summary)
    return any(os.path.dirname(p) == directory and name.startswith(os.path.basename(p))
               for p in output_files)


def resolve_summary_path(output_files: Sequence[str], summary_file: Optional[str] = None) -> str:
    """`summary_file`, or the default path after checking it is free for this run.

    Raises InputError when an output is named `*.summary.json` (the pretraining
    readers skip such files), when `summary_file` is an output, or when the
    default path already holds something else than a summary of these same
    output names (e.g. a run to `a.tf_record` after one to `a.tfrecord`, or
    `a@4` after `a@8`): re-running the same outputs overwrites their summary,
    another run's summary is never silently replaced. Only local paths are
    checked for an existing summary.
    """
    for path in output_files:
        if path.endswith(SUMMARY_SUFFIX):
            raise InputError(f"--output_file {path}: names ending in {SUMMARY_SUFFIX} are kept "
                             "for data-prep summaries (the pretraining readers skip them); "
                             "choose another name")
    if summary_file:
        if os.path.abspath(summary_file) in {os.path.abspath(p) for p in output_files}:
            raise InputError(f"--summary_file {summary_file} is also an output file; "
                             "give the summary another name")
        return summary_file
    path = default_summary_path(output_files)
    if _prefixed_by_an_output(path, output_files):  # outputs named `_`, `_t`, ...
        raise InputError(f"the default summary {path} would match the glob of an output "
                         "file; pass --summary_file")
    if "://" not in path and os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as handle:
                recorded = [os.path.basename(f["path"]) for f in json.load(handle)["output_files"]]
        except (OSError, ValueError, KeyError, TypeError):
            recorded = None
        if recorded != [os.path.basename(p) for p in output_files]:
            owner = (f"the summary of other outputs ({', '.join(recorded[:2])}"
                     f"{', ...' if len(recorded) > 2 else ''})" if recorded is not None
                     else "a file that is not a data-prep summary")
            raise InputError(f"{path} already holds {owner}; remove it or pass --summary_file "
                             "to name this run's summary")
    return path


def old_style_summaries(output_files: Sequence[str], summary_file: str) -> List[str]:
    """Existing `<output>.summary.json` files (older versions' summary name) of local outputs,
    except `summary_file`: they describe data that this run has just replaced."""
    return [p + SUMMARY_SUFFIX for p in output_files
            if "://" not in p and os.path.isfile(p + SUMMARY_SUFFIX)
            and os.path.abspath(p + SUMMARY_SUFFIX) != os.path.abspath(summary_file)]


def input_file_spec(output_files: Sequence[str]) -> str:
    """An --input_file value for `output_files` that matches no summary: the file, a
    `base-*-of-0000N` glob for a complete set of shards, else the comma list."""
    if len(output_files) == 1:
        return output_files[0]
    total = re.search(r"-of-(\d{5,})$", output_files[0])
    base = _SHARD_SUFFIX.sub("", output_files[0])
    if total and int(total.group(1)) == len(output_files) and all(
            _SHARD_SUFFIX.sub("", p) == base and p.endswith(total.group(0))
            for p in output_files):
        return f"{base}-*{total.group(0)}"
    return ",".join(output_files)


def options_dict(options: RunOptions, layout: pipeline.LayoutOptions) -> dict:
    """The options as recorded in the summary (the same for the local and Beam runners)."""
    return {
        "spm_model_file": options.spm_model_file,
        "vocab_file": options.vocab_file,
        "tokenizer": "wordpiece" if options.wordpiece else "sentencepiece",
        "zh_whole_word_mask": options.zh_whole_word_mask,
        "reader": dataclasses.asdict(options.effective_reader()),
        "instances": dataclasses.asdict(options.instances),
        "layout": dataclasses.asdict(layout),
    }
