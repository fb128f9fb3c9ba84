"""Contract: the journal lifecycle (load once, no append before load or after close, clean close
is durable), on every back-end. Zero persistence keeps the same state rules."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from store.errors import JournalClosedError, JournalStateError
from store.journal.api import Journal
from tests.journal.contract import (
    EMPTY,
    expect_load,
    open_loaded,
    restart,
    with_long_batching,
)
from tests.support.backends import ZERO_BACKEND, BackendSpec, StoreFactory
from tests.support.model import JournalModel

Append = Callable[[Journal], None]

# Every append of the API, as a call on a journal; ids refer to nothing (the state check
# comes before any record check).
APPENDS = [
    pytest.param(lambda j: j.append_add(1, 1, b"x"), id="add"),
    pytest.param(lambda j: j.append_update(1, 1, b"x"), id="update"),
    pytest.param(lambda j: j.append_delete(1), id="delete"),
    pytest.param(lambda j: j.append_add_tx(7, 1, 1, b"x"), id="add_tx"),
    pytest.param(lambda j: j.append_update_tx(7, 1, 1, b"x"), id="update_tx"),
    pytest.param(lambda j: j.append_delete_tx(7, 1), id="delete_tx"),
    pytest.param(lambda j: j.append_prepare(7, b"xid"), id="prepare"),
    pytest.param(lambda j: j.append_commit(7), id="commit"),
    pytest.param(lambda j: j.append_rollback(7), id="rollback"),
]


def test_empty_store_opens_loads_and_reopens_empty(backend: BackendSpec, store_factory) -> None:
    """DB-1, J-7: a new store loads empty, and so does its reopen (both journals)."""
    for _ in range(2):
        store = store_factory.open()
        for journal in (store.messages, store.bindings):
            expect_load(backend, journal.load(), EMPTY)


def test_second_load_raises_journal_state_error(backend: BackendSpec, store_factory) -> None:
    """J-1: load() is called exactly once; a second call raises JournalStateError (rule 1)."""
    store = store_factory.open()
    store.messages.load()
    with pytest.raises(JournalStateError):
        store.messages.load()
    store.messages.append_add(1, 1, b"still usable")


@pytest.mark.parametrize("append", APPENDS)
def test_append_before_load_raises_journal_state_error(
    backend: BackendSpec, store_factory, append: Append
) -> None:
    """J-1: any append before load() raises JournalStateError (rule 1)."""
    store = store_factory.open()
    with pytest.raises(JournalStateError):
        append(store.messages)


@pytest.mark.parametrize("append", APPENDS)
def test_append_after_close_raises_journal_closed_error(
    backend: BackendSpec, store_factory, append: Append
) -> None:
    """Rule 5: after close() every append raises JournalClosedError."""
    journal, _ = open_loaded(store_factory)
    journal.close()
    with pytest.raises(JournalClosedError):
        append(journal)


def test_append_after_store_close_raises_journal_closed_error(
    backend: BackendSpec, store_factory
) -> None:
    """Closing the store closes both journals; their appends raise JournalClosedError."""
    store = store_factory.open()
    store.messages.load()
    store.bindings.load()
    store.close()
    for journal in (store.messages, store.bindings):
        with pytest.raises(JournalClosedError):
            journal.append_add(1, 1, b"late")


def test_close_is_idempotent(backend: BackendSpec, store_factory) -> None:
    """close() may be called again on a journal and on a store without error."""
    store = store_factory.open()
    store.messages.load()
    store.messages.close()
    store.messages.close()
    store.close()
    store.close()


def test_store_is_a_context_manager_that_closes(backend: BackendSpec, store_factory) -> None:
    """`with open_store(cfg) as s:` closes the store on exit (docs/journal.md usage)."""
    from store import open_store

    with open_store(store_factory.config) as store:
        store.messages.load()
        store.messages.append_add(1, 1, b"in the block", sync=True)
    with pytest.raises(JournalClosedError):
        store.messages.append_add(2, 1, b"after the block")
    _journal, result = open_loaded(store_factory)
    model = JournalModel()
    model.add(1, 1, b"in the block")
    expect_load(backend, result, model.expected_load())


def test_clean_close_makes_non_sync_appends_durable(backend: BackendSpec, store_factory) -> None:
    """Rule 5: a clean close makes everything appended before it durable, sync or not."""
    journal, _ = open_loaded(store_factory)
    model = JournalModel()
    for i in range(500):
        data = os.urandom(i % 97)
        journal.append_add(i, i % 256, data, sync=False)
        model.add(i, i % 256, data)
    for i in range(0, 500, 3):
        journal.append_update(i, 2, b"u", sync=False)
        model.update(i, 2, b"u")
    for i in range(0, 500, 5):
        journal.append_delete(i, sync=False)
        model.delete(i)
    journal.append_add_tx(9, 1000, 1, b"tx")
    journal.append_commit(9, sync=False)
    model.add_tx(9, 1000, 1, b"tx")
    model.commit(9)
    store_factory.close()
    restart(store_factory, model)


@pytest.mark.parametrize("batching", ["configured", "50ms-window"])
def test_close_after_traffic_returns_promptly(
    backend: BackendSpec, store_factory, batching: str
) -> None:
    """docs/journal.md "nobody waits longer than needed": closing a store right after sync and
    non-sync appends returns within 5 s every time, also inside a long batching window (a
    background writer that loses the close's wake-up shows up here as a hanging close)."""
    if batching != "configured":
        store_factory.config = with_long_batching(store_factory.config)
    model = JournalModel()
    for cycle in range(10):
        journal, _ = open_loaded(store_factory)
        journal.append_add_tx(cycle, 1000 + cycle, 1, b"t")
        journal.append_prepare(cycle, b"x", sync=True)
        journal.append_add(cycle, 1, b"c%d" % cycle, sync=False)
        model.add_tx(cycle, 1000 + cycle, 1, b"t")
        model.prepare(cycle, b"x")
        model.add(cycle, 1, b"c%d" % cycle)
        if cycle % 2:
            journal.append_commit(cycle, sync=False)
            model.commit(cycle)
        started = time.monotonic()
        store_factory.close()
        took = time.monotonic() - started
        assert took < 5, f"close took {took:.1f}s in cycle {cycle}"
    restart(store_factory, model)


def test_journal_reopens_after_closing_only_the_journal(
    backend: BackendSpec, store_factory
) -> None:
    """Closing a journal directly (not the store) also makes its appends durable."""
    journal, _ = open_loaded(store_factory)
    journal.append_add(5, 1, b"five")
    journal.close()
    model = JournalModel()
    model.add(5, 1, b"five")
    restart(store_factory, model)


def test_zero_persistence_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Zero persistence: every call accepted, nothing created on disk, loads return nothing."""
    monkeypatch.chdir(tmp_path)
    factory = StoreFactory(ZERO_BACKEND, tmp_path, "tzero0000_")
    try:
        for _ in range(2):
            store = factory.open()
            for journal in (store.messages, store.bindings):
                expect_load(ZERO_BACKEND, journal.load(), EMPTY)
                journal.append_add(1, 1, b"x", sync=True)
                journal.append_update(404, 1, b"never added")
                journal.append_delete(405)
                journal.append_add_tx(1, 2, 1, b"y")
                journal.append_prepare(1, b"xid")
                journal.append_commit(1)
                journal.append_commit(999)
                journal.append_rollback(998)
                journal.flush()
                journal.compact()
                assert journal.stats().records_live == 0
    finally:
        factory.teardown()
    assert sorted(os.listdir(tmp_path)) == [], "zero persistence must not touch the disk"
