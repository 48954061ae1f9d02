"""The classification data sets (`--task_name`): GLUE's, CLUE's, GoEmotions (multi-label)
and "custom", as registry records.

Every record's `reader` takes the run's options (anything with `data_dir`,
`do_lower_case` and `custom`: `ClassificationOptions`, or the evaluate command's
arguments) and returns a `TaskData`: the `glue.TaskSpec` with its labels (read from
the files for CLUE's TNEWS / IFLYTEK `labels.json` and custom tasks), a split ->
examples function, and the data set's own submission writer (CLUE's
`{task}_predict.json`). `settings`: "task" (the `glue.TaskSpec` or `clue.ClueDataSet`
the record reads), "benchmark" (GLUE / CLUE: groups the names in the unknown-name
error), "columns" (True: read with the custom-task column flags, `glue.CustomTaskOptions`),
"multi_label" (True: label sets, `multilabel.py`; a custom task's is its --multi_label).

Pure Python (no TensorFlow at import), as the registry.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable, List, Optional

from albert_tf.errors import UserValueError
from albert_tf.option_fields import field_specs
from albert_tf.tasks import registry
from albert_tf.tasks.classification import clue, glue, multilabel

FAMILY = "classification"


@dataclasses.dataclass(frozen=True)
class TaskData:
    """A data set opened on --data_dir: what the job and the evaluate command read.

    spec: the TaskSpec, its labels those of the files where they are read from them.
    read: split ("train", "dev", "test") -> its `glue.InputExample`s.
    submission: (output_dir, test examples, predicted labels) -> the file name written,
        the data set's own prediction file beside submit_results.tsv; None: none.
    read_file: path -> the examples of a file in the data set's format under any name
        (None: only the split files are read).
    """

    spec: glue.TaskSpec
    read: Callable[[str], List[glue.InputExample]]
    submission: Optional[Callable] = None
    read_file: Optional[Callable[[str], List[glue.InputExample]]] = None


def _open_glue(spec: glue.TaskSpec, options) -> TaskData:
    return TaskData(spec, lambda split: glue.read_examples(spec, options.data_dir, split,
                                                           options.do_lower_case))


def _open_clue(task: clue.ClueDataSet, options) -> TaskData:
    directory = clue.task_dir(task, options.data_dir)
    labels, _ = clue.task_labels(task, directory)
    return TaskData(clue.spec(task, labels),
                    lambda split: clue.read_examples(task, directory, split, labels),
                    task.write_submission)


def _open_custom(options) -> TaskData:
    custom, data_dir = options.custom, options.data_dir
    labels = None if custom.regression else glue.custom_labels(custom, data_dir)
    return TaskData(glue.custom_spec(custom, labels),
                    lambda split: glue.read_custom_examples(custom, data_dir, split, labels,
                                                            options.do_lower_case))


def _open_goemotions(options) -> TaskData:
    labels = multilabel.goemotions_labels(options.data_dir)
    return TaskData(multilabel.goemotions_spec(labels),
                    lambda split: multilabel.read_goemotions(options.data_dir, split, labels),
                    read_file=lambda path: multilabel.read_goemotions_file(path, labels))


def _glue_record(spec: glue.TaskSpec) -> registry.DataSet:
    return registry.DataSet(
        spec.name, FAMILY, functools.partial(_open_glue, spec), spec.metric, spec.labels,
        settings={"task": spec, "benchmark": "GLUE"},
        description=f"GLUE {spec.directory}: TSV files in <data_dir>/{spec.directory}/")


def _clue_record(task: clue.ClueDataSet) -> registry.DataSet:
    # TNEWS and IFLYTEK read their labels from labels.json when it is there.
    return registry.DataSet(
        task.name, FAMILY, functools.partial(_open_clue, task), "eval_accuracy",
        None if task.labels_file else task.labels, language="zh",
        settings={"task": task, "benchmark": "CLUE"},
        description=f"CLUE {task.name.upper()}: JSON lines in <data_dir>/{task.name}/")


for _spec in glue.TASKS.values():
    registry.register(_glue_record(_spec))
for _task in clue.TASKS.values():
    registry.register(_clue_record(_task))
registry.register(registry.DataSet(
    multilabel.GOEMOTIONS, FAMILY, _open_goemotions, "macro_f1", None,
    settings={"multi_label": True, "benchmark": "multi-label"},
    description="GoEmotions (multi-label, 28 emotions): <data_dir>/{train,dev,test}.tsv "
                "(text, comma-separated label ids, id) and <data_dir>/emotions.txt"))
registry.register(registry.DataSet(
    glue.CUSTOM_TASK, FAMILY, _open_custom, "eval_accuracy", None,
    settings={"columns": True},
    description="The user's {train,dev,test}.{tsv,csv,txt} in <data_dir>, columns chosen by "
                "the custom-task flags; labels: the training file's (best by pearson with "
                "--regression)"))


def known(name: str) -> bool:
    """Whether `name` (any case) is a classification data set."""
    return str(name).lower() in registry.names(FAMILY)


def get(name: str) -> registry.DataSet:
    """The record of `name` (any case); an unknown name is a UserValueError naming
    --task_name and the names, grouped by benchmark (the message run_classifier.py has
    always given)."""
    if not known(name):
        groups = {}
        for data_set in map(functools.partial(registry.get, FAMILY), registry.names(FAMILY)):
            groups.setdefault(data_set.settings.get("benchmark"), []).append(data_set.name)
        named = [f"{', '.join(sorted(names))} ({group})" for group, names in groups.items()
                 if group]
        raise UserValueError(f"--task_name {name!r} is not one of {', '.join(named)} or "
                             f"{', '.join(sorted(groups.get(None, [])))}")
    return registry.get(FAMILY, name)


def custom_options(values) -> Optional[glue.CustomTaskOptions]:
    """The custom-task column options of parsed flags or arguments `values` (anything with
    `task_name` and `glue.CustomTaskOptions`' field names): None for a data set not read
    with them (an unknown name included: the options' check names it); a UserValueError
    when --text_a_column or --label_column is missing."""
    if not known(values.task_name) or not get(values.task_name).settings.get("columns"):
        return None
    if not (values.text_a_column and values.label_column):
        raise UserValueError("--task_name=custom needs --text_a_column and --label_column")
    defaults = glue.CustomTaskOptions(values.text_a_column, values.label_column)
    return glue.CustomTaskOptions(**{name: getattr(values, name, getattr(defaults, name))
                                     for name in field_specs(glue.CustomTaskOptions)})


def open_task(options) -> TaskData:
    """The TaskData of options.task_name on options.data_dir (the labels of a CLUE or
    custom task read from its files)."""
    return get(options.task_name).reader(options)
