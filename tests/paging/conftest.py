"""Fixtures of the paging tests: ``paging_factory``, the paging manager of the test's store
on every back-end (``backend`` or ``persistent_backend``), see :mod:`tests.paging.contract`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.paging.contract import PagingFactory
from tests.support.backends import StoreFactory


@pytest.fixture
def paging_factory(store_factory: StoreFactory) -> Iterator[PagingFactory]:
    """A :class:`PagingFactory` on the test's back-end; closed before its tables are dropped."""
    factory = PagingFactory(store_factory)
    try:
        yield factory
    finally:
        factory.teardown()
