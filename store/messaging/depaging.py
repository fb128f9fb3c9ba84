"""Taking a queue's next ready messages for ``receive``, paged ones included: the messages in
memory first, then those read back from the address's pages (docs/messaging.md#paging).

Thread-safety: every function needs the storage manager's lock held.
"""

from __future__ import annotations

import dataclasses

from store.messaging import records as r
from store.messaging.bodies import body_opener
from store.messaging.message_records import PagedMessage, decode_large_message, decode_message
from store.messaging.queues import MessageQueue
from store.messaging.state import ManagerState
from store.messaging.stored import StoredMessage
from store.messaging.values import Delivery, Message

__all__ = ["paged_message", "take_ready"]


def take_ready(st: ManagerState, q: MessageQueue, max_messages: int, now: int) -> list[Delivery]:
    """Lock held: up to ``max_messages`` ready messages of ``q`` in delivery order, marked
    delivered (paged messages after those in memory). Raises what the page store raises."""
    queue = q.info.name
    taken = q.take(max_messages, now)
    paged = None
    if len(taken) < max_messages:  # paged messages come after those in memory
        want = max_messages - len(taken)
        paged = _depage(st, q, want, now)
        if paged is None:
            taken += q.take(want, now)
        elif not taken:  # a receive of a deep queue: its next paged message
            return [paged]
    messages = st.messages
    deliveries = [Delivery(messages[e.message_id].message, queue, e.delivery_count) for e in taken]
    if paged is not None:
        deliveries.append(paged)
    return deliveries


def _depage(st: ManagerState, q: MessageQueue, n: int, now: int) -> Delivery | None:
    """Lock held: put the next ``n`` paged messages of ``q`` on it (``q`` has nothing
    ready: a receive's take came back short). One message read back and due now is the
    next delivery whatever its priority: it goes on the queue delivered, and its
    delivery is returned; otherwise None (the caller takes)."""
    info = q.info
    depaged = st.pager.depage(info.address, info.id, n)
    if len(depaged) == 1:  # a receive of a deep queue: no loop, no heap
        ((position, paged),) = depaged
        mid = paged.message_id
        stored = st.messages.get(mid)
        if stored is None:  # (not read back by another queue of the address first)
            m = (
                decode_message(paged.record, mid)
                if paged.record_type == r.ADD_MESSAGE_PROTOCOL
                else paged_message(st, paged)
            )
            if m.scheduled_delivery <= now:
                entry = q.add_delivered(mid, m.priority, next(st.order), m.scheduled_delivery)
                st.messages[mid] = StoredMessage.read_back(m, position, info.id, entry)
                return Delivery(m, q.info.name, 0)
            stored = st.messages[mid] = StoredMessage(m, position=position)
        depaged = [(position, paged)]
    for position, paged in depaged:
        stored = st.messages.get(paged.message_id)
        if stored is None:
            stored = StoredMessage(paged_message(st, paged), position=position)
            st.messages[paged.message_id] = stored
        m = stored.message
        entry = q.add(
            paged.message_id,
            priority=m.priority,
            order=next(st.order),
            now=now,
            scheduled=m.scheduled_delivery,
        )
        stored.add_ref(info.id, entry)
    return None


def paged_message(st: ManagerState, paged: PagedMessage) -> Message:
    """The message of a paged record (a large one opens its stored body). Raises
    ValueError for a bad record."""
    if paged.record_type != r.ADD_LARGE_MESSAGE:
        return paged.message()
    message, size = decode_large_message(paged.record, paged.message_id)
    opener = body_opener(st.large, paged.message_id, size)
    return dataclasses.replace(message, _opener=opener)
