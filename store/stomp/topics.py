"""Durable subscriptions to STOMP topics, as Artemis's STOMP makes them.

A destination that is not a queue (:meth:`~store.stomp.protocol` ``_is_queue``) is a topic:
its SENDs go to the subscribers connected now (coilmq's topic manager) and, durably, to its
durable subscriptions. A SUBSCRIBE with a ``durable-subscription-name`` header (or ActiveMQ's
``activemq.subscriptionName``, or the older ``durable-subscriber-name``) on a connection whose
CONNECT named a ``client-id`` (or with a ``client-id`` header of its own) is durable: the
topic is a MULTICAST address of the same name and the subscription a durable MULTICAST queue
``<client-id>.<name>`` bound to it (Artemis's ``StompSession``), made on the first such
SUBSCRIBE. The queue is kept while its subscriber is away and across restarts, so it gets
everything sent to the topic meanwhile; the subscriber coming back with the same client id
and name is delivered what waits. An UNSUBSCRIBE naming the durable subscription deletes the
queue (and what waits on it); one without the name only ends the delivery.

A SEND to a topic with no durable subscription stores nothing (said at DEBUG); one with
durable subscriptions is stored (routed by the storage manager to every queue of the address)
and durable before its RECEIPT.

Thread-safety: every method may be called from any connection's thread; one lock guards the
map of topics to their queues (never held while the store syncs a SEND).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any, Final

from store.errors import StoreError
from store.messaging import StorageManager
from store.messaging.values import MULTICAST

__all__ = ["DURABLE_NAME_HEADERS", "DurableTopics", "durable_name"]

log = logging.getLogger(__name__)

#: The SUBSCRIBE / UNSUBSCRIBE headers naming a durable subscription, first found wins:
#: Artemis's, ActiveMQ 5's (which Artemis accepts too) and Artemis's older spelling.
DURABLE_NAME_HEADERS: Final = (
    "durable-subscription-name",
    "activemq.subscriptionName",
    "durable-subscriber-name",
)


def durable_name(headers: Mapping[str, Any]) -> str | None:
    """The durable subscription name a frame's headers give, or None."""
    for header in DURABLE_NAME_HEADERS:
        value = headers.get(header)
        if value:
            return str(value)
    return None


class DurableTopics:
    """The durable subscriptions of one broker's store (see the module docstring)."""

    def __init__(self, manager: StorageManager) -> None:
        self.manager = manager
        self._lock = threading.Lock()
        #: topic (a MULTICAST address) -> its durable queues.
        self._queues: dict[str, set[str]] = {}
        for q in manager.queues():
            if q.routing_type == MULTICAST:
                self._queues.setdefault(q.address, set()).add(q.name)

    def queues(self, topic: str) -> list[str]:
        """The durable queues of ``topic``, sorted (empty: nothing is stored for it)."""
        with self._lock:
            return sorted(self._queues.get(topic, ()))

    def subscribe(self, topic: str, client_id: str, name: str) -> str:
        """Make (unless it exists) the durable queue of subscription ``name`` of
        ``client_id`` on ``topic``; returns the queue's name. Raises StoreError when that
        queue exists bound to another address."""
        queue = f"{client_id}.{name}"
        with self._lock:
            found = next((q for q in self.manager.queues() if q.name == queue), None)
            if found is not None and found.address != topic:
                raise StoreError(
                    f"durable subscription {name!r} of client {client_id!r} is on "
                    f"{found.address!r}, not {topic!r}: unsubscribe it first"
                )
            if found is None:
                if topic not in {a.name for a in self.manager.addresses()}:
                    self.manager.create_address(topic, routing_types=(MULTICAST,))
                self.manager.create_queue(queue, address=topic, routing_type=MULTICAST)
                log.info("durable subscription %s made on topic %s", queue, topic)
            self._queues.setdefault(topic, set()).add(queue)
        return queue

    def topic_of(self, client_id: str, name: str) -> str | None:
        """The topic durable subscription ``name`` of ``client_id`` is on, or None."""
        queue = f"{client_id}.{name}"
        with self._lock:
            return next((t for t, queues in self._queues.items() if queue in queues), None)

    def unsubscribe(self, client_id: str, name: str) -> str | None:
        """Delete the durable queue of subscription ``name`` of ``client_id`` and what waits
        on it; returns its name, or None when there is none."""
        queue = f"{client_id}.{name}"
        with self._lock:
            for queues in self._queues.values():
                if queue in queues:
                    queues.discard(queue)
                    break
            else:
                return None
            self.manager.delete_queue(queue)
        log.info("durable subscription %s removed", queue)
        return queue
