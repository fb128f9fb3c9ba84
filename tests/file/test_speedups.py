"""The compiled scan (``store/_speedups_journal.c``) against the pure-Python reference
(:func:`store.file.reader.python_scan`) on generated files: sequences with padding of every
kind, torn and damaged tails, stale records of an earlier use of the file, wrong lsns and
random byte flips. Both must return the same records and leave the same cursor."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from store.file import format as fmt
from store.file import reader
from store.file.reader import Cursor, python_scan
from store.journal.api import (
    ADD,
    ADD_TX,
    COMMIT,
    DELETE,
    DELETE_TX,
    PREPARE,
    ROLLBACK,
    UPDATE,
    UPDATE_TX,
)
from tests.file.test_reader import require_speedups

ROOT = Path(__file__).resolve().parents[2]
F = 65536
SIZE = 8192


def _file(rng: random.Random, file_id: int = F) -> bytes:
    data = bytearray(SIZE)
    data[: fmt.HEADER_SIZE] = fmt.encode_header(file_id, fmt.KIND_MESSAGES, created_ns=1)
    if rng.random() < 0.3:  # stale records of an earlier use of the file, all over it
        pos = fmt.DATA_START
        while pos < SIZE - 200:
            old = fmt.encode_record(ADD, file_id=file_id - 1, lsn=pos, durable_lsn=0, id=pos,
                                    body=bytes(rng.randrange(60)))  # fmt: skip
            data[pos : pos + len(old)] = old
            pos += len(old) + rng.randrange(3)
    pos = fmt.DATA_START
    lsn = rng.randrange(1, 1000)
    while pos < SIZE - 150 and rng.random() < 0.95:
        rtype = rng.choice([ADD, UPDATE, DELETE, ADD_TX, COMMIT, PREPARE])
        raw = fmt.encode_record(
            rtype, file_id=file_id, lsn=lsn, durable_lsn=lsn - 1 if rng.random() < 0.9 else 0,
            id=rng.choice([rng.randrange(-5, 1 << 40), rng.randrange(30)]),
            tx_id=rng.randrange(-3, 50),
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
            fields["id"], fields["tx_id"], fields["tx_count"], body,
        )  # fmt: skip
        want += fmt.encode_record(rtype, user_type=urt, flags=flags, body=body, **fields)
        assert buf == want


def test_compiled_append_refuses_what_does_not_fit_its_fields() -> None:
    require_speedups()
    append = reader.SPEEDUPS.append_record
    buf = bytearray(b"kept")
    with pytest.raises(OverflowError):
        append(buf, 256, 0, 0, 1, 1, 0, 1, 0, 0, b"")
    with pytest.raises(ValueError, match="signed 64-bit integers: 9223372036854775808, 0"):
        append(buf, 11, 0, 0, 1, 1, 0, 1 << 63, 0, 0, b"")
    with pytest.raises(ValueError, match="signed 64-bit integers: 1, -9223372036854775809"):
        append(buf, 11, 0, 0, 1, 1, 0, 1, -(1 << 63) - 1, 0, b"")
    with pytest.raises(ValueError, match=r"user_record_type must be 0\.\.255, not 256"):
        append(buf, 11, 256, 0, 1, 1, 0, 1, 0, 0, b"")
    with pytest.raises(ValueError, match=r"user_record_type must be 0\.\.255, not -1"):
        append(buf, 11, -1, 0, 1, 1, 0, 1, 0, 0, b"")
    with pytest.raises(TypeError):
        append(b"not a bytearray", 11, 0, 0, 1, 1, 0, 1, 0, 0, b"")
    assert buf == b"kept"  # a refused record leaves the buffer as it was


def test_compiled_crc32_gives_zlibs_answer_at_every_length_alignment_and_start_value() -> None:
    """``store.speedups.crc32`` folds with PCLMULQDQ from 64 bytes on (where the CPU has it) and
    hands the last bytes to zlib: every split of a buffer into folded bulk and zlib remainder,
    at every alignment, must give zlib's answer."""
    require_speedups()
    import zlib

    from store.speedups import crc32

    assert crc32 is reader.SPEEDUPS.crc32
    rng = random.Random(7)
    data = rng.randbytes(5000)
    # 512 bytes and up take the 256-byte AVX-512 strides first (where the CPU has them):
    # lengths around its threshold and its stride, so every count of strides and leftovers.
    wide = [
        n + d for n in (512, 768, 1024, 1280, 2048) for d in (-17, -16, -1, 0, 1, 15, 16, 63, 64)
    ]
    for length in [*range(0, 300), *wide, 4096, 4999]:
        for start in (0, 1, 3, 8, 15):
            piece = data[start : start + length]
            for value in (0, 0xFFFFFFFF, rng.randrange(1 << 32)):
                assert crc32(piece, value) == zlib.crc32(piece, value), (length, start, value)
    big = rng.randbytes(3 * (1 << 20) + 5)  # over the size computed without the GIL
    assert crc32(big) == zlib.crc32(big)
    assert crc32(memoryview(big)[1:], 5) == zlib.crc32(memoryview(big)[1:], 5)
    assert crc32(bytearray(b"123456789")) == 0xCBF43926  # the CRC-32 check value


def test_the_128_bit_fold_alone_gives_zlibs_answer_too() -> None:
    """``STORE_NO_WIDE_CRC=1`` turns the AVX-512 strides off: the 128-bit loop then folds
    every length itself, and must give zlib's answer on its own (on a CPU with AVX-512 the
    test above exercises the wide strides instead)."""
    require_speedups()
    import os
    import subprocess
    import sys

    code = (
        "import random, zlib, store._speedups as s\n"
        "data = random.Random(3).randbytes(3000)\n"
        "for n in range(0, 3000, 7):\n"
        "    for start in (0, 5):\n"
        "        piece = data[start:start + n]\n"
        "        assert s.crc32(piece, 9) == zlib.crc32(piece, 9), n\n"
        "print(s.CLMUL, s.WIDE_CLMUL)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "STORE_NO_WIDE_CRC": "1"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.split()[1] == "0"


def test_without_the_compiled_module_crc32_is_zlibs() -> None:
    import os
    import subprocess
    import sys

    code = "import zlib, store.speedups as s; print(s.crc32 is zlib.crc32, s.SPEEDUPS)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "STORE_NO_SPEEDUPS": "1"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert out.stdout.split() == ["True", "None"]


def _records(rng: random.Random, file_id: int, first_id: int) -> list[reader.RawRecord]:
    """A file's records in sequence: mostly adds and updates of a few ids (so ids repeat and
    updates come before and after adds), with deletes and transactions between the runs."""
    out: list[reader.RawRecord] = []
    for _ in range(rng.randrange(0, 120)):
        rtype = rng.choice([ADD] * 6 + [UPDATE] * 4 + [DELETE, ADD_TX, UPDATE_TX, DELETE_TX,
                                                      PREPARE, COMMIT, ROLLBACK])  # fmt: skip
        rid = first_id + rng.randrange(40)
        body = rng.randbytes(rng.choice([0, 3, 50]))
        tx_id = rng.randrange(1, 5)
        out.append(
            (0, fmt.OVERHEAD + len(body), rtype, rng.randrange(256), 0, 1, rid, tx_id,
             rng.randrange(3), body)
        )  # fmt: skip
    return out


@pytest.mark.parametrize("seed", range(30))
def test_compiled_replay_of_adds_and_updates_equals_the_python_loop(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``replay_file`` with the compiled run of adds and updates against its Python loop: the
    same load result, the same live index (entries, updated-only ids, transactions) and the
    same per-file counts, over files of adds, updates, deletes and transactions mixed."""
    require_speedups()
    from store.file.index import LiveIndex
    from store.file.segments import Segment
    from store.journal.replay import Replayer

    rng = random.Random(seed)
    files = [(F + k, _records(rng, F + k, rng.choice([0, 1 << 40, -20]))) for k in range(4)]

    def replay(compiled: bool) -> tuple[object, ...]:
        if not compiled:
            monkeypatch.setattr(reader, "_replay_adds", None)
        replayer, index = Replayer(), LiveIndex()
        segs = [Segment(f"/x/{fid}", fid, 0, None) for fid, _ in files]
        for seg, (_fid, records) in zip(segs, files, strict=True):
            reader.replay_file(list(records), seg, replayer, index)
        monkeypatch.undo()
        result = replayer.result()
        return (
            result,
            index.records,
            index.updated_only,
            sorted(index.txs),
            [(s.pos, s.live_bytes, {t.file_id: n for t, n in s.neg.items()}) for s in segs],
        )

    got, want = replay(True), replay(False)
    assert any(r[2] in (ADD, UPDATE) for _, records in files for r in records)
    assert got == want


@pytest.mark.parametrize("seed", range(30))
def test_compiled_scan_and_replay_equals_the_python_scan_and_replay(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``scan_and_replay`` in one compiled pass against ``python_scan`` + the Python loop of
    ``replay_file``, over several files of generated records (damage, torn tails, stale
    records, transactions): the same load result, live index, cursors and per-file counts."""
    require_speedups()
    from store.file.index import LiveIndex
    from store.file.segments import Segment
    from store.journal.replay import Replayer

    rng = random.Random(seed)
    files = [(F + k, _file(rng, F + k)) for k in range(4)]

    def load(compiled: bool) -> tuple[object, ...]:
        if not compiled:
            monkeypatch.setattr(reader, "_scan_replay", None)
            monkeypatch.setattr(reader, "_replay_adds", None)
            monkeypatch.setattr(reader, "SPEEDUPS", None)
        replayer, index = Replayer(), LiveIndex()
        segs, cursors = [], []
        for fid, data in files:
            seg, cur = Segment(f"/x/{fid}", fid, SIZE, None), Cursor()
            reader.scan_and_replay(data, seg, cur, replayer, index)
            segs.append(seg)
            cursors.append((cur.end, cur.last_lsn, cur.count, cur.first_lsn))
        monkeypatch.undo()
        return (
            replayer.result(),
            index.records,
            index.updated_only,
            sorted(index.txs),
            cursors,
            [(s.pos, s.live_bytes, {t.file_id: n for t, n in s.neg.items()}) for s in segs],
        )

    got, want = load(True), load(False)
    assert got == want


def test_journals_written_by_either_path_load_the_same_in_the_other(tmp_path: Path) -> None:
    """Round trip between the compiled part and the pure-Python code through real files: six
    rounds in child processes, every other one with ``STORE_NO_SPEEDUPS=1``; each appends,
    rolls files, compacts and leaves transactions committed, rolled back and prepared. The
    load a round's path makes after closing must equal the load the other path makes of the
    same files at the start of the next round (records, prepared and failed transactions,
    live counts and bytes)."""
    require_speedups()
    import json
    import os
    import subprocess
    import sys

    directory = str(tmp_path / "journal")
    previous: str | None = None
    for round_no in range(6):
        compiled = round_no % 2 == 1
        env = {**os.environ}
        env.pop("STORE_NO_SPEEDUPS", None)
        if not compiled:
            env["STORE_NO_SPEEDUPS"] = "1"
        out = subprocess.run(
            [sys.executable, "-m", "tests.file.speedups_child", directory, str(round_no)],
            env=env, capture_output=True, text=True, check=True, cwd=ROOT,
        )  # fmt: skip
        start, end = out.stdout.splitlines()
        first, last = json.loads(start), json.loads(end)
        assert first["compiled"] is compiled and last["compiled"] is compiled
        assert len(last["records"]) > len(first["records"])
        if previous is not None:
            assert {**first, "compiled": None} == {**json.loads(previous), "compiled": None}
        previous = end
    final = json.loads(previous or "{}")
    assert final["prepared"] and final["live"][0] > 1000
