"""Fencing (docs/ha.md#fencing) on PostgreSQL, MariaDB, SQLite, H2, in one process: a store opened
with a live node manager checks, in each write batch's own transaction and before its
statements, that the live-lock row still holds this node's holder and generation. After a
takeover the next write raises LockLostError and commits nothing, every later write (journal,
page store, large message) raises LockLostError too, and the loss reaches ``on_lock_lost``
once.

The renew period here is long (10 s) so the node manager's thread does not notice the
takeover first: the fence is what must."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from store import Store, StoreConfig, open_store
from store.db.lease import PRIMARY_ROW
from store.db.migrate import drop_schema
from store.errors import LockLostError, StoreLockedError
from store.ha import open_node_manager
from store.ha.database import DatabaseNodeManager, LeaseFence
from store.opening.database import open_database_store
from tests.ha.conftest import HA_DATABASES, ha_mapping
from tests.support.backends import unique_prefix


@pytest.fixture(params=HA_DATABASES)
def slow_renew(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreConfig]:
    if request.param == "h2":
        request.getfixturevalue("h2_server")
    mapping = ha_mapping(
        tmp_path,
        unique_prefix(),
        request.param,
        **{"jdbc-lock-renew-period": 10_000, "jdbc-lock-expiration": 30_000},
    )
    config = StoreConfig.from_mapping(mapping)
    yield config
    drop_schema(config)


def _write_large(store: Store, message_id: int) -> None:
    with store.large_messages.create(message_id) as body:
        body.write(b"large-after" * 1000)


def _take_over(nm: DatabaseNodeManager) -> None:
    """What a backup's acquisition does to the row: another holder, the next generation."""
    t = nm.table.table
    generation = nm.lease.generation
    with nm.engine.begin() as conn:
        conn.execute(
            t.update().where(t.c.id == PRIMARY_ROW).values(holder_id=f"{generation + 1}:backup")
        )


def test_a_write_after_a_takeover_raises_lock_lost_and_commits_nothing(
    slow_renew: StoreConfig,
) -> None:
    nm = open_node_manager(slow_renew)
    assert isinstance(nm, DatabaseNodeManager)
    lost: list[str] = []
    try:
        nm.start_primary(timeout=10)
        nm.on_lock_lost(lambda: lost.append(threading.current_thread().name))
        with open_store(slow_renew, node_manager=nm) as store:
            store.bindings.load()
            store.messages.load()
            store.messages.append_add(1, 7, b"before", sync=True)
            pages = store.paging.store("orders")
            pages.append(b"page-before", sync=True)
            with store.large_messages.create(100) as body:
                body.write(b"large-before")
            _take_over(nm)
            assert nm.is_live  # nobody told it yet: the renew thread sleeps for 10 s
            with pytest.raises(LockLostError):
                store.messages.append_add(2, 7, b"after", sync=True)
            assert not nm.is_live
            for write in (
                lambda: store.messages.append_add(3, 7, b"after", sync=True),
                lambda: store.bindings.append_add(4, 7, b"after", sync=True),
                lambda: pages.append(b"page-after", sync=True),
                lambda: store.paging.store("other").append(b"x", sync=True),
                lambda: _write_large(store, 101),
                lambda: store.large_messages.delete(100),
            ):
                with pytest.raises(LockLostError):
                    write()
            deadline = time.monotonic() + 3
            while not lost and time.monotonic() < deadline:
                time.sleep(0.02)
            assert lost == ["store-ha-database"]
            with pytest.raises(LockLostError):
                store.close()
    finally:
        nm.close()
    # The row is "backup"'s now; clear it so a plain open may look.
    t = nm.table.table
    check = open_node_manager(slow_renew)
    assert isinstance(check, DatabaseNodeManager)
    with check.engine.begin() as conn:
        conn.execute(t.update().where(t.c.id == PRIMARY_ROW).values(holder_id="9:"))
    check.close()
    with open_store(slow_renew) as plain:
        plain.bindings.load()
        assert [r.id for r in plain.messages.load().records] == [1]
        assert "other" not in plain.paging.addresses()
        page = plain.paging.store("orders")
        records = [r for n in page.pages() for r in page.read_page(n)]
        assert records == [b"page-before"]
        assert plain.large_messages.ids() == [100]
        with plain.large_messages.open(100) as body:
            assert body.read() == b"large-before"


def test_open_store_needs_a_live_node_manager_and_a_plain_open_is_refused(
    slow_renew: StoreConfig,
) -> None:
    nm = open_node_manager(slow_renew)
    try:
        with pytest.raises(LockLostError):
            open_store(slow_renew, node_manager=nm)
        nm.start_primary(timeout=10)
        with pytest.raises(StoreLockedError) as refused:
            open_store(slow_renew)
        assert refused.value.holder == nm.lease.holder
        assert nm.lease.holder is not None and nm.lease.holder in str(refused.value)
    finally:
        nm.close()
    open_store(slow_renew).close()  # released: a plain open works again


def test_each_generation_writes_its_own_seq_range(slow_renew: StoreConfig) -> None:
    """Journal rows written under generation g have seq from g << 40 upward, so a new live
    node never inserts a key a frozen predecessor's uncommitted batch holds; a reload sees
    them in append order across generations."""
    import sqlalchemy as sa

    from store.ha.database import GENERATION_SEQ_SHIFT

    for generation in (1, 2):
        nm = open_node_manager(slow_renew)
        try:
            nm.start_primary(timeout=10)
            with open_store(slow_renew, node_manager=nm) as store:
                store.bindings.load()
                loaded = [r.id for r in store.messages.load().records]
                assert loaded == list(range(1, 3 * (generation - 1) + 1))
                for i in range(3):
                    store.messages.append_add(3 * (generation - 1) + i + 1, 7, b"x", sync=True)
        finally:
            nm.close()
    assert isinstance(nm, DatabaseNodeManager)
    messages = sa.table("messages", sa.column("id"), sa.column("seq"))
    messages.name = nm.table.table.name.replace("node_manager", "messages")
    with nm.engine.connect() as conn:
        rows = conn.execute(sa.select(messages.c.id, messages.c.seq).order_by("seq")).all()
    assert [r[0] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert all(r[1] > 1 << GENERATION_SEQ_SHIFT for r in rows[:3])
    assert all(r[1] > 2 << GENERATION_SEQ_SHIFT for r in rows[3:])


@pytest.mark.parametrize("which", ["postgresql", "mariadb"])
def test_a_batch_frozen_between_its_share_lock_and_its_commit_does_not_keep_a_takeover_out(
    which: str, tmp_path: Path
) -> None:
    """The fence's share lock on the live-lock row is the last statement before a batch's
    commit; a node stopped right there leaves that transaction idle on a store connection
    (not the node manager's). The fence bounds the session's idle transaction by the
    expiration on its first use, so the server ends it and an UPDATE of the row (what a
    backup's takeover runs) goes through. MariaDB's fence once chose that bound from a copy
    of the dialect that did not know the server was MariaDB: no bound, the row stayed locked
    and a backup never went live."""
    import sqlalchemy as sa

    from store.db.engine import create_store_engine, dispose_store_engine

    prefix = unique_prefix()
    config = StoreConfig.from_mapping(ha_mapping(tmp_path, prefix, which))
    # The writer of the row: a plain store engine that waits long enough to see the difference.
    patient = StoreConfig.from_mapping(
        ha_mapping(tmp_path, prefix, which, **{"jdbc-network-timeout": 9000})
    )
    assert config.database_store is not None and patient.database_store is not None
    nm = open_node_manager(config)
    assert isinstance(nm, DatabaseNodeManager)
    store_engine, _ = create_store_engine(config.database_store)
    admin_engine, _ = create_store_engine(patient.database_store)
    frozen = store_engine.raw_connection()
    try:
        nm.start_primary(timeout=10)
        fence = nm.fence()
        fence(frozen.driver_connection)
        fence.before_commit(frozen.driver_connection)  # ... and then no commit comes
        t = nm.table.table
        started = time.monotonic()
        with admin_engine.begin() as conn:
            if which == "mariadb":
                conn.execute(sa.text("SET SESSION innodb_lock_wait_timeout = 7"))
            updated = conn.execute(
                t.update()
                .where(t.c.id == PRIMARY_ROW)
                .values(holder_expiration_time=t.c.holder_expiration_time)
            ).rowcount
        waited = time.monotonic() - started
        assert updated == 1
        assert waited <= config.database_store.jdbc_lock_expiration / 1000 + 2.5, waited
        driver_error = store_engine.dialect.loaded_dbapi.Error
        with pytest.raises(driver_error):  # the server ended the idle transaction's session
            cursor = frozen.cursor()
            cursor.execute("SELECT 1")
            cursor.fetchall()
    finally:
        frozen.invalidate()
        nm.close()
        dispose_store_engine(store_engine)
        dispose_store_engine(admin_engine)
        drop_schema(config)


def _expire(nm: DatabaseNodeManager) -> None:
    """What a lease nobody renewed for the expiration looks like: the row still names this
    node and its generation, its expiry passed by the database clock (no takeover)."""
    t = nm.table.table
    with nm.engine.begin() as conn:
        conn.execute(
            t.update()
            .where(t.c.id == PRIMARY_ROW)
            .values(holder_expiration_time=t.c.holder_expiration_time - 60_000)
        )


def _plain_ids(config: StoreConfig) -> list[int]:
    """The message ids in the store, read by a plain open once the live lock is released."""
    with open_store(config) as plain:
        plain.bindings.load()
        return [r.id for r in plain.messages.load().records]


def test_a_lease_expired_by_the_database_clock_fences_the_next_batch_off(
    slow_renew: StoreConfig,
) -> None:
    """A node that stopped renewing and whose lease expired by the database clock, with no
    takeover yet (holder and generation still its own): its next batch raises LockLostError
    and commits nothing; every later write too. A fence checking holder and generation only
    let that batch commit."""
    nm = open_node_manager(slow_renew)
    assert isinstance(nm, DatabaseNodeManager)
    try:
        nm.start_primary(timeout=10)
        with open_store(slow_renew, node_manager=nm) as store:
            store.bindings.load()
            store.messages.load()
            store.messages.append_add(1, 7, b"before", sync=True)
            _expire(nm)
            row = nm.read_live_row()
            assert row.raw is not None and row.raw.endswith(nm.holder) and not row.held
            assert nm.is_live  # the renew thread sleeps for 10 s: only the fence can tell
            with pytest.raises(LockLostError, match="expired"):
                store.messages.append_add(2, 7, b"after", sync=True)
            assert not nm.is_live
            with pytest.raises(LockLostError):
                store.paging.store("orders").append(b"page-after", sync=True)
    finally:
        nm.close()
    assert _plain_ids(slow_renew) == [1]


class _HookedFence:
    """The node manager's fence with a hook after its first check and one after its share
    lock (the seam :func:`store.opening.database.open_database_store` takes a fence through)."""

    def __init__(self, fence: LeaseFence) -> None:
        self.fence = fence
        self.after_check: Callable[[], None] | None = None
        self.after_lock: Callable[[], None] | None = None

    def __call__(self, conn: Any) -> None:
        self.fence(conn)
        hook, self.after_check = self.after_check, None
        if hook is not None:
            hook()

    def before_commit(self, conn: Any) -> None:
        self.fence.before_commit(conn)
        hook, self.after_lock = self.after_lock, None
        if hook is not None:
            hook()

    def after_failure(self) -> LockLostError | None:
        return self.fence.after_failure()


def _hooked_store(config: StoreConfig, nm: DatabaseNodeManager) -> tuple[Store, _HookedFence]:
    fence = _HookedFence(nm.fence())
    parts = open_database_store(config, fence=fence, store_lock=False, seq_floor=nm.seq_floor())
    store = Store(config, parts)
    store.bindings.load()
    store.messages.load()
    return store, fence


@pytest.mark.parametrize("which", ["postgresql", "mariadb"])
def test_a_takeover_between_a_batchs_fence_and_its_commit_is_refused(
    which: str, tmp_path: Path
) -> None:
    """A backup takes the lease over (another connection, committed) after a batch's first
    fence check passed and before its commit: the share-locked re-check just before the
    commit sees it, the batch raises LockLostError and commits nothing."""
    config = StoreConfig.from_mapping(
        ha_mapping(
            tmp_path,
            unique_prefix(),
            which,
            **{"jdbc-lock-renew-period": 10_000, "jdbc-lock-expiration": 30_000},
        )
    )
    nm = open_node_manager(config)
    assert isinstance(nm, DatabaseNodeManager)
    try:
        nm.start_primary(timeout=10)
        store, fence = _hooked_store(config, nm)
        try:
            store.messages.append_add(1, 7, b"before", sync=True)
            fence.after_check = lambda: _take_over(nm)
            with pytest.raises(LockLostError):
                store.messages.append_add(2, 7, b"inside", sync=True)
            assert fence.after_check is None  # the takeover did land inside the batch
            assert not nm.is_live
        finally:
            with contextlib.suppress(LockLostError):
                store.close()
    finally:
        nm.close()
        _release_for_plain_open(config)
    try:
        assert _plain_ids(config) == [1]
    finally:
        drop_schema(config)


@pytest.mark.parametrize("which", ["postgresql", "mariadb"])
def test_a_takeover_waits_for_a_batch_holding_the_share_lock_then_fences_the_next(
    which: str, tmp_path: Path
) -> None:
    """The other order: a takeover that comes once the batch holds the share lock waits
    for its commit (the two never interleave): that batch commits, the next is refused."""
    config = StoreConfig.from_mapping(
        ha_mapping(
            tmp_path,
            unique_prefix(),
            which,
            **{"jdbc-lock-renew-period": 10_000, "jdbc-lock-expiration": 30_000},
        )
    )
    nm = open_node_manager(config)
    assert isinstance(nm, DatabaseNodeManager)
    took: list[float] = []
    try:
        nm.start_primary(timeout=10)
        store, fence = _hooked_store(config, nm)
        taker = threading.Thread(target=lambda: (_take_over(nm), took.append(time.monotonic())))

        def hold() -> None:
            taker.start()
            time.sleep(0.5)
            assert took == []  # waiting for this batch's share lock

        try:
            fence.after_lock = hold
            store.messages.append_add(1, 7, b"committed", sync=True)
            taker.join(10)
            assert len(took) == 1
            with pytest.raises(LockLostError):
                store.messages.append_add(2, 7, b"refused", sync=True)
        finally:
            with contextlib.suppress(LockLostError):
                store.close()
    finally:
        nm.close()
        _release_for_plain_open(config)
    try:
        assert _plain_ids(config) == [1]
    finally:
        drop_schema(config)


def _release_for_plain_open(config: StoreConfig) -> None:
    """The row is "backup"'s after _take_over; clear it so a plain open may look."""
    check = open_node_manager(config)
    assert isinstance(check, DatabaseNodeManager)
    t = check.table.table
    with check.engine.begin() as conn:
        conn.execute(t.update().where(t.c.id == PRIMARY_ROW).values(holder_id="9:"))
    check.close()
