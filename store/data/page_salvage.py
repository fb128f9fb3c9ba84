"""``store data repair --salvage`` on the page stores: every damaged page record whose extent
is known (:func:`store.paging.format.damaged_records`) is mended or replaced, and only it;
every other message of the address stays and is delivered in order (:func:`salvage_pages`):

- a record whose start byte or length alone is damaged (its checksum, which covers the length
  and the payload, verifies with the header the bytes up to the next valid record give) is
  **mended**: its header is written again and its message is kept, nothing dropped;
- a record whose payload or checksum is damaged (a flipped byte: what one bad sector or one
  stray write leaves) is replaced by a record of the same length that no queue receives;
- damage across a header and more, up to the next valid record, is replaced the same way by
  as many records as it held, which the page summary of the last clean close tells (its
  record count for that page, trusted only at the page's length); without a summary that
  count is unknown and the salvage refuses the page;
- a whole record of a large message whose body is gone (the load refuses the store for it,
  :mod:`store.messaging.loader`), that some queue may still receive (visible: sent outside a
  transaction or in one committed or prepared; routed to a queue that neither acknowledged
  it nor completed its page), is replaced the same way: the message is dropped, as the body
  salvage drops a queued one (:mod:`store.data.body_salvage`).

Why a replacement and not a removal: a paged message is known by its position (page, index)
— the cursor acknowledgements in the message journal name positions — so removing a record
would shift every later index of the page onto another message, and a page's length is in
its manifest. The replacement is a paged message routed to no queue (never delivered, never
waited for), of exactly the damaged record's length, so the indexes and lengths stay true.

What the salvage does for each damaged record (the store opened, its lock held):

0. The address's page summary is deleted, before anything else changes (it describes the
   pages as they were; without it the next load reads the pages);
1. The damaged bytes are kept: the file store copies them to
   ``<paging-directory>/attic/<folder>-<page>-<offset>.record`` first (a database store
   has no attic; the report holds what the record's header still reads);
2. the message journal's cursor acknowledgements of that position are deleted, durably (they
   belonged to the message that is gone; kept, they would count toward the page's completion
   as if a message still there had been acknowledged);
3. the record is overwritten in place, durably. A crash anywhere before leaves the record
   damaged, and the salvage run again finishes the work; after, nothing is left to do.

A mended record goes through steps 0, 1 and 3 (its header rewritten), not 2. The report
names each replaced stretch: page, offset, what was wrong, how many records it held, and the
message id its header still reads (unverified: the header may be what is damaged), and each
mended record. Damage whose record count is unknown is refused as CorruptionError naming the
page and offset (nothing of that page changed). On a file store's last page, a torn tail past
its last durable write (what a crash leaves, and what open cuts silently) is not damage and
is left to open.

Thread-safety: each call works alone on its store, under the store lock.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Hashable
from dataclasses import dataclass

from store.config import StoreConfig
from store.errors import ConfigError, CorruptionError, StoreLockedError
from store.journal.api import PreparedTransaction, RecordInfo
from store.messaging.message_records import PagedMessage, encode_message
from store.messaging.page_records import (
    ACKNOWLEDGE_CURSOR,
    PAGE_CURSOR_COMPLETE,
    PAGE_TRANSACTION,
    CursorAck,
    PageComplete,
    PageTransaction,
    decode_page_record,
)
from store.messaging.page_summary import decode_summary
from store.messaging.records import QUEUE_BINDING_RECORD, QueueRecord
from store.messaging.values import Message
from store.paging.base import PageBackend
from store.paging.files import ATTIC, FilePageBackend
from store.paging.format import (
    FRAMING,
    DamagedRecord,
    damaged_records,
    encode_record,
    page_binding,
    scan_page,
)
from store.paging.repair import ERROR, PageFinding, page_backend
from store.store import Store, open_store

__all__ = ["LOST_BODY", "PageSalvageReport", "ReplacedRecord", "lost_paged_bodies", "salvage_pages"]

#: What the findings and the report say of a paged large message whose body is gone.
LOST_BODY = "the body of its large message {} is gone"

_PAGED_HEAD = struct.Struct(">Bqq")  # version, message id, tx id: what a header still reads


@dataclass(frozen=True, slots=True)
class ReplacedRecord:
    """Damaged bytes of a page the salvage replaced (or mended, in
    :attr:`PageSalvageReport.mended`): where, why, what its header still reads
    (``message_id``, None when not even that decodes), the cursor acks deleted, where its
    bytes were kept (None: a database store), and how many records they held. Immutable."""

    address: str
    page: int
    index: int
    offset: int
    length: int
    problem: str
    message_id: int | None
    acks_deleted: int
    kept_in: str | None
    records: int = 1


@dataclass(frozen=True, slots=True)
class PageSalvageReport:
    """What :func:`salvage_pages` did: ``pages`` read, ``replaced`` stretches (their messages
    dropped), ``mended`` records (a header written again, the message kept). Immutable."""

    pages: int
    replaced: tuple[ReplacedRecord, ...] = ()
    mended: tuple[ReplacedRecord, ...] = ()

    @property
    def changed(self) -> bool:
        """True when the salvage changed the store."""
        return bool(self.replaced or self.mended)

    @property
    def dropped(self) -> int:
        """The paged messages the replacements dropped."""
        return sum(r.records for r in self.replaced)


def salvage_pages(config: StoreConfig) -> PageSalvageReport:
    """Replace every damaged page record of ``config``'s page stores that can be replaced one
    for one (module docstring). Returns the report. Raises CorruptionError for damage it
    cannot replace (nothing of that page changed; earlier pages' replacements are done and
    durable), StoreLockedError naming the holder, StoreIOError / StoreUnavailableError."""
    store = open_store(config)
    try:
        queues, acks, reader = _state(store)
        with page_backend(config) as backend:
            pages = 0
            replaced: list[ReplacedRecord] = []
            mended: list[ReplacedRecord] = []
            for address, locator in sorted(backend.survey().stores.items()):
                mine = {qid for qid, a in queues.items() if a == address}
                counts = _summary_counts(backend, locator)
                summary_kept = True
                numbers = backend.page_numbers(locator)
                for page in numbers:
                    data = backend.read_bytes(locator, page)
                    if data is None:
                        continue
                    pages += 1
                    path, _label = backend.page_path(locator, page)
                    bound = page_binding(address, page)
                    held = counts.get((page, len(data)))
                    if backend.torn_tails and page == numbers[-1]:
                        data = data[: _durable_end(backend, locator, page, data, path, bound)]
                    found = damaged_records(data, path=path, binding=bound, records=held)
                    if not found:  # a whole page: its large messages whose bodies are gone
                        found = reader.lost_bodies(data, page, mine)
                    for bad in found:
                        if summary_kept:  # the summary goes first (a crash on)
                            backend.write_summary(locator, None)
                            summary_kept = False
                        raw = data[bad.offset : bad.offset + bad.length]
                        kept = _keep(backend, locator, config, page, bad.offset, raw)
                        if bad.header is not None:  # only its header: mend it, keep it all
                            backend.overwrite(locator, page, bad.offset, bad.header)
                            mended.append(
                                ReplacedRecord(
                                    address, page, bad.index, bad.offset, bad.length,
                                    bad.problem, _message_id(raw), 0, kept,
                                )
                            )  # fmt: skip
                            continue
                        placeholder = _placeholders(address, raw, bound, bad.records)
                        doomed = [
                            rid
                            for qid in sorted(mine)
                            for index in range(bad.index, bad.index + bad.records)
                            for rid in acks.get((qid, page, index), [])
                        ]
                        for rid in doomed:  # before the record: a crash between, run again
                            store.messages.append_delete(rid)
                        store.messages.flush()
                        backend.overwrite(locator, page, bad.offset, placeholder)
                        replaced.append(
                            ReplacedRecord(
                                address, page, bad.index, bad.offset, bad.length, bad.problem,
                                _message_id(raw) if bad.records == 1 else None,
                                len(doomed), kept, bad.records,
                            )
                        )  # fmt: skip
        return PageSalvageReport(pages, tuple(replaced), tuple(mended))
    finally:
        store.close()


def lost_paged_bodies(config: StoreConfig) -> list[PageFinding]:
    """For ``store data verify``: each page record of a large message some queue may still
    receive whose body is gone (what the salvage replaces; module docstring), on every whole
    page, as an error naming the page and the record's offset. The store is opened read-only;
    a store whose message journal cannot be loaded (its own finding) or that another process
    holds is left to the other checks (no finding here). Raises StoreIOError /
    StoreUnavailableError."""
    with page_backend(config) as backend:
        if not backend.survey().stores:
            return []  # nothing paged: no journal to load for it
    try:
        store = open_store(config, read_only=True)
    except StoreLockedError:
        return []
    out: list[PageFinding] = []
    try:
        queues, _acks, reader = _state(store)
        with page_backend(config) as backend:
            for address, locator in sorted(backend.survey().stores.items()):
                mine = {qid for qid, a in queues.items() if a == address}
                for page in backend.page_numbers(locator):
                    data = backend.read_bytes(locator, page)
                    path, _label = backend.page_path(locator, page)
                    bound = page_binding(address, page)
                    try:
                        scan_page(data or b"", path=path, torn_tail=False, binding=bound)
                    except CorruptionError:
                        continue  # the page's own damage: its own finding
                    for bad in reader.lost_bodies(data or b"", page, mine):
                        message = f"page {page} of address {address!r}: {bad.problem}"
                        out.append(PageFinding(ERROR, path, bad.offset, message))
    except CorruptionError:
        return []  # a damaged journal: its own finding
    finally:
        store.close()
    return out


def _durable_end(
    backend: PageBackend, locator: Hashable, page: int, data: bytes, path: str, bound: bytes
) -> int:
    """Where the records of a file store's last page end once a torn tail (what a crash
    leaves past the last durable write, which open cuts silently) is left out: the end of
    its valid records, or the length its manifest lists when damage lies inside that (a
    record damaged after a clean close is damage, not a torn tail). Raises nothing."""
    try:
        _records, end = scan_page(data, path=path, torn_tail=True, binding=bound)
    except CorruptionError:
        return len(data)  # a valid record follows the damage: not a torn tail
    manifest = backend.manifest(locator)
    listed = manifest.expected(page) if manifest is not None else None
    return max(end, min(listed[0], len(data))) if listed is not None else end


def _queue_addresses(store: Store) -> dict[int, str]:
    """Every queue id of the bindings journal with its address."""
    return {
        rec.id: QueueRecord.decode(rec.data).address
        for rec in store.bindings.load().records
        if not rec.is_update and rec.user_record_type == QUEUE_BINDING_RECORD
    }


class _Needed:
    """What decides whether a page record's message may still be received: the queues that
    exist, their acks and completed pages, the visible page transactions, the bodies present
    (set by the caller)."""

    def __init__(
        self,
        acks: dict[tuple[int, int, int], list[int]],
        completes: set[tuple[int, int]],
        visible: set[int],
    ) -> None:
        self.acks = acks
        self.completes = completes
        self.visible = visible
        self.bodies: set[int] = set()

    def lost_bodies(self, data: bytes, page: int, mine: set[int]) -> list[DamagedRecord]:
        """The records of the whole page ``data`` (page ``page``; ``mine``: its address's
        queue ids) of large messages some queue may still receive whose bodies are gone."""
        out: list[DamagedRecord] = []
        offset = index = 0
        while offset < len(data):
            length = FRAMING + int.from_bytes(data[offset + 1 : offset + 5], "big")
            try:
                paged = PagedMessage.decode(data[offset + FRAMING - 1 : offset + length - 1])
            except (ValueError, struct.error):  # not a paged message: not this check's
                offset, index = offset + length, index + 1
                continue
            if (
                paged.record_type == 30
                and paged.message_id not in self.bodies
                and (paged.tx_id == 0 or paged.tx_id in self.visible)
                and any(
                    q in mine
                    and (q, page) not in self.completes
                    and (q, page, index) not in self.acks
                    for q in paged.queue_ids
                )
            ):
                problem = LOST_BODY.format(paged.message_id)
                out.append(DamagedRecord(index, offset, length, problem))
            offset += length
            index += 1
        return out


def _state(
    store: Store,
) -> tuple[dict[int, str], dict[tuple[int, int, int], list[int]], _Needed]:
    """Of ``store`` (its journals loaded here): every queue id with its address, the cursor
    acks by position, and what decides whether a paged message is still needed (the bodies
    present included)."""
    queues = _queue_addresses(store)
    loaded = store.messages.load()
    acks, reader = _cursor_state(loaded.records, loaded.prepared)
    reader.bodies = set(store.large_messages.ids())
    return queues, acks, reader


def _cursor_state(
    records: list[RecordInfo], prepared: list[PreparedTransaction]
) -> tuple[dict[tuple[int, int, int], list[int]], _Needed]:
    """The cursor acks of the message journal's committed ``records`` by (queue, page,
    index) -> record ids, and what decides whether a paged message is still needed."""
    acks: dict[tuple[int, int, int], list[int]] = {}
    completes: set[tuple[int, int]] = set()
    visible: set[int] = set()
    for rec in records:
        if rec.is_update:
            continue
        if rec.user_record_type == ACKNOWLEDGE_CURSOR:
            ack = decode_page_record(ACKNOWLEDGE_CURSOR, rec.data)
            assert isinstance(ack, CursorAck)
            acks.setdefault((ack.queue_id, ack.page, ack.index), []).append(rec.id)
        elif rec.user_record_type == PAGE_CURSOR_COMPLETE:
            done = decode_page_record(PAGE_CURSOR_COMPLETE, rec.data)
            assert isinstance(done, PageComplete)
            completes.add((done.queue_id, done.page))
        elif rec.user_record_type == PAGE_TRANSACTION:
            ptx = decode_page_record(PAGE_TRANSACTION, rec.data)
            assert isinstance(ptx, PageTransaction)
            visible.add(ptx.transaction_id)
    for tx in prepared:
        visible.add(tx.tx_id)  # a prepared transaction's paged sends may still commit
        for rec in tx.records:
            if rec.user_record_type == PAGE_TRANSACTION and not rec.is_update:
                ptx = decode_page_record(PAGE_TRANSACTION, rec.data)
                assert isinstance(ptx, PageTransaction)
                visible.add(ptx.transaction_id)
    return acks, _Needed(acks, completes, visible)


def _summary_counts(backend: PageBackend, locator: Hashable) -> dict[tuple[int, int], int]:
    """(page, length) -> records, from the store's page summary (empty: none, or one that
    does not decode). A count is trusted only for a page of the length it lists."""
    data = backend.read_summary(locator)
    try:
        known = decode_summary(data) if data is not None else {}
    except ValueError:
        return {}
    return {(page, p.length): p.records for page, p in known.items()}


def _placeholders(address: str, damaged: bytes, binding: bytes, count: int) -> bytes:
    """``count`` framed page records of ``len(damaged)`` bytes in all, bound to ``binding``
    (their page): paged messages to ``address`` routed to no queue, the first with the
    damaged header's message id where one record is replaced. Raises ConfigError when the
    damaged bytes are too short for as many paged messages (they cannot have been)."""
    mid = (_message_id(damaged) or 0) if count == 1 else 0
    empty = Message(address, b"")

    def paged(body: int) -> bytes:
        record = encode_message(empty, bytes(body))
        return PagedMessage(mid, 0, 45, record, ()).encode()

    smallest = len(paged(0)) + FRAMING
    if len(damaged) < count * smallest:
        raise ConfigError(
            f"damaged page bytes ({len(damaged)}) are too few for the {count} paged "
            "message(s) they held",
            key="--salvage",
        )
    out = b"".join(encode_record(paged(0), binding) for _ in range(count - 1))
    out += encode_record(paged(len(damaged) - len(out) - smallest), binding)
    assert len(out) == len(damaged), (len(out), len(damaged))
    return out


def _message_id(damaged: bytes) -> int | None:
    """The message id the damaged record's header reads (unverified), or None."""
    try:
        _version, mid, _tx = _PAGED_HEAD.unpack_from(damaged, FRAMING - 1)
    except struct.error:
        return None
    return int(mid)


def _keep(
    backend: PageBackend,
    locator: Hashable,
    config: StoreConfig,
    page: int,
    offset: int,
    raw: bytes,
) -> str | None:
    """Copy the damaged record's bytes to the paging directory's attic (file store);
    returns the file, None on a database store."""
    if not isinstance(backend, FilePageBackend):
        return None
    attic = os.path.join(config.paging_directory, ATTIC)
    backend.fs.makedirs(attic)
    folder = os.path.basename(backend.store_path(locator))
    target = os.path.join(attic, f"{folder}-{page}-{offset}.record")
    backend.write_named(attic, os.path.basename(target), raw)
    return target
