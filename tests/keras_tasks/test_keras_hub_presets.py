"""keras-hub presets without keras-hub: what albert-tf writes it reads back with equal
outputs and equal weights (every backbone and head variable), and presets it cannot read are
refused in one line. keras-hub itself reads and writes them in test_keras_hub_oracle.py."""
import json
import os

import numpy as np
import pytest

import albert_tf
from albert_tf import convert
from albert_tf.checkpoints import hf, keras_hub
from albert_tf.errors import UserError

TEXTS = ["a good film, truly", "the plot makes no sense at all", "I loved it"]


@pytest.fixture(scope="module")
def preset(models, tmp_path_factory):
    classifier = albert_tf.from_pretrained(models["sentiment"], sequence_length=32)
    directory = str(tmp_path_factory.mktemp("preset") / "classifier")
    written = classifier.save_to_preset(directory)
    return classifier, directory, written


def test_a_written_classifier_preset_reads_back_with_equal_logits(preset):
    classifier, directory, written = preset
    assert sorted(written) == sorted(
        ["config.json", "metadata.json", "model.weights.h5", "preprocessor.json", "task.json",
         "task.weights.h5", "tokenizer.json", os.path.join("assets", "tokenizer",
                                                            "vocabulary.spm")])
    with open(os.path.join(directory, "task.json")) as handle:
        task = json.load(handle)
    assert task["registered_name"] == "keras_hub>AlbertTextClassifier"
    assert task["config"]["num_classes"] == 2
    again = albert_tf.from_pretrained(directory)
    assert again.preprocessor.sequence_length == 32
    np.testing.assert_allclose(again.predict(TEXTS, verbose=0),
                               classifier.predict(TEXTS, verbose=0), rtol=1e-6, atol=1e-6)


def test_every_masked_lm_variable_survives_the_preset(models, tmp_path, official_spm):
    """The masked-LM head's and every encoder block's names and shapes (2 groups of 2
    inner layers, so a mixed-up block order cannot pass)."""
    config = hf.config_from_hf_dir(models["mlm"])
    config.num_hidden_groups, config.inner_group_num = 2, 2
    model = convert.build_model("pretrainer", config)
    rng = np.random.default_rng(0)
    for variable in model.weights:
        variable.assign(rng.normal(0, 0.1, variable.shape).astype(np.float32))
    arrays = keras_hub.tf1_arrays(model)
    keras_hub.write_preset(str(tmp_path), config, arrays, official_spm, "masked_lm",
                           sequence_length=48)
    read = keras_hub.read_preset(str(tmp_path))
    assert (read.task, read.sequence_length) == ("masked_lm", 48)
    sop = {name for name in arrays if name.startswith("cls/seq_relationship")}
    assert set(read.arrays) == set(arrays) - sop  # keras-hub has no sentence-order head
    for name, value in read.arrays.items():
        np.testing.assert_array_equal(value, arrays[name], err_msg=name)


def edit_json(path, change):
    with open(path) as handle:
        values = json.load(handle)
    change(values)
    with open(path, "w") as handle:
        json.dump(values, handle)


@pytest.mark.parametrize("edit, message", [
    (lambda d: edit_json(os.path.join(d, "config.json"),
                         lambda v: v.update(registered_name="keras_hub>BertBackbone")),
     "config.json: a keras-hub preset of keras_hub>BertBackbone, not of ALBERT"),
    (lambda d: edit_json(os.path.join(d, "task.json"),
                         lambda v: v.update(registered_name="keras_hub>AlbertCausalLM")),
     "task.json: task keras_hub>AlbertCausalLM; this library reads"),
    (lambda d: os.remove(os.path.join(d, "assets", "tokenizer", "vocabulary.spm")),
     "vocabulary.spm: the preset's SentencePiece model is missing"),
])
def test_presets_it_cannot_read_are_one_line(preset, tmp_path, edit, message):
    import shutil

    copy = str(tmp_path / "copy")
    shutil.copytree(preset[1], copy)
    edit(copy)
    with pytest.raises(UserError, match=message):
        albert_tf.from_pretrained(copy)


def test_a_wordpiece_model_is_not_a_keras_hub_preset(tmp_path, chinese_vocab_file):
    from tests.helpers import hf_models

    directory = hf_models.write_hf_dir(str(tmp_path / "zh"), "classifier", None, ["a", "b"],
                                       vocab_file=chinese_vocab_file)
    classifier = albert_tf.from_pretrained(directory, sequence_length=16)
    with pytest.raises(UserError, match="a keras-hub preset holds a SentencePiece model"):
        classifier.save_to_preset(str(tmp_path / "preset"))
