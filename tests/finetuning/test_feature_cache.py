"""The one feature-cache policy (albert_tf.finetuning.feature_cache) and the option checks
that keep two caches from sharing a file."""
import json
import logging
import os

import pytest

from albert_tf import AlbertConfig
from albert_tf.finetuning import feature_cache

CONFIG = AlbertConfig(vocab_size=100, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)


def records_writer(records, calls):
    def write_records(write):
        calls.append(len(records))
        for record in records:
            write(record)
        return {"records": len(records)}
    return write_records


def test_built_reused_rebuilt_with_the_changed_settings_named(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="absl")
    path = str(tmp_path / "train.tf_record")
    calls = []
    first = feature_cache.prepare(path, {"max_seq_length": 8, "vocabulary": "a"},
                                  records_writer([b"x", b"y"], calls), "toy train")
    assert first == {"max_seq_length": 8, "vocabulary": "a", "records": 2}
    assert json.loads(open(path + ".json").read()) == first
    stamp = os.stat(path).st_mtime_ns
    again = feature_cache.prepare(path, {"max_seq_length": 8, "vocabulary": "a"},
                                  records_writer([b"z"], calls), "toy train")
    assert again == first and calls == [2] and os.stat(path).st_mtime_ns == stamp
    assert "reusing cached features" in caplog.text
    rebuilt = feature_cache.prepare(path, {"max_seq_length": 16, "vocabulary": "b"},
                                    records_writer([b"z"], calls), "toy train")
    assert rebuilt["records"] == 1 and calls == [2, 1]
    assert "rebuilding toy train feature cache" in caplog.text
    assert "max_seq_length, vocabulary changed" in caplog.text


def test_records_without_a_description_rebuilt_where_ours_refused_where_given(tmp_path):
    path = str(tmp_path / "dev.tf_record")
    with open(path, "wb") as handle:
        handle.write(b"not ours")
    with pytest.raises(feature_cache.FeatureCacheError,
                       match=r"dev.tf_record exists without dev.tf_record.json: it was not "
                             r"written by albert_tf"):
        feature_cache.prepare(path, {"a": 1}, records_writer([b"x"], []), "toy dev")
    assert open(path, "rb").read() == b"not ours"  # never overwritten
    calls = []
    done = feature_cache.prepare(path, {"a": 1}, records_writer([b"x"], calls), "toy dev",
                                 owned=True)
    assert done == {"a": 1, "records": 1} and calls == [1]


def test_one_file_for_two_caches_is_refused(tmp_path, spm_model):
    from albert_tf.tasks.multiple_choice.job import MultipleChoiceOptions
    from albert_tf.tasks.span_qa.job import SpanQaOptions

    train = tmp_path / "train.json"
    train.write_text('{"data": []}')
    squad = SpanQaOptions(albert_config=CONFIG, spm_model_file=spm_model,
                         output_dir=str(tmp_path / "out"), train_file=str(train),
                         predict_file=str(train), do_train=True, do_predict=True,
                         max_seq_length=64, train_feature_file=str(tmp_path / "f.tf_record"),
                         predict_feature_file=str(tmp_path / "f.tf_record"))
    with pytest.raises(ValueError, match="--train_feature_file and --predict_feature_file are "
                                         "the same file"):
        squad.validate()
    race = MultipleChoiceOptions(albert_config=CONFIG, spm_model_file=spm_model, data_dir=str(tmp_path),
                       output_dir=str(tmp_path / "out"), max_seq_length=64, max_qa_length=16,
                       train_file=str(tmp_path / "c.tf_record"),
                       eval_file=str(tmp_path / "c.tf_record"))
    with pytest.raises(ValueError, match="must be different files"):
        race.validate()
    # Evaluation batch sizes only need to be positive outside GLUE (as before the one job).
    MultipleChoiceOptions(albert_config=CONFIG, spm_model_file=spm_model, data_dir=str(tmp_path),
                output_dir=str(tmp_path / "out"), max_seq_length=64, max_qa_length=16,
                eval_batch_size=8).validate(3)
