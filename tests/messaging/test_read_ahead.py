"""A queue's read-ahead of its paged messages (``Pager.depage``, issue 27: a receive of a deep
queue pops the next message the walk already found): what it holds is still paged, so a
record made deliverable behind it (a transaction's commit) is delivered at its place in the
pages, a damaged record ahead fails only the receive that reaches it, and the compiled walk
(``read_ahead_run``) and the Python one deliver the same, on every back-end."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Any

import pytest

import store.messaging.page_cache as page_cache
from store.messaging import Message
from store.messaging.page_cache import PageCache
from store.messaging.pager_cursors import READ_AHEAD
from store.paging.format import PageRecords
from tests.messaging.support import Harness, bodies, drain, msg
from tests.support.backends import StoreFactory


@pytest.fixture(params=["compiled", "python"])
def h(
    request: pytest.FixtureRequest, messaging_factory: StoreFactory, monkeypatch: Any
) -> Iterator[Harness]:
    if request.param == "python":
        monkeypatch.setattr(page_cache, "COMPILED_WALK", None)
    elif page_cache.COMPILED_WALK is None:
        pytest.skip("the compiled walk is not built (STORE_NO_SPEEDUPS or no compiler)")
    harness = Harness(messaging_factory)
    harness.factory.config = harness.factory.config.replace(
        address_settings={"orders": {"max_size_messages": 1, "address_full_policy": "PAGE"}}
    )
    yield harness


def _send(h: Harness, *payloads: bytes) -> None:
    assert h.sm is not None
    for p in payloads:
        assert h.sm.send(msg(p)) is not None


def _one(h: Harness) -> bytes:
    assert h.sm is not None
    (delivery,) = h.sm.receive("q", 1)
    assert delivery.message.message_id is not None
    h.sm.ack("q", delivery.message.message_id)
    return delivery.message.body  # type: ignore[return-value]


def test_a_transaction_committed_behind_the_read_ahead_is_delivered_at_its_place(
    h: Harness,
) -> None:
    """The read-ahead took b and c past the transaction's invisible record; its commit
    makes that record the next one, before b and c, as without a read-ahead."""
    sm = h.setup("q")
    _send(h, b"memory")
    tx = sm.begin()
    tx.send(msg(b"in tx"))  # paged (the address is full), invisible until the commit
    _send(h, b"a", b"b", b"c")
    assert [_one(h), _one(h)] == [b"memory", b"a"]  # the walk read b and c ahead
    tx.commit()
    assert [_one(h) for _ in range(3)] == [b"in tx", b"b", b"c"]
    assert sm.receive("q", 1) == []
    assert bodies(drain(h.crash_restart(), "q")) == []


def test_a_send_after_the_read_ahead_comes_after_it_and_a_restart_loses_nothing(
    h: Harness,
) -> None:
    """Messages read ahead are not in memory: depth counts them, a crash puts them back in
    their pages in order, and a send while they wait comes after them."""
    sm = h.setup("q")
    _send(h, b"memory", *[b"p%d" % i for i in range(5)])
    assert _one(h) == b"memory"
    assert _one(h) == b"p0"
    _send(h, b"later")
    sm.send(Message("orders", b"volatile", durable=False))  # in memory: delivered first
    assert sm.depth("q") == 6
    assert _one(h) == b"volatile"
    assert [_one(h), _one(h)] == [b"p1", b"p2"]
    sm = h.crash_restart()
    assert bodies(drain(sm, "q")) == [b"p3", b"p4", b"later"]


def test_a_damaged_record_ahead_fails_only_the_receive_that_reaches_it(h: Harness) -> None:
    """The read-ahead stops before a record that does not decode; the messages before it
    are delivered, then the receive that reaches it raises (and every later one, as the
    cursor stays at it)."""
    sm = h.setup("q")
    _send(h, b"memory", b"a", b"b", b"c", b"d")
    pager = sm._pager
    state = pager._addresses["orders"]
    (page_no,) = state.pages
    records = pager.page_records("orders", page_no)
    records[1] = b"\x09" + records[1][1:]  # b's record: a version no decoder knows
    # as a page read whole gives them: its bytes, and native int64 (offset, length) pairs
    offsets = [sum(len(r) for r in records[:i]) for i in range(len(records))]
    bounds = array("q", [v for o, r in zip(offsets, records, strict=True) for v in (o, len(r))])
    state.cache[page_no] = PageCache(PageRecords(b"".join(records), bounds.tobytes()))
    assert [_one(h), _one(h)] == [b"memory", b"a"]
    for _ in range(2):
        with pytest.raises(ValueError, match="version"):
            sm.receive("q", 1)


def test_a_deep_queue_is_delivered_in_order_across_read_aheads_and_pages(h: Harness) -> None:
    """More paged messages than one read-ahead holds, over several pages, with receives of
    one and of many mixed: every message once, in send order."""
    h.factory.config = h.factory.config.replace(
        address_settings={
            "orders": {
                "max_size_messages": 1,
                "address_full_policy": "PAGE",
                "page_size_bytes": 4096,
            }
        }
    )
    sm = h.setup("q")
    sent = [b"m%04d" % i for i in range(3 * READ_AHEAD + 7)]
    _send(h, *sent)
    got: list[bytes] = []
    while len(got) < len(sent):
        batch = sm.receive("q", 1 if len(got) % 3 else 5)
        assert batch
        for d in batch:
            assert d.message.message_id is not None
            sm.ack("q", d.message.message_id)
        got += bodies(batch)
    assert got == sent
    assert sm.receive("q", 1) == []
