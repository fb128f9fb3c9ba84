"""What the database large-message store checks the database still holds after an outage
(docs/db.md "Outages"; the journals' counterpart is :mod:`store.db.probes`).

A failover to a standby behind its primary, or a restore, can lose the rows of a body the
store confirmed complete (its large message would be lost) or bring back one it deleted. So
the store keeps the ids of the last bodies it completed and deleted (at most :data:`KEPT`
each) and, before its first write after an outage (one of its own statements failed for a
lost connection, or another part of the store noticed an outage: :mod:`store.db.reconnects`),
checks that each completed one still has its descriptor row and each deleted one has none. A
difference is :class:`~store.errors.LostDataError` naming the table and the bodies; the store
then refuses every write until it is reopened.

A body being deleted, or whose delete failed so that it may have committed, is not checked.

Thread-safety: every method may be called from any thread (one lock guards the ids).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from store.db.dialects import Compiled
from store.db.reconnects import Reconnects
from store.errors import LostDataError

__all__ = ["KEPT", "BodyProbes"]

#: Bodies kept of each kind (completed, deleted): the last ones.
KEPT: Final = 8


class BodyProbes:
    """The last completed and deleted bodies of one table (module docstring). ``exists``
    selects a row by ``filename``; ``name_of(id)`` is a body's descriptor row name."""

    def __init__(
        self, shared: Reconnects, table: str, exists: Compiled, name_of: Callable[[int], str]
    ) -> None:
        self._shared = shared
        self._seen = shared.count
        self._table = table
        self._exists = exists
        self._name_of = name_of
        self._lock = threading.Lock()
        self._completed: deque[int] = deque(maxlen=KEPT)
        self._deleted: deque[int] = deque(maxlen=KEPT)
        self._busy: set[int] = set()  # being deleted, or deleted in doubt
        #: set once a check found lost commits: every later write raises it
        self.lost: LostDataError | None = None

    def due(self) -> bool:
        """Whether the next write must check first. Raises nothing."""
        return self._shared.count != self._seen

    def outage(self) -> None:
        """A statement of this store failed for a lost connection. Raises nothing."""
        self._shared.bump()

    def completed(self, message_id: int) -> None:
        """The body of ``message_id`` committed complete. Raises nothing."""
        with self._lock:
            self._completed.append(message_id)

    def deleting(self, message_id: int) -> None:
        """A delete of ``message_id``'s body begins. Raises nothing."""
        with self._lock:
            self._busy.add(message_id)

    def deleted(self, message_id: int, *, confirmed: bool) -> None:
        """The delete committed (``confirmed``) or failed (it may have committed: the body is
        no longer checked either way). Raises nothing."""
        with self._lock:
            if message_id in self._completed:
                self._completed.remove(message_id)
            if confirmed:
                self._busy.discard(message_id)
                self._deleted.append(message_id)

    def check(self, conn: Any) -> None:
        """On the DB-API connection ``conn`` (in the write transaction about to run): raise
        LostDataError when a kept body shows lost commits (module docstring), and keep it in
        :attr:`lost`. Raises what the driver raises."""
        seen = self._shared.count
        with self._lock:
            present = [i for i in self._completed if i not in self._busy]
            absent = [i for i in self._deleted if i not in self._busy]
        wrong = []
        cursor = conn.cursor()
        try:
            for message_id, expected in [(i, True) for i in present] + [(i, False) for i in absent]:
                cursor.execute(self._exists.sql, (self._name_of(message_id),))
                if (cursor.fetchone() is not None) != expected:
                    state = "is gone" if expected else "is back"
                    done = "completed" if expected else "deleted"
                    wrong.append(f"the body of message {message_id}, {done}, {state}")
        finally:
            cursor.close()
        if wrong:
            self.lost = LostDataError(
                self._table,
                0,
                "after the database came back it lacks commits the store confirmed: "
                + "; ".join(wrong)
                + " (a failover to a standby behind its primary, or a restore?); the "
                "large-message store stops writing",
                hint="find what the database lost (the old primary may still hold it), then "
                "reopen the store; acknowledged large messages may be missing or come back",
            )
            raise self.lost
        self._seen = seen
