"""One queue's messages in memory: delivery order, scheduling, deliveries in flight.

Each message on a queue is a :class:`QueueEntry` in one of four states:

- ``READY``: deliverable now; ``take`` hands out the highest priority first and, within a
  priority, the lowest ``order`` (send order; a cancelled message gets an order below every
  other, which puts it back at the head);
- ``SCHEDULED``: held until its ``scheduled`` time (ms since the epoch), then ``READY`` again in
  its send-order place;
- ``DELIVERED``: handed out by ``take``, waiting for an ack or a cancel; never handed out again
  (until a restart rebuilds the queue);
- ``HELD``: acknowledged inside a transaction that has not completed; a rollback puts it back
  at the head, a commit removes it.

Every state counts in :meth:`MessageQueue.depth`. The ready and scheduled sets are heaps with
lazy deletion: an entry that left the state it was pushed in is skipped when popped.

Thread-safety: none; the storage manager's lock guards every queue.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from store.errors import UnknownMessageError
from store.messaging.values import QueueInfo
from store.speedups import SPEEDUPS

__all__ = ["DELIVERED", "HELD", "READY", "SCHEDULED", "MessageQueue", "QueueEntry"]

#: The compiled loop of :meth:`MessageQueue.add_entries` (``store/_speedups_load.c``; the
#: Python loop the reference), or None.
COMPILED_ADD: Callable[..., None] | None = getattr(SPEEDUPS, "add_entries_run", None)

READY: Final = 0
SCHEDULED: Final = 1
DELIVERED: Final = 2
HELD: Final = 3


@dataclass(slots=True, eq=False)
class QueueEntry:
    """One message on one queue."""

    message_id: int
    priority: int
    order: int
    delivery_count: int
    scheduled: int
    state: int


class MessageQueue:
    """The messages of one queue (see the module docstring)."""

    def __init__(self, info: QueueInfo) -> None:
        self.info = info
        self._entries: dict[int, QueueEntry] = {}
        self._ready: list[tuple[int, int, int]] = []  # (-priority, order, message id)
        self._scheduled: list[tuple[int, int, int]] = []  # (time, order, message id)
        self._head = 0  # orders given to cancelled messages: below every send order

    def __contains__(self, message_id: int) -> bool:
        return message_id in self._entries

    def depth(self) -> int:
        """Messages on the queue not yet acknowledged (every state). Raises nothing."""
        return len(self._entries)

    def message_ids(self) -> list[int]:
        """Ids of every message on the queue. Raises nothing."""
        return list(self._entries)

    def add(
        self,
        message_id: int,
        *,
        priority: int,
        order: int,
        now: int,
        delivery_count: int = 0,
        scheduled: int = 0,
    ) -> QueueEntry:
        """Put a message on the queue (ready, or scheduled when ``scheduled`` > ``now``);
        returns its entry. Raises nothing."""
        entry = QueueEntry(message_id, priority, order, delivery_count, scheduled, READY)
        self._entries[message_id] = entry
        if scheduled > now:
            entry.state = SCHEDULED
            heapq.heappush(self._scheduled, (scheduled, order, message_id))
        else:  # _make_ready_or_scheduled, written out: every send and load comes here
            heapq.heappush(self._ready, (-priority, order, message_id))
        return entry

    def add_delivered(
        self, message_id: int, priority: int, order: int, scheduled: int
    ) -> QueueEntry:
        """Put a message on the queue already delivered, as :meth:`add` then :meth:`take`
        would when it is the only ready message (a receive that found nothing ready and read
        one paged message back; ``scheduled`` is not after now); returns its entry. Raises
        nothing."""
        entry = QueueEntry(message_id, priority, order, 0, scheduled, DELIVERED)
        self._entries[message_id] = entry
        return entry

    def add_entries(self, entries: list[QueueEntry], now: int) -> None:
        """Put many messages on the queue at once, as :meth:`add` each would (a load knows a
        queue's whole contents and makes the entries itself, ``READY``): each is made ready,
        or scheduled when its ``scheduled`` time is after ``now``. Returns None. Raises
        nothing."""
        by_id = self._entries
        ready, scheduled = self._ready, self._scheduled
        if COMPILED_ADD is not None:  # the loop below, compiled
            COMPILED_ADD(entries, by_id, ready, scheduled, now, QueueEntry, READY, SCHEDULED)
            entries = []
        for entry in entries:
            mid = entry.message_id
            by_id[mid] = entry
            if entry.scheduled > now:
                entry.state = SCHEDULED
                scheduled.append((entry.scheduled, entry.order, mid))
            else:
                entry.state = READY
                ready.append((-entry.priority, entry.order, mid))
        heapq.heapify(ready)
        heapq.heapify(scheduled)

    def _make_ready_or_scheduled(self, entry: QueueEntry, now: int) -> None:
        if entry.scheduled > now:
            entry.state = SCHEDULED
            heapq.heappush(self._scheduled, (entry.scheduled, entry.order, entry.message_id))
        else:
            entry.state = READY
            heapq.heappush(self._ready, (-entry.priority, entry.order, entry.message_id))

    def _promote_due(self, now: int) -> None:
        while self._scheduled and self._scheduled[0][0] <= now:
            _, order, mid = heapq.heappop(self._scheduled)
            entry = self._entries.get(mid)
            if entry is not None and entry.state == SCHEDULED and entry.order == order:
                entry.state = READY
                heapq.heappush(self._ready, (-entry.priority, entry.order, mid))

    def take(self, max_messages: int, now: int) -> list[QueueEntry]:
        """Hand out up to ``max_messages`` ready messages in delivery order, marking them
        delivered; returns their entries. Raises nothing."""
        if not self._ready and not self._scheduled:
            return []  # (a receive of a deep queue's next paged message comes here first)
        self._promote_due(now)
        taken: list[QueueEntry] = []
        while self._ready and len(taken) < max_messages:
            _, order, mid = heapq.heappop(self._ready)
            entry = self._entries.get(mid)
            if entry is None or entry.state != READY or entry.order != order:
                continue  # stale heap item
            entry.state = DELIVERED
            taken.append(entry)
        return taken

    def _entry(self, message_id: int, state: int, action: str) -> QueueEntry:
        entry = self._entries.get(message_id)
        if entry is None or entry.state != state:
            what = "delivered" if state == DELIVERED else "held by a transaction"
            raise UnknownMessageError(
                f"cannot {action} message {message_id}: it is not {what} on queue"
                f" {self.info.name!r}"
            )
        return entry

    def _to_head(self, entry: QueueEntry, now: int, delay: int) -> None:
        self._head -= 1
        entry.order = self._head
        entry.delivery_count += 1
        if delay > 0:  # a redelivery delay: scheduled, at the head once due
            entry.scheduled = now + delay
        self._make_ready_or_scheduled(entry, now)

    def cancel(self, message_id: int, now: int, delay: int = 0) -> QueueEntry:
        """Put a delivered message back at the head with its delivery count + 1 (held back
        ``delay`` ms when given); returns its entry. Raises UnknownMessageError when it is not
        delivered on this queue."""
        entry = self._entry(message_id, DELIVERED, "cancel")
        self._to_head(entry, now, delay)
        return entry

    def claim(self, message_id: int) -> QueueEntry | None:
        """Mark a ready or scheduled message delivered (the manager moves it away: it
        expired); returns its entry, None when it is not ready or scheduled here. Raises
        nothing."""
        entry = self._entries.get(message_id)
        if entry is None or entry.state not in (READY, SCHEDULED):
            return None
        entry.state = DELIVERED  # its heap items are stale from here
        return entry

    def delivered(self, message_id: int) -> QueueEntry:
        """The entry of a delivered message, left as it is. Raises UnknownMessageError when it
        is not delivered on this queue."""
        return self._entry(message_id, DELIVERED, "acknowledge")

    def acknowledge(self, message_id: int) -> QueueEntry:
        """Remove a delivered message; returns its entry. Raises UnknownMessageError when it is
        not delivered on this queue."""
        entry = self._entry(message_id, DELIVERED, "acknowledge")
        del self._entries[message_id]
        return entry

    def hold(self, message_id: int, *, delivered_only: bool = True) -> QueueEntry:
        """Mark a message acknowledged by a pending transaction; returns its entry. A recovered
        prepared transaction holds messages that are not delivered (``delivered_only=False``).
        Raises UnknownMessageError when it is not delivered (or, with ``delivered_only=False``,
        not on this queue or already held)."""
        if delivered_only:
            entry = self._entry(message_id, DELIVERED, "acknowledge")
        else:
            found = self._entries.get(message_id)
            if found is None or found.state == HELD:
                raise UnknownMessageError(
                    f"message {message_id} is not on queue {self.info.name!r} or already held"
                )
            entry = found
        entry.state = HELD
        return entry

    def unhold(self, message_id: int, now: int, delay: int = 0) -> QueueEntry:
        """A rolled-back acknowledgement: back at the head with the delivery count + 1 (held
        back ``delay`` ms when given); returns the entry. Raises UnknownMessageError when it
        is not held."""
        entry = self._entry(message_id, HELD, "roll back the acknowledgement of")
        self._to_head(entry, now, delay)
        return entry

    def held(self, message_id: int) -> QueueEntry:
        """The entry of a message held by a transaction, left as it is. Raises
        UnknownMessageError when it is not held on this queue."""
        return self._entry(message_id, HELD, "roll back the acknowledgement of")

    def unhold_delivered(self, message_id: int) -> QueueEntry:
        """A rolled-back acknowledgement of a message about to be moved away: delivered again
        (nobody receives it meanwhile), its count + 1; returns the entry. Raises
        UnknownMessageError when it is not held."""
        entry = self._entry(message_id, HELD, "roll back the acknowledgement of")
        entry.delivery_count += 1
        entry.state = DELIVERED
        return entry

    def remove_held(self, message_id: int) -> QueueEntry:
        """A committed acknowledgement: the message leaves the queue; returns its entry.
        Raises UnknownMessageError when it is not held."""
        entry = self._entry(message_id, HELD, "commit the acknowledgement of")
        del self._entries[message_id]
        return entry

    def remove(self, message_id: int) -> QueueEntry | None:
        """Drop a message whatever its state (the queue is being deleted); returns its entry,
        None when it is not here. Raises nothing."""
        return self._entries.pop(message_id, None)
