"""Every entry point answers a user's mistake in one line: `<prog>: error: <message>` on
stderr naming the flag or file, exit status 2, no traceback, no usage dump
(albert_tf/errors.py); a bug keeps its traceback; Ctrl-C exits 130 with one line;
--help stays complete.

Each case is a subprocess (importing TensorFlow costs seconds), so the default suite
runs one mistake of each class on the cheapest entry points and the rest is slow.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO_ROOT, SHARED_DATA
from tests.helpers.pretraining_data import make_examples, write_records

# TensorFlow's and absl-C++'s startup lines (not ours), and absl's INFO/WARNING log lines.
NOT_OURS = re.compile(r"^(WARNING: All log messages before absl::InitializeLog|[IWE]\d{4} "
                      r"|.*(oneDNN|cuda|TensorFlow binary is optimized|rebuild TensorFlow))")
SPM = SHARED_DATA / "spm" / "albert_style_pd8k.model"
TINY = dict(vocab_size=8000, embedding_size=16, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)


def run(*args, cwd=None, timeout=180):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or REPO_ROOT, env=env, timeout=timeout)


def our_lines(stderr):
    return [line for line in stderr.splitlines() if line.strip() and not NOT_OURS.match(line)]


def assert_user_error(done, prog, *needles, max_lines=3):
    """Exit 2 and a short stderr ending in one `<prog>: error: <message>` naming every needle
    (a config/checkpoint mismatch lists the fields on the next lines); no traceback."""
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = our_lines(done.stderr)
    assert len(lines) <= max_lines, lines
    starts = [i for i, line in enumerate(lines) if line.startswith(f"{prog}: error: ")]
    assert len(starts) == 1, lines
    message = "\n".join(lines[starts[0]:])
    assert ": error: " not in "".join(lines[:starts[0]]), lines
    assert "USAGE" not in done.stderr and "flags:" not in done.stderr  # no usage dump
    for needle in needles:
        assert needle in message, (needle, message)
    return message


@pytest.fixture()
def files(tmp_path):
    """A tiny config, an empty file, a directory, a text file, a non-UTF-8 file."""
    (tmp_path / "albert_config.json").write_text(json.dumps(TINY))
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "adir").mkdir()
    (tmp_path / "text.txt").write_text("A first sentence.\nA second one.\n\nAnother document.\n")
    (tmp_path / "bad.txt").write_bytes(b"a good line\nthen \xff\xfe bytes\n")
    return tmp_path


def need_spm():
    if not SPM.exists():
        pytest.skip(f"{SPM} not found (shared test data)")
    return SPM


# --- default suite: one mistake of each class, mostly on the TensorFlow-free data prep CLIs ---

def test_create_pretraining_data_mistakes(files):
    spm = need_spm()
    prog = "create_pretraining_data.py"
    base = ["-m", "data_prep.create_pretraining_data", f"--spm_model_file={spm}"]
    out = f"--output_file={files / 'out.tfrecord'}"
    # missing input
    assert_user_error(run(*base, f"--input_file={files / 'nothing*'}", out), prog,
                      "--input_file", "nothing*", "matches no file")
    # bad data at file:line
    assert_user_error(run(*base, f"--input_file={files / 'bad.txt'}", out), prog,
                      f"{files / 'bad.txt'}:2", "--decode_errors=replace")
    # a wrong flag type
    assert_user_error(run(*base, f"--input_file={files / 'text.txt'}", out,
                          "--max_seq_length=long"), prog, "--max_seq_length=long")
    # a directory where a file is expected (output and vocabulary)
    assert_user_error(run(*base, f"--input_file={files / 'text.txt'}",
                          f"--output_file={files / 'adir'}"), prog,
                      "--output_file", "is a directory")
    assert_user_error(run("-m", "data_prep.create_pretraining_data",
                          f"--spm_model_file={files / 'empty.json'}",
                          f"--input_file={files / 'text.txt'}", out), prog,
                      "--spm_model_file", "not a SentencePiece model")
    # a bad flag combination, a bad value
    assert_user_error(run(*base, f"--input_file={files / 'text.txt'}", out,
                          "--zh_whole_word_mask"), prog, "--zh_whole_word_mask", "--vocab_file")
    assert_user_error(run(*base, f"--input_file={files / 'text.txt'}",
                          f"--output_file={files / 'out'}@0"), prog, "--output_file", "@N")
    # an output under a file
    assert_user_error(run(*base, f"--input_file={files / 'text.txt'}",
                          f"--output_file={files / 'text.txt' / 'out.tfrecord'}"), prog,
                      "--output_file", "is a file, not a directory")
    assert not list(files.glob("out*"))  # nothing was written by any of them


def test_train_sentencepiece_mistakes(files):
    prog = "train_sentencepiece.py"
    base = ["-m", "data_prep.train_sentencepiece", f"--model_prefix={files / 'm'}"]
    assert_user_error(run(*base, f"--input={files / 'empty.json'}"), prog,
                      "no text in", "empty.json")
    assert_user_error(run(*base, f"--input={files / 'text.txt'}", "--vocab_size=300"), prog,
                      "Vocabulary size too high (300)")
    assert_user_error(run("-m", "data_prep.train_sentencepiece", f"--input={files / 'text.txt'}",
                          f"--model_prefix={files / 'adir'}"), prog, "--model_prefix",
                      "is a directory")
    assert_user_error(run(*base), prog, "--input")  # a required flag


def test_run_pretraining_missing_config_file(files):
    assert_user_error(run("run_pretraining.py", f"--albert_config_file={files / 'no.json'}",
                          f"--output_dir={files / 'out'}", f"--input_file={files / 'text.txt'}"),
                      "run_pretraining.py", "--albert_config_file", "no.json", "no such")
    assert not (files / "out").exists()


@pytest.mark.slow  # three subprocesses; tests/cli/test_cli.py checks the messages in process
def test_robust_run_flag_mistakes(files):
    """The divergence guard's, --hparams' and the seeds' flags: one line naming the flag,
    before anything is read or written."""
    base = [f"--albert_config_file={files / 'albert_config.json'}",
            f"--output_dir={files / 'out'}", f"--spm_model_file={files / 'text.txt'}",
            f"--data_dir={files}", "--do_train", "--do_eval"]
    assert_user_error(run("run_classifier.py", *base, "--task_name=rte", "--num_seeds=0"),
                      "run_classifier.py", "--num_seeds must be at least 1, got 0")
    assert_user_error(run("run_ner.py", *base, "--task_name=conll2003", "--hparams=paper"),
                      "run_ner.py", "--hparams=paper: no published hyperparameters for task "
                      "'conll2003'")
    assert_user_error(run("run_pretraining.py", base[0], base[1],
                          f"--input_file={files / 'text.txt'}", "--do_train",
                          "--spike_factor=0.5"),
                      "run_pretraining.py", "--spike_factor must be above 1 (or 0: no spike "
                      "check), got 0.5")
    assert not (files / "out").exists()


def test_fill_mask_on_a_directory_without_a_checkpoint(files):
    model_dir = files / "model"
    model_dir.mkdir()
    (model_dir / "albert_config.json").write_text(json.dumps(TINY))
    (model_dir / "30k-clean.model").write_bytes(need_spm().read_bytes())
    assert_user_error(run("-m", "albert_tf.fill_mask", "--model_dir", model_dir,
                          "The [MASK] is here."), "fill_mask.py", str(model_dir),
                      "no checkpoint", "model.ckpt-best.index")


def test_squad_evaluate_directory_for_a_file(files):
    assert_user_error(run("-m", "albert_tf.tasks.squad", "evaluate", "--data_file",
                          files / "adir", "--prediction_file", files / "empty.json"),
                      "python -m albert_tf.tasks.squad evaluate", str(files / "adir"),
                      "not a readable file")


BUGGY = """
import runpy, sys
import albert_tf.checkpoints as checkpoints
def broken(*args, **kwargs):
    raise {error}
checkpoints.from_official_dir = broken
sys.argv = ["fill_mask.py", "--model_dir", sys.argv[1], "a [MASK] b"]
runpy.run_module("albert_tf.fill_mask", run_name="__main__")
"""


@pytest.mark.slow  # 9 s
def test_a_bug_keeps_its_traceback_and_ctrl_c_says_one_line(files):
    # An internal error is not a user's mistake: the traceback stays.
    bug = run("-c", BUGGY.format(error="KeyError('internal bug')"), files)
    assert bug.returncode == 1, bug.stderr[-2000:]
    assert "Traceback" in bug.stderr and "KeyError: 'internal bug'" in bug.stderr
    assert ": error: " not in bug.stderr
    # Ctrl-C: exit 130, one line, no traceback.
    interrupted = run("-c", BUGGY.format(error="KeyboardInterrupt"), files)
    assert interrupted.returncode == 130, interrupted.stderr[-2000:]
    assert "Traceback" not in interrupted.stderr
    assert our_lines(interrupted.stderr) == ["fill_mask.py: interrupted"]


def test_help_is_complete():
    done = run("run_classifier.py", "--help")
    assert "Traceback" not in done.stderr and ": error: " not in done.stderr
    for flag in ("--data_dir", "--task_name", "--albert_config_file", "--export_dir",
                 "--strategy", "--mixed_precision", "--export_layer_norm", "--label_column"):
        assert f"  {flag}:" in done.stdout, flag
    assert "Fine-tune ALBERT on GLUE" in done.stdout  # the module docstring leads
    assert "<auto|float32|mixed_bfloat16|mixed_float16>" in done.stdout  # --mixed_precision


def test_cli_run_contract_in_process(capsys):
    """cli.guard: UserError -> 2 and one line; KeyboardInterrupt -> 130; others propagate."""
    from absl import app

    from albert_tf import cli, errors

    def raising(error):
        def main(argv):
            raise error
        return main

    assert cli.guard(raising(errors.UserValueError("--x=1: bad")), [], "prog") == 2
    assert capsys.readouterr().err == "prog: error: --x=1: bad\n"
    assert cli.guard(raising(app.UsageError("--y is required")), [], "prog") == 2
    assert capsys.readouterr().err == "prog: error: --y is required\n"
    assert cli.guard(raising(KeyboardInterrupt()), [], "prog",
                     interrupted=lambda: "checkpoints in d are kept") == 130
    assert capsys.readouterr().err == "prog: interrupted: checkpoints in d are kept\n"
    with pytest.raises(ValueError, match="a bug"):
        cli.guard(raising(ValueError("a bug")), [], "prog")
    assert cli.guard(lambda argv: argv, ["a"], "prog") == ["a"]


def test_library_error_classes_are_user_errors():
    from albert_tf import checkpoints, tokenization, training
    from albert_tf.pretraining import inputs
    from albert_tf.errors import UserError
    from albert_tf.tasks.multiple_choice import c3, race
    from albert_tf.tasks.classification import glue
    from albert_tf.tasks.span_qa import data as squad_data
    from data_prep import text_input

    for cls, base in ((glue.GlueDataError, ValueError), (race.RaceDataError, ValueError),
                      (c3.C3DataError, ValueError), (squad_data.SquadFormatError, ValueError),
                      (inputs.InputError, ValueError), (tokenization.TokenizerError, ValueError),
                      (checkpoints.CheckpointMismatchError, ValueError),
                      (text_input.InputError, ValueError),
                      (training.CorruptedInputError, RuntimeError),
                      (training.NonFiniteLossError, RuntimeError)):
        assert issubclass(cls, UserError) and issubclass(cls, base), cls


def test_check_helpers(tmp_path):
    from albert_tf import errors

    (tmp_path / "f").write_text("x")
    (tmp_path / "e").write_text("")
    assert errors.check_file(str(tmp_path / "f"), "--f") == str(tmp_path / "f")
    with pytest.raises(errors.UserFileNotFoundError, match=r"^--f=.*/nope: no such file$"):
        errors.check_file(str(tmp_path / "nope"), "--f")
    with pytest.raises(errors.UserFileNotFoundError, match="is a directory; give the file"):
        errors.check_file(str(tmp_path), "--f")
    with pytest.raises(errors.UserValueError, match="is an empty file"):
        errors.check_file(str(tmp_path / "e"), "--f")
    assert errors.check_file("gs://bucket/x", "--f") == "gs://bucket/x"  # not checked locally
    assert errors.check_writable(str(tmp_path / "new" / "deeper"), "--o", "directory")
    with pytest.raises(errors.UserFileNotFoundError, match="is a file, not a directory"):
        errors.check_writable(str(tmp_path / "f" / "x"), "--o")
    with pytest.raises(errors.UserValueError, match="cannot write in /proc"):
        errors.check_writable("/proc/x/y", "--o", "directory")


# --- slow: the other entry points and mistakes ------------------------------------------------

@pytest.mark.slow
def test_run_pretraining_mistakes(files, tmp_path):
    prog = "run_pretraining.py"
    config = files / "albert_config.json"
    data = write_records(tmp_path / "train.tfrecord", make_examples(16, seq_len=16, max_pred=4))
    base = ["run_pretraining.py", f"--output_dir={files / 'out'}", "--max_seq_length=16",
            "--max_predictions_per_seq=4", "--train_batch_size=8", "--num_train_steps=2"]
    assert_user_error(run(*base, f"--albert_config_file={files / 'adir'}",
                          f"--input_file={data}"), prog, "--albert_config_file", "directory")
    assert_user_error(run(*base, f"--albert_config_file={files / 'empty.json'}",
                          f"--input_file={data}"), prog, "--albert_config_file", "empty")
    assert_user_error(run(*base, f"--albert_config_file={config}",
                          f"--input_file={files / 'text.txt'}"), prog,
                      "text.txt", "not a readable TFRecord file")
    assert_user_error(run(*base, f"--albert_config_file={config}",
                          f"--input_file={tmp_path / 'train*.tf'}"), prog,
                      "--input_file", "matches no file")
    assert_user_error(run(*base, f"--albert_config_file={config}", f"--input_file={data}",
                          "--do_eval"), prog, "--eval_input_file is required with --do_eval")
    assert_user_error(run(*base, f"--albert_config_file={config}", f"--input_file={data}",
                          "--num_train_steps=2.5"), prog, "--num_train_steps=2.5")
    assert_user_error(run(*base, f"--albert_config_file={config}", f"--input_file={data}",
                          f"--init_checkpoint={files / 'model.ckpt-1'}"), prog,
                      "--init_checkpoint", "no such checkpoint")


def write_checkpoint(directory, **config_changes):
    """A TF1 checkpoint of a tiny pretrainer (config `TINY` with `config_changes`)."""
    from albert_tf import AlbertConfig, AlbertPretrainer, checkpoints

    config = AlbertConfig.from_dict(dict(TINY, **config_changes))
    model = AlbertPretrainer(config)
    model.build()
    directory.mkdir(parents=True, exist_ok=True)
    checkpoints.save_tf1_checkpoint(model, str(directory / "model.ckpt-best"))
    config.to_json_file(str(directory / "albert_config.json"))
    return directory / "model.ckpt-best"


@pytest.mark.slow
def test_config_that_does_not_match_the_checkpoint(files, tmp_path):
    prefix = write_checkpoint(tmp_path / "ckpt", hidden_size=64, num_attention_heads=4)
    done = run("-m", "albert_tf.convert", f"--input={prefix}",
               f"--output={tmp_path / 'o.weights.h5'}",
               f"--albert_config_file={files / 'albert_config.json'}")
    assert_user_error(done, "convert.py", "config does not match checkpoint", str(prefix),
                      "hidden_size is 32 in the config but 64 in the checkpoint")
    assert not (tmp_path / "o.weights.h5").exists()
    data = write_records(tmp_path / "train.tfrecord", make_examples(16, seq_len=16, max_pred=4))
    done = run("run_pretraining.py", f"--albert_config_file={files / 'albert_config.json'}",
               f"--init_checkpoint={prefix}", f"--input_file={data}",
               f"--output_dir={tmp_path / 'out'}", "--max_seq_length=16",
               "--max_predictions_per_seq=4", "--train_batch_size=8", "--num_train_steps=2")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "hidden_size is 32 in the config but 64 in the checkpoint" in done.stderr


@pytest.mark.slow
def test_run_classifier_mistakes(files, tmp_path):
    spm = need_spm()
    prog = "run_classifier.py"
    (tmp_path / "MRPC").mkdir()
    (tmp_path / "MRPC" / "train.tsv").write_text(
        "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta b\tc d\n7\t3\t4\te f\tg h\n")
    base = ["run_classifier.py", f"--albert_config_file={files / 'albert_config.json'}",
            f"--output_dir={files / 'out'}", "--max_seq_length=32", "--do_train",
            "--train_step=1"]
    assert_user_error(run(*base, f"--spm_model_file={spm}", "--task_name=mrpc",
                          f"--data_dir={tmp_path}"), prog,
                      f"{tmp_path / 'MRPC' / 'train.tsv'}:3", "label '7'")
    assert_user_error(run(*base, f"--spm_model_file={spm}", "--task_name=mrpc",
                          f"--data_dir={files / 'nowhere'}"), prog, "--data_dir", "train.tsv")
    assert_user_error(run(*base, f"--spm_model_file={files / 'no.model'}", "--task_name=mrpc",
                          f"--data_dir={tmp_path}"), prog, "--spm_model_file", "no.model")
    assert_user_error(run(*base, f"--spm_model_file={spm}", "--task_name=mrpc",
                          f"--data_dir={tmp_path}", "--train_batch_size=many"), prog,
                      "--train_batch_size=many")
    assert_user_error(run(*base, f"--spm_model_file={spm}", "--task_name=custom",
                          f"--data_dir={tmp_path}"), prog,
                      "--task_name=custom needs --text_a_column and --label_column")


@pytest.mark.slow
def test_run_squad_mistakes(files):
    spm = need_spm()
    prog = "run_squad.py"
    (files / "no_answers.json").write_text(json.dumps({"data": [{"paragraphs": [
        {"context": "Paris is in France.", "qas": [{"id": "q1", "question": "Where?"}]}]}]}))
    base = ["run_squad.py", f"--albert_config_file={files / 'albert_config.json'}",
            f"--spm_model_file={spm}", f"--output_dir={files / 'out'}", "--max_seq_length=64",
            "--max_query_length=16", "--doc_stride=16", "--do_train"]
    assert_user_error(run(*base, f"--train_file={files / 'train.json'}"), prog,
                      "--train_file", "train.json", "no such")
    assert_user_error(run(*base, f"--train_file={files / 'adir'}"), prog,
                      "--train_file", "is a directory")
    assert_user_error(run(*base, f"--train_file={files / 'empty.json'}"), prog,
                      "--train_file", "empty")
    assert_user_error(run(*base), prog, "--do_train needs --train_file")
    assert_user_error(run(*base, f"--train_file={files / 'no_answers.json'}"), prog,
                      "no_answers.json", "question id q1")


@pytest.mark.slow
def test_run_race_mistakes(files):
    spm = need_spm()
    prog = "run_race.py"
    base = ["run_race.py", f"--albert_config_file={files / 'albert_config.json'}",
            f"--spm_model_file={spm}", f"--output_dir={files / 'out'}", "--max_seq_length=64"]
    assert_user_error(run(*base, f"--data_dir={files / 'nowhere'}", "--max_qa_length=16"), prog,
                      "--data_dir", "no RACE data")
    assert_user_error(run(*base, f"--data_dir={files}", "--task_name=c3", "--max_qa_length=16"),
                      prog, "--max_qa_length is RACE's")
    assert_user_error(run(*base, f"--data_dir={files}", "--max_qa_length=70"), prog,
                      "--max_qa_length 70", "--max_seq_length 64")
    assert_user_error(run(*base, f"--data_dir={files}", "--task_name=c4"), prog, "--task_name=c4")


@pytest.mark.slow
def test_fill_mask_convert_evaluate_and_demo_mistakes(files, tmp_path):
    assert_user_error(run("-m", "albert_tf.fill_mask", "--model_dir", files / "none", "a [MASK]"),
                      "fill_mask.py", "--model_dir", "no such model directory")
    assert_user_error(run("-m", "albert_tf.fill_mask", "--model_dir", files / "adir",
                          "no mask here"), "fill_mask.py", "no [MASK] in: 'no mask here'")
    assert_user_error(run("-m", "albert_tf.fill_mask", "--model_dir", files / "adir",
                          "a [MASK]"), "fill_mask.py", "no config file")
    assert_user_error(run("-m", "albert_tf.convert", f"--input={files / 'none'}",
                          f"--output={tmp_path / 'o.weights.h5'}"), "convert.py",
                      "--input", "no such")
    assert_user_error(run("-m", "albert_tf.convert", f"--input={files / 'adir'}",
                          f"--output={tmp_path / 'o.weights.h5'}", "--model=bert"),
                      "convert.py", "--model=bert")
    evaluate = ["-m", "albert_tf.tasks.squad", "evaluate"]
    prog = "python -m albert_tf.tasks.squad evaluate"
    assert_user_error(run(*evaluate, "--data_file", files / "none.json", "--prediction_file",
                          files / "empty.json"), prog, "none.json: no such file")
    assert_user_error(run(*evaluate, "--data_file", files / "empty.json", "--prediction_file",
                          files / "empty.json"), prog, "empty.json", "not valid JSON")
    assert_user_error(run(*evaluate, "--data_file", files / "empty.json"), prog,
                      "--prediction_file")
    assert_user_error(run(*evaluate, "--data_file", files / "empty.json", "--prediction_file",
                          files / "empty.json", "--version", "3"), prog, "--version")
    assert_user_error(run("demo.py", "--num_train_steps=many"), "demo.py",
                      "--num_train_steps=many")
    assert_user_error(run("demo.py", f"--output_dir={files / 'empty.json'}"), "demo.py",
                      "--output_dir", "is a file")


@pytest.mark.slow
def test_ctrl_c_during_pretraining_exits_130_and_says_what_was_kept(files, tmp_path):
    data = write_records(tmp_path / "train.tfrecord", make_examples(64, seq_len=16, max_pred=4))
    config = tmp_path / "albert_config.json"
    config.write_text(json.dumps(dict(TINY, vocab_size=40, max_position_embeddings=16)))
    out = tmp_path / "out"
    args = [sys.executable, "run_pretraining.py", f"--albert_config_file={config}",
            f"--input_file={data}", f"--output_dir={out}", "--max_seq_length=16",
            "--max_predictions_per_seq=4", "--train_batch_size=8", "--num_train_steps=100000",
            "--save_checkpoints_steps=5", "--iterations_per_loop=5", "--optimizer=adamw"]
    # A shell without job control starts background jobs with SIGINT ignored, and the
    # child would inherit that (Python then installs no KeyboardInterrupt handler).
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=REPO_ROOT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 180
    while not list((out / "checkpoints").glob("ckpt-*.index")):
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        assert time.time() < deadline, "no checkpoint appeared"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert our_lines(stderr)[-1] == (f"run_pretraining.py: interrupted: checkpoints in {out} are "
                                     "kept; rerun the same command to resume")
