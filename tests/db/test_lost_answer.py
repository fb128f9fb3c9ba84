"""A commit whose answer is lost, and one that fails before it commits (docs/db.md "Outages"): the
writer settles each on a fresh connection by looking for the batch's rows by ``seq``, so the
synchronous append returns durable, once, without a restart (:mod:`store.db.writer`,
"Outages").

The fault is injected in the driver layer only (the journal's SQL object wrapped so that its
commit raises once, after or instead of the real commit); the database is real.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from store import StoreConfig, open_store
from store.db.journal import DatabaseJournal
from store.db.migrate import drop_schema
from tests.support.backends import unique_prefix
from tests.support.db_backends import db_backend


class OperationalError(Exception):  # the DB-API's name: what a driver raises
    """What a DB-API driver raises when the connection drops during a commit."""


class _FaultySQL:
    """The journal's SQL with one commit failing: ``applied`` says whether the real commit
    ran first (its answer lost) or not (the transaction is rolled back)."""

    def __init__(self, sql: Any, *, applied: bool) -> None:
        self._sql = sql
        self._applied = applied
        self.failures = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sql, name)

    def insert_committed(self, cursor: Any, rows: list[Any], sent: Any = None) -> bool:
        return False  # every batch takes begin / statements / commit

    def commit(self, conn: Any) -> None:
        if self.failures:
            self._sql.commit(conn)
            return
        self.failures += 1
        if self._applied:
            self._sql.commit(conn)
        else:
            self._sql.rollback(conn)
        raise OperationalError("server closed the connection unexpectedly")


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreConfig]:
    made = db_backend(request.param).make_config(tmp_path, unique_prefix())
    yield made
    drop_schema(made)


@pytest.mark.parametrize("applied", [True, False], ids=["answer-lost", "not-committed"])
def test_a_failed_commit_is_settled_and_answered_once(config: StoreConfig, applied: bool) -> None:
    with open_store(config) as store:
        store.bindings.load()
        store.messages.load()
        journal = store.messages
        assert isinstance(journal, DatabaseJournal)
        journal.append_add(1, 7, b"before", sync=True)
        faulty = _FaultySQL(journal._sql, applied=applied)
        journal._sql = faulty  # type: ignore[assignment]
        journal.append_add(2, 7, b"through the fault", sync=True)  # returns: durable
        assert faulty.failures == 1, "the fault never fired"
        assert journal._started().health.outages == 1
        journal.append_add(3, 7, b"after", sync=True)
    with open_store(config) as again:
        again.bindings.load()
        records = again.messages.load().records
    assert sorted(r.id for r in records) == [1, 2, 3]  # each once, none lost
