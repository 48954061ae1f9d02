"""data_prep.tfrecord and data_prep.example_codec against TensorFlow's own writer and protobuf."""
import os

import numpy as np
import pytest

from data_prep import example_codec, tfrecord
from data_prep.pipeline import feature_schema


def _bitwise_crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def test_crc32c_known_vectors():
    # RFC 3720 B.4 check value and iSCSI test vectors.
    assert tfrecord.crc32c(b"123456789") == 0xE3069283
    assert tfrecord.crc32c(bytes(32)) == 0x8A9136AA
    assert tfrecord.crc32c(b"\xff" * 32) == 0x62A8AB43
    assert tfrecord.crc32c(bytes(range(32))) == 0x46DD794E
    assert tfrecord.crc32c(b"") == 0
    assert tfrecord.crc32c(b"ab") == _bitwise_crc32c(b"ab")


def test_crc32c_batch_matches_bitwise_for_mixed_lengths():
    rng = np.random.default_rng(0)
    payloads = [rng.integers(0, 256, size=n, dtype=np.uint8).tobytes()
                for n in [4, 5, 6, 7, 8, 9, 63, 64, 65, 1000, 1001, 17]]
    got = tfrecord.crc32c_batch(payloads)
    assert [int(c) for c in got] == [_bitwise_crc32c(p) for p in payloads]


def test_framed_file_equals_tensorflow_writer(tmp_path):
    tf = pytest.importorskip("tensorflow")
    rng = np.random.default_rng(1)
    payloads = [rng.integers(0, 256, size=n, dtype=np.uint8).tobytes() for n in
                [4, 10, 127, 128, 300, 5000]]
    ours = b"".join(tfrecord.frame_records(payloads))
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for payload in payloads:
            writer.write(payload)
    with open(path, "rb") as handle:
        assert ours == handle.read()
    assert [r[12:-4] for r in tfrecord.split_records(ours, verify=True)] == payloads
    corrupted = bytearray(ours)
    corrupted[13] ^= 1  # inside the first payload (bytes 12-15)
    with pytest.raises(ValueError, match="CRC mismatch in record 0"):
        tfrecord.split_records(bytes(corrupted), verify=True)


def test_varint_boundaries():
    assert example_codec.varint(0) == b"\x00"
    assert example_codec.varint(127) == b"\x7f"
    assert example_codec.varint(128) == b"\x80\x01"
    assert example_codec.varint(300) == b"\xac\x02"
    assert example_codec.varint(16384) == b"\x80\x80\x01"


def _random_batch(schema, count, seed):
    rng = np.random.default_rng(seed)
    batch = {}
    for name, (kind, length) in schema.items():
        if kind == example_codec.FLOAT:
            batch[name] = rng.random((count, length)).astype(np.float32)
        else:
            batch[name] = rng.integers(0, 2, size=(count, length))
    batch["input_ids"] = rng.integers(0, 30000, size=batch["input_ids"].shape)
    batch["masked_lm_positions"] = rng.integers(0, 512, size=batch["masked_lm_positions"].shape)
    # Every varint width up to the encoder's limit.
    batch["input_ids"][0, :9] = [0, 127, 128, 16383, 16384, 2 ** 21 - 1, 2 ** 21, 2 ** 28 - 1, 1]
    batch["masked_lm_weights"][1] = 0.0
    return batch


def test_encoder_equals_protobuf_serialization_and_parses():
    tf = pytest.importorskip("tensorflow")
    schema = feature_schema(max_seq_length=40, max_predictions_per_seq=6)
    batch = _random_batch(schema, 20, seed=2)
    encoded = example_codec.ExampleEncoder(schema).encode(batch)
    spec = {name: tf.io.FixedLenFeature([length], tf.float32 if kind == "float" else tf.int64)
            for name, (kind, length) in schema.items()}
    for row, data in enumerate(encoded):
        example = tf.train.Example()
        for name, (kind, _) in schema.items():
            values = batch[name][row].tolist()
            if kind == "float":
                example.features.feature[name].float_list.value.extend(values)
            else:
                example.features.feature[name].int64_list.value.extend(values)
        assert data == example.SerializeToString(deterministic=True)
        parsed = tf.io.parse_single_example(data, spec)
        for name in schema:
            np.testing.assert_array_equal(parsed[name].numpy(), batch[name][row])


def test_encoder_rejects_wrong_shapes_and_values():
    schema = {"a": (example_codec.INT64, 3)}
    encoder = example_codec.ExampleEncoder(schema)
    with pytest.raises(ValueError, match=r"expected \[N, 3\]"):
        encoder.encode({"a": np.zeros((2, 4), dtype=np.int64)})
    with pytest.raises(ValueError, match="must be in"):
        encoder.encode({"a": np.full((1, 3), -1, dtype=np.int64)})


def test_read_payloads_round_trip(tmp_path):
    payloads = [os.urandom(n) for n in (5, 50, 500)]
    path = tmp_path / "x.tfrecord"
    path.write_bytes(b"".join(tfrecord.frame_records(payloads)))
    assert tfrecord.read_payloads(str(path)) == payloads
