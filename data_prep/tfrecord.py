"""TFRecord framing and CRC32C in NumPy, so the data pipeline never imports TensorFlow.

A TFRecord file is a sequence of records, each framed as
`uint64 length (little endian) | uint32 masked_crc32c(length bytes) | data |
uint32 masked_crc32c(data)` (the format `tf.io.TFRecordWriter` writes, without
compression). `frame_records` frames a batch of serialized payloads at once:
the CRC32C of every record in the batch is computed in one vectorised pass
(slicing-by-4 tables, all records advanced together), which is what keeps the
writer cheap enough to run in every worker process.
"""
from __future__ import annotations

import struct
from typing import BinaryIO, Iterator, List, Sequence

import numpy as np

_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected
_MASK_DELTA = 0xA282EAD8


def _make_tables() -> np.ndarray:
    """Returns the 4 slicing tables, uint32 [4, 256]."""
    table = np.zeros((4, 256), dtype=np.uint32)
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ _POLY if crc & 1 else crc >> 1
        table[0, i] = crc
    for k in range(1, 4):
        prev = table[k - 1]
        table[k] = (prev >> 8) ^ table[0][prev & 0xFF]
    return table


_TABLES = _make_tables()


def crc32c_batch(payloads: Sequence[bytes]) -> np.ndarray:
    """CRC32C of each payload, uint32 [len(payloads)].

    Payloads are right-aligned in a zero-padded byte matrix. The standard
    initial register value 0xFFFFFFFF is equivalent to complementing the first
    four message bytes with a zero register, and leading zero bytes leave a zero
    register unchanged, so every row can be advanced by the same column loop
    without per-row masking. Payloads must be at least 4 bytes long.
    """
    count = len(payloads)
    if count == 0:
        return np.zeros(0, dtype=np.uint32)
    lengths = np.fromiter((len(p) for p in payloads), dtype=np.int64, count=count)
    if lengths.min() < 4:
        raise ValueError("crc32c_batch needs payloads of at least 4 bytes")
    width = int(-(-int(lengths.max()) // 4) * 4)
    zeros = bytes(width)
    padded = b"".join([zeros[:width - len(p)] + p for p in payloads])
    matrix = np.frombuffer(padded, dtype=np.uint8).reshape(count, width).copy()
    first = (width - lengths)[:, None] + np.arange(4)[None, :]
    matrix[np.arange(count)[:, None], first] ^= 0xFF
    words = np.ascontiguousarray(matrix.view("<u4").astype(np.uint32).T)
    t0, t1, t2, t3 = _TABLES
    crc = np.zeros(count, dtype=np.uint32)
    for column in range(words.shape[0]):
        crc ^= words[column]
        crc = (t3[crc & 0xFF] ^ t2[(crc >> 8) & 0xFF]
               ^ t1[(crc >> 16) & 0xFF] ^ t0[crc >> 24])
    return crc ^ np.uint32(0xFFFFFFFF)


def crc32c(data: bytes) -> int:
    """CRC32C of one byte string (any length), as a Python int."""
    if len(data) >= 4:
        return int(crc32c_batch([data])[0])
    crc = 0xFFFFFFFF
    for byte in data:
        crc = int(_TABLES[0][(crc ^ byte) & 0xFF]) ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def mask_crc(crc: np.ndarray) -> np.ndarray:
    """TFRecord's masked CRC: rotate right by 15 bits and add a constant (uint32 arithmetic)."""
    crc = crc.astype(np.uint64)
    rotated = ((crc >> np.uint64(15)) | (crc << np.uint64(17))) & np.uint64(0xFFFFFFFF)
    return ((rotated + np.uint64(_MASK_DELTA)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def frame_records(payloads: Sequence[bytes]) -> List[bytes]:
    """Frames serialized payloads as TFRecord records (one bytes object per record)."""
    if not payloads:
        return []
    lengths = np.fromiter((len(p) for p in payloads), dtype="<u8", count=len(payloads))
    length_bytes = lengths.tobytes()
    length_headers = [length_bytes[8 * i:8 * i + 8] for i in range(len(payloads))]
    length_crcs = mask_crc(crc32c_batch(length_headers)).astype("<u4").tobytes()
    data_crcs = mask_crc(crc32c_batch(payloads)).astype("<u4").tobytes()
    return [length_headers[i] + length_crcs[4 * i:4 * i + 4] + payload
            + data_crcs[4 * i:4 * i + 4]
            for i, payload in enumerate(payloads)]


def split_records(blob: bytes, verify: bool = False) -> List[bytes]:
    """Splits concatenated framed records into a list of framed records.

    With `verify`, the CRCs are checked and a ValueError names the bad record.
    """
    records = []
    pos = 0
    size = len(blob)
    while pos < size:
        if pos + 12 > size:
            raise ValueError(f"truncated TFRecord header at byte {pos}")
        (length,) = struct.unpack_from("<Q", blob, pos)
        end = pos + 12 + length + 4
        if end > size:
            raise ValueError(f"truncated TFRecord payload at byte {pos}")
        records.append(blob[pos:end])
        pos = end
    if verify:
        payloads = [r[12:-4] for r in records]
        headers = [r[:8] for r in records]
        ok_len = mask_crc(crc32c_batch(headers)).astype("<u4").tobytes()
        ok_data = mask_crc(crc32c_batch(payloads)).astype("<u4").tobytes() if payloads else b""
        for i, record in enumerate(records):
            if record[8:12] != ok_len[4 * i:4 * i + 4] or record[-4:] != ok_data[4 * i:4 * i + 4]:
                raise ValueError(f"CRC mismatch in record {i}")
    return records


def iter_payloads(handle: BinaryIO) -> Iterator[bytes]:
    """Yields the payload of every record of an uncompressed TFRecord stream."""
    while True:
        header = handle.read(12)
        if not header:
            return
        if len(header) < 12:
            raise ValueError("truncated TFRecord header")
        (length,) = struct.unpack_from("<Q", header, 0)
        body = handle.read(length + 4)
        if len(body) < length + 4:
            raise ValueError("truncated TFRecord payload")
        yield body[:length]


def read_payloads(path: str) -> List[bytes]:
    """All record payloads of a local uncompressed TFRecord file."""
    with open(path, "rb") as handle:
        return list(iter_payloads(handle))
