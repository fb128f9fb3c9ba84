"""Fixtures of the HA tests: a fresh store configuration per test on PostgreSQL, MariaDB,
SQLite and H2 (own table prefix, dropped at teardown), with short lease timings so failovers
are fast: renew every 200 ms, expire after 1500 ms (network timeout 1500 ms).

H2 is the JDBC database here: an H2 TCP server (``org.h2.tools.Server`` from Debian's
``/usr/share/java/h2.jar``) started once per test session on a free loopback port, so
several processes share one JDBC database (embedded Derby cannot be shared between
processes, and no Derby network client jar is installed).

Thread-safety: the test's thread only.
"""

from __future__ import annotations

import socket
import subprocess
import time
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
HA_DATABASES = ["postgresql", "mariadb", "sqlite", "h2"]
H2_JAR = "/usr/share/java/h2.jar"
_h2_url: list[str] = []


def ha_mapping(tmp_path: Path, prefix: str, which: str, **extra: Any) -> dict[str, Any]:
    """A database-store mapping with the short HA timings; ``extra`` adds database keys."""
    if which == "h2":
        assert _h2_url, "the h2_server fixture starts the server"
        mapping: dict[str, Any] = {
            "database-store": {
                "jdbc-connection-url": _h2_url[0],
                "jdbc-driver-class-name": "org.h2.Driver",
                "jdbc-driver-classpath": H2_JAR,
                "jdbc-user": "sa",
                "bindings-table-name": f"{prefix}BINDINGS",
                "message-table-name": f"{prefix}MESSAGES",
                "large-message-table-name": f"{prefix}LARGE_MESSAGES",
                "page-store-table-name": f"{prefix}PS",
                "node-manager-store-table-name": f"{prefix}NODE_MANAGER",
            }
        }
    else:
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


@pytest.fixture(scope="session")
def h2_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An H2 TCP server for the session; yields its database URL and stops it after."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = tmp_path_factory.mktemp("h2")
    server = subprocess.Popen(
        [
            "java",
            "-cp",
            H2_JAR,
            "org.h2.tools.Server",
            "-tcp",
            "-tcpPort",
            str(port),
            "-ifNotExists",
            "-baseDir",
            str(base),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert server.stdout is not None
    deadline = time.monotonic() + 30
    line = server.stdout.readline()
    while "TCP server running" not in line:
        assert line and time.monotonic() < deadline, f"H2 server did not start: {line}"
        line = server.stdout.readline()
    _h2_url.append(f"jdbc:h2:tcp://127.0.0.1:{port}/ha")
    yield _h2_url[0]
    _h2_url.clear()
    server.terminate()
    server.wait(30)


@pytest.fixture(params=HA_DATABASES)
def ha_config(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreConfig]:
    """A fresh database store configuration (tables created by the first node manager)."""
    if request.param == "h2":
        request.getfixturevalue("h2_server")
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
