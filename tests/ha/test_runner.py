"""`store.node.NodeRunner` in one process (no subprocess; ``store ha run`` is one call of it), on
the file store, SQLite and PostgreSQL: two runners on one store in threads — the second waits
until the first stops, then goes live and writes, and the store holds every message either
acknowledged; a stop ends a wait at once; a timeout is StoreLockedError naming the holder; a
takeover of the lease ends the writer with LockLostError."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from store import StoreConfig, open_store
from store.db.lease import PRIMARY_ROW
from store.db.migrate import drop_schema
from store.errors import ConfigError, LockLostError, StoreLockedError
from store.ha import Lease, open_node_manager
from store.ha.database import DatabaseNodeManager
from store.messaging import StorageManager
from store.node import SMOKE_QUEUE, NodeRunner, NodeRunResult
from tests.ha.conftest import ha_mapping
from tests.support.backends import unique_prefix


class Run:
    """A :class:`NodeRunner` on its own thread, and what its hooks saw."""

    def __init__(self, config: StoreConfig, role: str, **options: float) -> None:
        self.acks: list[int] = []
        self.node_id: str | None = None
        self.lease: Lease | None = None
        self.waiting = threading.Event()
        self.live = threading.Event()
        self.result: NodeRunResult | None = None
        self.error: BaseException | None = None
        self.runner = NodeRunner(
            config,
            role,
            pause=0.005,
            on_waiting=self._on_waiting,
            on_live=self._on_live,
            acknowledged=self.acks.append,
            **options,
        )
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _on_waiting(self, node_id: str) -> None:
        self.node_id = node_id
        self.waiting.set()

    def _on_live(self, lease: Lease, _waited: float) -> None:
        self.lease = lease
        self.live.set()

    def _run(self) -> None:
        try:
            self.result = self.runner.run()
        except BaseException as exc:
            self.error = exc

    def wait_acks(self, count: int, timeout: float = 30) -> None:
        target = len(self.acks) + count
        deadline = time.monotonic() + timeout
        while len(self.acks) < target:
            assert self.thread.is_alive(), self.error
            assert time.monotonic() < deadline, "the writer stalled"
            time.sleep(0.01)

    def join(self, timeout: float = 30) -> NodeRunResult:
        """Wait for run() to end; returns its result or raises its error."""
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "run() did not return"
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

    def finish(self, timeout: float = 30) -> NodeRunResult:
        """stop(), then :meth:`join`."""
        self.runner.stop()
        return self.join(timeout)


@pytest.fixture(params=["file", "sqlite", "postgresql"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreConfig]:
    """A fresh store: the file store (its own lock folder) or a database store with short
    lease timings and its own table prefix, dropped at teardown."""
    if request.param == "file":
        yield request.getfixturevalue("file_config")
        return
    db_config = StoreConfig.from_mapping(ha_mapping(tmp_path, unique_prefix(), request.param))
    try:
        yield db_config
    finally:
        drop_schema(db_config)


def _stored(config: StoreConfig) -> int:
    with StorageManager(open_store(config)) as sm:
        sm.load()
        return sm.depth(SMOKE_QUEUE)


def test_the_second_runner_waits_until_the_first_stops_then_writes(config: StoreConfig) -> None:
    primary = Run(config, "primary")
    backup: Run | None = None
    try:
        assert primary.live.wait(20), primary.error
        primary.wait_acks(5)
        backup = Run(config, "backup")
        assert backup.waiting.wait(20), backup.error
        assert backup.node_id == primary.node_id  # one pair, one node id
        assert not backup.live.wait(1.0)  # the primary is live: the backup waits
        primary.wait_acks(5)  # and the primary keeps writing meanwhile

        first = primary.finish()
        assert first == NodeRunResult("primary", live=True, written=len(primary.acks))
        assert backup.live.wait(20), backup.error
        backup.wait_acks(5)
        second = backup.finish()
        assert second == NodeRunResult("backup", live=True, written=len(backup.acks))
    finally:
        for run in (primary, backup):
            if run is not None:
                run.runner.stop()
                run.thread.join(30)
    assert primary.lease is not None and backup.lease is not None
    assert backup.lease.generation > primary.lease.generation
    assert not set(primary.acks) & set(backup.acks)
    # Every message either node acknowledged is in the store (the locks are released).
    assert _stored(config) == len(primary.acks) + len(backup.acks)


def test_a_stop_ends_a_wait_at_once(config: StoreConfig) -> None:
    primary = Run(config, "primary")
    try:
        assert primary.live.wait(20), primary.error
        backup = Run(config, "backup")
        assert backup.waiting.wait(20), backup.error
        time.sleep(0.3)
        started = time.monotonic()
        assert backup.finish() == NodeRunResult("backup", live=False, written=0)
        assert time.monotonic() - started < 2.0
        primary.wait_acks(5)  # the live node is untouched
    finally:
        primary.finish()


def test_a_timeout_is_store_locked_naming_the_holder(config: StoreConfig) -> None:
    primary = Run(config, "primary")
    try:
        assert primary.live.wait(20), primary.error
        assert primary.lease is not None
        with pytest.raises(StoreLockedError) as refused:
            NodeRunner(config, "primary", timeout=0.5).run()
        assert refused.value.holder == primary.lease.holder
        assert f"live lock held by {primary.lease.holder}" in str(refused.value)
        primary.wait_acks(1)
    finally:
        primary.finish()


def test_an_unknown_role_is_a_configuration_error(file_config: StoreConfig) -> None:
    with pytest.raises(ConfigError, match="unknown HA role"):
        NodeRunner(file_config, "witness").run()


@pytest.mark.parametrize("which", ["sqlite", "postgresql"])
def test_a_takeover_ends_the_writer_with_lock_lost(which: str, tmp_path: Path) -> None:
    config = StoreConfig.from_mapping(ha_mapping(tmp_path, unique_prefix(), which))
    node = Run(config, "primary")
    try:
        assert node.live.wait(20), node.error
        node.wait_acks(5)
        # What a backup's acquisition does to the row: another holder, the next generation.
        other = open_node_manager(config)
        assert isinstance(other, DatabaseNodeManager) and node.lease is not None
        t = other.table.table
        try:
            with other.engine.begin() as conn:
                conn.execute(
                    t.update()
                    .where(t.c.id == PRIMARY_ROW)
                    .values(holder_id=f"{node.lease.generation + 1}:backup")
                )
        finally:
            other.close()
        with pytest.raises(LockLostError, match="lost the live lock; stopped writing"):
            node.join()
    finally:
        node.runner.stop()
        node.thread.join(30)
        drop_schema(config)
