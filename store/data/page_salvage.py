"""``store data repair --salvage`` on the page stores: every damaged page record whose framing
still says where it ends (a flipped byte in its payload or checksum: what one bad sector or
one stray write leaves) is replaced by a record of the same length that no queue receives,
and only it; every other message of the address stays and is delivered in order
(:func:`salvage_pages`).

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

The report names each replaced record: page, offset, what was wrong, and the message id and
queue ids its header still reads (unverified: the header may be what is damaged). Damage
that hides where the next record starts (a damaged start byte or length) is refused as
CorruptionError naming the page and offset: no one can tell how many messages it covered. On
a file store's last page, a torn tail past its last durable write (what a crash leaves, and
what open cuts silently) is not damage and is left to open.

Thread-safety: each call works alone on its store, under the store lock.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Hashable
from dataclasses import dataclass

from store.config import StoreConfig
from store.errors import ConfigError, CorruptionError
from store.messaging.message_records import PagedMessage, encode_message
from store.messaging.page_records import ACKNOWLEDGE_CURSOR, CursorAck, decode_page_record
from store.messaging.records import QUEUE_BINDING_RECORD, QueueRecord
from store.messaging.values import Message
from store.paging.base import PageBackend
from store.paging.files import ATTIC, FilePageBackend
from store.paging.format import (
    FRAMING,
    damaged_records,
    encode_record,
    page_binding,
    scan_page,
)
from store.paging.repair import page_backend
from store.store import Store, open_store

__all__ = ["PageSalvageReport", "ReplacedRecord", "salvage_pages"]

_PAGED_HEAD = struct.Struct(">Bqq")  # version, message id, tx id: what a header still reads


@dataclass(frozen=True, slots=True)
class ReplacedRecord:
    """One damaged page record the salvage replaced: where, why, what its header still
    reads (``message_id`` and ``queue_ids``, None when not even that decodes), the cursor
    acks deleted, and where its bytes were kept (None: a database store). Immutable."""

    address: str
    page: int
    index: int
    offset: int
    length: int
    problem: str
    message_id: int | None
    acks_deleted: int
    kept_in: str | None


@dataclass(frozen=True, slots=True)
class PageSalvageReport:
    """What :func:`salvage_pages` did: ``pages`` read, ``replaced`` records. Immutable."""

    pages: int
    replaced: tuple[ReplacedRecord, ...] = ()

    @property
    def changed(self) -> bool:
        """True when the salvage changed the store."""
        return bool(self.replaced)


def salvage_pages(config: StoreConfig) -> PageSalvageReport:
    """Replace every damaged page record of ``config``'s page stores that can be replaced one
    for one (module docstring). Returns the report. Raises CorruptionError for damage it
    cannot replace (nothing of that page changed; earlier pages' replacements are done and
    durable), StoreLockedError naming the holder, StoreIOError / StoreUnavailableError."""
    store = open_store(config)
    try:
        queues = _queue_addresses(store)
        loaded = store.messages.load()
        acks: dict[tuple[int, int, int], list[int]] = {}  # (queue, page, index): record ids
        for rec in loaded.records:
            if not rec.is_update and rec.user_record_type == ACKNOWLEDGE_CURSOR:
                ack = decode_page_record(ACKNOWLEDGE_CURSOR, rec.data)
                assert isinstance(ack, CursorAck)
                acks.setdefault((ack.queue_id, ack.page, ack.index), []).append(rec.id)
        with page_backend(config) as backend:
            pages = 0
            replaced: list[ReplacedRecord] = []
            for address, locator in sorted(backend.survey().stores.items()):
                mine = {qid for qid, a in queues.items() if a == address}
                before = len(replaced)
                numbers = backend.page_numbers(locator)
                for page in numbers:
                    data = backend.read_bytes(locator, page)
                    if data is None:
                        continue
                    pages += 1
                    path, _label = backend.page_path(locator, page)
                    bound = page_binding(address, page)
                    if backend.torn_tails and page == numbers[-1]:
                        data = data[: _durable_end(backend, locator, page, data, path, bound)]
                    for bad in damaged_records(data, path=path, binding=bound):
                        if len(replaced) == before:  # the summary goes first (a crash on)
                            backend.write_summary(locator, None)
                        raw = data[bad.offset : bad.offset + bad.length]
                        kept = _keep(backend, locator, config, page, bad.offset, raw)
                        placeholder = _placeholder(address, raw, bound)
                        doomed = [
                            rid
                            for qid in sorted(mine)
                            for rid in acks.get((qid, page, bad.index), [])
                        ]
                        for rid in doomed:  # before the record: a crash between, run again
                            store.messages.append_delete(rid)
                        store.messages.flush()
                        backend.overwrite(locator, page, bad.offset, placeholder)
                        replaced.append(
                            ReplacedRecord(
                                address,
                                page,
                                bad.index,
                                bad.offset,
                                bad.length,
                                bad.problem,
                                _message_id(raw),
                                len(doomed),
                                kept,
                            )
                        )
        return PageSalvageReport(pages, tuple(replaced))
    finally:
        store.close()


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


def _placeholder(address: str, damaged: bytes, binding: bytes) -> bytes:
    """A framed page record of exactly ``len(damaged)`` bytes, bound to ``binding`` (its
    page): a paged message to ``address`` routed to no queue, with the damaged header's
    message id where it reads. Raises ConfigError when the damaged record is shorter than
    any paged message (it cannot be one)."""
    payload = len(damaged) - FRAMING
    mid = _message_id(damaged) or 0
    empty = Message(address, b"")

    def paged(body: int) -> bytes:
        record = encode_message(empty, bytes(body))
        return PagedMessage(mid, 0, 45, record, ()).encode()

    base = len(paged(0))
    if payload < base:
        raise ConfigError(
            f"a damaged page record of {len(damaged)} bytes is shorter than any paged message",
            key="--salvage",
        )
    framed = encode_record(paged(payload - base), binding)
    assert len(framed) == len(damaged), (len(framed), len(damaged))
    return framed


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
