"""``store broker`` as a shared-store HA pair on PostgreSQL (``--role primary|backup``):
the backup opens its port only once it holds the live lock; after kill -9 of the primary it
takes over and delivers every receipted message not acknowledged; a primary stopped with
SIGSTOP past its lease, once resumed, stores nothing (its write is fenced: the client gets an
ERROR, no RECEIPT) and stops with exit 3."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.stomp.support import BrokerProcess, bye, client, send_all, write_toml
from tests.support.backends import StoreFactory, backend_by_name, unique_prefix
from tests.support.db_backends import new_store_mapping

EXPIRATION_MS = 2000


@pytest.fixture
def ha_config(tmp_path: Path) -> tuple[StoreFactory, Path]:
    factory = StoreFactory(backend_by_name("postgresql"), tmp_path, unique_prefix())
    mapping = new_store_mapping(tmp_path, factory.prefix, "postgresql")
    mapping["database-store"].update(
        {
            "jdbc-lock-renew-period": 500,
            "jdbc-lock-expiration": EXPIRATION_MS,
            "jdbc-network-timeout": EXPIRATION_MS,
        }
    )
    yield factory, write_toml(tmp_path / "broker.toml", mapping)
    factory.teardown()


def _pair(path: Path) -> tuple[BrokerProcess, BrokerProcess]:
    primary = BrokerProcess(path, "--role", "primary")
    backup = BrokerProcess(path, "--role", "backup", wait=False)
    live = backup.listening_within(EXPIRATION_MS / 1000 + 1)
    assert not live, "the backup listens while the primary lives"
    return primary, backup


@pytest.mark.slow  # three broker start-ups and a lease expiry
def test_the_backup_takes_over_after_kill9_of_the_primary(
    ha_config: tuple[StoreFactory, Path],
) -> None:
    primary, backup = _pair(ha_config[1])
    try:
        conn, rec = client(primary.port)
        send_all(conn, rec, "/queue/ha", [f"m{i}" for i in range(20)])
        conn.subscribe("/queue/ha", id="s", ack="client-individual")
        got = rec.wait_messages(20)
        for m in got[:4]:
            conn.ack(m.headers["message-id"], "s")
        conn.ack(got[4].headers["message-id"], "s", receipt="acked")
        rec.wait_receipts({"acked"})
        primary.kill9()
        port = backup.wait_listening(30)
        conn, rec = client(port)
        conn.subscribe("/queue/ha", id="s", ack="auto")
        again = rec.quiet(1.0)
        assert [m.body for m in again] == [f"m{i}" for i in range(5, 20)]
        assert all(m.headers["redelivered"] == "true" for m in again)
        bye(conn, rec)
        assert backup.terminate() == 0
    finally:
        for node in (primary, backup):
            if node.proc.poll() is None:
                node.kill9()


@pytest.mark.slow
def test_a_primary_resumed_after_sigstop_stores_nothing_and_stops(
    ha_config: tuple[StoreFactory, Path],
) -> None:
    primary, backup = _pair(ha_config[1])
    try:
        conn, rec = client(primary.port)
        send_all(conn, rec, "/queue/ha", ["before"])
        primary.proc.send_signal(signal.SIGSTOP)
        port = backup.wait_listening(30)  # the lease expired: the backup is live
        conn.send("/queue/ha", "while-stopped", headers={"receipt": "late"})
        primary.proc.send_signal(signal.SIGCONT)
        assert primary.proc.wait(30) == 3  # lost the live lock
        time.sleep(0.5)
        assert "late" not in rec.receipts
        other, orec = client(port)
        other.subscribe("/queue/ha", id="s", ack="auto")
        assert [m.body for m in orec.quiet(1.0)] == ["before"]
        bye(other, orec)
        assert backup.terminate() == 0
    finally:
        for node in (primary, backup):
            if node.proc.poll() is None:
                node.proc.send_signal(signal.SIGCONT)
                node.kill9()
