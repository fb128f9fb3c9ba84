"""Fixtures of the paging tests: ``paging_factory``, the paging manager of the test's store
on every back-end (``backend`` or ``persistent_backend``), see :mod:`tests.paging.contract`;
``db_name``, parametrised over the database back-ends (``--backends`` narrows it), and
``paging``, paging managers on a fresh store of ``db_name``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.paging.contract import PagingFactory
from tests.support.backends import StoreFactory, unique_prefix
from tests.support.db_backends import DB_BACKENDS, db_backend

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


@pytest.fixture
def paging(db_name: str, tmp_path: Path) -> Iterator[PagingFactory]:
    """Paging managers on a fresh store of ``db_name`` (tables dropped at teardown)."""
    spec = db_backend(db_name)
    factory = PagingFactory(StoreFactory(spec, tmp_path, unique_prefix()))
    try:
        yield factory
    finally:
        factory.teardown()
        spec.cleanup(factory.config)
