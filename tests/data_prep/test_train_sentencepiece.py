"""data_prep.train_sentencepiece: ALBERT's id layout on a tiny vocabulary."""
import os
import subprocess
import sys

import pytest

from data_prep import train_sentencepiece as ts
from data_prep.text_input import InputError, ReaderOptions

from tests.conftest import REPO_ROOT

REPO = str(REPO_ROOT)


def test_symbol_list_quotes_double_quote_for_sentencepiece():
    assert ts.spm_symbol_list('(,),",-') == '(,),"""",-'
    assert ts.spm_symbol_list("[CLS],[SEP],[MASK]") == "[CLS],[SEP],[MASK]"


def test_tiny_model_has_albert_layout(tmp_path, shared_data):
    import sentencepiece as spm
    source = shared_data / "corpus" / "gutenberg" / "pg972.txt"
    prefix = str(tmp_path / "tiny" / "m")
    written = ts.train([str(source)], prefix, ReaderOptions(input_format="raw"),
                       ts.SentencePieceOptions(vocab_size=400))
    assert written == [prefix + ".model", prefix + ".vocab"]
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    assert sp.get_piece_size() == 400
    assert [sp.id_to_piece(i) for i in range(13)] == [
        "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]",
        "(", ")", '"', "-", ".", "\u2013", "\u00a3", "\u20ac"]
    assert (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (0, 1, -1, -1)
    assert all(sp.is_control(i) for i in (2, 3, 4))
    # Lower-cased training text: no upper-case letters in any piece.
    assert not any(any(c.isupper() for c in sp.id_to_piece(i)) for i in range(5, 400))
    with open(prefix + ".vocab", encoding="utf-8") as handle:
        assert len(handle.read().splitlines()) == 400
    assert sorted(os.listdir(tmp_path / "tiny")) == ["m.model", "m.vocab"]


def test_empty_input_is_an_error(tmp_path):
    empty = tmp_path / "e.txt"
    empty.write_text("\n \n")
    with pytest.raises(InputError, match="no text"):
        ts.train([str(empty)], str(tmp_path / "m"), ReaderOptions(), ts.SentencePieceOptions())


def test_cli_help_lists_defaults():
    env = dict(os.environ, PYTHONPATH=REPO)
    done = subprocess.run([sys.executable, "-m", "data_prep.train_sentencepiece", "--helpshort"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert "(default: '30000')" in done.stdout.split("--vocab_size:")[1].split("\n  --")[0]
    assert "(default: '0.99995')" in done.stdout.split("--character_coverage:")[1]
