"""Throughput of data_prep/create_pretraining_data.py (local runner) for 1 and 2 workers.

Setup of the reference measurement in issue #4: 3.2 MB of one-sentence-per-line
book text, max_seq_length 128, max_predictions_per_seq 20, dupe_factor 5. The
original script (TF 2.21 compat.v1, same machine kind) needed 39 s of wall time
for 33,294 instances / 3.9 M tokens, about 100 k tokens/s.

The input is rebuilt from ../shared/data/corpus/gutenberg (headers stripped,
paragraphs split into sentences, one blank line between books, cut at 3.2 MB).
Each configuration runs the CLI in a fresh process; "wall" includes interpreter
start and imports, like the reference. Tokens are real (non-padding) tokens
written. Also checks that the outputs of all worker counts are byte-identical.

Usage: .venv/bin/python bench/data_prep.py [--workers 1,2] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
SHARED = pathlib.Path(os.environ.get("ALBERT_TF_SHARED_DATA", REPO.parent / "shared" / "data"))
REFERENCE_TOKENS_PER_SECOND = 3.9e6 / 39.0


def build_corpus(path: pathlib.Path, size: int = 3_200_000) -> None:
    """Writes the one-sentence-per-line benchmark corpus."""
    sys.path.insert(0, str(REPO))
    from data_prep.sentence_split import split_sentences
    from data_prep.text_input import iter_lines, strip_gutenberg

    books = []
    for source in sorted((SHARED / "corpus" / "gutenberg").glob("*.txt")):
        sentences, paragraph = [], []
        for _, line in strip_gutenberg(iter_lines(str(source))):
            if line.strip():
                paragraph.append(line)
            elif paragraph:
                sentences.extend(split_sentences(" ".join(paragraph)))
                paragraph = []
        sentences.extend(split_sentences(" ".join(paragraph)))
        books.append("\n".join(sentences))
    data = ("\n\n".join(books) + "\n").encode("utf-8")[:size]
    path.write_bytes(data.decode("utf-8", "ignore").encode("utf-8"))


def run_once(corpus: pathlib.Path, output: pathlib.Path, workers: int) -> dict:
    cmd = [sys.executable, "-m", "data_prep.create_pretraining_data",
           f"--input_file={corpus}", f"--output_file={output}",
           f"--spm_model_file={SHARED / 'spm' / 'albert_style_pd8k.model'}",
           "--max_seq_length=128", "--max_predictions_per_seq=20", "--dupe_factor=5",
           f"--num_workers={workers}"]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=REPO,
                   env=dict(os.environ, PYTHONPATH=str(REPO)))
    wall = time.perf_counter() - start
    summary = json.loads(output.with_suffix(".summary.json").read_text())  # out-N.summary.json
    return {"wall": wall, "pipeline": summary["seconds"], "instances": summary["instances"],
            "tokens": summary["tokens"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not (SHARED / "corpus").is_dir():
        sys.exit(f"shared data not found at {SHARED}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        corpus = tmp / "books.txt"
        build_corpus(corpus)
        print(f"input: {corpus.stat().st_size:,} bytes; seq 128, 20 predictions, dupe_factor 5; "
              f"{os.cpu_count()} CPUs; best of {args.repeats}")
        print(f"{'workers':>7} {'instances':>9} {'tokens':>10} {'wall s':>7} {'tok/s (wall)':>13} "
              f"{'pipeline s':>10} {'tok/s (pipeline)':>16} {'x original':>10}")
        outputs = {}
        for workers in (int(w) for w in args.workers.split(",")):
            output = tmp / f"out-{workers}.tfrecord"
            runs = [run_once(corpus, output, workers) for _ in range(args.repeats)]
            best = min(runs, key=lambda r: r["wall"])
            wall_rate = best["tokens"] / best["wall"]
            print(f"{workers:>7} {best['instances']:>9,} {best['tokens']:>10,} "
                  f"{best['wall']:>7.2f} {wall_rate:>13,.0f} {best['pipeline']:>10.2f} "
                  f"{best['tokens'] / best['pipeline']:>16,.0f} "
                  f"{wall_rate / REFERENCE_TOKENS_PER_SECOND:>10.1f}")
            outputs[workers] = output.read_bytes()
        identical = len(set(outputs.values())) == 1
        print(f"outputs byte-identical across worker counts: {identical}")
        print(f"original (reference): 33,294 instances, 3.9 M tokens, 39 s wall, "
              f"{REFERENCE_TOKENS_PER_SECOND:,.0f} tokens/s")
        if not identical:
            sys.exit(1)


if __name__ == "__main__":
    main()
