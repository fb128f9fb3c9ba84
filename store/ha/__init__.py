"""Shared-store HA: the node manager, the live/backup lock of a primary/backup pair (docs/ha.md).

::

    from store.ha import open_node_manager

    nm = open_node_manager(config)           # file or database, from the configuration
    nm.start_primary()                       # or: nm.start_backup(); nm.await_live()
    nm.on_lock_lost(stop_everything)
    with open_store(config, node_manager=nm) as s:   # every database write is fenced
        ...
    nm.close()

A store that cannot write gives the live lock up (docs/ha.md#store-failure; Artemis stops a server
on a critical I/O error): the store reports a failed write to its node manager through
:meth:`NodeManager.store_failed <store.ha.api.NodeManager.store_failed>` — a database store from
its write fence, a file store from the file-system seam :func:`store.open_store` wraps around
it. The node stops renewing at once, says so through ``on_lock_lost`` (the documented callback:
run once, on the node manager's thread; stop the application's writes there), and then
releases the live lock, so the backup goes live on its next try without anyone restarting the
failed process.

Modules: :mod:`~store.ha.api` (the contract, states, :class:`Lease`), :mod:`~store.ha.database`
(leases in ``node-manager-store-table-name``, and the write fence), :mod:`~store.db.lease` (the
conditional ``UPDATE`` s), :mod:`~store.db.lease_sql` (per-database statements),
:mod:`~store.ha.files` (``server.lock`` and lock files in ``node-manager-lock-directory``),
:mod:`~store.ha.watch` (a file store's failed writes reported to its node manager),
:mod:`~store.ha.status` (what ``store ha status`` shows). :func:`~store.ha.api.go_live` takes a
node live in its role, as ``store ha run`` and ``store broker`` do; what runs on a live node
is above this package (``store ha run``'s writer is :mod:`store.node`, which needs the storage
manager: ``store.ha`` imports nothing above the back-ends).

Thread-safety: see each class; :func:`open_node_manager` may be called from any thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.ha.api import ACTIVE, FAILING_BACK, NOT_STARTED, PAUSED, Lease, NodeManager, go_live

if TYPE_CHECKING:
    from store.config import StoreConfig

__all__ = [
    "ACTIVE",
    "FAILING_BACK",
    "NOT_STARTED",
    "PAUSED",
    "Lease",
    "NodeManager",
    "go_live",
    "open_node_manager",
]


def open_node_manager(config: StoreConfig) -> NodeManager:
    """The node manager of the store ``config`` describes: the database node manager for a
    database store, the file node manager otherwise (its ``node-manager-lock-directory`` is
    created when missing). Nothing is locked until ``start_primary`` / ``start_backup``.

    Returns the :class:`NodeManager`. Raises ConfigError for zero persistence or bad lease
    timing, StoreUnavailableError when the database cannot be reached, StoreIOError when the
    lock directory cannot be used.
    """
    from store.errors import ConfigError

    if not config.persistence_enabled:
        raise ConfigError(
            "shared-store HA needs a persistent store",
            key="persistence-enabled",
            value=False,
            allowed="true",
        )
    if config.database_store is not None:
        from store.ha.database import DatabaseNodeManager

        return DatabaseNodeManager(config)
    from store.ha.files import FileNodeManager

    return FileNodeManager(config)
