"""Durable subscriptions to topics (store/stomp/topics.py) through stomp.py: a subscriber
away gets what was sent meanwhile, through a broker restart and a kill -9; UNSUBSCRIBE with
the name ends it for good; a SEND to a topic nobody subscribes durably stores nothing, and
the subscribers connected now get every SEND either way."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from store import StoreConfig
from tests.stomp.support import (
    BrokerProcess,
    Recorder,
    bye,
    client,
    running_broker,
    send_all,
    write_toml,
)
from tests.support.backends import file_config_mapping

NAME = {"durable-subscription-name": "news-feed"}
ACTIVEMQ_NAME = {"activemq.subscriptionName": "news-feed"}


def _config(tmp_path: Path) -> StoreConfig:
    return StoreConfig.from_mapping(file_config_mapping(tmp_path, "NIO"))


def _subscribed(conn: Any, rec: Recorder, destination: str, **options: Any) -> None:
    """SUBSCRIBE with a receipt, and wait for it: a SEND from another connection right
    after must find the subscription (each connection is served by its own thread, so
    without the receipt the SEND could be routed first: a flake of this file once)."""
    receipt = f"sub-{time.monotonic_ns()}"
    headers = {**options.pop("headers", {}), "receipt": receipt}
    conn.subscribe(destination, headers=headers, **options)
    rec.wait_receipts({receipt})


def _subscribe(port: int, headers: dict[str, str], ack: str = "client-individual") -> tuple:
    conn, rec = client(port, client_id="reader-1")
    _subscribed(conn, rec, "/topic/news", id="d", ack=ack, headers=headers)
    return conn, rec


def test_a_durable_subscriber_away_gets_what_was_sent_meanwhile(tmp_path: Path) -> None:
    with running_broker(_config(tmp_path)) as broker:
        port = broker.address[1]
        conn, rec = _subscribe(port, NAME)
        bye(conn, rec)  # away: the subscription's queue stays
        producer, prec = client(port)
        send_all(producer, prec, "/topic/news", ["one", "two", "three"])
        bye(producer, prec)
        manager = broker.queue_manager.store.manager
        assert manager.depth("reader-1.news-feed") == 3
        conn, rec = _subscribe(port, ACTIVEMQ_NAME)  # ActiveMQ's header names it as well
        got = rec.wait_messages(3)
        assert [m.body for m in got] == ["one", "two", "three"]
        assert {m.headers["destination"] for m in got} == {"/topic/news"}
        for m in got:
            conn.ack(m.headers["message-id"], "d")
        bye(conn, rec)
        assert manager.depth("reader-1.news-feed") == 0


def test_a_durable_subscription_holds_through_a_restart_and_a_kill_9(tmp_path: Path) -> None:
    path = write_toml(tmp_path / "broker.toml", file_config_mapping(tmp_path, "NIO"))
    broker = BrokerProcess(path)
    conn, rec = _subscribe(broker.port, NAME)
    bye(conn, rec)
    assert broker.terminate() == 0
    broker = BrokerProcess(path)
    producer, prec = client(broker.port)
    send_all(producer, prec, "/topic/news", [f"m{i}" for i in range(20)])
    broker.kill9()  # every receipted SEND is on the durable queue
    broker = BrokerProcess(path)
    conn, rec = _subscribe(broker.port, NAME, ack="auto")
    assert [m.body for m in rec.quiet()] == [f"m{i}" for i in range(20)]
    bye(conn, rec)
    assert broker.terminate() == 0


def test_unsubscribe_with_the_name_ends_it_and_drops_what_waits(tmp_path: Path) -> None:
    with running_broker(_config(tmp_path)) as broker:
        port = broker.address[1]
        manager = broker.queue_manager.store.manager
        conn, rec = _subscribe(port, NAME)
        producer, prec = client(port)
        send_all(producer, prec, "/topic/news", ["before"])
        assert [m.body for m in rec.wait_messages(1)] == [
            "before"
        ]  # delivered, not acknowledged: dropped with it
        assert manager.depth("reader-1.news-feed") == 1
        conn.unsubscribe("d", headers={**NAME, "receipt": "u"})
        rec.wait_receipts({"u"})
        assert "reader-1.news-feed" not in {q.name for q in manager.queues()}
        send_all(producer, prec, "/topic/news", ["after"])
        bye(producer, prec)
        conn2, rec2 = _subscribe(port, NAME)  # a new subscription: nothing from before
        assert rec2.quiet() == []
        bye(conn2, rec2)
        bye(conn, rec)


def test_a_send_to_a_topic_without_durable_subscriptions_stores_nothing(tmp_path: Path) -> None:
    with running_broker(_config(tmp_path)) as broker:
        port = broker.address[1]
        manager = broker.queue_manager.store.manager
        live, lrec = client(port)
        _subscribed(live, lrec, "/topic/weather", id="w", ack="auto")
        producer, prec = client(port)
        send_all(producer, prec, "/topic/weather", ["rain"])
        assert [m.body for m in lrec.wait_messages(1)] == ["rain"]
        assert "/topic/weather" not in {a.name for a in manager.addresses()}
        assert manager.queues() == []
        bye(producer, prec)
        bye(live, lrec)


def test_connected_and_durable_subscribers_both_get_each_send(tmp_path: Path) -> None:
    with running_broker(_config(tmp_path)) as broker:
        port = broker.address[1]
        durable, drec = _subscribe(port, NAME, ack="auto")
        live, lrec = client(port)
        _subscribed(live, lrec, "/topic/news", id="l", ack="auto")
        producer, prec = client(port)
        send_all(producer, prec, "/topic/news", ["both"])
        assert [m.body for m in drec.wait_messages(1)] == ["both"]
        assert [m.body for m in lrec.wait_messages(1)] == ["both"]
        for c, r in ((producer, prec), (live, lrec), (durable, drec)):
            bye(c, r)


def test_a_durable_subscribe_without_a_client_id_is_an_error(tmp_path: Path) -> None:
    with running_broker(_config(tmp_path)) as broker:
        conn, rec = client(broker.address[1])
        conn.subscribe("/topic/news", id="d", ack="auto", headers=NAME)
        with rec.cond:
            assert rec.cond.wait_for(lambda: rec.errors, 10)
        assert "client id" in rec.errors[0].headers["message"]
