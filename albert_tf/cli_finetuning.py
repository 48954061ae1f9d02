"""One command line for every fine-tuning family: `define_flags(Job)` and `main(Job)`.

A family's run_*.py is its docstring and two calls:

    cli_finetuning.define_flags(TaggingJob)       # at import: the flags, for --help too
    cli.run(cli_finetuning.main(TaggingJob), ...)

The flags come from `Job.OPTIONS` (the options dataclass: each field declares its flag,
help, default and check) plus the runtime, --hparams / seeds and model flags every
fine-tuning CLI shares; what differs between families is `Job.COMMAND_LINE`
(`finetuning.command_line.CommandLine`). Configuration flows one way: flags -> the options
object -> the job.
"""
from __future__ import annotations

import json
from typing import Callable

from absl import flags, logging

from albert_tf import cli, cli_defaults, cli_options, errors

FLAGS = flags.FLAGS
# Flags of the model file rather than the options (the options hold the loaded config).
MODEL_FLAGS = ("albert_config_file",)


def define_flags(job_class: type, values: flags.FlagValues = FLAGS) -> None:
    """Defines every flag of `job_class`'s CLI (the caller adopts this module's and cli's key
    flags for --help: `flags.adopt_module_key_flags`)."""
    flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model.",
                        flag_values=values)
    cli_options.define_flags(job_class.OPTIONS, values=values)
    for group in job_class.COMMAND_LINE.flag_groups:
        cli_options.define_flags(group, values=values)
    for old, new in job_class.COMMAND_LINE.renamed_flags.items():
        cli_options.define_renamed_flag(old, new, values=values)
    cli.define_runtime_flags()
    cli.define_finetuning_flags()


def _accept_renamed(renamed, values) -> None:
    """An old flag name given: warn, and move its value to the new name (which then counts
    as given, so that --hparams=paper keeps it)."""
    for old, new in renamed.items():
        if not values[old].present:
            continue
        if values[new].present and values[new].value != values[old].value:
            raise errors.UserValueError(f"--{old} is the old name of --{new}; give one of "
                                        f"them (got --{old}={values[old].value} and "
                                        f"--{new}={values[new].value})")
        logging.warning("--%s is now --%s; the old name still works but will be removed",
                        old, new)
        values[new].value = values[old].value
        values[new].present = 1


def _options(job_class: type, albert_config, strategy, values):
    """The job's options from the parsed flags (a wrong value: a UserError naming it)."""
    options = cli_options.options_from_flags(
        job_class.OPTIONS, values, albert_config=albert_config,
        **job_class.options_from_command_line(values), **cli.runtime_options(values))
    cli.check_options(options.check, strategy.num_replicas_in_sync)
    return options


def main(job_class: type) -> Callable:
    """The `main(argv)` that absl runs for `job_class`'s CLI (see the module docstring)."""
    from albert_tf.finetuning import run_seeds

    command_line = job_class.COMMAND_LINE

    def run(argv):
        del argv
        logging.set_verbosity(logging.INFO)
        _accept_renamed(command_line.renamed_flags, FLAGS)
        cli.require(*command_line.required)
        from_hparams = cli.apply_hparams(command_line.hparams_task(FLAGS))
        seeds = cli.seeds_from_flags()
        if not FLAGS.spm_model_file and not FLAGS.vocab_file:
            raise errors.UserValueError("--spm_model_file (SentencePiece) or --vocab_file "
                                        "(WordPiece) is required")
        command_line.check(FLAGS)
        albert_config = cli.apply_albert_dropout(
            cli.load_albert_config(FLAGS.albert_config_file), FLAGS.albert_dropout)
        cli.check_init_checkpoint(FLAGS.init_checkpoint)
        strategy = cli.strategy_from_flags(FLAGS)
        cli_defaults.apply(command_line.default_rules(FLAGS), strategy.num_replicas_in_sync,
                           hparams_set=from_hparams)
        options = _options(job_class, albert_config, strategy, FLAGS)
        if seeds:
            results = run_seeds(job_class, options, seeds, strategy)
        else:
            results = job_class(options, strategy).run()
            if command_line.print_predict_metrics and results.get("predict_metrics"):
                print(json.dumps(results["predict_metrics"]))
            best = results.get("best")
            if isinstance(best, dict):  # per-label values are in the files
                best = {key: value for key, value in best.items() if "/" not in key}
            logging.info("done at step %s; best: %s%s", results.get("global_step"), best,
                         f"; predict: {results['predict_accuracy']}"
                         if results.get("predict_accuracy") is not None else "")
        cli.report_export(results, FLAGS.export_format)

    return run
