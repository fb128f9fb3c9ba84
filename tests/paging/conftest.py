"""Fixtures of the paging tests: ``paging_factory``, the paging manager of the test's store
on every back-end (``backend`` or ``persistent_backend``), see :mod:`tests.paging.contract`;
``db_name``, parametrised over the database back-ends (``--backends`` narrows it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.paging.contract import PagingFactory
from tests.support.backends import StoreFactory
from tests.support.db_backends import DB_BACKENDS

DB_NAMES = [spec.name for spec in DB_BACKENDS]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "db_name" in metafunc.fixturenames:
        raw = str(metafunc.config.getoption("--backends")).strip()
        chosen = DB_NAMES if raw in ("", "all") else [n for n in raw.split(",") if n in DB_NAMES]
        metafunc.parametrize("db_name", chosen)


@pytest.fixture
def paging_factory(store_factory: StoreFactory) -> Iterator[PagingFactory]:
    """A :class:`PagingFactory` on the test's back-end; closed before its tables are dropped."""
    factory = PagingFactory(store_factory)
    try:
        yield factory
    finally:
        factory.teardown()
