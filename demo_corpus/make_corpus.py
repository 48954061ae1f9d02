"""Rebuilds the demo corpus from ../shared/data/corpus (how the shipped files were made).

  python demo_corpus/make_corpus.py [--source ../shared/data/corpus/gutenberg]

For each book: decode (UTF-8, BOM and CRLF removed), drop the Project
Gutenberg header, footer and licence (data_prep.text_input.strip_gutenberg)
and the producers' notes that follow the header,
collapse runs of blank lines, then put the last ~5% of its paragraphs in
heldout/<book>.txt and the rest in train/<book>.txt. Paragraphs are separated
by one blank line; with `--input_format=raw` each file is one document.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from data_prep.text_input import iter_lines, strip_gutenberg  # noqa: E402

BOOKS = {  # file -> (title, author)
    "pg3261.txt": ("News from Nowhere", "William Morris"),
    "pg972.txt": ("The Devil's Dictionary", "Ambrose Bierce"),
    "pg14263.txt": ("Katrine", "Elinor Macartney Lane"),
    "pg15122.txt": ("The Little Colonel's Hero", "Annie Fellows Johnston"),
    "pg14881.txt": ("The Log School-House on the Columbia", "Hezekiah Butterworth"),
    "pg16351.txt": ("Critical and Historical Essays", "Edward MacDowell"),
    "pg17474.txt": ("How to Listen to Music", "H. E. Krehbiel"),
}
HELDOUT_FRACTION = 0.05


PRODUCER_NOTE = re.compile(r"produced by|gutenberg|proofreading team|html version", re.IGNORECASE)


def paragraphs(path):
    lines = (line for _, line in strip_gutenberg(iter_lines(path)))
    text = "\n".join(line.rstrip() for line in lines)
    paras = [p.strip("\n") for p in re.split(r"\n\s*\n", text) if p.strip()]
    # Producer credits and transcriber notes sit just after the START marker.
    while paras and PRODUCER_NOTE.search(paras[0]):
        paras.pop(0)
    return paras


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--source", default=os.path.join(here, "..", "..", "shared", "data",
                                                         "corpus", "gutenberg"))
    args = parser.parse_args()
    for split in ("train", "heldout"):
        os.makedirs(os.path.join(here, split), exist_ok=True)
    for name in BOOKS:
        paras = paragraphs(os.path.join(args.source, name))
        cut = len(paras) - max(1, int(len(paras) * HELDOUT_FRACTION))
        stem = os.path.splitext(name)[0]
        for split, part in (("train", paras[:cut]), ("heldout", paras[cut:])):
            with open(os.path.join(here, split, stem + ".txt"), "w", encoding="utf-8") as out:
                out.write("\n\n".join(part) + "\n")
        print(f"{name}: {len(paras)} paragraphs, {len(paras) - cut} held out")


if __name__ == "__main__":
    main()
