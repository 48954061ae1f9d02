"""Chinese ALBERT directories as published: Google's `albert_*_zh` and the community releases.

Each test writes a TF1 checkpoint itself with exactly the variable names of the real
`albert_base_zh` checkpoint (../shared/data/chinese/vocab/variables.txt; random values,
its weights are not available here) next to the real WordPiece vocabulary and config,
under the published file names, and checks that `from_official_dir`, `fill_mask` and
`restore_for_training` (`--init_checkpoint`) read it: every variable used, outputs equal
to the NumPy reference (relu included), fill-mask tokens readable.

The real shapes (E=128, H=768, V=21128: 10.7M floats, 43 MB) are used for the reference check;
the layout variants use a shrunk copy with the same names (E=16, H=48, I=96).
"""
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from albert_tf import AlbertClassifier, AlbertPretrainer, checkpoints
from albert_tf.checkpoints import names as tf1_names
from albert_tf.checkpoints import CheckpointMismatchError
from albert_tf.config import AlbertConfig
from tests.helpers import numpy_reference as ref
from tests.conftest import REPO_ROOT
from tests.checkpoints.test_tf1 import write_tf1_checkpoint

SENTENCE = "中国的首都是[MASK]京。"
SHRINK = {128: 16, 768: 48, 3072: 96}  # E, H, I of albert_base_zh -> the shrunk copy
# Planted in cls/predictions/output_bias so the answers are known: "北" first, "##ing" second.
PLANTED = {"北": 30.0, "##ing": 29.0}


# --- writing the published layouts ---------------------------------------------------------------


@pytest.fixture(scope="module")
def zh_files(shared_data):
    vocab_dir = shared_data / "chinese" / "vocab"
    files = {name: vocab_dir / name for name in ("vocab_chinese.txt", "albert_config.json",
                                                 "variables.txt")}
    for path in files.values():
        if not path.exists():
            pytest.skip(f"{path} not found")
    return files


def official_variables(variables_txt):
    """name -> shape of every line `name [d0, d1]` of variables.txt (as list_variables prints)."""
    shapes = {}
    for line in pathlib.Path(variables_txt).read_text().splitlines():
        name, _, dims = line.partition(" ")
        dims = dims.strip().strip("[]")
        shapes[name] = tuple(int(d) for d in dims.split(",")) if dims else ()
    return shapes


def vocab_lines(zh_files):
    """The vocabulary, one token per "\n"-terminated line (str.splitlines would also split
    at the U+2028 that is itself an entry of vocab_chinese.txt)."""
    text = pathlib.Path(zh_files["vocab_chinese.txt"]).read_text(encoding="utf-8")
    return text.rstrip("\n").split("\n")


def random_official_weights(shapes, vocab, seed):
    """Random values for the official names; global_step an int64 scalar as in the download."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in sorted(shapes.items()):
        if name == "global_step":
            weights[name] = np.int64(125000)
            continue
        scale = 0.05 if len(shape) > 1 else 0.1
        value = rng.normal(0.0, scale, shape)
        if name.endswith("gamma"):
            value += 1.0
        weights[name] = value.astype("float32")
    bias = weights["cls/predictions/output_bias"]
    for token, boost in PLANTED.items():
        bias[vocab.index(token)] += boost
    return weights


def write_zh_dir(directory, zh_files, weights, config, config_name="albert_config.json",
                 prefix="model.ckpt-best", vocab_name="vocab_chinese.txt", checkpoint_file=None):
    """A download directory: config, vocabulary, checkpoint `prefix.*`, optional `checkpoint`."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    config.to_json_file(str(directory / config_name))
    shutil.copyfile(zh_files["vocab_chinese.txt"], directory / vocab_name)
    write_tf1_checkpoint(str(directory / prefix), weights)
    if checkpoint_file is not None:
        (directory / "checkpoint").write_text(
            f'model_checkpoint_path: "{checkpoint_file}"\n'
            f'all_model_checkpoint_paths: "{checkpoint_file}"\n')
    return directory


@pytest.fixture(scope="module")
def real_dir(tmp_path_factory, zh_files):
    """albert_base_zh as published: albert_config.json, model.ckpt-best.*, vocab_chinese.txt."""
    shapes = official_variables(zh_files["variables.txt"])
    weights = random_official_weights(shapes, vocab_lines(zh_files), seed=0)
    config = AlbertConfig.from_json_file(str(zh_files["albert_config.json"]))
    directory = tmp_path_factory.mktemp("albert_base_zh")
    write_zh_dir(directory, zh_files, weights, config)
    # The config byte-identical to the published one.
    shutil.copyfile(zh_files["albert_config.json"], directory / "albert_config.json")
    return directory, config, weights


@pytest.fixture(scope="module")
def small(zh_files):
    """The same names with E, H, I shrunk (and the real vocabulary size): config, weights."""
    shapes = {name: tuple(SHRINK.get(d, d) for d in shape)
              for name, shape in official_variables(zh_files["variables.txt"]).items()}
    values = AlbertConfig.from_json_file(str(zh_files["albert_config.json"])).to_dict()
    values.update(embedding_size=16, hidden_size=48, intermediate_size=96)
    return AlbertConfig.from_dict(values), random_official_weights(shapes, vocab_lines(zh_files), 1)


def expected_ids(zh_files):
    """The ids of SENTENCE read straight from the vocabulary file: one per character."""
    index = {token: i for i, token in enumerate(vocab_lines(zh_files))}
    before, after = SENTENCE.split("[MASK]")
    return ([index["[CLS]"]] + [index[c] for c in before] + [index["[MASK]"]]
            + [index[c] for c in after] + [index["[SEP]"]]), 1 + len(before)


def reference_sequence(weights, config, ids, hidden_act=None):
    cfg = dict(config.to_dict(), **({"hidden_act": hidden_act} if hidden_act else {}))
    arrays = {k: v for k, v in weights.items() if k != "global_step"}
    return ref.encoder_forward(arrays, cfg, np.array([ids]))[0]


# --- the real shapes: load, NumPy reference, fill-mask -------------------------------------------


def test_real_albert_base_zh_layout_loads_and_matches_numpy(real_dir, zh_files):
    directory, config, weights = real_dir
    assert len(weights) == 33 and weights["bert/embeddings/word_embeddings"].shape == (21128, 128)
    assert config.hidden_act == "relu"
    albert = checkpoints.from_official_dir(str(directory))
    assert albert.tokenizer.kind == "wordpiece"
    assert albert.tokenizer.vocab_file == str(directory / "vocab_chinese.txt")
    # Every variable of the official file is used; only global_step is skipped.
    report = albert.report
    assert sorted(report.loaded) == sorted(n for n in weights if n != "global_step")
    assert report.missing == [] and report.unused == [] and report.skipped == ["global_step"]
    assert report.source == str(directory / "model.ckpt-best")

    ids, positions = albert.encode_with_masks(SENTENCE)
    want_ids, mask_at = expected_ids(zh_files)
    assert ids == want_ids and positions == [mask_at]

    out = albert.model({"input_ids": np.array([ids], np.int32),
                        "masked_lm_positions": np.array([positions], np.int32)})
    arrays = {k: v for k, v in weights.items() if k != "global_step"}
    seq = reference_sequence(weights, config, ids)
    np.testing.assert_allclose(out["sequence_output"].numpy(), seq, atol=2e-4, rtol=1e-4)
    # relu is what is computed: the same weights under gelu give a different sequence.
    assert np.abs(reference_sequence(weights, config, ids, "gelu") - seq).max() > 0.1
    mlm, sop = ref.pretrainer_forward(arrays, config.to_dict(), np.array([ids]), None, None,
                                      np.array([positions]))
    np.testing.assert_allclose(out["mlm_logits"].numpy(), mlm, atol=1e-3, rtol=1e-4)
    np.testing.assert_allclose(out["sop_logits"].numpy(), sop, atol=1e-4, rtol=1e-4)

    answers = albert.fill_mask(SENTENCE, top_k=5)[0]
    probs = ref.softmax(mlm[0, 0])
    vocab = vocab_lines(zh_files)
    assert [token for token, _ in answers[:2]] == ["北", "##ing"]
    np.testing.assert_allclose([p for _, p in answers], np.sort(probs)[::-1][:5], rtol=1e-3)
    np.testing.assert_allclose([p for _, p in answers],
                               [probs[vocab.index(token)] for token, _ in answers], rtol=1e-3)


# --- the published layouts (shrunk shapes, same names) -------------------------------------------


LAYOUTS = {
    # Google's albert_base_zh.tar.gz: no `checkpoint` file.
    "google": dict(),
    "google_with_checkpoint_file": dict(checkpoint_file="model.ckpt-best"),
    # brightmart/albert_zh releases: albert_config_<size>.json, albert_model.ckpt, vocab.txt.
    "community": dict(config_name="albert_config_base.json", prefix="albert_model.ckpt",
                      vocab_name="vocab.txt"),
    "community_with_checkpoint_file": dict(config_name="albert_config_tiny.json",
                                           prefix="albert_model.ckpt", vocab_name="vocab.txt",
                                           checkpoint_file="albert_model.ckpt"),
    # A `checkpoint` file naming a path on the machine that wrote it.
    "community_foreign_checkpoint_file": dict(
        config_name="albert_config_base.json", prefix="albert_model.ckpt",
        vocab_name="vocab.txt", checkpoint_file="/home/someone/albert_zh/albert_model.ckpt"),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_published_layouts(tmp_path, zh_files, small, layout):
    config, weights = small
    spec = LAYOUTS[layout]
    directory = write_zh_dir(tmp_path / layout, zh_files, weights, config, **spec)
    albert = checkpoints.from_official_dir(str(directory))
    assert albert.config.hidden_size == 48 and albert.config.hidden_act == "relu"
    assert albert.tokenizer.vocab_file == str(directory / spec.get("vocab_name",
                                                                   "vocab_chinese.txt"))
    assert albert.report.source == str(directory / spec.get("prefix", "model.ckpt-best"))
    assert len(albert.report.loaded) == len(weights) - 1 and not albert.report.missing \
        and not albert.report.unused
    ids, _ = albert.encode_with_masks(SENTENCE)
    assert ids == expected_ids(zh_files)[0]
    out = albert.model({"input_ids": np.array([ids], np.int32),
                        "masked_lm_positions": np.zeros((1, 1), np.int32)})
    np.testing.assert_allclose(out["sequence_output"].numpy(),
                               reference_sequence(weights, config, ids), atol=1e-4, rtol=1e-4)


def test_init_checkpoint_directory_for_fine_tuning(tmp_path, zh_files, small):
    """`--init_checkpoint=<dir>` of run_classifier / run_pretraining: restore_for_training."""
    config, weights = small
    directory = write_zh_dir(tmp_path / "zh", zh_files, weights, config,
                             **LAYOUTS["community_foreign_checkpoint_file"])
    assert checkpoints.detect_format(str(directory)) == "tf1"
    model = AlbertClassifier(config, num_labels=3)
    report = checkpoints.restore_for_training(model, str(directory))
    assert report.missing == ["output_weights", "output_bias"]
    assert sorted(report.unused) == sorted(n for n in weights if n.startswith("cls/"))
    for name, var in tf1_names.variables_for(model).items():
        if name in weights:
            np.testing.assert_array_equal(var.numpy(), weights[name], err_msg=name)
    pretrainer = AlbertPretrainer(config)
    assert len(checkpoints.restore_for_training(pretrainer, str(directory)).loaded) == \
        len(weights) - 1


@pytest.mark.slow  # 12 s
def test_exported_saved_model_directory_reads_back(tmp_path, zh_files, small):
    """hub_export with a WordPiece vocabulary: assets/ hold the config and vocab_chinese.txt."""
    from albert_tf.export import hub as hub_export

    config, weights = small
    directory = write_zh_dir(tmp_path / "zh", zh_files, weights, config)
    albert = checkpoints.from_official_dir(str(directory))
    export_dir = hub_export.export_pretrainer(albert.model, str(directory / "albert_config.json"),
                                              str(directory / "vocab_chinese.txt"),
                                              str(tmp_path / "export"))
    again = checkpoints.from_official_dir(export_dir)
    assert again.tokenizer.kind == "wordpiece"
    assert again.tokenizer.vocab_file == os.path.join(export_dir, "assets", "vocab_chinese.txt")
    assert len(again.report.loaded) == len(weights) - 1
    assert again.fill_mask(SENTENCE, top_k=3) == albert.fill_mask(SENTENCE, top_k=3)


# --- fill-mask on the command line ---------------------------------------------------------------


def run_fill_mask(*args):
    return subprocess.run([sys.executable, "-m", "albert_tf.fill_mask", *args],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)


@pytest.mark.slow  # 11 s
def test_fill_mask_cli_prints_readable_chinese_answers(tmp_path, zh_files, small):
    config, weights = small
    directory = write_zh_dir(tmp_path / "zh", zh_files, weights, config,
                             **LAYOUTS["community"])
    done = run_fill_mask(f"--model_dir={directory}", "--top_k=3", SENTENCE,
                         "我[MASK]欢跑步，[MASK]。")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0] == SENTENCE and lines[2] == "我[MASK]欢跑步，[MASK]。"
    # The planted answers, "##ing" shown as the text it adds.
    for line in (lines[1], lines[3], lines[4]):
        assert line.startswith("  [MASK] #") and line.count("(") == 3
        assert ": 北 (0." in line and ", ing (0." in line and "##" not in line
    assert lines[3].startswith("  [MASK] #1:") and lines[4].startswith("  [MASK] #2:")

    os.remove(directory / "vocab.txt")
    bad = run_fill_mask(f"--model_dir={directory}", SENTENCE)
    assert bad.returncode == 2  # a user error (albert_tf/errors.py)
    assert f"{directory}: no vocabulary" in bad.stderr and "vocab.txt" in bad.stderr
    assert "Traceback" not in bad.stderr


# --- errors --------------------------------------------------------------------------------------


def test_vocabulary_smaller_than_the_checkpoint(tmp_path, zh_files, small):
    config, weights = small
    directory = write_zh_dir(tmp_path / "zh", zh_files, weights, config, **LAYOUTS["community"])
    lines = vocab_lines(zh_files)[:21000]
    (directory / "vocab.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(CheckpointMismatchError) as err:
        checkpoints.from_official_dir(str(directory))
    message = str(err.value)
    assert f"the vocabulary {directory / 'vocab.txt'} has 21000 tokens" in message
    assert f"the config {directory / 'albert_config_base.json'} has 21128 vocab_size" in message
    assert (f"the checkpoint {directory / 'albert_model.ckpt'} has 21128 rows of "
            "bert/embeddings/word_embeddings [21128, 16]") in message


def test_config_vocab_size_differs_from_vocabulary(tmp_path, zh_files, small):
    config, weights = small
    directory = write_zh_dir(tmp_path / "zh", zh_files, weights, config.replace(vocab_size=30000))
    with pytest.raises(CheckpointMismatchError,
                       match=r"vocab_chinese.txt has 21128 tokens; the config .*"
                             r"albert_config.json has 30000 vocab_size"):
        checkpoints.from_official_dir(str(directory))


def test_missing_files_name_the_directory_and_what_was_looked_for(tmp_path, zh_files, small):
    config, weights = small
    directory = write_zh_dir(tmp_path / "zh", zh_files, weights, config)
    os.remove(directory / "vocab_chinese.txt")
    with pytest.raises(FileNotFoundError,
                       match=rf"{directory}: no vocabulary \(looked for a SentencePiece "
                             r"30k-clean.model or \*.model and a WordPiece vocab_chinese.txt or "
                             r"vocab.txt"):
        checkpoints.from_official_dir(str(directory))
    shutil.copyfile(zh_files["vocab_chinese.txt"], directory / "vocab.txt")
    os.remove(directory / "albert_config.json")
    with pytest.raises(FileNotFoundError, match=rf"{directory}: no config file \(looked for "
                                                r"albert_config.json and albert_config_\*.json"):
        checkpoints.from_official_dir(str(directory))
    config.to_json_file(str(directory / "albert_config_large.json"))
    for leftover in directory.glob("model.ckpt-best.*"):
        os.remove(leftover)
    with pytest.raises(FileNotFoundError,
                       match=rf"{directory}: no checkpoint in this directory .*"
                             r"model.ckpt-best.index, albert_model.ckpt.index"):
        checkpoints.from_official_dir(str(directory))


def test_several_configs_are_an_error_listing_them(tmp_path, zh_files, small):
    config, weights = small
    directory = write_zh_dir(tmp_path / "zh", zh_files, weights, config)
    config.to_json_file(str(directory / "albert_config_base.json"))
    with pytest.raises(ValueError, match=r"several config files \(albert_config.json, "
                                         r"albert_config_base.json\)"):
        checkpoints.from_official_dir(str(directory))
    os.remove(directory / "albert_config.json")
    config.to_json_file(str(directory / "albert_config_tiny.json"))
    with pytest.raises(ValueError, match=r"\(albert_config_base.json, albert_config_tiny.json\)"):
        checkpoints.find_config_file(str(directory))


def test_vocabulary_choice(tmp_path, zh_files, shared_data):
    """SentencePiece wins over WordPiece (as --spm_model_file does); two different WordPiece
    files are an error; the same file under both names is not."""
    directory = tmp_path / "v"
    directory.mkdir()
    shutil.copyfile(zh_files["vocab_chinese.txt"], directory / "vocab_chinese.txt")
    shutil.copyfile(zh_files["vocab_chinese.txt"], directory / "vocab.txt")
    assert checkpoints.find_vocabulary(str(directory)) == (
        "wordpiece", str(directory / "vocab_chinese.txt"))
    (directory / "vocab.txt").write_text("[PAD]\n[UNK]\n", encoding="utf-8")
    with pytest.raises(ValueError, match="vocab_chinese.txt and vocab.txt differ"):
        checkpoints.find_vocabulary(str(directory))
    spm_model = shared_data / "spm_official" / "30k-clean.model"
    if spm_model.exists():
        shutil.copyfile(spm_model, directory / "30k-clean.model")
        assert checkpoints.find_vocabulary(str(directory)) == (
            "sentencepiece", str(directory / "30k-clean.model"))


def test_english_download_with_the_real_sentencepiece_model(tmp_path, shared_data):
    """albert_base_v2's layout (30k-clean.model, no `checkpoint` file) is read as before."""
    spm_model = shared_data / "spm_official" / "30k-clean.model"
    if not spm_model.exists():
        pytest.skip(f"{spm_model} not found")
    from tests.checkpoints.test_tf1 import official_weights
    from tests.modeling.test_numerics import tiny_config

    config = tiny_config(vocab_size=30000, max_position_embeddings=64)
    shutil.copyfile(spm_model, tmp_path / "30k-clean.model")
    config.to_json_file(str(tmp_path / "albert_config.json"))
    weights = official_weights(config.to_dict(), seed=3)
    write_tf1_checkpoint(str(tmp_path / "model.ckpt-best"), weights)
    albert = checkpoints.from_official_dir(str(tmp_path))
    assert albert.tokenizer.kind == "sentencepiece"
    ids, positions = albert.encode_with_masks("The capital of France is [MASK].")
    pieces = albert.tokenizer.convert_ids_to_tokens(ids)
    # As in "the capital of france is paris." -> ... "▁is", "▁paris", ".": no "▁" before ".".
    assert pieces == ["[CLS]", "▁the", "▁capital", "▁of", "▁france", "▁is", "[MASK]", ".",
                      "[SEP]"] and positions == [6]
    spaced, _ = albert.encode_with_masks("The capital of France is [MASK] .")
    assert albert.tokenizer.convert_ids_to_tokens(spaced[6:]) == ["[MASK]", "▁", ".", "[SEP]"]
    mlm, _ = ref.pretrainer_forward(weights, config.to_dict(), np.array([ids]), None, None,
                                    np.array([positions]))
    answers = albert.fill_mask("The capital of France is [MASK].", top_k=3)[0]
    order = np.argsort(-mlm[0, 0])[:3]
    assert [token for token, _ in answers] == albert.tokenizer.convert_ids_to_tokens(order)
    from albert_tf import fill_mask

    shown = fill_mask.format_predictions("s", [answers], albert.tokenizer.token_text)
    assert shown.splitlines()[1] == "  [MASK] #1: " + ", ".join(
        f"{albert.tokenizer.token_text(t)} ({p:.3f})" for t, p in answers)
    assert "▁" not in shown


def test_convert_finds_the_community_config_name(tmp_path, zh_files, small):
    """`python -m albert_tf.convert --input=albert_tiny_zh` reads albert_config_*.json."""
    from albert_tf import convert

    config, weights = small
    directory = write_zh_dir(tmp_path / "albert_tiny_zh", zh_files, weights, config,
                             config_name="albert_config_tiny.json", prefix="albert_model.ckpt",
                             vocab_name="vocab.txt")
    assert convert.find_config(str(directory)).hidden_size == 48
    assert convert.find_config(str(directory / "albert_model.ckpt")).hidden_size == 48
    (directory / "albert_config_tiny.json").unlink()
    with pytest.raises(ValueError, match=r"albert_config_\*\.json\): pass --albert_config_file"):
        convert.find_config(str(directory))
