"""Fixtures of the storage-manager tests: the back-ends they run on, and a store factory.

``messaging_backend`` is parametrised over the file store (NIO: the journal types write the
same records, so one is enough here), PostgreSQL and SQLite, and MariaDB too in a soak
(``STORE_TEST_PROFILE=soak``: :mod:`tests.support.profile` says why CI leaves it to the
contract suites), narrowed by ``--backends`` like the contract suite; ``messaging_factory`` is a
:class:`tests.support.backends.StoreFactory` for it.

A module or test marked ``every_backend`` runs on MariaDB in CI too: the delivery policies'
tests (dead letters, expiry, redelivery delay), whose issue asks for each behaviour on the
file store, SQLite, PostgreSQL and MariaDB in CI (a move is a transaction over rows of several
tables, each dialect's to get right).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import selected_backends
from tests.support import profile
from tests.support.backends import BackendSpec, StoreFactory, unique_prefix

MESSAGING_BACKENDS = ("file-nio", "postgresql", "sqlite") + (
    ("mariadb",) if profile.full_matrix() else ()
)
EVERY_BACKEND = ("file-nio", "postgresql", "sqlite", "mariadb")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "messaging_backend" in metafunc.fixturenames:
        every = metafunc.definition.get_closest_marker("every_backend") is not None
        names = EVERY_BACKEND if every else MESSAGING_BACKENDS
        specs = [s for s in selected_backends(metafunc.config) if s.name in names]
        metafunc.parametrize("messaging_backend", specs, ids=[s.name for s in specs], indirect=True)


@pytest.fixture
def messaging_backend(request: pytest.FixtureRequest) -> BackendSpec:
    """The back-end under test."""
    spec: BackendSpec = request.param
    return spec


@pytest.fixture
def messaging_factory(messaging_backend: BackendSpec, tmp_path: Path) -> Iterator[StoreFactory]:
    """A StoreFactory for ``messaging_backend``; closes and cleans up at teardown."""
    factory = StoreFactory(messaging_backend, tmp_path, unique_prefix())
    try:
        yield factory
    finally:
        factory.teardown()
