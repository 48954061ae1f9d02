"""What every command line shares: the error contract (`run`, `ArgumentParser`,
`guard`) and the run_*.py CLIs' runtime flags (distribution, precision, XLA, seed).

The error contract (albert_tf/errors.py): a `UserError`, an absl
`app.UsageError` raised by our own checks, or a flag that does not parse
prints `<prog>: error: <message>` on stderr and exits 2, with no usage dump and
no traceback; `--help` / `--helpfull` print the complete help as always; any
other exception is a bug and keeps its traceback; Ctrl-C exits 130 with one
line saying what was kept; a training run preempted (SIGTERM) exits 143 and one that
lost a worker exits 75, each with one line naming the checkpoint to resume from.

Only the CLIs' modules call `define_runtime_flags()` (at import) and read flags;
library code receives plain values. This module imports TensorFlow only when
those flags are defined or read, so the data-preparation CLIs use `run` without it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Callable, Optional, Sequence, Union

from absl import flags, logging

from albert_tf import errors
from albert_tf.kernels import onednn

Interrupted = Union[None, str, Callable[[], Optional[str]]]


def program_name(argv: Optional[Sequence[str]] = None) -> str:
    """The name errors are prefixed with: the script's file name (`run_squad.py`,
    `fill_mask.py` for `python -m albert_tf.fill_mask`)."""
    argv = sys.argv if argv is None else argv
    return os.path.basename(argv[0]) if argv and argv[0] else "albert_tf"


def report(prog: str, message: object) -> None:
    """Prints `<prog>: error: <message>` on stderr."""
    text = str(message).strip() or type(message).__name__
    sys.stderr.write(f"{prog}: error: {text}\n")
    sys.stderr.flush()


def fail(prog: str, message: object, status: int = errors.EXIT_USER_ERROR):
    """Prints `<prog>: error: <message>` on stderr and exits with `status`."""
    report(prog, message)
    sys.exit(status)


def _interrupted_line(prog: str, interrupted: Interrupted) -> str:
    what = interrupted() if callable(interrupted) else interrupted
    return f"{prog}: interrupted" + (f": {what}" if what else "")


def guard(main: Callable, argv, prog: str, interrupted: Interrupted = None):
    """Calls `main(argv)` under the error contract; returns what it returns, or the exit
    status after printing the one line of a user error (2), an interrupt (130), a
    preemption (143: `<prog>: preempted: ...`) or a lost worker (75).

    `interrupted` (a string, or a function called at Ctrl-C time) says what was
    kept and how to resume, e.g. "checkpoints in runs/x are kept; rerun the same
    command to resume".
    """
    from absl import app

    try:
        return main(argv)
    except (errors.UserError, app.UsageError) as err:
        report(prog, err)
        return errors.EXIT_USER_ERROR
    except errors.Preempted as stop:
        sys.stderr.write(f"{prog}: preempted: {stop}\n")
        sys.stderr.flush()
        return errors.EXIT_PREEMPTED
    except errors.WorkerLost as lost:
        report(prog, lost)
        return errors.EXIT_WORKER_LOST
    except KeyboardInterrupt:
        try:
            line = _interrupted_line(prog, interrupted)
        except Exception:  # noqa: BLE001 -- the message must not hide the interrupt
            line = f"{prog}: interrupted"
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
        return errors.EXIT_INTERRUPTED


def evaluate_command(prog: str, evaluate: Callable, argv=None) -> int:
    """`<prog> evaluate ...`, a task family's scorer (`python -m albert_tf.tasks.<family>`):
    `evaluate(the arguments after the command)` returns the scores, printed as one JSON
    object (or None, having printed them itself), under `guard`. Returns the exit status
    (2 and one `<prog>: error:` line on stderr for another command or a user error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "evaluate":
        sys.stderr.write(f"{prog}: error: the command is `evaluate` (see "
                         f"`{prog} evaluate --help`)\n")
        return errors.EXIT_USER_ERROR

    def evaluate_main(arguments) -> int:
        scores = evaluate(arguments)
        if scores is not None:
            print(json.dumps(scores, sort_keys=True))
        return 0

    return guard(evaluate_main, argv[1:], f"{prog} evaluate")


def _flags_parser(prog: str):
    def parse(argv):
        try:
            return flags.FLAGS(argv)
        except flags.Error as err:  # a wrong type, an unknown or a missing required flag
            required = re.search(r"Flag (--\w+) must have a value other than None", str(err))
            message = f"{required.group(1)} is required" if required else str(err)
            fail(prog, f"{message} (see --help)")
    return parse


def run(main: Callable, *, interrupted: Interrupted = None, argv=None) -> None:
    """`absl.app.run(main)` under the error contract (see the module docstring).

    absl's own handling of `app.UsageError` would print the whole usage before
    the message, and its flag errors exit 1 after a "FATAL" line; here both are
    one `<prog>: error:` line and status 2. `--help` stays absl's.
    """
    from absl import app

    argv = sys.argv if argv is None else argv
    prog = program_name(argv)

    def guarded(args):
        choice = onednn.configured()
        if choice is not None:  # programs that run TensorFlow say what it runs with
            logging.info("%s", choice.describe())
        status = guard(main, args, prog, interrupted)
        if status in (errors.EXIT_INTERRUPTED, errors.EXIT_PREEMPTED, errors.EXIT_WORKER_LOST):
            # TensorFlow's threads may still run (and a lost peer's collectives never
            # end): the interpreter's teardown would wait on them.
            exit_now(status)
        return status

    app.run(guarded, argv=argv, flags_parser=_flags_parser(prog))


def exit_now(status: int) -> None:
    """Flushes the output streams and log handlers, then ends the process without the
    interpreter's teardown. After Ctrl-C, TensorFlow's threads (tf.data prefetching,
    the step loop's callbacks) may still run, and tearing the interpreter down under them
    hung for minutes or crashed (SIGSEGV) in about one interrupt in ten; everything the
    job keeps (checkpoints, logs) is written atomically before this point."""
    import logging as std_logging
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    std_logging.shutdown()
    os._exit(status)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the error contract: a bad argument prints one `<prog>: error:` line
    (no usage dump) and exits 2; `--help` is argparse's complete help."""

    def error(self, message):
        fail(self.prog, f"{message} (see --help)")


def define_runtime_flags() -> None:
    """Defines --strategy, --worker_timeout_seconds, the original's TPU flags,
    --mixed_precision, --jit_compile,
    --gradient_accumulation_steps, --seed, --deterministic and the divergence guard's flags
    (--on_divergence, --spike_factor, --spike_window, --divergence_lr_factor,
    --max_rollbacks)."""
    from albert_tf.training import distribute

    flags.DEFINE_enum("strategy", "one_device", list(distribute.STRATEGIES),
                      "Distribution strategy (multi_worker_mirrored reads TF_CONFIG).")
    flags.DEFINE_bool("use_tpu", False, "Same as --strategy=tpu (the original's flag).")
    flags.DEFINE_float("worker_timeout_seconds", distribute.DEFAULT_WORKER_TIMEOUT_SECONDS,
                       "multi_worker_mirrored: a worker silent this long (killed, crashed, "
                       "frozen, cut off) counts as lost; every other worker then stops, "
                       "naming it and the last checkpoint, with exit status 75 (rerun on "
                       "every worker to resume). SIGTERM on any worker makes all of them "
                       "save a checkpoint at the current step and exit 143.")
    flags.DEFINE_string("tpu_name", None, "TPU name or grpc:// address.")
    flags.DEFINE_string("tpu_zone", None, "GCE zone of the TPU.")
    flags.DEFINE_string("gcp_project", None, "GCP project of the TPU.")
    flags.DEFINE_string("master", None, "TPU master address (used when --tpu_name is not set).")
    flags.DEFINE_integer("num_tpu_cores", 8,
                         "Accepted for compatibility; TPUStrategy finds the cores.")
    flags.DEFINE_enum("mixed_precision", "float32", ["auto", "float32", "mixed_bfloat16",
                                                     "mixed_float16"],
                      "Keras dtype policy. auto: mixed_bfloat16 where the device multiplies "
                      "bf16 faster than float32 (CPUs with AMX; CPUs with AVX512-BF16 whose "
                      "bf16 GEMMs measure at least 1.3x float32, e.g. AMD Zen 4/5; GPUs of "
                      "compute capability >= 8.0; TPUs), float32 elsewhere, logged with the "
                      "reason; mixed_float16 adds dynamic loss scaling.")
    flags.DEFINE_bool("jit_compile", False, "Compile the forward and backward pass with XLA.")
    flags.DEFINE_integer("gradient_accumulation_steps", 1,
                         "Micro-batches per optimizer step: each replica's share of the "
                         "global --train_batch_size is split into this many micro-batches "
                         "of train_batch_size / (replicas x k) examples, whose summed "
                         "gradients make one update (equal to a step on the whole batch).")
    flags.DEFINE_integer("seed", None, "Seed for initialisation, dropout and input shuffling.")
    flags.DEFINE_bool("deterministic", False,
                      "TensorFlow's op determinism: a run repeats bit for bit on one machine "
                      "(with --seed; 0 when not given). No slower on the CPUs measured; "
                      "slower on GPUs (docs/robust_runs.md).")
    define_divergence_flags()


def runtime_options(values=flags.FLAGS) -> dict:
    """The options every job takes from the runtime flags: mixed_precision, jit_compile,
    gradient_accumulation_steps, seed (0 under --deterministic without --seed),
    deterministic, divergence (the guard)."""
    seed = values.seed
    if values.deterministic and seed is None:
        seed = 0
    return dict(mixed_precision=values.mixed_precision, jit_compile=values.jit_compile,
                gradient_accumulation_steps=values.gradient_accumulation_steps,
                seed=seed, deterministic=values.deterministic,
                divergence=divergence_options(values))


def define_divergence_flags(values=flags.FLAGS) -> None:
    from albert_tf.training.divergence import DivergenceOptions, ON_DIVERGENCE

    default = DivergenceOptions()
    flags.DEFINE_enum("on_divergence", default.on_divergence, list(ON_DIVERGENCE),
                      "When the loss or gradient norm turns NaN or infinite, or the loss "
                      "spikes (--spike_factor): rollback = restore the last good checkpoint "
                      "(the starting weights before the first), scale the learning rate by "
                      "--divergence_lr_factor and go on, at most --max_rollbacks times; stop "
                      "= stop at once. A stopped run exits non-zero naming the step, the "
                      "cause and the last good checkpoint.", flag_values=values)
    flags.DEFINE_float("spike_factor", default.spike_factor,
                       "A step whose loss is above this many times the median loss of the "
                       "last --spike_window steps, and above the first step's loss, diverged "
                       "(0: no spike check).",
                       flag_values=values)
    flags.DEFINE_integer("spike_window", default.spike_window,
                         "Steps whose median loss --spike_factor compares with.",
                         flag_values=values)
    flags.DEFINE_float("divergence_lr_factor", default.lr_factor,
                       "Each rollback multiplies the learning rate by this.", flag_values=values)
    flags.DEFINE_integer("max_rollbacks", default.max_rollbacks,
                         "Rollbacks allowed before a diverging run stops.", flag_values=values)


def divergence_options(values=flags.FLAGS):
    """The DivergenceOptions the guard flags ask for (a bad value: a UserError naming it)."""
    from albert_tf.training.divergence import DivergenceOptions

    options = DivergenceOptions(
        on_divergence=values.on_divergence, spike_factor=values.spike_factor,
        spike_window=values.spike_window, lr_factor=values.divergence_lr_factor,
        max_rollbacks=values.max_rollbacks)
    check_options(options.validate)
    return options


def define_finetuning_flags(*, values=flags.FLAGS) -> None:
    """Defines what every fine-tuning CLI adds to its options' flags: --hparams,
    --num_seeds, --seeds and --albert_dropout (into `values`)."""
    flags.DEFINE_enum("hparams", "none", ["none", "paper"],
                      "paper: the task's fine-tuning hyperparameters from the ALBERT paper's "
                      "appendix (GLUE, SQuAD, RACE) or the CLUE baselines (Chinese tasks): "
                      "learning rate, batch size, steps or epochs, warmup, sequence length, "
                      "dropout; flags given explicitly win. See docs/hyperparameters.md.",
                      flag_values=values)
    flags.DEFINE_integer("num_seeds", None,
                         "Fine-tune this many times (seeds 1..N) in <output_dir>/seed_<s>/, "
                         "one after another; report each, the median and the best dev figure "
                         "(the paper's protocol), export the best. A rerun resumes.",
                         flag_values=values)
    flags.DEFINE_list("seeds", None, "The seeds of a multi-seed run, e.g. 1,2,3 (instead of "
                      "--num_seeds).", flag_values=values)
    flags.DEFINE_float("albert_dropout", None,
                       "The model's hidden and attention dropout (default: the "
                       "albert_config.json's).", flag_values=values)


def seeds_from_flags(values=flags.FLAGS) -> Optional[Sequence[int]]:
    """The seeds of a multi-seed run (--num_seeds or --seeds), None for one run."""
    if values.num_seeds is not None and values.seeds:
        raise errors.UserValueError("give --num_seeds or --seeds, not both")
    if values.num_seeds is not None:
        if values.num_seeds < 1:
            raise errors.UserValueError(f"--num_seeds must be at least 1, got "
                                        f"{values.num_seeds}")
        return list(range(1, values.num_seeds + 1))
    if values.seeds:
        try:
            seeds = [int(seed) for seed in values.seeds]
        except ValueError:
            raise errors.UserValueError(f"--seeds must be integers, got "
                                        f"{','.join(values.seeds)}") from None
        if len(set(seeds)) != len(seeds):
            raise errors.UserValueError(f"--seeds repeats a seed: {','.join(values.seeds)}")
        return seeds
    return None


_STEP_COUNTERPARTS = {"num_train_epochs": "train_step", "warmup_proportion": "warmup_step"}


def apply_hparams(task: str, values=flags.FLAGS) -> list:
    """With --hparams=paper, sets the flags of `task`'s published hyperparameters that the
    command line did not give (explicit flags win) and logs what was used and from where.
    Each published value goes to the CLI's flag of the same name, where the CLI has one
    (run_squad.py has no --train_step: its epochs reproduce the steps). Returns the names
    of the flags it set ([] without --hparams=paper)."""
    if values.hparams != "paper":
        return []
    from albert_tf.finetuning import hparams

    entry = hparams.lookup(task)
    given, set_here = [], []
    for flag, value in hparams.as_flags(entry, [name for name in hparams.VALUE_FIELDS
                                                if name in values]).items():
        # An explicit --train_step (--warmup_step) also keeps the table's epochs (warmup
        # proportion) from overriding it.
        counterpart = _STEP_COUNTERPARTS.get(flag)
        kept = flag if values[flag].present else counterpart if (
            counterpart in values and values[counterpart].present) else None
        if kept is None:
            values[flag].value = value
            set_here.append(flag)
        elif f"--{kept}={values[kept].value}" not in given:
            given.append(f"--{kept}={values[kept].value}")
    logging.info("%s", hparams.describe(entry, task))
    if given:
        logging.info("--hparams=paper: explicit flags kept: %s", " ".join(given))
    return set_here


def apply_albert_dropout(albert_config, dropout: Optional[float]):
    """The config with its hidden and attention dropout set to `dropout` (None: unchanged)."""
    if dropout is None:
        return albert_config
    if not 0.0 <= dropout < 1.0:
        raise errors.UserValueError(f"--albert_dropout must be in [0, 1), got {dropout}")
    return albert_config.replace(hidden_dropout_prob=dropout,
                                 attention_probs_dropout_prob=dropout)


def report_export(results: dict, export_format) -> None:
    """Logs what a fine-tuning job wrote to --export_dir (one line)."""
    if not results.get("export_dir"):
        return
    written = (["SavedModel"] if "saved_model" in export_format else []) + [
        os.path.basename(results[key]) for key in
        ("onnx", "onnx_int8", "tflite", "tflite_fp16", "tflite_int8") if results.get(key)]
    logging.info("exported to %s: %s", results["export_dir"], ", ".join(written))


def strategy_from_flags(values=flags.FLAGS):
    """The tf.distribute strategy the runtime flags ask for."""
    from albert_tf.training import distribute

    name = "tpu" if values.use_tpu else values.strategy
    if not values.worker_timeout_seconds > 0:
        raise errors.UserValueError(f"--worker_timeout_seconds must be positive, got "
                                    f"{values.worker_timeout_seconds}")
    return distribute.get_strategy(name, tpu_address=values.tpu_name or values.master,
                                   tpu_zone=values.tpu_zone, gcp_project=values.gcp_project,
                                   worker_timeout_seconds=values.worker_timeout_seconds)


def check_options(validate: Callable, *args) -> None:
    """Runs an options object's `validate(*args)`, whose ValueErrors name a wrong flag by
    contract, turning them into UserError (only those: ValueErrors elsewhere stay bugs)."""
    try:
        validate(*args)
    except errors.UserError:
        raise
    except ValueError as err:
        raise errors.UserValueError(str(err)) from err


def for_flag(flag: str, fn: Callable, *args):
    """`fn(*args)`; a UserError it raises is re-raised with `flag` in front of its message
    (for library checks that name a file or pattern but not the flag it came from)."""
    try:
        return fn(*args)
    except errors.UserError as err:
        if str(err).startswith(flag):
            raise
        raise errors.UserValueError(f"{flag}: {err}") from err


def require(*names: str, values=flags.FLAGS) -> None:
    """A UserError naming the first of the flags `names` that is not set."""
    for name in names:
        if not getattr(values, name):
            raise errors.UserValueError(f"--{name} is required (see --help)")


def load_albert_config(path: str, flag: str = "--albert_config_file"):
    """The AlbertConfig in `path`; a missing, empty or invalid file is a UserError naming
    `flag` or the file."""
    from albert_tf.config import AlbertConfig

    errors.check_file(path, flag, "albert_config.json file")
    return AlbertConfig.from_json_file(path)


def check_init_checkpoint(path: Optional[str], flag: str = "--init_checkpoint") -> None:
    """A UserError naming `flag` when `path` is neither a file, a directory nor a TF1 /
    tf.train.Checkpoint prefix (`path`.index); the loaders check the content later."""
    if not path or "://" in path:
        return
    if not os.path.exists(path) and not os.path.exists(path + ".index"):
        raise errors.UserFileNotFoundError(
            f"{flag}={path}: no such checkpoint (not a file, a directory, or a prefix with "
            f"{os.path.basename(path)}.index beside it)")


def resume_hint(output_dir: Optional[str], what: str = "checkpoints") -> str:
    """The Ctrl-C line of a training CLI: what is kept and how to resume."""
    if not output_dir:
        return ""
    return f"{what} in {output_dir} are kept; rerun the same command to resume"
