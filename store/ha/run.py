"""What ``store ha run`` does, as library calls: go live in a role, then a steady writer that
appends durable records until it is stopped or the live lock is lost (DESIGN §8).

Thread-safety: :func:`go_live` and :func:`steady_writer` run on the caller's thread; ``stop``
may be set from any thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from store.errors import ConfigError, LockLostError
from store.store import open_store

if TYPE_CHECKING:
    from store.config import StoreConfig
    from store.ha.api import NodeManager

__all__ = ["RECORD_TYPE", "go_live", "steady_writer"]

#: User record type of the steady writer's records.
RECORD_TYPE = 42


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
    """Open the store through the live ``nm``, load it, and append records (ids after the
    largest loaded one, ``sync=True``) until ``stop`` is set, calling ``acknowledged(id)``
    after each durable append. Returns how many were appended. Raises LockLostError when
    the live lock is lost (a fenced write, or the node manager's notice before a write on
    the file store, whose writes cannot be fenced), and the store's errors."""
    lost = threading.Event()
    nm.on_lock_lost(lost.set)
    written = 0
    with open_store(config, node_manager=nm) as store:
        store.bindings.load()
        loaded = store.messages.load()
        next_id = max((r.id for r in loaded.records), default=0) + 1
        while not stop.is_set():
            if lost.is_set() or not nm.is_live:
                raise LockLostError("the live lock was lost: this node stopped writing")
            store.messages.append_add(next_id, RECORD_TYPE, payload, sync=True)
            acknowledged(next_id)
            next_id += 1
            written += 1
            if pause:
                stop.wait(pause)
    return written
