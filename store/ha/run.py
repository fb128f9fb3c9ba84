"""What ``store ha run`` does, as library calls: go live in a role, then a steady writer that
sends durable messages until it is stopped or the live lock is lost (docs/ha.md).

The writer sends real messages through the storage manager (to the queue ``store-ha.smoke``,
created on first use), not raw journal records: a pair an operator tried by hand is then a
store like any other, which ``store data verify`` finds clean and a broker can load. The
messages stay in the queue: they are the evidence that a takeover lost nothing
acknowledged (a smoke test runs minutes, and each waiting message costs about 1.4 KB).

Thread-safety: :func:`go_live` and :func:`steady_writer` run on the caller's thread; ``stop``
may be set from any thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from store.errors import ConfigError, LockLostError
from store.messaging import Message, StorageManager
from store.store import open_store

if TYPE_CHECKING:
    from store.config import StoreConfig
    from store.ha.api import NodeManager

__all__ = ["SMOKE_QUEUE", "go_live", "steady_writer"]

#: The address and (anycast) queue the steady writer sends to.
SMOKE_QUEUE = "store-ha.smoke"


def go_live(nm: NodeManager, role: str, *, timeout: float | None = None) -> None:
    """Make ``nm`` live in ``role``: "primary" takes the live lock (start_primary); "backup"
    takes the backup lock and waits for the live node to go (start_backup, await_live).
    Returns when live. Raises ConfigError for another role, TimeoutError, and what the node
    manager raises."""
    if role == "primary":
        nm.start_primary(timeout=timeout)
    elif role == "backup":
        nm.start_backup(timeout=timeout)
        nm.await_live(timeout=timeout)
    else:
        raise ConfigError(
            f"unknown HA role {role!r}", key="role", value=role, allowed="primary or backup"
        )


def steady_writer(
    config: StoreConfig,
    nm: NodeManager,
    *,
    acknowledged: Callable[[int], None],
    stop: threading.Event,
    payload: bytes = b"x" * 64,
    pause: float = 0.0,
) -> int:
    """Open the store through the live ``nm`` under a storage manager, load it, and send
    messages with body ``payload`` to :data:`SMOKE_QUEUE` (``sync=True``) until ``stop`` is
    set, calling ``acknowledged(message_id)`` after each durable send. Returns how many were
    sent. Raises LockLostError when the live lock is lost (a fenced write, or the node
    manager's notice before a write on the file store, whose writes cannot be fenced), and
    the store's errors."""
    lost = threading.Event()
    nm.on_lock_lost(lost.set)
    written = 0
    with StorageManager(open_store(config, node_manager=nm)) as sm:
        sm.load()
        if SMOKE_QUEUE not in {a.name for a in sm.addresses()}:
            sm.create_address(SMOKE_QUEUE)
        if SMOKE_QUEUE not in {q.name for q in sm.queues()}:
            sm.create_queue(SMOKE_QUEUE, address=SMOKE_QUEUE)
        while not stop.is_set():
            if lost.is_set() or not nm.is_live:
                raise LockLostError("the live lock was lost: this node stopped writing")
            mid = sm.send(Message(SMOKE_QUEUE, payload), sync=True)
            assert mid is not None  # its queue exists: never dropped
            acknowledged(mid)
            written += 1
            if pause:
                stop.wait(pause)
    return written
