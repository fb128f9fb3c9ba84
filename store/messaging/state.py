"""The in-memory state a storage manager owns (:class:`ManagerState`) and the operations on it
that its three users share: the manager's live operations (:mod:`store.messaging.manager`),
the load that fills it (:mod:`store.messaging.loader`) and the transactions that commit into
it (:mod:`store.messaging.transactions`); with :class:`TransactionWork`, what a transaction
did so far.

The state holds the store's parts the manager writes to (journal, large-message store,
:class:`~store.messaging.pager.Pager`, id generator), the manager's lock and its life cycle
(loaded, closed), the addresses, queues, messages, duplicate-id caches and prepared
transactions, and the large bodies waiting for their deletes to be durable. Its attributes are
its interface (public, documented in :meth:`ManagerState.__init__`), and what more than a
lookup is done with them is a named method here: none of the modules above reaches into
another's private fields. The manager makes one state and keeps it for life; the containers
are never replaced (the loader fills them in place), except :attr:`ManagerState.order`, which
the load sets to number sends after every loaded ref.

Thread-safety: attributes and methods need :attr:`ManagerState.lock` held, except where a
method says "without the lock".
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from store.errors import (
    DuplicateIdError,
    JournalClosedError,
    JournalStateError,
    StoreError,
    UnknownQueueError,
    UnknownRecordError,
)
from store.messaging import records as r
from store.messaging.bodies import body_opener, store_body
from store.messaging.dupcache import DuplicateIdCache
from store.messaging.ids import DEFAULT_BATCH, IdGenerator
from store.messaging.message_records import PagedMessage
from store.messaging.pager import BLOCK, DROP, Pager
from store.messaging.policies import Policies
from store.messaging.queues import MessageQueue
from store.messaging.stored import StoredMessage
from store.messaging.values import AddressInfo, Message, QueueInfo, Xid
from store.paging.api import PagePosition

if TYPE_CHECKING:
    from store.store import Store

__all__ = [
    "ACTIVE",
    "COMMITTED",
    "PREPARED",
    "ROLLED_BACK",
    "ManagerState",
    "TransactionWork",
]

log = logging.getLogger(__name__)

ACTIVE: Final = "active"
PREPARED: Final = "prepared"
COMMITTED: Final = "committed"
ROLLED_BACK: Final = "rolled back"


@dataclass(eq=False)
class TransactionWork:
    """What a transaction did so far: the manager's bookkeeping, not a public API."""

    tx_id: int
    state: str = ACTIVE
    xid: Xid | None = None
    #: Messages sent, each with the ids of the queues it goes to.
    sends: list[tuple[StoredMessage, list[int]]] = field(default_factory=list)
    #: (queue id, message id) acknowledged.
    acks: list[tuple[int, int]] = field(default_factory=list)
    #: (address, dup id, record id or None when not persisted).
    dups: list[tuple[str, bytes, int | None]] = field(default_factory=list)
    #: (queue id, message id) -> (position, cursor-ack record id), for paged messages acked.
    cursor_acks: dict[tuple[int, int], tuple[PagePosition, int]] = field(default_factory=dict)
    #: Paged messages a recovered prepared transaction acked: (address, queue id, position,
    #: cursor-ack record id); they are held by the pager, not by a queue in memory.
    held_pages: list[tuple[str, int, PagePosition, int]] = field(default_factory=list)
    #: Messages it paged: (address, position, paged record without its body: a few hundred
    #: bytes each); visible at commit.
    paged_sends: list[tuple[str, PagePosition, PagedMessage]] = field(default_factory=list)
    #: Its PAGE_TRANSACTION record id, once written (at prepare or commit).
    page_tx_record: int | None = None
    #: Addresses it paged to: its later durable sends there are paged too (in send order).
    paged_addresses: set[str] = field(default_factory=set)
    #: What its in-memory sends count against each address's limit since ``tx.send``:
    #: address -> [bytes, messages]. Uncounted at commit (the queues count them from then) and
    #: at rollback. A prepared transaction recovered at load counts nothing until its commit.
    memory: dict[str, list[int]] = field(default_factory=dict)
    #: True once a record of this transaction is in the journal.
    wrote: bool = False

    def holds(self) -> bool:
        """True when it holds memory only its own commit or rollback frees: in-memory sends
        (any address) or acknowledged messages. Raises nothing."""
        return bool(self.memory or self.acks)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _no_mover(queue: MessageQueue, message_id: int) -> object:
    raise StoreError("this storage manager moves no message")


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


class ManagerState:
    """The state of one storage manager over an opened store (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], int] | None = None,
        id_batch: int = DEFAULT_BATCH,
        stamp_timestamps: bool = True,
    ) -> None:
        """The empty state of a manager over ``store``, before its load; the arguments are
        the manager's (:class:`~store.messaging.manager.StorageManager`). Raises nothing."""
        config = store.config
        #: The store, and the parts of it looked up once (they are fixed).
        self.store = store
        self.journal = store.messages
        self.large = store.large_messages
        #: The store was opened read-only: the load sweeps nothing, close records nothing.
        self.read_only = store.read_only
        #: The current time in ms since the epoch; ``stamp``: give a send time to a message
        #: whose timestamp is 0.
        self.clock = clock or _now_ms
        self.stamp = stamp_timestamps
        self.id_cache_size = config.id_cache_size
        self.persist_id_cache = config.persist_id_cache
        self.sync_non_tx = config.journal_sync_non_transactional
        self.sync_tx = config.journal_sync_transactional
        self.large_limit = config.min_large_message_size
        #: Guards everything here and orders journal appends with it.
        self.lock = threading.RLock()
        #: Notified when an address frees room; ``blocked``: senders waiting on it (BLOCK).
        self.space = threading.Condition(self.lock)
        self.blocked = 0
        self.ids = IdGenerator(store.bindings, batch=id_batch)
        #: Life cycle: ``ready`` is ``loaded and not closed`` (one test on every call).
        self.loaded = False
        self.closed = False
        self.ready = False
        #: Address name -> (bindings record id, info).
        self.addresses: dict[str, tuple[int, AddressInfo]] = {}
        self.queues: dict[str, MessageQueue] = {}
        self.queues_by_id: dict[int, MessageQueue] = {}
        #: Message id -> the message, for every message some queue in memory holds.
        self.messages: dict[int, StoredMessage] = {}
        self.dups: dict[str, DuplicateIdCache] = {}
        self.prepared: dict[Xid, TransactionWork] = {}
        #: Numbers the refs in send order (set by the load).
        self.order = itertools.count(1)
        #: Large bodies to delete once their messages' deletes are durable (:meth:`reap`).
        self.doomed: list[int] = []
        self.pager = Pager(
            config, store.messages, store.paging, self.ids.next_id, self.queue_address
        )
        #: Delivery policies: merged settings per address, expirations, moved counts.
        self.policies = Policies(config)
        #: Without the lock: move a message delivered on a queue away (dead letter); the
        #: manager sets it (:mod:`store.messaging.moves`), a rollback calls it.
        self.dead_letter: Callable[[MessageQueue, int], object] = _no_mover

    # -- life cycle -------------------------------------------------------------------------

    def check_open(self) -> None:
        """Raises JournalClosedError once the manager is closed."""
        if self.closed:
            raise JournalClosedError("the storage manager is closed")

    def check_ready(self) -> None:
        """Raises JournalClosedError once closed, JournalStateError before the load."""
        if self.ready:  # loaded and not closed: one attribute test on every call
            return
        self.check_open()
        if not self.loaded:
            raise JournalStateError("StorageManager.load() must be called first")

    def mark_loaded(self) -> None:
        """The load is done: operations may start. Raises nothing."""
        self.loaded = True
        self.ready = True

    def mark_closed(self) -> bool:
        """Close: operations raise from now on and BLOCKed senders wake up to see it. Returns
        False when it was closed already. Raises nothing."""
        if self.closed:
            return False
        self.closed = True
        self.ready = False
        self.space.notify_all()
        return True

    # -- addresses, queues, duplicate ids ---------------------------------------------------

    def queue_address(self, qid: int) -> str | None:
        """The address of queue ``qid``, None when there is no such queue. Raises nothing."""
        queue = self.queues_by_id.get(qid)
        return None if queue is None else queue.info.address

    def add_queue(self, info: QueueInfo) -> MessageQueue:
        """A new empty queue for ``info``, registered by name and id. Raises nothing."""
        queue = MessageQueue(info)
        self.queues[info.name] = queue
        self.queues_by_id[info.id] = queue
        return queue

    def queue(self, name: str) -> MessageQueue:
        """The queue ``name``. Raises UnknownQueueError."""
        queue = self.queues.get(name)
        if queue is None:
            raise UnknownQueueError(f"queue {name!r} does not exist")
        return queue

    def route(self, address: str, names: Sequence[str] | None) -> list[MessageQueue]:
        """The queues a message of ``address`` goes to: ``names``, or every queue of the
        address when None. Raises UnknownQueueError, ValueError for a queue of another
        address or a string given for the list."""
        if names is None:
            return [q for q in self.queues.values() if q.info.address == address]
        if isinstance(names, str):
            raise ValueError("queues is a list of queue names, not one string")
        if type(names) is list and len(names) == 1:  # most sends: one queue
            one = self.queues.get(names[0])
            if one is not None and one.info.address == address:
                return [one]
        targets = [self.queue(n) for n in dict.fromkeys(names)]
        for q in targets:
            if q.info.address != address:
                raise ValueError(
                    f"queue {q.info.name!r} is bound to {q.info.address!r}, not {address!r}"
                )
        return targets

    def dup_cache(self, address: str) -> DuplicateIdCache:
        """The duplicate-id cache of ``address``, made on first use. Raises nothing."""
        cache = self.dups.get(address)
        if cache is None:
            cache = self.dups[address] = DuplicateIdCache(address, self.id_cache_size)
        return cache

    def check_dup(self, address: str, dup: bytes | None) -> None:
        """Raises DuplicateIdError when ``dup`` is in the cache of ``address``."""
        if dup is not None and dup in self.dup_cache(address):
            raise DuplicateIdError(f"duplicate id {dup!r} was already sent to {address!r}")

    def dup_record_id(self, message: Message) -> int | None:
        """A record id for the duplicate id of ``message``, None when it is not persisted.
        Raises what the id generator raises."""
        if message.durable and self.persist_id_cache and self.id_cache_size > 0:
            return self.ids.next_id()
        return None

    def add_dup(self, address: str, dup: bytes, record_id: int | None) -> None:
        """``dup`` enters the cache of ``address``; the records it pushes out are deleted.
        Raises what the journal raises."""
        for old in self.dup_cache(address).add(dup, record_id):
            self.journal.append_delete(old)

    # -- messages ---------------------------------------------------------------------------

    def prepare_message(self, message: Message) -> StoredMessage:
        """Without the lock: a new id (set on ``message`` too) and a stored copy whose body is
        inline, or streamed to the large-message store when over ``min-large-message-size``
        (then durable already). Raises ValueError for a text stream, and what the id
        generator and the large-message store raise."""
        self.check_ready()
        mid = self.ids.next_id()
        message.message_id = mid
        if not message.timestamp and self.stamp:  # the send time when none was given (Artemis)
            message.timestamp = self.clock()
        expiration = self.policies.expiration_at_send(message, self.clock)
        if expiration != message.expiration:
            message.expiration = expiration
        body = message.body
        if type(body) is bytes and len(body) <= self.large_limit:  # most sends
            stored = StoredMessage(_copy(message, body, mid))
            stored.prepare()
            return stored
        large = self.large
        inline, size = store_body(large, mid, body, self.large_limit)
        if inline is not None:
            if not isinstance(body, bytes):
                message.body = inline
            stored = StoredMessage(_copy(message, inline, mid))
        else:
            copy = dataclasses.replace(
                message, body=b"", message_id=mid, _opener=body_opener(large, mid, size)
            )
            stored = StoredMessage(copy, large_size=size)
        stored.prepare()
        return stored

    def discard(self, stored: StoredMessage, message: Message) -> None:
        """Without the lock: a prepared message that is not stored after all: its id is unset
        on ``message`` and its large body (if any) deleted. Raises nothing it can avoid (logs
        instead)."""
        message.message_id = None
        if stored.large_size is not None:
            self.delete_bodies([stored.message_id], flush=False)

    def delete_bodies(self, ids: list[int], *, flush: bool) -> None:
        """Delete large bodies, after making the journal deletes of their messages durable
        (``flush``), so a crash never leaves a message without its body. Logs failures."""
        if flush:
            self.journal.flush()
        for mid in ids:
            try:
                self.large.delete(mid)
            except UnknownRecordError:  # swept already (loader._large_bodies): nothing left
                log.debug("large body %d already deleted", mid)
            except StoreError as exc:  # the store failed: the load sweeps it
                log.warning("large body %d not deleted: %s", mid, exc)

    def doom_bodies(self, ids: list[int]) -> None:
        """The large bodies ``ids`` go at the next :meth:`reap`. Raises nothing."""
        self.doomed.extend(ids)

    def reap(self) -> None:
        """Without the lock: delete the large bodies of messages deleted since the last call."""
        if not self.doomed and not self.pager.doomed:
            return  # read without the lock: a body doomed meanwhile is reaped by its doomer
        with self.lock:
            doomed, self.doomed = self.doomed, []
            doomed.extend(self.pager.take_doomed())
        if doomed:
            self.delete_bodies(doomed, flush=True)

    def admit(
        self,
        message: Message,
        queues: Sequence[str] | None,
        dup: bytes | None,
        *,
        transactional: bool,
        wait: bool = True,
    ) -> tuple[list[MessageQueue], str]:
        """The queues ``message`` goes to and where it goes (MEMORY, PAGE, DROP), waiting
        while its address is full under BLOCK (unless ``wait`` is false: a transaction that
        holds memory, see ``Pager.refuse_block``). Raises as ``StorageManager.send``, and
        AddressFullError for a full BLOCK address when ``wait`` is false."""
        while True:
            self.check_ready()
            targets = self.route(message.address, queues)
            self.check_dup(message.address, dup)
            if not targets:
                return targets, DROP
            decision = self.pager.admit(
                message.address, durable=message.durable, transactional=transactional
            )
            if decision != BLOCK:
                return targets, decision
            if not wait:
                raise self.pager.refuse_block(message.address)
            self.blocked += 1
            try:
                self.space.wait()
            finally:
                self.blocked -= 1

    def notify_space(self) -> None:
        """Wake the BLOCKed senders, if any, to look again at their address. Raises
        nothing."""
        if self.blocked:
            self.space.notify_all()

    def enqueue(self, stored: StoredMessage, queue_ids: list[int]) -> None:
        """Put a sent (or committed) message on those of its queues that still exist; with
        none left, it is deleted. Raises what the journal raises."""
        now = self.clock()
        queues = self.queues_by_id
        if len(queue_ids) == 1 and queue_ids[0] in queues:  # most sends: one live queue
            live = queue_ids
        else:
            live = [qid for qid in queue_ids if qid in queues]
        if not live:  # its queues went while a transaction held it
            if stored.message.durable:
                self.journal.append_delete(stored.message_id)
            if stored.large_size is not None:
                self.doomed.append(stored.message_id)
            return
        mid = stored.message_id
        self.messages[mid] = stored
        m = stored.message
        self.pager.hold_memory(m.address, stored.size, 1)
        if m.expiration:
            self.policies.watch(mid, m.expiration)
        for qid in live:
            entry = queues[qid].add(
                mid,
                priority=m.priority,
                order=next(self.order),
                now=now,
                scheduled=m.scheduled_delivery,
            )
            stored.add_ref(queues[qid].info.id, entry)  # the queue's own id: one int for all

    def drop_ref(self, mid: int, qid: int, *, write_ack: bool) -> None:
        """Queue ``qid`` no longer holds ``mid``; delete the message if no queue does. Raises
        what the journal raises."""
        stored = self.messages.get(mid)
        if stored is None:
            return
        if stored.position is not None:  # paged: no journal record; the cursor tracks it
            if not stored.remove_ref(qid):
                del self.messages[mid]
            return
        message = stored.message
        durable = message.durable
        # The journal first: an append refused raises with nothing changed here.
        held = stored.held_without(qid)
        if held and durable and write_ack:
            self.journal.append_update(mid, r.ACKNOWLEDGE_REF, r.queue_id_body(qid))
        elif not held and durable:
            self.journal.append_delete(mid)
        stored.remove_ref(qid)
        if not held:
            # The message's last ref: its DELETE (which drops every record of the message)
            # is the ack, written without an ACKNOWLEDGE_REF before it. An ack that waits
            # waits for the DELETE, so nothing acknowledged comes back; one that does not
            # may lose the DELETE in a crash, as it may lose an ACKNOWLEDGE_REF.
            del self.messages[mid]
            self.pager.hold_memory(message.address, stored.size, -1)
            if self.blocked:
                self.space.notify_all()
            if stored.large_size is not None:
                self.doomed.append(mid)  # deleted by reap once the delete is durable

    def flush_messages(self, wait: bool) -> None:
        """Without the lock: when ``wait``, return once the message journal is durable.
        Raises what the journal raises."""
        if wait:
            self.journal.flush()

    def write_delivery_count(self, mid: int, qid: int, count: int, scheduled: int = 0) -> None:
        """Record the delivery count of ``mid`` on queue ``qid`` and, when ``scheduled``, the
        time its redelivery delay ends, while ``count`` is within ``max-redelivery-records``
        (:mod:`store.messaging.policies`). Raises what the journal raises."""
        # A paged message's count is kept in memory only: after a restart it starts at 0.
        stored = self.messages[mid]
        if stored.message.durable and stored.position is None and self.policies.records_kept(count):
            body = r.DeliveryCountRecord(qid, count).encode()
            self.journal.append_update(mid, r.UPDATE_DELIVERY_COUNT, body)
            if scheduled:
                body = r.ScheduledTimeRecord(qid, scheduled).encode()
                self.journal.append_update(mid, r.SET_SCHEDULED_DELIVERY_TIME, body)

    def redeliver(self, queue: MessageQueue, mid: int, *, held: bool) -> bool:
        """A delivery of ``mid`` on ``queue`` failed (a cancel; ``held``: a rolled-back ack):
        back at the head after its redelivery delay, its count recorded; or, when the count
        reaches ``max-delivery-attempts``, kept delivered for :attr:`dead_letter` (returns
        True then). Raises UnknownMessageError as the queue does, and what the journal
        raises."""
        address = queue.info.address
        entry = queue.held(mid) if held else queue.delivered(mid)
        count = entry.delivery_count + 1
        if self.policies.dead_letter_due(address, count):
            if held:
                queue.unhold_delivered(mid)
            return True
        now = self.clock()
        delay = self.policies.redelivery_delay(address, count)
        entry = queue.unhold(mid, now, delay) if held else queue.cancel(mid, now, delay)
        self.write_delivery_count(mid, queue.info.id, count, entry.scheduled if delay else 0)
        return False

    # -- prepared transactions --------------------------------------------------------------

    def add_prepared(self, work: TransactionWork) -> None:
        """``work``, prepared with its XID, is kept until its commit or rollback (a later one
        with the same XID replaces it). Raises nothing."""
        assert work.xid is not None
        self.prepared[work.xid] = work

    def remove_prepared(self, xid: Xid) -> None:
        """The transaction prepared with ``xid`` is done (nothing happens if there is none).
        Raises nothing."""
        self.prepared.pop(xid, None)
