"""The database lease (reference §4.10, behaviours HA-16..HA-25) on PostgreSQL, MariaDB and
SQLite: acquire / renew / release as conditional UPDATEs timed by the database clock, the
generation, zombie leases, mutual exclusion under contention (threads and processes), the
node-id race, timing validation, and renew failures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from store import StoreConfig
from store.db.lease import PRIMARY_ROW
from store.errors import ConfigError
from store.ha import open_node_manager
from store.ha.database import DatabaseNodeManager
from tests.ha.conftest import EXPIRATION_MS, ha_mapping
from tests.ha.lease_child import acquire, release
from tests.support.backends import unique_prefix

ROOT = Path(__file__).resolve().parents[2]


def _nm(config: StoreConfig) -> DatabaseNodeManager:
    nm = open_node_manager(config)
    assert isinstance(nm, DatabaseNodeManager)
    return nm


def test_acquire_is_exclusive_and_not_reentrant(ha_config: StoreConfig) -> None:
    """HA-16/17/18: A takes the lock; B cannot; A cannot take it twice; B sees it held."""
    a, b = _nm(ha_config), _nm(ha_config)
    try:
        got = a.table.try_acquire(PRIMARY_ROW, a.holder)
        assert got is not None and got.generation == 1
        assert b.table.try_acquire(PRIMARY_ROW, b.holder) is None
        assert a.table.try_acquire(PRIMARY_ROW, a.holder) is None
        row = b.table.read(PRIMARY_ROW)
        assert row.held and row.holder == a.holder and row.generation == 1
        assert got.expires_at_ms - got.now_ms == EXPIRATION_MS
    finally:
        a.close()
        b.close()


def test_renew_extends_and_release_frees_keeping_the_generation(ha_config: StoreConfig) -> None:
    """HA-21: renew moves the expiry forward; after release nobody holds it, renew fails,
    and the next acquisition has the next generation."""
    a, b = _nm(ha_config), _nm(ha_config)
    try:
        got = a.table.try_acquire(PRIMARY_ROW, a.holder)
        assert got is not None
        time.sleep(0.05)
        renewed = a.table.renew(PRIMARY_ROW, a.holder, got.generation)
        assert renewed is not None and renewed.expires_at_ms > got.expires_at_ms
        assert a.table.release(PRIMARY_ROW, a.holder, got.generation)
        row = b.table.read(PRIMARY_ROW)
        assert not row.held and row.holder is None and row.generation == 1
        assert a.table.renew(PRIMARY_ROW, a.holder, got.generation) is None
        again = b.table.try_acquire(PRIMARY_ROW, b.holder)
        assert again is not None and again.generation == 2
    finally:
        a.close()
        b.close()


def test_expired_lease_is_a_zombie_taken_by_another_and_not_renewable(
    ha_config: StoreConfig,
) -> None:
    """HA-20/22: past its expiry (database clock) a lease reads as not held; an expired lease
    nobody took can still be renewed by its holder; once another takes it, the old holder's
    renew fails and the generation has risen."""
    a, b = _nm(ha_config), _nm(ha_config)
    try:
        got = a.table.try_acquire(PRIMARY_ROW, a.holder)
        assert got is not None
        time.sleep(EXPIRATION_MS / 1000 + 0.2)
        assert not b.table.read(PRIMARY_ROW).held
        assert b.lease.holder is None and b.lease.generation == 1
        assert a.table.renew(PRIMARY_ROW, a.holder, got.generation) is not None  # nobody took it
        time.sleep(EXPIRATION_MS / 1000 + 0.2)
        taken = b.table.try_acquire(PRIMARY_ROW, b.holder)
        assert taken is not None and taken.generation == 2
        assert a.table.renew(PRIMARY_ROW, a.holder, got.generation) is None
        assert b.lease.holder == b.holder
    finally:
        a.close()
        b.close()


def test_mutual_exclusion_under_many_concurrent_acquirers(
    ha_config: StoreConfig, tmp_path: Path
) -> None:
    """HA-19: 8 threads and 3 processes each take the lock 5 times and do a non-atomic
    increment while holding it: nobody is ever inside with another, the counter ends exact.

    A lease only excludes while it lasts, and these holders never renew: with eleven
    contenders on one row, two test workers and Spark beside them, an attempt took longer
    than the short lease of the other HA tests (1.5 s), a holder outlived its lease and CI
    saw the count come short. So this test gives the lease and the statements 20 s."""
    mapping = _mapping_of(ha_config)
    section = mapping["database-store"]
    assert isinstance(section, dict)
    section["jdbc-lock-expiration"] = section["jdbc-network-timeout"] = 20_000
    nm = _nm(StoreConfig.from_mapping(mapping))
    counter = tmp_path / "counter"
    counter.write_text("0")
    mapping_file = tmp_path / "config.json"
    mapping_file.write_text(json.dumps(mapping))
    inside: list[str] = []
    overlaps: list[list[str]] = []
    guard = threading.Lock()

    def worker(n: int) -> None:
        holder = f"thread-{n}-{uuid.uuid4().hex[:6]}"
        for _ in range(5):
            got = acquire(nm.table, holder, 0.005)
            with guard:
                inside.append(holder)
                if len(inside) > 1:
                    overlaps.append(list(inside))
            value = int(counter.read_text() or "0")
            time.sleep(0.01)
            counter.write_text(str(value + 1))
            with guard:
                inside.remove(holder)
            assert release(nm.table, holder, got.generation)

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.ha.lease_child", str(mapping_file), str(counter), "5"],
            cwd=ROOT,
            env=env,
        )
        for _ in range(3)
    ]
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert [c.wait(120) for c in children] == [0, 0, 0]
        assert not overlaps
        assert int(counter.read_text()) == 8 * 5 + 3 * 5
        assert nm.table.read(PRIMARY_ROW).generation == 8 * 5 + 3 * 5
    finally:
        for c in children:
            c.kill()
        nm.close()


def _mapping_of(config: StoreConfig) -> dict[str, object]:
    db = config.database_store
    assert db is not None
    section = {
        "jdbc-connection-url": db.jdbc_connection_url,
        "node-manager-store-table-name": db.node_manager_store_table_name,
        "bindings-table-name": db.bindings_table_name,
        "message-table-name": db.message_table_name,
        "large-message-table-name": db.large_message_table_name,
        "page-store-table-name": db.page_store_table_name,
        "jdbc-lock-renew-period": db.jdbc_lock_renew_period,
        "jdbc-lock-expiration": db.jdbc_lock_expiration,
        "jdbc-network-timeout": db.jdbc_network_timeout,
    }
    if db.jdbc_user:
        section["jdbc-user"] = db.jdbc_user
    if db.jdbc_driver_class_name_given:
        section["jdbc-driver-class-name"] = db.jdbc_driver_class_name
    if db.jdbc_driver_classpath:
        section["jdbc-driver-classpath"] = db.jdbc_driver_classpath
    return {"database-store": section}


def test_two_starting_nodes_agree_on_one_node_id(ha_config: StoreConfig) -> None:
    """HA-25: four node managers starting at once on a store without tables all succeed and
    read the same node id (a UUID), fixed from then on."""
    found: list[str] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            nm = _nm(ha_config)
            found.append(nm.node_id)
            nm.close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert len(found) == 4 and len(set(found)) == 1
    uuid.UUID(found[0])
    later = _nm(ha_config)
    assert later.node_id == found[0]
    later.close()


def test_lease_timing_is_validated_naming_the_keys(tmp_path: Path) -> None:
    """A renew period not below the expiration, or a network timeout above it, is a
    ConfigError naming the key, raised before anything touches the database."""
    prefix = unique_prefix()
    with pytest.raises(ConfigError) as renew:
        StoreConfig.from_mapping(
            ha_mapping(tmp_path, prefix, "sqlite", **{"jdbc-lock-renew-period": 1500})
        )
    assert renew.value.key == "jdbc-lock-renew-period"
    config = StoreConfig.from_mapping(
        ha_mapping(tmp_path, prefix, "sqlite", **{"jdbc-network-timeout": 1501})
    )
    with pytest.raises(ConfigError) as network:
        open_node_manager(config)
    assert network.value.key == "jdbc-network-timeout"
    assert "jdbc-lock-expiration" in str(network.value)
    assert not (tmp_path / "store.db").exists()


def test_a_stolen_lease_is_lost_once_on_the_node_managers_thread(ha_config: StoreConfig) -> None:
    """HA-23: a renewed lock stays held with no notification; when another holder appears
    in its row, the next renew loses it: the callbacks run exactly once, on the node
    manager's thread."""
    a = _nm(ha_config)
    calls: list[str] = []
    try:
        a.start_primary(timeout=10)
        a.on_lock_lost(lambda: calls.append(threading.current_thread().name))
        time.sleep(0.6)  # three renews
        assert a.is_live and calls == []
        t = a.table.table
        with a.engine.begin() as conn:
            conn.execute(t.update().where(t.c.id == PRIMARY_ROW).values(holder_id="99:thief"))
        deadline = time.monotonic() + 3
        while not calls and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.5)
        assert calls == ["store-ha-database"]
        assert not a.is_live
    finally:
        a.close()


def test_generation_rises_at_every_acquisition_and_state_follows(ha_config: StoreConfig) -> None:
    """HA-2: NOT_STARTED before any node went live; start_primary → ACTIVE, generation 1;
    a clean close and restart → generation 2."""
    first = _nm(ha_config)
    assert first.state == "NOT_STARTED"
    first.start_primary(timeout=10)
    assert first.state == "ACTIVE" and first.lease.generation == 1
    assert first.lease.holder == first.holder and first.lease.expires_at_ms is not None
    first.close()
    second = _nm(ha_config)
    assert second.lease.holder is None
    second.start_primary(timeout=10)
    assert second.lease.generation == 2
    second.close()


def test_a_backup_does_not_take_over_a_paused_primary(ha_config: StoreConfig) -> None:
    """HA-5: while the primary is PAUSED the backup waits (past the expiry); once the primary
    is back and then closes (state ACTIVE, lock released), the backup goes live."""
    primary, backup = _nm(ha_config), _nm(ha_config)
    went_live = threading.Event()
    try:
        primary.start_primary(timeout=10)
        backup.start_backup(timeout=10)
        waiter = threading.Thread(
            target=lambda: (backup.await_live(timeout=30), went_live.set()), daemon=True
        )
        waiter.start()
        primary.pause()
        assert primary.state == "PAUSED" and not primary.is_live
        assert not went_live.wait(EXPIRATION_MS / 1000 + 0.7)
        primary.start_primary(timeout=10)
        primary_generation = primary.lease.generation
        assert primary_generation >= 2  # its first start, then its start after the pause
        primary.close()
        assert went_live.wait(5)
        assert backup.is_live and backup.lease.holder == backup.holder
        # A takeover always raises the generation (exactly 3 on a quiet machine; a renew
        # delayed past the 1.5 s expiry under load may add one more acquisition).
        assert backup.lease.generation > primary_generation
    finally:
        primary.close()
        backup.close()


@pytest.mark.parametrize("which", ["postgresql", "mariadb"])
def test_a_node_frozen_inside_its_renew_transaction_does_not_keep_a_backup_out(
    which: str, tmp_path: Path
) -> None:
    """A node stopped between a renew's UPDATE and its COMMIT holds the lock row's write
    lock; its own engine's sessions bound an idle transaction by the expiration, so the
    server ends it and another node takes the live lock. The frozen transaction is played
    by a transaction left open on that engine with the row updated (MariaDB's ``jdbc:mariadb:``
    engine once got no bound: the dialect learns it is MariaDB only at its first connect)."""
    from store.db.migrate import drop_schema

    config = StoreConfig.from_mapping(ha_mapping(tmp_path, unique_prefix(), which))
    frozen, other = _nm(config), _nm(config)
    t = frozen.table.table
    conn = frozen.engine.connect()
    try:
        conn.begin()
        conn.execute(t.update().where(t.c.id == PRIMARY_ROW).values(holder_id=t.c.holder_id))
        started = time.monotonic()
        other.start_primary(timeout=EXPIRATION_MS / 1000 + 5)
        assert other.is_live
        assert time.monotonic() - started <= EXPIRATION_MS / 1000 + 4
        with pytest.raises(sa.exc.DBAPIError):  # the server ended the idle transaction
            conn.execute(sa.select(t.c.id))
    finally:
        conn.invalidate()
        conn.close()
        other.close()
        frozen.close()
        drop_schema(config)


@pytest.mark.parametrize("which", ["postgresql"])
def test_a_failed_renew_is_retried_while_the_lease_lasts(which: str, tmp_path: Path) -> None:
    """A renew failure (the node manager's connections killed with pg_terminate_backend,
    only its own, by application_name) is retried while the lease leaves a renew period:
    the lock is kept and nothing is notified."""
    from store.db.migrate import drop_schema

    app = f"ha-renew-{uuid.uuid4().hex[:8]}"
    mapping = ha_mapping(tmp_path, unique_prefix(), which)
    url = mapping["database-store"]["jdbc-connection-url"]
    mapping["database-store"]["jdbc-connection-url"] = f"{url}?ApplicationName={app}"
    config = StoreConfig.from_mapping(mapping)
    nm = _nm(config)
    calls: list[int] = []
    admin = sa.create_engine("postgresql+psycopg://postgres@127.0.0.1:5432/test")

    def kill() -> None:
        with admin.begin() as conn:
            conn.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = :app"
                ),
                {"app": app},
            )

    try:
        nm.start_primary(timeout=10)
        nm.on_lock_lost(lambda: calls.append(1))
        kill()
        time.sleep(0.8)  # four renews: the first fails, the next ones reconnect
        assert nm.is_live and calls == []
        assert nm.table.read(PRIMARY_ROW).held
    finally:
        nm.close()
        admin.dispose()
        drop_schema(config)


def test_a_database_outage_loses_the_lock_once_after_retrying(tmp_path: Path) -> None:
    """PostgreSQL, a dedicated user (so only this test's sessions are touched): the node
    manager's user may no longer log in and its sessions are terminated. Renews fail and are
    retried while the lease leaves a renew period, so the loss comes late in the lease,
    not at the first error; callbacks run once. When the database answers again, a node
    with another user takes over after the expiry."""
    from store.db.migrate import drop_schema

    role = f"ha_out_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(
        "postgresql+psycopg://postgres@127.0.0.1:5432/test", isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN")
        conn.exec_driver_sql(f"GRANT USAGE, CREATE ON SCHEMA public TO {role}")
    mapping = ha_mapping(tmp_path, unique_prefix(), "postgresql")
    config = StoreConfig.from_mapping(mapping)
    mapping["database-store"]["jdbc-user"] = role
    as_role = StoreConfig.from_mapping(mapping)
    nm = _nm(as_role)
    other: DatabaseNodeManager | None = None
    calls: list[float] = []
    try:
        nm.start_primary(timeout=10)
        nm.on_lock_lost(lambda: calls.append(time.monotonic()))
        time.sleep(0.3)
        with admin.connect() as conn:
            conn.exec_driver_sql(f"ALTER ROLE {role} NOLOGIN")
            started = time.monotonic()
            conn.exec_driver_sql(
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'"
            )
        deadline = started + EXPIRATION_MS / 1000 + 2
        while not calls and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.4)
        assert len(calls) == 1 and not nm.is_live
        lost_after = calls[0] - started
        assert 0.5 * EXPIRATION_MS / 1000 <= lost_after <= EXPIRATION_MS / 1000 + 0.3, lost_after
        with admin.connect() as conn:
            conn.exec_driver_sql(f"ALTER ROLE {role} LOGIN")
        other = _nm(config)
        other.start_primary(timeout=EXPIRATION_MS / 1000 + 3)
        assert other.lease.holder == other.holder and other.lease.generation == 2
    finally:
        nm.close()
        if other is not None:
            other.close()
        drop_schema(config)
        with admin.connect() as conn:
            conn.exec_driver_sql(f"ALTER ROLE {role} LOGIN")
            conn.exec_driver_sql(f"DROP OWNED BY {role}")
            conn.exec_driver_sql(f"DROP ROLE {role}")
        admin.dispose()


def test_a_renewed_lease_outlives_a_database_outage_until_its_renewed_deadline(
    tmp_path: Path,
) -> None:
    """A successful renew moves the local deadline forward: a node renewing for twice the
    expiration, then cut off (its own user may no longer log in, its sessions terminated),
    stays live until the lease it last renewed really runs out (less the renew period it
    keeps for a retry), and not longer. A renew that left the deadline where the acquisition
    put it lost the lock at the first failed retry, long before."""
    from store.db.migrate import drop_schema
    from tests.ha.conftest import RENEW_MS

    role = f"ha_ren_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(
        "postgresql+psycopg://postgres@127.0.0.1:5432/test", isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN")
        conn.exec_driver_sql(f"GRANT USAGE, CREATE ON SCHEMA public TO {role}")
    mapping = ha_mapping(tmp_path, unique_prefix(), "postgresql")
    config = StoreConfig.from_mapping(mapping)
    mapping["database-store"]["jdbc-user"] = role
    nm = _nm(StoreConfig.from_mapping(mapping))
    reader = _nm(config)
    calls: list[float] = []
    try:
        nm.start_primary(timeout=10)
        nm.on_lock_lost(lambda: calls.append(time.monotonic()))
        time.sleep(2 * EXPIRATION_MS / 1000)  # past the deadline of the acquisition
        assert nm.is_live
        row = reader.table.read(PRIMARY_ROW)
        assert row.held and row.holder == nm.holder
        left = (row.expires_at_ms - row.now_ms) / 1000  # of the lease last renewed
        with admin.connect() as conn:
            conn.exec_driver_sql(f"ALTER ROLE {role} NOLOGIN")
            started = time.monotonic()
            conn.exec_driver_sql(
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'"
            )
        earliest = left - RENEW_MS / 1000 - 0.15
        time.sleep(max(0.0, earliest - (time.monotonic() - started)))
        assert nm.is_live and calls == [], "lost before the renewed lease ran out"
        deadline = started + EXPIRATION_MS / 1000 + 2
        while not calls and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(calls) == 1 and not nm.is_live
        lost_after = calls[0] - started
        assert earliest <= lost_after <= EXPIRATION_MS / 1000 + 0.3, (lost_after, left)
    finally:
        nm.close()
        reader.close()
        drop_schema(config)
        with admin.connect() as conn:
            conn.exec_driver_sql(f"ALTER ROLE {role} LOGIN")
            conn.exec_driver_sql(f"DROP OWNED BY {role}")
            conn.exec_driver_sql(f"DROP ROLE {role}")
        admin.dispose()


def test_a_clock_difference_beyond_the_allowed_one_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """HA-24: the lease is timed by the database clock; a local clock differing by more
    than jdbc-allowed-time-diff only logs a warning (0 ms allowed: any difference warns;
    the default 250 ms: the same machine's clocks do not)."""
    for allowed, warned in ((0, True), (250, False)):
        caplog.clear()
        mapping = ha_mapping(
            tmp_path, unique_prefix(), "sqlite", **{"jdbc-allowed-time-diff": allowed}
        )
        nm = _nm(StoreConfig.from_mapping(mapping))
        with caplog.at_level("WARNING", logger="store.db.lease"):
            for _ in range(20):
                nm.table.read(PRIMARY_ROW)
                time.sleep(0.001)
        nm.close()
        found = any("jdbc-allowed-time-diff" in r.getMessage() for r in caplog.records)
        assert found is warned, allowed


def test_a_waiting_backup_outlives_a_database_outage(tmp_path: Path) -> None:
    """PostgreSQL, a dedicated user for the backup: while it cannot log in, the backup's
    await_live keeps waiting (no error); once the database answers it goes live, after
    the primary let go."""
    from store.db.migrate import drop_schema

    role = f"ha_wait_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(
        "postgresql+psycopg://postgres@127.0.0.1:5432/test", isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN")
        conn.exec_driver_sql(f"GRANT USAGE, CREATE ON SCHEMA public TO {role}")
    mapping = ha_mapping(tmp_path, unique_prefix(), "postgresql")
    config = StoreConfig.from_mapping(mapping)
    primary = _nm(config)  # creates the tables as postgres
    with admin.connect() as conn:
        conn.exec_driver_sql(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")
    mapping["database-store"]["jdbc-user"] = role
    backup = _nm(StoreConfig.from_mapping(mapping))
    outcome: list[object] = []
    try:
        primary.start_primary(timeout=10)
        backup.start_backup(timeout=10)

        def wait() -> None:
            try:
                backup.await_live(timeout=30)
                outcome.append("live")
            except BaseException as exc:  # reported below
                outcome.append(exc)

        waiter = threading.Thread(target=wait, daemon=True)
        waiter.start()
        with admin.connect() as conn:
            conn.exec_driver_sql(f"ALTER ROLE {role} NOLOGIN")
            conn.exec_driver_sql(
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'"
            )
        primary.close()  # state stays ACTIVE: a backup may take over
        time.sleep(1.0)
        assert outcome == [] and not backup.is_live
        with admin.connect() as conn:
            conn.exec_driver_sql(f"ALTER ROLE {role} LOGIN")
        waiter.join(5)
        assert outcome == ["live"] and backup.is_live
    finally:
        primary.close()
        backup.close()
        drop_schema(config)
        with admin.connect() as conn:
            conn.exec_driver_sql(f"ALTER ROLE {role} LOGIN")
            conn.exec_driver_sql(f"DROP OWNED BY {role}")
            conn.exec_driver_sql(f"DROP ROLE {role}")
        admin.dispose()
