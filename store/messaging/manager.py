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
  (:mod:`store.messaging.transactions`, whose Transaction carries out its own operations on
  the manager's state). Deletes of messages whose last ref a commit removed are
  written after the commit, outside the transaction.

What happens at ``load()`` is described in :mod:`store.messaging.recovery`.

Paging and the address-full policies (PAGE, DROP, FAIL, BLOCK) are in the pager
(:mod:`store.messaging.pager`); the manager asks it where each send goes and hands it the acks
of paged messages. A body over ``min-large-message-size`` is streamed to the large-message
store (:mod:`store.messaging.bodies`) before the lock is taken, and its message is an
ADD_LARGE_MESSAGE (30) record; the body is deleted once its message's delete is durable (a
crash in between leaves a body the next load sweeps), or with its page for a paged message.

The manager's in-memory state (addresses, queues, messages, duplicate-id caches, prepared
transactions, the pager, the id generator, the lock) is a
:class:`~store.messaging.state.ManagerState` the manager makes and owns, with the operations
the manager, its loader (:mod:`store.messaging.loader`) and its transactions share (routing,
enqueueing, dropping a ref, preparing a message's record, reaping large bodies). The loader
fills it and a transaction commits into it through that interface; neither imports this
module, nor touches its private fields. The messages it holds are
:class:`~store.messaging.stored.StoredMessage` (re-exported here).

Thread-safety: a StorageManager may be shared between threads. One lock (the state's) guards
the in-memory state and orders journal appends with it; waits for durability happen outside
the lock, and a BLOCKed sender waits on a condition of that lock, released by an ack on any
thread.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from store.errors import JournalStateError, StoreError
from store.messaging import records as r
from store.messaging.depaging import paged_message, take_ready
from store.messaging.expiry import ExpiryScanner, expire_due
from store.messaging.ids import DEFAULT_BATCH
from store.messaging.loader import load_into
from store.messaging.message_records import (
    PagedMessage,
    new_paged,
)
from store.messaging.moves import move_away
from store.messaging.pager import DROP, PAGE
from store.messaging.recovery import Progress, Recovery
from store.messaging.state import ManagerState, TransactionWork
from store.messaging.stored import StoredMessage
from store.messaging.transactions import Transaction
from store.messaging.values import (
    ANYCAST,
    ROUTING_TYPES,
    AddressInfo,
    Delivery,
    Message,
    QueueInfo,
    dup_bytes,
)
from store.paging.api import PagePosition

if TYPE_CHECKING:
    from store.store import Store

__all__ = ["StorageManager", "StoredMessage"]

log = logging.getLogger(__name__)


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
        #: Everything the manager holds in memory, shared with its loader and transactions.
        st = self._state = ManagerState(
            store, clock=clock, id_batch=id_batch, stamp_timestamps=stamp_timestamps
        )
        self._store = store
        #: The store was opened read-only: the load sweeps nothing, close records nothing.
        self.read_only = store.read_only
        st.dead_letter = lambda q, mid: move_away(st, self, q, mid, expiry=False)
        #: The expiry scan's thread, started by the load (message-expiry-scan-period).
        self._scanner: ExpiryScanner | None = None
        # Fixed for the manager's life, bound here for the hot paths.
        self._journal = st.journal
        self._lock = st.lock
        self._pager = st.pager

    # -- life cycle -------------------------------------------------------------------------

    def load(self, progress: Progress | None = None, *, skip_damaged: bool = False) -> Recovery:
        """Load both journals and rebuild addresses, queues, messages, duplicate-id caches and
        prepared transactions (see :mod:`store.messaging.recovery`); returns the
        :class:`Recovery`. ``progress(phase, done, total)`` is called during long loads.

        ``skip_damaged`` (a store opened read-only only: what ``store data exp
        --skip-damaged`` loads with): a queued large message whose body is gone or of another
        size is left out instead of refusing the load, and a later :meth:`browse` reads a
        page's damaged records (framing intact) as if they were not there; each is listed in
        :attr:`skipped`. A damaged journal record still raises (salvage the journal first).

        Raises JournalStateError when called twice, ValueError for ``skip_damaged`` on a
        writable store, CorruptionError for an undecodable record or a lost body, and what
        the journals raise."""
        st = self._state
        with st.lock:
            st.check_open()
            if st.loaded:
                raise JournalStateError("StorageManager.load() was already called")
            if skip_damaged and not self.read_only:
                raise ValueError("skip_damaged loads a store opened read-only only")
            st.pager.skip_damaged = skip_damaged
            rec = load_into(st, progress)
            st.policies.recovered_below = st.ids.peek  # every id after it is a new message
            st.mark_loaded()
            period = st.policies.scan_period
            if period > 0 and not self.read_only:
                self._scanner = ExpiryScanner(st, self, period)
                self._scanner.start()
            return rec

    def close(self) -> None:
        """Record the id generator's position (a clean stop), then close the store.
        Idempotent. Raises the first StoreError met, after closing the store."""
        st = self._state
        if self._scanner is not None:
            self._scanner.stop()  # without the lock: a scan in progress needs it to finish
        with st.lock:
            if not st.mark_closed():  # blocked senders see the close
                return
            try:
                if st.loaded and not self.read_only:
                    self._write_page_summaries()
                    st.ids.close()
            finally:
                self._store.close()

    def _write_page_summaries(self) -> None:
        """The page summaries of a clean close (:mod:`store.messaging.page_summary`). One that
        cannot be written is logged and skipped: it only spares the next open some reading."""
        try:
            self._state.pager.write_summaries()
        except StoreError as exc:
            log.warning("page summaries not written (the next open reads every page): %s", exc)

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

    # -- addresses and queues ---------------------------------------------------------------

    def create_address(self, name: str, routing_types: Sequence[str] = (ANYCAST,)) -> AddressInfo:
        """Create an address accepting ``routing_types``; returns its AddressInfo, durable
        when it returns. Raises StoreError when it exists, ValueError for an empty name or an
        unknown routing type, and what the bindings journal raises."""
        st = self._state
        types = tuple(dict.fromkeys(routing_types))
        if not isinstance(name, str) or not name:
            raise ValueError(f"an address needs a non-empty name, not {name!r}")
        if not types or any(t not in ROUTING_TYPES for t in types):
            raise ValueError(f"routing types are some of {ROUTING_TYPES}, not {routing_types!r}")
        with self._lock:
            st.check_ready()
            if name in st.addresses:
                raise StoreError(f"address {name!r} already exists")
            info = AddressInfo(name, types)
            rid = st.ids.next_id()
            body = r.AddressRecord(name, types).encode()
            self._store.bindings.append_add(rid, r.ADDRESS_BINDING_RECORD, body, sync=True)
            st.addresses[name] = (rid, info)
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
        st = self._state
        if not isinstance(name, str) or not name:
            raise ValueError(f"a queue needs a non-empty name, not {name!r}")
        with self._lock:
            st.check_ready()
            if name in st.queues:
                raise StoreError(f"queue {name!r} already exists")
            if address not in st.addresses:
                raise StoreError(f"address {address!r} does not exist; create it first")
            accepted = st.addresses[address][1].routing_types
            if routing_type not in accepted:
                raise ValueError(
                    f"address {address!r} accepts {', '.join(accepted)}, not {routing_type!r}"
                )
            qid = st.ids.next_id()
            body = r.QueueRecord(name, address, routing_type, filter).encode()
            self._store.bindings.append_add(qid, r.QUEUE_BINDING_RECORD, body, sync=True)
            info = QueueInfo(qid, name, address, routing_type, filter)
            st.add_queue(info)
            return info

    def delete_queue(self, name: str) -> None:
        """Delete a queue: its messages are acknowledged, and deleted where no other queue
        holds them. Returns None once durable. Raises UnknownQueueError, and what the journals
        raise."""
        st = self._state
        with self._lock:
            st.check_ready()
            queue = st.queue(name)
            # Refused, it raises before the queue's delete with nothing changed; once that is
            # durable, the acks of its messages are admitted with it.
            with self._journal.group(admit=True):
                self._store.bindings.append_delete(queue.info.id, sync=True)
                del st.queues[name]
                del st.queues_by_id[queue.info.id]
                for mid in queue.message_ids():
                    queue.remove(mid)
                    st.drop_ref(mid, queue.info.id, write_ack=True)
            self._pager.drop_queue(queue.info.address, queue.info.id)
        st.flush_messages(st.sync_non_tx)
        st.reap()

    def delete_address(self, name: str) -> None:
        """Delete an address that has no queues. Returns None once durable. Raises StoreError
        when it does not exist or still has queues, and what the bindings journal raises."""
        st = self._state
        with self._lock:
            st.check_ready()
            if name not in st.addresses:
                raise StoreError(f"address {name!r} does not exist")
            bound = sorted(q.info.name for q in st.queues.values() if q.info.address == name)
            if bound:
                raise StoreError(f"address {name!r} still has queues: {', '.join(bound)}")
            rid, _ = st.addresses.pop(name)
            self._store.bindings.append_delete(rid, sync=True)

    def addresses(self) -> list[AddressInfo]:
        """Every address, sorted by name. Raises JournalStateError before load."""
        st = self._state
        with self._lock:
            st.check_ready()
            return [info for _, info in sorted(st.addresses.values(), key=lambda a: a[1].name)]

    def queues(self) -> list[QueueInfo]:
        """Every queue, sorted by name. Raises JournalStateError before load."""
        st = self._state
        with self._lock:
            st.check_ready()
            return sorted((q.info for q in st.queues.values()), key=lambda q: q.name)

    # -- messages ---------------------------------------------------------------------------

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
        st = self._state
        dup = None if dup_id is None else dup_bytes(dup_id)
        stored = st.prepare_message(message)  # the body streams without the lock
        stored_it = False
        try:
            with self._lock:
                targets, decision = st.admit(message, queues, dup, transactional=False)
                if not targets or decision == DROP:
                    return None
                # Refused before its first record (its page included) or not at all.
                with self._journal.group(admit=message.durable):
                    self._store_message(stored, [q.info.id for q in targets], dup, decision)
                stored_it = True
        finally:
            if not stored_it:
                st.discard(stored, message)
        mid = stored.message_id
        wait = sync and message.durable
        if wait and decision == PAGE:
            self._store.paging.store(message.address).flush()
        if wait and st.sync_non_tx and (decision != PAGE or dup is not None):
            self._journal.flush()
        return mid

    def _store_message(
        self, stored: StoredMessage, qids: list[int], dup: bytes | None, decision: str
    ) -> None:
        """Lock held: the journal (or page) records of a non-transactional send, then the
        message in its queues (unless paged)."""
        st = self._state
        m, mid, journal = stored.message, stored.message_id, self._journal
        kind, record = stored.take_record()
        if decision == PAGE:
            paged = new_paged(PagedMessage, mid, 0, kind, record, tuple(qids))
            self._pager.page(m.address, paged, sync=False)
        elif m.durable:
            journal.append_add(mid, kind, record)
            for qid in qids:
                journal.append_update(mid, r.ADD_REF, r.queue_id_body(qid))
        if dup is not None:
            rid = st.dup_record_id(m)
            if rid is not None:
                journal.append_add(
                    rid, r.DUPLICATE_ID, r.DuplicateIdRecord(m.address, dup).encode()
                )
            st.add_dup(m.address, dup, rid)
        if decision != PAGE:
            st.enqueue(stored, qids)

    def receive(self, queue: str, max_messages: int = 1) -> list[Delivery]:
        """Up to ``max_messages`` messages of ``queue`` that are ready, in delivery order
        (priority, then send order; scheduled ones once due); never blocks. A message past
        its expiration is not delivered: it is moved to its expiry address or removed
        (:mod:`store.messaging.policies`) and the next one taken. Returns the deliveries
        (empty when nothing is ready). Raises ValueError for ``max_messages`` < 1,
        UnknownQueueError, and what an expiry move raises."""
        st = self._state
        if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1:
            raise ValueError(f"max_messages must be at least 1, not {max_messages!r}")
        deliveries: list[Delivery] = []
        while True:
            wanted = max_messages - len(deliveries)
            with self._lock:
                st.check_ready()
                q = st.queue(queue)
                now = st.clock()
                taken = take_ready(st, q, wanted, now)
            expired = [d for d in taken if 0 < d.message.expiration <= now]
            if not expired:
                return deliveries + taken if deliveries else taken
            for d in expired:
                assert d.message.message_id is not None
                move_away(st, self, q, d.message.message_id, expiry=True)
            deliveries += [d for d in taken if not 0 < d.message.expiration <= now]
            if len(deliveries) >= max_messages or len(taken) < wanted:
                return deliveries

    def browse(self, queue: str | None = None) -> Iterator[tuple[Message, tuple[str, ...]]]:
        """Every message still on a queue (not acknowledged: ready, scheduled, delivered, held
        by a transaction, or paged), once, in message id order, with the names of the queues
        holding it, sorted; with ``queue``, only that queue's messages (and only its name;
        UnknownQueueError when there is no such queue, before the first). Read-only: nothing
        is delivered, no delivery count changes, no paged message is read into a queue,
        nothing is written. Which messages are on which
        queues is taken when the iteration starts (under the lock; the paged ones by reading
        each page once, see ``Pager.browse_refs``); each message is read as it is yielded (a
        paged one from its page, one page kept at a time); an inline body is held only while
        its message is. Raises JournalStateError before load, and what the page stores raise
        (CorruptionError for a damaged page)."""
        st = self._state
        with self._lock:
            st.check_ready()
            names = {qid: q.info.name for qid, q in st.queues_by_id.items()}
            if queue is not None:
                only = st.queue(queue).info.id
                names = {only: queue}
            found: dict[int, tuple[StoredMessage | tuple[str, PagePosition], set[int]]] = {
                mid: (stored, on)
                for mid, stored in st.messages.items()
                if (on := set(stored.queue_ids()) & names.keys())
            }
            for mid, at_address, at, paged_on in self._pager.browse_refs():
                if on := set(paged_on) & names.keys():
                    found.setdefault(mid, ((at_address, at), set()))[1].update(on)
        page: tuple[str, int, list[bytes | None]] = ("", -1, [])
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
                raw = page[2][position.index]
                assert raw is not None  # browse_refs leaves damaged records out
                message = paged_message(st, PagedMessage.decode(raw))
            held = tuple(sorted(names[q] for q in qids if q in names))
            if held:
                yield message, held

    @property
    def skipped(self) -> list[str]:
        """What a ``load(skip_damaged=True)`` and the browses since left out, one line each
        naming the file or table, the offset and what is wrong (empty otherwise). Raises
        nothing."""
        return list(self._pager.skipped)

    def address_id(self, name: str) -> int:
        """The id of address ``name``'s bindings record (Artemis's address-binding id).
        Raises StoreError when there is no such address."""
        st = self._state
        with self._lock:
            st.check_ready()
            if name not in st.addresses:
                raise StoreError(f"address {name!r} does not exist")
            return st.addresses[name][0]

    def ack(self, queue: str, message_id: int, sync: bool = True) -> None:
        """Acknowledge a delivered message; with ``sync`` returns once durable (unless
        ``journal-sync-non-transactional`` is false). Returns None. Raises UnknownQueueError,
        UnknownMessageError when it is not delivered on that queue."""
        st = self._state
        with self._lock:
            st.check_ready()
            q = st.queue(queue)
            q.delivered(message_id)
            stored = st.messages[message_id]
            durable = stored.message.durable
            # The ack's record first: refused (the database away), it raises having changed
            # nothing, and the message stays delivered here (a later ack or cancel works).
            if stored.position is not None:
                self._pager.ack(q.info.address, q.info.id, stored.position)
            st.drop_ref(message_id, q.info.id, write_ack=True)
            q.acknowledge(message_id)
        st.flush_messages(sync and durable and st.sync_non_tx)
        st.reap()

    def cancel(self, queue: str, message_id: int) -> None:
        """Put a delivered message back at the head of its queue with its delivery count + 1
        (persisted, not waited for), deliverable again after its address's redelivery delay;
        the cancel that brings the count to ``max-delivery-attempts`` moves it to the
        dead-letter address instead (:mod:`store.messaging.policies`). Returns None. Raises
        UnknownQueueError, UnknownMessageError when it is not delivered on that queue, and
        what the journal raises (a move that failed leaves the message on its queue)."""
        st = self._state
        with self._lock:
            st.check_ready()
            q = st.queue(queue)
            dead = st.redeliver(q, message_id, held=False)
        if dead:
            move_away(st, self, q, message_id, expiry=False)

    def expire(self) -> int:
        """Move every message in memory whose expiration has passed to its expiry address, or
        remove it (what the scan every ``message-expiry-scan-period`` does; a paged message is
        checked when read back). Returns how many were moved or removed (one per queue holding
        it). Raises JournalStateError before load, and what a move raises."""
        return expire_due(self._state, self)

    def policy_counts(self) -> dict[str, dict[str, int]]:
        """What the delivery policies did since this manager was made, by original address:
        ``{"dead_lettered": {address: n}, "expired": {address: n}}`` (moved or removed).
        Raises nothing."""
        with self._lock:
            p = self._state.policies
            return {"dead_lettered": dict(p.dead_lettered), "expired": dict(p.expired)}

    @property
    def store(self) -> Store:
        """The store this manager reads and writes (its parts, its database outages)."""
        return self._store

    def paging_figures(self) -> dict[str, dict[str, int]]:
        """Every address paging has seen since the load: ``memory_bytes`` and
        ``memory_messages`` (what it holds in memory, which ``max-size-bytes`` and
        ``max-size-messages`` limit), ``pages`` (page files or rows it has now) and ``paged``
        (paged messages no queue has acknowledged yet). Raises JournalStateError before
        load."""
        with self._lock:
            self._state.check_ready()
            return {
                name: {
                    "memory_bytes": a.memory_bytes,
                    "memory_messages": a.memory_messages,
                    "pages": len(a.pages),
                    "paged": a.live,
                }
                for name, a in sorted(self._pager.address_states())
            }

    def policy_moves(self) -> int:
        """How many messages the delivery policies moved or removed since this manager was
        made (the sum of :meth:`policy_counts`), read without the lock: a cheap way to see
        that a move happened. Raises nothing."""
        return self._state.policies.moves

    def depth(self, queue: str) -> int:
        """Messages on ``queue`` not yet acknowledged (delivered, scheduled and held by a
        transaction included). Raises UnknownQueueError."""
        st = self._state
        with self._lock:
            st.check_ready()
            q = st.queue(queue)
            return q.depth() + self._pager.remaining(q.info.address, q.info.id)

    # -- transactions -----------------------------------------------------------------------

    def begin(self) -> Transaction:
        """A new transaction. Raises JournalStateError before load."""
        st = self._state
        with self._lock:
            st.check_ready()
            return Transaction(self._state, TransactionWork(st.ids.next_id()))
