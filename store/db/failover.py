"""Several database hosts in one URL, for MySQL/MariaDB (docs/db.md "Outages"):
``jdbc:mysql://h1:p1,h2:p2/db``, and Connector/J's ``failover:``, ``sequential:``,
``loadbalance:``, ``replication:`` and MariaDB's ``aurora:`` forms of it.

PostgreSQL needs nothing here: its hosts go to libpq (``host=h1,h2 port=p1,p2``), which tries
them in order, and ``targetServerType=primary`` becomes ``target_session_attrs=read-write``.
PyMySQL takes one host, so every new connection of a MySQL/MariaDB engine with several hosts
comes from :func:`connect_writable`: the hosts in the URL's order, the first that accepts the
connection *and is writable* (``@@global.read_only`` is 0) wins. So after a failover of the
database (the old source down or made read-only, a replica promoted and made writable), the
store's reconnect after the outage (:mod:`store.db.writer`) lands on the new source by itself.
Every form takes the hosts in order, ``loadbalance:`` included: a message store writes to one
source, and spreading its connections over replicas would split its journal.

Thread-safety: :func:`connect_writable` is called by the pool from any thread; it keeps no
state.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["connect_writable"]

_log = logging.getLogger(__name__)


def connect_writable(
    dbapi: Any, hosts: Sequence[tuple[str, int | None]], params: Mapping[str, Any]
) -> Any:
    """A DB-API connection (``dbapi.connect(**params)``, host and port replaced) to the first
    of ``hosts`` that accepts it and is writable. Raises ``dbapi.OperationalError`` naming
    every host and why it was passed over when none is (an outage to the writer, which tries
    again), and what the driver raises for a refused login (not an outage: a wrong password
    is the same on every host)."""
    passed: list[str] = []
    for host, port in hosts:
        where = host if port is None else f"{host}:{port}"
        chosen = {**params, "host": host}
        if port is not None:
            chosen["port"] = port
        try:
            conn = dbapi.connect(**chosen)
        except dbapi.OperationalError as exc:
            if exc.args and exc.args[0] in (1044, 1045, 1698):  # access denied: no retry helps
                raise
            passed.append(f"{where}: {exc.args[-1] if exc.args else exc}")
            continue
        try:
            cursor = conn.cursor()
            cursor.execute("SELECT @@global.read_only")
            row = cursor.fetchone()
            cursor.close()
        except dbapi.Error as exc:
            conn.close()
            passed.append(f"{where}: {exc}")
            continue
        if row is not None and int(row[0]) == 0:
            if passed:
                _log.info("connected to %s (passed over: %s)", where, "; ".join(passed))
            return conn
        conn.close()
        passed.append(f"{where}: read-only")
    raise dbapi.OperationalError(
        2003, f"no writable database among {len(hosts)} hosts ({'; '.join(passed)})"
    )
