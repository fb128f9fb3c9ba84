"""store.file.reader over hand-built files: records in sequence, the end of data, what follows it,
the torn-tail / corruption decision, and replay_file's transaction counts."""

from __future__ import annotations

import struct

import pytest

from store.file import format as fmt
from store.file import reader
from store.file.index import LiveIndex
from store.file.reader import Cursor, Tail, find_after, replay_file, scan
from store.file.segments import Segment
from store.journal.api import (
    ADD,
    ADD_TX,
    COMMIT,
    PREPARE,
    ROLLBACK,
    LoadResult,
    PreparedTransaction,
    RecordInfo,
)
from store.journal.replay import Replayer


@pytest.fixture(autouse=True, params=["compiled", "python"])
def scan_implementation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs on the compiled scan and on the pure-Python reference."""
    if request.param == "python":
        monkeypatch.setattr(reader, "SPEEDUPS", None)
    else:
        require_speedups()
    return str(request.param)


def require_speedups() -> None:
    """The compiled scan must be there: CI builds it (a failure, not a skip, when missing;
    a skip when the run turned it off on purpose with ``STORE_NO_SPEEDUPS=1``)."""
    import os

    if reader.SPEEDUPS is None:
        if os.environ.get("STORE_NO_SPEEDUPS"):
            pytest.skip("the compiled part is turned off (STORE_NO_SPEEDUPS=1)")
        if os.environ.get("CI"):
            pytest.fail("store._speedups was not built (setup.py's optional extension)")
        pytest.skip("store._speedups is not built here (no compiler at install time)")


F = 65536  # the file id of the file under test
G = 131072  # another file id (an earlier use of the file)
SIZE = 4096


def rec(lsn: int, *, fid: int = F, body: bytes = b"body") -> bytes:
    """An add record with lsn ``lsn`` whose durable_lsn is the previous lsn."""
    return fmt.encode_record(
        ADD, file_id=fid, lsn=lsn, durable_lsn=lsn - 1, id=lsn, user_type=1, body=body
    )


def build(*parts: tuple[int, bytes], size: int = SIZE, fid: int = F) -> bytes:
    """A file of ``size`` bytes: the header of ``fid`` and each (offset, bytes) part placed."""
    data = bytearray(size)
    data[: fmt.HEADER_SIZE] = fmt.encode_header(fid, fmt.KIND_MESSAGES, created_ns=1)
    for offset, raw in parts:
        data[offset : offset + len(raw)] = raw
    return bytes(data)


def sequence(start: int, *records: bytes) -> list[tuple[int, bytes]]:
    """``records`` placed one after the other from ``start``."""
    placed = []
    pos = start
    for raw in records:
        placed.append((pos, raw))
        pos += len(raw)
    return placed


def read(data: bytes, fid: int = F) -> tuple[list[tuple[int, int]], Cursor]:
    """(offset, lsn) of each record in sequence, and the cursor."""
    cursor = Cursor()
    found = [(r[0], r[5]) for r in scan(data, fid, cursor)]
    return found, cursor


def test_records_in_sequence_then_zeros() -> None:
    r1, r2, r3 = rec(1), rec(2, body=b"x" * 100), rec(3, body=b"")
    data = build(*sequence(fmt.DATA_START, r1, r2, r3))
    found, cursor = read(data)
    o2 = fmt.DATA_START + len(r1)
    o3 = o2 + len(r2)
    assert found == [(fmt.DATA_START, 1), (o2, 2), (o3, 3)]
    assert (cursor.end, cursor.last_lsn, cursor.count) == (o3 + len(r3), 3, 3)


def test_scan_yields_every_field() -> None:
    raw = fmt.encode_record(
        PREPARE,
        file_id=F,
        lsn=9,
        durable_lsn=8,
        id=0,
        tx_id=-3,
        user_type=0,
        tx_count=2,
        body=b"xid",
        compact_count=1,
    )
    (got,) = list(scan(build((fmt.DATA_START, raw)), F, Cursor()))
    assert got == (fmt.DATA_START, len(raw), PREPARE, 0, 1, 9, 0, -3, 2, b"xid")


def test_empty_file_ends_at_data_start() -> None:
    found, cursor = read(build())
    assert found == [] and (cursor.end, cursor.last_lsn, cursor.count) == (fmt.DATA_START, 0, 0)


def test_zero_padding_to_a_pad_unit_boundary_then_more_records() -> None:
    first = sequence(fmt.DATA_START, rec(1), rec(2))
    second = sequence(fmt.PAD_UNIT, rec(3), rec(4))
    third = sequence(3 * fmt.PAD_UNIT, rec(5))
    found, cursor = read(build(*first, *second, *third))
    assert [lsn for _o, lsn in found] == [1, 2, 3, 4, 5]
    assert found[2][0] == fmt.PAD_UNIT and found[4][0] == 3 * fmt.PAD_UNIT
    assert cursor.end == 3 * fmt.PAD_UNIT + len(rec(5))


@pytest.mark.parametrize("pad", [1, 2, 3, 4, 5, 60], ids=lambda p: f"pad-{p}")
def test_a_flush_padded_with_fewer_zeros_than_the_length_field_goes_on_at_the_boundary(
    pad: int,
) -> None:
    # An aligned writer pads a flush to its boundary; a flush ending 1-3 bytes before it gets a
    # pad shorter than the 4-byte length field, which then reads into the next record. That
    # was read as the end of data (issue 6.1: a crash later turned it into a ChecksumError).
    boundary = 2 * fmt.PAD_UNIT
    r2 = rec(2)
    r1 = rec(1, body=b"b" * (boundary - pad - fmt.DATA_START - fmt.OVERHEAD - len(r2)))
    placed = sequence(fmt.DATA_START, r1, r2)
    assert placed[-1][0] + len(r2) == boundary - pad
    found, cursor = read(build(*placed, *sequence(boundary, rec(3), rec(4))))
    assert [lsn for _o, lsn in found] == [1, 2, 3, 4]
    assert found[2][0] == boundary
    assert cursor.end == boundary + 2 * len(rec(3))


@pytest.mark.parametrize("pad", [1, 2, 3])
def test_short_zero_padding_with_no_record_in_sequence_after_it_ends_the_data(pad: int) -> None:
    boundary = 2 * fmt.PAD_UNIT
    r1 = rec(1, body=b"b" * (boundary - pad - fmt.DATA_START - fmt.OVERHEAD))
    for after in (rec(5), rec(2, fid=G)):  # an lsn out of sequence, a stale record
        found, cursor = read(build((fmt.DATA_START, r1), (boundary, after)))
        assert [lsn for _o, lsn in found] == [1]
        assert cursor.end == boundary - pad


@pytest.mark.parametrize("pad", [1, 2, 3])
def test_non_zero_bytes_short_of_a_boundary_are_not_padding(pad: int) -> None:
    boundary = 2 * fmt.PAD_UNIT
    r1 = rec(1, body=b"b" * (boundary - pad - fmt.DATA_START - fmt.OVERHEAD))
    data = build((fmt.DATA_START, r1), (boundary - pad, b"\x07" * pad), (boundary, rec(2)))
    found, cursor = read(data)
    assert [lsn for _o, lsn in found] == [1] and cursor.end == boundary - pad


def floor_rec(lsn: int, durable: int, *, body: bytes = b"body") -> bytes:
    """An add record as the writer stamps it: FLOOR set, ``durable`` as its durable_lsn."""
    return fmt.encode_record(
        ADD,
        file_id=F,
        lsn=lsn,
        durable_lsn=durable,
        id=lsn,
        user_type=1,
        body=body,
        flags=fmt.FLAG_FLOOR,
    )


@pytest.mark.parametrize(
    ("durable", "flags", "in_sequence"),
    [
        pytest.param(41, fmt.FLAG_FLOOR, True, id="floor-covers-the-previous-lsn"),
        pytest.param(42, fmt.FLAG_FLOOR, True, id="floor-above"),
        pytest.param(40, fmt.FLAG_FLOOR, False, id="floor-below-the-previous-lsn"),
        pytest.param(40, 0, True, id="no-floor-flag-old-writer"),
        pytest.param(40, fmt.FLAG_SYNCED, True, id="compactor-record"),
    ],
)
def test_the_first_record_of_a_file_must_follow_the_previous_file_when_it_says_so(
    durable: int, flags: int, in_sequence: bool
) -> None:
    # A lost first flush of an aligned writer leaves zeros from the header to the next flush,
    # which read like padding: FLOOR makes the first record prove nothing is missing before it.
    first = fmt.encode_record(
        ADD, file_id=F, lsn=42, durable_lsn=durable, id=1, user_type=1, body=b"x", flags=flags
    )
    found, cursor = read(build(*sequence(fmt.PAD_UNIT * 2, first, floor_rec(43, durable))))
    if in_sequence:
        assert [lsn for _o, lsn in found] == [42, 43]
    else:
        assert found == [] and cursor.count == 0 and cursor.end == fmt.DATA_START


def test_later_records_are_held_to_the_lsn_sequence_not_to_the_floor() -> None:
    placed = sequence(fmt.DATA_START, floor_rec(10, 9), floor_rec(11, 3), floor_rec(12, 3))
    found, _cursor = read(build(*placed))
    assert [lsn for _o, lsn in found] == [10, 11, 12]


def test_non_zero_bytes_before_the_next_boundary_end_the_data() -> None:
    r1 = rec(1)
    end = fmt.DATA_START + len(r1)
    data = build((fmt.DATA_START, r1), (300, b"\x01junk"), (fmt.PAD_UNIT, rec(2)))
    found, cursor = read(data)
    assert found == [(fmt.DATA_START, 1)]
    assert cursor.end == end


def test_a_gap_in_lsn_ends_the_data() -> None:
    r1, r2, r4 = rec(1), rec(2), rec(4)
    data = build(*sequence(fmt.DATA_START, r1, r2, r4))
    found, cursor = read(data)
    assert [lsn for _o, lsn in found] == [1, 2]
    assert cursor.end == fmt.DATA_START + len(r1) + len(r2)
    assert cursor.last_lsn == 2


def test_the_first_record_may_have_any_lsn() -> None:
    found, cursor = read(build(*sequence(fmt.DATA_START, rec(500), rec(501))))
    assert [lsn for _o, lsn in found] == [500, 501] and cursor.last_lsn == 501


def test_stale_records_of_another_file_id_end_the_data() -> None:
    # A reused file is not re-zeroed: after the new records come the old use's records.
    new = [rec(10), rec(11)]
    old = [rec(3, fid=G), rec(4, fid=G), rec(5, fid=G)]
    data = build(*sequence(fmt.DATA_START, *new, *old))
    found, cursor = read(data)
    assert [lsn for _o, lsn in found] == [10, 11]
    assert cursor.end == fmt.DATA_START + sum(len(r) for r in new)
    assert find_after(data, F, cursor.end) == []


def test_scan_from_a_start_offset() -> None:
    placed = sequence(fmt.DATA_START, rec(1), rec(2), rec(3))
    found, _cursor = read(build(*placed))
    cursor = Cursor()
    later = [r[5] for r in scan(build(*placed), F, cursor, start=placed[1][0])]
    assert later == [2, 3] and cursor.end == found[-1][0] + len(rec(3))


def _broken(raw: bytes) -> bytes:
    return raw[:55] + bytes([raw[55] ^ 0xFF]) + raw[56:]


def test_find_after_finds_the_valid_records_after_a_break() -> None:
    r1, r2, r3, r4 = rec(1), _broken(rec(2)), rec(3), rec(4, body=b"")
    placed = sequence(fmt.DATA_START, r1, r2, r3, r4)
    data = build(*placed)
    found, cursor = read(data)
    assert [lsn for _o, lsn in found] == [1]
    assert cursor.end == placed[1][0]
    after = find_after(data, F, cursor.end)
    assert [(r.offset, r.lsn) for r in after] == [(placed[2][0], 3), (placed[3][0], 4)]


def test_find_after_is_not_fooled_by_the_file_id_inside_a_body() -> None:
    needle = struct.pack("<Q", F)
    r1 = rec(1)
    r2 = _broken(rec(2, body=b"ab" + needle * 3 + b"cd"))
    r3 = rec(3, body=needle + needle)
    placed = sequence(fmt.DATA_START, r1, r2, r3)
    data = build(*placed)
    _found, cursor = read(data)
    after = find_after(data, F, cursor.end)
    assert [(r.offset, r.lsn, r.body) for r in after] == [(placed[2][0], 3, needle + needle)]


def test_find_after_ignores_records_of_other_file_ids() -> None:
    placed = sequence(fmt.DATA_START, rec(1), _broken(rec(2)), rec(3, fid=G), rec(4))
    data = build(*placed)
    assert [r.lsn for r in find_after(data, F, placed[1][0])] == [4]


def test_tail_extent_and_max_lsn() -> None:
    placed = sequence(fmt.DATA_START, rec(1), _broken(rec(2)), rec(3), rec(4))
    data = build(*placed)
    tail = Tail(placed[1][0], find_after(data, F, placed[1][0]))
    assert tail.extent == placed[3][0] + len(rec(4))
    assert tail.max_lsn == 4
    empty = Tail(100)
    assert (empty.extent, empty.max_lsn) == (100, 0)


# -- replay_file: transaction record counts --------------------------------------------------------


TxRec = tuple[int, int, int, int]  # (type, id, tx_id, tx_count); every body is b"b<id>"


def _replay_files(files: list[list[TxRec]]) -> tuple[LoadResult, LiveIndex]:
    """Builds one journal file per list (records in sequence, lsns running on across files),
    scans and replays them in order as a load does; returns the load and the index."""
    replayer = Replayer()
    index = LiveIndex()
    lsn = 0
    for n, records in enumerate(files):
        fid = F + n
        raw = []
        for rtype, rid, tx_id, tx_count in records:
            lsn += 1
            raw.append(
                fmt.encode_record(
                    rtype,
                    file_id=fid,
                    lsn=lsn,
                    durable_lsn=lsn - 1,
                    id=rid,
                    tx_id=tx_id,
                    user_type=1,
                    tx_count=tx_count,
                    body=b"b%d" % rid if rid else b"xid",
                )
            )
        data = build(*sequence(fmt.DATA_START, *raw), fid=fid)
        cursor = Cursor()
        scanned = scan(data, fid, cursor)
        assert len(scanned) == len(records)
        replay_file(scanned, Segment(f"f{n}", fid, SIZE, None), replayer, index)
    return replayer.result(), index


def _a(id: int) -> RecordInfo:
    return RecordInfo(id, 1, b"b%d" % id, False)


# A transaction id the load reported failed gets a ROLLBACK at open; if the application uses
# the id again, the writer counts the new transaction's records from that rollback on (its
# index entry is new), so the reader must too: counting the old records as well would discard
# the new transaction (a lost commit, or an in-doubt XA transaction reported failed and then
# erased by the next open's ROLLBACK).
REPLAY_FILE_CASES = [
    pytest.param(
        [
            [(ADD_TX, 1, 7, 0), (PREPARE, 0, 7, 2), (ROLLBACK, 0, 7, 0)],
            [(ADD_TX, 2, 7, 0), (PREPARE, 0, 7, 1)],
        ],
        LoadResult([], [PreparedTransaction(7, b"xid", [_a(2)], [])], []),
        id="torn-prepare-discarded-then-id-reused-and-prepared-in-a-later-file",
    ),
    pytest.param(
        [[(ADD_TX, 1, 7, 0), (PREPARE, 0, 7, 2), (ROLLBACK, 0, 7, 0)], [(ADD_TX, 2, 7, 0)]],
        LoadResult([], [], [7]),
        id="torn-prepare-discarded-then-id-reused-and-left-open-failed-once",
    ),
    pytest.param(
        [
            [
                (ADD_TX, 1, 7, 0),
                (PREPARE, 0, 7, 2),
                (ROLLBACK, 0, 7, 0),
                (ADD_TX, 2, 7, 0),
                (PREPARE, 0, 7, 1),
            ]
        ],
        LoadResult([], [PreparedTransaction(7, b"xid", [_a(2)], [])], []),
        id="torn-prepare-discarded-then-id-reused-and-prepared-in-the-same-file",
    ),
    pytest.param(
        [[(ADD_TX, 1, 7, 0), (ROLLBACK, 0, 7, 0), (ADD_TX, 2, 7, 0), (COMMIT, 0, 7, 1)]],
        LoadResult([_a(2)], [], []),
        id="failed-id-reused-and-committed-in-the-same-file",
    ),
    pytest.param(
        [[(ADD_TX, 1, 7, 0), (COMMIT, 0, 7, 1), (ADD_TX, 2, 7, 0), (COMMIT, 0, 7, 1)]],
        LoadResult([_a(1), _a(2)], [], []),
        id="committed-id-reused-and-committed-in-the-same-file",
    ),
    pytest.param(
        [[(ADD_TX, 1, 7, 0), (ADD_TX, 2, 7, 0), (COMMIT, 0, 7, 3)]],
        LoadResult([], [], [7]),
        id="commit-counting-more-records-than-the-file-holds-is-discarded",
    ),
    pytest.param(
        [[(ADD_TX, 1, 7, 0), (ROLLBACK, 0, 7, 0), (ADD_TX, 2, 7, 0), (COMMIT, 0, 7, 2)]],
        LoadResult([], [], [7]),
        id="after-a-rollback-the-old-records-no-longer-count",
    ),
]


@pytest.mark.parametrize(("files", "expected"), REPLAY_FILE_CASES)
def test_replay_file_counts_a_transactions_records_since_it_last_ended(
    files: list[list[TxRec]], expected: LoadResult
) -> None:
    """A prepare or commit is complete when its tx_count equals the records of that use of the
    transaction id in its file; the index keeps exactly the transactions left prepared."""
    got, index = _replay_files(files)
    assert got.records == expected.records
    assert got.prepared == expected.prepared
    assert got.failed == expected.failed
    assert {tx for tx, state in index.txs.items() if state.prepared} == {
        p.tx_id for p in expected.prepared
    }


def test_a_scan_from_a_later_offset_is_not_held_to_the_floor() -> None:
    # Salvage resynchronises after damage with scan(start=...): the record it starts at is not
    # the first one written into the file, so FLOOR says nothing about it.
    placed = sequence(fmt.DATA_START, floor_rec(10, 9), floor_rec(11, 3), floor_rec(12, 3))
    cursor = Cursor()
    later = [r[5] for r in scan(build(*placed), F, cursor, start=placed[1][0])]
    assert later == [11, 12] and cursor.count == 2
