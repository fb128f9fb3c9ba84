"""The broker with real stomp.py clients over loopback: receipts, subscriptions in each
acknowledgement mode, NACK, disconnect, transactions, restart and redelivery, large bodies.

The first test runs on the file store, SQLite and PostgreSQL; the others on the file store
(what they check is the queue manager's, the same on every back-end).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from store import StoreConfig
from tests.stomp.support import bye, client, running_broker, send_all
from tests.support.backends import StoreFactory, file_config_mapping


@pytest.fixture
def file_config(tmp_path: Path) -> StoreConfig:
    mapping = file_config_mapping(tmp_path, "NIO")
    mapping["min-large-message-size"] = 4096
    return StoreConfig.from_mapping(mapping)


def _bodies(messages: list) -> list[str]:
    return [m.body for m in messages]


def test_receipted_sends_are_delivered_in_order_and_acked_ones_never_return(
    stomp_factory: StoreFactory,
) -> None:
    bodies = [f"message {i}: ü" for i in range(30)]
    with running_broker(stomp_factory.config) as broker:
        conn, rec = client(broker.address[1])
        send_all(conn, rec, "/queue/orders", bodies)
        conn.subscribe("/queue/orders", id="s1", ack="client-individual")
        got = rec.wait_messages(30)
        assert _bodies(got) == bodies
        assert [m.headers["n"] for m in got] == [str(i) for i in range(30)]
        assert not any("redelivered" in m.headers for m in got)
        for m in got[:19]:
            conn.ack(m.headers["message-id"], "s1")
        conn.ack(got[19].headers["message-id"], "s1", receipt="acked")
        rec.wait_receipts({"acked"})
        bye(conn, rec)
    with running_broker(stomp_factory.config) as broker:
        conn, rec = client(broker.address[1])
        conn.subscribe("/queue/orders", id="s1", ack="client-individual")
        again = rec.wait_messages(10)
        assert _bodies(again) == bodies[20:]
        assert rec.quiet() == again  # nothing acknowledged came back
        assert all(m.headers.get("redelivered") == "true" for m in again)
        bye(conn, rec)


def test_a_client_ack_acknowledges_every_earlier_message_of_the_subscription(
    file_config: StoreConfig,
) -> None:
    with running_broker(file_config) as broker:
        conn, rec = client(broker.address[1])
        send_all(conn, rec, "/queue/c", ["a", "b", "c", "d", "e"])
        conn.subscribe("/queue/c", id="s", ack="client")
        got = rec.wait_messages(5)
        conn.ack(got[2].headers["message-id"], "s", receipt="r")
        rec.wait_receipts({"r"})
        bye(conn, rec)
    with running_broker(file_config) as broker:
        conn, rec = client(broker.address[1])
        conn.subscribe("/queue/c", id="s", ack="auto")
        assert _bodies(rec.quiet()) == ["d", "e"]
        bye(conn, rec)


def test_a_nack_delivers_the_message_again_marked_redelivered(file_config: StoreConfig) -> None:
    with running_broker(file_config) as broker:
        conn, rec = client(broker.address[1])
        send_all(conn, rec, "/queue/n", ["x", "y"])
        conn.subscribe("/queue/n", id="s", ack="client-individual")
        first = rec.wait_messages(2)
        conn.nack(first[0].headers["message-id"], "s")
        third = rec.wait_messages(3)[2]
        assert third.body == "x"
        assert third.headers["redelivered"] == "true"
        assert third.headers["message-id"] == first[0].headers["message-id"]
        bye(conn, rec)


def test_messages_a_consumer_left_unacknowledged_go_to_the_next_one(
    file_config: StoreConfig,
) -> None:
    with running_broker(file_config) as broker:
        producer, prec = client(broker.address[1])
        send_all(producer, prec, "/queue/d", ["1", "2", "3"])
        first, frec = client(broker.address[1])
        first.subscribe("/queue/d", id="s", ack="client")
        frec.wait_messages(3)
        bye(first, frec)  # gone without an ACK
        second, srec = client(broker.address[1])
        second.subscribe("/queue/d", id="s", ack="client")
        got = srec.wait_messages(3)
        assert _bodies(got) == ["1", "2", "3"]
        assert all(m.headers["redelivered"] == "true" for m in got)
        bye(second, srec)
        bye(producer, prec)


def test_auto_acknowledged_messages_are_gone_after_a_restart(file_config: StoreConfig) -> None:
    with running_broker(file_config) as broker:
        conn, rec = client(broker.address[1])
        send_all(conn, rec, "/queue/auto", ["p", "q"])
        conn.subscribe("/queue/auto", id="s", ack="auto")
        rec.wait_messages(2)
        bye(conn, rec)
    with running_broker(file_config) as broker:
        conn, rec = client(broker.address[1])
        conn.subscribe("/queue/auto", id="s", ack="auto")
        assert rec.quiet() == []
        bye(conn, rec)


def test_a_transaction_s_sends_appear_at_commit_and_never_after_abort(
    file_config: StoreConfig,
) -> None:
    with running_broker(file_config) as broker:
        conn, rec = client(broker.address[1])
        conn.subscribe("/queue/t", id="s", ack="auto")
        conn.begin("tx1")
        conn.send("/queue/t", "dropped", transaction="tx1")
        conn.abort("tx1")
        conn.begin("tx2")
        conn.send("/queue/t", "kept-1", transaction="tx2")
        conn.send("/queue/t", "kept-2", transaction="tx2")
        assert rec.quiet(0.3) == []  # invisible before COMMIT
        conn.commit("tx2", headers={"receipt": "c"})
        rec.wait_receipts({"c"})
        assert _bodies(rec.wait_messages(2)) == ["kept-1", "kept-2"]
        assert _bodies(rec.quiet()) == ["kept-1", "kept-2"]
        bye(conn, rec)


def test_an_ack_in_an_aborted_transaction_delivers_the_message_again(
    file_config: StoreConfig,
) -> None:
    with running_broker(file_config) as broker:
        conn, rec = client(broker.address[1])
        send_all(conn, rec, "/queue/ta", ["m"])
        conn.subscribe("/queue/ta", id="s", ack="client-individual")
        got = rec.wait_messages(1)[0]
        conn.begin("tx")
        conn.ack(got.headers["message-id"], "s", transaction="tx")
        conn.abort("tx")
        again = rec.wait_messages(2)[1]
        assert again.body == "m"
        assert again.headers["redelivered"] == "true"
        conn.begin("tx2")
        conn.ack(again.headers["message-id"], "s", transaction="tx2")
        conn.commit("tx2", headers={"receipt": "c"})
        rec.wait_receipts({"c"})
        bye(conn, rec)
    with running_broker(file_config) as broker:
        conn, rec = client(broker.address[1])
        conn.subscribe("/queue/ta", id="s", ack="auto")
        assert rec.quiet() == []
        bye(conn, rec)


def test_a_large_body_goes_out_byte_for_byte_before_and_after_a_restart(
    file_config: StoreConfig,
) -> None:
    body = bytes(range(256)) * 1024  # 256 KiB, NULs included: over min-large-message-size
    with running_broker(file_config) as broker:
        conn, rec = client(broker.address[1])
        conn.send("/queue/big", body, headers={"receipt": "r"})
        rec.wait_receipts({"r"})
        bye(conn, rec)
    for _ in range(2):
        with running_broker(file_config) as broker:
            conn, rec = client(broker.address[1], binary=True)
            conn.subscribe("/queue/big", id="s", ack="client-individual")
            got = rec.wait_messages(1)[0]
            assert got.body == body
            bye(conn, rec)


def test_stomp_1_2_clients_connect_to_127_0_0_1_and_ack_by_the_ack_header(
    file_config: StoreConfig,
) -> None:
    import stomp

    from tests.stomp.support import Recorder

    def connect12(port: int) -> tuple:
        conn = stomp.Connection12([("127.0.0.1", port)], heartbeats=(0, 0))
        rec = Recorder()
        conn.set_listener("rec", rec)
        conn.connect(wait=True)  # host:127.0.0.1, which coilmq's own 1.2 refuses
        return conn, rec

    with running_broker(file_config) as broker:
        conn, rec = connect12(broker.address[1])
        send_all(conn, rec, "/queue/v12", ["a", "b"])
        conn.subscribe("/queue/v12", id="s", ack="client-individual")
        got = rec.wait_messages(2)
        conn.ack(got[0].headers["ack"], receipt="r")
        rec.wait_receipts({"r"})
        assert not rec.errors
        bye(conn, rec)
    with running_broker(file_config) as broker:
        conn, rec = connect12(broker.address[1])
        conn.subscribe("/queue/v12", id="s", ack="auto")
        assert _bodies(rec.quiet()) == ["b"]
        bye(conn, rec)
