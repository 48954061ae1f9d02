"""--data_dir as users give it: the GLUE root or the task's own folder; RACE's parent, the
RACE folder or any folder holding the splits; neither is an error naming the places tried."""
import logging
import os

import pytest

from albert_tf import errors
from albert_tf.config import AlbertConfig
from albert_tf.finetuning import FinetuningOptions
from albert_tf.tasks.classification import glue
from albert_tf.tasks.multiple_choice import race


def example_tuples(examples):
    return [(e.guid, e.text_a, e.text_b, e.label, e.source) for e in examples]


@pytest.fixture
def absl_info(caplog):
    caplog.set_level(logging.INFO, logger="absl")
    return caplog


@pytest.mark.parametrize("task, folder", [("cola", "CoLA"), ("rte", "RTE")])
def test_glue_root_and_task_folder_read_the_same_files(shared_data, absl_info, task, folder):
    root = shared_data / "glue"
    spec = glue.TASKS[task]
    for split in ("train", "dev"):
        from_root = glue.read_examples(spec, str(root), split)
        from_folder = glue.read_examples(spec, str(root / folder), split)
        # The same file was read either way: `source` is its path:line.
        assert example_tuples(from_folder) == example_tuples(from_root)
        assert from_root[0].source == f"{root / folder / (split + '.tsv')}:" + \
            ("2" if spec.splits[split].header else "1")
    log = absl_info.text
    assert f"GLUE {task}: reading the files in {root / folder} (--data_dir is the GLUE root)" \
        in log
    assert f"GLUE {task}: reading the files in {root / folder} (--data_dir is the task's " \
           "folder)" in log
    assert f"from {root / folder / 'dev.tsv'}" in log


def test_glue_root_wins_when_both_layouts_have_files(tmp_path):
    header = "index\tsentence1\tsentence2\tlabel\n"
    (tmp_path / "RTE").mkdir()
    (tmp_path / "RTE" / "dev.tsv").write_text(header + "0\tin the folder\tb\tentailment\n")
    (tmp_path / "dev.tsv").write_text(header + "0\tat the root\tb\tentailment\n")
    [example] = glue.read_examples(glue.TASKS["rte"], str(tmp_path), "dev")
    assert example.text_a == "in the folder"
    assert glue.task_dir(glue.TASKS["rte"], str(tmp_path)) == str(tmp_path / "RTE")


def test_glue_neither_layout_names_data_dir_task_and_places(tmp_path):
    (tmp_path / "CoLA").mkdir()  # the folder exists but holds none of the task's files
    (tmp_path / "unrelated.tsv").write_text("x\n")
    with pytest.raises(glue.GlueDataError) as caught:
        glue.read_examples(glue.TASKS["cola"], str(tmp_path), "dev")
    assert isinstance(caught.value, errors.UserError)  # the CLIs print it on one line
    message = str(caught.value)
    assert message == (
        f"{tmp_path / 'CoLA' / 'dev.tsv'}: file not found (check --data_dir and --task_name): "
        f"no {{train.tsv,dev.tsv,test.tsv}} of task cola in {tmp_path / 'CoLA'} (--data_dir as "
        f"the GLUE root) or in {tmp_path} (--data_dir as the task's folder)")
    # A missing split of a layout that was found names that split's file.
    (tmp_path / "train.tsv").write_text("src\t1\t\tok\n")
    with pytest.raises(glue.GlueDataError, match=rf"^{tmp_path / 'dev.tsv'}: file not found"):
        glue.read_examples(glue.TASKS["cola"], str(tmp_path), "dev")


def test_run_glue_on_the_task_folder_as_in_the_issue(shared_data, tmp_path, absl_info):
    """`run_classifier.py --data_dir=glue/STS-B --task_name=sts-b` reads glue/STS-B/*.tsv."""
    from albert_tf.tasks.classification.job import ClassificationOptions, run_glue

    spm = shared_data / "spm" / "albert_style_pd8k.model"
    if not spm.exists():
        pytest.skip(f"{spm} not found")
    source = shared_data / "glue" / "STS-B"
    folder = tmp_path / "glue" / "STS-B"
    folder.mkdir(parents=True)
    (folder / "train.tsv").symlink_to(source / "train_sample.tsv")
    (folder / "dev.tsv").symlink_to(source / "dev_sample.tsv")
    config = AlbertConfig(vocab_size=8000, embedding_size=16, hidden_size=32,
                          num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                          max_position_embeddings=32)
    out = tmp_path / "out"
    results = run_glue(ClassificationOptions(
        task_name="sts-b", data_dir=str(folder), spm_model_file=str(spm), albert_config=config,
        max_seq_length=32, eval_batch_size=8,
        finetuning=FinetuningOptions(output_dir=str(out), do_train=True, do_eval=True,
                                     train_batch_size=8, train_step=2,
                                     save_checkpoints_steps=2, iterations_per_loop=2, seed=1)))
    assert results["global_step"] == 2
    assert results["eval"]["eval_examples"] == 30  # dev_sample.tsv: a header and 30 rows
    assert f"read 30 dev examples from {folder / 'dev.tsv'}" in absl_info.text
    assert "(--data_dir is the task's folder)" in absl_info.text


# --- RACE ---------------------------------------------------------------------------------------


def race_layouts(shared_data, tmp_path):
    """The original's parent of RACE/, the RACE folder, and a folder of another name holding
    the split folders (links to the shared sample)."""
    other = tmp_path / "my_race"
    other.mkdir()
    for split in ("train", "dev"):
        os.symlink(shared_data / "race" / "RACE" / split, other / split)
    return {"parent": shared_data / "race", "race_folder": shared_data / "race" / "RACE",
            "other_folder": other}


@pytest.mark.parametrize("layout", ["race_folder", "other_folder"])
def test_race_layouts_read_the_same_questions(shared_data, tmp_path, absl_info, layout):
    data_dir = race_layouts(shared_data, tmp_path)[layout]
    for split in ("train", "dev"):
        want = race.read_examples(str(shared_data / "race"), split)
        got = race.read_examples(str(data_dir), split)
        assert len(got) == len(want) > 0
        assert [(e.example_id, e.question_index, e.level, e.article, e.question, e.options,
                 e.label) for e in got] == \
            [(e.example_id, e.question_index, e.level, e.article, e.question, e.options,
              e.label) for e in want]
        assert all(e.source.startswith(str(data_dir / split)) for e in got)
    assert f"files in {data_dir / 'dev' / 'middle'}" in absl_info.text
    assert race.race_dir(str(shared_data / "race")) == str(shared_data / "race" / "RACE")
    assert race.race_dir(str(data_dir)) == str(data_dir)


def test_race_neither_layout_names_data_dir_and_places(tmp_path):
    (tmp_path / "RACE").mkdir()
    (tmp_path / "middle").mkdir()  # a level folder is not a split folder
    with pytest.raises(race.RaceDataError) as caught:
        race.read_examples(str(tmp_path), "dev")
    assert isinstance(caught.value, errors.UserError)
    assert str(caught.value) == (
        f"--data_dir {tmp_path}: no RACE data: found no {{train,dev,test}}/ folder in "
        f"{tmp_path / 'RACE'} (--data_dir as the folder holding RACE/) or in {tmp_path} "
        "(--data_dir as the RACE folder)")
    # A split missing from the layout found is named with both spellings of the layout.
    (tmp_path / "RACE" / "train" / "middle").mkdir(parents=True)
    with pytest.raises(race.RaceDataError, match=rf"{tmp_path / 'RACE' / 'dev' / 'middle'} "
                                                 r"does not exist: --data_dir must hold "
                                                 r"RACE/dev/\{middle,high\} or dev/"):
        race.read_examples(str(tmp_path), "dev")
