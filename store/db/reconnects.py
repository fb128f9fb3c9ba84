"""How the parts of one database store learn that the database was away (docs/db.md
"Outages"), so each checks what it wrote before it writes more.

The journals, the page stores and the large-message store share one engine, but each notices
an outage only when one of its own statements fails, and one disconnect makes SQLAlchemy
replace every pooled connection: a page store idle while the journals rode out a failover would
write its next rows to a database that lost its earlier ones without an error. So whoever
notices an outage bumps the engine's :class:`Reconnects` count, and every part that
keeps probes (:mod:`store.db.probes` for the journals; the page stores' lengths,
:mod:`store.paging.database`; the bodies, :mod:`store.large.database`) compares the count
before its next write and checks its probes first when it moved (its own bump included; a
check that cannot reach the database is made again at the next write). A probe that fails is
:class:`~store.errors.LostDataError`, and that part writes nothing more until the store is
reopened.

Thread-safety: :meth:`Reconnects.bump` may be called from any thread; reading ``count`` is
one attribute read.
"""

from __future__ import annotations

import threading
import weakref

from sqlalchemy.engine import Engine

__all__ = ["Reconnects", "reconnects"]


class Reconnects:
    """The outages noticed on one engine, counted (module docstring)."""

    __slots__ = ("_lock", "count")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: outages noticed since the engine was made (each part counts its own once or more)
        self.count = 0

    def bump(self) -> None:
        """A part noticed an outage. Raises nothing."""
        with self._lock:
            self.count += 1


_BY_ENGINE: weakref.WeakKeyDictionary[Engine, Reconnects] = weakref.WeakKeyDictionary()
_MADE = threading.Lock()


def reconnects(engine: Engine) -> Reconnects:
    """The count shared by every part using ``engine``. Raises nothing."""
    with _MADE:
        found = _BY_ENGINE.get(engine)
        if found is None:
            found = _BY_ENGINE[engine] = Reconnects()
        return found
