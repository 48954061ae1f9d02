r"""Trains an ALBERT-style SentencePiece model (the original README's spm_train settings).

Defaults reproduce the published vocabulary's layout: unigram, <pad>=0, <unk>=1,
no <s>/</s>, control symbols [CLS] [SEP] [MASK] at ids 2-4, user-defined symbols
( ) " - . – £ €, character coverage 0.99995, shuffled input sentences (at most
10M). The text is read with the same reader as create_pretraining_data (gzip,
BOM, CRLF, Gutenberg stripping, `preprocess_text` with lower-casing), so the
model sees exactly the sentences the pretraining data is made from.
Writes <model_prefix>.model and <model_prefix>.vocab atomically.

Example:
  python -m data_prep.train_sentencepiece --input='corpus/*.txt' \
    --input_format=raw --model_prefix=out/30k-clean --vocab_size=30000
"""
from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
from typing import Iterator, List, Sequence

from absl import flags

from albert_tf import cli
from albert_tf.errors import UserValueError, check_writable
from data_prep.text_input import InputError, ReaderOptions, expand_input_patterns, iter_documents

_LOG = logging.getLogger("data_prep")
DEFAULT_USER_SYMBOLS = '(,),",-,.,\u2013,\u00a3,\u20ac'


@dataclasses.dataclass(frozen=True)
class SentencePieceOptions:
    """Trainer settings; defaults are the original's."""
    vocab_size: int = 30000
    model_type: str = "unigram"
    character_coverage: float = 0.99995
    control_symbols: str = "[CLS],[SEP],[MASK]"
    user_defined_symbols: str = DEFAULT_USER_SYMBOLS
    input_sentence_size: int = 10_000_000
    shuffle_input_sentence: bool = True
    num_threads: int = 1
    seed_sentencepiece_size: int = 1_000_000
    hard_vocab_limit: bool = True


def iter_sentences(input_files: Sequence[str], reader: ReaderOptions) -> Iterator[str]:
    """Every normalised sentence of the corpus, in order.

    Documents are read in pieces of about 64 Mi characters (the data tool's
    default --block_chars) so that one huge file is not held whole; the
    sentences stay the same (only a single paragraph longer than that would be
    cut at a line).
    """
    for document in iter_documents(input_files, reader, split_chars=64 << 20):
        yield from document.sentences


def spm_symbol_list(symbols: str) -> str:
    """A comma-separated symbol list in the CSV quoting SentencePiece's flag parser expects.

    SentencePiece splits list flags as CSV, so a bare `"` would open a quoted
    field (the original README's `(,),\",-,...` loses every symbol after `"`).
    """
    fields = []
    for symbol in symbols.split(","):
        if not symbol:
            continue
        if '"' in symbol:
            symbol = '"' + symbol.replace('"', '""') + '"'
        fields.append(symbol)
    return ",".join(fields)


def train(input_files: Sequence[str], model_prefix: str, reader: ReaderOptions,
          options: SentencePieceOptions) -> List[str]:
    """Trains the model; returns the written paths [<prefix>.model, <prefix>.vocab]."""
    import sentencepiece as spm
    from data_prep import fileio

    sentences = iter_sentences(input_files, reader)
    first = next(sentences, None)
    if first is None:
        raise InputError(f"no text in {', '.join(input_files)}")

    def with_first():
        yield first
        yield from sentences

    directory = os.path.dirname(os.path.abspath(model_prefix))
    os.makedirs(directory, exist_ok=True)
    tmp_dir = tempfile.mkdtemp(prefix=".spm-", dir=directory)
    try:
        tmp_prefix = os.path.join(tmp_dir, "model")
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=with_first(),
                model_prefix=tmp_prefix,
                vocab_size=options.vocab_size,
                model_type=options.model_type,
                pad_id=0, unk_id=1, bos_id=-1, eos_id=-1,
                control_symbols=spm_symbol_list(options.control_symbols),
                user_defined_symbols=spm_symbol_list(options.user_defined_symbols),
                character_coverage=options.character_coverage,
                input_sentence_size=options.input_sentence_size,
                shuffle_input_sentence=options.shuffle_input_sentence,
                num_threads=options.num_threads,
                seed_sentencepiece_size=options.seed_sentencepiece_size,
                hard_vocab_limit=options.hard_vocab_limit,
                minloglevel=1)
        except RuntimeError as error:  # the trainer's status: corpus and settings disagree
            raise UserValueError(f"SentencePiece training failed: {error}") from error
        written = []
        for suffix in (".model", ".vocab"):
            with open(tmp_prefix + suffix, "rb") as handle:
                data = handle.read()
            with fileio.atomic_open(model_prefix + suffix, "wb") as out:
                out.write(data)
            written.append(model_prefix + suffix)
        return written
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)


FLAGS = flags.FLAGS
flags.DEFINE_string("input", None, "Input text file(s): comma-separated paths or globs.")
flags.DEFINE_string("model_prefix", None, "Output prefix: writes <prefix>.model and .vocab.")
flags.DEFINE_integer("vocab_size", 30000, "Number of pieces.")
flags.DEFINE_enum("input_format", "sentences", ["sentences", "raw"],
                  "sentences: one sentence per line; raw: paragraphs split into sentences.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case (as create_pretraining_data does).")
flags.DEFINE_enum("decode_errors", "strict", ["strict", "replace"],
                  "Stop on non-UTF-8 bytes (strict) or replace them (replace).")
flags.DEFINE_bool("strip_gutenberg", True, "Drop Project Gutenberg headers and footers.")
flags.DEFINE_string("model_type", "unigram", "unigram (ALBERT) or bpe, char, word.")
flags.DEFINE_float("character_coverage", 0.99995, "Fraction of characters covered.")
flags.DEFINE_string("control_symbols", "[CLS],[SEP],[MASK]", "Control symbols (ids 2, 3, ...).")
flags.DEFINE_string("user_defined_symbols", DEFAULT_USER_SYMBOLS, "User-defined symbols.")
flags.DEFINE_integer("input_sentence_size", 10_000_000, "Sentences sampled for training.")
flags.DEFINE_bool("shuffle_input_sentence", True, "Shuffle before sampling sentences.")
flags.DEFINE_integer("num_threads", 1, "Trainer threads (1 gives reproducible models).")
flags.DEFINE_bool("hard_vocab_limit", True,
                  "Fail if the corpus cannot give vocab_size pieces (false: fewer is OK).")



def main(argv):
    if len(argv) > 1:
        raise UserValueError(f"unexpected arguments: {' '.join(argv[1:])} (every input is a "
                             "flag; see --help)")
    logging.getLogger("data_prep").setLevel(logging.INFO)
    if FLAGS.vocab_size < 1:
        raise UserValueError(f"--vocab_size={FLAGS.vocab_size} must be >= 1")
    if os.path.isdir(FLAGS.model_prefix) or FLAGS.model_prefix.endswith(os.sep):
        raise UserValueError(f"--model_prefix={FLAGS.model_prefix} is a directory; give a "
                             "path prefix such as out/30k-clean (writes .model and .vocab)")
    check_writable(FLAGS.model_prefix, "--model_prefix")
    files = cli.for_flag("--input", expand_input_patterns, FLAGS.input)
    reader = ReaderOptions(input_format=FLAGS.input_format, do_lower_case=FLAGS.do_lower_case,
                           decode_errors=FLAGS.decode_errors,
                           strip_gutenberg=FLAGS.strip_gutenberg)
    options = SentencePieceOptions(
        vocab_size=FLAGS.vocab_size, model_type=FLAGS.model_type,
        character_coverage=FLAGS.character_coverage, control_symbols=FLAGS.control_symbols,
        user_defined_symbols=FLAGS.user_defined_symbols,
        input_sentence_size=FLAGS.input_sentence_size,
        shuffle_input_sentence=FLAGS.shuffle_input_sentence, num_threads=FLAGS.num_threads,
        hard_vocab_limit=FLAGS.hard_vocab_limit)
    _LOG.info("training SentencePiece on %d file(s)", len(files))
    written = train(files, FLAGS.model_prefix, reader, options)
    _LOG.info("wrote %s", ", ".join(written))


if __name__ == "__main__":
    flags.mark_flag_as_required("input")
    flags.mark_flag_as_required("model_prefix")
    cli.run(main, interrupted="no model was written (the .model and .vocab appear only when "
                              "training completes); rerun the same command to start again")
