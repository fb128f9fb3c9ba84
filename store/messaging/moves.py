"""Moving a message to its dead-letter or expiry address, or removing it
(:mod:`store.messaging.policies` says when and what the moved message carries).

A move is one storage-manager transaction: the copy is sent to the target's queues and the
original acknowledged on its queue, then committed, so the journal holds both or neither of
its halves whatever the crash point (the copy's large body, streamed before the transaction,
is swept by the next load when the commit never became durable). The message stays delivered
on its queue until then, so no receive hands it out meanwhile. A move that fails (the journal
away, the target address full under FAIL) leaves the message on its queue, back at its head,
and raises.

Thread-safety: called without the manager's lock (a large body streams without it); it takes
the lock itself.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from store.messaging.policies import (
    ACTUAL_EXPIRY,
    ORIG_ADDRESS,
    ORIG_MESSAGE_ID,
    ORIG_QUEUE,
    origin_filter,
)
from store.messaging.state import ACTIVE, ManagerState, TransactionWork
from store.messaging.transactions import Transaction
from store.messaging.values import MULTICAST, AddressInfo, Message, QueueInfo

if TYPE_CHECKING:
    from store.messaging.queues import MessageQueue

__all__ = ["Creator", "move_away", "moved_copy"]

log = logging.getLogger("store.messaging.policies")


class Creator(Protocol):
    """What auto-created resources are made with (the storage manager)."""

    def create_address(
        self, name: str, routing_types: Sequence[str] = ...
    ) -> AddressInfo: ...  # pragma: no cover

    def create_queue(
        self, name: str, *, address: str, routing_type: str = ..., filter: str | None = ...
    ) -> QueueInfo: ...  # pragma: no cover


def moved_copy(message: Message, queue: str, target: str, *, expired_at: int | None) -> Message:
    """The message a move sends to ``target``: ``message``'s body (a large one as a stream
    of its stored body), headers and properties, Artemis's ``_AMQ_ORIG_*`` properties (kept
    from an earlier move), ``_AMQ_ACTUAL_EXPIRY`` when ``expired_at`` is given, expiration
    cleared. Raises what opening a large body raises."""
    props = dict(message.properties)
    props.setdefault(ORIG_QUEUE, queue)
    if ORIG_MESSAGE_ID not in props:
        props[ORIG_ADDRESS] = message.address
        assert message.message_id is not None
        props[ORIG_MESSAGE_ID] = message.message_id
    if expired_at is not None:
        props[ACTUAL_EXPIRY] = expired_at
    types = dict(message.property_types)
    for name in (ORIG_QUEUE, ORIG_ADDRESS, ORIG_MESSAGE_ID, ACTUAL_EXPIRY):
        types.pop(name, None)  # implied by their values
    body = message.open_body() if message.is_large else message.body
    return dataclasses.replace(
        message,
        address=target,
        body=body,
        expiration=0,
        scheduled_delivery=0,
        properties=props,
        property_types=types,
        message_id=None,
        _opener=None,
    )


def move_away(
    st: ManagerState, creator: Creator, queue: MessageQueue, mid: int, *, expiry: bool
) -> int | None:
    """Without the lock: move message ``mid``, delivered on ``queue``, to the dead-letter
    (or, with ``expiry``, the expiry) address of the queue's address, or remove it when
    there is nowhere to go (module docstring). Returns the copy's id, None when removed.
    Raises what the journal and the target's policies raise (the message is then back at the
    head of its queue)."""
    info = queue.info
    settings = st.policies.settings(info.address)
    target = settings.expiry_address if expiry else settings.dead_letter_address
    if target is not None and (
        settings.auto_create_expiry_resources
        if expiry
        else settings.auto_create_dead_letter_resources
    ):
        prefix, suffix = (
            (settings.expiry_queue_prefix, settings.expiry_queue_suffix)
            if expiry
            else (settings.dead_letter_queue_prefix, settings.dead_letter_queue_suffix)
        )
        _create_resources(st, creator, target, f"{prefix}{info.address}{suffix}", info.address)
    with st.lock:
        st.check_ready()
        if mid not in queue or mid not in st.messages:
            return None  # its queue was deleted meanwhile: nothing left to move
        message = st.messages[mid].message
        names = [] if target is None else _target_queues(st, target, message)
        counts = st.policies.expired if expiry else st.policies.dead_lettered
        counts[info.address] += 1
        st.policies.moves += 1
        if not names:
            _remove(st, queue, mid, target, expiry)
            return None
    what = "has expired" if expiry else "has reached its maximum delivery attempts"
    # INFO, where Artemis says WARN: nothing is lost, and a WARNING line per move cost a
    # move as much as its sync (bench/dead_letters.py); a removal stays a WARNING.
    log.info(
        "message %d on queue %r %s; moving it to %s address %r",
        mid,
        info.name,
        what,
        "the expiry" if expiry else "the dead-letter",
        target,
    )
    copy = moved_copy(message, info.name, str(target), expired_at=st.clock() if expiry else None)
    tx = Transaction(st, TransactionWork(st.ids.next_id()))
    acked = False
    try:
        new_id = tx.send(copy, queues=names)
        tx.ack(info.name, mid)
        acked = True
        tx.commit()
    except BaseException:
        _put_back(st, tx, queue, mid, acked)
        raise
    st.reap()
    return new_id


def _create_resources(
    st: ManagerState, creator: Creator, address: str, queue: str, origin: str
) -> None:
    """The auto-created target address and its queue for ``origin``, when missing."""
    with st.lock:
        found = st.addresses.get(address)
        has_queue = queue in st.queues
    if found is None:
        creator.create_address(address, routing_types=(MULTICAST,))
        types: tuple[str, ...] = (MULTICAST,)
    else:
        types = found[1].routing_types
    if not has_queue:
        routing = MULTICAST if MULTICAST in types else types[0]
        creator.create_queue(
            queue, address=address, routing_type=routing, filter=origin_filter(origin)
        )


def _target_queues(st: ManagerState, target: str, message: Message) -> list[str]:
    """Lock held: the queues of ``target`` a message moved from ``message`` goes to (module
    docstring of :mod:`store.messaging.policies`: the one filter evaluated here)."""
    origin = message.properties.get(ORIG_ADDRESS, message.address)
    wanted = origin_filter(str(origin))
    names = []
    for q in st.queues.values():
        f = q.info.filter
        if q.info.address != target:
            continue
        if f is None or not f.startswith(f"{ORIG_ADDRESS} = '") or f == wanted:
            names.append(q.info.name)
    return sorted(names)


def _remove(
    st: ManagerState, queue: MessageQueue, mid: int, target: str | None, expiry: bool
) -> None:
    """Lock held: acknowledge the message on ``queue`` (nowhere to move it), with a WARNING."""
    info = queue.info
    if expiry:
        why = "has expired" if target is None else f"has expired; expiry address {target!r} has"
    else:
        why = (
            "has reached its maximum delivery attempts"
            if target is None
            else f"has reached its maximum delivery attempts; dead-letter address {target!r} has"
        )
    where = (
        " no queue"
        if target is not None
        else (
            " and no expiry address is configured"
            if expiry
            else " and no dead-letter address is configured"
        )
    )
    log.warning("message %d on queue %r %s%s; removing it", mid, info.name, why, where)
    stored = st.messages[mid]
    if stored.position is not None:
        st.pager.ack(info.address, info.id, stored.position)
    st.drop_ref(mid, info.id, write_ack=True)
    queue.acknowledge(mid)


def _put_back(
    st: ManagerState, tx: Transaction, queue: MessageQueue, mid: int, acked: bool
) -> None:
    """A move failed: the message goes back to the head of its queue (its count + 1)."""
    try:
        if tx.state == ACTIVE:
            tx.rollback_without_policies()  # an acked message: unheld to the head
        if not acked:
            with st.lock:
                if mid in queue:
                    entry = queue.cancel(mid, st.clock())
                    st.write_delivery_count(mid, queue.info.id, entry.delivery_count)
    except Exception as exc:  # the journal is away: the load puts it back after a restart
        log.warning("message %d could not be put back on queue %r: %s", mid, queue.info.name, exc)
