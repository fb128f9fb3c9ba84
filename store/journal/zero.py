"""Zero persistence (``persistence-enabled = false``): every call is accepted, nothing is
written, loads return nothing.

It still keeps the contract's state rules (load once, no append before load or after close),
so code that runs against it behaves the same way it will against a real store; it does not
track live ids (there is nothing to be consistent with after a restart).

A store with zero persistence is assembled by :func:`store.opening.zero.open_zero_store`.

Thread-safety: all methods may be called from any thread.
"""

from __future__ import annotations

import concurrent.futures

from store.errors import JournalClosedError, JournalStateError
from store.journal.api import Journal, JournalStats, LoadResult

__all__ = ["ZeroJournal"]


class ZeroJournal(Journal):
    """A journal that persists nothing (see module docstring)."""

    def __init__(self, name: str = "zero") -> None:
        self._name = name
        self._loaded = False
        self._closed = False
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        done.set_result(None)
        self._done = done

    def _check(self) -> None:
        if self._closed:
            raise JournalClosedError(f"journal {self._name} is closed")
        if not self._loaded:
            raise JournalStateError(f"journal {self._name}: load() must be called before appending")

    def load(self) -> LoadResult:
        if self._closed:
            raise JournalClosedError(f"journal {self._name} is closed")
        if self._loaded:
            raise JournalStateError(f"journal {self._name} is already loaded")
        self._loaded = True
        return LoadResult([], [], [])

    def append_add(
        self, id: int, user_record_type: int, data: bytes, *, sync: bool = False
    ) -> None:
        self._check()

    def append_update(
        self, id: int, user_record_type: int, data: bytes, *, sync: bool = False
    ) -> None:
        self._check()

    def append_delete(self, id: int, *, sync: bool = False) -> None:
        self._check()

    def append_add_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        self._check()

    def append_update_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        self._check()

    def append_delete_tx(self, tx_id: int, id: int) -> None:
        self._check()

    def append_prepare(self, tx_id: int, xid: bytes, *, sync: bool = True) -> None:
        self._check()

    def append_commit(self, tx_id: int, *, sync: bool = True) -> None:
        self._check()

    def append_rollback(self, tx_id: int, *, sync: bool = True) -> None:
        self._check()

    def append_event(self, id: int, user_record_type: int, data: bytes) -> None:
        self._check()

    def flush(self) -> None:
        if self._closed:
            raise JournalClosedError(f"journal {self._name} is closed")

    def sync_future(self) -> concurrent.futures.Future[None]:
        return self._done

    def compact(self) -> None:
        if self._closed:
            raise JournalClosedError(f"journal {self._name} is closed")

    def stats(self) -> JournalStats:
        return JournalStats(records_live=0, files=0, bytes_live=0, bytes_total=0)

    def close(self) -> None:
        self._closed = True
