"""Failures of the database under a running workload (docs/db.md): the server kills the store's
connections (PostgreSQL ``pg_terminate_backend``, MariaDB ``KILL``), or the writing process
is killed with SIGKILL. After reopening, the store holds exactly what was acknowledged plus
possibly some of what was not, as a prefix of each writer's operations: never a hole, never a
half-applied batch or transaction (docs/conventions.md#7). Killed connections are an outage
the journal rides out (docs/db.md "Outages", :mod:`store.db.writer`): it reconnects by
itself and the writers carry on; one refused while the database was away gets
StoreUnavailableError that applied nothing (never in doubt: the database was back at once).

Each writer thread runs its own sequence of operations on its own ids: plain adds (most not
synced, every few a synced one), deletes of its earlier ids, and transactions of several
records committed with sync. Random choices are seeded; the seed is in the failure message.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pymysql

from store import StoreConfig, open_store
from store.db.migrate import drop_schema
from store.errors import StoreLockedError, StoreUnavailableError
from tests.support.backends import file_config_mapping, unique_prefix
from tests.support.db_backends import (
    db_backend,
    kill_mysql_connections,
    mysql_url,
    postgresql_url,
    store_mapping,
)

REPO = Path(__file__).resolve().parents[2]
WRITERS = 8


@dataclass
class Writer:
    """One writer's operations: ("add", id) / ("delete", id) / ("tx", ids), and how many of
    them were acknowledged (the call returned after its commit)."""

    base: int
    ops: list[tuple[str, Any]] = field(default_factory=list)
    acked: int = 0
    error: BaseException | None = None

    def state(self, upto: int) -> set[int]:
        live: set[int] = set()
        for kind, what in self.ops[:upto]:
            if kind == "add":
                live.add(what)
            elif kind == "delete":
                live.discard(what)
            else:
                live.update(what)
        return live


def _run_writer(journal: Any, w: Writer, rng: random.Random, stop: threading.Event) -> None:
    next_id = w.base
    live: list[int] = []
    tx = w.base
    try:
        while not stop.is_set():
            roll = rng.random()
            if roll < 0.15 and live:
                victim = live.pop(rng.randrange(len(live)))
                w.ops.append(("delete", victim))
                journal.append_delete(victim, sync=True)
            elif roll < 0.30:
                tx += 1
                ids = list(range(next_id, next_id + rng.randint(2, 6)))
                next_id += len(ids)
                w.ops.append(("tx", ids))
                for i in ids:
                    journal.append_add_tx(tx, i, 1, b"t" * 50)
                journal.append_commit(tx, sync=True)
                live.extend(ids)
            else:
                sync = rng.random() < 0.3
                w.ops.append(("add", next_id))
                journal.append_add(next_id, 1, b"a" * 80, sync=sync)
                live.append(next_id)
                next_id += 1
                if not sync:
                    continue  # not acknowledged until a later sync returns
            w.acked = len(w.ops)
    except StoreUnavailableError as exc:
        w.error = exc


def _check_recovered(writers: list[Writer], loaded_ids: set[int], seed: int) -> None:
    for w in writers:
        mine = {i for i in loaded_ids if w.base <= i < w.base + 1_000_000}
        fits = [p for p in range(w.acked, len(w.ops) + 1) if w.state(p) == mine]
        assert fits, (
            f"seed {seed}: writer {w.base} has {sorted(mine)[:10]}…, which is no prefix of its "
            f"{len(w.ops)} operations at or after the {w.acked} acknowledged ones"
        )


def _workload(config: StoreConfig, kill: Any, seed: int) -> None:
    rng = random.Random(seed)
    store = open_store(config)
    store.bindings.load()
    store.messages.load()
    writers = [Writer(base=(k + 1) * 1_000_000) for k in range(WRITERS)]
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=_run_writer, args=(store.messages, w, random.Random(rng.random()), stop)
        )
        for w in writers
    ]
    for t in threads:
        t.start()
    time.sleep(0.7)
    health = store.messages._started().health
    killed = kill()
    assert killed >= 1, "no connection of the store was found to kill"
    deadline = time.monotonic() + 20
    while health.outages < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert health.outages >= 1, f"seed {seed}: the journal never rode the outage out"
    after = sum(w.acked for w in writers)
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), f"seed {seed}: a writer hangs"
    assert sum(w.acked for w in writers) > after, f"seed {seed}: no progress after reconnecting"
    for w in writers:
        if w.error is not None:
            assert isinstance(w.error, StoreUnavailableError), repr(w.error)
            assert not w.error.in_doubt, f"seed {seed}: {w.error!r}"
    store.messages.append_add(1, 1, b"after the outage", sync=True)
    store.close()  # the same store carried on: nothing to report
    with open_store(config) as again:
        again.bindings.load()
        loaded = again.messages.load()
        ids = {r.id for r in loaded.records}
        assert 1 in ids, "the write after the outage is missing"
        _check_recovered(writers, ids - {1}, seed)
        again.messages.flush()
        assert again.messages.stats().extra["rows_dead"] == 0


def test_postgresql_connections_terminated_mid_workload(tmp_path: Path) -> None:
    """pg_terminate_backend on every connection of the store while 8 threads write: the
    journal reconnects by itself, the writers carry on (none in doubt), a write after it
    succeeds on the same store, and after reopening every acknowledged operation is there
    and nothing is half-applied."""
    seed = random.randrange(2**32)
    config = db_backend("postgresql").make_config(tmp_path, unique_prefix())
    url, user, _ = postgresql_url()
    assert config.database_store is not None
    app = f"store:{config.database_store.message_table_name.lower()}"
    dsn = url.replace("jdbc:postgresql://", "postgresql://")

    def kill() -> int:
        with psycopg.connect(dsn, user=user, autocommit=True) as admin:
            rows = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (app,),
            ).fetchall()
        return len(rows)

    try:
        _workload(config, kill, seed)
    finally:
        drop_schema(config)


def _mysql_admin() -> Any:
    url, user, password = mysql_url()
    host_port = url.split("//", 1)[1].split("/", 1)[0]
    host, _, port = host_port.partition(":")
    database = url.split("//", 1)[1].split("/", 1)[1].split("?", 1)[0]
    return pymysql.connect(
        host=host,
        port=int(port or 3306),
        user=user,
        password=password or "",
        database=database,
        autocommit=True,
    )


def test_mariadb_connections_killed_mid_workload(tmp_path: Path) -> None:
    """MariaDB KILL of every connection of the store (it logs in as its own user, with a
    password: jdbc-user / jdbc-password) while 8 threads write: as for PostgreSQL."""
    seed = random.randrange(2**32)
    prefix = unique_prefix()
    base = db_backend("mariadb").make_config(tmp_path, prefix)
    user, password = f"store_{uuid.uuid4().hex[:10]}", uuid.uuid4().hex
    assert base.database_store is not None
    config = base.replace(
        database_store=base.database_store.replace(jdbc_user=user, jdbc_password=password)
    )
    admin = _mysql_admin()
    try:
        with admin.cursor() as cur:
            cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (user, password))
            cur.execute("SELECT DATABASE()")
            (database,) = cur.fetchone()
            cur.execute(f"GRANT ALL ON `{database}`.* TO %s@'%%'", (user,))

        def kill() -> int:
            return kill_mysql_connections(admin, user)

        _workload(config, kill, seed)
    finally:
        with admin.cursor() as cur:
            cur.execute("DROP USER IF EXISTS %s@'%%'", (user,))
        admin.close()
        drop_schema(base)


_KILLED_CHILD = """
import sys
from store import StoreConfig, open_store
config = StoreConfig.from_mapping(eval(sys.argv[1]))
store = open_store(config)
store.bindings.load()
store.messages.load()
i = 0
while True:
    i += 1
    if i % 5 == 0:
        store.messages.append_add_tx(i, i, 1, b"tx-a")
        store.messages.append_add_tx(i, -i, 1, b"tx-b")
        store.messages.append_commit(i, sync=True)
    else:
        store.messages.append_add(i, 1, b"plain", sync=i % 2 == 0)
        if i % 2:
            continue
    print(i, flush=True)
"""


def test_kill_9_of_a_writer_process_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """A child process writes to PostgreSQL (sync adds, unsynced adds, two-record
    transactions) and prints each acknowledged position; it is killed with SIGKILL mid-write.
    After reopening: everything up to the last acknowledged position is there, transactions
    whole or absent, and nothing after a missing record (no holes)."""
    prefix = unique_prefix()
    url, user, password = postgresql_url()
    mapping = store_mapping(url, prefix, user=user, password=password)
    config = db_backend("postgresql").make_config(tmp_path, prefix)
    assert config == StoreConfig.from_mapping(mapping)
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_CHILD, repr(mapping)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    acked = 0
    try:
        assert child.stdout is not None
        started = time.monotonic()
        while time.monotonic() - started < 1.5 or acked < 200:
            line = child.stdout.readline()
            assert line, "the child stopped writing"
            acked = int(line)
            assert time.monotonic() - started < 60
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        for line in child.stdout:  # positions printed before the kill landed
            acked = max(acked, int(line))
        deadline = time.monotonic() + 15
        while True:  # the server frees the lock when it notices the dead connection
            try:
                store = open_store(config)
                break
            except StoreLockedError:
                assert time.monotonic() < deadline, "the killed writer's lock was never freed"
                time.sleep(0.1)
        with store:
            store.bindings.load()
            loaded = store.messages.load()
        ids = {r.id for r in loaded.records}
        positions = sorted(i for i in ids if i > 0)
        assert positions[:acked] == list(range(1, acked + 1)), "an acknowledged record is missing"
        assert positions == list(range(1, len(positions) + 1)), "a hole after a lost record"
        for i in positions:
            if i % 5 == 0:
                assert -i in ids, f"transaction {i} is half there"
        assert all(-i in {p for p in positions} for i in ids if i < 0)
    finally:
        if child.poll() is None:
            child.kill()
        drop_schema(config)


def test_store_outages_counts_the_outages_its_parts_rode_out(tmp_path: Path) -> None:
    """``Store.outages``: 0 on a fresh database store, one more after its connections were
    terminated and a write rode that out; None on the file store."""
    config = db_backend("postgresql").make_config(tmp_path, unique_prefix())
    url, user, _ = postgresql_url()
    assert config.database_store is not None
    app = f"store:{config.database_store.message_table_name.lower()}"
    dsn = url.replace("jdbc:postgresql://", "postgresql://")
    try:
        with open_store(config) as store:
            store.bindings.load()
            store.messages.load()
            store.messages.append_add(1, 1, b"before", sync=True)
            assert store.outages == 0
            with psycopg.connect(dsn, user=user, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = %s AND pid <> pg_backend_pid()",
                    (app,),
                )
            store.messages.append_add(2, 1, b"after", sync=True)
            assert store.outages is not None and store.outages >= 1
    finally:
        drop_schema(config)
    file_config = StoreConfig.from_mapping(file_config_mapping(tmp_path / "f", "NIO"))
    with open_store(file_config) as store:
        assert store.outages is None
