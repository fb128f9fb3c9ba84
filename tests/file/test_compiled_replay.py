"""The compiled replay of a file's adds and updates (``store/_speedups_load.c``) against its
Python reference in ``store.file.reader``, called directly:

- ``replay_adds(records, start, ...)``: a run of ADD and UPDATE raw records into a
  ``Replayer``'s containers and a ``LiveIndex``, against the Python loop of ``replay_file``
  over the same run;
- ``scan_replay(data, ...)``: a file's scan and that replay in one pass, every other record
  handed to ``other``, against ``python_scan`` and then ``replay_file``'s Python loop (the
  path ``scan_and_replay`` takes where the module is not built).

Both must leave the same entries, id index, live index and counts, hand ``other`` the same
records at the same points, and raise the same errors. Inputs are tables of hand-built records
and files, then Hypothesis properties over generated ones."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.file import format as fmt
from store.file import reader
from store.file.index import ENTRY_SHIFT, LiveIndex
from store.file.reader import Cursor, RawRecord
from store.file.segments import Segment
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
    RecordInfo,
)
from store.journal.replay import Replayer
from store.speedups import SPEEDUPS
from tests.file.test_reader import require_speedups
from tests.support.profile import examples

F = 65536  # the file id of the file under test
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


@dataclass
class Load:
    """What a load replays one file into: a replayer, a live index (or none) and the file."""

    with_index: bool = True
    replayer: Replayer = field(default_factory=Replayer)
    index: LiveIndex | None = None
    seg: Segment = field(default_factory=lambda: Segment("/x/f", F, 1 << 20, None))
    others: list[tuple[RawRecord, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.with_index:
            self.index = LiveIndex()

    def other(self, rec: RawRecord) -> None:
        """``other``: each record that is not replayed here, and how many entries were made
        before it (where it came in the file's order)."""
        self.others.append((rec, len(self.replayer.containers()[0])))

    def state(self) -> tuple[object, ...]:
        entries, ids = self.replayer.containers()
        index = self.index
        return (
            list(entries),
            dict(ids),
            None if index is None else (dict(index.records), set(index.updated_only)),
            [(type(rec), rec, made) for rec, made in self.others],
        )

    def compiled_args(self) -> tuple[Any, ...]:
        """The containers argument tail of replay_adds and scan_replay (as reader passes them)."""
        entries, ids = self.replayer.containers()
        live = self.index.records if self.index is not None else None
        updated_only = self.index.updated_only if self.index is not None else set()
        return (entries, ids, RecordInfo, live, updated_only, F << ENTRY_SHIFT, ADD, UPDATE)


@contextmanager
def python_loop(other: Callable[[RawRecord], None] | None = None) -> Iterator[None]:
    """``replay_file`` on its Python loop (the compiled run off); ``other``, when given,
    receives the records the loop hands to its other-record rules."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reader, "_replay_adds", None)
        if other is not None:
            mp.setattr(reader, "_OtherRecords", lambda seg, rep, idx: SimpleNamespace(replay=other))
        yield


def raw(rtype: int, rid: int, body: bytes = b"", *, urt: int = 1, tx: int = 0) -> RawRecord:
    """A raw record as scan returns it (offset and lsn do not matter to the replay)."""
    return (0, fmt.OVERHEAD + len(body), rtype, urt, 0, 1, rid, tx, 0, body)


# ---- replay_adds -------------------------------------------------------------------------


def run_compiled_adds(records: list[Any], start: int, load: Load) -> tuple[Any, ...]:
    return tuple(SPEEDUPS.replay_adds(records, start, *load.compiled_args()))


def run_python_adds(records: list[Any], start: int, load: Load) -> tuple[Any, ...]:
    """The reference: ``replay_file``'s Python loop over the run of adds and updates from
    ``records[start]``; (where the run stopped, positives counted, their bytes)."""
    stop = start
    while stop < len(records) and records[stop][2] in (ADD, UPDATE):
        stop += 1
    pos, size = load.seg.pos, load.seg.live_bytes
    with python_loop():
        reader.replay_file(records[start:stop], load.seg, load.replayer, load.index)
    return max(start, stop), load.seg.pos - pos, load.seg.live_bytes - size


def both_adds(
    records: list[Any], start: int, with_index: bool
) -> tuple[tuple[object, ...], tuple[object, ...]]:
    """(result or error, state) of the compiled run and of the reference."""
    out = []
    for run in (run_compiled_adds, run_python_adds):
        load = Load(with_index)
        try:
            result: object = run(records, start, load)
        except Exception as exc:
            result = (type(exc), str(exc))
        out.append((result, load.state()))
    return out[0], out[1]


ADDS = [
    pytest.param([], 0, id="no records"),
    pytest.param([raw(ADD, 1, b"a")], 0, id="one add"),
    pytest.param([raw(ADD, 1, b"a"), raw(UPDATE, 1, b"b"), raw(UPDATE, 1, b"c")], 0,
                 id="an add and two updates of one id"),
    pytest.param([raw(UPDATE, 1, b"u"), raw(ADD, 1, b"a")], 0, id="an update before its add"),
    pytest.param([raw(UPDATE, 4, b"u"), raw(UPDATE, 4, b"v")], 0, id="updates of a new id"),
    pytest.param([raw(ADD, 1), raw(ADD, 2), raw(DELETE, 1), raw(ADD, 3)], 0,
                 id="the run stops at a delete"),
    pytest.param([raw(ADD, 1), raw(ADD_TX, 2, tx=5), raw(ADD, 3)], 2, id="a run after the stop"),
    pytest.param([raw(DELETE, 1), raw(ADD, 2)], 0, id="a run of none"),
    pytest.param([raw(ADD, 1), raw(ADD, 2)], 2, id="start at the end"),
    pytest.param([raw(ADD, 1), raw(ADD, 2)], 5, id="start past the end"),
    pytest.param([raw(ADD, I64_MIN, b"lo"), raw(ADD, I64_MAX, b"hi"), raw(UPDATE, 0)], 0,
                 id="ids at the 64-bit edges"),
    pytest.param([raw(ADD, 1, bytes(70000), urt=255), raw(UPDATE, 1, b"", urt=0)], 0,
                 id="a large body and an empty one"),
    pytest.param([raw(ADD, 1), raw(PREPARE, 0, b"xid", tx=3), raw(COMMIT, 0, tx=3)], 0,
                 id="a transaction's end stops it"),
]  # fmt: skip


@pytest.mark.parametrize("with_index", [True, False], ids=["live index", "no live index"])
@pytest.mark.parametrize(("records", "start"), ADDS)
def test_replay_adds_equals_replay_files_python_loop(
    records: list[RawRecord], start: int, with_index: bool
) -> None:
    require_speedups()
    (got, got_state), (want, want_state) = both_adds(records, start, with_index)
    assert got == want
    assert got_state == want_state


def test_replay_adds_makes_record_infos_of_the_replayers_own_type() -> None:
    require_speedups()
    load = Load()
    run_compiled_adds([raw(ADD, 1, b"a"), raw(UPDATE, 1, b"b")], 0, load)
    entries, ids = load.replayer.containers()
    assert [type(e) for e in entries] == [RecordInfo, RecordInfo]
    assert entries == [RecordInfo(1, 1, b"a", False), RecordInfo(1, 1, b"b", True)]
    assert ids == {1: [0, 1]}
    assert load.index is not None and load.index.records == {1: [F << ENTRY_SHIFT | 61] * 2}


# Records both paths refuse with a TypeError, and whether they leave the same state: the
# compiled run reads a record's length before it replays the record, the Python loop after.
ADDS_REFUSED = [
    pytest.param([raw(ADD, 1), raw(ADD, [2])], True, id="an unhashable id"),  # type: ignore[arg-type]
    pytest.param([raw(UPDATE, {}, b"x")], True, id="an unhashable id of an update"),  # type: ignore[arg-type]
    pytest.param([(0, "61", ADD, 1, 0, 1, 7, 0, 0, b"x")], False, id="a length not an int"),
]


@pytest.mark.parametrize(("records", "same_state"), ADDS_REFUSED)
def test_replay_adds_refuses_what_the_python_loop_refuses(
    records: list[Any], same_state: bool
) -> None:
    require_speedups()
    (got, got_state), (want, want_state) = both_adds(records, 0, True)
    assert isinstance(got, tuple) and got[0] is TypeError
    assert isinstance(want, tuple) and want[0] is TypeError
    assert (got_state == want_state) is same_state


@pytest.mark.parametrize(
    "records",
    [
        pytest.param((raw(ADD, 1),), id="records not a list"),
        pytest.param([(0, 60, ADD)], id="a record not a 10-tuple"),
        pytest.param([raw(ADD, 1)[:9]], id="a record of 9 fields"),
        pytest.param([(0, 60, "add", 1, 0, 1, 7, 0, 0, b"")], id="a type that is not an int"),
    ],
)
def test_replay_adds_refuses_a_record_no_scan_makes(records: Sequence[Any]) -> None:
    """The run's own checks of what ``replay_file`` only ever passes it right (a list of
    scan's 10-tuples): a TypeError, where the Python loop fails its own way or not at all."""
    require_speedups()
    with pytest.raises(TypeError):
        SPEEDUPS.replay_adds(records, 0, *Load().compiled_args())


_rtypes = st.sampled_from([ADD] * 6 + [UPDATE] * 4 + [DELETE, ADD_TX, DELETE_TX, COMMIT])


@st.composite
def _raw_records(draw: st.DrawFn) -> RawRecord:
    rtype = draw(_rtypes)
    rid = draw(st.one_of(st.integers(0, 8), st.integers(I64_MIN, I64_MAX)))
    return raw(rtype, rid, draw(st.binary(max_size=20)), urt=draw(st.integers(0, 255)), tx=3)


@settings(max_examples=examples(300), deadline=None)
@given(records=st.lists(_raw_records(), max_size=30), data=st.data(), with_index=st.booleans())
def test_any_run_of_adds_and_updates_replays_as_the_python_loop_replays_it(
    records: list[RawRecord], data: st.DataObject, with_index: bool
) -> None:
    require_speedups()
    start = data.draw(st.integers(0, len(records)))
    (got, got_state), (want, want_state) = both_adds(records, start, with_index)
    assert got == want
    assert got_state == want_state


# ---- scan_replay -------------------------------------------------------------------------


def run_compiled_scan(data: Any, start: int, load: Load) -> tuple[Any, ...]:
    floor = fmt.FLAG_FLOOR if start == fmt.DATA_START else 0  # as reader.scan sets it
    if load.index is not None:
        load.index.enter(load.seg)
    return tuple(
        SPEEDUPS.scan_replay(data, F, start, floor, fmt.PAD_UNIT, *load.compiled_args(), load.other)
    )


def run_python_scan(data: Any, start: int, load: Load) -> tuple[Any, ...]:
    """The reference: ``python_scan``, then ``replay_file``'s Python loop over its records,
    each record its other-record rules would take handed to ``load.other``; (end, last lsn,
    count, first lsn, positives, their bytes)."""
    cursor = Cursor()
    pos, size = load.seg.pos, load.seg.live_bytes
    with python_loop(load.other):
        records = reader.python_scan(data, F, cursor, start)
        reader.replay_file(records, load.seg, load.replayer, load.index)
    first = records[0][5] if records else 0
    return (
        cursor.end,
        cursor.last_lsn,
        cursor.count,
        first,
        load.seg.pos - pos,
        load.seg.live_bytes - size,
    )


def both_scans(
    data: Any, start: int = fmt.DATA_START, with_index: bool = True
) -> tuple[tuple[object, ...], tuple[object, ...]]:
    out = []
    for run in (run_compiled_scan, run_python_scan):
        load = Load(with_index)
        try:
            result: object = run(data, start, load)
        except Exception as exc:
            result = (type(exc), str(exc))
        out.append((result, load.state()))
    return out[0], out[1]


def rec(rtype: int, lsn: int, rid: int = 0, body: bytes = b"", **fields: Any) -> bytes:
    """A record of the file under test; its durable lsn the one before (what FLOOR wants)."""
    fields.setdefault("file_id", F)
    fields.setdefault("durable_lsn", lsn - 1)
    fields.setdefault("flags", fmt.FLAG_FLOOR)
    return fmt.encode_record(rtype, lsn=lsn, id=rid, body=body, user_type=7, **fields)


def journal_file(*pieces: bytes, size: int = 8192) -> bytes:
    """A journal file: the header, then ``pieces`` back to back, then zeros."""
    data = fmt.encode_header(F, fmt.KIND_MESSAGES, created_ns=1) + b"".join(pieces)
    return data + bytes(size - len(data))


def padded(piece: bytes, at: int) -> bytes:
    """``piece`` followed by the zeros up to the PAD_UNIT boundary after file offset ``at``."""
    end = at + len(piece)
    return piece + bytes(-end % fmt.PAD_UNIT)


_adds = rec(ADD, 1, 1, b"one") + rec(UPDATE, 2, 1, b"two") + rec(ADD, 3, 2, b"three")
_torn = rec(ADD, 4, 3, b"torn")
_bad_crc = bytearray(rec(ADD, 4, 3, b"flip"))
_bad_crc[60] ^= 1

FILES = [
    pytest.param(journal_file(), id="an empty file"),
    pytest.param(journal_file(_adds), id="adds and updates"),
    pytest.param(journal_file(rec(ADD, 1, 1), rec(ADD_TX, 2, 5, b"t", tx_id=9),
                              rec(UPDATE_TX, 3, 1, b"u", tx_id=9), rec(ADD, 4, 2),
                              rec(COMMIT, 5, tx_id=9, tx_count=2), rec(ADD, 6, 3)),
                 id="a transaction between adds"),
    pytest.param(journal_file(rec(ADD, 1, 1), rec(DELETE, 2, 1), rec(ADD, 3, 1, b"again")),
                 id="a delete between adds"),
    pytest.param(journal_file(rec(UPDATE, 1, 4, b"u"), rec(UPDATE, 2, 4, b"v")),
                 id="updates of an id never added"),
    pytest.param(journal_file(padded(rec(ADD, 1, 1), fmt.DATA_START), rec(ADD, 2, 2)),
                 id="padding to the boundary, then more"),
    pytest.param(journal_file(_adds, _torn[:-5]), id="a torn tail"),
    pytest.param(journal_file(_adds, bytes(_bad_crc), rec(ADD, 5, 4)), id="a damaged checksum"),
    pytest.param(journal_file(_adds, rec(ADD, 5, 4)), id="an lsn gap ends the data"),
    pytest.param(journal_file(_adds, rec(ADD, 4, 3, file_id=F - 1)),
                 id="a record of an earlier use of the file"),
    pytest.param(journal_file(rec(ADD, 5, 1, durable_lsn=2)),
                 id="a first record whose predecessors are missing"),
    pytest.param(journal_file(rec(ADD, 5, 1, durable_lsn=2, flags=0), rec(ADD, 6, 2)),
                 id="no floor flag, no floor rule"),
    pytest.param(journal_file(rec(PREPARE, 1, body=b"xid", tx_id=3), rec(ROLLBACK, 2, tx_id=3)),
                 id="other records only"),
    pytest.param(journal_file(rec(ADD, 1, I64_MIN, bytes(70000)), rec(ADD, 2, I64_MAX),
                              size=80000),
                 id="a large body, ids at the 64-bit edges"),
]  # fmt: skip


@pytest.mark.parametrize("with_index", [True, False], ids=["live index", "no live index"])
@pytest.mark.parametrize("data", FILES)
def test_scan_replay_equals_python_scan_then_the_python_loop(data: bytes, with_index: bool) -> None:
    require_speedups()
    (got, got_state), (want, want_state) = both_scans(data, with_index=with_index)
    assert got == want
    assert got_state == want_state


def test_scan_replay_from_an_offset_scans_without_the_floor_rule() -> None:
    """A scan that starts after the first record (salvage resynchronising) applies no floor."""
    require_speedups()
    first = rec(ADD, 1, 1, b"skipped")
    data = journal_file(first, rec(ADD, 7, 2, durable_lsn=3), rec(UPDATE, 8, 2))
    (got, got_state), (want, want_state) = both_scans(data, start=fmt.DATA_START + len(first))
    assert got == want and got[2] == 2
    assert got_state == want_state


@pytest.mark.parametrize("where", ["first", "after two adds"])
def test_an_error_of_other_stops_both_at_the_same_record(where: str) -> None:
    """``other`` raising: the same exception from both, after the same records replayed."""
    require_speedups()
    pieces = [rec(DELETE, 1, 9)] if where == "first" else [rec(ADD, 1, 1), rec(ADD, 2, 2)]
    data = journal_file(*pieces, rec(DELETE, len(pieces) + 1, 1), rec(ADD, len(pieces) + 2, 3))
    outcomes = []
    for run in (run_compiled_scan, run_python_scan):
        load = Load()

        def refuse(record: RawRecord) -> None:
            raise RuntimeError(f"refused the record of lsn {record[5]}")

        load.other = refuse  # type: ignore[method-assign]
        with pytest.raises(RuntimeError) as caught:
            run(data, fmt.DATA_START, load)
        outcomes.append((str(caught.value), load.state()))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize(
    "data", [pytest.param("x" * 100, id="a str"), pytest.param(12345, id="an int")]
)
def test_data_that_is_not_bytes_is_a_type_error_of_both(data: object) -> None:
    require_speedups()
    (got, _), (want, _) = both_scans(data)
    assert isinstance(got, tuple) and got[0] is TypeError
    assert isinstance(want, tuple) and want[0] is TypeError


_all_types = st.sampled_from(
    [ADD] * 6 + [UPDATE] * 4 + [DELETE, ADD_TX, UPDATE_TX, DELETE_TX, PREPARE, COMMIT, ROLLBACK]
)


@st.composite
def _files(draw: st.DrawFn) -> tuple[bytes, list[tuple[int, int, bytes]]]:
    """A file of records in sequence, some followed by padding to the boundary, and what was
    written: (type, id, body) of each record."""
    written: list[tuple[int, int, bytes]] = []
    pieces: list[bytes] = []
    at = fmt.DATA_START
    for lsn in range(1, draw(st.integers(0, 25)) + 1):
        rtype, rid = draw(_all_types), draw(st.integers(0, 6))
        body = draw(st.binary(max_size=30))
        piece = rec(rtype, lsn, rid, body, tx_id=draw(st.integers(0, 2)), tx_count=1)
        if draw(st.integers(0, 9)) == 0:
            piece = padded(piece, at)
        pieces.append(piece)
        at += len(piece)
        written.append((rtype, rid, body))
    return journal_file(*pieces, size=at + 2 * fmt.PAD_UNIT), written


@settings(max_examples=examples(200), deadline=None)
@given(file=_files(), damage=st.data(), with_index=st.booleans())
def test_any_file_replays_as_the_python_scan_and_loop_replay_it(
    file: tuple[bytes, list[tuple[int, int, bytes]]], damage: st.DataObject, with_index: bool
) -> None:
    """Undamaged, every record written comes back (replayed or handed to ``other``, in file
    order); damaged anywhere (a flipped bit, a cut), the compiled pass still equals the
    reference."""
    require_speedups()
    data, written = file
    (got, got_state), (want, want_state) = both_scans(data, with_index=with_index)
    assert got == want and got_state == want_state
    load = Load(with_index)
    run_compiled_scan(data, fmt.DATA_START, load)
    replayed, others = iter(load.replayer.containers()[0]), iter(load.others)
    back = []
    for rtype, _, _ in written:
        if rtype in (ADD, UPDATE):
            entry = next(replayed)
            assert entry is not None and entry.is_update is (rtype == UPDATE)
            back.append((rtype, entry.id, entry.data))
        else:
            other, _ = next(others)
            back.append((other[2], other[6], other[9]))
    assert back == written
    if data and damage.draw(st.booleans()):
        broken = bytearray(data)
        at = damage.draw(st.integers(fmt.DATA_START, len(data) - 1))
        if damage.draw(st.booleans()):
            broken[at] ^= 1 << damage.draw(st.integers(0, 7))
        else:
            broken[at:] = bytes(len(data) - at)
        (got, got_state), (want, want_state) = both_scans(bytes(broken), with_index=with_index)
        assert got == want and got_state == want_state
