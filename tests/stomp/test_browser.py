"""Queue browsing (store/stomp/browser.py) through a real STOMP client: a SUBSCRIBE with
``browser:true`` gets every message on the queue, a large body byte-exact, then the
``browser:end`` frame; nothing is consumed (a consumer then gets every message, none marked
redelivered); an empty or unknown queue gets the end at once and is not created; a browser on
a topic gets ERROR."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from store import StoreConfig
from tests.stomp.support import bye, client, running_broker, send_all
from tests.support.backends import file_config_mapping


@pytest.fixture
def file_config(tmp_path: Path) -> StoreConfig:
    mapping = file_config_mapping(tmp_path, "NIO")
    return StoreConfig.from_mapping(mapping).replace(min_large_message_size=4096)


def _browse(port: int, destination: str) -> list[Any]:
    conn, rec = client(port, binary=True)
    conn.subscribe(destination, id="b", headers={"browser": "true"})
    with rec.cond:
        rec.cond.wait_for(lambda: any(m.headers.get("browser") == "end" for m in rec.messages), 10)
        got = list(rec.messages)
    bye(conn, rec)
    return got


def test_a_browser_sees_every_message_and_consumes_none(file_config: StoreConfig) -> None:
    large = bytes(range(256)) * 64  # 16 KiB: a large message, streamed from the store
    with running_broker(file_config) as broker:
        port = broker.address[1]
        conn, rec = client(port)
        send_all(conn, rec, "/queue/browsed", ["one", "two", "three"])
        conn.send("/queue/browsed", large, headers={"receipt": "big"})
        rec.wait_receipts({"big"})
        bye(conn, rec)

        for _ in range(2):  # a second browse sees the same: the first changed nothing
            got = _browse(port, "/queue/browsed")
            assert [m.body for m in got[:-1]] == [b"one", b"two", b"three", large]
            assert all(m.headers["subscription"] == "b" for m in got)
            assert all("redelivered" not in m.headers for m in got)
            end = got[-1]
            assert end.headers["browser"] == "end" and end.body == b""
            assert end.headers["message-id"] == "" and end.headers["destination"] == ""

        conn, rec = client(port, binary=True)
        conn.subscribe("/queue/browsed", id="s", ack="client-individual")
        consumed = rec.wait_messages(4)
        assert [m.body for m in consumed] == [b"one", b"two", b"three", large]
        assert all("redelivered" not in m.headers for m in consumed)
        for m in consumed:
            conn.ack(m.headers["message-id"], "s")
        bye(conn, rec)
        assert [m.headers.get("browser") for m in _browse(port, "/queue/browsed")] == ["end"]


def test_a_browser_of_an_unknown_queue_gets_the_end_and_creates_nothing(
    file_config: StoreConfig,
) -> None:
    with running_broker(file_config) as broker:
        got = _browse(broker.address[1], "/queue/never-sent-to")
        assert [m.headers.get("browser") for m in got] == ["end"]
        manager: Any = broker.queue_manager.store.manager
        assert "/queue/never-sent-to" not in {q.name for q in manager.queues()}


def test_a_browser_on_a_topic_gets_error(file_config: StoreConfig) -> None:
    with running_broker(file_config) as broker:
        conn, rec = client(broker.address[1])
        conn.subscribe("/topic/news", id="b", headers={"browser": "true"})
        with rec.cond:
            assert rec.cond.wait_for(lambda: rec.errors, 10)
        assert "browser:true is for queues" in rec.errors[0].headers["message"]
        conn.disconnect()
