"""Helpers shared by the contract tests (tests/journal/test_contract_*.py).

They exist so that every test says, in one readable line, what it expects from a persistent
back-end and what from zero persistence (which accepts every call that does not break the
load-once / closed state rules, and whose loads return nothing):

- :func:`raises_if_persistent`: the call must raise on a persistent back-end; zero persistence
  keeps no records, so it accepts the call;
- :func:`expect_load`: a persistent back-end loads exactly what the model says; zero persistence
  loads nothing;
- :func:`restart`: reopen the store, load one journal, check it against the model.

Thread-safety: none needed; these run on the test's thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest

from store.config import StoreConfig
from store.errors import UnknownRecordError, UnknownTransactionError
from store.journal.api import Journal, LoadResult
from tests.support.backends import BackendSpec, StoreFactory, StoreHandle
from tests.support.model import ExpectedLoad, JournalModel, assert_load_equal

__all__ = [
    "EMPTY",
    "ModelledJournal",
    "expect_load",
    "journal_of",
    "open_loaded",
    "raises_if_persistent",
    "restart",
    "with_long_batching",
]

EMPTY = ExpectedLoad([], [], [])


@contextlib.contextmanager
def raises_if_persistent(backend: BackendSpec, exc: type[BaseException]) -> Iterator[None]:
    """Expects ``exc`` from the block on a persistent back-end and no error on zero persistence.

    Returns a context manager; raises pytest's failure when the expectation is not met.
    """
    if backend.persistent:
        with pytest.raises(exc):
            yield
    else:
        yield


def expect_load(
    backend: BackendSpec, result: LoadResult, expected: ExpectedLoad, *, failed_order: bool = False
) -> None:
    """Asserts ``result`` is ``expected`` (persistent) or empty (zero); returns None.

    Raises AssertionError describing the first difference.
    """
    assert_load_equal(result, expected if backend.persistent else EMPTY, failed_order=failed_order)


def with_long_batching(config: StoreConfig, *, millis: int = 50) -> StoreConfig:
    """Returns ``config`` with a batching window of ``millis`` ms: ``journal-buffer-timeout``
    for the file store, ``jdbc-journal-sync-period`` for a database. Raises ConfigError."""
    if config.database_store is not None:
        db = config.database_store.replace(jdbc_journal_sync_period=millis)
        return config.replace(database_store=db)
    return config.replace(journal_buffer_timeout=millis * 1_000_000)


def journal_of(store: StoreHandle, which: str) -> Journal:
    """Returns the store's ``"messages"`` or ``"bindings"`` journal. Raises KeyError otherwise."""
    if which == "messages":
        return store.messages
    if which == "bindings":
        return store.bindings
    raise KeyError(which)


def open_loaded(factory: StoreFactory, which: str = "messages") -> tuple[Journal, LoadResult]:
    """(Re)opens the store and loads one journal; returns the journal and its load result.

    Raises whatever opening or loading raises.
    """
    journal = journal_of(factory.open(), which)
    return journal, journal.load()


def restart(
    factory: StoreFactory,
    model: JournalModel,
    which: str = "messages",
    *,
    failed_order: bool = False,
) -> Journal:
    """Reopens the store, checks the load of ``which`` against ``model.restart()``.

    Returns the reloaded journal, ready for appends. Raises AssertionError on a mismatch.
    """
    journal, result = open_loaded(factory, which)
    expect_load(factory.spec, result, model.restart(), failed_order=failed_order)
    return journal


class ModelledJournal:
    """A journal and its model driven together: every call goes to both, errors must agree.

    On a persistent back-end a call the model refuses (UnknownRecordError /
    UnknownTransactionError) must be refused by the journal with the same class; on zero
    persistence the journal accepts it. Calls outside the contract (ModelUsageError) are a bug
    in the test and propagate. Thread-safety: none; one thread drives it.
    """

    def __init__(self, backend: BackendSpec, journal: Journal, model: JournalModel) -> None:
        self.backend = backend
        self.journal = journal
        self.model = model

    def _both(self, model_call: Callable[[], None], journal_call: Callable[[], None]) -> None:
        try:
            model_call()
        except (UnknownRecordError, UnknownTransactionError) as refused:
            with raises_if_persistent(self.backend, type(refused)):
                journal_call()
            return
        journal_call()

    def add(self, id: int, urt: int, data: bytes, *, sync: bool = False) -> None:
        """Adds to both; returns None. Raises as the journal does."""
        self._both(
            lambda: self.model.add(id, urt, data),
            lambda: self.journal.append_add(id, urt, data, sync=sync),
        )

    def update(self, id: int, urt: int, data: bytes, *, sync: bool = False) -> None:
        """Updates in both; returns None. Raises as the journal does."""
        self._both(
            lambda: self.model.update(id, urt, data),
            lambda: self.journal.append_update(id, urt, data, sync=sync),
        )

    def delete(self, id: int, *, sync: bool = False) -> None:
        """Deletes in both; returns None. Raises as the journal does."""
        self._both(lambda: self.model.delete(id), lambda: self.journal.append_delete(id, sync=sync))

    def add_tx(self, tx: int, id: int, urt: int, data: bytes) -> None:
        """Transactional add in both; returns None. Raises as the journal does."""
        self._both(
            lambda: self.model.add_tx(tx, id, urt, data),
            lambda: self.journal.append_add_tx(tx, id, urt, data),
        )

    def update_tx(self, tx: int, id: int, urt: int, data: bytes) -> None:
        """Transactional update in both; returns None. Raises as the journal does."""
        self._both(
            lambda: self.model.update_tx(tx, id, urt, data),
            lambda: self.journal.append_update_tx(tx, id, urt, data),
        )

    def delete_tx(self, tx: int, id: int) -> None:
        """Transactional delete in both; returns None. Raises as the journal does."""
        self._both(
            lambda: self.model.delete_tx(tx, id), lambda: self.journal.append_delete_tx(tx, id)
        )

    def prepare(self, tx: int, xid: bytes, *, sync: bool = True) -> None:
        """Prepare in both; returns None. Raises as the journal does."""
        self._both(
            lambda: self.model.prepare(tx, xid),
            lambda: self.journal.append_prepare(tx, xid, sync=sync),
        )

    def commit(self, tx: int, *, sync: bool = True) -> None:
        """Commit in both; returns None. Raises as the journal does."""
        self._both(lambda: self.model.commit(tx), lambda: self.journal.append_commit(tx, sync=sync))

    def rollback(self, tx: int, *, sync: bool = True) -> None:
        """Rollback in both; returns None. Raises as the journal does."""
        self._both(
            lambda: self.model.rollback(tx), lambda: self.journal.append_rollback(tx, sync=sync)
        )

    def restart(self, factory: StoreFactory, which: str = "messages") -> None:
        """Reopens the store and checks the load; returns None. Raises AssertionError."""
        self.journal = restart(factory, self.model, which)
