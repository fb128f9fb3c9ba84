"""What ``store ha status`` shows: the pair's lock, state and node id (docs/ha.md).

Thread-safety: :func:`ha_status` may be called from any thread.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from store.ha import open_node_manager

if TYPE_CHECKING:
    from store.config import StoreConfig

__all__ = ["HaStatus", "ha_status"]


@dataclass(frozen=True, slots=True)
class HaStatus:
    """The live lock and the pair's shared state as read now. ``holder`` is None when nobody
    holds the live lock (released, or expired by the database clock); ``expires_at_ms`` and
    ``database_now_ms`` are epoch ms by the database clock (None on the file store).

    Thread-safety: immutable.
    """

    kind: str
    holder: str | None
    generation: int
    expires_at_ms: int | None
    database_now_ms: int | None
    node_id: str
    state: str

    def as_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return asdict(self)


def ha_status(config: StoreConfig) -> HaStatus:
    """Read the HA status of the store ``config`` describes (creating the node manager's
    files or rows if missing, as a node's start would; taking no lock). Returns it. Raises
    what :func:`store.ha.open_node_manager` raises."""
    nm = open_node_manager(config)
    try:
        now: int | None = None
        if nm.kind == "database":
            from store.ha.database import DatabaseNodeManager

            assert isinstance(nm, DatabaseNodeManager)
            row = nm.read_live_row()
            lease_holder = row.holder if row.held else None
            generation, expires, now = row.generation, row.expires_at_ms, row.now_ms
        else:
            lease = nm.lease
            lease_holder, generation, expires = lease.holder, lease.generation, None
        return HaStatus(
            kind=nm.kind,
            holder=lease_holder,
            generation=generation,
            expires_at_ms=expires,
            database_now_ms=now,
            node_id=nm.node_id,
            state=nm.state,
        )
    finally:
        nm.close()
