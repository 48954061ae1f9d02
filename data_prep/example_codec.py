"""Writes `tf.train.Example` protocol buffers directly in the wire format, a batch at a time.

Building `tf.train.Example` objects costs tens of microseconds per instance in
Python; encoding the fixed pretraining schema straight from NumPy arrays costs
a few. The bytes are exactly what `Example.SerializeToString(deterministic=True)`
produces (map entries sorted by feature name, packed repeated fields), which
tests/data_prep/test_example_codec.py checks byte for byte and with
`tf.io.parse_single_example`.

Wire layout used here (proto3, field numbers from tensorflow/core/example):
  Example  { Features features = 1; }
  Features { map<string, Feature> feature = 1; }      # entry: key = 1, value = 2
  Feature  { FloatList float_list = 2; Int64List int64_list = 3; }
  Int64List / FloatList { repeated value = 1 [packed]; }
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Tuple

import numpy as np

INT64 = "int64"
FLOAT = "float"


def varint(value: int) -> bytes:
    """Protobuf base-128 varint of a non-negative int."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _varint_rows(values: np.ndarray) -> Tuple[bytes, np.ndarray]:
    """Packed varint encoding of each row of a non-negative int array [N, L].

    Returns (concatenated bytes of all rows, per-row byte counts int64 [N]).
    Values must be in [0, 2**28).
    """
    rows, length = values.shape
    if values.size == 0:
        return b"", np.zeros(rows, dtype=np.int64)
    low, high = int(values.min()), int(values.max())
    if low < 0 or high >= 1 << 28:
        raise ValueError(f"int64 feature values must be in [0, 2**28) for the fast encoder, "
                         f"got range [{low}, {high}]")
    if high < 0x80:
        return values.astype(np.uint8).tobytes(), np.full(rows, length, dtype=np.int64)
    v = values.astype(np.uint32)
    groups_needed = (high.bit_length() + 6) // 7
    nbytes = np.ones(v.shape, dtype=np.int8)
    for k in range(1, groups_needed):
        nbytes += v >= np.uint32(1 << (7 * k))
    groups = np.empty(v.shape + (groups_needed,), dtype=np.uint8)
    for k in range(groups_needed):
        byte = ((v >> np.uint32(7 * k)) & np.uint32(0x7F)).astype(np.uint8)
        if k + 1 < groups_needed:
            byte |= (nbytes > k + 1).view(np.uint8) << 7
        groups[..., k] = byte
    keep = np.arange(groups_needed, dtype=np.int8)[None, None, :] < nbytes[..., None]
    return groups[keep].tobytes(), nbytes.sum(axis=1, dtype=np.int64)


class ExampleEncoder:
    """Encodes batches of fixed-schema examples.

    `schema` maps feature name -> (INT64 or FLOAT, length). Every batch passed
    to `encode` must hold, for each name, an array [N, length]. Int64 values
    must be in [0, 2**28).
    """

    def __init__(self, schema: Mapping[str, Tuple[str, int]]):
        self._schema = dict(sorted(schema.items()))
        self._prefix_cache: Dict[Tuple[str, int], bytes] = {}

    def _entry_prefix(self, name: str, kind: str, payload_len: int) -> bytes:
        """Bytes of one map entry up to (not including) the packed payload."""
        key = (name, payload_len)
        cached = self._prefix_cache.get(key)
        if cached is not None:
            return cached
        name_bytes = name.encode("utf-8")
        value_list = b"\x0a" + varint(payload_len)  # Int64List/FloatList.value header
        list_len = len(value_list) + payload_len
        feature_tag = b"\x1a" if kind == INT64 else b"\x12"
        feature = feature_tag + varint(list_len) + value_list
        feature_len = len(feature) + payload_len
        entry = (b"\x0a" + varint(len(name_bytes)) + name_bytes
                 + b"\x12" + varint(feature_len))
        entry_len = len(entry) + len(feature) + payload_len
        prefix = b"\x0a" + varint(entry_len) + entry + feature
        self._prefix_cache[key] = prefix
        return prefix

    def encode(self, batch: Mapping[str, np.ndarray]) -> List[bytes]:
        """Serialized Example bytes for each of the N rows of `batch`."""
        columns = []
        count = None
        for name, (kind, length) in self._schema.items():
            array = np.asarray(batch[name])
            if array.ndim != 2 or array.shape[1] != length:
                raise ValueError(f"feature {name!r}: expected [N, {length}], got {array.shape}")
            if count is None:
                count = array.shape[0]
            elif array.shape[0] != count:
                raise ValueError(f"feature {name!r}: batch size {array.shape[0]} != {count}")
            if kind == INT64:
                data, row_bytes = _varint_rows(array)
            else:
                data = array.astype("<f4").tobytes()
                row_bytes = np.full(array.shape[0], 4 * length, dtype=np.int64)
            ends = np.cumsum(row_bytes).tolist()
            columns.append((name, kind, data, row_bytes.tolist(), ends))
        out = []
        for row in range(count or 0):
            parts = []
            for name, kind, data, row_bytes, ends in columns:
                size = row_bytes[row]
                parts.append(self._entry_prefix(name, kind, size))
                parts.append(data[ends[row] - size:ends[row]])
            features = b"".join(parts)
            out.append(b"\x0a" + varint(len(features)) + features)
        return out
