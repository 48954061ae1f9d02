"""The CLI side of robust runs: --hparams=paper filling the flags the command line left out,
--num_seeds / --seeds, --deterministic's seed, the divergence guard's flags; each bad value
one line naming its flag."""
import pytest
from absl import flags

from albert_tf import cli, cli_options, errors
from albert_tf.finetuning import hparams
from albert_tf.training.divergence import DivergenceOptions


def classifier_flags(argv):
    """A fresh FlagValues with run_classifier's option flags (from ClassificationOptions, as the CLI
    defines them), the runtime flags runtime_options reads and the guard's, parsed."""
    from albert_tf.tasks.classification.job import ClassificationOptions

    values = flags.FlagValues()
    cli_options.define_flags(ClassificationOptions, values=values)
    flags.DEFINE_string("mixed_precision", "float32", "", flag_values=values)
    flags.DEFINE_bool("jit_compile", False, "", flag_values=values)
    flags.DEFINE_integer("gradient_accumulation_steps", 1, "", flag_values=values)
    flags.DEFINE_integer("seed", None, "", flag_values=values)
    flags.DEFINE_bool("deterministic", False, "", flag_values=values)
    cli.define_finetuning_flags(values=values)
    cli.define_divergence_flags(values=values)
    values(["prog"] + argv)
    return values


def test_paper_hparams_fill_the_flags_not_given(caplog):
    values = classifier_flags(["--hparams=paper", "--learning_rate=2e-5"])
    caplog.set_level("INFO", logger="absl")
    cli.apply_hparams("RTE", values=values)
    # RTE in the paper: 3e-5, 32, ALBERT dropout 0.1, classifier 0.1, 800 steps, 200 warmup, 512
    assert values.learning_rate == 2e-5  # explicit: kept
    assert (values.train_batch_size, values.train_step, values.warmup_step,
            values.max_seq_length) == (32, 800, 200, 512)
    assert values.albert_dropout == 0.1 and values.classifier_dropout == 0.1
    assert values.num_train_epochs is None
    text = caplog.text
    assert "--hparams=paper: " in text and "Table 14" in text
    assert "explicit flags kept: --learning_rate=2e-05" in text


def test_an_explicit_train_step_keeps_the_tables_epochs_out():
    values = classifier_flags(["--hparams=paper", "--train_step=77"])
    cli.apply_hparams("afqmc", values=values)
    assert values.train_step == 77 and values.num_train_epochs is None
    assert values.warmup_proportion == 0.1 and values.learning_rate == 3e-5
    values = classifier_flags(["--hparams=paper"])
    cli.apply_hparams("afqmc", values=values)
    assert values.num_train_epochs == 2.0 and values.train_batch_size == 16


def test_without_hparams_nothing_changes():
    values = classifier_flags([])
    cli.apply_hparams("rte", values=values)
    assert values.learning_rate == 5e-5 and values.albert_dropout is None


def test_paper_hparams_on_a_task_the_table_lacks_name_the_flag():
    values = classifier_flags(["--hparams=paper"])
    with pytest.raises(errors.UserValueError, match=r"^--hparams=paper: no published "
                       r"hyperparameters for task 'conll2003'"):
        cli.apply_hparams("conll2003", values=values)


@pytest.mark.parametrize("argv, seeds", [
    ([], None), (["--num_seeds=3"], [1, 2, 3]), (["--seeds=5,2"], [5, 2]),
    (["--num_seeds=1"], [1])])
def test_seeds_from_flags(argv, seeds):
    assert cli.seeds_from_flags(classifier_flags(argv)) == seeds


@pytest.mark.parametrize("argv, message", [
    (["--num_seeds=0"], "--num_seeds must be at least 1, got 0"),
    (["--num_seeds=2", "--seeds=1,2"], "give --num_seeds or --seeds, not both"),
    (["--seeds=1,x"], "--seeds must be integers, got 1,x"),
    (["--seeds=3,3"], "--seeds repeats a seed: 3,3"),
])
def test_bad_seed_flags_are_one_line(argv, message):
    with pytest.raises(errors.UserValueError) as bad:
        cli.seeds_from_flags(classifier_flags(argv))
    assert str(bad.value) == message


def test_runtime_options_give_deterministic_runs_a_seed_and_the_guard_its_flags():
    options = cli.runtime_options(classifier_flags(
        ["--deterministic", "--spike_factor=4", "--on_divergence=stop", "--max_rollbacks=1"]))
    assert options["seed"] == 0 and options["deterministic"]
    assert options["divergence"] == DivergenceOptions(on_divergence="stop", spike_factor=4,
                                                      max_rollbacks=1)
    assert cli.runtime_options(classifier_flags(["--seed=7"]))["seed"] == 7


def test_a_bad_guard_flag_is_a_user_error_naming_it():
    with pytest.raises(errors.UserValueError, match=r"^--spike_factor must be above 1"):
        cli.runtime_options(classifier_flags(["--spike_factor=0.5"]))


def test_albert_dropout_replaces_both_dropouts():
    from albert_tf.config import AlbertConfig

    config = AlbertConfig(vocab_size=10, hidden_size=8, num_attention_heads=2,
                          intermediate_size=8, embedding_size=4)
    changed = cli.apply_albert_dropout(config, 0.1)
    assert (changed.hidden_dropout_prob, changed.attention_probs_dropout_prob) == (0.1, 0.1)
    assert cli.apply_albert_dropout(config, None) is config
    with pytest.raises(errors.UserValueError, match=r"^--albert_dropout must be in \[0, 1\)"):
        cli.apply_albert_dropout(config, 1.0)


def test_the_clis_help_examples_keep_their_line_breaks():
    """A shell example's `\\` line ends survive in --help (a raw docstring: in a plain one
    Python joins the lines, and the example becomes one long line)."""
    import ast
    import re

    from tests.conftest import REPO_ROOT

    for path in sorted(REPO_ROOT.glob("run_*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        for line in doc.splitlines():
            assert not re.search(r"\S {3,}--\w", line), f"{path.name}: {line[:80]}"
