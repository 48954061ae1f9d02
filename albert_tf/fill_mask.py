"""Fill in `[MASK]` tokens with the masked-LM head of an official-style model directory.

  python -m albert_tf.fill_mask --model_dir DIR [--top_k 5] "The [MASK] of France is Paris."

DIR holds `albert_config.json`, a SentencePiece `*.model` and a TF1 checkpoint
(`model.ckpt-best.*` or any prefix named by a `checkpoint` file): an official
download such as `albert_base_v2/`, or the output directory of run_pretraining.py.
Prints, for each `[MASK]` of each sentence, the top-k pieces and probabilities.
"""
from __future__ import annotations

import os
from typing import List, Sequence, Tuple

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags  # noqa: E402

from albert_tf.tokenization import SPIECE_UNDERLINE  # noqa: E402


def readable(piece: str) -> str:
    """A SentencePiece piece as text: the word-start marker becomes a leading space."""
    return piece.replace(SPIECE_UNDERLINE, " ").strip() or piece


def predict(model_dir: str, sentences: Sequence[str], top_k: int = 5
            ) -> List[List[List[Tuple[str, float]]]]:
    """For each sentence, for each `[MASK]`, the top_k (piece, probability) pairs."""
    from albert_tf.checkpoints import from_official_dir

    official = from_official_dir(model_dir)
    return [official.fill_mask(sentence, top_k=top_k) for sentence in sentences]


def format_predictions(sentence: str, predictions) -> str:
    lines = [sentence]
    for index, candidates in enumerate(predictions):
        shown = ", ".join(f"{readable(piece)} ({prob:.3f})" for piece, prob in candidates)
        lines.append(f"  [MASK] #{index + 1}: {shown}")
    return "\n".join(lines)


def main(argv):
    sentences = argv[1:]
    if not sentences:
        raise app.UsageError('give at least one sentence with [MASK], e.g. '
                             '"The [MASK] of France is Paris."')
    missing = [s for s in sentences if "[MASK]" not in s]
    if missing:
        raise app.UsageError(f"no [MASK] in: {missing[0]!r}")
    if not flags.FLAGS.model_dir:
        raise app.UsageError("--model_dir is required")
    results = predict(flags.FLAGS.model_dir, sentences, flags.FLAGS.top_k)
    for sentence, predictions in zip(sentences, results):
        print(format_predictions(sentence, predictions))


if __name__ == "__main__":
    flags.DEFINE_string("model_dir", None, "Official-style model directory.")
    flags.DEFINE_integer("top_k", 5, "Candidates shown per [MASK].")
    app.run(main)
