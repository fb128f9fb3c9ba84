"""Large messages via the storage manager, each back-end (docs/messaging.md, reference SM-19..22):
bodies over ``min-large-message-size`` go to the large-message store, given as bytes or as a
stream, are read back as a stream, and leave no body behind once acknowledged, refused, rolled
back or orphaned by a crash."""

from __future__ import annotations

import io
from typing import Any

import pytest

from store.errors import DuplicateIdError
from store.messaging import Message, Xid
from store.messaging.records import ADD_LARGE_MESSAGE, ADD_MESSAGE_PROTOCOL
from store.store import Store
from tests.messaging.support import Harness, drain, msg
from tests.support.backends import StoreFactory

LIMIT = 1024
BIG = bytes(range(256)) * 14  # 3584 bytes: 3.5 x the limit (SM-19)


@pytest.fixture
def h(messaging_factory: StoreFactory) -> Harness:
    messaging_factory.config = messaging_factory.config.replace(min_large_message_size=LIMIT)
    return Harness(messaging_factory)


def _bodies_stored(h: Harness) -> list[int]:
    store = h.factory.store
    assert isinstance(store, Store)
    return store.large_messages.ids()


def _read(m: Message) -> bytes:
    with m.open_body() as f:
        return f.read()


def _journal_types(h: Harness) -> list[int]:
    assert h.sm is not None
    h.sm.close()
    h.sm = None
    store = h.factory.open()
    types = [rec.user_record_type for rec in store.messages.load().records]
    store.bindings.load()
    h.factory.close()
    return types


@pytest.mark.parametrize("as_stream", [False, True], ids=["bytes", "stream"])
def test_a_large_body_is_stored_apart_read_back_as_a_stream_and_deleted_with_its_message(
    h: Harness, as_stream: bool
) -> None:
    sm = h.setup("q")
    body: Any = io.BytesIO(BIG) if as_stream else BIG
    mid = sm.send(Message("orders", body, properties={"k": 1}))
    assert _bodies_stored(h) == [mid]
    assert ADD_LARGE_MESSAGE in _journal_types(h)
    sm = h.open()
    (d,) = sm.receive("q", 1)
    assert d.message.message_id == mid and d.message.properties == {"k": 1}
    assert d.message.is_large and d.message.body == b""
    assert _read(d.message) == BIG
    sm.ack("q", mid)  # type: ignore[arg-type]
    assert _bodies_stored(h) == []


def test_a_body_at_or_under_the_limit_stays_inline_also_from_a_stream(h: Harness) -> None:
    sm = h.setup("q")
    sm.send(Message("orders", io.BytesIO(BIG[:LIMIT])))
    sm.send(msg(BIG[:10]))
    assert _bodies_stored(h) == []
    types = _journal_types(h)
    assert ADD_LARGE_MESSAGE not in types and types.count(ADD_MESSAGE_PROTOCOL) == 2
    got = drain(h.open(), "q")
    assert [d.message.body for d in got] == [BIG[:LIMIT], BIG[:10]]
    assert [_read(d.message) for d in got] == [BIG[:LIMIT], BIG[:10]]
    assert not any(d.message.is_large for d in got)


def test_a_large_message_on_two_queues_keeps_its_body_until_both_acked(h: Harness) -> None:
    sm = h.setup("q1", "q2")
    mid = sm.send(msg(BIG))
    drain(sm, "q1")
    sm = h.restart()
    assert _bodies_stored(h) == [mid]
    (d,) = sm.receive("q2", 1)
    assert _read(d.message) == BIG
    sm.ack("q2", mid)  # type: ignore[arg-type]
    assert _bodies_stored(h) == []


def test_a_refused_large_send_leaves_no_body(h: Harness) -> None:
    sm = h.setup("q")
    assert sm.send(Message("nowhere", BIG)) is None
    sm.send(msg(BIG[:5]), dup_id=b"d")
    with pytest.raises(DuplicateIdError):
        sm.send(msg(BIG), dup_id=b"d")
    assert _bodies_stored(h) == []


def test_an_orphan_body_is_swept_at_load(h: Harness) -> None:
    sm = h.setup("q")
    kept = sm.send(msg(BIG))
    store = h.factory.store
    assert isinstance(store, Store)
    with store.large_messages.create(10**9) as w:  # a body whose message never made it
        w.write(BIG)
    h.restart()
    assert h.rec is not None and h.rec.cleaned == {"large_bodies": 1}
    assert _bodies_stored(h) == [kept]


def test_rolled_back_and_prepared_large_sends(h: Harness) -> None:
    sm = h.setup("q")
    tx = sm.begin()
    tx.send(msg(BIG))
    tx.rollback()
    assert _bodies_stored(h) == []
    tx = sm.begin()
    mid = tx.send(msg(BIG))
    tx.prepare(Xid(1, b"large", b""))
    sm = h.restart()
    assert h.rec is not None and _bodies_stored(h) == [mid]
    h.rec.prepared[Xid(1, b"large", b"")].commit()
    (d,) = sm.receive("q", 1)
    assert _read(d.message) == BIG


def test_a_non_durable_large_message_is_gone_with_its_body_after_a_restart(h: Harness) -> None:
    sm = h.setup("q")
    sm.send(msg(BIG, durable=False))
    (d,) = sm.receive("q", 1)
    assert _read(d.message) == BIG
    sm = h.crash_restart()
    assert sm.depth("q") == 0 and _bodies_stored(h) == []


def test_a_paged_large_message_keeps_its_body_until_its_page_goes(h: Harness) -> None:
    h.factory.config = h.factory.config.replace(
        address_settings={"orders": {"max_size_messages": 1, "address_full_policy": "PAGE"}}
    )
    sm = h.setup("q")
    sm.send(msg(b"small"))
    mid = sm.send(msg(BIG))
    sm = h.restart()
    got = sm.receive("q", 2)
    assert [d.message.message_id for d in got][1] == mid
    assert _read(got[1].message) == BIG
    for d in got:
        sm.ack("q", d.message.message_id)  # type: ignore[arg-type]
    assert _bodies_stored(h) == []


class _Zeros(io.RawIOBase):
    """A stream of ``size`` zero bytes that never holds them."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n


def test_a_streamed_body_is_never_held_whole(tmp_path: Any) -> None:
    import tracemalloc

    from tests.support.backends import backend_by_name

    factory = StoreFactory(backend_by_name("file-nio"), tmp_path, "t00000000_")
    factory.config = factory.config.replace(min_large_message_size=LIMIT)
    try:
        h = Harness(factory)
        sm = h.setup("q")
        size = 48 << 20
        tracemalloc.start()
        mid = sm.send(Message("orders", io.BufferedReader(_Zeros(size))))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 12 << 20, f"sending a {size}-byte stream peaked at {peak} bytes"
        (d,) = sm.receive("q", 1)
        with d.message.open_body() as f:
            assert f.seek(0, io.SEEK_END) == size
        sm.ack("q", mid)  # type: ignore[arg-type]
    finally:
        factory.teardown()
