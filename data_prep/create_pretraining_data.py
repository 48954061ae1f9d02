r"""Creates ALBERT pretraining TFRecords (MLM with n-gram masking + SOP) from text.

Same flags, defaults and output schema as the original create_pretraining_data.py,
plus flags for scale (`--num_workers`, `--runner`), input handling
(`--input_format`, `--decode_errors`, `--strip_gutenberg`) and layout. Output is
byte-identical for any `--num_workers` and for the Beam runner. A JSON summary
is written next to the first output file, named so that no glob `<output>*`
matches it (`data/train.tfrecord` and `data/train@8` -> `data/train.summary.json`).
See data_prep/README.md.

The vocabulary is a SentencePiece model (`--spm_model_file`) or, as in the
original when no SentencePiece model is given, a WordPiece vocabulary
(`--vocab_file`, e.g. the Chinese ALBERT's vocab_chinese.txt): lines are then
only stripped (the BasicTokenizer normalises) and a `##` piece continues the
previous word. `--zh_whole_word_mask` (WordPiece, optional rjieba) masks
Chinese words as units.

Examples:
  python -m data_prep.create_pretraining_data \
    --input_file='corpus/*.txt' --output_file=out/train.tfrecord@4 \
    --spm_model_file=30k-clean.model --max_seq_length=128 \
    --max_predictions_per_seq=20 --dupe_factor=5 --num_workers=2
  python -m data_prep.create_pretraining_data --input_format=raw \
    --input_file='zh/*.txt' --output_file=out/zh@4 --vocab_file=vocab_chinese.txt
"""
from __future__ import annotations

import logging

from absl import flags

from albert_tf import cli
from albert_tf.errors import UserError, UserValueError, check_writable
from data_prep import masking, pipeline, runner, tokenization, zh_words
from data_prep.text_input import ReaderOptions, expand_input_patterns

FLAGS = flags.FLAGS

# The original's flags (names and defaults).
flags.DEFINE_string("input_file", None,
                    "Input text file(s): comma-separated paths or glob patterns.")
flags.DEFINE_string("output_file", None,
                    "Output TFRecord file(s), comma-separated; `path@N` is short for N "
                    "shards path-00000-of-0000N ... . Instances are spread over the files.")
flags.DEFINE_string("vocab_file", None,
                    "WordPiece vocabulary (vocab.txt, one token per line): the original's "
                    "WordPiece path, used when --spm_model_file is not given.")
flags.DEFINE_string("spm_model_file", None,
                    "SentencePiece model; takes precedence over --vocab_file.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input text.")
flags.DEFINE_bool("do_whole_word_mask", True,
                  "Mask whole words (all pieces of a word) instead of single pieces.")
flags.DEFINE_bool("favor_shorter_ngram", True,
                  "p(n) proportional to 1/n (True) or to 1/(ngram+1-n) (False).")
flags.DEFINE_bool("random_next_sentence", False,
                  "BERT's next-sentence prediction (random B with p=0.5) instead of SOP.")
flags.DEFINE_integer("max_seq_length", 512, "Maximum sequence length (tokens incl. specials).")
flags.DEFINE_integer("ngram", 3, "Maximum n-gram (in words) per masked span.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum masked positions per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Seed of every random choice.")
flags.DEFINE_integer("dupe_factor", 40, "Passes over the input, each with different masks.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Fraction of tokens to mask.")
flags.DEFINE_float("short_seq_prob", 0.1,
                   "Probability of a shorter target length for a document pass.")

# This implementation's flags.
flags.DEFINE_enum("input_format", "sentences", ["sentences", "raw"],
                  "sentences: one sentence per line, blank line between documents (the "
                  "original's format). raw: each file (each Gutenberg book, with "
                  "--strip_gutenberg) is a document of paragraphs that are split into "
                  "sentences by a rule-based splitter; a document longer than --block_chars "
                  "is cut into pieces at paragraph ends (see --block_chars).")
flags.DEFINE_enum("decode_errors", "strict", ["strict", "replace"],
                  "On bytes that are not UTF-8: stop with file and line (strict) or replace "
                  "them with U+FFFD (replace).")
flags.DEFINE_bool("strip_gutenberg", True,
                  "Keep only the body of every Project Gutenberg book (between each *** START "
                  "OF / *** END OF marker pair, or up to the 'End of the Project Gutenberg "
                  "EBook' footer): headers, licences and the text between two books are "
                  "dropped, and each book ends a document. A file without markers is kept "
                  "whole. The log and summary say how many bytes were dropped, and why.")
flags.DEFINE_bool("zh_whole_word_mask", False,
                  "Beyond the original (WordPiece only): mask Chinese words found by the rjieba "
                  "segmenter as units, as Chinese-BERT-wwm does (pip install rjieba).")
flags.DEFINE_integer("num_workers", 1, "Worker processes for the local runner.")
flags.DEFINE_string("runner", "local",
                    "`local` (multiprocessing on this machine) or a Beam runner name "
                    "(DirectRunner, DaskRunner, DataflowRunner, FlinkRunner, SparkRunner; needs "
                    "`pip install .[beam]`, and dask and distributed for DaskRunner).")
flags.DEFINE_string("beam_pipeline_options", "",
                    "Extra Beam pipeline options, space-separated, e.g. "
                    "'--project=p --region=r --temp_location=gs://b/tmp' (Dataflow) or "
                    "'--dask_client_address=tcp://host:8786' (DaskRunner).")
flags.DEFINE_integer("shuffle_buckets_per_file", 4,
                     "Shuffle sub-buckets per output file; peak memory of the final pass is "
                     "about one output file / this.")
flags.DEFINE_integer("block_documents", 10000,
                     "Documents per block (the pool for random-document B, and the unit of "
                     "reading).")
flags.DEFINE_integer("block_chars", 64 << 20,
                     "Characters per block, at most (about). Also bounds a document: one whose "
                     "text reaches this many characters is cut there (raw: at the end of the "
                     "paragraph; sentences: at the line) and each piece is a separate document "
                     "for pairing, including the random-document pool, so a huge single file "
                     "streams in bounded memory. Inputs whose documents are shorter give the "
                     "same output as without cutting.")
flags.DEFINE_integer("task_tokens", 200_000, "Input tokens per worker task (about).")
flags.DEFINE_float("progress_seconds", 30.0, "Seconds between progress log lines.")
flags.DEFINE_string("summary_file", None,
                    "JSON summary path (default: <stem>.summary.json beside the first output, "
                    "<stem> = its name without shard suffix and extension: data/train.tfrecord "
                    "and data/train@8 -> data/train.summary.json; an output without extension, "
                    "data/train -> data/_train.summary.json).")


def options_from_flags() -> runner.RunOptions:
    """Flags -> RunOptions (the only place flags are read)."""
    return runner.RunOptions(
        spm_model_file=FLAGS.spm_model_file,
        vocab_file=FLAGS.vocab_file,
        zh_whole_word_mask=FLAGS.zh_whole_word_mask,
        reader=ReaderOptions(input_format=FLAGS.input_format,
                             do_lower_case=FLAGS.do_lower_case,
                             decode_errors=FLAGS.decode_errors,
                             strip_gutenberg=FLAGS.strip_gutenberg),
        instances=pipeline.InstanceOptions(
            max_seq_length=FLAGS.max_seq_length,
            short_seq_prob=FLAGS.short_seq_prob,
            random_next_sentence=FLAGS.random_next_sentence,
            dupe_factor=FLAGS.dupe_factor,
            random_seed=FLAGS.random_seed,
            masking=masking.MaskingOptions(
                masked_lm_prob=FLAGS.masked_lm_prob,
                max_predictions_per_seq=FLAGS.max_predictions_per_seq,
                ngram=FLAGS.ngram,
                favor_shorter_ngram=FLAGS.favor_shorter_ngram,
                do_whole_word_mask=FLAGS.do_whole_word_mask)),
        layout=pipeline.LayoutOptions(
            shuffle_buckets_per_file=FLAGS.shuffle_buckets_per_file,
            block_documents=FLAGS.block_documents,
            block_chars=FLAGS.block_chars,
            task_tokens=FLAGS.task_tokens),
        num_workers=FLAGS.num_workers,
        progress_seconds=FLAGS.progress_seconds)


def main(argv):
    if len(argv) > 1:
        raise UserValueError(f"unexpected arguments: {' '.join(argv[1:])} (every input is a "
                             "flag; see --help)")
    logging.getLogger("data_prep").setLevel(logging.INFO)
    log = logging.getLogger("data_prep").info
    if not FLAGS.spm_model_file and not FLAGS.vocab_file:
        raise UserValueError("no vocabulary: pass --spm_model_file (SentencePiece) or "
                             "--vocab_file (WordPiece)")
    if FLAGS.spm_model_file and FLAGS.vocab_file:
        log(f"both --spm_model_file and --vocab_file given: using the SentencePiece model "
            f"{FLAGS.spm_model_file} (as the original), --vocab_file is ignored")
    # The vocabulary named by the flags, checked here for a clear error (the workers load it).
    tokenization.load_tokenizer(vocab_file=FLAGS.vocab_file, spm_model_file=FLAGS.spm_model_file,
                                do_lower_case=FLAGS.do_lower_case)
    if FLAGS.num_workers < 1:
        raise UserValueError(f"--num_workers={FLAGS.num_workers} must be >= 1")
    if FLAGS.zh_whole_word_mask:
        try:
            zh_words.load_segmenter()
        except ImportError as error:  # load_segmenter's message names the flag and the fix
            raise UserError(str(error)) from error
    options = options_from_flags()
    output_files = runner.expand_output_spec(FLAGS.output_file)
    for path in output_files:
        check_writable(path, "--output_file")
    if FLAGS.runner == "local":
        input_files = cli.for_flag("--input_file", expand_input_patterns, FLAGS.input_file)
        log(f"{len(input_files)} input file(s), {len(output_files)} output file(s), "
            f"{options.num_workers} worker(s)")
        runner.create_pretraining_data(input_files, output_files, options,
                                       summary_file=FLAGS.summary_file, log=log)
    else:
        try:
            from data_prep import beam_pipeline  # optional dependency
        except ImportError as error:
            raise UserError(f"--runner={FLAGS.runner} needs Apache Beam: pip install .[beam] "
                            f"({error})") from error
        beam_pipeline.run(FLAGS.input_file, output_files, options,
                          runner=FLAGS.runner,
                          pipeline_args=FLAGS.beam_pipeline_options.split(),
                          summary_file=FLAGS.summary_file)


if __name__ == "__main__":
    flags.mark_flag_as_required("input_file")
    flags.mark_flag_as_required("output_file")
    cli.run(main, interrupted="outputs are written atomically, so none is partial; rerun the "
                              "same command to make them all")
