"""The delivery policies through the STOMP broker (store.stomp.queue_manager): a NACK is a
failed delivery, the one that reaches ``max-delivery-attempts`` dead-letters the message, and
a subscriber of the dead-letter queue gets it with Artemis's ``_AMQ_ORIG_*`` headers; a
message past its ``expires`` header is never delivered, and a subscriber of the expiry queue
gets it whether a delivery or the store's expiry scan found it expired."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from store import StoreConfig
from tests.stomp.support import bye, client, running_broker
from tests.support.backends import file_config_mapping


def _config(tmp_path: Path, **settings: object) -> StoreConfig:
    mapping = file_config_mapping(tmp_path, "NIO")
    mapping["address-settings"] = {"#": settings}
    return StoreConfig.from_mapping(mapping)


def test_nacks_dead_letter_a_message_to_a_subscriber_of_the_dead_letter_queue(
    tmp_path: Path,
) -> None:
    config = _config(
        tmp_path,
        **{
            "max-delivery-attempts": 3,
            "dead-letter-address": "DLA",
            "auto-create-dead-letter-resources": True,
        },
    )
    with running_broker(config) as broker:
        port = broker.address[1]
        producer, prec = client(port)
        producer.send("/queue/orders", "poison", headers={"receipt": "s"})
        prec.wait_receipts({"s"})
        bye(producer, prec)

        conn, rec = client(port)
        conn.subscribe("/queue/orders", id="work", ack="client-individual")
        for attempt in range(3):
            message = rec.wait_messages(attempt + 1)[-1]
            assert message.body == "poison"
            conn.nack(message.headers["message-id"], "work", receipt=f"n{attempt}")
            rec.wait_receipts({f"n{attempt}"})
        assert len(rec.quiet()) == 3  # not delivered a fourth time

        dead, drec = client(port)
        dead.subscribe("DLQ./queue/orders", id="dlq", ack="client-individual")
        (moved,) = drec.wait_messages(1)
        assert moved.body == "poison"
        assert moved.headers["_AMQ_ORIG_ADDRESS"] == "/queue/orders"
        assert moved.headers["_AMQ_ORIG_QUEUE"] == "/queue/orders"
        assert "_AMQ_ORIG_MESSAGE_ID" in moved.headers
        dead.ack(moved.headers["message-id"], "dlq", receipt="a")
        drec.wait_receipts({"a"})
        bye(dead, drec)
        bye(conn, rec)


def test_a_subscriber_of_the_dead_letter_queue_gets_it_as_it_is_moved(tmp_path: Path) -> None:
    config = _config(tmp_path, **{"max-delivery-attempts": 1, "dead-letter-address": "DLA"})
    with running_broker(config) as broker:
        port = broker.address[1]
        manager = broker.queue_manager.store.manager
        manager.create_address("DLA", routing_types=("MULTICAST",))
        manager.create_queue("dead", address="DLA", routing_type="MULTICAST")
        dead, drec = client(port)
        dead.subscribe("dead", id="dlq", ack="auto")
        conn, rec = client(port)
        conn.subscribe("/queue/jobs", id="work", ack="client-individual")
        conn.send("/queue/jobs", "bad job", headers={"receipt": "s"})
        (message,) = rec.wait_messages(1)
        conn.nack(message.headers["message-id"], "work")
        (moved,) = drec.wait_messages(1)
        assert moved.body == "bad job" and moved.headers["_AMQ_ORIG_ADDRESS"] == "/queue/jobs"
        bye(conn, rec)
        bye(dead, drec)


def test_a_message_past_its_expires_header_is_not_delivered(tmp_path: Path) -> None:
    with running_broker(_config(tmp_path)) as broker:
        port = broker.address[1]
        producer, prec = client(port)
        soon = str(int(time.time() * 1000) + 300)
        producer.send("/queue/news", "stale", headers={"receipt": "a", "expires": soon})
        producer.send("/queue/news", "fresh", headers={"receipt": "b"})
        prec.wait_receipts({"a", "b"})
        bye(producer, prec)
        time.sleep(0.4)
        conn, rec = client(port)
        conn.subscribe("/queue/news", id="s", ack="auto")
        assert [m.body for m in rec.quiet()] == ["fresh"]
        bye(conn, rec)


def _expiry_config(tmp_path: Path, scan_period_ms: int) -> StoreConfig:
    mapping = file_config_mapping(tmp_path, "NIO")
    mapping["address-settings"] = {"#": {"expiry-address": "EXP"}}
    mapping["message-expiry-scan-period"] = scan_period_ms
    return StoreConfig.from_mapping(mapping)


def _watch_and_send_stale(broker: Any) -> list[tuple[Any, Any]]:
    """The expiry queue ``expired`` made and subscribed (``ack:auto``), then a message to
    ``/queue/news`` that expires 200 ms later, receipted. Returns [(watcher, its recorder),
    (producer, its recorder)]."""
    port = broker.address[1]
    manager = broker.queue_manager.store.manager
    manager.create_address("EXP", routing_types=("MULTICAST",))
    manager.create_queue("expired", address="EXP", routing_type="MULTICAST")
    watcher, wrec = client(port)
    watcher.subscribe("expired", id="exp", ack="auto")
    producer, prec = client(port)
    soon = str(int(time.time() * 1000) + 200)
    producer.send("/queue/news", "stale", headers={"receipt": "a", "expires": soon})
    prec.wait_receipts({"a"})
    return [(watcher, wrec), (producer, prec)]


def test_a_subscriber_of_the_expiry_queue_gets_what_a_delivery_found_expired(
    tmp_path: Path,
) -> None:
    # The scan is off: only the delivery to /queue/news meets the expired message.
    with running_broker(_expiry_config(tmp_path, -1)) as broker:
        clients = _watch_and_send_stale(broker)
        time.sleep(0.3)
        conn, rec = client(broker.address[1])
        conn.subscribe("/queue/news", id="s", ack="auto")
        (moved,) = clients[0][1].wait_messages(1)
        assert moved.body == "stale"
        assert moved.headers["_AMQ_ORIG_ADDRESS"] == "/queue/news"
        assert "_AMQ_ACTUAL_EXPIRY" in moved.headers
        assert rec.quiet() == []
        for c, r in [(conn, rec), *clients]:
            bye(c, r)


def test_a_subscriber_of_the_expiry_queue_gets_what_the_scan_moved(tmp_path: Path) -> None:
    # No consumer of /queue/news: only the store's expiry scan (every 50 ms) moves it.
    with running_broker(_expiry_config(tmp_path, 50)) as broker:
        clients = _watch_and_send_stale(broker)
        (moved,) = clients[0][1].wait_messages(1)
        assert moved.body == "stale" and moved.headers["_AMQ_ORIG_ADDRESS"] == "/queue/news"
        for c, r in clients:
            bye(c, r)
