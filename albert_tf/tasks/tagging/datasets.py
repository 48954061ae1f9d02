"""The tagging (NER) data sets: CoNLL-2003, CLUENER2020, MSRA and custom files, as
registry records (`--task_name` names one).

  reader    `(path, *, skip_bad_lines=False, **column options) -> readers.TaggedSentences`
            (column options only where `column_options`; `readers.read_sentences`
            checks them).
  metric    "f1": entity-level micro F1 on dev (seqeval's default mode) picks the best
            checkpoint, for all four.
  labels    None: the label list is the training data's (or --labels).
  settings  "split_files": {split: file names in order of preference}
              (`readers.find_split_file`);
            "column_options": whether --token_column / --label_column / --delimiter
              apply (custom column files);
            "word_split": how the SavedModel splits raw text into words ("characters"
              for the Chinese character-tagged sets, "basic": BERT's BasicTokenizer);
            "prediction_format": the predictions file (`postprocess.PredictionFormat`,
              or `postprocess.ByExtension`).

Adding a data set is one record here, its name added to `readers.TASKS` (the --task_name
choices; readers.py cannot import this module, which imports it).
"""
from __future__ import annotations

from albert_tf.tasks import registry
from albert_tf.tasks.tagging import postprocess, readers

FAMILY = readers.FAMILY


def _same_names(names_of_split) -> dict:
    """{split: names_of_split(split)} for every split."""
    return {split: tuple(names_of_split(split)) for split in readers.SPLITS}


CONLL2003 = registry.register(registry.DataSet(
    "conll2003", FAMILY, readers.read_conll2003, "f1", language="en",
    settings={"split_files": {"train": ("eng.train", "train.txt"),
                              "dev": ("eng.testa", "valid.txt", "dev.txt"),
                              "test": ("eng.testb", "test.txt")},
              "column_options": False, "word_split": "basic",
              "prediction_format": postprocess.COLUMNS},
    description="CoNLL-2003 English NER: `word POS chunk NER` columns, IOB1 tags."))
CLUENER = registry.register(registry.DataSet(
    "cluener", FAMILY, readers.read_cluener, "f1", language="zh",
    settings={"split_files": _same_names(lambda split: [f"{split}.json"]),
              "column_options": False, "word_split": "characters",
              "prediction_format": postprocess.CLUENER},
    description="CLUENER2020: Chinese JSON lines with inclusive entity offsets; one word "
                "per character."))
MSRA = registry.register(registry.DataSet(
    "msra", FAMILY, readers.read_msra, "f1", language="zh",
    settings={"split_files": _same_names(lambda split: [f"{split}.txt"]),
              "column_options": False, "word_split": "characters",
              "prediction_format": postprocess.COLUMNS},
    description="MSRA NER: Chinese `character<TAB>tag` lines."))
CUSTOM = registry.register(registry.DataSet(
    "custom", FAMILY, readers.read_custom, "f1",
    settings={"split_files": _same_names(
                  lambda split: [f"{split}{ext}" for ext in (".txt", ".tsv", ".conll")
                                 + readers.JSON_EXTENSIONS]),
              "column_options": True, "word_split": "basic",
              "prediction_format": postprocess.ByExtension()},
    description="Your own files: JSON lines with exclusive entity offsets, or word/tag "
                "column files."))


def get(name: str) -> registry.DataSet:
    """The tagging data set `name` (`registry.get`)."""
    return registry.get(FAMILY, name)
