"""``store broker`` as a user runs it: a subprocess on an ephemeral loopback port with real
stomp.py clients. SIGTERM stops it cleanly (exit 0, messages kept); kill -9 while producers
send with receipts and a consumer acknowledges with receipts loses nothing: every message
whose SEND got a RECEIPT is delivered (before the kill, or after the restart if it was not
acknowledged), none whose ACK got a RECEIPT comes back, none comes twice after the restart,
and one delivered before the kill comes back only marked ``redelivered``. Seeds are printed.
Rounds: 10 on the file store, 5 on PostgreSQL, as issue 29 asks (3-4 s each; ten times as many
under STORE_TEST_PROFILE=soak).
"""

from __future__ import annotations

import random
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import stomp

from tests.stomp.support import BrokerProcess, bye, client, send_all, write_toml
from tests.support import profile
from tests.support.backends import StoreFactory, file_config_mapping
from tests.support.cli import run_store
from tests.support.db_backends import new_store_mapping


def _config_file(factory: StoreFactory) -> Path:
    if factory.spec.name.startswith("file"):
        mapping: dict[str, Any] = file_config_mapping(factory.tmp_path, "NIO")
        # Appends wait up to 2 s in the process's buffer unless someone flushes: a RECEIPT
        # sent before the broker's flush would be lost by the kill (the test catches it).
        mapping["journal-buffer-timeout"] = 2_000_000_000
    else:
        mapping = new_store_mapping(factory.tmp_path, factory.prefix, factory.spec.name)
    return write_toml(factory.tmp_path / "broker.toml", mapping)


@pytest.fixture
def file_factory(tmp_path: Path) -> StoreFactory:
    from tests.support.backends import backend_by_name, unique_prefix

    return StoreFactory(backend_by_name("file-nio"), tmp_path, unique_prefix())


def test_sigterm_stops_the_broker_cleanly_and_a_restart_delivers_what_it_held(
    file_factory: StoreFactory,
) -> None:
    path = _config_file(file_factory)
    broker = BrokerProcess(path)
    conn, rec = client(broker.port)
    send_all(conn, rec, "/queue/kept", ["one", "two"])
    bye(conn, rec)
    assert broker.terminate() == 0
    broker = BrokerProcess(path)
    conn, rec = client(broker.port)
    conn.subscribe("/queue/kept", id="s", ack="client-individual")
    assert [m.body for m in rec.quiet()] == ["one", "two"]
    bye(conn, rec)
    assert broker.terminate() == 0


def test_a_send_is_durable_when_its_receipt_arrives(file_factory: StoreFactory) -> None:
    # The journal keeps appends in the process for up to 2 s unless flushed (see
    # _config_file): only the broker's flush before the RECEIPT makes them survive the kill.
    path = _config_file(file_factory)
    broker = BrokerProcess(path)
    conn, rec = client(broker.port)
    send_all(conn, rec, "/queue/now", [f"m{i}" for i in range(50)])
    broker.kill9()
    broker = BrokerProcess(path)
    conn, rec = client(broker.port)
    conn.subscribe("/queue/now", id="s", ack="auto")
    assert [m.body for m in rec.quiet()] == [f"m{i}" for i in range(50)]
    bye(conn, rec)
    assert broker.terminate() == 0


def test_a_missing_configuration_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = run_store("broker", "--config", str(tmp_path / "nope.toml"), "--port", "0")
    assert done.returncode == 2
    assert "nope.toml" in done.stderr and "Traceback" not in done.stderr


def test_a_port_in_use_is_one_line_and_exit_2(file_factory: StoreFactory) -> None:
    """The port taken by another socket: one line naming it and ``--port``, exit 2 (a
    configuration error, not "unavailable": a script would retry that for ever), no
    traceback, and the store closed again (a second broker on a free port opens it)."""
    config = _config_file(file_factory)
    (config.parent / "artemis-users.properties").write_text("u = p\n")  # secure: no WARNING
    (config.parent / "artemis-roles.properties").write_text("r = u\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_store("broker", "--config", str(config), "--port", str(port))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert f"cannot listen on 127.0.0.1:{port}" in lines[0] and "--port" in done.stderr
    assert "Traceback" not in done.stderr
    broker = BrokerProcess(config)
    try:
        conn, rec = client(broker.port)
        send_all(conn, rec, "/queue/after", ["served"])
        bye(conn, rec)
    finally:
        assert broker.terminate() == 0


class _Consumer(stomp.ConnectionListener):  # type: ignore[misc]
    """Acknowledges each message with a receipt (unless ``acks`` is false: an ``auto``
    subscription, whose ACKs the broker refuses with an ERROR); records deliveries and
    completed ACKs."""

    def __init__(self, conn: Any, *, acks: bool = True) -> None:
        self.conn = conn
        self.acks = acks
        self.lock = threading.Lock()
        self.delivered: list[tuple[str, bool]] = []  # (body, marked redelivered)
        self.acked: set[str] = set()

    def on_message(self, frame: Any) -> None:
        with self.lock:
            self.delivered.append((frame.body, frame.headers.get("redelivered") == "true"))
        if not self.acks:
            return
        try:
            self.conn.ack(frame.headers["message-id"], "s", receipt=f"ack:{frame.body}")
        except Exception:
            pass  # the broker is gone

    def on_receipt(self, frame: Any) -> None:
        receipt = frame.headers["receipt-id"]
        if receipt.startswith("ack:"):
            with self.lock:
                self.acked.add(receipt[4:])


class _Producer(stomp.ConnectionListener):  # type: ignore[misc]
    def __init__(self, conn: Any, name: str) -> None:
        self.conn = conn
        self.name = name
        self.lock = threading.Lock()
        self.receipted: set[str] = set()
        self.sent = 0

    def on_receipt(self, frame: Any) -> None:
        with self.lock:
            self.receipted.add(frame.headers["receipt-id"])

    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set() and self.sent < 400:  # a short round
                with self.lock:
                    behind = self.sent - len(self.receipted)
                if behind > 50:
                    time.sleep(0.002)
                    continue
                body = f"{self.name}-{self.sent}"
                self.conn.send("/queue/k9", body, headers={"receipt": body})
                self.sent += 1
        except Exception:
            pass  # the broker is gone


def _connect(port: int, listener: Any) -> Any:
    conn = stomp.Connection11([("127.0.0.1", port)], heartbeats=(0, 0), reconnect_attempts_max=1)
    conn.set_listener("l", listener)
    conn.connect(wait=True)
    return conn


def _round(path: Path, seed: int, n: int) -> None:
    rnd = random.Random(seed)
    broker = BrokerProcess(path)
    producers = []
    for p in range(2):
        producer = _Producer(None, f"r{n}p{p}")
        producer.conn = _connect(broker.port, producer)
        producers.append(producer)
    consumer = _Consumer(None)
    consumer.conn = _connect(broker.port, consumer)
    consumer.conn.subscribe("/queue/k9", id="s", ack="client-individual")
    stop = threading.Event()
    threads = [threading.Thread(target=p.run, args=(stop,), daemon=True) for p in producers]
    for t in threads:
        t.start()
    time.sleep(rnd.uniform(0.3, 1.0))
    broker.kill9()
    stop.set()
    for t in threads:
        t.join(10)
    with consumer.lock:
        acked = set(consumer.acked)
        before = {body for body, _ in consumer.delivered}
    receipted = set().union(*(p.receipted for p in producers))
    assert receipted, f"seed {seed}: no SEND was receipted before the kill"

    broker = BrokerProcess(path)
    drain = _Consumer(None, acks=False)
    drain.conn = _connect(broker.port, drain)
    drain.conn.subscribe("/queue/k9", id="s", ack="auto")
    last = -1
    while last != len(drain.delivered):  # until half a second passes with nothing new
        last = len(drain.delivered)
        time.sleep(0.5)
    after = [body for body, _ in drain.delivered]
    assert len(after) == len(set(after)), f"seed {seed}: a message came twice after restart"
    assert not (acked & set(after)), f"seed {seed}: acknowledged {sorted(acked & set(after))[:3]}"
    # A message whose ACK went out without its RECEIPT coming back may be gone: it was
    # delivered before (the consumer acknowledges every message it gets).
    lost = receipted - before - set(after)
    assert not lost, f"seed {seed}: receipted and never delivered again: {sorted(lost)[:3]}"
    unmarked = [body for body, marked in drain.delivered if body in before and not marked]
    assert not unmarked, f"seed {seed}: delivered again without redelivered: {unmarked[:3]}"
    drain.conn.disconnect()
    assert broker.terminate() == 0
    print(
        f"round {n} seed {seed}: {len(receipted)} receipted, {len(acked)} acked, "
        f"{len(after)} after restart"
    )


@pytest.mark.slow  # 4-6 s a round: two broker start-ups; issue 29 asks for 10 and 5 rounds
@pytest.mark.parametrize(("backend_name", "rounds"), [("file-nio", 10), ("postgresql", 5)])
def test_kill9_while_sending_and_acknowledging_loses_nothing_receipted(
    tmp_path: Path, backend_name: str, rounds: int
) -> None:
    from tests.support.backends import backend_by_name, unique_prefix

    factory = StoreFactory(backend_by_name(backend_name), tmp_path, unique_prefix())
    try:
        path = _config_file(factory)
        seed = random.randrange(2**32)
        print(f"seed {seed}")
        for n in range(profile.rounds(rounds)):
            _round(path, seed + n, n)
    finally:
        factory.teardown()
