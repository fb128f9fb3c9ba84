"""Fixtures of the large-message tests.

``body_backend`` runs a test once per *kind* of persistent storage: the file store once (its
large messages do not depend on ``journal-type``; NIO's back-end stands for the three) and
every database. ``body_store_factory`` is the :class:`~tests.support.backends.StoreFactory`
of that back-end (unique table prefix, cleanup at teardown). ``--backends`` selects as it
does for the contract suite.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import selected_backends
from tests.support.backends import BackendSpec, StoreFactory, unique_prefix

# The file store's three journal types share one large-message implementation.
_SAME_AS_NIO = ("file-mapped", "file-asyncio")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "body_backend" in metafunc.fixturenames:
        specs = [
            s
            for s in selected_backends(metafunc.config)
            if s.persistent and s.name not in _SAME_AS_NIO
        ]
        metafunc.parametrize("body_backend", specs, ids=[s.name for s in specs], indirect=True)


@pytest.fixture
def body_backend(request: pytest.FixtureRequest) -> BackendSpec:
    """One persistent back-end per kind of large-message storage."""
    spec: BackendSpec = request.param
    return spec


@pytest.fixture
def body_store_factory(body_backend: BackendSpec, tmp_path: Path) -> Iterator[StoreFactory]:
    """A StoreFactory for ``body_backend``; closes its stores and drops its tables after."""
    factory = StoreFactory(body_backend, tmp_path, unique_prefix())
    try:
        yield factory
    finally:
        factory.teardown()
