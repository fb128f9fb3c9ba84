"""The queue store beyond coilmq's suite: frames kept exactly as messages, the coilmq
configuration factory, and what ``size`` counts while messages are taken."""

from __future__ import annotations

from pathlib import Path

from coilmq.util.frames import Frame

from store.stomp import StompQueueStore, make_queue_store
from store.stomp.queue_store import StreamedFrame
from tests.stomp.support import write_toml
from tests.support.backends import file_config_mapping


def test_headers_of_every_type_and_a_text_body_come_back_equal(
    queue_store: StompQueueStore,
) -> None:
    frame = Frame(
        "MESSAGE",
        headers={"destination": "/queue/x", "n": 7, "flag": True, "colon:name": "a:b\\c"},
        body="ünïcode",
    )
    queue_store.enqueue("/queue/x", frame)
    assert queue_store.dequeue("/queue/x") == frame


def test_size_counts_only_messages_ready_to_take(queue_store: StompQueueStore) -> None:
    for body in (b"1", b"2", b"3"):
        queue_store.put("/queue/s", Frame("MESSAGE", {"destination": "/queue/s"}, body), sync=True)
    taken = queue_store.take("/queue/s")
    assert taken is not None and taken.frame.body == b"1"
    assert queue_store.size("/queue/s") == 2
    queue_store.cancel("/queue/s", taken.message_id)
    assert queue_store.size("/queue/s") == 3
    again = queue_store.take("/queue/s")
    assert again is not None and again.frame.body == b"1" and again.delivery_count == 1
    queue_store.ack("/queue/s", again.message_id, sync=True)
    assert queue_store.size("/queue/s") == 2


def test_coilmq_s_qstore_factory_opens_the_configured_store(tmp_path: Path) -> None:
    from coilmq.config import config as coilmq_config

    path = write_toml(tmp_path / "store.toml", file_config_mapping(tmp_path, "NIO"))
    coilmq_config.set("coilmq", "qstore.store.config", str(path))
    try:
        qs = make_queue_store()
        qs.enqueue("/queue/f", Frame("MESSAGE", {"destination": "/queue/f"}, b"kept"))
        qs.close()
        qs = make_queue_store()
        assert qs.dequeue("/queue/f") == Frame("MESSAGE", {"destination": "/queue/f"}, b"kept")
        qs.close()
    finally:
        coilmq_config.remove_option("coilmq", "qstore.store.config")


def test_a_large_body_is_taken_as_a_stream_and_dequeued_whole(
    queue_store: StompQueueStore,
) -> None:
    body = bytes(range(256)) * 800  # 200 KiB: over the default min-large-message-size
    for _ in range(2):
        queue_store.enqueue("/queue/big", Frame("MESSAGE", {"destination": "/queue/big"}, body))
    taken = queue_store.take("/queue/big", stream=True)
    assert isinstance(taken.frame, StreamedFrame) and not taken.frame.body  # in the store
    with taken.frame.open_body() as reader:
        assert reader.read() == body
    queue_store.ack("/queue/big", taken.message_id, sync=True)
    assert queue_store.dequeue("/queue/big") == Frame(
        "MESSAGE", {"destination": "/queue/big"}, body
    )
