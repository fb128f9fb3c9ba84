"""Reading journal files: records in sequence, end of data, and what lies after it.

The rules are those of ``store.file.format`` ("a record is valid if and only if …", "in
sequence", "end of data"); this module applies them to a whole file's bytes:

- :func:`scan` yields the records in sequence and leaves, in a :class:`Cursor`, where the data
  ends and the last lsn read; its per-record loop is compiled (``store/_speedups_journal.c``,
  built by ``setup.py`` where a compiler is present: ``SPEEDUPS``), with :func:`python_scan`
  the reference and the fallback;
- :func:`find_after` finds every valid record of the file beyond a position (the bytes after the
  end of data): it searches for the file's id, which every record of this use of the file
  carries, so it runs at ``bytes.find`` speed rather than byte by byte;
- :func:`replay_file` dispatches a file's records to the shared replay rules (and the live
  index), the one place the record types are dispatched (:func:`scan_and_replay`, a load's
  scan and replay in one compiled pass, applies the same rules and is tested against it);
  :class:`FileReplay` feeds it whole files for the compactor and the offline tools, and keeps
  what they watch (counts per type, events, what deletes removed).

Whether the records after the end of data are a torn tail or prove corruption is decided in
``store.file.integrity``, with every other judgement of a journal directory.

Thread-safety: pure functions over bytes; a :class:`FileReplay` belongs to one caller.
"""

from __future__ import annotations

import collections
import logging
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from store.file import format as fmt
from store.file.index import ENTRY_SHIFT, LiveIndex
from store.file.segments import Segment
from store.journal.api import (
    ADD,
    ADD_TX,
    COMMIT,
    DELETE,
    DELETE_TX,
    EVENT,
    PREPARE,
    ROLLBACK,
    UPDATE,
    UPDATE_TX,
    LoadResult,
    RecordInfo,
)
from store.journal.replay import OP_ADD, OP_DELETE, OP_UPDATE, Replayer, TxOp
from store.speedups import SPEEDUPS

_replay_adds = getattr(SPEEDUPS, "replay_adds", None)
_scan_replay = getattr(SPEEDUPS, "scan_replay", None)

log = logging.getLogger(__name__)


__all__ = [
    "SPEEDUPS",
    "Cursor",
    "FileReplay",
    "ReplayTarget",
    "Tail",
    "find_after",
    "marker_of",
    "python_scan",
    "replay_file",
    "scan",
    "scan_and_replay",
]

_NONZERO = re.compile(rb"[^\x00]")


@dataclass(slots=True)
class Cursor:
    """Where a :func:`scan` stopped: ``end`` of data and the ``last_lsn`` read (0: none)."""

    end: int = fmt.DATA_START
    last_lsn: int = 0
    count: int = 0
    first_lsn: int = 0  # of the first record read (set by scan_and_replay; 0: none)


RawRecord = tuple[int, int, int, int, int, int, int, int, int, bytes]
"""(offset, length, type, user_type, compact_count, lsn, id, tx_id, tx_count, body)."""


def scan(data: bytes, file_id: int, cursor: Cursor, start: int = fmt.DATA_START) -> list[RawRecord]:
    """The records in sequence from ``start``; ``cursor`` is left at the end of data.

    Runs the compiled loop (:data:`SPEEDUPS`) when it was built, else :func:`python_scan`;
    both return the same records. Returns a list rather than yielding: a load calls this once
    per file and a generator's per-record resume cost is a measurable share of the load time.
    """
    if SPEEDUPS is None:
        return python_scan(data, file_id, cursor, start)
    floor = fmt.FLAG_FLOOR if start == fmt.DATA_START else 0
    out, cursor.end, cursor.last_lsn, cursor.count = SPEEDUPS.scan(
        data, file_id, start, floor, fmt.PAD_UNIT
    )
    return out  # type: ignore[no-any-return]


def python_scan(
    data: bytes, file_id: int, cursor: Cursor, start: int = fmt.DATA_START
) -> list[RawRecord]:
    """:func:`scan` in pure Python: the reference the compiled loop is tested against, and the
    fallback where it was not built. Same arguments, result and cursor."""
    out: list[RawRecord] = []
    emit = out.append
    size = len(data)
    unpack_head = fmt.RECORD_HEAD.unpack_from
    unpack_tail = fmt.RECORD_TAIL.unpack_from
    crc32 = zlib.crc32
    overhead = fmt.OVERHEAD
    pad_unit = fmt.PAD_UNIT
    min_type, max_type = fmt.MIN_TYPE, fmt.MAX_TYPE
    # The first record of a file proves nothing before it is missing (FLOOR); a scan that
    # starts later (salvage resynchronising after damage) does not start at a first record.
    floor = fmt.FLAG_FLOOR if start == fmt.DATA_START else 0
    pos = start
    last_lsn = 0
    count = 0
    # Where zeros began before a jump to a PAD_UNIT boundary: if no record in sequence starts
    # at the boundary, those zeros were not padding and the data ends where they began.
    padded_from = -1
    # Everything from here on is zeros: lets the padding rule stop without a regex scan.
    data_end = len(data.rstrip(b"\x00")) if data[-1:] == b"\x00" else size
    try:
        while pos + overhead <= size:
            (length, rtype, urt, cc, fl, fid, lsn, dlsn, rid, tx_id, tx_count) = unpack_head(
                data, pos
            )
            if length == 0:
                # Zero padding: the next record starts at a PAD_UNIT boundary.
                if pos >= data_end:
                    break
                m = _NONZERO.search(data, pos)
                if m is None:
                    break
                boundary = m.start() - m.start() % pad_unit
                if boundary <= pos or padded_from >= 0:
                    break
                padded_from = pos
                pos = boundary
                continue
            if (
                length >= overhead
                and length <= size - pos
                and fid == file_id
                and min_type <= rtype <= max_type
                and (lsn == last_lsn + 1 if count else not (fl & floor and dlsn < lsn - 1))
            ):
                end = pos + length
                crc, length_copy = unpack_tail(data, end - 8)
                body = data[pos + 52 : end - 8]
                valid = length_copy == length and crc32(data[pos : pos + 52], crc32(body)) == crc
            else:
                valid = False
            if not valid:
                # Padding shorter than the length field: a flush that ended 1-3 bytes before a
                # PAD_UNIT boundary was padded with that many zeros, so the length read here
                # runs into the next record. Only zeros up to the boundary are padding.
                gap = -pos % pad_unit
                if 0 < gap < 4 and padded_from < 0 and not any(data[pos : pos + gap]):
                    padded_from = pos
                    pos += gap
                    continue
                break
            emit((pos, length, rtype, urt, cc, lsn, rid, tx_id, tx_count, body))
            last_lsn = lsn
            count += 1
            pos = end
            padded_from = -1
    finally:
        if padded_from >= 0:
            pos = padded_from
        cursor.end = pos
        cursor.last_lsn = last_lsn
        cursor.count = count
    return out


def find_after(data: bytes, file_id: int, start: int) -> list[fmt.Record]:
    """Every valid record of ``file_id`` that starts at or after ``start``."""
    needle = fmt.FILE_ID_FIELD.pack(file_id)
    at = fmt.FILE_ID_OFFSET
    found: list[fmt.Record] = []
    hit = data.find(needle, start + at)
    while hit != -1:
        candidate = hit - at
        rec = fmt.decode_record(data, candidate, file_id)
        if rec is not None:
            found.append(rec)
            hit = data.find(needle, candidate + rec.length + at)
        else:
            hit = data.find(needle, hit + 1)
    return found


@dataclass(slots=True)
class Tail:
    """What follows the end of data of one file."""

    end: int
    records: list[fmt.Record] = field(default_factory=list)

    @property
    def extent(self) -> int:
        """Where the last valid record after the end stops (``end`` if there is none)."""
        return max((r.offset + r.length for r in self.records), default=self.end)

    @property
    def max_lsn(self) -> int:
        return max((r.lsn for r in self.records), default=0)


class ReplayTarget(Protocol):
    """What :func:`replay_file` feeds: the shared :class:`~store.journal.replay.Replayer`, or a
    wrapper of one (history recovery's, which also keeps what deletes removed)."""

    def add(self, id: int, user_record_type: int, data: bytes) -> None: ...
    def update(self, id: int, user_record_type: int, data: bytes) -> None: ...
    def delete(self, id: int) -> None: ...
    def add_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None: ...
    def update_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None: ...
    def delete_tx(self, tx_id: int, id: int) -> None: ...
    def prepare(self, tx_id: int, xid: bytes) -> None: ...
    def commit(self, tx_id: int) -> None: ...
    def rollback(self, tx_id: int) -> None: ...
    def discard(self, tx_id: int) -> None: ...
    def is_open(self, tx_id: int) -> bool: ...


def replay_file(
    records: Sequence[RawRecord],
    seg: Segment,
    replayer: ReplayTarget,
    index: LiveIndex | None = None,
    *,
    observe: Callable[[RawRecord], None] | None = None,
) -> None:
    """Feed one file's records in sequence to ``replayer`` (and ``index``), as a load does.

    The one place the record types are dispatched: the journal's load, the compactor and the
    offline tools (through :class:`FileReplay`) replay through it, so they cannot disagree.
    ``observe``, when given, sees every record first, in order (the offline tools count types
    and keep events with it); the load passes none and pays nothing for it.

    Runs of adds and updates into a :class:`~store.journal.replay.Replayer` go through the
    compiled loop (``replay_adds`` of :data:`SPEEDUPS`) when it was built: the same rules,
    tested against this function's Python loop, which stays the reference.

    A prepare or commit whose ``tx_count`` differs from the transaction's records counted in
    this file is an incomplete transaction: discarded (reported failed), never applied. A commit
    of a transaction nothing was collected for is legal and ignored (its records were
    reclaimed, or it was empty).

    The count covers the records since the id's last commit, rollback or discard: the writer
    counts a new use of a transaction id (a failed id used again after the ROLLBACK the open
    wrote for it) from zero, so the old use's records in the same file must not count.
    """
    if observe is not None:
        for rec in records:
            observe(rec)
    other = _OtherRecords(seg, replayer, index)
    # Adds and updates are most of any load: LiveIndex.add is written out here (same rules),
    # with this file's positive count and live bytes summed locally and added once at the end.
    live: dict[int, int | list[int]] = index.records if index is not None else {}
    updated_only = index.updated_only if index is not None else set()
    if index is not None:
        index.enter(seg)
    file_key = seg.file_id << ENTRY_SHIFT  # an entry is file_key | size (store.file.index)
    pos = 0
    live_bytes = 0
    if _replay_adds is not None and type(replayer) is Replayer and type(records) is list:
        # The compiled loop replays each run of adds and updates (the same rules, into the
        # replayer's and the index's own containers); the other records come back here.
        entries, ids = replayer.containers()
        tracked = live if index is not None else None
        i, n = 0, len(records)
        while i < n:
            i, count, size = _replay_adds(
                records, i, entries, ids, RecordInfo, tracked, updated_only, file_key, ADD, UPDATE
            )
            pos += count
            live_bytes += size
            if i < n:
                other.replay(records[i])
                i += 1
        seg.pos += pos
        seg.live_bytes += live_bytes
        return
    r_add, r_update = replayer.add, replayer.update
    for rec in records:
        rtype = rec[2]
        if rtype == ADD or rtype == UPDATE:
            rid, length = rec[6], rec[1]
            if rtype == ADD:
                r_add(rid, rec[3], rec[9])
            else:
                r_update(rid, rec[3], rec[9])
            if index is not None:
                pos += 1
                live_bytes += length
                where = live.get(rid)
                if rtype == ADD:
                    if updated_only:
                        updated_only.discard(rid)
                elif where is None:
                    updated_only.add(rid)
                if where is None:
                    live[rid] = file_key | length
                elif type(where) is int:
                    live[rid] = [where, file_key | length]
                else:
                    where.append(file_key | length)  # type: ignore[union-attr]
        else:
            other.replay(rec)
    seg.pos += pos
    seg.live_bytes += live_bytes


def scan_and_replay(
    data: bytes,
    seg: Segment,
    cursor: Cursor,
    replayer: ReplayTarget,
    index: LiveIndex | None = None,
) -> None:
    """:func:`scan` of a whole file and :func:`replay_file` of its records, as a load does; also
    sets ``cursor.first_lsn``. With the compiled module and a plain :class:`Replayer`, one
    compiled pass does both: an add or update is replayed as it is read, never becoming a raw
    record, and every other record goes through the same Python rules as in
    :func:`replay_file`. Returns None; raises nothing of its own."""
    if _scan_replay is None or type(replayer) is not Replayer:
        records = scan(data, seg.file_id, cursor)
        cursor.first_lsn = records[0][5] if records else 0
        replay_file(records, seg, replayer, index)
        return
    other = _OtherRecords(seg, replayer, index)
    if index is not None:
        index.enter(seg)
        live: dict[int, int | list[int]] | None = index.records
        updated_only = index.updated_only
    else:
        live, updated_only = None, set()
    entries, ids = replayer.containers()
    (cursor.end, cursor.last_lsn, cursor.count, cursor.first_lsn, positives, live_bytes) = (
        _scan_replay(
            data, seg.file_id, fmt.DATA_START, fmt.FLAG_FLOOR, fmt.PAD_UNIT, entries, ids,
            RecordInfo, live, updated_only, seg.file_id << ENTRY_SHIFT, ADD, UPDATE, other.replay,
        )
    )  # fmt: skip
    seg.pos += positives
    seg.live_bytes += live_bytes


class _OtherRecords:
    """The records of one file that are not plain adds or updates (deletes, transactions,
    their ends), for :func:`replay_file`: the per-file count of each transaction's records
    lives here."""

    __slots__ = ("in_file", "index", "replayer", "seg")

    def __init__(self, seg: Segment, replayer: ReplayTarget, index: LiveIndex | None) -> None:
        self.seg = seg
        self.replayer = replayer
        self.index = index
        # tx id -> its records seen in this file since it last ended
        self.in_file: dict[int, int] = {}

    def replay(self, rec: RawRecord) -> None:
        _off, length, rtype, urt, _cc, _lsn, rid, tx_id, tx_count, body = rec
        seg, replayer, index, in_file = self.seg, self.replayer, self.index, self.in_file
        if rtype == DELETE:
            replayer.delete(rid)
            if index is not None:
                index.delete(rid, seg)
        elif rtype == ADD_TX or rtype == UPDATE_TX or rtype == DELETE_TX:
            in_file[tx_id] = in_file.get(tx_id, 0) + 1
            if rtype == ADD_TX:
                replayer.add_tx(tx_id, rid, urt, body)
                kind = OP_ADD
            elif rtype == UPDATE_TX:
                replayer.update_tx(tx_id, rid, urt, body)
                kind = OP_UPDATE
            else:
                replayer.delete_tx(tx_id, rid)
                kind = OP_DELETE
            if index is not None:
                index.tx_record(tx_id, kind, rid, seg, length)
        elif rtype == PREPARE:
            if in_file.get(tx_id, 0) != tx_count:
                in_file.pop(tx_id, None)
                log.warning("prepared transaction %d is incomplete in %s", tx_id, seg.path)
                replayer.discard(tx_id)
                if index is not None:
                    index.discard(tx_id, seg)
            else:
                replayer.prepare(tx_id, body)
                if index is not None:
                    index.prepare_in(tx_id, seg)
        elif rtype == COMMIT:
            # The count starts again when a transaction ends: its id may be used again (a
            # failed id reused after a restart, docs/journal.md#failed), even within this same file.
            if in_file.pop(tx_id, 0) != tx_count and replayer.is_open(tx_id):
                log.warning("committed transaction %d is incomplete in %s", tx_id, seg.path)
                replayer.discard(tx_id)
                if index is not None:
                    index.discard(tx_id, seg)
            else:
                replayer.commit(tx_id)
                if index is not None:
                    index.commit(tx_id, seg)
        elif rtype == ROLLBACK:
            in_file.pop(tx_id, None)
            replayer.rollback(tx_id)
            if index is not None:
                index.rollback(tx_id, seg)
        # EVENT records are kept for retention only; a load never returns them.


class FileReplay:
    """Whole files replayed through :func:`replay_file`, for callers that keep no live index:
    the compactor and the offline tools (``store data print``, salvage, history recovery).

    Feed the files in file-id order, one :meth:`feed` per file (a transaction's record count is
    per file). What the observer saw: ``counts`` (records per type) and ``events`` (the event
    records, as load entries; the caller leaves the journal's own file-list markers out). With
    ``keep_deleted``, a second replayer sees every add and update but no delete, so that
    :meth:`deleted` can say what deletes removed (``store data recover --undelete``).

    Thread-safety: none; one replay belongs to one caller.
    """

    def __init__(self, *, keep_deleted: bool = False) -> None:
        self.replayer = Replayer()
        self._ever = Replayer() if keep_deleted else None
        self._target: ReplayTarget = (
            self.replayer if self._ever is None else _DeletesIgnored(self.replayer, self._ever)
        )
        self.counts: collections.Counter[int] = collections.Counter()
        self.events: list[RecordInfo] = []

    def feed(self, records: Sequence[RawRecord], *, path: str, file_id: int) -> None:
        """Replay the records in sequence of the file at ``path`` (one whole file). Returns
        nothing; raises nothing."""
        replay_file(records, Segment(path, file_id, 0, None), self._target, observe=self._see)

    def _see(self, rec: RawRecord) -> None:
        rtype = rec[2]
        self.counts[rtype] += 1
        if rtype == EVENT:
            self.events.append(RecordInfo(rec[6], rec[3], rec[9], False))

    def result(self) -> LoadResult:
        """What a load of the files fed so far returns. Returns a new LoadResult."""
        return self.replayer.result()

    def open_transactions(self) -> dict[int, tuple[list[TxOp], bytes | None]]:
        """Open transactions: tx id -> (operations in order, XID if prepared else None)."""
        return {
            tx_id: (ops, self.replayer.prepared_xid(tx_id))
            for tx_id, ops in self.replayer.open_transactions().items()
        }

    def deleted(self) -> list[RecordInfo]:
        """Committed adds and updates fed so far that a delete removed, in journal order.

        Returns an empty list unless the replay was made with ``keep_deleted``.
        """
        if self._ever is None:
            return []
        live = collections.Counter(self.replayer.result().records)
        gone: list[RecordInfo] = []
        for info in self._ever.result().records:
            if live[info] > 0:
                live[info] -= 1
            else:
                gone.append(info)
        return gone


class _DeletesIgnored:
    """Feeds ``main`` everything and ``ever`` everything but deletes; ``main`` decides what is
    open (the transaction outcomes are ``replay_file``'s, the same for both)."""

    __slots__ = ("ever", "main")

    def __init__(self, main: Replayer, ever: Replayer) -> None:
        self.main = main
        self.ever = ever

    def add(self, id: int, user_record_type: int, data: bytes) -> None:
        self.main.add(id, user_record_type, data)
        self.ever.add(id, user_record_type, data)

    def update(self, id: int, user_record_type: int, data: bytes) -> None:
        self.main.update(id, user_record_type, data)
        self.ever.update(id, user_record_type, data)

    def delete(self, id: int) -> None:
        self.main.delete(id)

    def add_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        self.main.add_tx(tx_id, id, user_record_type, data)
        self.ever.add_tx(tx_id, id, user_record_type, data)

    def update_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        self.main.update_tx(tx_id, id, user_record_type, data)
        self.ever.update_tx(tx_id, id, user_record_type, data)

    def delete_tx(self, tx_id: int, id: int) -> None:
        self.main.delete_tx(tx_id, id)

    def prepare(self, tx_id: int, xid: bytes) -> None:
        self.main.prepare(tx_id, xid)
        self.ever.prepare(tx_id, xid)

    def commit(self, tx_id: int) -> None:
        self.main.commit(tx_id)
        self.ever.commit(tx_id)

    def rollback(self, tx_id: int) -> None:
        self.main.rollback(tx_id)
        self.ever.rollback(tx_id)

    def discard(self, tx_id: int) -> None:
        self.main.discard(tx_id)
        self.ever.discard(tx_id)

    def is_open(self, tx_id: int) -> bool:
        return self.main.is_open(tx_id)


def marker_of(data: bytes | memoryview, rec: Sequence[Any]) -> fmt.Marker | None:
    """The file-list marker the record ``rec`` (read in sequence from ``data``, as
    ``(offset, length, type, …, body)``) is, or None for any other record (an ordinary event,
    or a marker body this version does not understand, which is skipped as any event)."""
    if rec[2] != EVENT or not data[rec[0] + 7] & fmt.FLAG_MARKER:
        return None
    return fmt.decode_marker(bytes(rec[-1]))
