"""Options that declare their flags: field specs up the MRO, renames, hidden fields, checks,
and the flags `cli_options` defines from them and the object it builds back."""
import dataclasses
from typing import ClassVar, Dict, Optional, Tuple

import pytest
from absl import flags

from albert_tf import cli_options, option_fields
from albert_tf.option_fields import DROPOUT, POSITIVE, option


@dataclasses.dataclass(kw_only=True)
class Base:
    name: str = option(help="A required name.")
    steps: int = option(10, help="Steps.", check=POSITIVE)
    dropout: float = option(0.1, help="Dropout.", check=DROPOUT)
    mode: str = option("a", help="Mode.", choices=("a", "b"))
    formats: Tuple[str, ...] = option(("x",), help="Formats.")
    limit: Optional[int] = option(None, help="A limit.")
    computed: int = 0  # no option(): not a flag


@dataclasses.dataclass(kw_only=True)
class Family(Base):
    steps: int = 99  # a family default: the help and check stay Base's
    FLAG_NAMES: ClassVar[Dict[str, str]] = {"dropout": "head_dropout"}
    NOT_FLAGS: ClassVar[Tuple[str, ...]] = ("limit",)


def test_field_specs_find_help_up_the_mro_and_apply_renames_and_hidden_fields():
    specs = option_fields.field_specs(Family)
    assert list(specs) == ["name", "steps", "dropout", "mode", "formats"]
    assert specs["steps"].default == 99 and specs["steps"].help == "Steps."
    assert specs["steps"].check is POSITIVE
    assert specs["dropout"].flag == "head_dropout"
    assert specs["name"].required and specs["name"].default is None
    assert specs["formats"].kind is list and specs["mode"].choices == ("a", "b")


def test_check_fields_names_the_flag_and_the_rule():
    with pytest.raises(ValueError, match=r"^--steps must be positive, got 0$"):
        option_fields.check_fields(Family(name="n", steps=0))
    with pytest.raises(ValueError, match=r"^--head_dropout must be in \[0, 1\), got 1.0$"):
        option_fields.check_fields(Family(name="n", dropout=1.0))
    option_fields.check_fields(Family(name="n"))  # the defaults pass


def test_flags_defined_from_the_fields_build_the_options_back():
    values = flags.FlagValues()
    cli_options.define_flags(Family, values=values)
    assert sorted(values) == ["formats", "head_dropout", "mode", "name", "steps"]
    assert values["steps"].default == 99 and values["steps"].help == "Steps."
    values(["prog", "--name=n", "--head_dropout=0.3", "--formats=x,y", "--mode=b"])
    options = cli_options.options_from_flags(Family, values, computed=5)
    assert options == Family(name="n", steps=99, dropout=0.3, mode="b", formats=("x", "y"),
                             computed=5)
    with pytest.raises(flags.IllegalFlagValueError):
        values(["prog", "--mode=c"])


def test_an_option_field_of_another_type_is_refused():
    @dataclasses.dataclass
    class Bad:
        mapping: Dict[str, int] = option(None, help="Not a flag type.")

    with pytest.raises(TypeError, match="must be bool, int, float, str or a tuple of str"):
        option_fields.field_specs(Bad)


def test_an_empty_list_flag_leaves_a_none_default_unset():
    """`--limits=` on a list field whose default is None means "not given" (run_ner's
    --labels=), while a list field with a default keeps the empty tuple it was given."""
    @dataclasses.dataclass(kw_only=True)
    class Lists:
        labels: Optional[Tuple[str, ...]] = option(None, help="Labels.")
        formats: Tuple[str, ...] = option(("x",), help="Formats.")

    values = flags.FlagValues()
    cli_options.define_flags(Lists, values=values)
    values(["prog", "--labels=", "--formats="])
    assert cli_options.options_from_flags(Lists, values) == Lists(labels=None, formats=())


def test_every_declared_check_runs_before_a_job(tmp_path):
    """TaskOptions.check applies each field's declared check, also in a family whose own
    validate does not name the field (SQuAD's head dropout), and skips hidden fields."""
    from albert_tf.config import AlbertConfig
    from albert_tf.tasks.span_qa.job import SpanQaOptions

    options = SpanQaOptions(albert_config=AlbertConfig(vocab_size=10), output_dir=str(tmp_path),
                            vocab_file="v.txt", do_train=False, do_predict=False,
                            classifier_dropout=1.5, eval_batch_size=0)
    with pytest.raises(ValueError, match=r"--classifier_dropout must be in \[0, 1\), got 1.5"):
        option_fields.check_fields(options)
    option_fields.check_fields(options, ("eval_batch_size",))  # hidden in run_squad: skipped


def test_an_export_only_multiple_choice_job_passes_validation(tmp_path):
    """RACE / C3 export the weights they are given with --export_dir alone
    (exports_without_training): the run's checks, which want a --do_*, do not apply."""
    from albert_tf.config import AlbertConfig
    from albert_tf.tasks.multiple_choice.job import MultipleChoiceJob, MultipleChoiceOptions

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    options = MultipleChoiceOptions(
        data_dir=str(tmp_path), output_dir=str(tmp_path), vocab_file=str(vocab),
        albert_config=AlbertConfig(vocab_size=5), do_train=False, do_eval=False,
        export_dir=str(tmp_path / "export"))
    MultipleChoiceJob(options).validate(1)
    with pytest.raises(ValueError, match="at least one of --do_train"):
        options.check(1)  # the CLI's check: a run is asked for
