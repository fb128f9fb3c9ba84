"""The compiled scan (``store/file/_speedups.c``) against the pure-Python reference
(:func:`store.file.reader.python_scan`) on generated files: sequences with padding of every
kind, torn and damaged tails, stale records of an earlier use of the file, wrong lsns and
random byte flips. Both must return the same records and leave the same cursor."""

from __future__ import annotations

import random

import pytest

from store.file import format as fmt
from store.file import reader
from store.file.reader import Cursor, python_scan
from store.journal.api import ADD, ADD_TX, COMMIT, DELETE, PREPARE, UPDATE
from tests.file.test_reader import require_speedups

F = 65536
SIZE = 8192


def _file(rng: random.Random) -> bytes:
    data = bytearray(SIZE)
    data[: fmt.HEADER_SIZE] = fmt.encode_header(F, fmt.KIND_MESSAGES, created_ns=1)
    if rng.random() < 0.3:  # stale records of an earlier use of the file, all over it
        pos = fmt.DATA_START
        while pos < SIZE - 200:
            old = fmt.encode_record(ADD, file_id=F - 1, lsn=pos, durable_lsn=0, id=pos,
                                    body=bytes(rng.randrange(60)))  # fmt: skip
            data[pos : pos + len(old)] = old
            pos += len(old) + rng.randrange(3)
    pos = fmt.DATA_START
    lsn = rng.randrange(1, 1000)
    while pos < SIZE - 150 and rng.random() < 0.95:
        rtype = rng.choice([ADD, UPDATE, DELETE, ADD_TX, COMMIT, PREPARE])
        raw = fmt.encode_record(
            rtype, file_id=F, lsn=lsn, durable_lsn=lsn - 1 if rng.random() < 0.9 else 0,
            id=rng.randrange(-5, 1 << 40), tx_id=rng.randrange(-3, 50),
            user_type=rng.randrange(256), tx_count=rng.randrange(5),
            body=rng.randbytes(rng.choice([0, 1, 7, 100, 300])),
            compact_count=rng.randrange(3), flags=rng.choice([0, fmt.FLAG_FLOOR]),
        )  # fmt: skip
        if pos + len(raw) > SIZE:
            break
        data[pos : pos + len(raw)] = raw
        pos += len(raw)
        lsn += 1 if rng.random() < 0.97 else rng.choice([0, 2, -1])
        roll = rng.random()
        if roll < 0.15:  # a flush padded to the boundary (sometimes with 1-3 bytes only)
            boundary = pos + (-pos % fmt.PAD_UNIT)
            data[pos:boundary] = bytes(boundary - pos)
            pos = boundary
        elif roll < 0.2:
            pos += rng.randrange(1, 4)  # a short gap, zero or not
    for _ in range(rng.choice([0, 0, 1, 3])):  # damage: byte flips anywhere
        at = rng.randrange(fmt.DATA_START, SIZE)
        data[at] ^= 1 << rng.randrange(8)
    if rng.random() < 0.2:  # a torn end
        cut = rng.randrange(fmt.DATA_START, SIZE)
        data[cut:] = bytes(SIZE - cut)
    return bytes(data)


@pytest.mark.parametrize("seed", range(40))
def test_compiled_scan_equals_the_python_reference(seed: int) -> None:
    require_speedups()
    rng = random.Random(seed)
    for _ in range(25):
        data = _file(rng)
        for start in (fmt.DATA_START, rng.randrange(fmt.DATA_START, SIZE)):
            want_cursor, got_cursor = Cursor(), Cursor()
            want = python_scan(data, F, want_cursor, start)
            got = reader.scan(data, F, got_cursor, start)
            assert got == want
            assert (got_cursor.end, got_cursor.last_lsn, got_cursor.count) == (
                want_cursor.end,
                want_cursor.last_lsn,
                want_cursor.count,
            )
            assert all(type(r[9]) is bytes for r in got)


def test_compiled_scan_reads_a_memoryview_and_a_bytearray_as_bytes() -> None:
    require_speedups()
    data = _file(random.Random(7))
    want = python_scan(data, F, Cursor())
    assert want  # the case is the one named: there are records to read
    assert reader.scan(memoryview(data), F, Cursor()) == want
    assert reader.scan(bytearray(data), F, Cursor()) == want


@pytest.mark.parametrize("seed", range(5))
def test_compiled_append_writes_the_bytes_of_encode_record(seed: int) -> None:
    require_speedups()
    import zlib

    rng = random.Random(seed)
    buf = bytearray(b"already here")
    want = bytearray(b"already here")
    for _ in range(300):
        fields = {
            "file_id": rng.randrange(1 << 64), "lsn": rng.randrange(1 << 64),
            "durable_lsn": rng.randrange(1 << 64), "id": rng.randrange(-(1 << 63), 1 << 63),
            "tx_id": rng.randrange(-(1 << 63), 1 << 63), "tx_count": rng.randrange(1 << 32),
        }  # fmt: skip
        rtype, urt = rng.randrange(10, 20), rng.randrange(256)
        body = rng.randbytes(rng.choice([0, 1, 100, 1024, 5000]))
        flags = rng.choice([0, fmt.FLAG_FLOOR])
        reader.SPEEDUPS.append_record(
            buf, rtype, urt, flags, fields["file_id"], fields["lsn"], fields["durable_lsn"],
            fields["id"], fields["tx_id"], fields["tx_count"], body, zlib.crc32(body),
        )  # fmt: skip
        want += fmt.encode_record(rtype, user_type=urt, flags=flags, body=body, **fields)
        assert buf == want


def test_compiled_append_refuses_what_does_not_fit_its_fields() -> None:
    require_speedups()
    append = reader.SPEEDUPS.append_record
    with pytest.raises(OverflowError):
        append(bytearray(), 256, 0, 0, 1, 1, 0, 1, 0, 0, b"", 0)
    with pytest.raises(OverflowError):
        append(bytearray(), 11, 0, 0, 1, 1, 0, 1 << 63, 0, 0, b"", 0)
    with pytest.raises(TypeError):
        append(b"not a bytearray", 11, 0, 0, 1, 1, 0, 1, 0, 0, b"", 0)
