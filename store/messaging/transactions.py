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

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from store.messaging.values import Message, Xid
from store.paging.api import PagePosition

if TYPE_CHECKING:
    from store.messaging.manager import StorageManager, StoredMessage

__all__ = ["ACTIVE", "COMMITTED", "PREPARED", "ROLLED_BACK", "Transaction", "TransactionWork"]

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
    #: True once a record of this transaction is in the journal.
    wrote: bool = False


class Transaction:
    """A transaction of a :class:`~store.messaging.manager.StorageManager` (see the module
    docstring). Obtain one with ``sm.begin()`` or from ``Recovery.prepared``."""

    def __init__(self, manager: StorageManager, work: TransactionWork) -> None:
        self._manager = manager
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
        return self._manager._tx_send(self._work, message, queues, dup_id)

    def ack(self, queue: str, message_id: int) -> None:
        """Acknowledge a delivered message in this transaction (held until commit). Returns
        None. Raises StoreError when the transaction is not active, UnknownQueueError,
        UnknownMessageError when the message is not delivered on that queue."""
        self._manager._tx_ack(self._work, queue, message_id)

    def prepare(self, xid: Xid) -> None:
        """Prepare with ``xid``: durable once it returns (unless
        ``journal-sync-transactional`` is false). Raises StoreError when not active or when
        another prepared transaction has the same XID, and what the journal raises."""
        self._manager._tx_prepare(self._work, xid)

    def commit(self) -> None:
        """Commit: durable once it returns (unless ``journal-sync-transactional`` is false);
        its sends become deliverable in order, its acks final. Raises StoreError when already
        completed, and what the journal raises."""
        self._manager._tx_commit(self._work)

    def rollback(self) -> None:
        """Roll back: its sends are gone, the messages it acknowledged are back at the head of
        their queues with the delivery count + 1. Raises StoreError when already completed,
        and what the journal raises."""
        self._manager._tx_rollback(self._work)

    def __repr__(self) -> str:
        return f"Transaction(tx_id={self.tx_id}, state={self.state!r}, xid={self.xid!r})"
