"""docs/keras.md's Python blocks run, in order, in one namespace: the guide a Keras user
follows cannot drift from the library. The model is a random-weight Hugging Face masked-LM
directory at albert-base-v2 (the name the guide uses)."""
import pathlib
import re

import numpy as np
import pytest

from tests.helpers import hf_models

GUIDE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "keras.md"


def python_blocks(text: str):
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.slow  # ~60 s on AMD EPYC Zen 3
def test_every_python_block_of_the_guide_runs(tmp_path, monkeypatch, official_spm):
    hf_models.write_hf_dir(str(tmp_path / "albert-base-v2"), "masked_lm", official_spm, seed=7)
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks(GUIDE.read_text())
    assert len(blocks) >= 5
    namespace = {}
    for block in blocks:
        exec(compile(block, str(GUIDE), "exec"), namespace)
    assert namespace["logits"].shape == (1, 2)
    assert namespace["pair_logits"].shape == (2, 2)
    assert set(namespace["scores"]) == {"loss", "accuracy"}
    np.testing.assert_allclose(namespace["restored_logits"],
                               namespace["classifier"].predict(["what a film"], verbose=0),
                               rtol=1e-5, atol=1e-6)
    assert namespace["answer"][0]["label"] in ("negative", "positive")
    assert namespace["early_logits"].shape == (8, 2)


def test_the_guide_has_its_blocks():
    """The guide is found and its blocks parse (the run above is in the slow suite)."""
    for block in python_blocks(GUIDE.read_text()):
        compile(block, str(GUIDE), "exec")
