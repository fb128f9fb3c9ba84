"""Queue browsing, as ActiveMQ 5's STOMP connector serves it (Artemis's STOMP has none).

A SUBSCRIBE with the header ``browser:true`` on a queue destination is a browser: it gets
every message on the queue at that moment as a MESSAGE frame (with ``subscription``, in store
order), nothing consumed, delivered or counted, then one more MESSAGE with the header
``browser:end``, an empty ``destination`` and ``message-id`` and no body: the browse is over
and the subscription gets nothing more (its UNSUBSCRIBE is accepted). It needs the
``browse`` permission (:mod:`store.stomp.security`), not ``consume``. A browsed message
carries no ``ack`` header and wants no ACK (an ACK of one is an ACK of nothing: ERROR, as for
any message not delivered to the connection). A browser on a queue the store does not hold
gets the end at once and creates nothing.

What "at that moment" means: which messages are on the queue is taken when the browse starts
(:meth:`store.messaging.StorageManager.browse`); one acknowledged by another consumer while
the browse runs is still sent, unless it has a large body that is already gone (then it is
left out, at DEBUG). The frames are written by the connection's own thread, the queue
manager's lock not held: consumers of the queue are not held up by a browse.
"""

from __future__ import annotations

import logging
from typing import Any

from coilmq.util.frames import MESSAGE, Frame  # type: ignore[import-untyped]

from store.errors import StoreError, StoreUnavailableError
from store.stomp.queue_store import StompQueueStore

__all__ = ["browse_queue", "is_browser"]

log = logging.getLogger(__name__)


def is_browser(headers: dict[str, Any]) -> bool:
    """Whether a SUBSCRIBE's ``headers`` ask for a browser (``browser:true``)."""
    return str(headers.get("browser", "")).strip().lower() == "true"


def browse_queue(
    queue_store: StompQueueStore, connection: Any, destination: str, sub_id: Any
) -> int:
    """Send ``connection`` every message on ``destination`` now, then the end-of-browse
    frame (see the module docstring); returns how many messages were sent. Raises OSError
    when the client's socket is gone, StoreUnavailableError when the store is, and what
    reading the store raises."""
    subscription = "0" if sub_id is None else str(sub_id)
    sent = 0
    for mid, frame in queue_store.browse(destination):
        frame.cmd = MESSAGE
        frame.headers.setdefault("message-id", str(mid))
        frame.headers["subscription"] = subscription
        try:
            connection.send_frame(frame)
        except StoreUnavailableError:
            raise
        except StoreError as exc:  # its large body went with an ack meanwhile
            log.debug("browse of %s: message %d left out: %s", destination, mid, exc)
            continue
        sent += 1
    end = {"subscription": subscription, "destination": "", "message-id": "", "browser": "end"}
    connection.send_frame(Frame(MESSAGE, headers=end, body=""))
    log.debug("browse of %s by subscription %s: %d message(s)", destination, subscription, sent)
    return sent
