"""Fixtures of the HA tests: a fresh store configuration per test on PostgreSQL, MariaDB and
SQLite (own table prefix, dropped at teardown), with short lease timings so failovers are
fast: renew every 200 ms, expire after 1500 ms (network timeout 1500 ms).

Thread-safety: the test's thread only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from store import StoreConfig
from store.db.migrate import drop_schema
from tests.support.backends import unique_prefix
from tests.support.db_backends import new_store_mapping

RENEW_MS = 200
EXPIRATION_MS = 1500
HA_DATABASES = ["postgresql", "mariadb", "sqlite"]


def ha_mapping(tmp_path: Path, prefix: str, which: str, **extra: Any) -> dict[str, Any]:
    """A database-store mapping with the short HA timings; ``extra`` adds database keys."""
    mapping = new_store_mapping(tmp_path, prefix, which)
    mapping["database-store"].update(
        {
            "jdbc-lock-renew-period": RENEW_MS,
            "jdbc-lock-expiration": EXPIRATION_MS,
            "jdbc-network-timeout": EXPIRATION_MS,
            **extra,
        }
    )
    return mapping


@pytest.fixture(params=HA_DATABASES)
def ha_config(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreConfig]:
    """A fresh database store configuration (tables created by the first node manager)."""
    config = StoreConfig.from_mapping(ha_mapping(tmp_path, unique_prefix(), request.param))
    yield config
    drop_schema(config)


@pytest.fixture
def file_config(tmp_path: Path) -> StoreConfig:
    """A file store in ``tmp_path`` whose lock directory is its own ``nm_lock`` folder."""
    return StoreConfig.from_mapping(
        {
            "journal-directory": str(tmp_path / "journal"),
            "bindings-directory": str(tmp_path / "bindings"),
            "paging-directory": str(tmp_path / "paging"),
            "large-messages-directory": str(tmp_path / "large"),
            "node-manager-lock-directory": str(tmp_path / "nm_lock"),
            "journal-type": "NIO",
        }
    )
