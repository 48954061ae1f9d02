"""GLUE data for the job tests, cut from ../shared/data."""
import pathlib

import pytest


def sst2_split(shared_data: pathlib.Path, root: pathlib.Path, train: int, dev: int
               ) -> pathlib.Path:
    """<root>/data/SST-2/{train,dev}.tsv: the first `train` sentences of the shared SST-2
    dev.tsv, then the next `dev` (each file with its header); returns <root>/data. Skips
    the test when the file is absent."""
    source = shared_data / "glue" / "SST-2" / "dev.tsv"
    if not source.exists():
        pytest.skip(f"{source} not found")
    data = root / "data" / "SST-2"
    data.mkdir(parents=True)
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    (data / "train.tsv").write_text("".join(lines[:1 + train]), encoding="utf-8")
    (data / "dev.tsv").write_text(lines[0] + "".join(lines[1 + train:1 + train + dev]),
                                  encoding="utf-8")
    return root / "data"
