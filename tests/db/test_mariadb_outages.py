"""MariaDB outages and several hosts in one URL, on a private server (:mod:`tests.support.
mariadb_server`; the shared one is never stopped): a restart and a crash (SIGKILL) of the server
while producers send and a consumer acknowledges are ridden out as on PostgreSQL
(tests/db/test_outages.py's checks), and a ``failover:`` URL connects to the first host that
answers and is writable, skipping one that is down and one that is read-only
(:mod:`store.db.failover`), at open and again at each reconnect.
"""

from __future__ import annotations

from collections.abc import Iterator

import pymysql
import pytest

from store import StoreConfig, open_store
from store.db.migrate import drop_schema
from store.errors import StoreUnavailableError
from tests.db.test_outages import NETWORK_TIMEOUT_MS, carries_on
from tests.support.backends import unique_prefix
from tests.support.db_backends import store_mapping
from tests.support.mariadb_server import MariaDbServer, private_mariadb
from tests.support.pg_cluster import free_port


@pytest.fixture(scope="module")
def server() -> Iterator[MariaDbServer]:
    with private_mariadb() as made:
        yield made


def _config(url: str) -> StoreConfig:
    mapping = store_mapping(
        url,
        unique_prefix(),
        user="root",
        password="",
        **{"jdbc-network-timeout": NETWORK_TIMEOUT_MS},
    )
    return StoreConfig.from_mapping(mapping)


@pytest.mark.parametrize("paged", [False, True], ids=["in-memory", "paged"])
@pytest.mark.parametrize("kill", [False, True], ids=["restart", "crash"])
def test_the_store_carries_on_through_a_mariadb_restart(
    server: MariaDbServer, kill: bool, paged: bool
) -> None:
    config = _config(server.url)
    try:
        carries_on(config, lambda: server.restart(kill=kill), paged=paged)
    finally:
        drop_schema(config)


def _tables(port: int, prefix: str) -> list[str]:
    conn = pymysql.connect(host="127.0.0.1", port=port, user="root", database="test")
    try:
        with conn.cursor() as cursor:
            cursor.execute("SHOW TABLES")
            return sorted(r[0] for r in cursor.fetchall() if r[0].lower().startswith(prefix))
    finally:
        conn.close()


def test_a_failover_url_uses_the_first_host_that_answers_and_is_writable(
    server: MariaDbServer,
) -> None:
    """Hosts: one nobody listens on, the private server made read-only, the private server
    again under another name (writable once read-only is lifted): the store opens on the
    first writable one, and after that host restarts it reconnects to it by itself."""
    server.execute("SET GLOBAL read_only = 1")
    down = free_port()
    url = (
        f"jdbc:mariadb:failover://127.0.0.1:{down},127.0.0.1:{server.port},"
        f"localhost:{server.port}/test"
    )
    config = _config(url)
    prefix = config.database_store.bindings_table_name.lower()[:10]  # type: ignore[union-attr]
    try:
        refused = pytest.raises(StoreUnavailableError, match="no writable database among 3")
        with refused, open_store(config) as store:
            store.bindings.load()
        server.execute("SET GLOBAL read_only = 0")
        with open_store(config) as store:
            store.bindings.load()
            store.messages.load()
            store.messages.append_add(1, 7, b"before", sync=True)
            assert _tables(server.port, prefix), "the store's tables are not on the server"
            server.restart()
            store.messages.append_add(2, 7, b"after", sync=True)
        with open_store(config) as again:
            again.bindings.load()
            assert sorted(r.id for r in again.messages.load().records) == [1, 2]
    finally:
        server.execute("SET GLOBAL read_only = 0")
        drop_schema(config)
