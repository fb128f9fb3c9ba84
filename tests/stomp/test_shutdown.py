"""Closing an in-process broker while its clients are busy: producers sending with receipts
and consumers acknowledging (with receipts) until the broker goes away.

The broker stops accepting, ends every connection and waits for their threads before it
closes the store: nothing is logged at ERROR, no connection meets a closed journal, every
receipted SEND is in the store after reopening (unless a consumer got it) and no message whose
ACK was receipted is.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import stomp

from store import StoreConfig
from store.stomp import open_queue_store
from store.stomp.queue_manager import DurableQueueManager
from tests.stomp.support import WAIT, Recorder, raw_connect, read_frames, running_broker
from tests.support.backends import file_config_mapping
from tests.support.profile import rounds

PRODUCERS = 4
CONSUMERS = 4
ROUNDS = rounds(3)
DESTINATION = "/queue/busy"


class _Consumer(Recorder):
    """ACKs every MESSAGE with a receipt from stomp.py's receiver thread; records the
    bodies it got and the ones whose ACK was receipted."""

    def __init__(self, conn: Any) -> None:
        super().__init__()
        self.conn = conn
        self.got: set[str] = set()
        self.acked: set[str] = set()

    def on_message(self, frame: Any) -> None:
        with self.cond:
            self.got.add(frame.body)
        try:
            self.conn.ack(frame.headers["message-id"], "s", receipt=f"ack:{frame.body}")
        except Exception:
            pass  # the broker went away

    def on_receipt(self, frame: Any) -> None:
        super().on_receipt(frame)
        receipt = frame.headers["receipt-id"]
        if receipt.startswith("ack:"):
            with self.cond:
                self.acked.add(receipt.removeprefix("ack:"))


def _connect(port: int, listener: Any = None) -> tuple[Any, Recorder]:
    conn = stomp.Connection11([("127.0.0.1", port)], heartbeats=(0, 0), auto_content_length=True)
    rec = listener(conn) if listener else Recorder()
    conn.set_listener("rec", rec)
    conn.connect(wait=True)
    return conn, rec


def _produce(conn: Any, rec: Recorder, name: str, stop: threading.Event) -> None:
    """SEND with a receipt each (the receipt id is the body), at most 20 unanswered."""
    i = 0
    while not stop.is_set() and conn.is_connected():
        body = f"{name}-{i}"
        try:
            conn.send(DESTINATION, body, headers={"receipt": body})
        except Exception:
            return  # the broker went away
        i += 1
        with rec.cond:
            rec.cond.wait_for(lambda n=i: n - len(rec.receipts) < 20 or stop.is_set(), WAIT)


def _remaining(config: StoreConfig, destination: str = DESTINATION) -> list[str]:
    """The bodies ``destination`` holds in the store ``config`` describes."""
    qs = open_queue_store(config)
    try:
        bodies = []
        while (taken := qs.take(destination)) is not None:
            body = taken.frame.body
            bodies.append(body.decode() if isinstance(body, bytes) else body)
        return bodies
    finally:
        qs.close()


def test_closing_a_busy_broker_ends_its_connections_before_the_store(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG, logger="store")
    disconnect = DurableQueueManager.disconnect

    def slow_disconnect(self: DurableQueueManager, connection: Any) -> None:
        time.sleep(1.0)  # a connection that ends slowly, as under load (bench.stomp)
        disconnect(self, connection)

    monkeypatch.setattr(DurableQueueManager, "disconnect", slow_disconnect)
    for round_ in range(ROUNDS):
        config = StoreConfig.from_mapping(file_config_mapping(tmp_path / f"r{round_}", "NIO"))
        stop = threading.Event()
        with running_broker(config) as broker:
            port = broker.address[1]
            producers = [_connect(port) for _ in range(PRODUCERS)]
            consumers = [_connect(port, _Consumer) for _ in range(CONSUMERS)]
            for conn, _ in consumers:
                conn.subscribe(DESTINATION, id="s", ack="client-individual")
            threads = [
                threading.Thread(target=_produce, args=(conn, rec, f"p{n}", stop), daemon=True)
                for n, (conn, rec) in enumerate(producers)
            ]
            for t in threads:
                t.start()
            time.sleep(0.5)  # busy: the broker closes under them
        stop.set()
        for _, rec in producers:
            with rec.cond:
                rec.cond.notify_all()
        for t in threads:
            t.join(WAIT)
        for conn, _ in producers + consumers:
            conn.disconnect()  # stomp.py's threads end (the socket is already gone)

        receipted = set().union(*(rec.receipts for _, rec in producers))
        got = set().union(*(rec.got for _, rec in consumers))  # type: ignore[attr-defined]
        acked = set().union(*(rec.acked for _, rec in consumers))  # type: ignore[attr-defined]
        assert receipted, "the producers got no receipt: the broker was not busy"
        assert acked, "the consumers got no ACK receipt: the broker was not busy"
        remaining = set(_remaining(config))
        assert not receipted - remaining - got, "receipted SENDs lost"
        assert not acked & remaining, "messages whose ACK was receipted came back"
        errors = [
            r for r in caplog.records if r.levelno >= logging.ERROR and r.name != "stomp.py"
        ]  # stomp.py logs its own failed sends at ERROR
        assert not errors, [r.getMessage() for r in errors]
        assert "JournalClosedError" not in caplog.text


def test_a_frame_after_shutdown_began_gets_an_error_frame_or_a_closed_socket(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="store")
    config = StoreConfig.from_mapping(file_config_mapping(tmp_path, "NIO"))
    with running_broker(config) as broker:
        sock = raw_connect(broker.address[1])
        sock.sendall(b"CONNECT\naccept-version:1.1\nhost:x\n\n\x00")
        assert read_frames(sock, 1)[0][0] == "CONNECTED"
        broker.shutdown()
        try:
            sock.sendall(b"SEND\ndestination:/queue/late\nreceipt:r\n\nlate\x00")
        except OSError:
            pass  # already closed
        got = read_frames(sock, 2)
        sock.close()
    assert [cmd for cmd, _, _ in got] in ([], ["ERROR"])
    assert _remaining(config, "/queue/late") == []
    assert "Traceback" not in caplog.text
