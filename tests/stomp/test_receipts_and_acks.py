"""Two bugs planted in the broker that no broker test caught (issue 43):

- a RECEIPT sent before the store's flush returned: here the flush is made to block, then to
  fail (a fault on the real store's flush, nothing else replaced), and no RECEIPT may come
  before it returns, none at all when it fails;
- an ACK whose ``subscription`` header names another subscription of the same connection:
  an ERROR (the connection then ends, STOMP 1.2), and the message stays unacknowledged: it is
  delivered again.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from store import StoreConfig
from store.errors import StoreUnavailableError
from tests.stomp.support import bye, client, running_broker
from tests.support.backends import file_config_mapping


@pytest.fixture
def file_config(tmp_path: Path) -> StoreConfig:
    return StoreConfig.from_mapping(file_config_mapping(tmp_path, "NIO"))


def test_no_receipt_before_the_flush_returns(file_config: StoreConfig) -> None:
    with running_broker(file_config) as broker:
        store: Any = broker.queue_manager.store
        real = store.flush
        gate = threading.Event()
        entered = threading.Event()

        def blocked() -> None:
            entered.set()
            assert gate.wait(30)
            real()

        store.flush = blocked
        conn, rec = client(broker.address[1])
        conn.send("/queue/held", "one", headers={"receipt": "r1"})
        assert entered.wait(10), "the SEND never reached the flush"
        time.sleep(0.5)
        assert "r1" not in rec.receipts, "a RECEIPT before the flush returned"
        gate.set()
        rec.wait_receipts({"r1"})
        store.flush = real
        bye(conn, rec)


def test_no_receipt_when_the_flush_fails(file_config: StoreConfig) -> None:
    with running_broker(file_config) as broker:
        store: Any = broker.queue_manager.store
        real = store.flush
        failed = threading.Event()

        def failing() -> None:
            failed.set()
            raise StoreUnavailableError("injected: the flush failed")

        store.flush = failing
        conn, rec = client(broker.address[1])
        conn.send("/queue/held", "one", headers={"receipt": "r1"})
        assert failed.wait(10), "the SEND never reached the flush"
        time.sleep(0.5)
        store.flush = real
        assert "r1" not in rec.receipts, "a RECEIPT for a SEND whose flush failed"
        conn.disconnect()


def test_an_ack_naming_another_subscription_is_refused_and_the_message_stays(
    file_config: StoreConfig,
) -> None:
    with running_broker(file_config) as broker:
        port = broker.address[1]
        producer, prec = client(port)
        producer.send("/queue/a", "for a", headers={"receipt": "s"})
        prec.wait_receipts({"s"})
        bye(producer, prec)

        conn, rec = client(port)
        conn.subscribe("/queue/a", id="sub-a", ack="client-individual")
        conn.subscribe("/queue/b", id="sub-b", ack="client-individual")
        (message,) = rec.wait_messages(1)
        conn.ack(message.headers["message-id"], "sub-b", receipt="wrong")
        with rec.cond:
            assert rec.cond.wait_for(lambda: rec.errors, 10), "no ERROR for the wrong ACK"
        assert "wrong" not in rec.receipts
        assert "no unacknowledged message" in rec.errors[0].headers.get("message", "")

        again, arec = client(port)  # the message was not acknowledged: delivered again
        again.subscribe("/queue/a", id="s", ack="client-individual")
        (redelivered,) = arec.wait_messages(1)
        assert redelivered.body == "for a"
        again.ack(redelivered.headers["message-id"], "s", receipt="right")
        arec.wait_receipts({"right"})
        bye(again, arec)


@pytest.mark.parametrize("command", ["send", "ack"])
def test_a_slow_flush_is_not_a_silent_client(file_config: StoreConfig, command: str) -> None:
    """A client that keeps its heart-beats (every 0.5 s, promised 1 s) while a SEND or an
    ACK with a receipt waits 3 s for the store's flush (a database away, say) is not dropped
    for silence: the broker read nothing meanwhile, but the client said nothing late. Its
    RECEIPT comes after."""
    from tests.stomp.support import raw_connect, read_frames
    from tests.stomp.test_wire import _raw_until_closed

    with running_broker(file_config) as broker:
        store: Any = broker.queue_manager.store
        real = store.flush

        def slow() -> None:
            time.sleep(3.0)
            real()

        sock = raw_connect(broker.address[1])
        sock.sendall(b"CONNECT\naccept-version:1.2\nhost:h\nheart-beat:500,500\n\n\x00")
        assert read_frames(sock, 1)[0][0] == "CONNECTED"
        if command == "send":
            frame = b"SEND\ndestination:/queue/slow\nreceipt:r\n\nbody\x00"
        else:
            sock.sendall(b"SEND\ndestination:/queue/slow\nreceipt:s\n\nbody\x00")
            sock.sendall(b"SUBSCRIBE\ndestination:/queue/slow\nid:1\nack:client-individual\n\n\x00")
            got = read_frames(sock, 2)
            assert [f[0] for f in got] == ["RECEIPT", "MESSAGE"], got
            ack_id = got[1][1]["ack"]
            frame = f"ACK\nid:{ack_id}\nreceipt:r\n\n\x00".encode()
        store.flush = slow
        sock.sendall(frame)
        wrote = _raw_until_closed(sock, 4.5, beat=0.5)
        store.flush = real
        assert b"ERROR" not in wrote, wrote
        assert b"RECEIPT\nreceipt-id:r" in wrote, wrote
        sock.close()
