"""Fixtures of the reporting tests: one SparkSession for the whole session (starting Spark
takes seconds), and stores filled through the storage manager on every back-end a report
reads: the file store, PostgreSQL, MariaDB and SQLite (``tests/support`` back-ends: unique
table prefix per test, dropped after).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.backends import StoreFactory, backend_by_name, unique_prefix

REPORT_BACKENDS = ("file-nio", "postgresql", "mariadb", "sqlite")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The reports' SparkSession (local mode, built by store.reporting.session)."""
    from store.reporting.session import build_session

    session = build_session(master="local[2]", shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture(params=REPORT_BACKENDS)
def report_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A StoreFactory on each report back-end; cleans up at teardown."""
    factory = StoreFactory(backend_by_name(request.param), tmp_path, unique_prefix())
    try:
        yield factory
    finally:
        factory.teardown()
