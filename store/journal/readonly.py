"""A journal opened to be read only: its ``load()`` and nothing that writes (docs/journal.md).

The read-only tools that load a whole store through the storage manager (``store data exp``)
open each journal as a :class:`ReadOnlyJournal` over a function that replays it without
writing: the file store's offline scan (:func:`store.file.survey.scan_journal`, the load's own
dispatch over every file, read-only) or a database journal's :meth:`replay`
(:meth:`store.db.journal.DatabaseJournal.replay`: the table read in one transaction, no writer,
no clean-up of dead rows). What a normal load would also do is left undone: no torn tail is
zeroed, no interrupted compaction finished, no dead row deleted, no file pre-allocated. The
records returned are those a normal load would return.

Every append, ``compact`` and a second ``load`` raise :class:`~store.errors.JournalStateError`
naming the journal; ``flush`` and ``sync_future`` have nothing to wait for. So a code path that
would write is refused loudly instead of changing the store.

Thread-safety: ``load`` once, from one thread; the other methods from any thread.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import NoReturn

from store.errors import JournalClosedError, JournalStateError
from store.journal.api import Journal, JournalStats, LoadResult

__all__ = ["ReadOnlyJournal"]


class ReadOnlyJournal(Journal):
    """The journal ``name``, loaded by ``replay()`` and never written; ``release()`` runs at
    the first ``close``."""

    def __init__(
        self,
        name: str,
        replay: Callable[[], LoadResult],
        *,
        release: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self._replay = replay
        self._release = release
        self._lock = threading.Lock()
        self._loaded = False
        self._closed = False
        self._live = 0

    def load(self) -> LoadResult:
        with self._lock:
            if self._closed:
                raise JournalClosedError(f"journal {self.name} is closed")
            if self._loaded:
                raise JournalStateError(f"journal {self.name} is already loaded")
            self._loaded = True
        result = self._replay()
        self._live = len({r.id for r in result.records})
        return result

    def _refuse(self, what: str) -> NoReturn:
        if self._closed:
            raise JournalClosedError(f"journal {self.name} is closed")
        raise JournalStateError(f"journal {self.name} is open read-only: {what} refused")

    def append_add(
        self, id: int, user_record_type: int, data: bytes, *, sync: bool = False
    ) -> None:
        self._refuse(f"add of {id}")

    def append_update(
        self, id: int, user_record_type: int, data: bytes, *, sync: bool = False
    ) -> None:
        self._refuse(f"update of {id}")

    def append_delete(self, id: int, *, sync: bool = False) -> None:
        self._refuse(f"delete of {id}")

    def append_add_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        self._refuse(f"add of {id} in transaction {tx_id}")

    def append_update_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        self._refuse(f"update of {id} in transaction {tx_id}")

    def append_delete_tx(self, tx_id: int, id: int) -> None:
        self._refuse(f"delete of {id} in transaction {tx_id}")

    def append_prepare(self, tx_id: int, xid: bytes, *, sync: bool = True) -> None:
        self._refuse(f"prepare of transaction {tx_id}")

    def append_commit(self, tx_id: int, *, sync: bool = True) -> None:
        self._refuse(f"commit of transaction {tx_id}")

    def append_rollback(self, tx_id: int, *, sync: bool = True) -> None:
        self._refuse(f"rollback of transaction {tx_id}")

    def append_event(self, id: int, user_record_type: int, data: bytes) -> None:
        self._refuse(f"event {id}")

    def flush(self) -> None:
        return None

    def sync_future(self) -> concurrent.futures.Future[None]:
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        done.set_result(None)
        return done

    def compact(self) -> None:
        self._refuse("compaction")

    def stats(self) -> JournalStats:
        """Live record ids after the load; files and bytes are not counted (0)."""
        return JournalStats(records_live=self._live, files=0, bytes_live=0, bytes_total=0)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._release is not None:
            self._release()

    def __repr__(self) -> str:
        return f"ReadOnlyJournal({self.name!r}, closed={self._closed})"
