"""The file node manager (reference §7, behaviours HA-2, HA-6, HA-8, HA-13, HA-15): the files
it creates, exclusion of the live and backup locks across node managers and processes, the
generation kept in ``serverlock.1``, the lock monitor, and failover of ``store ha run`` on a
local directory after ``kill -9``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from store import StoreConfig, open_store
from store.errors import StoreLockedError
from store.ha import open_node_manager
from store.ha.files import BACKUP_LOCK, PRIMARY_LOCK, SERVER_LOCK
from tests.ha.nodes import ROOT, Node, write_toml
from tests.support.profile import rounds


def test_start_creates_exactly_the_three_files_with_artemis_layout(tmp_path: Path) -> None:
    """HA-8: server.lock (19 bytes, node UUID at 3..18), serverlock.1 and serverlock.2, in a
    lock directory that did not exist; a second manager reads the same node id."""
    directory = tmp_path / "missing" / "nm_lock"
    config = StoreConfig.from_mapping({"node-manager-lock-directory": str(directory)})
    nm = open_node_manager(config)
    try:
        assert sorted(os.listdir(directory)) == sorted([SERVER_LOCK, PRIMARY_LOCK, BACKUP_LOCK])
        data = (directory / SERVER_LOCK).read_bytes()
        assert len(data) == 19 and data[:3] == b"000"
        assert str(uuid.UUID(bytes=data[3:19])) == nm.node_id
        assert nm.state == "NOT_STARTED" and nm.lease.holder is None
        other = open_node_manager(config)
        assert other.node_id == nm.node_id
        other.close()
    finally:
        nm.close()


def test_primary_lock_blocks_a_second_primary_until_released(file_config: StoreConfig) -> None:
    """HA-13 / HA-2: B's start_primary waits while A is live; after A closes B is live with
    the next generation; state ACTIVE; the lease names the holder and never expires."""
    a, b = open_node_manager(file_config), open_node_manager(file_config)
    b_live = threading.Event()
    try:
        a.start_primary(timeout=5)
        assert a.is_live and a.state == "ACTIVE"
        assert a.lease.generation == 1 and a.lease.expires_at_ms is None
        assert b.lease.holder == a.lease.holder
        thread = threading.Thread(target=lambda: (b.start_primary(timeout=20), b_live.set()))
        thread.start()
        assert not b_live.wait(1.0)
        a.close()
        assert b_live.wait(2.0)
        thread.join()
        assert b.is_live and b.lease.generation == 2 and not a.is_live
    finally:
        a.close()
        b.close()


def test_a_plain_open_is_refused_while_a_node_is_live(file_config: StoreConfig) -> None:
    """The live node opens the file store without the journals' directory locks; a plain
    open_store meanwhile raises StoreLockedError naming the holder, and works after close."""
    nm = open_node_manager(file_config)
    try:
        nm.start_primary(timeout=5)
        with open_store(file_config, node_manager=nm) as store:
            store.bindings.load()
            store.messages.load()
            with pytest.raises(StoreLockedError) as refused:
                open_store(file_config)
            assert refused.value.holder == nm.lease.holder
    finally:
        nm.close()
    open_store(file_config).close()


def test_backup_lock_is_exclusive(file_config: StoreConfig) -> None:
    """HA-6: one backup at a time; the next gets the backup lock once the first closes; no
    backup ever holds the live lock."""
    first, second = open_node_manager(file_config), open_node_manager(file_config)
    try:
        first.start_backup(timeout=2)
        try:
            second.start_backup(timeout=0.6)
            raise AssertionError("two backups held the backup lock")
        except TimeoutError:
            pass
        first.close()
        second.start_backup(timeout=2)
        assert not second.is_live and second.lease.holder is None
    finally:
        first.close()
        second.close()


def test_mutual_exclusion_across_processes(tmp_path: Path) -> None:
    """3 processes x 5 rounds of start_primary / non-atomic increment / close on one lock
    directory: the counter ends exact."""
    counter = tmp_path / "counter"
    counter.write_text("0")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.ha.file_child", str(tmp_path / "nm"), str(counter), "5"],
            cwd=ROOT,
            env=env,
        )
        for _ in range(3)
    ]
    try:
        assert [c.wait(120) for c in children] == [0, 0, 0]
    finally:
        for c in children:
            c.kill()
    assert counter.read_text() == "15"
    config = StoreConfig.from_mapping({"node-manager-lock-directory": str(tmp_path / "nm")})
    nm = open_node_manager(config)
    assert nm.lease.generation == 15 and nm.lease.holder is None
    nm.close()


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_the_monitor_reports_a_deleted_or_replaced_lock_file_once(
    file_config: StoreConfig, how: str
) -> None:
    """The live lock file deleted, or replaced by another file, under the holder: the
    monitor reports the loss once, on the node manager's thread."""
    nm = open_node_manager(file_config)
    calls: list[str] = []
    try:
        nm.start_primary(timeout=5)
        nm.on_lock_lost(lambda: calls.append(threading.current_thread().name))
        time.sleep(0.6)
        assert calls == [] and nm.is_live
        path = Path(file_config.node_manager_lock_directory) / PRIMARY_LOCK
        if how == "deleted":
            path.unlink()
        else:
            fresh = path.with_suffix(".new")
            fresh.write_text("1 someone else\n")
            fresh.replace(path)
        deadline = time.monotonic() + 3
        while not calls and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.6)
        assert calls == ["store-ha-file"] and not nm.is_live
    finally:
        nm.close()


def test_the_monitor_never_takes_the_node_s_own_state_write_for_another_node_s(
    file_config: StoreConfig,
) -> None:
    """The split-brain check (server.lock rewritten while ACTIVE) looks at server.lock's
    mtime. The node's own state write, on another thread of the same process, is not another
    node's: an OFD lock does not exclude threads sharing the open file, so without the
    node's own guard the lock monitor, running between a new live node's write of ACTIVE and
    its record of the new mtime, gave up the lock it had just taken (a CI failure of the
    kill -9 test below: "server.lock was rewritten by another node while ACTIVE"). Here one
    thread writes the state over and over while the monitor's check runs 3,000 times; before
    the fix nearly every check reported a loss."""
    nm = open_node_manager(file_config)
    stop = threading.Event()
    problems: list[str] = []
    try:
        nm.start_primary(timeout=5)

        def write_state() -> None:
            while not stop.is_set():
                nm._set_state("ACTIVE")  # what going live writes

        writer = threading.Thread(target=write_state, daemon=True)
        writer.start()
        for _ in range(3000):
            problem = nm._monitor_problem()  # type: ignore[attr-defined]  # the tick's check
            if problem is not None:
                problems.append(problem)
        stop.set()
        writer.join(10)
        assert problems == [] and nm.is_live and nm.state == "ACTIVE"
    finally:
        stop.set()
        nm.close()


def test_a_backup_waits_while_paused_and_takes_over_after_close(file_config: StoreConfig) -> None:
    """HA-5 on files: PAUSED keeps the backup waiting; a closed (crashed) ACTIVE primary is
    taken over."""
    primary, backup = open_node_manager(file_config), open_node_manager(file_config)
    live = threading.Event()
    try:
        primary.start_primary(timeout=5)
        backup.start_backup(timeout=5)
        threading.Thread(
            target=lambda: (backup.await_live(timeout=20), live.set()), daemon=True
        ).start()
        primary.pause()
        assert primary.state == "PAUSED"
        assert not live.wait(1.2)
        primary.start_primary(timeout=5)
        primary.close()
        assert live.wait(2)
        assert backup.state == "ACTIVE" and backup.lease.generation == 3
    finally:
        primary.close()
        backup.close()


#: A waiting file node tries every 0.5 s; the rest is scheduling on a loaded 2-core machine
#: (at a load average of 7, takeovers of 1.4-3.1 s were measured, with and without the
#: changes of issue 24, against 1.2 s asserted before). A node that never fails over, or
#: one that waits for some expiry, still fails the test.
FILE_TAKEOVER_SECONDS = 0.5 + 3.5


def _file_store_toml(file_config: StoreConfig, tmp_path: Path) -> Path:
    mapping = {
        "journal-directory": file_config.journal_directory,
        "bindings-directory": file_config.bindings_directory,
        "paging-directory": file_config.paging_directory,
        "large-messages-directory": file_config.large_messages_directory,
        "node-manager-lock-directory": file_config.node_manager_lock_directory,
        "journal-type": "NIO",
    }
    return write_toml(mapping, tmp_path / "store.toml")


def test_kill_9_of_the_live_file_store_node_fails_over_and_loses_nothing(
    file_config: StoreConfig, tmp_path: Path
) -> None:
    """HA-15: ``store ha run`` on a file store: kill -9 of the live node, 5 rounds in CI (10
    until issue 39; 50 in a soak) as on the database (each new live node is the next
    victim); the backup goes live within its poll
    (the kernel drops the dead node's lock, and a waiting node tries every 0.5 s) and every
    acknowledged id is in the journal."""
    path = _file_store_toml(file_config, tmp_path)
    nodes = [Node(path, "primary")]
    try:
        live = nodes[0]
        live.wait_live(30)
        acknowledged: set[int] = set()
        takeovers: list[float] = []
        for _ in range(rounds(5)):
            backup = Node(path, "backup")
            nodes.append(backup)
            time.sleep(0.8)
            live.wait_acks(20, 30)
            live.signal(signal.SIGKILL)
            killed = time.monotonic()
            live.finish()
            acknowledged.update(live.acks)
            takeovers.append(backup.wait_live(30) - killed)
            assert takeovers[-1] <= FILE_TAKEOVER_SECONDS, takeovers
            live = backup
        live.wait_acks(20, 30)
        assert live.stop() == 0
        acknowledged.update(live.acks)
        with open_store(file_config) as store:
            store.bindings.load()
            found = {r.id for r in store.messages.load().records}
        assert acknowledged <= found
    finally:
        for node in nodes:
            node.kill()


def test_split_brain_a_stopped_file_node_keeps_the_lock_and_never_two_are_live(
    file_config: StoreConfig, tmp_path: Path
) -> None:
    """The file pair does not fail over from a frozen node (module docstring of
    store.ha.files): the live node SIGSTOPped for 3 s (six of the backup's tries) keeps its
    fcntl lock, the backup stays waiting, and the lock still names the stopped node. After
    SIGCONT it carries on writing; only its death lets the backup go live. At every check
    at most one node has said it is live while still running, and every acknowledged id is
    in the journal."""
    path = _file_store_toml(file_config, tmp_path)
    watcher = open_node_manager(file_config)  # reads the lock, never takes it
    primary = Node(path, "primary")
    nodes = [primary]
    try:
        primary.wait_live(30)
        holder = watcher.lease.holder
        assert holder is not None
        backup = Node(path, "backup")
        nodes.append(backup)
        time.sleep(0.8)
        primary.wait_acks(10, 30)
        primary.signal(signal.SIGSTOP)
        try:
            stopped_at = time.monotonic()
            while time.monotonic() - stopped_at < 3.0:
                assert backup.live_at is None, "the backup went live beside a stopped node"
                assert watcher.lease.holder == holder
                time.sleep(0.1)
        finally:
            primary.signal(signal.SIGCONT)
        primary.wait_acks(10, 30)  # it never stopped being the live node
        assert backup.live_at is None and backup.proc.poll() is None
        primary.signal(signal.SIGKILL)
        killed = time.monotonic()
        primary.finish()
        assert backup.wait_live(30) - killed <= FILE_TAKEOVER_SECONDS
        assert watcher.lease.holder not in (None, holder)
        backup.wait_acks(10, 30)
        assert backup.stop() == 0
        with open_store(file_config) as store:
            store.bindings.load()
            found = {r.id for r in store.messages.load().records}
        acknowledged = set(primary.acks) | set(backup.acks)
        assert acknowledged <= found
        assert len(acknowledged) == len(primary.acks) + len(backup.acks)  # no id twice
    finally:
        for node in nodes:
            node.kill()
        watcher.close()
