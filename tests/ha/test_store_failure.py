"""A live node whose store can no longer write gives the live lock up (docs/ha.md, issue 24), in
one process with two node managers:

- PostgreSQL: every connection of the live node (found by its application_name) ended with
  ``pg_terminate_backend`` is an outage ridden out: the node keeps its lease and carries on
  (docs/db.md "Outages"); a journal whose writer stops for good (the database refusing its batch on
  every fresh connection) gives the lease up through the fence, the node says so through
  ``on_lock_lost`` (once), and the waiting backup goes live within the expiration;
- file store: a journal write fails (EIO through the fault-injecting seam); the node releases
  its file lock after ``on_lock_lost``, the backup goes live within its poll, every later write
  of the old node through the seam is refused, and the backup finds every acknowledged write.
"""

from __future__ import annotations

import contextlib
import errno
import threading
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from store import Store, StoreConfig, open_store
from store.db.migrate import drop_schema
from store.errors import LockLostError, StoreError, StoreIOError, StoreUnavailableError
from store.ha import NodeManager, open_node_manager
from tests.ha.conftest import EXPIRATION_MS, ha_mapping
from tests.support.backends import unique_prefix
from tests.support.faultfs import FaultFileSystem

#: Thread scheduling on a loaded 2-core machine (a CI run took 1.2 s for one 0.5 s poll).
SLACK = 1.5


class Waiter:
    """A backup's ``await_live`` on a thread; ``live_at`` is when it returned."""

    def __init__(self, nm: NodeManager) -> None:
        self.live_at: float | None = None
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._nm = nm
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            self._nm.await_live(timeout=30)
            self.live_at = time.monotonic()
        except BaseException as exc:  # reported by wait()
            self.error = exc
        finally:
            self._done.set()

    def wait(self, timeout: float) -> float | None:
        """When the backup went live (None: not within ``timeout`` seconds)."""
        self._done.wait(timeout)
        assert self.error is None, self.error
        return self.live_at


def _loaded(store: Store) -> Store:
    store.bindings.load()
    store.messages.load()
    return store


def _records(store: Store) -> set[int]:
    store.bindings.load()
    return {r.id for r in store.messages.load().records}


def _write_until_refused(store: Store, first: int) -> tuple[list[int], float]:
    """Sync appends from id ``first`` until one is refused; returns the acknowledged ids and
    when the refusal came."""
    acked: list[int] = []
    deadline = time.monotonic() + 10
    for i in range(first, first + 100_000):
        try:
            store.messages.append_add(i, 7, b"after-%d" % i, sync=True)
        except StoreError as exc:
            # LockLostError: the journal rode the killed connection out (docs/db.md "Outages"), and
            # the fence found that the node manager, whose own connection died too, had
            # given the lock up.
            assert isinstance(exc, (StoreUnavailableError, StoreIOError, LockLostError)), exc
            return acked, time.monotonic()
        acked.append(i)
        assert time.monotonic() < deadline, "no write was refused"
        time.sleep(0.005)
    raise AssertionError("no write was refused")


def test_a_live_node_whose_database_connections_are_killed_keeps_the_lease_and_carries_on(
    tmp_path: Path,
) -> None:
    """Every connection of the live node (the store's and the node manager's) ended with
    ``pg_terminate_backend``: an outage the journals ride out and renewing retries through
    (docs/db.md "Outages"), so the node stays live for two lease expirations, the backup never takes
    over, no callback says the lock was lost, and the writes after it succeed; every
    acknowledged write is there when the backup finally goes live after a clean close."""
    app = f"ha-dead-{uuid.uuid4().hex[:8]}"
    mapping = ha_mapping(tmp_path, unique_prefix(), "postgresql")
    plain = StoreConfig.from_mapping(mapping)
    url = mapping["database-store"]["jdbc-connection-url"]
    mapping["database-store"]["jdbc-connection-url"] = f"{url}?ApplicationName={app}"
    dying = StoreConfig.from_mapping(mapping)
    admin = sa.create_engine("postgresql+psycopg://postgres@127.0.0.1:5432/test")
    primary, backup = open_node_manager(dying), open_node_manager(plain)
    lost: list[str] = []
    store: Store | None = None
    try:
        primary.start_primary(timeout=10)
        primary.on_lock_lost(lambda: lost.append(threading.current_thread().name))
        backup.start_backup(timeout=10)
        waiter = Waiter(backup)
        store = _loaded(open_store(dying, node_manager=primary))
        acked = list(range(1, 21))
        for i in acked:
            store.messages.append_add(i, 7, b"before-%d" % i, sync=True)
        store.paging.store("orders").append(b"page-before", sync=True)
        time.sleep(2 * EXPIRATION_MS / 1000)  # renewed past the first lease
        assert waiter.wait(0) is None and primary.is_live
        with admin.begin() as conn:
            ended = conn.execute(
                sa.text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name = :app"
                ),
                {"app": app},
            ).scalar_one()
        assert ended >= 2  # the node manager's and the store's connections
        refused = 0
        deadline = time.monotonic() + 2 * EXPIRATION_MS / 1000
        i = 1000
        while time.monotonic() < deadline:
            try:
                store.messages.append_add(i, 7, b"after-%d" % i, sync=True)
                acked.append(i)
            except StoreUnavailableError as exc:  # refused while it reconnected: not applied
                assert not exc.in_doubt, exc
                refused += 1
            i += 1
            time.sleep(0.005)
        assert acked[-1] >= 1000 and refused < 50, (acked[-1], refused)
        assert waiter.wait(0) is None, "the backup took over after one killed connection"
        assert primary.is_live and lost == []
        store.close()
        store = None
        primary.close()  # a clean stop: now the backup goes live
        assert waiter.wait(EXPIRATION_MS / 1000 + SLACK) is not None
        with open_store(plain, node_manager=backup) as taken:
            found = _records(taken)
            page = taken.paging.store("orders")
            assert [r for n in page.pages() for r in page.read_page(n)] == [b"page-before"]
        assert set(acked) <= found, sorted(set(acked) - found)[:10]
    finally:
        if store is not None:
            with contextlib.suppress(StoreError):
                store.close()
        primary.close()
        backup.close()
        admin.dispose()
        drop_schema(plain)


class _RefusingSQL:
    """A journal's SQL whose commits all fail (the database refusing the batch, not away)."""

    def __init__(self, sql: object) -> None:
        self._sql = sql

    def __getattr__(self, name: str) -> object:
        return getattr(self._sql, name)

    def insert_committed(self, *args: object) -> bool:
        return False

    def commit(self, conn: object) -> None:
        self._sql.rollback(conn)  # type: ignore[attr-defined]
        raise RuntimeError("the database refuses this batch")


def test_a_live_node_whose_journal_stops_writing_gives_up_the_lease(tmp_path: Path) -> None:
    """A batch the database refuses on every fresh connection stops the journal's writer for
    good: the fence's ``gave_up`` gives the live lock up (``on_lock_lost`` once), the backup
    goes live within the expiration, and the other journal of the old node is fenced off."""
    plain = StoreConfig.from_mapping(ha_mapping(tmp_path, unique_prefix(), "postgresql"))
    primary, backup = open_node_manager(plain), open_node_manager(plain)
    lost: list[str] = []
    store: Store | None = None
    try:
        primary.start_primary(timeout=10)
        primary.on_lock_lost(lambda: lost.append("lost"))
        backup.start_backup(timeout=10)
        waiter = Waiter(backup)
        store = _loaded(open_store(plain, node_manager=primary))
        store.messages.append_add(1, 7, b"before", sync=True)
        store.messages._sql = _RefusingSQL(store.messages._sql)  # type: ignore[attr-defined]
        with pytest.raises(StoreUnavailableError):
            store.messages.append_add(2, 7, b"refused", sync=True)
        assert waiter.wait(EXPIRATION_MS / 1000 + SLACK) is not None, "no takeover"
        assert lost == ["lost"] and not primary.is_live
        with pytest.raises(LockLostError):
            store.bindings.append_add(5000, 7, b"late", sync=True)
        with open_store(plain, node_manager=backup) as taken:
            assert _records(taken) == {1}
    finally:
        if store is not None:
            with contextlib.suppress(StoreError):
                store.close()
        primary.close()
        backup.close()
        drop_schema(plain)


@pytest.mark.parametrize("failing", [("pwrite",), ("datasync",)], ids=["write", "datasync"])
def test_a_live_file_node_whose_write_fails_gives_up_the_lock(
    file_config: StoreConfig, failing: tuple[str, ...]
) -> None:
    """Either half of a durable write failing is the store failing: a write that fails, and a
    ``datasync`` that fails after the write itself went through (the bytes may never reach the
    disk), each reported through the watched seam."""
    fs = FaultFileSystem()
    primary, backup = open_node_manager(file_config), open_node_manager(file_config)
    lost: list[str] = []
    store: Store | None = None
    try:
        primary.start_primary(timeout=5)
        primary.on_lock_lost(lambda: lost.append(threading.current_thread().name))
        backup.start_backup(timeout=5)
        waiter = Waiter(backup)
        store = _loaded(open_store(file_config, fs=fs, node_manager=primary))
        acked = list(range(1, 21))
        for i in acked:
            store.messages.append_add(i, 7, b"before-%d" % i, sync=True)
        pages = store.paging.store("orders")
        pages.append(b"page-before", sync=True)
        time.sleep(1.0)
        assert waiter.wait(0) is None and primary.is_live
        fs.fail(failing, err=errno.EIO)
        more, refused_at = _write_until_refused(store, 1000)
        acked += more
        live_at = waiter.wait(3)
        assert live_at is not None, "the backup did not take over"
        assert live_at - refused_at <= 0.5 + SLACK, live_at - refused_at  # one poll
        assert lost == ["store-ha-file"] and not primary.is_live
        # Parts that did not fail write nothing more under the lock the backup holds now.
        with pytest.raises(StoreIOError, match="gave up the live lock"):
            pages.append(b"page-late", sync=True)
        with pytest.raises(StoreIOError, match="gave up the live lock"):
            store.bindings.append_add(5000, 7, b"late", sync=True)
        fs.clear_faults()
        # (Page stores are not read back here: their discovery at open asks os.path.isdir,
        # which the in-memory seam cannot answer.)
        with open_store(file_config, fs=fs, node_manager=backup) as taken:
            found = _records(taken)
        assert set(acked) <= found, sorted(set(acked) - found)[:10]
        assert 5000 not in found
    finally:
        if store is not None:
            with contextlib.suppress(StoreError):
                store.close()
        primary.close()
        backup.close()
