"""albert_tf.cli_defaults: defaults that follow the user's other flags; conflicts between
flags the user gave are refused in one line naming both."""
import pytest
from absl import flags

from albert_tf import cli_defaults
from albert_tf.errors import UserValueError

DEFAULTS = {"max_seq_length": 128, "doc_stride": 64, "max_query_length": 64,
            "max_qa_length": 128, "eval_batch_size": 8, "predict_batch_size": 8,
            "num_train_steps": 125000, "num_warmup_steps": 3125, "train_step": 12000,
            "warmup_step": 1000}


def parsed(*argv, **defaults):
    values = flags.FlagValues()
    for name, value in {**DEFAULTS, **defaults}.items():
        flags.DEFINE_integer(name, value, "", flag_values=values)
    values(["prog", *argv])
    return values


def test_the_fixed_defaults_stand_where_the_other_flags_kept_theirs():
    values = parsed()  # run_ner.py's, and the original's warmups
    rules = ["doc_stride:ner", "eval_batch_size:8", "predict_batch_size:8",
             "num_warmup_steps:pretraining", "warmup_step:race"]
    assert cli_defaults.apply(rules, 1, values) == {}
    assert {name: values[name].value for name in DEFAULTS} == DEFAULTS
    assert cli_defaults.apply(["eval_batch_size:64"], 1, parsed(eval_batch_size=64)) == {}
    squad = parsed(max_seq_length=384, doc_stride=128)
    assert cli_defaults.apply(["max_query_length:squad", "doc_stride:squad"], 1, squad) == {}
    race = parsed(max_seq_length=512)
    assert cli_defaults.apply(["max_qa_length:race", "warmup_step:race"], 1, race) == {}


@pytest.mark.parametrize("argv,rule,expected", [
    # run_ner.py: 64 fits a window of max_seq_length - 2, else half the window.
    (["--max_seq_length=64"], "doc_stride:ner", 31),
    (["--max_seq_length=66"], "doc_stride:ner", 64),
    (["--max_seq_length=8"], "doc_stride:ner", 3),
    # run_squad.py: 64 where a document token fits beside it, else half; the stride leaves
    # the windows overlapping.
    (["--max_seq_length=64"], "max_query_length:squad", 32),
    (["--max_seq_length=68"], "max_query_length:squad", 64),
    (["--max_seq_length=128"], "max_query_length:squad", 64),
    (["--max_seq_length=128"], "doc_stride:squad", 30),  # window 128 - 64 - 3 = 61
    (["--max_seq_length=256"], "doc_stride:squad", 128),  # window 189: 128 still overlaps
    (["--max_seq_length=128", "--max_query_length=32"], "doc_stride:squad", 46),
    (["--max_seq_length=128"], "max_qa_length:race", 64),
    (["--max_seq_length=131"], "max_qa_length:race", 128),
    (["--max_seq_length=256"], "doc_stride:squad", 128),
    # Warmup: the original's share of the original's run, for shorter runs.
    (["--num_train_steps=10000"], "num_warmup_steps:pretraining", 250),
    (["--num_train_steps=500000"], "num_warmup_steps:pretraining", 3125),
    (["--num_train_steps=1"], "num_warmup_steps:pretraining", 1),
    (["--train_step=600"], "warmup_step:race", 50),
])
def test_a_default_follows_the_flag_it_depends_on(argv, rule, expected):
    values = parsed(*argv)
    flag = cli_defaults.RULES[rule].flag
    moved = cli_defaults.apply([rule], 1, values)
    assert moved == ({} if expected == values[flag].default else {flag: expected})
    assert values[flag].value == expected


def test_the_squad_stride_follows_the_query_length_it_got_first():
    values = parsed("--max_seq_length=64")
    moved = cli_defaults.apply(["max_query_length:squad", "doc_stride:squad"], 1, values)
    assert moved == {"max_query_length": 32, "doc_stride": 14}  # window 64 - 32 - 3 = 29


@pytest.mark.parametrize("replicas,expected", [(1, 8), (2, 8), (3, 9), (16, 16)])
def test_evaluation_batches_follow_the_replica_count(replicas, expected):
    values = parsed()
    cli_defaults.apply(["eval_batch_size:8", "predict_batch_size:8"], replicas, values)
    assert (values.eval_batch_size, values.predict_batch_size) == (expected, expected)
    pretraining = parsed(eval_batch_size=64)
    cli_defaults.apply(["eval_batch_size:64"], replicas, pretraining)
    assert pretraining.eval_batch_size == max(64, -(-64 // replicas) * replicas)


def test_a_given_flag_is_kept_and_one_set_by_hparams_counts_as_given():
    values = parsed("--max_seq_length=64", "--doc_stride=16")
    assert cli_defaults.apply(["doc_stride:ner"], 1, values) == {} and values.doc_stride == 16
    race = parsed("--train_step=600")
    race.warmup_step = 20  # as --hparams=paper sets it
    assert cli_defaults.apply(["warmup_step:race"], 1, race, hparams_set=["warmup_step"]) == {}
    assert race.warmup_step == 20


@pytest.mark.parametrize("argv,rule,replicas,message", [
    (["--max_seq_length=64", "--doc_stride=64"], "doc_stride:ner", 1,
     "--doc_stride 64 must be in [1, --max_seq_length - 2 = 62] (--max_seq_length 64)"),
    (["--num_train_steps=1000", "--num_warmup_steps=3125"], "num_warmup_steps:pretraining", 1,
     "--num_warmup_steps 3125 is longer than --num_train_steps 1000: the learning rate "
     "would never reach --learning_rate"),
    (["--eval_batch_size=8"], "eval_batch_size:8", 3,
     "--eval_batch_size 8 must be divisible by the number of replicas (3): give a multiple "
     "of 3, or leave it out to get 9"),
])
def test_given_flags_that_conflict_are_refused_naming_both(argv, rule, replicas, message):
    with pytest.raises(UserValueError) as error:
        cli_defaults.apply([rule], replicas, parsed(*argv))
    assert str(error.value).startswith(message), str(error.value)
    assert "\n" not in str(error.value)


def test_a_stride_of_a_window_or_more_stands_with_a_warning(caplog):
    """The original moves a SQuAD window by min(stride, window): a longer stride is valid
    and means windows that share no token, which the log says."""
    import logging
    values = parsed("--max_seq_length=128", "--doc_stride=100")
    with caplog.at_level(logging.WARNING):
        assert cli_defaults.apply(["doc_stride:squad"], 1, values) == {}
    assert values.doc_stride == 100
    assert [r.getMessage() for r in caplog.records] == [
        "--doc_stride 100 is at least a document window (--max_seq_length 128 - "
        "--max_query_length 64 - 3 = 61 tokens): as in the original, a window moves by its "
        "length, so consecutive windows share no token"]


def test_a_table_value_that_does_not_fit_gives_way_to_the_rule():
    race = parsed("--train_step=600")  # --hparams=paper's RACE warmup 1000 for 600 steps
    assert cli_defaults.apply(["warmup_step:race"], 1, race,
                              hparams_set=["warmup_step"]) == {"warmup_step": 50}
    with pytest.raises(UserValueError, match="--warmup_step 1000 is longer than "
                                              "--train_step 600"):
        cli_defaults.apply(["warmup_step:race"], 1, parsed("--train_step=600",
                                                           "--warmup_step=1000"))


def test_a_moved_default_is_logged_once_with_what_it_follows(caplog):
    import logging
    # The absl logger's own level too: TensorFlow's SavedModel saving sets absl's verbosity
    # and restores it as the root's level, so after an export in this process it is WARNING.
    with caplog.at_level(logging.INFO), caplog.at_level(logging.INFO, logger="absl"):
        cli_defaults.apply(["doc_stride:ner"], 1, parsed("--max_seq_length=64"))
    lines = [r.getMessage() for r in caplog.records if "--doc_stride" in r.getMessage()]
    assert lines == ["--doc_stride 31 (its default follows --max_seq_length 64: 64, or half "
                     "the window where 64 does not fit)"]
