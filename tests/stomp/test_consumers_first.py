"""Consumers first (issue 29; ``store.stomp.queue_manager``'s docstring): while an ACK or a
NACK is being handled a SEND waits before it is stored, until it is done or
``CONSUMERS_FIRST_WAIT`` has passed, so producers never stop."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from coilmq.util.frames import ACK, NACK, SEND, Frame  # type: ignore[import-untyped]

from store.stomp import StompQueueStore, queue_manager
from store.stomp.queue_manager import DurableQueueManager

DESTINATION = "/queue/first"


class _Connection:
    """What the queue manager writes MESSAGE frames to."""

    def __init__(self) -> None:
        self.frames: list[Frame] = []

    def send_frame(self, frame: Frame) -> None:
        self.frames.append(frame)


@pytest.fixture
def manager(queue_store: StompQueueStore) -> DurableQueueManager:
    """The durable queue manager on ``queue_store`` (which the fixture closes)."""
    return DurableQueueManager(queue_store)


def _send(qm: DurableQueueManager, body: str) -> None:
    qm.store_frame(Frame(SEND, headers={"destination": DESTINATION}, body=body))


#: An acknowledgement frame, the queue manager's method handling it, and the store's method
#: that method calls (held in the tests).
_ACKNOWLEDGEMENTS = {ACK: ("ack", "ack"), NACK: ("nack", "cancel")}


def _held_ack(
    qm: DurableQueueManager, monkeypatch: pytest.MonkeyPatch, command: str = ACK
) -> tuple[threading.Event, threading.Thread]:
    """A consumer's ACK (or NACK) of the one message sent, held inside the store's ack (or
    cancel) until the returned event is set; the thread running it."""
    handler, store_method = _ACKNOWLEDGEMENTS[command]
    consumer = _Connection()
    qm.subscribe(consumer, DESTINATION, id="s", ack="client-individual")
    qm.send(Frame(SEND, headers={"destination": DESTINATION}, body="first"))
    (delivered,) = consumer.frames
    entered, release = threading.Event(), threading.Event()
    original = getattr(qm.store, store_method)

    def held(*args: Any, **kwargs: Any) -> None:
        entered.set()
        release.wait(30)
        original(*args, **kwargs)

    monkeypatch.setattr(qm.store, store_method, held)
    headers = {"message-id": delivered.headers["message-id"], "subscription": "s"}
    acker = threading.Thread(target=getattr(qm, handler), args=(consumer, Frame(command, headers)))
    acker.start()
    assert entered.wait(10)
    return release, acker


@pytest.mark.parametrize("command", [ACK, NACK])
def test_a_send_waits_for_an_acknowledgement_in_progress(
    manager: DurableQueueManager, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setattr(queue_manager, "CONSUMERS_FIRST_WAIT", 30.0)
    release, acker = _held_ack(manager, monkeypatch, command)
    stored = threading.Event()

    def produce() -> None:
        _send(manager, "second")
        stored.set()

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        assert not stored.wait(0.3)  # still waiting for the ACK
        assert manager.store.size(DESTINATION) == 0  # and nothing stored meanwhile
    finally:
        release.set()
    assert stored.wait(10)  # the ACK done, the SEND goes on at once
    producer.join(10)
    acker.join(10)
    manager.store.flush()
    # (a NACKed message is delivered again at once, to the same consumer: not waiting)
    assert manager.store.size(DESTINATION) == 1
    taken = manager.store.take(DESTINATION)
    assert taken is not None and taken.frame.body == "second"


def test_a_send_waits_no_longer_than_the_bound(
    manager: DurableQueueManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_manager, "CONSUMERS_FIRST_WAIT", 0.05)
    release, acker = _held_ack(manager, monkeypatch)
    try:
        started = time.monotonic()
        for n in range(3):  # each SEND waits its bound, then is stored: producers never stop
            _send(manager, f"while acking {n}")
        assert time.monotonic() - started >= 3 * 0.05  # each did wait (for the ACK) first
        assert acker.is_alive()  # the ACK is still being handled
        assert manager.store.size(DESTINATION) == 3
    finally:
        release.set()
        acker.join(10)


def test_a_send_without_an_ack_in_progress_does_not_wait(
    manager: DurableQueueManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queue_manager, "CONSUMERS_FIRST_WAIT", 30.0)
    start = time.monotonic()
    _send(manager, "alone")
    assert time.monotonic() - start < 10  # far below the bound it would have waited
    assert manager.store.size(DESTINATION) == 1
