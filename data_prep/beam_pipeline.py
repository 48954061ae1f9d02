"""The pretraining-data pipeline on Apache Beam (optional extra: `pip install .[beam]`).

Same steps and seeds as the local runner, so the output files are byte-identical:

  Create(file list) -> read documents, group into blocks (one sequential reader)
    -> spread -> tokenize block -> split into tasks (block, pass, documents)
    -> spread -> run_task (pair, mask, encode, frame) -> (bucket, (key, record))
    -> GroupByKey(bucket) -> sort by canonical key -> seeded shuffle
    -> GroupByKey(output file) -> concatenate sub-buckets -> write file (temp + rename)
    -> GroupByKey(one key) -> write the JSON summary
  The counters (the reader's and the tokenizer's counts of where the input
  went, the tasks' statistics, the files' instance counts) travel in the same
  stream as summary parts under the key SUMMARY and are merged at each
  grouping, until the last step writes them as the summary.

The graph is one chain of ParDo, Flatten and GroupByKey, with no side input,
no tagged output, no Reshuffle and no CombineGlobally, because Beam's
DaskRunner (2.77) runs only what the last transform depends on, evaluates a
side input inside the task that reads it, mixes tagged outputs into the main
one and treats Reshuffle as a no-op; the same graph runs on every Beam runner.
A "spread" is a GroupByKey on unique keys followed by ungrouping (what
Reshuffle does). On Dask a GroupByKey keeps the partition count of its input,
so the first spread flattens in a Create of `lanes` elements, which the
DaskRunner cuts into `--dask_npartitions` partitions: that is what spreads
the work over the Dask workers.

Reading is a single sequential stage (blocks must be consecutive documents for
the random-document pool to be defined independently of the runner); it only
decodes and normalises text, which is cheap next to the rest. Everything after
the first spread runs in parallel. Each output file is assembled by one
worker, so choose enough output files (`--output_file=gs://b/train@256`) that
one file fits in a worker's memory.

Writes are atomic and idempotent: a file is written under a temporary name
unique to the attempt and renamed, so a retried task (a lost worker's) writes
the same bytes again and no partial file ever has the final name; the last
step removes the temporary files of attempts that died.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import posixpath
import tempfile
import uuid
from typing import Dict, Iterable, List, Optional, Sequence

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from albert_tf.errors import UserError
from data_prep import beam_dask, pipeline
from data_prep.runner import (SUMMARY_SUFFIX, RunOptions, input_file_spec, make_context,
                              options_dict, resolve_summary_path)
from data_prep.text_input import InputError, ReadCounts, iter_documents

_LOG = logging.getLogger("data_prep")
SUMMARY = "summary"  # the key of the summary parts in every keyed stage


def _source_digest() -> str:
    """A digest of the data_prep code as this process imported it (see beam_dask)."""
    digest = hashlib.blake2b(digest_size=8)
    directory = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(directory)):
        if name.endswith(".py"):
            with open(os.path.join(directory, name), "rb") as handle:
                digest.update(name.encode("utf-8") + b"\0" + handle.read())
    return digest.hexdigest()


SOURCE_DIGEST = _source_digest()


def expand_patterns(spec: str) -> List[str]:
    """Comma-separated paths/globs on any Beam filesystem -> sorted file list per pattern."""
    files: List[str] = []
    for pattern in (p.strip() for p in spec.split(",")):
        if not pattern:
            continue
        matches = sorted(m.path for r in FileSystems.match([pattern]) for m in r.metadata_list)
        if not matches:
            raise InputError(f"input pattern {pattern!r} matches no file")
        files.extend(matches)
    if not files:
        raise InputError("no input files given")
    return files


def _open_uncompressed(path: str):
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


# Remote vocabulary file -> its local copy, per process: the DaskRunner sets a DoFn up
# once per partition, and each copy would otherwise be a new temporary file.
_LOCAL_COPIES: Dict[str, str] = {}


def _local_model(path: str) -> str:
    """A local path of the vocabulary file (SentencePiece model or WordPiece vocab.txt),
    copied from a remote filesystem if needed."""
    if os.path.exists(path):
        return path
    if path not in _LOCAL_COPIES:
        with FileSystems.open(path) as handle:
            data = handle.read()
        fd, local = tempfile.mkstemp(suffix=os.path.splitext(path)[1] or ".vocab")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        _LOCAL_COPIES[path] = local
    return _LOCAL_COPIES[path]


@dataclasses.dataclass
class _SummaryPart:
    """Additive counters on their way to the summary: where the input went, the tasks'
    statistics (None until a task reports) and the instances of each written file."""
    counts: ReadCounts = dataclasses.field(default_factory=ReadCounts)
    stats: Optional[pipeline.Stats] = None
    files: Dict[str, int] = dataclasses.field(default_factory=dict)

    @classmethod
    def merged(cls, parts: Iterable["_SummaryPart"]) -> "_SummaryPart":
        total = cls()
        for part in parts:
            total.counts.merge(part.counts)
            if part.stats is not None:
                if total.stats is None:
                    total.stats = pipeline.Stats(part.stats.ngram)
                total.stats.merge(part.stats)
            total.files.update(part.files)
        return total


# The functions Beam calls (DoFn.process, Map/FlatMap callables) carry no annotations:
# under `from __future__ import annotations` Beam logs a line for each one it reads.


class _ReadBlocks(beam.DoFn):
    def __init__(self, options: RunOptions, layout: pipeline.LayoutOptions):
        self._options = options
        self._layout = layout

    def process(self, files):
        counts = ReadCounts()
        documents = iter_documents(files, self._options.effective_reader(),
                                   opener=_open_uncompressed, counts=counts,
                                   split_chars=self._layout.block_chars)
        for block_index, block in pipeline.iter_raw_blocks(documents,
                                                           self._layout.block_documents,
                                                           self._layout.block_chars):
            yield ("block", block_index), block
        yield SUMMARY, _SummaryPart(counts=counts)  # where the input went


def _ungroup(element):
    """A spread's second half: the grouped values again one by one (lane markers dropped),
    the summary parts merged into one."""
    key, values = element
    if key == SUMMARY:
        yield key, _SummaryPart.merged(values)
    elif key[0] != "lane":
        for value in values:
            yield key, value


def _spread(label, keyed, lanes=None):
    """Redistributes uniquely keyed elements over the workers (Reshuffle's GroupByKey and
    ungrouping, which the DaskRunner runs; it skips Reshuffle itself)."""
    if lanes is not None:
        keyed = (keyed, lanes) | f"{label}WithLanes" >> beam.Flatten()
    return (keyed
            | f"{label}Group" >> beam.GroupByKey()
            | f"{label}Ungroup" >> beam.FlatMap(_ungroup))


class _WithContext(beam.DoFn):
    """A DoFn with the worker state; summary parts pass through it unchanged."""

    def __init__(self, options: RunOptions, layout: pipeline.LayoutOptions):
        self._options = options
        self._layout = layout
        self._context = None

    def setup(self):
        self._context = make_context(self._options, self._layout, localize=_local_model)

    def process(self, element):
        key, value = element
        if key == SUMMARY:
            yield element
        else:
            yield from self.process_value(key, value)

    def process_value(self, key, value):
        raise NotImplementedError


class _TokenizeAndSplit(_WithContext):
    def process_value(self, key, documents):
        block = pipeline.tokenize_block(key[1], documents, self._context.tokenizer,
                                        segmenter=self._context.segmenter)
        yield SUMMARY, _SummaryPart(counts=pipeline.no_token_counts(block, len(documents)))
        tasks = pipeline.make_tasks(block, self._options.instances, self._layout.task_tokens)
        for number, task in enumerate(tasks):
            yield ("task", block.block_index, number), (task, block)


class _RunTask(_WithContext):
    def process_value(self, key, value):
        task, block = value
        result = pipeline.run_task(self._context, block, task)
        for bucket, sort_key, record in zip(result.buckets, result.keys, result.records):
            yield bucket, (sort_key, record)
        yield SUMMARY, _SummaryPart(stats=result.stats)


def _shuffle_bucket(element, random_seed, per_file):
    bucket, values = element
    if bucket == SUMMARY:
        yield bucket, _SummaryPart.merged(values)
        return
    records = [record for key, record in sorted(v for v in values if v is not None)]
    shuffled = pipeline.shuffle_bucket(records, random_seed, bucket)
    yield bucket // per_file, (bucket % per_file, len(shuffled), b"".join(shuffled))


def _temporary_name(path: str) -> str:
    """A name beside `path` for one attempt at writing it (hidden; unique per attempt)."""
    directory, base = _split(path)
    name = f".{base}.tmp-{uuid.uuid4().hex[:12]}"
    return FileSystems.join(directory, name) if directory else name


def _split(path: str):
    """(directory, base name) of a local path or a URL (gs://b/d/f -> gs://b/d, f)."""
    return posixpath.split(path) if "://" in path else os.path.split(path)


def _replace(temporary: str, path: str) -> None:
    """Renames `temporary` to `path`, replacing it (atomic where the filesystem renames
    atomically, such as a local disk; an object store's copy appears whole)."""
    try:
        FileSystems.rename([temporary], [path])
    except IOError:  # filesystems whose rename does not overwrite
        if not FileSystems.exists(path):
            raise
        FileSystems.delete([path])
        FileSystems.rename([temporary], [path])


def _write_file(element, output_files):
    file_index, parts = element
    if file_index == SUMMARY:
        yield file_index, _SummaryPart.merged(parts)
        return
    path = output_files[file_index]
    temporary = _temporary_name(path)
    count = 0
    with FileSystems.create(temporary, compression_type=CompressionTypes.UNCOMPRESSED) as out:
        for _, n, blob in sorted(parts, key=lambda part: part[0]):
            out.write(blob)
            count += n
    _replace(temporary, path)
    yield SUMMARY, _SummaryPart(files={path: count})


def _remove_leftovers(paths: Sequence[str]) -> None:
    """Removes the temporary files that attempts which died left beside `paths`."""
    by_directory: Dict[str, set] = {}
    for path in paths:
        directory, base = _split(path)
        by_directory.setdefault(directory, set()).add(base)
    for directory, bases in by_directory.items():
        pattern = FileSystems.join(directory, ".*.tmp-*") if directory else ".*.tmp-*"
        found = [m.path for r in FileSystems.match([pattern]) for m in r.metadata_list]
        stale = [p for p in found if _split(p)[1][1:].rpartition(".tmp-")[0] in bases]
        if stale:
            FileSystems.delete(stale)


def _write_summary(element, summary_path, extra):
    _, parts = element
    total = _SummaryPart.merged(parts)
    for line in total.counts.log_lines():
        _LOG.info(line)
    if total.stats is None or total.stats.instances == 0:
        raise InputError("no training instances were created: the input has no non-empty "
                         "documents")
    summary = total.stats.to_dict()
    summary["input"] = total.counts.to_dict()
    summary.update(extra)
    summary["output_files"] = [{"path": p, "instances": total.files.get(p, 0)}
                               for p in extra["output_file_names"]]
    del summary["output_file_names"]
    temporary = _temporary_name(summary_path)
    with FileSystems.create(temporary) as out:
        out.write((json.dumps(summary, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    _replace(temporary, summary_path)
    old_style = [p + SUMMARY_SUFFIX for p in extra["output_file_names"]]
    stale = [p for p in old_style if p != summary_path and FileSystems.exists(p)]
    if stale:  # an older version's `<output>.summary.json`, describing replaced data
        FileSystems.delete(stale)
    _remove_leftovers(list(extra["output_file_names"]) + [summary_path])


def build(root: beam.Pipeline, input_files: Sequence[str], output_files: Sequence[str],
          options: RunOptions, summary_file: Optional[str] = None, lanes: int = 1) -> None:
    """Adds the pipeline to `root` (InputError / ValueError for bad names and options).

    `lanes`: elements of the Create whose partitions spread the work on the DaskRunner
    (its --dask_npartitions); any value gives the same output on every runner.
    """
    summary_file = resolve_summary_path(output_files, summary_file)
    options.instances.validate()
    options.vocabulary_file()  # ValueError naming both flags when neither is set
    layout = dataclasses.replace(options.layout, num_files=len(output_files))
    layout.validate()
    blocks = (root
              | "Files" >> beam.Create([list(input_files)])
              | "ReadBlocks" >> beam.ParDo(_ReadBlocks(options, layout)))
    lane_markers = root | "Lanes" >> beam.Create([(("lane", i), None) for i in range(lanes)])
    tasks = (_spread("SpreadBlocks", blocks, lane_markers)
             | "TokenizeAndSplit" >> beam.ParDo(_TokenizeAndSplit(options, layout)))
    records = (_spread("SpreadTasks", tasks)
               | "RunTasks" >> beam.ParDo(_RunTask(options, layout)))
    empty = root | "AllBuckets" >> beam.Create([(b, None) for b in range(layout.num_buckets)])
    extra = {
        "runner": "beam",
        "input_files": list(input_files),
        "output_file_names": list(output_files),
        "options": options_dict(options, layout),
    }
    _ = ((records, empty)
         | "WithEmpty" >> beam.Flatten()
         | "ByBucket" >> beam.GroupByKey()
         | "ShuffleBuckets" >> beam.FlatMap(_shuffle_bucket, options.instances.random_seed,
                                            layout.shuffle_buckets_per_file)
         | "ByFile" >> beam.GroupByKey()
         | "WriteFiles" >> beam.FlatMap(_write_file, list(output_files))
         | "Gather" >> beam.GroupByKey()
         | "WriteSummary" >> beam.Map(_write_summary, summary_file, extra))


def _create_runner(runner: str):
    """The Beam runner named by --runner; UserError (one line) for a name Beam does not know."""
    from apache_beam.runners.runner import create_runner

    name = beam_dask.DASK_RUNNER if beam_dask.is_dask_runner(runner) else runner
    try:
        return create_runner(name)
    except (ValueError, ImportError) as error:
        raise UserError(f"--runner={runner}: {beam_dask.one_line(error)}") from error


def run(input_spec: str, output_files: Sequence[str], options: RunOptions,
        runner: str = "DirectRunner", pipeline_args: Sequence[str] = (),
        summary_file: Optional[str] = None) -> None:
    """Builds and runs the pipeline, waiting until it finishes; logs the outputs.

    On the DaskRunner the cluster is checked first (beam_dask.prepare) and a failure
    of the cluster while the job runs is a beam_dask.ClusterError (one line;
    beam_dask.wait).
    """
    input_files = expand_patterns(input_spec)
    summary_file = resolve_summary_path(output_files, summary_file)
    args, lanes = list(pipeline_args), 1
    dask = beam_dask.is_dask_runner(runner)
    if dask:
        args, lanes = beam_dask.prepare(args)
    root = beam.Pipeline(runner=_create_runner(runner),
                         options=PipelineOptions(args, save_main_session=False))
    build(root, input_files, output_files, options, summary_file, lanes=lanes)
    result = root.run()
    if dask:
        beam_dask.wait(result)
    else:
        result.wait_until_finish()
    _log_outputs(summary_file, output_files)


def _log_outputs(summary_path: str, output_files: Sequence[str]) -> None:
    with FileSystems.open(summary_path) as handle:
        summary = json.loads(handle.read().decode("utf-8"))
    _LOG.info(f"wrote {summary['instances']} instances ({summary['tokens']} tokens) to "
              f"{len(output_files)} file(s); summary: {summary_path}; pretrain on them with "
              f"--input_file='{input_file_spec(output_files)}'")
