"""The storage manager (docs/messaging.md): messages, addresses, queues, acknowledgements, duplicate
detection and transactions over a store's two journals, the same code on every back-end.

Journal usage (reference §3.2; record bodies in :mod:`store.messaging.records` and
:mod:`store.messaging.message_records`):

- ``create_address`` / ``create_queue``: an ADD of 44 / 21 to the bindings journal, synced;
  ``delete_queue`` / ``delete_address``: its DELETE, synced; a deleted queue's messages are
  acknowledged (33), or deleted when no other queue holds them (as ``ack``).
- ``send``: ADD 45 (id = message id), then one UPDATE 32 per queue, then, with a duplicate id,
  ADD 37; only the last waits for durability (one ``flush`` outside the lock, so concurrent
  senders share one sync). A non-durable message writes nothing.
- ``ack``: UPDATE 33 while another queue still holds the message; the ack of its last ref
  is the DELETE of the message alone (a DELETE drops every record of its id, so an UPDATE 33
  before it would tell a load nothing; Artemis writes both). With ``sync`` the ack returns
  once that record is durable. ``cancel``: UPDATE 34 with the new count.
- transactions: the ``-tx`` forms, PREPARE with the XID in its extra data, COMMIT / ROLLBACK
  (:mod:`store.messaging.transactions`, whose Transaction carries out its own operations with
  the manager's helpers). Deletes of messages whose last ref a commit removed are
  written after the commit, outside the transaction.

What happens at ``load()`` is described in :mod:`store.messaging.recovery`.

Paging and the address-full policies (PAGE, DROP, FAIL, BLOCK) are in
:mod:`store.messaging.paging`; the manager asks it where each send goes and hands it the acks
of paged messages. A body over ``min-large-message-size`` is streamed to the large-message
store (:mod:`store.messaging.bodies`) before the lock is taken, and its message is an
ADD_LARGE_MESSAGE (30) record; the body is deleted once its message's delete is durable (a
crash in between leaves a body the next load sweeps), or with its page for a paged message.

Thread-safety: a StorageManager may be shared between threads. One lock guards the in-memory
state and orders journal appends with it; waits for durability happen outside the lock, and a
BLOCKed sender waits on a condition of that lock, released by an ack on any thread.

Size: past docs/conventions.md#13's ~600 lines, because the class's methods share one lock and
one state; what could stand alone already does (loader, recovery, transactions, paging,
queues, bodies, codecs). The next split, if it grows: addresses and queues administration.

"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from store.errors import (
    DuplicateIdError,
    JournalClosedError,
    JournalStateError,
    StoreError,
    UnknownQueueError,
    UnknownRecordError,
)
from store.messaging import records as r
from store.messaging.bodies import store_body
from store.messaging.dupcache import DuplicateIdCache
from store.messaging.ids import DEFAULT_BATCH, IdGenerator
from store.messaging.message_records import (
    PagedMessage,
    decode_message,
    encode_large_message,
    encode_message,
)
from store.messaging.paging import BLOCK, DROP, PAGE, Pager
from store.messaging.queues import MessageQueue, QueueEntry
from store.messaging.recovery import Progress, Recovery
from store.messaging.transactions import (
    Transaction,
    TransactionWork,
)
from store.messaging.values import (
    ANYCAST,
    ROUTING_TYPES,
    AddressInfo,
    Delivery,
    Message,
    QueueInfo,
    Xid,
    dup_bytes,
)
from store.paging.api import PagePosition

if TYPE_CHECKING:
    from store.store import Store

__all__ = ["StorageManager", "StoredMessage"]

log = logging.getLogger(__name__)


class StoredMessage:
    """A message the manager holds, and the queues still holding it (``refs``: queue id -> the
    message's entry on that queue; a load hands over the dict it replayed the refs into).

    Memory (issue 27): a message waiting on one queue, the common case, holds that ref as
    two slots (``_ref_queue``, the queue id, shared between messages; ``_refs``, the entry)
    instead of a dict of one item, which cost 224 bytes and its own queue-id int per
    message, about a quarter of what a waiting message cost. :attr:`refs` turns them into the
    dict the first time it is asked for (an ack, a second queue), which it stays;
    :meth:`queue_ids` and :meth:`add_ref` do not need it.

    ``size`` is what it counts against its address's limit (its record's size);
    ``position`` is set for a message read back from a page (it has no journal record).
    A recovered message may be held as its encoded ADD_MESSAGE_PROTOCOL body only
    (``encoded``, with ``message_id``; ``message`` None): it is decoded when first used
    (:attr:`message`), and the encoded body released then, so one form is held at a time.
    """

    __slots__ = (
        "_encoded",
        "_message",
        "_message_id",
        "_record",
        "_ref_queue",
        "_refs",
        "large_size",
        "position",
        "size",
    )

    def __init__(
        self,
        message: Message | None,
        refs: dict[int, QueueEntry] | None = None,
        size: int = 0,
        position: PagePosition | None = None,
        large_size: int | None = None,
        *,
        encoded: bytes | None = None,
        message_id: int | None = None,
    ) -> None:
        """``message``, or ``encoded`` (a body :func:`peek_message` accepted) and its
        ``message_id``; ``large_size`` is the size of a body kept in the large-message store,
        None for an inline body. Raises ValueError when neither form is given."""
        if message is None and (encoded is None or message_id is None):
            raise ValueError("a stored message needs its message, or its encoded body and id")
        self._message = message
        self._encoded = encoded
        self._message_id = message.message_id if message is not None else message_id
        self._refs: dict[int, QueueEntry] | QueueEntry = {} if refs is None else refs
        #: The one queue holding the message when ``_refs`` is its entry, else None.
        self._ref_queue: int | None = None
        if refs is not None and len(refs) == 1:
            ((self._ref_queue, self._refs),) = refs.items()
        self.size = size
        self.position = position
        #: The size of a body kept in the large-message store; None for an inline body.
        self.large_size = large_size
        self._record: tuple[int, bytes] | None = None

    @property
    def refs(self) -> dict[int, QueueEntry]:
        """Queue id -> this message's entry on that queue, for every queue holding it (the
        dict itself: change it to change the refs). Raises nothing."""
        qid = self._ref_queue
        if qid is not None:
            entry = self._refs
            assert isinstance(entry, QueueEntry)
            self._refs, self._ref_queue = {qid: entry}, None
        refs = self._refs
        assert isinstance(refs, dict)
        return refs

    def queue_ids(self) -> list[int]:
        """The ids of the queues holding the message (without making the refs' dict). Raises
        nothing."""
        qid = self._ref_queue
        return [qid] if qid is not None else list(self._refs)  # type: ignore[arg-type]

    def add_ref(self, qid: int, entry: QueueEntry) -> None:
        """Queue ``qid`` holds the message as ``entry``: kept in the two slots when it is the
        only ref, else in the dict. Returns None. Raises nothing."""
        if self._ref_queue is None and not self._refs:
            self._ref_queue, self._refs = qid, entry
        else:
            self.refs[qid] = entry

    def remove_ref(self, qid: int) -> bool:
        """Queue ``qid`` no longer holds the message (nothing happens if it did not); returns
        whether any queue still does. Raises nothing."""
        if self._ref_queue is not None:
            if self._ref_queue != qid:
                return True
            self._ref_queue, self._refs = None, {}
            return False
        refs = self.refs
        refs.pop(qid, None)
        return bool(refs)

    @property
    def message(self) -> Message:
        """The message, decoded from its encoded body on first use. Raises nothing (the body
        was checked when it was loaded)."""
        m = self._message
        if m is None:
            assert self._encoded is not None and self._message_id is not None
            m = self._message = decode_message(self._encoded, self._message_id)
            self._encoded = None
        return m

    def peek(self) -> Message:
        """The message, decoded from its encoded body without keeping the decoded form (a
        reader passing through, such as :meth:`StorageManager.browse`). Raises nothing."""
        if self._message is not None:
            return self._message
        assert self._encoded is not None and self._message_id is not None
        return decode_message(self._encoded, self._message_id)

    def record(self) -> tuple[int, bytes]:
        """The user record type (45 or 30) and body of this message's journal record. Raises
        ValueError when a field does not fit its slot."""
        if self._encoded is not None:
            return r.ADD_MESSAGE_PROTOCOL, self._encoded
        m = self.message
        if self.large_size is not None:
            return r.ADD_LARGE_MESSAGE, encode_large_message(m, self.large_size)
        assert isinstance(m.body, bytes)
        return r.ADD_MESSAGE_PROTOCOL, encode_message(m, m.body)

    def prepare(self) -> None:
        """Encode the journal record of a message about to be sent: its size is what the
        message counts against its address (:attr:`size`), and the send writes it
        (:meth:`take_record`) without encoding it again. Raises as :meth:`record`."""
        rec = self._record = self.record()
        self.size = len(rec[1])

    def take_record(self) -> tuple[int, bytes]:
        """The record :meth:`prepare` encoded, forgotten here so the message is held in one
        form only (or :meth:`record`'s answer when there is none). Raises as :meth:`record`."""
        rec = self._record
        if rec is None:
            return self.record()
        self._record = None
        return rec

    @property
    def message_id(self) -> int:
        """The message id (set by send or load)."""
        mid = self._message_id if self._message is None else self._message.message_id
        assert mid is not None
        return mid


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _copy(message: Message, body: bytes, message_id: int) -> Message:
    """What ``dataclasses.replace(message, body=body, message_id=message_id)`` returns, with
    the same checks (the caller may have changed ``message`` since it was made), in half the
    time: a send makes one. Raises ValueError as ``Message`` does."""
    copy = object.__new__(Message)
    copy.__dict__.update(message.__dict__)
    copy.body = body
    copy.message_id = message_id
    copy.__post_init__()
    return copy


class StorageManager:
    """The storage manager over an opened store (see the module docstring).

    ``clock`` returns the current time in ms since the epoch (scheduled delivery compares
    against it; tests pass their own); ``id_batch`` is the id generator's batch.
    ``stamp_timestamps``: a sent message whose ``timestamp`` is 0 gets the send time, as
    Artemis stamps it; a tool that restores messages exactly as they were (``store data imp``)
    turns it off. Call :meth:`load` once before anything else; :meth:`close` closes the store
    too. Over a store opened read-only (``open_store(config, read_only=True)``: ``store data
    exp``) the load applies what it would sweep to its own view only (no delete is written,
    no page or body removed) and close records nothing; operations that write raise what the
    store's read-only parts raise (JournalStateError).
    """

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], int] | None = None,
        id_batch: int = DEFAULT_BATCH,
        stamp_timestamps: bool = True,
    ) -> None:
        self._stamp = stamp_timestamps
        self._store = store
        #: The store was opened read-only: the load sweeps nothing, close records nothing.
        self.read_only = store.read_only
        self._journal = store.messages  # the store's parts are fixed: looked up once
        self._large = store.large_messages
        self._clock = clock or _now_ms
        config = store.config
        self._id_cache_size = config.id_cache_size
        self._persist_id_cache = config.persist_id_cache
        self._sync_non_tx = config.journal_sync_non_transactional
        self._sync_tx = config.journal_sync_transactional
        self._lock = threading.RLock()
        self._ids = IdGenerator(store.bindings, batch=id_batch)
        self._loaded = False
        self._closed = False
        self._ready = False  # _loaded and not _closed
        self._addresses: dict[str, tuple[int, AddressInfo]] = {}
        self._queues: dict[str, MessageQueue] = {}
        self._queues_by_id: dict[int, MessageQueue] = {}
        self._messages: dict[int, StoredMessage] = {}
        self._dups: dict[str, DuplicateIdCache] = {}
        self._prepared: dict[Xid, TransactionWork] = {}
        self._order = itertools.count(1)
        self._large_limit = config.min_large_message_size
        self._doomed: list[int] = []  # large bodies to delete once their deletes are durable
        self._space = threading.Condition(self._lock)  # notified when an address frees room
        self._blocked = 0  # senders waiting on _space (BLOCK): deletes notify only then
        self._pager = Pager(
            config, store.messages, store.paging, self._ids.next_id, self._queue_address
        )

    def _queue_address(self, qid: int) -> str | None:
        queue = self._queues_by_id.get(qid)
        return None if queue is None else queue.info.address

    # -- life cycle -------------------------------------------------------------------------

    def load(self, progress: Progress | None = None) -> Recovery:
        """Load both journals and rebuild addresses, queues, messages, duplicate-id caches and
        prepared transactions (see :mod:`store.messaging.recovery`); returns the
        :class:`Recovery`. ``progress(phase, done, total)`` is called during long loads.
        Raises JournalStateError when called twice, CorruptionError for an undecodable
        record, and what the journals raise."""
        from store.messaging.loader import load_into

        with self._lock:
            self._check_open()
            if self._loaded:
                raise JournalStateError("StorageManager.load() was already called")
            rec = load_into(self, progress)
            self._loaded = True
            self._ready = True
            return rec

    def close(self) -> None:
        """Record the id generator's position (a clean stop), then close the store.
        Idempotent. Raises the first StoreError met, after closing the store."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._ready = False
            self._space.notify_all()  # blocked senders see the close
            try:
                if self._loaded and not self.read_only:
                    self._ids.close()
            finally:
                self._store.close()

    def __enter__(self) -> StorageManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def flush(self) -> None:
        """Return once everything appended so far to both journals and the page stores is
        durable. Raises what the journals and page stores raise."""
        self._store.bindings.flush()
        self._journal.flush()
        paging = self._store.paging
        for address in paging.addresses():
            paging.store(address).flush()

    def sync_future(self) -> concurrent.futures.Future[None]:
        """A future that completes when everything appended so far to both journals is
        durable (paged sends are durable when a ``sync`` send returns, or after ``flush``).
        Raises what the journals raise."""
        parts = [self._store.bindings.sync_future(), self._journal.sync_future()]
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        settling = threading.Lock()  # both parts' callbacks may fire at once

        def settle(_: object) -> None:
            with settling:
                if done.done() or not all(p.done() for p in parts):
                    return
                errors = [p.exception() for p in parts if p.exception() is not None]
                if errors:
                    done.set_exception(errors[0])  # type: ignore[arg-type]
                else:
                    done.set_result(None)

        for p in parts:
            p.add_done_callback(settle)
        return done

    def _check_open(self) -> None:
        if self._closed:
            raise JournalClosedError("the storage manager is closed")

    def _check_ready(self) -> None:
        if self._ready:  # loaded and not closed: one attribute test on every call
            return
        self._check_open()
        if not self._loaded:
            raise JournalStateError("StorageManager.load() must be called first")

    # -- addresses and queues ---------------------------------------------------------------

    def create_address(self, name: str, routing_types: Sequence[str] = (ANYCAST,)) -> AddressInfo:
        """Create an address accepting ``routing_types``; returns its AddressInfo, durable
        when it returns. Raises StoreError when it exists, ValueError for an empty name or an
        unknown routing type, and what the bindings journal raises."""
        types = tuple(dict.fromkeys(routing_types))
        if not isinstance(name, str) or not name:
            raise ValueError(f"an address needs a non-empty name, not {name!r}")
        if not types or any(t not in ROUTING_TYPES for t in types):
            raise ValueError(f"routing types are some of {ROUTING_TYPES}, not {routing_types!r}")
        with self._lock:
            self._check_ready()
            if name in self._addresses:
                raise StoreError(f"address {name!r} already exists")
            info = AddressInfo(name, types)
            rid = self._ids.next_id()
            body = r.AddressRecord(name, types).encode()
            self._store.bindings.append_add(rid, r.ADDRESS_BINDING_RECORD, body, sync=True)
            self._addresses[name] = (rid, info)
            return info

    def create_queue(
        self,
        name: str,
        *,
        address: str,
        routing_type: str = ANYCAST,
        filter: str | None = None,
    ) -> QueueInfo:
        """Create a durable queue bound to ``address``; returns its QueueInfo, durable when it
        returns. ``filter`` is stored as given (evaluating it is the broker's business).
        Raises StoreError when the queue exists or the address does not, ValueError for an
        empty name or a routing type the address does not accept, and what the bindings
        journal raises."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a queue needs a non-empty name, not {name!r}")
        with self._lock:
            self._check_ready()
            if name in self._queues:
                raise StoreError(f"queue {name!r} already exists")
            if address not in self._addresses:
                raise StoreError(f"address {address!r} does not exist; create it first")
            accepted = self._addresses[address][1].routing_types
            if routing_type not in accepted:
                raise ValueError(
                    f"address {address!r} accepts {', '.join(accepted)}, not {routing_type!r}"
                )
            qid = self._ids.next_id()
            body = r.QueueRecord(name, address, routing_type, filter).encode()
            self._store.bindings.append_add(qid, r.QUEUE_BINDING_RECORD, body, sync=True)
            info = QueueInfo(qid, name, address, routing_type, filter)
            self._add_queue(info)
            return info

    def _add_queue(self, info: QueueInfo) -> MessageQueue:
        queue = MessageQueue(info)
        self._queues[info.name] = queue
        self._queues_by_id[info.id] = queue
        return queue

    def delete_queue(self, name: str) -> None:
        """Delete a queue: its messages are acknowledged, and deleted where no other queue
        holds them. Returns None once durable. Raises UnknownQueueError, and what the journals
        raise."""
        with self._lock:
            self._check_ready()
            queue = self._queue(name)
            self._store.bindings.append_delete(queue.info.id, sync=True)
            del self._queues[name]
            del self._queues_by_id[queue.info.id]
            for mid in queue.message_ids():
                queue.remove(mid)
                self._drop_ref(mid, queue.info.id, write_ack=True)
            self._pager.drop_queue(queue.info.address, queue.info.id)
        self._flush_messages(self._sync_non_tx)
        self._reap()

    def delete_address(self, name: str) -> None:
        """Delete an address that has no queues. Returns None once durable. Raises StoreError
        when it does not exist or still has queues, and what the bindings journal raises."""
        with self._lock:
            self._check_ready()
            if name not in self._addresses:
                raise StoreError(f"address {name!r} does not exist")
            bound = sorted(q.info.name for q in self._queues.values() if q.info.address == name)
            if bound:
                raise StoreError(f"address {name!r} still has queues: {', '.join(bound)}")
            rid, _ = self._addresses.pop(name)
            self._store.bindings.append_delete(rid, sync=True)

    def addresses(self) -> list[AddressInfo]:
        """Every address, sorted by name. Raises JournalStateError before load."""
        with self._lock:
            self._check_ready()
            return [info for _, info in sorted(self._addresses.values(), key=lambda a: a[1].name)]

    def queues(self) -> list[QueueInfo]:
        """Every queue, sorted by name. Raises JournalStateError before load."""
        with self._lock:
            self._check_ready()
            return sorted((q.info for q in self._queues.values()), key=lambda q: q.name)

    def _queue(self, name: str) -> MessageQueue:
        queue = self._queues.get(name)
        if queue is None:
            raise UnknownQueueError(f"queue {name!r} does not exist")
        return queue

    def _route(self, address: str, names: Sequence[str] | None) -> list[MessageQueue]:
        if names is None:
            return [q for q in self._queues.values() if q.info.address == address]
        if isinstance(names, str):
            raise ValueError("queues is a list of queue names, not one string")
        if type(names) is list and len(names) == 1:  # most sends: one queue
            one = self._queues.get(names[0])
            if one is not None and one.info.address == address:
                return [one]
        targets = [self._queue(n) for n in dict.fromkeys(names)]
        for q in targets:
            if q.info.address != address:
                raise ValueError(
                    f"queue {q.info.name!r} is bound to {q.info.address!r}, not {address!r}"
                )
        return targets

    def _dup_cache(self, address: str) -> DuplicateIdCache:
        cache = self._dups.get(address)
        if cache is None:
            cache = self._dups[address] = DuplicateIdCache(address, self._id_cache_size)
        return cache

    def _check_dup(self, address: str, dup: bytes | None) -> None:
        if dup is not None and dup in self._dup_cache(address):
            raise DuplicateIdError(f"duplicate id {dup!r} was already sent to {address!r}")

    def _dup_record_id(self, message: Message) -> int | None:
        if message.durable and self._persist_id_cache and self._id_cache_size > 0:
            return self._ids.next_id()
        return None

    # -- messages ---------------------------------------------------------------------------

    def _prepare_message(self, message: Message) -> StoredMessage:
        """Without the lock: a new id (set on ``message`` too) and a stored copy whose body is
        inline, or streamed to the large-message store when over ``min-large-message-size``
        (then durable already). Raises ValueError for a text stream, and what the id
        generator and the large-message store raise."""
        self._check_ready()
        mid = self._ids.next_id()
        message.message_id = mid
        if not message.timestamp and self._stamp:  # the send time when none was given (Artemis)
            message.timestamp = self._clock()
        body = message.body
        if type(body) is bytes and len(body) <= self._large_limit:  # most sends
            stored = StoredMessage(_copy(message, body, mid))
            stored.prepare()
            return stored
        large = self._large
        inline, size = store_body(large, mid, body, self._large_limit)
        if inline is not None:
            if not isinstance(body, bytes):
                message.body = inline
            stored = StoredMessage(_copy(message, inline, mid))
        else:
            copy = dataclasses.replace(
                message, body=b"", message_id=mid, _opener=functools.partial(large.open, mid)
            )
            stored = StoredMessage(copy, large_size=size)
        stored.prepare()
        return stored

    def _discard(self, stored: StoredMessage, message: Message) -> None:
        """A prepared message that is not stored after all: its id is unset on ``message`` and
        its large body (if any) deleted. Raises nothing it can avoid (logs instead)."""
        message.message_id = None
        if stored.large_size is not None:
            self._delete_bodies([stored.message_id], flush=False)

    def _delete_bodies(self, ids: list[int], *, flush: bool) -> None:
        """Delete large bodies, after making the journal deletes of their messages durable
        (``flush``), so a crash never leaves a message without its body. Logs failures."""
        if flush:
            self._journal.flush()
        for mid in ids:
            try:
                self._large.delete(mid)
            except UnknownRecordError:  # swept already (loader._large_bodies): nothing left
                log.debug("large body %d already deleted", mid)
            except StoreError as exc:  # the store failed: the load sweeps it
                log.warning("large body %d not deleted: %s", mid, exc)

    def _reap(self) -> None:
        """Without the lock: delete the large bodies of messages deleted since the last call."""
        if not self._doomed and not self._pager.doomed:
            return  # read without the lock: a body doomed meanwhile is reaped by its doomer
        with self._lock:
            doomed, self._doomed = self._doomed, []
            doomed.extend(self._pager.take_doomed())
        if doomed:
            self._delete_bodies(doomed, flush=True)

    def send(
        self,
        message: Message,
        queues: Sequence[str] | None = None,
        dup_id: bytes | str | None = None,
        sync: bool = True,
    ) -> int | None:
        """Store ``message`` and route it to ``queues`` (None: every queue of its address);
        returns its id (also set as ``message.message_id``), None when routed to no queue
        (nothing stored). A ``timestamp`` of 0 becomes the send time (ms since the epoch, from
        the manager's clock; also set on ``message``), as Artemis's producer stamps it.
        With ``sync`` it returns once durable (unless ``journal-sync-non-transactional`` is
        false). Raises DuplicateIdError when ``dup_id``
        is in the address's cache (nothing stored), AddressFullError when the address is full
        under the FAIL policy, UnknownQueueError, ValueError for a queue of another address,
        JournalClosedError when the manager closes while the send is BLOCKed, and what the
        journal and the page store raise. Under DROP a full address returns None."""
        dup = None if dup_id is None else dup_bytes(dup_id)
        stored = self._prepare_message(message)  # the body streams without the lock
        stored_it = False
        try:
            with self._lock:
                targets, decision = self._admit(message, queues, dup, transactional=False)
                if not targets or decision == DROP:
                    return None
                self._store_message(stored, [q.info.id for q in targets], dup, decision)
                stored_it = True
        finally:
            if not stored_it:
                self._discard(stored, message)
        mid = stored.message_id
        wait = sync and message.durable
        if wait and decision == PAGE:
            self._store.paging.store(message.address).flush()
        if wait and self._sync_non_tx and (decision != PAGE or dup is not None):
            self._journal.flush()
        return mid

    def _admit(
        self,
        message: Message,
        queues: Sequence[str] | None,
        dup: bytes | None,
        *,
        transactional: bool,
        wait: bool = True,
    ) -> tuple[list[MessageQueue], str]:
        """Lock held: the queues ``message`` goes to and where it goes (MEMORY, PAGE, DROP),
        waiting while its address is full under BLOCK (unless ``wait`` is false: a
        transaction that holds memory, see ``Pager.refuse_block``). Raises as ``send``, and
        AddressFullError for a full BLOCK address when ``wait`` is false."""
        while True:
            self._check_ready()
            targets = self._route(message.address, queues)
            self._check_dup(message.address, dup)
            if not targets:
                return targets, DROP
            decision = self._pager.admit(
                message.address, durable=message.durable, transactional=transactional
            )
            if decision != BLOCK:
                return targets, decision
            if not wait:
                raise self._pager.refuse_block(message.address)
            self._blocked += 1
            try:
                self._space.wait()
            finally:
                self._blocked -= 1

    def _store_message(
        self, stored: StoredMessage, qids: list[int], dup: bytes | None, decision: str
    ) -> None:
        """Lock held: the journal (or page) records of a non-transactional send, then the
        message in its queues (unless paged)."""
        m, mid, journal = stored.message, stored.message_id, self._journal
        kind, record = stored.take_record()
        if decision == PAGE:
            paged = PagedMessage(mid, 0, kind, record, tuple(qids))
            self._pager.page(m.address, paged, sync=False)
        elif m.durable:
            journal.append_add(mid, kind, record)
            for qid in qids:
                journal.append_update(mid, r.ADD_REF, r.queue_id_body(qid))
        if dup is not None:
            rid = self._dup_record_id(m)
            if rid is not None:
                journal.append_add(
                    rid, r.DUPLICATE_ID, r.DuplicateIdRecord(m.address, dup).encode()
                )
            self._add_dup(m.address, dup, rid)
        if decision != PAGE:
            self._enqueue(stored, qids)

    def _add_dup(self, address: str, dup: bytes, record_id: int | None) -> None:
        for old in self._dup_cache(address).add(dup, record_id):
            self._journal.append_delete(old)

    def _enqueue(self, stored: StoredMessage, queue_ids: list[int]) -> None:
        now = self._clock()
        queues = self._queues_by_id
        if len(queue_ids) == 1 and queue_ids[0] in queues:  # most sends: one live queue
            live = queue_ids
        else:
            live = [qid for qid in queue_ids if qid in queues]
        if not live:  # its queues went while a transaction held it
            if stored.message.durable:
                self._journal.append_delete(stored.message_id)
            if stored.large_size is not None:
                self._doomed.append(stored.message_id)
            return
        mid = stored.message_id
        self._messages[mid] = stored
        m = stored.message
        self._pager.hold_memory(m.address, stored.size, 1)
        for qid in live:
            entry = queues[qid].add(
                mid,
                priority=m.priority,
                order=next(self._order),
                now=now,
                scheduled=m.scheduled_delivery,
            )
            stored.add_ref(queues[qid].info.id, entry)  # the queue's own id: one int for all

    def _drop_ref(self, mid: int, qid: int, *, write_ack: bool) -> None:
        """Lock held: queue ``qid`` no longer holds ``mid``; delete the message if no queue
        does."""
        stored = self._messages.get(mid)
        if stored is None:
            return
        held = stored.remove_ref(qid)
        if stored.position is not None:  # paged: no journal record; the cursor tracks it
            if not held:
                del self._messages[mid]
            return
        message = stored.message
        durable = message.durable
        if not held:
            # The message's last ref: its DELETE (which drops every record of the message)
            # is the ack, written without an ACKNOWLEDGE_REF before it. An ack that waits
            # waits for the DELETE, so nothing acknowledged comes back; one that does not
            # may lose the DELETE in a crash, as it may lose an ACKNOWLEDGE_REF.
            del self._messages[mid]
            self._pager.hold_memory(message.address, stored.size, -1)
            if self._blocked:
                self._space.notify_all()
            if durable:
                self._journal.append_delete(mid)
            if stored.large_size is not None:
                self._doomed.append(mid)  # deleted by _reap once the delete is durable
        elif durable and write_ack:
            self._journal.append_update(mid, r.ACKNOWLEDGE_REF, r.queue_id_body(qid))

    def _flush_messages(self, wait: bool) -> None:
        if wait:
            self._journal.flush()

    def receive(self, queue: str, max_messages: int = 1) -> list[Delivery]:
        """Up to ``max_messages`` messages of ``queue`` that are ready, in delivery order
        (priority, then send order; scheduled ones once due); never blocks. Returns the
        deliveries (empty when nothing is ready). Raises ValueError for ``max_messages`` < 1,
        UnknownQueueError."""
        if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1:
            raise ValueError(f"max_messages must be at least 1, not {max_messages!r}")
        with self._lock:
            self._check_ready()
            q = self._queue(queue)
            now = self._clock()
            taken = q.take(max_messages, now)
            if len(taken) < max_messages:  # paged messages come after those in memory
                self._depage(q, max_messages - len(taken), now)
                taken += q.take(max_messages - len(taken), now)
            return [
                Delivery(self._messages[e.message_id].message, queue, e.delivery_count)
                for e in taken
            ]

    def _depage(self, q: MessageQueue, n: int, now: int) -> None:
        """Lock held: put the next ``n`` paged messages of ``q`` on it."""
        address, qid = q.info.address, q.info.id
        if not self._pager.remaining(address, qid):
            return
        for position, paged in self._pager.depage(address, qid, n):
            stored = self._messages.get(paged.message_id)
            if stored is None:
                stored = StoredMessage(self._paged_message(paged), position=position)
                self._messages[paged.message_id] = stored
            m = stored.message
            entry = q.add(
                paged.message_id,
                priority=m.priority,
                order=next(self._order),
                now=now,
                scheduled=m.scheduled_delivery,
            )
            stored.add_ref(q.info.id, entry)

    def _paged_message(self, paged: PagedMessage) -> Message:
        message = paged.message()
        if paged.record_type == r.ADD_LARGE_MESSAGE:
            opener = functools.partial(self._large.open, paged.message_id)
            message = dataclasses.replace(message, _opener=opener)
        return message

    def browse(self) -> Iterator[tuple[Message, tuple[str, ...]]]:
        """Every message still on a queue (not acknowledged: ready, scheduled, delivered, held
        by a transaction, or paged), once, in message id order, with the names of the queues
        holding it, sorted. Read-only: nothing is delivered, no delivery count changes, no
        paged message is read into a queue, nothing is written. Which messages are on which
        queues is taken when the iteration starts (under the lock; the paged ones by reading
        each page once, see ``Pager.browse_refs``); each message is read as it is yielded (a
        paged one from its page, one page kept at a time); an inline body is held only while
        its message is. Raises JournalStateError before load, and what the page stores raise
        (CorruptionError for a damaged page)."""
        with self._lock:
            self._check_ready()
            names = {qid: q.info.name for qid, q in self._queues_by_id.items()}
            found: dict[int, tuple[StoredMessage | tuple[str, PagePosition], set[int]]] = {
                mid: (stored, set(stored.queue_ids())) for mid, stored in self._messages.items()
            }
            for mid, at_address, at, on in self._pager.browse_refs():
                found.setdefault(mid, ((at_address, at), set()))[1].update(on)
        page: tuple[str, int, list[bytes]] = ("", -1, [])
        for mid in sorted(found):
            source, qids = found.pop(mid)
            if isinstance(source, StoredMessage):
                message = source.peek()
            else:
                address, position = source
                if page[:2] != (address, position.page):
                    with self._lock:
                        page = (address, position.page, [])  # the old page goes first
                        page = (address, position.page, self._pager.page_records(*page[:2]))
                paged = PagedMessage.decode(page[2][position.index])
                message = self._paged_message(paged)
            held = tuple(sorted(names[q] for q in qids if q in names))
            if held:
                yield message, held

    def address_id(self, name: str) -> int:
        """The id of address ``name``'s bindings record (Artemis's address-binding id).
        Raises StoreError when there is no such address."""
        with self._lock:
            self._check_ready()
            if name not in self._addresses:
                raise StoreError(f"address {name!r} does not exist")
            return self._addresses[name][0]

    def ack(self, queue: str, message_id: int, sync: bool = True) -> None:
        """Acknowledge a delivered message; with ``sync`` returns once durable (unless
        ``journal-sync-non-transactional`` is false). Returns None. Raises UnknownQueueError,
        UnknownMessageError when it is not delivered on that queue."""
        with self._lock:
            self._check_ready()
            q = self._queue(queue)
            q.acknowledge(message_id)
            stored = self._messages[message_id]
            durable = stored.message.durable
            if stored.position is not None:
                self._pager.ack(q.info.address, q.info.id, stored.position)
            self._drop_ref(message_id, q.info.id, write_ack=True)
        self._flush_messages(sync and durable and self._sync_non_tx)
        self._reap()

    def cancel(self, queue: str, message_id: int) -> None:
        """Put a delivered message back at the head of its queue with its delivery count + 1
        (persisted, not waited for). Returns None. Raises UnknownQueueError,
        UnknownMessageError when it is not delivered on that queue."""
        with self._lock:
            self._check_ready()
            q = self._queue(queue)
            entry = q.cancel(message_id, self._clock())
            self._write_delivery_count(message_id, q.info.id, entry.delivery_count)

    def _write_delivery_count(self, mid: int, qid: int, count: int) -> None:
        # A paged message's count is kept in memory only: after a restart it starts at 0.
        stored = self._messages[mid]
        if stored.message.durable and stored.position is None:
            body = r.DeliveryCountRecord(qid, count).encode()
            self._journal.append_update(mid, r.UPDATE_DELIVERY_COUNT, body)

    def depth(self, queue: str) -> int:
        """Messages on ``queue`` not yet acknowledged (delivered, scheduled and held by a
        transaction included). Raises UnknownQueueError."""
        with self._lock:
            self._check_ready()
            q = self._queue(queue)
            return q.depth() + self._pager.remaining(q.info.address, q.info.id)

    # -- transactions -----------------------------------------------------------------------

    def begin(self) -> Transaction:
        """A new transaction. Raises JournalStateError before load."""
        with self._lock:
            self._check_ready()
            return Transaction(self, TransactionWork(self._ids.next_id()))
