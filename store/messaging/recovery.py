"""Replaying the two journals' loads into what the storage manager rebuilds (reference §3.2,
§3.7), and the :class:`Recovery` a ``load()`` returns.

Order of a recovery (the storage manager drives it):

1. bindings journal (:func:`replay_bindings`): addresses (44), queues (21), id counters (24);
2. the id generator, past every id either journal holds;
3. message journal (:func:`replay_messages`), record by record in journal order: a message
   (45) starts with no queue; ADD_REF (32) routes it to a queue, in the order the refs were
   written (a transaction's at its commit), which is the order the queue delivers them again;
   ACKNOWLEDGE_REF (33) removes that ref; UPDATE_DELIVERY_COUNT (34) and
   SET_SCHEDULED_DELIVERY_TIME (36) patch it; DUPLICATE_ID (37) feeds the address's cache.
   A ref is replayed straight into the :class:`~store.messaging.queues.QueueEntry` its queue
   will hold, numbered in ADD_REF order, and each queue's entries are listed in that order as
   they come (:attr:`MessagesState.queue_entries`): a load of a million messages then makes
   one object per ref instead of three, and needs no second pass to order them;
4. prepared transactions: their sends stay invisible, their acks hold the messages;
5. the sweep: a message none of whose refs names an existing queue is deleted and counted in
   ``Recovery.cleaned["messages"]``; duplicate ids beyond a cache's size are deleted
   (``"duplicate_ids"``); id counters but the newest (``"id_counters"``).

Page transactions (35, the ADD), cursor acks (39) and page completions (42) are collected for
:mod:`store.messaging.pager_load`, which rebuilds the cursors from them; the other page records
(35's UPDATE, 40, 41, 43) are not written by this version and are left alone, as is a record
type nobody knows (logged).

A record whose body does not decode is a :class:`~store.errors.CorruptionError` whose ``path``
names the journal and whose ``offset`` is the record id.

Thread-safety: pure functions over load results; :class:`Recovery` is a plain value.
"""

from __future__ import annotations

import itertools
import logging
import struct
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from store.errors import CorruptionError
from store.journal.api import LoadResult, RecordInfo
from store.messaging import records as r
from store.messaging.codec import VERSION
from store.messaging.message_records import (
    COMPILED_PEEK,
    MessageHeader,
    decode_large_message,
    decode_message,
    peek_message,
)
from store.messaging.page_records import (
    ACKNOWLEDGE_CURSOR,
    PAGE_CURSOR_COMPLETE,
    PAGE_CURSOR_COUNTER_INC,
    PAGE_CURSOR_COUNTER_VALUE,
    PAGE_CURSOR_PENDING_COUNTER,
    PAGE_TRANSACTION,
    CursorAck,
    PageComplete,
    PageTransaction,
    decode_page_record,
)
from store.messaging.queues import READY, QueueEntry
from store.messaging.values import AddressInfo, Message, QueueInfo, Xid
from store.speedups import SPEEDUPS

if TYPE_CHECKING:
    from store.messaging.transactions import Transaction

__all__ = [
    "BindingsState",
    "LoadedMessage",
    "MessagesState",
    "PreparedState",
    "Progress",
    "Recovery",
    "progress_every",
    "replay_bindings",
    "replay_messages",
]

log = logging.getLogger(__name__)

#: A progress callback: ``(phase, done, total)``; phases "bindings", "messages", "queues".
Progress = Callable[[str, int, int], None]

#: Records between two progress lines (and ``progress`` calls) of a phase.
_PROGRESS_EVERY = 100_000
_PAGE_TYPES = frozenset(
    {
        PAGE_TRANSACTION,
        ACKNOWLEDGE_CURSOR,
        PAGE_CURSOR_COUNTER_VALUE,
        PAGE_CURSOR_COUNTER_INC,
        PAGE_CURSOR_COMPLETE,
        PAGE_CURSOR_PENDING_COUNTER,
    }
)
T = TypeVar("T")


def progress_every() -> int:
    """Records between two progress lines of a phase (:data:`_PROGRESS_EVERY`, read when
    called: tests lower it). Raises nothing."""
    return _PROGRESS_EVERY


@dataclass
class Recovery:
    """What ``StorageManager.load()`` rebuilt.

    ``prepared`` maps each XID prepared before the stop to its transaction, to be committed or
    rolled back; ``messages`` counts the messages recovered (paged ones included);
    ``cleaned`` maps what the load swept to how many, empty when nothing was: "messages" (no
    existing queue holds them), "duplicate_ids" (past a cache's size), "id_counters" (older
    counter records), "page_cursors" (cursor records of pages or queues that are gone),
    "page_transactions" (PAGE_TRANSACTION records of pages that are gone), "pages" (pages no
    existing queue still needs), "large_bodies" (bodies no message refers to).
    ``dead_lettered`` and ``expired`` count, by original address, the messages in memory that
    a dead-letter or expiry move put where they wait (their ``_AMQ_ORIG_ADDRESS``; a paged one
    is not read at load, so not counted; :mod:`store.messaging.policies`).
    """

    addresses: dict[str, AddressInfo]
    queues: dict[str, QueueInfo]
    prepared: dict[Xid, Transaction]
    messages: int
    cleaned: dict[str, int] = field(default_factory=dict)
    dead_lettered: dict[str, int] = field(default_factory=dict)
    expired: dict[str, int] = field(default_factory=dict)


def _decode(journal: str, rec: RecordInfo, decode: Callable[[bytes], T]) -> T:
    try:
        return decode(rec.data)
    except ValueError as exc:
        raise CorruptionError(
            f"{journal} journal",
            rec.id,
            f"record {rec.id} (type {rec.user_record_type}): {exc}",
            hint="the offset is the record id; `store data print` shows the record",
        ) from exc


def _report(
    progress: Progress | None,
    phase: str,
    done: int,
    total: int,
    *,
    messages: int = -1,
    started: float | None = None,
) -> None:
    """Every :data:`_PROGRESS_EVERY` records of a phase, and at its end: one INFO line, as
    KahaDB's recovery says what it is doing (records done of the total, messages found so far
    when known, seconds since the load began), and a call of ``progress``."""
    if done % _PROGRESS_EVERY == 0 or done == total:
        elapsed = 0.0 if started is None else time.monotonic() - started
        log.info(
            "messaging load: phase=%s done=%d total=%d messages=%d elapsed=%.2fs",
            phase,
            done,
            total,
            messages,
            elapsed,
        )
        if progress is not None:
            progress(phase, done, total)


@dataclass
class BindingsState:
    """The replayed bindings journal."""

    addresses: dict[str, tuple[int, AddressInfo]] = field(default_factory=dict)
    queues: dict[str, QueueInfo] = field(default_factory=dict)
    counters: list[tuple[int, r.IdCounterRecord]] = field(default_factory=list)
    highest_id: int = 0


def replay_bindings(
    load: LoadResult, progress: Progress | None = None, *, started: float | None = None
) -> BindingsState:
    """Replay the bindings journal's load; returns its addresses, queues and counters.
    ``started`` (``time.monotonic()`` when the load began) dates the progress lines.
    Raises CorruptionError for a record that does not decode."""
    state = BindingsState()
    total = len(load.records)
    for done, rec in enumerate(load.records, 1):
        state.highest_id = max(state.highest_id, rec.id)
        kind = rec.user_record_type
        if kind == r.ADDRESS_BINDING_RECORD:
            a = _decode("bindings", rec, r.AddressRecord.decode)
            state.addresses[a.name] = (rec.id, AddressInfo(a.name, a.routing_types))
        elif kind == r.QUEUE_BINDING_RECORD:
            q = _decode("bindings", rec, r.QueueRecord.decode)
            state.queues[q.name] = QueueInfo(rec.id, q.name, q.address, q.routing_type, q.filter)
        elif kind == r.ID_COUNTER_RECORD:
            state.counters.append((rec.id, _decode("bindings", rec, r.IdCounterRecord.decode)))
        else:
            log.warning("bindings journal: record %d has unknown type %d, kept", rec.id, kind)
        _report(progress, "bindings", done, total, started=started)
    for tx in load.prepared:
        state.highest_id = max(state.highest_id, tx.tx_id, *(x.id for x in tx.records))
    state.highest_id = max(state.highest_id, *load.failed, 0)
    return state


@dataclass(slots=True, eq=False)
class LoadedMessage:
    """A message and its refs (queue id -> the entry the queue will hold), as the journal
    left them.

    An ADD_MESSAGE_PROTOCOL record without properties is not decoded at load: ``message`` is
    None, ``header`` holds what the load needs and ``encoded`` the checked record body
    (:func:`~store.messaging.message_records.peek_message`), decoded when first used.
    """

    message: Message | None
    large_size: int | None  # None: body inline
    size: int = 0  # the record's size: what the message counts against its address's limit
    refs: dict[int, QueueEntry] = field(default_factory=dict)
    message_id: int = 0
    header: MessageHeader | None = None
    encoded: bytes | None = None

    @property
    def address(self) -> str:
        """The message's address. Raises nothing."""
        return self.header.address if self.message is None else self.message.address  # type: ignore[union-attr]

    @property
    def priority(self) -> int:
        """The message's priority. Raises nothing."""
        return self.header.priority if self.message is None else self.message.priority  # type: ignore[union-attr]

    @property
    def scheduled_delivery(self) -> int:
        """The message's scheduled delivery time (0: at once). Raises nothing."""
        if self.message is None:
            return self.header.scheduled_delivery  # type: ignore[union-attr]
        return self.message.scheduled_delivery


@dataclass
class PreparedState:
    """A prepared transaction's contents."""

    tx_id: int
    xid: Xid
    sends: list[tuple[LoadedMessage, list[int]]] = field(default_factory=list)
    acks: list[tuple[int, int]] = field(default_factory=list)  # (message id, queue id)
    dups: list[tuple[str, bytes, int]] = field(default_factory=list)  # address, dup, record id
    cursor_acks: list[tuple[int, CursorAck]] = field(default_factory=list)  # record id, ack
    page_tx_record: int | None = None  # its PAGE_TRANSACTION record, when it paged messages


@dataclass
class MessagesState:
    """The replayed message journal."""

    messages: dict[int, LoadedMessage] = field(default_factory=dict)
    #: Queue id -> the entries of its refs in ADD_REF order (``QueueEntry.order`` counts the
    #: refs from 1). A list may also hold entries no longer current, of queues in ``stale``.
    queue_entries: defaultdict[int, list[QueueEntry]] = field(
        default_factory=lambda: defaultdict(list)
    )
    #: Queues whose lists hold an entry acknowledged, routed again, or of a message replaced:
    #: the current ones are those their message's ``refs`` name.
    stale: set[int] = field(default_factory=set)
    #: The refs' orders; the storage manager numbers its own sends on from it.
    orders: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    dups: list[tuple[int, r.DuplicateIdRecord]] = field(default_factory=list)
    prepared: list[PreparedState] = field(default_factory=list)
    cursor_acks: list[tuple[int, CursorAck]] = field(default_factory=list)
    completes: list[tuple[int, PageComplete]] = field(default_factory=list)
    #: Committed page transactions: transaction id -> PAGE_TRANSACTION record id.
    page_txs: dict[int, int] = field(default_factory=dict)
    highest_id: int = 0


def _message_of(rec: RecordInfo, addresses: dict[bytes, str]) -> LoadedMessage | None:
    if rec.user_record_type == r.ADD_MESSAGE_PROTOCOL:
        header = peek_message(rec.data, addresses)
        if header is not None:
            return LoadedMessage(None, None, len(rec.data), {}, rec.id, header, rec.data)
        m = _decode("messages", rec, lambda d: decode_message(d, rec.id))
        return LoadedMessage(m, None, len(rec.data), {}, rec.id)
    if rec.user_record_type == r.ADD_LARGE_MESSAGE:
        m, size = _decode("messages", rec, lambda d: decode_large_message(d, rec.id))
        return LoadedMessage(m, size, len(rec.data), {}, rec.id)
    return None


_I64 = struct.Struct(">q")

#: The compiled loop of :func:`replay_messages` (``store/_speedups_load.c``, its inline code
#: the reference), or None.
COMPILED_RUN: Callable[..., tuple[int, int]] | None = getattr(SPEEDUPS, "replay_message_run", None)


def _ref_queue_id(rec: RecordInfo) -> int:
    """The queue id of an ADD_REF record (as RefRecord.decode, without its objects). Raises
    CorruptionError for a bad body."""
    data = rec.data
    if len(data) == 9 and data[0] == VERSION:
        qid: int = _I64.unpack_from(data, 1)[0]
        return qid
    return _decode("messages", rec, r.RefRecord.decode).queue_id


def _decode_cursor_ack(data: bytes) -> CursorAck:
    ack = decode_page_record(ACKNOWLEDGE_CURSOR, data)
    assert isinstance(ack, CursorAck)
    return ack


def _decode_page_tx(data: bytes) -> PageTransaction:
    record = decode_page_record(PAGE_TRANSACTION, data)
    assert isinstance(record, PageTransaction)
    return record


def _decode_page_complete(data: bytes) -> PageComplete:
    done = decode_page_record(PAGE_CURSOR_COMPLETE, data)
    assert isinstance(done, PageComplete)
    return done


def _route(state: MessagesState, target: LoadedMessage, queue_id: int) -> None:
    """ADD_REF of ``target`` to ``queue_id``: its entry, numbered next, at the end of the
    queue's list (a ref routed again replaces the earlier one, whose queue is then stale)."""
    refs = target.refs
    if queue_id in refs:
        state.stale.add(queue_id)
    entry = QueueEntry(
        target.message_id,
        target.priority,
        next(state.orders),
        0,
        target.scheduled_delivery,
        READY,
    )
    refs[queue_id] = entry
    state.queue_entries[queue_id].append(entry)


def _add_message(state: MessagesState, loaded: LoadedMessage) -> None:
    """A message record: a message recorded again under the same id replaces the earlier one,
    whose refs go stale."""
    earlier = state.messages.get(loaded.message_id)
    if earlier is not None:
        state.stale.update(earlier.refs)
    state.messages[loaded.message_id] = loaded


def _apply(state: MessagesState, rec: RecordInfo, addresses: dict[bytes, str]) -> None:
    kind = rec.user_record_type
    if kind == r.ADD_REF:  # the most frequent record: first
        qid = _ref_queue_id(rec)
        target = state.messages.get(rec.id)
        if target is not None:
            _route(state, target, qid)
        return
    loaded = _message_of(rec, addresses)
    if loaded is not None:
        _add_message(state, loaded)
        return
    if kind == r.DUPLICATE_ID:
        state.dups.append((rec.id, _decode("messages", rec, r.DuplicateIdRecord.decode)))
        return
    if kind == ACKNOWLEDGE_CURSOR:
        state.cursor_acks.append((rec.id, _decode("messages", rec, _decode_cursor_ack)))
        return
    if kind == PAGE_CURSOR_COMPLETE:
        state.completes.append((rec.id, _decode("messages", rec, _decode_page_complete)))
        return
    if kind == PAGE_TRANSACTION and not rec.is_update:
        state.page_txs[_decode("messages", rec, _decode_page_tx).transaction_id] = rec.id
        return
    if kind in _PAGE_TYPES:
        return
    target = state.messages.get(rec.id)
    if kind == r.ACKNOWLEDGE_REF:
        qid = _decode("messages", rec, r.AckRecord.decode).queue_id
        if target is not None and target.refs.pop(qid, None) is not None:
            state.stale.add(qid)
    elif kind == r.UPDATE_DELIVERY_COUNT:
        dc = _decode("messages", rec, r.DeliveryCountRecord.decode)
        if target is not None and dc.queue_id in target.refs:
            target.refs[dc.queue_id].delivery_count = dc.count
    elif kind == r.SET_SCHEDULED_DELIVERY_TIME:
        st = _decode("messages", rec, r.ScheduledTimeRecord.decode)
        if target is not None and st.queue_id in target.refs:
            target.refs[st.queue_id].scheduled = st.time
    else:
        log.warning("messages journal: record %d has unknown type %d, kept", rec.id, kind)


def _prepared(
    tx_records: list[RecordInfo], tx_id: int, xid_data: bytes, addresses: dict[bytes, str]
) -> PreparedState:
    try:
        xid = r.decode_xid(xid_data)
    except ValueError as exc:
        raise CorruptionError(
            "messages journal", tx_id, f"prepared transaction {tx_id}: {exc}"
        ) from exc
    state = PreparedState(tx_id, xid)
    sends: dict[int, tuple[LoadedMessage, list[int]]] = {}
    for rec in tx_records:
        kind = rec.user_record_type
        loaded = _message_of(rec, addresses)
        if loaded is not None:
            sends[rec.id] = (loaded, [])
            state.sends.append(sends[rec.id])
        elif kind == r.ADD_REF and rec.id in sends:
            sends[rec.id][1].append(_decode("messages", rec, r.RefRecord.decode).queue_id)
        elif kind == r.ACKNOWLEDGE_REF:
            state.acks.append((rec.id, _decode("messages", rec, r.AckRecord.decode).queue_id))
        elif kind == r.DUPLICATE_ID:
            d = _decode("messages", rec, r.DuplicateIdRecord.decode)
            state.dups.append((d.address, d.dup_id, rec.id))
        elif kind == ACKNOWLEDGE_CURSOR:
            ack = _decode("messages", rec, _decode_cursor_ack)
            state.cursor_acks.append((rec.id, ack))
        elif kind == PAGE_TRANSACTION and not rec.is_update:
            _decode("messages", rec, _decode_page_tx)
            state.page_tx_record = rec.id
        elif kind not in _PAGE_TYPES:
            log.warning("prepared transaction %d: record %d type %d ignored", tx_id, rec.id, kind)
    return state


def replay_messages(
    load: LoadResult, progress: Progress | None = None, *, started: float | None = None
) -> MessagesState:
    """Replay the message journal's load; returns messages with their refs, duplicate ids and
    prepared transactions. ``started`` (``time.monotonic()`` when the load began) dates the
    progress lines. Raises CorruptionError for a record that does not decode."""
    state = MessagesState()
    total = len(load.records)
    highest = 0
    addresses: dict[bytes, str] = {}
    messages, queue_entries, orders = state.messages, state.queue_entries, state.orders
    add_ref, add_message, ready = r.ADD_REF, r.ADD_MESSAGE_PROTOCOL, READY
    compiled_peek, header_type = COMPILED_PEEK, MessageHeader  # peek_message's, inline
    records, run, at = load.records, COMPILED_RUN, 0
    while at < total:
        end = min(total, at - at % _PROGRESS_EVERY + _PROGRESS_EVERY)
        stop = end
        if run is not None:
            # The compiled loop replays what the inline code below would, up to a record
            # it leaves to this code (one at a time, then back to it).
            at, high = run(
                records, at, end, messages, queue_entries, orders, addresses, header_type,
                VERSION, add_ref, add_message, LoadedMessage, QueueEntry, ready,
            )  # fmt: skip
            highest = max(highest, high)
            stop = min(end, at + 1)
        for i in range(at, stop):
            mid, kind, data, _ = records[i]
            if mid > highest:
                highest = mid
            # The two records of every message inline (as _apply would), the others through it.
            if kind == add_ref and len(data) == 9 and data[0] == VERSION:
                target = messages.get(mid)
                if target is not None:
                    qid: int = _I64.unpack_from(data, 1)[0]
                    header = target.header
                    if header is None or qid in target.refs:
                        _route(state, target, qid)
                    else:  # _route, inline: (address, priority, durable, scheduled_delivery)
                        entry = QueueEntry(mid, header[1], next(orders), 0, header[3], ready)
                        target.refs[qid] = entry
                        queue_entries[qid].append(entry)
            elif (
                kind == add_message
                and mid not in messages
                and (
                    header := (
                        compiled_peek(data, addresses, header_type, VERSION)
                        if compiled_peek is not None and type(data) is bytes
                        else peek_message(data, addresses)
                    )
                )
                is not None
            ):
                messages[mid] = LoadedMessage(None, None, len(data), {}, mid, header, data)
            else:
                _apply(state, records[i], addresses)
        at = stop
        if at == end:
            _report(progress, "messages", at, total, messages=len(messages), started=started)
    for tx in load.prepared:
        state.prepared.append(_prepared(tx.records, tx.tx_id, tx.xid, addresses))
        highest = max(highest, tx.tx_id, *(x.id for x in tx.records))
    state.highest_id = max(highest, *load.failed, 0)
    return state
