"""A STOMP broker on the store: coilmq's server with its queues kept by the storage manager.

Usage (the ``store[stomp]`` extra)::

    from store import load_config
    from store.stomp import open_broker

    broker = open_broker(load_config("broker.xml"), host="127.0.0.1", port=61613)
    broker.serve_forever()          # until broker.shutdown() from another thread
    broker.close()

or ``store broker --config broker.xml``.

Modules, one concern each:

- :mod:`~store.stomp.frames` — reading frames from a socket (split and pipelined frames);
- :mod:`~store.stomp.queue_store` — coilmq's ``QueueStore`` over the storage manager
  (frames as messages, destinations as queues);
- :mod:`~store.stomp.queue_manager` — the durable queue manager (receipts after the store,
  acknowledgement modes, redelivery, transactions);
- :mod:`~store.stomp.protocol` — coilmq's protocol classes with ACK/NACK, transactions and
  receipts routed to the durable queue manager;
- :mod:`~store.stomp.server` — the request handler and the broker (:func:`open_broker`);
- :mod:`~store.stomp.linger` — ending a refused connection without losing what the client
  was told (an ERROR, a TLS alert);
- :mod:`~store.stomp.acceptors` and :mod:`~store.stomp.tls` — broker.xml's acceptors (the
  ports, their limits) and TLS on them;
- :mod:`~store.stomp.security` and :mod:`~store.stomp.users` — logins and permissions over
  Artemis's users and roles files and ``<security-settings>``;
- :mod:`~store.stomp.topics` — durable topic subscriptions; :mod:`~store.stomp.browser` —
  queue browsers; :mod:`~store.stomp.metrics` — the Prometheus figures;
- :mod:`~store.stomp.run` — serving until told to stop, as one node of an HA pair when the
  configuration has an ``ha-policy`` (:func:`run_broker`, what ``store broker`` calls).

docs/stomp.md says how to run it and what it understands.
"""

from store.stomp.queue_store import (
    StompQueueStore,
    StompTransaction,
    StreamedFrame,
    Taken,
    frame_to_message,
    make_queue_store,
    message_to_frame,
    open_queue_store,
)
from store.stomp.run import run_broker
from store.stomp.server import StompBroker, open_broker

__all__ = [
    "StompBroker",
    "StompQueueStore",
    "StompTransaction",
    "StreamedFrame",
    "Taken",
    "frame_to_message",
    "make_queue_store",
    "message_to_frame",
    "open_broker",
    "open_queue_store",
    "run_broker",
]
