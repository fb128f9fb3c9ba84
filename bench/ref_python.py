"""Reference: what plain Python does per record with no journal at all (the ceilings).

The journal's per-record work is bounded by the interpreter: these loops do the least a
record of our format needs, in the cheapest Python there is, on the same machine in the same
run as the journal's figures (records per second, no disk):

* ``encode 100 B`` / ``encode 1 KiB``: one method call per record on an encoder object that
  packs the 52-byte head (``struct.pack_into``), computes the CRC-32 of the body and the head
  (``zlib.crc32``, twice, as the format's checksum covers both), and copies head, payload and
  tail into a recycled 1 MiB ``bytearray`` (started again from its beginning when full). The
  ceiling of a non-durable append.
* ``decode``: a buffer of 100 B records in our format is read back: head unpacked
  (``unpack_from``), CRC-32 checked, the body sliced out and inserted into a dict by id, one
  record at a time. The ceiling of a load (without replay rules: adds only).

Run: ``python -m bench.ref_python [--seconds S] [--repeat K] [--json FILE]``.

Thread-safety: one thread.
"""

from __future__ import annotations

import functools
import struct
import time
import zlib
from pathlib import Path

from bench.common import Result, median_rate, rate_for, reference_main

_HEAD = struct.Struct("<IBBBBQQQqqI")  # as store.file.format.RECORD_HEAD
_TAIL = struct.Struct("<II")
_BUFFER = 1 << 20
DECODE_RECORDS = 200_000


class Encoder:
    """The least an append of our record format does, one call per record."""

    __slots__ = ("buf", "lsn", "pos", "view")

    def __init__(self) -> None:
        self.buf = bytearray(_BUFFER)
        self.view = memoryview(self.buf)
        self.pos = 0
        self.lsn = 0

    def append(self, id: int, payload: bytes) -> None:
        n = 60 + len(payload)
        pos = self.pos
        if pos + n > _BUFFER:
            pos = 0
        self.lsn += 1
        _HEAD.pack_into(self.buf, pos, n, 11, 45, 0, 0, 65536, self.lsn, self.lsn, id, 0, 0)
        crc = zlib.crc32(self.view[pos : pos + 52], zlib.crc32(payload))
        self.view[pos + 52 : pos + n - 8] = payload
        _TAIL.pack_into(self.buf, pos + n - 8, crc, n)
        self.pos = pos + n


def encode(size: int, seconds: float) -> float:
    """Records per second through :class:`Encoder`."""
    enc = Encoder()
    payload = b"p" * size
    counter = iter(range(1 << 62))
    append = enc.append
    return rate_for(seconds, lambda: append(next(counter), payload))


def encoded_buffer(records: int, size: int = 100) -> bytes:
    """``records`` records of ``size``-byte bodies in our format, back to back."""
    out = bytearray()
    for i in range(records):
        body = i.to_bytes(8, "big") + b"d" * (size - 8)
        head = _HEAD.pack(60 + size, 11, 45, 0, 0, 65536, i + 1, i, i, 0, 0)
        out += head + body + _TAIL.pack(zlib.crc32(head, zlib.crc32(body)), 60 + size)
    return bytes(out)


def decode(data: bytes) -> float:
    """Records per second of the least a load does over ``data`` (see the module docstring)."""
    unpack_head, unpack_tail, crc32 = _HEAD.unpack_from, _TAIL.unpack_from, zlib.crc32
    live: dict[int, bytes] = {}
    size = len(data)
    pos = 0
    count = 0
    started = time.perf_counter()
    while pos < size:
        n, _t, _u, _c, _f, _fid, _lsn, _d, rid, _tx, _cnt = unpack_head(data, pos)
        end = pos + n
        body = data[pos + 52 : end - 8]
        crc, _n = unpack_tail(data, end - 8)
        if crc32(data[pos : pos + 52], crc32(body)) != crc:
            raise ValueError(f"checksum at {pos}")
        live[rid] = body
        pos = end
        count += 1
    return count / (time.perf_counter() - started)


def measure(base: Path, seconds: float, repeat: int, size: int = 100) -> dict[str, Result]:
    """Every figure of this module, each the median of ``repeat`` runs.

    Returns the results keyed ``encode_100``, ``encode_1024`` and ``decode``.
    """
    del base, size  # no disk; the sizes are the issue's
    results: dict[str, Result] = {}
    for record_size in (100, 1024):
        results[f"encode_{record_size}"] = median_rate(
            f"Python encode ceiling {record_size} B",
            functools.partial(encode, record_size, seconds),
            repeat=repeat,
            unit="records/s",
            note="pack head, CRC-32, copy into a recycled buffer",
        )
    data = encoded_buffer(DECODE_RECORDS)
    results["decode"] = median_rate(
        "Python decode ceiling 100 B",
        functools.partial(decode, data),
        repeat=repeat,
        unit="records/s",
        note="unpack head, CRC-32 check, one dict insert",
    )
    return results


if __name__ == "__main__":
    reference_main(
        __doc__ or "",
        "pure-Python ceilings",
        "python",
        measure,
        size=100,
        size_help="unused (the sizes are 100 B and 1 KiB)",
    )
