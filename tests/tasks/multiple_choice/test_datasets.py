"""run_race.py's data sets in the registry: RACE and C3 resolve by name with the labels,
metric, language and behaviour the job used before the registry; an unknown name's error."""
import pytest

from albert_tf.config import AlbertConfig
from albert_tf.errors import UserValueError
from albert_tf.tasks import registry
from albert_tf.tasks.multiple_choice import c3, datasets, job, postprocess, race

CONFIG = AlbertConfig(vocab_size=100, hidden_size=8, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=8)
CHOICES = ("option 0", "option 1", "option 2", "option 3")


def test_the_names_are_the_flag_choices():
    assert registry.names("multiple_choice") == ("race", "c3") == job.TASKS


@pytest.mark.parametrize("name, labels, language, levels, choices, masked, display", [
    ("race", ("A", "B", "C", "D"), "en", ("middle", "high"), ("A", "B", "C", "D"), False,
     "RACE"),
    ("c3", None, "zh", ("m", "d"), CHOICES, True, "C3"),
])
def test_records(name, labels, language, levels, choices, masked, display):
    data_set = registry.get("multiple_choice", name.upper())  # any case
    assert (data_set.name, data_set.family, data_set.labels, data_set.metric,
            data_set.language) == (name, "multiple_choice", labels, "eval_accuracy", language)
    assert data_set.metric == job.METRIC == job.MultipleChoiceJob.metric
    data = data_set.settings["data"]
    assert data is datasets.data_of(name)
    assert (data.levels, data.choice_labels, data.masked, data.display) == (
        levels, choices, masked, display)
    # The job's objective is the one it built by name before.
    options = job.MultipleChoiceOptions(data_dir="unused", output_dir="unused",
                                        albert_config=CONFIG, task_name=name)
    task = job.MultipleChoiceJob(options).task
    assert (task.levels, task.masked, task.name, task.choice_labels) == (
        levels, masked, display, choices)


def test_per_data_set_settings_are_the_old_constants():
    assert datasets.RACE.labels == race.LABELS
    assert datasets.data_of("race").levels == race.LEVELS
    assert datasets.data_of("c3").levels == c3.SUBSETS
    assert registry.get("multiple_choice", "race").default_rules == ("max_qa_length:race",)
    assert registry.get("multiple_choice", "c3").default_rules == ()
    assert datasets.data_of("c3").submission_file == postprocess.C3_SUBMISSION_FILE == \
        "c3_predict.json"
    assert datasets.data_of("race").submission_file is None
    assert (datasets.data_of("race").uses_qa_length, datasets.data_of("c3").uses_qa_length) \
        == (True, False)


def test_reader_reads_the_split(shared_data):
    examples = registry.get("multiple_choice", "race").reader(str(shared_data / "race"), "dev")
    assert examples == race.read_examples(str(shared_data / "race"), "dev")


def test_unknown_name():
    with pytest.raises(UserValueError, match=r"^--task_name 'dream' is not a multiple choice "
                                             r"data set: one of race, c3$"):
        registry.get("multiple_choice", "dream")
    with pytest.raises(ValueError, match=r"--task_name must be one of race, c3, got 'dream'"):
        job.MultipleChoiceOptions(data_dir="d", output_dir="o", task_name="dream",
                                  albert_config=CONFIG, spm_model_file="x.model").validate()
    # The job is built with it, and refuses it when it runs, with the options' message.
    options = job.MultipleChoiceOptions(data_dir="d", output_dir="o", task_name="dream",
                                        albert_config=CONFIG, spm_model_file="x.model")
    unknown = job.MultipleChoiceJob(options)
    with pytest.raises(ValueError, match=r"--task_name must be one of race, c3, got 'dream'"):
        unknown.validate(1)


def test_the_job_reads_its_data_set_from_the_registry():
    options = job.MultipleChoiceOptions(data_dir="d", output_dir="o", task_name="c3",
                                        albert_config=CONFIG, vocab_file="vocab.txt")
    c3_job = job.MultipleChoiceJob(options)
    assert c3_job.data_set is registry.get("multiple_choice", "c3")
    assert c3_job.source is datasets.data_of("c3") and c3_job.is_c3
    assert c3_job.objective().masked and c3_job.objective().levels == ("m", "d")


@pytest.mark.parametrize("name, probabilities, prediction", [
    ("race", [0.1, 0.2, 0.6, 0.1], "C"), ("c3", [0.3, 0.7, 0.0, 0.0], 1)])
def test_prediction_index_round_trips_the_records(name, probabilities, prediction):
    data = datasets.data_of(name)
    example = (race.RaceExample("x", 0, "high", "a", "q", ("1", "2", "3", "4"), 2, "s")
               if name == "race" else
               c3.C3Example("x", 0, "m", "c", "q", ("1", "2"), 1, None, "s"))
    record = data.prediction_records([example], [probabilities])[0]
    assert record["prediction"] == prediction
    assert data.prediction_index(record) == (2 if name == "race" else 1)
    with pytest.raises(ValueError, match="'prediction' must be"):
        data.prediction_index({"prediction": "E" if name == "race" else 4})
