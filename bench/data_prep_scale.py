"""Peak memory and wall time of create_pretraining_data for one big input file.

Builds single text files of the requested sizes by concatenating the bodies of
the shared Gutenberg books (text between the START/END markers, so every
version of the reader keeps all of it) again and again, then runs the CLI once
per (format, size) in a fresh process with 2 workers, max_seq_length 128,
dupe_factor 1 and 64 output files (one shuffle bucket stays small), and
samples the resident memory of the whole process tree (main process plus
workers, summed, from /proc every 0.1 s).

Usage (from the repository to measure, e.g. an old checkout):
  python bench/data_prep_scale.py --sizes_mb 10,100 --formats raw,sentences \
      --work_dir /tmp/dp_scale [--extra_flags='--block_chars=4000000']
Prints one JSON line per run: format, size (bytes), peak RSS (MB), wall (s),
input tokens, output tokens, tokens/s (output tokens / wall).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
SHARED = pathlib.Path(os.environ.get("ALBERT_TF_SHARED_DATA", REPO.parent / "shared" / "data"))
if not SHARED.exists():
    SHARED = pathlib.Path("/work/shared/data")


def book_bodies() -> bytes:
    """The shared books' text between their START and END markers, blank line between books."""
    bodies = []
    for path in sorted((SHARED / "corpus" / "gutenberg").glob("*.txt")):
        text = path.read_bytes().decode("utf-8-sig").replace("\r\n", "\n")
        start = re.search(r"^\*\*\* ?START OF.*$", text, re.M)
        # The old-style footer line ("End of the Project Gutenberg EBook of X") comes first.
        end = re.search(r"^\*\*\* ?END OF|^End of (the )?Project Gutenberg", text,
                        re.M | re.I)
        bodies.append(text[start.end():end.start()].strip("\n"))
    return ("\n\n".join(bodies) + "\n\n").encode("utf-8")


def build_file(path: pathlib.Path, size: int) -> None:
    """Writes `size` bytes (about: whole copies, the last cut at a line end) of book bodies."""
    unit = book_bodies()
    with open(path, "wb") as out:
        written = 0
        while written < size:
            piece = unit[:size - written]
            if len(piece) < len(unit):
                piece = piece[:piece.rfind(b"\n") + 1]
                if not piece:
                    break
            out.write(piece)
            written += len(piece)


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and all its descendants (from /proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo.extend(children.get(current, []))
        try:
            with open(f"/proc/{current}/statm") as handle:
                total += int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            pass
    return total


def run_once(input_path: pathlib.Path, fmt: str, out_dir: pathlib.Path, spm: str,
             extra: list) -> dict:
    """One CLI run; returns peak tree RSS (MB), wall seconds and the summary's token counts."""
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    command = [sys.executable, "-m", "data_prep.create_pretraining_data",
               f"--input_file={input_path}", f"--input_format={fmt}",
               f"--output_file={out_dir}/train@64", f"--spm_model_file={spm}",
               "--max_seq_length=128", "--dupe_factor=1", "--num_workers=2",
               "--progress_seconds=600"] + extra
    start = time.monotonic()
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=open(out_dir.parent / f"log-{fmt}.txt", "w"))
    peak = 0
    while process.poll() is None:
        peak = max(peak, tree_rss(process.pid))
        time.sleep(0.1)
    wall = time.monotonic() - start
    if process.returncode:
        raise SystemExit(f"run failed ({process.returncode}): {' '.join(command)}")
    summary = json.loads((out_dir / "train.summary.json").read_text())
    shutil.rmtree(out_dir, ignore_errors=True)
    return {"peak_rss_mb": round(peak / 2**20), "wall_s": round(wall, 1),
            "input_tokens": summary["input_tokens"], "tokens": summary["tokens"],
            "tokens_per_s": round(summary["tokens"] / wall)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes_mb", default="10,100")
    parser.add_argument("--formats", default="raw,sentences")
    parser.add_argument("--work_dir", default="/tmp/dp_scale")
    parser.add_argument("--spm_model", default=str(SHARED / "spm" / "albert_style_pd8k.model"))
    parser.add_argument("--extra_flags", default="")
    parser.add_argument("--keep_inputs", action="store_true")
    args = parser.parse_args()
    work = pathlib.Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    for size_mb in (int(s) for s in args.sizes_mb.split(",")):
        path = work / f"corpus_{size_mb}mb.txt"
        if not path.exists():
            build_file(path, size_mb * 10**6)
        for fmt in args.formats.split(","):
            row = run_once(path, fmt, work / "out", args.spm_model, args.extra_flags.split())
            print(json.dumps({"format": fmt, "size_mb": size_mb, "bytes": path.stat().st_size,
                              "extra": args.extra_flags, **row}), flush=True)
        if not args.keep_inputs:
            path.unlink()


if __name__ == "__main__":
    main()
