"""Fill in `[MASK]` tokens with the masked-LM head of an official-style model directory.

  python -m albert_tf.fill_mask --model_dir DIR [--top_k 5] "The [MASK] of France is Paris."
  python -m albert_tf.fill_mask --model_dir albert_base_zh "中国的首都是[MASK]京。"

DIR is what `checkpoints.from_official_dir` reads: `albert_config.json` (or one
`albert_config_*.json`), a vocabulary (a SentencePiece `*.model`, or a WordPiece
`vocab_chinese.txt` / `vocab.txt`) and a TF1 checkpoint (`model.ckpt-best.*`,
`albert_model.ckpt.*`, or any prefix named by a `checkpoint` file): an official
download such as `albert_base_v2/` or `albert_base_zh/`, a community Chinese
release, or the output directory of run_pretraining.py. Prints, for each
`[MASK]` of each sentence, the top-k tokens (as text: "▁paris" -> "paris",
"##ing" -> "ing") and their probabilities.
"""
from __future__ import annotations

import os
from typing import Callable, List, Optional, Sequence, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags  # noqa: E402

from albert_tf.tokenization import SPIECE_UNDERLINE  # noqa: E402


def readable(piece: str) -> str:
    """A SentencePiece piece as text: the word-start marker becomes a leading space."""
    return piece.replace(SPIECE_UNDERLINE, " ").strip() or piece


def predict(model_dir: str, sentences: Sequence[str], top_k: int = 5, official=None
            ) -> List[List[List[Tuple[str, float]]]]:
    """For each sentence, for each `[MASK]`, the top_k (token, probability) pairs.

    `official` (a `checkpoints.OfficialModel`) is loaded from `model_dir` when not given.
    """
    if official is None:
        from albert_tf.checkpoints import from_official_dir

        official = from_official_dir(model_dir)
    return [official.fill_mask(sentence, top_k=top_k) for sentence in sentences]


def format_predictions(sentence: str, predictions,
                       token_text: Optional[Callable[[str], str]] = None) -> str:
    """The sentence, then one line per `[MASK]`: `token (probability), ...`.

    `token_text` turns a vocabulary token into display text (`tokenizer.token_text`);
    the default reads SentencePiece pieces.
    """
    token_text = token_text or readable
    lines = [sentence]
    for index, candidates in enumerate(predictions):
        shown = ", ".join(f"{token_text(token) or token} ({prob:.3f})"
                          for token, prob in candidates)
        lines.append(f"  [MASK] #{index + 1}: {shown}")
    return "\n".join(lines)


def main(argv):
    from albert_tf.checkpoints import from_official_dir
    from albert_tf.errors import UserValueError, check_dir

    sentences = argv[1:]
    if not sentences:
        raise UserValueError('give at least one sentence with [MASK] after the flags, e.g. '
                             '"The [MASK] of France is Paris."')
    missing = [s for s in sentences if "[MASK]" not in s]
    if missing:
        raise UserValueError(f"no [MASK] in: {missing[0]!r}")
    if not flags.FLAGS.model_dir:
        raise UserValueError("--model_dir is required (see --help)")
    if flags.FLAGS.top_k < 1:
        raise UserValueError(f"--top_k must be at least 1, got {flags.FLAGS.top_k}")
    check_dir(flags.FLAGS.model_dir, "--model_dir", "model directory")
    official = from_official_dir(flags.FLAGS.model_dir, do_lower_case=flags.FLAGS.do_lower_case)
    results = predict(flags.FLAGS.model_dir, sentences, flags.FLAGS.top_k, official)
    for sentence, predictions in zip(sentences, results):
        print(format_predictions(sentence, predictions, official.tokenizer.token_text))


if __name__ == "__main__":
    from albert_tf.kernels import onednn

    onednn.configure()  # before TensorFlow is imported: it reads the oneDNN switch once
    from albert_tf import cli

    flags.DEFINE_string("model_dir", None, "Official-style model directory.")
    flags.DEFINE_integer("top_k", 5, "Candidates shown per [MASK].")
    flags.DEFINE_bool("do_lower_case", True, "Lower-case the text (the official English and "
                      "Chinese models are uncased).")
    cli.run(main)
