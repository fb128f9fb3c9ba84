"""``StorageManager.browse``: every message still on a queue, once, in id order, with its
queues (or one queue's only); read-only (nothing delivered, no count changed, nothing
written), paged messages included whether or not a queue has read them into memory yet."""

from __future__ import annotations

from typing import Any

import pytest

from store.errors import JournalStateError, UnknownQueueError
from store.messaging import StorageManager, Xid
from store.store import Store
from tests.messaging.support import Harness, msg
from tests.support.backends import StoreFactory


@pytest.fixture
def h(messaging_factory: StoreFactory) -> Harness:
    return Harness(messaging_factory)


def _browsed(sm: StorageManager) -> list[tuple[bytes, tuple[str, ...]]]:
    out = []
    for message, queues in sm.browse():
        with message.open_body() as body:
            out.append((body.read(), queues))
    return out


def _journal_size(h: Harness) -> Any:
    store = h.factory.store
    assert isinstance(store, Store)
    return store.messages.stats()


def test_browse_lists_what_is_on_the_queues_and_changes_nothing(h: Harness) -> None:
    h.factory.config = h.factory.config.replace(
        address_settings={"orders": {"max_size_messages": 3, "page_size_bytes": 1024}},
        min_large_message_size=1024,
    )
    sm = h.setup("q1", "q2")
    ids = [sm.send(msg(b"m%d" % i + b"." * 100)) for i in range(8)]  # 5 of them paged
    large = sm.send(msg(b"L" * 5000), queues=["q2"])
    got = sm.receive("q1", 4)  # 3 from memory, 1 read back from a page
    sm.ack("q1", got[0].message.message_id)  # type: ignore[arg-type]
    sm.cancel("q1", got[1].message.message_id)  # type: ignore[arg-type]
    tx = sm.begin()
    tx.ack("q1", got[2].message.message_id)  # type: ignore[arg-type]
    tx.prepare(Xid(1, b"held", b""))  # held by a prepared transaction: still on q1
    before = _journal_size(h)

    expected = [(b"m0" + b"." * 100, ("q2",))]
    expected += [(b"m%d" % i + b"." * 100, ("q1", "q2")) for i in range(1, 8)]
    expected += [(b"L" * 5000, ("q2",))]
    assert _browsed(sm) == expected
    assert [m.message_id for m, _ in sm.browse()] == [*ids, large]
    assert _journal_size(h) == before  # nothing written
    assert (sm.depth("q1"), sm.depth("q2")) == (7, 9)
    # nothing was delivered by browsing: q1 goes on where receive left it
    nxt = sm.receive("q1", 10)
    assert [d.message.message_id for d in nxt] == [ids[1], *ids[4:]]
    assert nxt[0].delivery_count == 1  # the cancelled one, counted once
    assert all(d.delivery_count == 0 for d in nxt[1:])

    # One queue's messages only, paged and in memory alike, with only its name.
    assert [(m.message_id, q) for m, q in sm.browse("q1")] == [(mid, ("q1",)) for mid in ids[1:]]
    assert [m.message_id for m, _ in sm.browse("q2")] == [*ids, large]

    sm = h.restart()  # after a load: everything paged is still only in the pages
    assert [q for _, q in sm.browse()] == [("q2",), *[("q1", "q2")] * 7, ("q2",)]
    assert [m.message_id for m, _ in sm.browse("q1")] == ids[1:]
    with pytest.raises(UnknownQueueError):
        next(sm.browse("nowhere"))
    assert all(d.delivery_count == 0 for d in sm.receive("q2", 10))


def test_browse_needs_a_load(messaging_factory: StoreFactory) -> None:
    store = messaging_factory.open()
    assert isinstance(store, Store)
    sm = StorageManager(store)
    with pytest.raises(JournalStateError):
        next(sm.browse())
