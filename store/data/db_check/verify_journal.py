"""``store data verify`` on a database store's journal tables (bindings, messages): every row
through the load's own row dispatch (:class:`store.db.row_replay.RowReplay`, which feeds
:class:`store.journal.replay.Replayer` and :class:`store.db.rows.RowIndex`), every record body
through the storage manager's codecs. Part of :mod:`store.data.db_check.verify`, whose docstring
lists the findings.

Thread-safety: each call works alone on its store (the caller holds the store lock).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from store.data.db_check.report import ERROR, WARNING, DbFinding, TableSummary, ids_text
from store.db.dialects import load_select
from store.db.row_replay import RowReplay
from store.db.rows import RowIndex
from store.errors import CorruptionError, StoreError
from store.journal import api
from store.journal.replay import Replayer
from store.messaging import records as r
from store.messaging.message_records import decode_large_message, decode_message
from store.messaging.page_records import (
    ACKNOWLEDGE_CURSOR,
    PAGE_CURSOR_COMPLETE,
    PAGE_CURSOR_COUNTER_INC,
    PAGE_CURSOR_COUNTER_VALUE,
    PAGE_CURSOR_PENDING_COUNTER,
    PAGE_TRANSACTION,
    decode_page_record,
)

__all__ = ["scan_journal"]

_TX_ROWS: Final = frozenset((api.ADD_TX, api.UPDATE_TX, api.DELETE_TX, api.PREPARE))
_RECORD_ROWS: Final = frozenset((api.ADD, api.UPDATE, api.ADD_TX, api.UPDATE_TX))
#: Message-journal user record types a plain UPDATE carries, all ignored by the storage
#: manager when their message is missing (store.messaging.recovery._apply).
_REF_UPDATES: Final = frozenset(
    (r.ADD_REF, r.ACKNOWLEDGE_REF, r.UPDATE_DELIVERY_COUNT, r.SET_SCHEDULED_DELIVERY_TIME)
)


class _Sink:
    """The delete work a load queues (the RowIndex's CleanupSink); verify only discards it."""

    __slots__ = ("records", "rows", "transactions", "tx_records")

    def __init__(self) -> None:
        self.records: list[tuple[int, int]] = []
        self.tx_records: list[tuple[int, int, int, int]] = []
        self.transactions: list[tuple[int, int, int]] = []
        self.rows: list[Any] = []


class _Scan:
    """What one pass over a journal table found, row by row (judged once the pass is over)."""

    __slots__ = ("bad_types", "last", "light", "orphans", "undecodable", "unknown")

    def __init__(self) -> None:
        self.light: list[tuple[int, int, int, int]] = []  # seq, id, recordtype, txid
        self.bad_types: list[tuple[int, int]] = []  # seq, recordtype
        self.undecodable: dict[int, str] = {}  # seq -> reason
        self.unknown: dict[int, list[int]] = {}  # user record type -> seqs
        self.orphans: list[tuple[int, int, int]] = []  # seq, id, user record type
        self.last = 0


def scan_journal(
    engine: Engine, table: sa.Table, journal: str
) -> tuple[TableSummary, list[DbFinding], set[int]]:
    """Replay ``table`` (the ``journal`` "bindings" or "messages") as a load does; returns
    its summary, its findings and the ids of its live large messages."""
    replayer, index, sink = Replayer(), RowIndex(), _Sink()
    feeder = RowReplay(replayer, index, sink, table.name)
    scan = _read(engine, table, journal, feeder)
    feeder.flush()
    failed = set(index.fail_open(scan.last, sink))
    loaded = replayer.result()
    live_large = {rec.id for rec in loaded.records if rec.user_record_type == r.ADD_LARGE_MESSAGE}
    name = table.name
    findings = [
        DbFinding(
            ERROR,
            "bad-record-type",
            name,
            seq,
            f"row has record type {rt}, not one of 10..19 (a load refuses the table here)",
            (seq,),
        )
        for seq, rt in scan.bad_types
    ]
    needed, uncommitted, dead = _judge_rows(scan, index, failed, name, findings)
    gone = set(dead).union(*uncommitted.values())
    findings += _unknown_types(scan, gone, name)
    findings += _uncommitted(uncommitted, name)
    findings += _orphans(scan, journal, name)
    if dead:
        garbled = sum(1 for s in dead if s in scan.undecodable)
        findings.append(
            DbFinding(
                WARNING,
                "dead-rows",
                name,
                dead[0],
                f"{len(dead)} row(s) no load needs (seqs {ids_text(dead)})"
                + (f", {garbled} of them undecodable" if garbled else "")
                + "; the first batch after a load deletes them",
                tuple(dead),
            )
        )
    summary = TableSummary(name, journal, len(scan.light), needed, len(loaded.records))
    return summary, findings, live_large


def _read(engine: Engine, table: sa.Table, journal: str, feeder: RowReplay) -> _Scan:
    """Stream ``table`` in ``seq`` order (the load's query) through ``feeder``, checking each
    row's body on the way."""
    scan = _Scan()
    is_live = feeder.replayer.is_live
    with engine.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=2000).execute(
            load_select(table)
        )
        for id, rt, txid, urt, record, txdata, seq in result:
            seq, id, rt, txid, urt = int(seq), int(id), int(rt), int(txid), int(urt)
            data = bytes(record) if record is not None else b""
            xid = bytes(txdata) if txdata is not None else None
            scan.last = seq
            scan.light.append((seq, id, rt, txid))
            _check_body(scan, journal, seq, id, rt, txid, urt, data, xid)
            if rt == api.UPDATE and not is_live(id):
                scan.orphans.append((seq, id, urt))
            try:
                feeder.feed(((id, rt, txid, urt, data, xid, seq),))
            except CorruptionError:  # the load refuses the table at this row
                scan.bad_types.append((seq, rt))
        conn.rollback()
    return scan


def _check_body(
    scan: _Scan,
    journal: str,
    seq: int,
    id: int,
    rt: int,
    txid: int,
    urt: int,
    data: bytes,
    xid: bytes | None,
) -> None:
    """Decode a record row's body (or a prepare's XID) as the storage manager would."""
    if rt in _RECORD_ROWS:
        decode = _decoder(journal, urt, rt)
        if decode is None:
            scan.unknown.setdefault(urt, []).append(seq)
            return
        try:
            decode(data, id)
        except (ValueError, StoreError) as exc:
            scan.undecodable[seq] = f"record {id} (type {urt}): {exc}"
    elif rt == api.PREPARE and journal == "messages":
        try:
            r.decode_xid(xid if xid is not None else b"")
        except ValueError as exc:
            scan.undecodable[seq] = f"prepare of transaction {txid}: XID: {exc}"


def _decoder(journal: str, urt: int, rt: int) -> Callable[[bytes, int], object] | None:
    """The storage manager's decoder of a ``journal`` record of user type ``urt`` (None for a
    type it does not know)."""
    update = rt in (api.UPDATE, api.UPDATE_TX)
    if journal == "bindings":
        simple: dict[int, Any] = {
            r.ADDRESS_BINDING_RECORD: r.AddressRecord.decode,
            r.QUEUE_BINDING_RECORD: r.QueueRecord.decode,
            r.ID_COUNTER_RECORD: r.IdCounterRecord.decode,
        }
    else:
        if urt == r.ADD_MESSAGE_PROTOCOL:
            return decode_message
        if urt == r.ADD_LARGE_MESSAGE:
            return decode_large_message
        if urt in (
            PAGE_TRANSACTION,
            ACKNOWLEDGE_CURSOR,
            PAGE_CURSOR_COUNTER_VALUE,
            PAGE_CURSOR_COUNTER_INC,
            PAGE_CURSOR_COMPLETE,
            PAGE_CURSOR_PENDING_COUNTER,
        ):
            return lambda data, _id: decode_page_record(urt, data, update=update)
        simple = {
            r.ADD_REF: r.RefRecord.decode,
            r.ACKNOWLEDGE_REF: r.AckRecord.decode,
            r.UPDATE_DELIVERY_COUNT: r.DeliveryCountRecord.decode,
            r.SET_SCHEDULED_DELIVERY_TIME: r.ScheduledTimeRecord.decode,
            r.DUPLICATE_ID: r.DuplicateIdRecord.decode,
        }
    decode = simple.get(urt)
    return None if decode is None else (lambda data, _id: decode(data))


def _judge_rows(
    scan: _Scan, index: RowIndex, failed: set[int], name: str, findings: list[DbFinding]
) -> tuple[int, dict[int, list[int]], list[int]]:
    """Sort the rows (bad ones left out) into needed, uncommitted (by transaction) and dead by
    the row index's rule; an undecodable needed row is an error, appended to ``findings``."""
    bad = {seq for seq, _rt in scan.bad_types}
    uncommitted: dict[int, list[int]] = {}
    dead: list[int] = []
    needed = 0
    for seq, id, rt, txid in scan.light:
        if seq in bad:
            continue
        if index.row_needed(seq, id, rt, txid):
            needed += 1
            if seq in scan.undecodable:
                findings.append(
                    DbFinding(
                        ERROR,
                        "undecodable",
                        name,
                        seq,
                        f"{scan.undecodable[seq]} (the storage manager's load refuses it)",
                        (seq,),
                        (id,),
                    )
                )
        elif rt in _TX_ROWS and txid in failed:
            uncommitted.setdefault(txid, []).append(seq)
        else:
            dead.append(seq)
    return needed, uncommitted, dead


def _unknown_types(scan: _Scan, gone: set[int], name: str) -> list[DbFinding]:
    """The rows a load keeps whose user record type the storage manager does not know."""
    found = []
    for urt, seqs in sorted(scan.unknown.items()):
        live = [s for s in seqs if s not in gone]
        if live:
            found.append(
                DbFinding(
                    WARNING,
                    "unknown-user-record-type",
                    name,
                    live[0],
                    f"{len(live)} row(s) of user record type {urt}, which the storage "
                    "manager does not know (a load logs and keeps them)",
                    tuple(live),
                )
            )
    return found


def _uncommitted(uncommitted: dict[int, list[int]], name: str) -> list[DbFinding]:
    return [
        DbFinding(
            WARNING,
            "uncommitted-transaction",
            name,
            seqs[0],
            f"transaction {txid}: {len(seqs)} row(s) never committed, rolled back or "
            "prepared (a crash); a load drops them and deletes them",
            tuple(seqs),
            (txid,),
        )
        for txid, seqs in uncommitted.items()
    ]


def _orphans(scan: _Scan, journal: str, name: str) -> list[DbFinding]:
    """UPDATE rows of ids no ADD made live: the message journal's ref updates (ignored by the
    storage manager, removed by repair) apart from the others (kept)."""
    refs = [(s, i) for s, i, urt in scan.orphans if journal == "messages" and urt in _REF_UPDATES]
    ref_seqs = {s for s, _i in refs}
    others = [(s, i) for s, i, _u in scan.orphans if s not in ref_seqs]
    found = []
    if refs:
        found.append(
            DbFinding(
                WARNING,
                "update-without-add",
                name,
                refs[0][0],
                f"{len(refs)} UPDATE row(s) of message ids no ADD made live (ids "
                f"{ids_text([i for _s, i in refs])}): the storage manager ignores them",
                tuple(s for s, _i in refs),
                tuple(i for _s, i in refs),
            )
        )
    if others:
        found.append(
            DbFinding(
                WARNING,
                "update-without-add",
                name,
                others[0][0],
                f"{len(others)} UPDATE row(s) of ids no ADD made live (ids "
                f"{ids_text([i for _s, i in others])}): a load keeps them as "
                "entries; not removed by repair",
                (),
            )
        )
    return found
