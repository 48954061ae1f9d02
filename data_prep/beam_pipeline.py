"""The pretraining-data pipeline on Apache Beam (optional extra: `pip install .[beam]`).

Same steps and seeds as the local runner, so the output files are byte-identical:

  Create(file list) -> read documents, group into blocks (one sequential reader)
    -> Reshuffle -> tokenize block -> split into tasks (block, pass, documents)
    -> Reshuffle -> run_task (pair, mask, encode, frame) -> (bucket, (key, record))
    -> GroupByKey(bucket) -> sort by canonical key -> seeded shuffle
    -> GroupByKey(output file) -> concatenate sub-buckets -> write file (temp + rename)
  Counters are combined into the JSON summary, and so are the reader's and the
  tokenizer's counts of dropped input (`input`: kept N of M bytes, and why the
  rest was dropped), which are also logged.

Reading is a single sequential stage (blocks must be consecutive documents for
the random-document pool to be defined independently of the runner); it only
decodes and normalises text, which is cheap next to the rest. Everything after
the first Reshuffle runs in parallel. Each output file is assembled by one
worker, so choose enough output files (`--output_file=gs://b/train@256`) that
one file fits in a worker's memory.

Runs on DirectRunner by default; DataflowRunner, FlinkRunner and SparkRunner
take their usual pipeline options (`--beam_pipeline_options`).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import tempfile
import uuid
from typing import Any, Iterable, List, Optional, Sequence, Tuple

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from data_prep import pipeline
from data_prep.runner import (SUMMARY_SUFFIX, RunOptions, make_context, options_dict,
                              resolve_summary_path)
from data_prep.text_input import InputError, ReadCounts, iter_documents


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


def _local_model(path: str) -> str:
    """A local path of the vocabulary file (SentencePiece model or WordPiece vocab.txt),
    copied from a remote filesystem if needed."""
    if os.path.exists(path):
        return path
    with FileSystems.open(path) as handle:
        data = handle.read()
    fd, local = tempfile.mkstemp(suffix=os.path.splitext(path)[1] or ".vocab")
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return local


class _ReadBlocks(beam.DoFn):
    def __init__(self, options: RunOptions, layout: pipeline.LayoutOptions):
        self._options = options
        self._layout = layout

    def process(self, files: Sequence[str]):
        counts = ReadCounts()
        documents = iter_documents(files, self._options.effective_reader(),
                                   opener=_open_uncompressed, counts=counts,
                                   split_chars=self._layout.block_chars)
        yield from pipeline.iter_raw_blocks(documents, self._layout.block_documents,
                                            self._layout.block_chars)
        yield beam.pvalue.TaggedOutput("input", counts)  # where the input went


class _WithContext(beam.DoFn):
    def __init__(self, options: RunOptions, layout: pipeline.LayoutOptions):
        self._options = options
        self._layout = layout
        self._context = None

    def setup(self):
        self._context = make_context(self._options, self._layout, localize=_local_model)


class _TokenizeAndSplit(_WithContext):
    def process(self, element):
        block_index, documents = element
        block = pipeline.tokenize_block(block_index, documents, self._context.tokenizer,
                                        segmenter=self._context.segmenter)
        yield beam.pvalue.TaggedOutput("input", pipeline.no_token_counts(block, len(documents)))
        for task in pipeline.make_tasks(block, self._options.instances, self._layout.task_tokens):
            yield task, block


class _RunTask(_WithContext):
    def process(self, element):
        task, block = element
        result = pipeline.run_task(self._context, block, task)
        for bucket, key, record in zip(result.buckets, result.keys, result.records):
            yield bucket, (key, record)
        yield beam.pvalue.TaggedOutput("stats", result.stats)


def _shuffle_bucket(element, random_seed: int, per_file: int):
    bucket, values = element
    records = [record for key, record in sorted(v for v in values if v is not None)]
    shuffled = pipeline.shuffle_bucket(records, random_seed, bucket)
    yield bucket // per_file, (bucket % per_file, len(shuffled), b"".join(shuffled))


def _write_file(element, output_files: Sequence[str]):
    file_index, parts = element
    path = output_files[file_index]
    directory, base = os.path.split(path)
    tmp = FileSystems.join(directory, f".{base}.tmp-{uuid.uuid4().hex[:8]}") if directory \
        else f".{base}.tmp-{uuid.uuid4().hex[:8]}"
    count = 0
    with FileSystems.create(tmp, compression_type=CompressionTypes.UNCOMPRESSED) as out:
        for _, n, blob in sorted(parts, key=lambda part: part[0]):
            out.write(blob)
            count += n
    if FileSystems.exists(path):
        FileSystems.delete([path])
    FileSystems.rename([tmp], [path])
    yield path, count


class _MergeCounts(beam.CombineFn):
    """Sums ReadCounts (the reader's, and the tokenizer's of every block)."""

    def create_accumulator(self):
        return ReadCounts()

    def add_input(self, accumulator, counts):
        accumulator.merge(counts)
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[ReadCounts]):
        merged = ReadCounts()
        for accumulator in accumulators:
            merged.merge(accumulator)
        return merged

    def extract_output(self, accumulator):
        return accumulator


class _MergeStats(beam.CombineFn):
    def __init__(self, ngram: int):
        self._ngram = ngram

    def create_accumulator(self):
        return pipeline.Stats(self._ngram)

    def add_input(self, accumulator, stats):
        accumulator.merge(stats)
        return accumulator

    def merge_accumulators(self, accumulators: Iterable[pipeline.Stats]):
        merged = pipeline.Stats(self._ngram)
        for accumulator in accumulators:
            merged.merge(accumulator)
        return merged

    def extract_output(self, accumulator):
        return accumulator


def _write_summary(stats: pipeline.Stats, file_counts, input_counts, summary_path: str,
                   extra: dict):
    read = input_counts[0] if input_counts else ReadCounts()  # one merged ReadCounts
    for line in read.log_lines():
        logging.getLogger("data_prep").info(line)
    if stats.instances == 0:
        raise InputError("no training instances were created: the input has no non-empty "
                         "documents")
    summary = stats.to_dict()
    summary["input"] = read.to_dict()
    counts = dict(file_counts)
    summary.update(extra)
    summary["output_files"] = [{"path": p, "instances": counts.get(p, 0)}
                               for p in extra["output_file_names"]]
    del summary["output_file_names"]
    with FileSystems.create(summary_path + ".tmp") as out:
        out.write((json.dumps(summary, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    if FileSystems.exists(summary_path):
        FileSystems.delete([summary_path])
    FileSystems.rename([summary_path + ".tmp"], [summary_path])
    old_style = [p + SUMMARY_SUFFIX for p in extra["output_file_names"]]
    stale = [p for p in old_style if p != summary_path and FileSystems.exists(p)]
    if stale:  # an older version's `<output>.summary.json`, describing replaced data
        FileSystems.delete(stale)


def build(root: beam.Pipeline, input_files: Sequence[str], output_files: Sequence[str],
          options: RunOptions, summary_file: Optional[str] = None) -> None:
    """Adds the pipeline to `root` (InputError / ValueError for bad names and options)."""
    summary_file = resolve_summary_path(output_files, summary_file)
    options.instances.validate()
    options.vocabulary_file()  # ValueError naming both flags when neither is set
    layout = dataclasses.replace(options.layout, num_files=len(output_files))
    layout.validate()
    per_file = layout.shuffle_buckets_per_file
    seed = options.instances.random_seed
    blocks = (
        root
        | "Files" >> beam.Create([list(input_files)])
        | "ReadBlocks" >> beam.ParDo(_ReadBlocks(options, layout)).with_outputs(
            "input", main="blocks"))
    tasks = (
        blocks.blocks
        | "SpreadBlocks" >> beam.Reshuffle()
        | "TokenizeAndSplit" >> beam.ParDo(_TokenizeAndSplit(options, layout)).with_outputs(
            "input", main="tasks"))
    results = (
        tasks.tasks
        | "SpreadTasks" >> beam.Reshuffle()
        | "RunTasks" >> beam.ParDo(_RunTask(options, layout)).with_outputs("stats", main="records"))
    input_counts = (
        (blocks.input, tasks.input)
        | "InputCounts" >> beam.Flatten()
        | "MergeInputCounts" >> beam.CombineGlobally(_MergeCounts()))
    empty = root | "AllBuckets" >> beam.Create([(b, None) for b in range(layout.num_buckets)])
    file_counts = (
        (results.records, empty)
        | "WithEmpty" >> beam.Flatten()
        | "KeyedByBucket" >> beam.Map(lambda kv: kv).with_output_types(Tuple[int, Any])
        | "ByBucket" >> beam.GroupByKey()
        | "ShuffleBuckets" >> beam.FlatMap(_shuffle_bucket, seed, per_file)
        | "ByFile" >> beam.GroupByKey()
        | "WriteFiles" >> beam.FlatMap(_write_file, list(output_files)))
    stats = results.stats | "MergeStats" >> beam.CombineGlobally(
        _MergeStats(options.instances.masking.ngram))
    extra = {
        "runner": "beam",
        "input_files": list(input_files),
        "output_file_names": list(output_files),
        "options": options_dict(options, layout),
    }
    _ = stats | "WriteSummary" >> beam.Map(
        _write_summary, beam.pvalue.AsList(file_counts), beam.pvalue.AsList(input_counts),
        summary_file, extra)


def run(input_spec: str, output_files: Sequence[str], options: RunOptions,
        runner: str = "DirectRunner", pipeline_args: Sequence[str] = (),
        summary_file: Optional[str] = None) -> None:
    """Builds and runs the pipeline, waiting until it finishes."""
    input_files = expand_patterns(input_spec)
    beam_options = PipelineOptions(list(pipeline_args), runner=runner,
                                   save_main_session=False)
    with beam.Pipeline(options=beam_options) as root:
        build(root, input_files, output_files, options, summary_file)
