"""Transactions of the storage manager: local (``begin`` … ``commit`` / ``rollback``) and XA
(``prepare(xid)`` first; a prepared transaction survives restarts as ``Recovery.prepared``).

A transaction's sends are journal ``ADD``-tx / ``UPDATE``-tx records and its acks
``UPDATE``-tx records of one journal transaction whose id comes from the id generator; nothing
of it is visible until ``commit``: its messages become deliverable then, in the order they were
sent, and the messages it acknowledged leave their queues. Until then, a message it
acknowledged is *held*: it counts in ``depth`` and is not delivered; ``rollback`` puts it back at
the head of its queue with its delivery count + 1. Duplicate ids sent in a transaction are
reserved at ``send`` and enter the address's cache at ``commit``. A transaction that wrote
nothing durable writes nothing to the journal at commit or rollback (unless it was prepared).

Thread-safety: a transaction may be used from any thread (the storage manager's lock guards
it), but its operations are meant to come from one caller in order.
"""

from __future__ import annotations

from collections.abc import Sequence

from store.errors import StoreError
from store.messaging import records as r
from store.messaging.message_records import PagedMessage, new_paged
from store.messaging.page_records import PAGE_TRANSACTION, PageTransaction
from store.messaging.pager import DROP, PAGE
from store.messaging.queues import MessageQueue
from store.messaging.state import (
    ACTIVE,
    COMMITTED,
    PREPARED,
    ROLLED_BACK,
    ManagerState,
    TransactionWork,
)
from store.messaging.stored import StoredMessage
from store.messaging.values import Message, Xid, dup_bytes

__all__ = ["ACTIVE", "COMMITTED", "PREPARED", "ROLLED_BACK", "Transaction", "TransactionWork"]


class Transaction:
    """A transaction of a :class:`~store.messaging.manager.StorageManager` (see the module
    docstring). Obtain one with ``sm.begin()`` or from ``Recovery.prepared``."""

    def __init__(self, state: ManagerState, work: TransactionWork) -> None:
        """The transaction doing ``work`` on the manager whose state is ``state``."""
        self._sm = state  # the manager's state (not ``state``, the transaction's own)
        self._work = work

    @property
    def tx_id(self) -> int:
        """The journal transaction id."""
        return self._work.tx_id

    @property
    def xid(self) -> Xid | None:
        """The XID it was prepared with, None before ``prepare``."""
        return self._work.xid

    @property
    def state(self) -> str:
        """ "active", "prepared", "committed" or "rolled back"."""
        return self._work.state

    def send(
        self,
        message: Message,
        queues: list[str] | tuple[str, ...] | None = None,
        dup_id: bytes | str | None = None,
        sync: bool = True,
    ) -> int | None:
        """Send ``message`` in this transaction, as ``StorageManager.send`` does; returns the
        message id it sets (None when routed to no queue). ``sync`` is accepted for symmetry
        with ``send`` and has no effect: a transaction is durable at ``commit``/``prepare``.
        Raises StoreError when the transaction is not active, DuplicateIdError,
        UnknownQueueError, ValueError, and what the journal raises."""
        del sync
        return self._send(message, queues, dup_id)

    def ack(self, queue: str, message_id: int) -> None:
        """Acknowledge a delivered message in this transaction (held until commit). Returns
        None. Raises StoreError when the transaction is not active, UnknownQueueError,
        UnknownMessageError when the message is not delivered on that queue."""
        self._ack(queue, message_id)

    def prepare(self, xid: Xid) -> None:
        """Prepare with ``xid``: durable once it returns (unless
        ``journal-sync-transactional`` is false). Raises StoreError when not active or when
        another prepared transaction has the same XID, and what the journal raises."""
        self._prepare(xid)

    def commit(self) -> None:
        """Commit: durable once it returns (unless ``journal-sync-transactional`` is false);
        its sends become deliverable in order, its acks final. Raises StoreError when already
        completed, and what the journal raises."""
        self._commit()

    def rollback(self) -> None:
        """Roll back: its sends are gone, the messages it acknowledged are back at the head of
        their queues with the delivery count + 1 (after their redelivery delay), or moved to
        their dead-letter address when that count reaches ``max-delivery-attempts``
        (:mod:`store.messaging.policies`). Raises StoreError when already completed, and what
        the journal raises."""
        failed: BaseException | None = None
        for queue, mid in self._rollback(policies=True):
            try:  # each move on its own: one that fails leaves its message on its queue
                self._sm.dead_letter(queue, mid)
            except Exception as exc:
                failed = failed or exc
        if failed is not None:
            raise failed

    def rollback_without_policies(self) -> None:
        """Roll back a transaction of the storage manager's own (a failed move): what it
        acknowledged goes back to the head, whatever the policies. Raises as
        :meth:`rollback`."""
        self._rollback(policies=False)

    def __repr__(self) -> str:
        return f"Transaction(tx_id={self.tx_id}, state={self.state!r}, xid={self.xid!r})"

    # The operations, with the manager's lock held; they work through the manager's state
    # (store.messaging.state), as the manager's own operations do.

    def _check_state(self, *allowed: str) -> None:
        self._sm.check_ready()
        if self._work.state not in allowed:
            raise StoreError(f"transaction {self._work.tx_id} is {self._work.state}")

    def _send(
        self,
        message: Message,
        queues: Sequence[str] | None,
        dup_id: bytes | str | None,
    ) -> int | None:
        st = self._sm
        dup = dup_bytes(dup_id)
        with st.lock:
            self._check_state(ACTIVE)
        stored = st.prepare_message(message)  # the body streams without the lock
        stored_it = False
        try:
            with st.lock:
                mid = self._send_locked(stored, queues, dup)
                stored_it = mid is not None
                return mid
        finally:
            if not stored_it:
                st.discard(stored, message)

    def _send_locked(
        self, stored: StoredMessage, queues: Sequence[str] | None, dup: bytes | None
    ) -> int | None:
        st, message, work = self._sm, stored.message, self._work
        address = message.address
        self._check_state(ACTIVE)
        targets, decision = st.admit(
            message, queues, dup, transactional=True, wait=not work.holds()
        )
        self._check_state(ACTIVE)  # a BLOCKed send may have waited
        if not targets or decision == DROP:
            return None
        if decision != PAGE and message.durable and address in work.paged_addresses:
            decision = PAGE  # never ahead of its own paged sends: they commit in send order
        mid, journal, tx = stored.message_id, st.journal, work.tx_id
        qids = [q.info.id for q in targets]
        kind, record = stored.take_record()
        if decision == PAGE:
            paged = new_paged(PagedMessage, mid, tx, kind, record, tuple(qids))
            position = st.pager.page(address, paged, sync=False)
            # Kept without its record (commit and rollback need the queues and the position
            # only), so a long transaction to a paging address holds no bodies.
            work.paged_sends.append(
                (address, position, PagedMessage(mid, tx, kind, b"", paged.queue_ids))
            )
            work.paged_addresses.add(address)
        elif message.durable:
            journal.append_add_tx(tx, mid, kind, record)
            for q in targets:
                journal.append_update_tx(tx, mid, r.ADD_REF, r.queue_id_body(q.info.id))
            work.wrote = True
        if dup is not None:
            rid = st.dup_record_id(message)
            if rid is not None:
                body = r.DuplicateIdRecord(message.address, dup).encode()
                journal.append_add_tx(tx, rid, r.DUPLICATE_ID, body)
            st.dup_cache(message.address).reserve(dup)
            work.dups.append((message.address, dup, rid))
        if decision != PAGE:
            work.sends.append((stored, qids))
            # Counted now, not at commit: what open transactions hold weighs on the limit.
            st.pager.hold_memory(address, stored.size, 1)
            held = work.memory.setdefault(address, [0, 0])
            held[0] += stored.size
            held[1] += 1
        return mid

    def _release_memory(self) -> None:
        """Lock held, at commit or rollback: uncount what its in-memory sends counted against
        their addresses' limits, and wake BLOCKed senders if that made room."""
        st, work = self._sm, self._work
        if not work.memory:
            return
        for address, (size, count) in work.memory.items():
            st.pager.hold_memory_total(address, -size, -count)
        work.memory = {}
        st.notify_space()

    def _write_page_tx(self) -> None:
        """Lock held, before PREPARE or COMMIT: the paged records are made durable, then the
        PAGE_TRANSACTION record that makes them visible joins the transaction."""
        work, st = self._work, self._sm
        if not work.paged_sends or work.page_tx_record is not None:
            return
        for address in {a for a, _, _ in work.paged_sends}:
            st.store.paging.store(address).flush()
        rid = st.ids.next_id()
        body = PageTransaction(work.tx_id, len(work.paged_sends)).encode()
        st.journal.append_add_tx(work.tx_id, rid, PAGE_TRANSACTION, body)
        work.page_tx_record = rid
        work.wrote = True

    def _ack(self, queue: str, message_id: int) -> None:
        st = self._sm
        with st.lock:
            self._check_state(ACTIVE)
            q = st.queue(queue)
            q.hold(message_id)
            stored = st.messages[message_id]
            if stored.position is not None:
                rid = st.pager.cursor_ack_tx(self._work.tx_id, q.info.id, stored.position)
                self._work.cursor_acks[q.info.id, message_id] = (stored.position, rid)
                self._work.wrote = True
            elif stored.message.durable:
                body = r.queue_id_body(q.info.id)
                st.journal.append_update_tx(self._work.tx_id, message_id, r.ACKNOWLEDGE_REF, body)
                self._work.wrote = True
            self._work.acks.append((q.info.id, message_id))

    def _prepare(self, xid: Xid) -> None:
        st = self._sm
        if not isinstance(xid, Xid):
            raise ValueError(f"prepare takes an Xid, not {xid!r}")
        with st.lock:
            self._check_state(ACTIVE)
            if xid in st.prepared:
                raise StoreError(f"another transaction is prepared with {xid!r}")
            self._write_page_tx()
            st.journal.append_prepare(self._work.tx_id, r.encode_xid(xid), sync=False)
            self._work.wrote = True
            self._work.xid = xid
            self._work.state = PREPARED
            st.add_prepared(self._work)
        st.flush_messages(st.sync_tx)

    def _commit(self) -> None:
        st = self._sm
        # One admitted group: the records after the COMMIT (old duplicate ids, messages left
        # with no queue or no ref) are never refused once it is queued.
        with st.lock, st.journal.group():
            self._check_state(ACTIVE, PREPARED)
            self._write_page_tx()
            wrote = self._work.wrote
            if wrote:
                st.journal.append_commit(self._work.tx_id, sync=False)
            self._finish(COMMITTED)
            if self._work.page_tx_record is not None:
                st.pager.commit_paged(
                    self._work.tx_id, self._work.page_tx_record, self._work.paged_sends
                )
            for address, dup, rid in self._work.dups:
                st.dup_cache(address).release(dup)
                st.add_dup(address, dup, rid)
            self._release_memory()  # the queues count them from here
            for stored, queue_ids in self._work.sends:
                st.enqueue(stored, queue_ids)
            for qid, mid in self._work.acks:
                queue = st.queues_by_id.get(qid)
                if queue is not None and mid in queue:
                    queue.remove_held(mid)
                    if (qid, mid) in self._work.cursor_acks:
                        position, rid = self._work.cursor_acks[qid, mid]
                        st.pager.acked(queue.info.address, qid, position, rid)
                    st.drop_ref(mid, qid, write_ack=False)
            for address, qid, position, rid in self._work.held_pages:
                if st.queue_address(qid) is not None:
                    st.pager.acked(address, qid, position, rid)
        st.flush_messages(wrote and st.sync_tx)
        st.reap()

    def _rollback(self, *, policies: bool) -> list[tuple[MessageQueue, int]]:
        """The rollback; returns the (queue, message id) due for their dead-letter address,
        left delivered for the caller to move without the lock."""
        st = self._sm
        dead: list[tuple[MessageQueue, int]] = []
        with st.lock, st.journal.group():  # the delivery counts after it are admitted with it
            self._check_state(ACTIVE, PREPARED)
            wrote = self._work.wrote
            if wrote:
                st.journal.append_rollback(self._work.tx_id, sync=False)
            self._finish(ROLLED_BACK)
            for address, dup, _ in self._work.dups:
                st.dup_cache(address).release(dup)
            st.pager.rollback_paged(self._work.paged_sends)
            self._release_memory()
            now = st.clock()
            # Each goes to the head: in reverse, so they come back in the order acknowledged.
            for qid, mid in reversed(self._work.acks):
                queue = st.queues_by_id.get(qid)
                if queue is None or mid not in queue:
                    continue
                if not policies:
                    entry = queue.unhold(mid, now)
                    st.write_delivery_count(mid, qid, entry.delivery_count)
                elif st.redeliver(queue, mid, held=True):
                    dead.append((queue, mid))
            for address, qid, position, _ in self._work.held_pages:
                if st.queue_address(qid) is not None:
                    st.pager.unhold(address, qid, position)
            # The large bodies of its sends, paged ones too: their page records stay in the
            # page, invisible for ever, and the bodies waited for the page to go.
            bodies = [s.message_id for s, _ in self._work.sends if s.large_size is not None]
            bodies += [
                p.message_id
                for _a, _pos, p in self._work.paged_sends
                if p.record_type == r.ADD_LARGE_MESSAGE
            ]
            st.doom_bodies(bodies)
        st.flush_messages(wrote and st.sync_tx)
        st.reap()
        return dead

    def _finish(self, state: str) -> None:
        if self._work.xid is not None:
            self._sm.remove_prepared(self._work.xid)
        self._work.state = state
