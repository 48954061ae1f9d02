"""The pretraining TFRecord reader: schema checks, corruption, sharding, batching."""
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.pretraining import inputs
from tests.helpers.pretraining_data import make_examples, serialize, write_records


@pytest.fixture
def records(tmp_path):
    return write_records(tmp_path / "a.tfrecord", make_examples(10, seq_len=16, max_pred=4))


def config(files, **kw):
    return inputs.PretrainingInputConfig(files, 16, 4, **kw)


def test_training_batches_shapes_and_dtypes(records):
    batch = next(iter(inputs.pretraining_dataset(config(records, seed=1), 4)))
    assert set(batch) == set(inputs.pretraining_schema(16, 4))
    assert batch["input_ids"].shape == (4, 16) and batch["input_ids"].dtype == tf.int32
    assert batch["masked_lm_positions"].shape == (4, 4)
    assert batch["masked_lm_weights"].dtype == tf.float32
    assert batch["next_sentence_labels"].shape == (4, 1)


def test_evaluation_reads_every_record_once_in_order(records):
    batches = list(inputs.pretraining_dataset(config(records, is_training=False), 4))
    assert [b["input_ids"].shape[0] for b in batches] == [4, 4, 2]
    want = np.stack([e["input_ids"] for e in make_examples(10, seq_len=16, max_pred=4)])
    np.testing.assert_array_equal(np.concatenate([b["input_ids"] for b in batches]), want)


def test_sharding_splits_files_between_pipelines(tmp_path):
    files = [write_records(tmp_path / f"{i}.tfrecord", make_examples(4, seed=i))
             for i in range(2)]
    seen = []
    for pipeline in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline)
        ds = inputs.pretraining_dataset(config(files, is_training=False), 2, ctx)
        seen.append({tuple(row) for b in ds for row in b["input_ids"].numpy()})
    assert len(seen[0]) == 4 and len(seen[1]) == 4 and not seen[0] & seen[1]


def test_patterns(tmp_path, records):
    assert inputs.expand_patterns(f"{records}, {tmp_path}/*.tfrecord") == [records]
    with pytest.raises(inputs.InputError, match="'nothing-\\*.rec' matches no file"):
        inputs.expand_patterns(f"{records},nothing-*.rec")
    with pytest.raises(inputs.InputError, match="matches no file"):
        inputs.expand_patterns(str(tmp_path / "missing.tfrecord"))


def test_schema_mismatch_names_feature_and_file(tmp_path):
    example = make_examples(1)[0]
    wrong_len = write_records(tmp_path / "len.tfrecord", [example])
    with pytest.raises(inputs.InputError, match=r"len.tfrecord: feature 'input_ids' is "
                                                r"int64\[16\], expected int64\[32\]"):
        inputs.pretraining_dataset(inputs.PretrainingInputConfig(wrong_len, 32, 4), 2)
    missing = dict(example)
    del missing["token_boundary"]
    path = write_records(tmp_path / "missing.tfrecord", [missing])
    with pytest.raises(inputs.InputError, match="missing.tfrecord: feature 'token_boundary' is "
                                                "missing"):
        inputs.pretraining_dataset(config(path), 2)
    floats = dict(example, masked_lm_ids=example["masked_lm_ids"].astype(np.float32))
    path = write_records(tmp_path / "dtype.tfrecord", [floats])
    with pytest.raises(inputs.InputError, match="'masked_lm_ids' is float\\[4\\], expected "
                                                "int64\\[4\\]"):
        inputs.pretraining_dataset(config(path), 2)


def test_unreadable_and_empty_files(tmp_path):
    text = tmp_path / "text.tfrecord"
    text.write_text("this is not a tfrecord file at all, just some text\n" * 3)
    with pytest.raises(inputs.InputError, match="text.tfrecord: not a readable TFRecord"):
        inputs.pretraining_dataset(config(str(text)), 2)
    empty = write_records(tmp_path / "empty.tfrecord", [])
    with pytest.raises(inputs.InputError, match="empty.tfrecord: contains no records"):
        inputs.pretraining_dataset(config(empty), 2)


def test_corruption_is_located_with_the_file_name(tmp_path, records):
    good = write_records(tmp_path / "good.tfrecord", make_examples(5))
    data = bytearray(open(records, "rb").read())
    data[len(data) // 2] ^= 0xFF
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(data))
    inputs.locate_corruption([good])  # no error
    with pytest.raises(inputs.InputError, match="bad.tfrecord: corrupted TFRecord"):
        inputs.locate_corruption([good, str(bad)])


def test_serialized_schema_matches_original_layout():
    example = tf.train.Example.FromString(serialize(make_examples(1, seq_len=16, max_pred=4)[0]))
    kinds = inputs._example_kinds(example)
    assert kinds == {name: spec for name, spec in inputs.pretraining_schema(16, 4).items()}
