"""``store broker`` as a shared-store HA pair on PostgreSQL (``--role primary|backup``):
the backup opens its port only once it holds the live lock; after kill -9 of the primary it
takes over and delivers every receipted message not acknowledged; a primary stopped with
SIGSTOP past its lease, once resumed, stores nothing (its write is fenced: the client gets an
ERROR, no RECEIPT) and stops with exit 3.

The failover tests give both nodes fixed ports and their clients both ports (stomp.py
connections that reconnect and subscribe again, :class:`FailoverClient`): the same client
objects carry on with the backup after kill -9 or SIGSTOP of the primary, the consumer gets
every receipted message it had not acknowledged (marked redelivered) and none it had, sends
get receipts again; a SEND to the stopped primary gets no RECEIPT, is neither delivered nor
stored, and the resumed primary exits 3."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from store.stomp import open_queue_store
from tests.stomp.support import (
    BrokerProcess,
    FailoverClient,
    bye,
    client,
    free_ports,
    send_all,
    write_toml,
)
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


def _fixed_pair(path: Path) -> tuple[BrokerProcess, BrokerProcess, list[int]]:
    """A primary (listening on return) and a backup (waiting for the lock) on fixed ports,
    and these ports (primary's, backup's)."""
    ports = free_ports(2)
    primary = BrokerProcess(path, "--role", "primary", port=ports[0])
    backup = BrokerProcess(path, "--role", "backup", wait=False, port=ports[1])
    return primary, backup, ports


def _new(client: FailoverClient, since: int, n: int) -> list[Any]:
    """The ``n`` messages ``client`` got after its first ``since``; waits up to 30 s."""
    return client.wait_messages(since + n, 30)[since:]


def _wait_stopped(pid: int) -> None:
    """Wait until every thread of process ``pid`` is stopped (state T): kill(SIGSTOP)
    returns before they are. AssertionError after 10 s."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        states = [
            stat.read_text().rsplit(")", 1)[1].split()[0]
            for stat in Path(f"/proc/{pid}/task").glob("*/stat")
        ]
        if states and all(state == "T" for state in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} not stopped after 10 s")


def _stored_bodies(factory: StoreFactory, destinations: list[str]) -> dict[str, list[str]]:
    """The bodies the store holds on each of ``destinations`` that has any, sorted."""
    qs = open_queue_store(factory.config)
    try:
        out: dict[str, list[str]] = {}
        for destination in destinations:
            while (frame := qs.dequeue(destination)) is not None:
                out.setdefault(destination, []).append(bytes(frame.body).decode())
        return {d: sorted(bodies) for d, bodies in out.items()}
    finally:
        qs.close()


def _stop_all(nodes: tuple[BrokerProcess, ...], clients: list[FailoverClient]) -> None:
    for c in clients:
        c.abandon()
    for node in nodes:
        if node.proc.poll() is None:
            node.proc.send_signal(signal.SIGCONT)
            node.kill9()


@pytest.mark.slow  # two broker start-ups and a lease expiry
def test_failover_clients_carry_on_with_the_backup_after_kill9(
    ha_config: tuple[StoreFactory, Path],
) -> None:
    primary, backup, both = _fixed_pair(ha_config[1])
    clients: list[FailoverClient] = []
    try:
        producer = FailoverClient(both)
        consumer = FailoverClient(both, subscribe="/queue/ha")
        clients += [producer, consumer]
        send_all(producer.conn, producer, "/queue/ha", [f"m{i}" for i in range(20)])
        got = consumer.wait_messages(20)
        for m in got[:4]:
            consumer.conn.ack(m.headers["message-id"], "s")
        consumer.conn.ack(got[4].headers["message-id"], "s", receipt="acked")
        consumer.wait_receipts({"acked"})
        primary.kill9()
        assert backup.wait_listening(30) == both[1]
        assert consumer.wait_connections(2) == both
        again = _new(consumer, 20, 15)
        assert sorted(m.body for m in again) == sorted(f"m{i}" for i in range(5, 20))
        assert all(m.headers.get("redelivered") == "true" for m in again)
        assert producer.wait_connections(2) == both
        send_all(producer.conn, producer, "/queue/ha", [f"n{i}" for i in range(5)])
        fresh = _new(consumer, 35, 5)
        assert [m.body for m in fresh] == [f"n{i}" for i in range(5)]
        for m in again + fresh:
            consumer.conn.ack(m.headers["message-id"], "s")
        assert len(consumer.quiet(1.0)) == 40  # nothing acknowledged came back, nothing twice
        for c in clients:
            c.close()
        assert consumer.ports == producer.ports == both  # one failover each
        assert backup.terminate() == 0
        assert _stored_bodies(ha_config[0], ["/queue/ha"]) == {}  # every message acked
    finally:
        _stop_all((primary, backup), clients)


@pytest.mark.slow
def test_failover_clients_leave_a_sigstopped_primary_that_then_does_nothing(
    ha_config: tuple[StoreFactory, Path],
) -> None:
    primary, backup, (a, b) = _fixed_pair(ha_config[1])
    clients: list[FailoverClient] = []
    try:
        # Heart-beats tell the clients the primary stopped (in 2.5 s). The backup comes
        # first in their list: stomp.py always starts at the head, and a stopped primary
        # still completes TCP handshakes (it would get every first attempt); until the
        # backup is live its port refuses, so they start on the primary all the same.
        producer = FailoverClient([b, a], heartbeats=(1000, 1000))
        consumer = FailoverClient([b, a], subscribe="/queue/ha", heartbeats=(1000, 1000))
        clients += [producer, consumer]
        witness, wrec = client(a)  # no failover: stays with the primary
        witness.subscribe("/queue/witness", id="w", ack="auto")
        send_all(producer.conn, producer, "/queue/ha", [f"r{i}" for i in range(10)])
        got = consumer.wait_messages(10)
        for m in got[:2]:
            consumer.conn.ack(m.headers["message-id"], "s")
        consumer.conn.ack(got[2].headers["message-id"], "s", receipt="acked")
        consumer.wait_receipts({"acked"})
        assert producer.ports == consumer.ports == [a]
        primary.proc.send_signal(signal.SIGSTOP)
        _wait_stopped(primary.proc.pid)
        producer.conn.send("/queue/ha", "late", headers={"receipt": "late"})
        witness.send("/queue/witness", "ghost", headers={"receipt": "ghost"})
        backup.wait_listening(30)
        assert consumer.wait_connections(2)[-1] == b
        again = _new(consumer, 10, 7)
        assert sorted(m.body for m in again) == [f"r{i}" for i in range(3, 10)]
        assert all(m.headers.get("redelivered") == "true" for m in again)
        assert producer.wait_connections(2)[-1] == b
        primary.proc.send_signal(signal.SIGCONT)
        assert primary.proc.wait(30) == 3  # lost the live lock
        send_all(producer.conn, producer, "/queue/ha", ["after"])
        assert [m.body for m in _new(consumer, 17, 1)] == ["after"]
        assert len(consumer.quiet(1.0)) == 18  # no "late": the stopped primary stored nothing
        assert not {"late", "ghost"} & (producer.receipts | wrec.receipts)
        assert wrec.messages == []  # ... and delivered nothing
        for c in clients:
            c.close()
        assert consumer.ports[-1] == producer.ports[-1] == b
        assert backup.terminate() == 0
        stored = _stored_bodies(ha_config[0], ["/queue/ha", "/queue/witness"])
        assert stored == {"/queue/ha": sorted(["after", *(f"r{i}" for i in range(3, 10))])}
        # not "late" nor "ghost": the resumed primary's writes were fenced
    finally:
        _stop_all((primary, backup), clients)
