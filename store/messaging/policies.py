"""Delivery policies (docs/messaging.md#delivery-policies): Artemis's address settings that
decide what becomes of a message that keeps failing or outlives its expiration.

- **Dead letters.** The ``cancel`` (or the rollback of a transaction that acknowledged it)
  that brings a message's delivery count to ``max-delivery-attempts`` (10; -1 or 0: never)
  moves it to its address's ``dead-letter-address``: a copy goes to the queues of that address
  and the original is acknowledged, in one journal transaction (:mod:`store.messaging.moves`),
  so across any crash it is on one of the two, never both, never neither. Without a
  dead-letter address, or with one that has no queue, it is removed with a WARNING naming it,
  as Artemis does. ``auto-create-dead-letter-resources`` creates the address (MULTICAST) and
  a queue ``<dead-letter-queue-prefix><address><dead-letter-queue-suffix>`` on it with the
  filter ``_AMQ_ORIG_ADDRESS = '<address>'``, as Artemis names them.
- **Expiry.** A message whose ``expiration`` (ms since the epoch; 0 never) has passed is
  never delivered: a ``receive`` that comes to it, and the scan every
  ``message-expiry-scan-period``, move it to ``expiry-address`` (auto-created like the
  dead-letter resources, prefix ``EXP.``), or remove it where there is none. The scan keeps a
  heap of the expirations of the messages in memory, so it costs in proportion to what
  expired, whatever the depth; a paged message is checked when it is read back from its page
  (the scan reads no page). At ``send``, ``expiry-delay`` gives an expiration to a message
  that has none; otherwise ``min-expiry-delay`` / ``max-expiry-delay`` bound it (one without
  an expiration gets the maximum, else the minimum), as Artemis's ARTEMIS-2726 describes.
- **The moved message** is a new message (a new id) on the target address with the body
  (a large body is streamed into a new large body, never read whole into memory), priority,
  durability and properties of the original, its expiration cleared, its delivery count 0,
  and Artemis's properties: ``_AMQ_ORIG_ADDRESS``, ``_AMQ_ORIG_QUEUE`` and
  ``_AMQ_ORIG_MESSAGE_ID`` (kept from the first move when it was moved before), and
  ``_AMQ_ACTUAL_EXPIRY`` (ms) on expiry.
- **Routing to the target.** The storage manager does not evaluate queue filters (that is the
  broker's business), with one exception it needs itself: a target queue whose filter is
  ``_AMQ_ORIG_ADDRESS = '<name>'`` (what auto-creation writes) takes only messages from that
  address; every other queue of the target address takes every moved message.
- **Redelivery delay.** A cancelled message is deliverable again no sooner than
  ``redelivery-delay`` x ``redelivery-delay-multiplier`` ^ (count - 1), capped by
  ``max-redelivery-delay``, counted from the cancel; the time is written as a
  SET_SCHEDULED_DELIVERY_TIME update beside the delivery count, so it survives a restart.
  Both updates are written while the new count is at most ``max-redelivery-records`` (10; -1
  no bound), so a message redelivered for ever writes a bounded number of records (after
  that, a restart counts from the last one written). A paged message's count and delay are
  kept in memory only (its page is not rewritten): after a restart they start again, as in
  Artemis (``QueueImpl.checkRedelivery`` writes neither update for a paged reference).

Thread-safety: :class:`Policies` is used with the storage manager's lock held, except
:meth:`Policies.settings`, which is safe from any thread.
"""

from __future__ import annotations

import heapq
import threading
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from store.config.addresses import AddressSettings
from store.messaging.message_facts import ACTUAL_EXPIRY, ORIG_ADDRESS

if TYPE_CHECKING:
    from store.config import StoreConfig
    from store.messaging.values import Message

__all__ = [
    "ACTUAL_EXPIRY",
    "ORIG_ADDRESS",
    "ORIG_MESSAGE_ID",
    "ORIG_QUEUE",
    "Policies",
    "origin_filter",
]

ORIG_QUEUE: Final = "_AMQ_ORIG_QUEUE"
ORIG_MESSAGE_ID: Final = "_AMQ_ORIG_MESSAGE_ID"


def origin_filter(address: str) -> str:
    """The filter of an auto-created dead-letter or expiry queue for ``address`` (Artemis's).
    Raises nothing."""
    return f"{ORIG_ADDRESS} = '{address.replace(chr(39), chr(39) * 2)}'"


class Policies:
    """The delivery policies of one storage manager: merged settings per address (cached),
    the expirations of the messages in memory, and what was dead-lettered or expired."""

    def __init__(self, config: StoreConfig) -> None:
        """Policies read from ``config``'s address settings. Raises nothing."""
        self._config = config
        self._settings: dict[str, AddressSettings] = {}
        self._settings_lock = threading.Lock()
        self.max_records = config.max_redelivery_records
        self.scan_period = config.message_expiry_scan_period
        #: (expiration, message id) of every message in memory that has one: a min-heap,
        #: with lazy deletion (an acknowledged message's item is dropped when popped).
        self.expirations: list[tuple[int, int]] = []
        #: The recovered messages' expirations are on the heap (the scan's first run);
        #: they are the messages with ids below ``recovered_below`` (set by the load).
        self.loaded_watched = False
        self.recovered_below = 0
        #: Messages moved or removed since the manager started, by their original address.
        self.dead_lettered: Counter[str] = Counter()
        #: Both counts together: one int a caller may read without the lock.
        self.moves = 0
        self.expired: Counter[str] = Counter()
        #: The messages a load found waiting after a move, by their original address.
        self.waiting_dead_lettered: Counter[str] = Counter()
        self.waiting_expired: Counter[str] = Counter()

    def count_waiting(self, message: Message) -> None:
        """A loaded ``message`` that a move made (it has ``_AMQ_ORIG_ADDRESS``) counts in
        :attr:`waiting_expired` or :attr:`waiting_dead_lettered`. Raises nothing."""
        origin = str(message.properties.get(ORIG_ADDRESS))
        expired = ACTUAL_EXPIRY in message.properties
        (self.waiting_expired if expired else self.waiting_dead_lettered)[origin] += 1

    def settings(self, address: str) -> AddressSettings:
        """The merged settings of ``address`` (computed once). Raises ConfigError as
        ``StoreConfig.address_settings_for``."""
        found = self._settings.get(address)
        if found is None:
            found = self._config.address_settings_for(address)
            with self._settings_lock:
                self._settings[address] = found
        return found

    def expiration_at_send(self, message: Message, clock: Callable[[], int]) -> int:
        """The expiration ``message`` is stored with (module docstring; ``clock`` gives the
        time in ms, asked only when a setting applies). Raises nothing."""
        s = self.settings(message.address)
        own = message.expiration
        if s.expiry_delay >= 0:
            return own if own else clock() + s.expiry_delay
        low, high = s.min_expiry_delay, s.max_expiry_delay
        if low < 0 and high < 0:
            return own
        now = clock()
        if not own:
            return now + (high if high >= 0 else low)
        if high >= 0 and own > now + high:
            return now + high
        if low >= 0 and own < now + low:
            return now + low
        return own

    def dead_letter_due(self, address: str, count: int) -> bool:
        """True when a delivery count of ``count`` (after the failed delivery) reaches the
        address's ``max-delivery-attempts``. Raises nothing."""
        limit = self.settings(address).max_delivery_attempts
        return limit > 0 and count >= limit

    def redelivery_delay(self, address: str, count: int) -> int:
        """The ms a message whose delivery count is now ``count`` waits before its next
        delivery. Raises nothing."""
        s = self.settings(address)
        if s.redelivery_delay <= 0:
            return 0
        delay = s.redelivery_delay * s.redelivery_delay_multiplier ** max(count - 1, 0)
        return int(min(delay, s.max_redelivery_delay))

    def records_kept(self, count: int) -> bool:
        """True when the updates of a delivery count of ``count`` are written (bounded by
        ``max-redelivery-records``). Raises nothing."""
        return self.max_records < 0 or count <= self.max_records

    def watch(self, message_id: int, expiration: int) -> None:
        """Lock held: a message with ``expiration`` (non-zero) is now in memory."""
        heapq.heappush(self.expirations, (expiration, message_id))

    def due(self, now: int) -> list[int]:
        """Lock held: pop the ids of the watched messages expired at ``now``, earliest first
        (some may be gone already: the caller looks each up). Raises nothing."""
        heap, found = self.expirations, []
        while heap and heap[0][0] <= now:
            found.append(heapq.heappop(heap)[1])
        return found
