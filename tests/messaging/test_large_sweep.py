"""The load's sweep of large bodies no queue can receive again (store.messaging.loader
``_large_bodies``, docs/messaging.md#load), for the window the kill -9 rounds found: a paged large
message's body was kept until its whole page went, so a body acknowledged (or sent in a
transaction that never committed) on a page some queue had not finished stayed after every
restart. On every back-end; deterministic (the kill -9 rounds of test_kill9.py hit the same
windows at random moments)."""

from __future__ import annotations

import logging

import pytest

from store.messaging import Message, Xid
from store.store import Store
from tests.messaging.support import Harness, msg
from tests.support.backends import StoreFactory

BIG = bytes(range(256)) * 14  # 3584 bytes, over the limit below


@pytest.fixture
def h(messaging_factory: StoreFactory) -> Harness:
    messaging_factory.config = messaging_factory.config.replace(
        min_large_message_size=1024,
        address_settings={"orders": {"max_size_messages": 1, "address_full_policy": "PAGE"}},
    )
    return Harness(messaging_factory)


def _bodies(h: Harness) -> list[int]:
    store = h.factory.store
    assert isinstance(store, Store)
    return store.large_messages.ids()


def _read(m: Message) -> bytes:
    with m.open_body() as f:
        return f.read()


def test_an_acknowledged_paged_body_is_swept_while_its_page_stays(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """Two large messages paged on one page; the first is acknowledged, the second only
    delivered, so the page stays: after a restart the first body is swept
    (``cleaned["large_bodies"] == 1``), the second is kept and still reads whole."""
    sm = h.setup("q")
    sm.send(msg(b"in memory"))
    first = sm.send(msg(BIG))
    second = sm.send(msg(BIG))
    got = {d.message.message_id: d for d in sm.receive("q", 3)}
    assert first in got and second in got
    for mid in [m for m in got if m != second]:
        sm.ack("q", mid)  # type: ignore[arg-type]
    assert sorted(_bodies(h)) == sorted([first, second])  # the page still names both
    sm = h.restart()
    assert h.rec is not None and h.rec.cleaned.get("large_bodies") == 1, h.rec.cleaned
    assert _bodies(h) == [second]
    (d,) = sm.receive("q", 5)
    assert d.message.message_id == second and _read(d.message) == BIG
    with caplog.at_level(logging.WARNING, logger="store.messaging"):
        sm.ack("q", second)  # type: ignore[arg-type]
    assert _bodies(h) == []  # the page went, with the bodies it still named
    assert not [r for r in caplog.records if "not deleted" in r.getMessage()]
    sm = h.restart()
    assert h.rec is not None and "large_bodies" not in h.rec.cleaned


def test_a_paged_body_of_a_transaction_that_never_committed_is_swept(h: Harness) -> None:
    """A transaction pages a large message and the process dies before it commits: the
    page record stays (invisible) and, after the restart, its body is swept; a committed
    paged large message on the same address is kept and reads whole."""
    sm = h.setup("q")
    sm.send(msg(b"in memory"))
    kept = sm.send(msg(BIG))
    tx = sm.begin()
    lost = tx.send(msg(BIG))
    sm.flush()
    assert sorted(_bodies(h)) == sorted([kept, lost])
    sm = h.crash_restart()
    assert h.rec is not None and h.rec.cleaned.get("large_bodies") == 1, h.rec.cleaned
    assert _bodies(h) == [kept]
    ids = [d.message.message_id for d in sm.receive("q", 5)]
    assert kept in ids and lost not in ids


@pytest.mark.parametrize("restart", ["clean", "crash"])
def test_the_bodies_of_a_prepared_transaction_are_kept_by_the_sweep(
    h: Harness, restart: str
) -> None:
    """A prepared transaction's large sends (one held in memory, one paged: the address pages
    past its first message) are named by no committed record, yet the transaction may still
    commit: the load's sweep keeps both bodies, and the commit after the restart delivers both
    whole."""
    sm = h.setup("q")
    tx = sm.begin()
    sent = [tx.send(msg(BIG)), tx.send(msg(BIG))]
    xid = Xid(7, b"sweep", b"")
    tx.prepare(xid)
    sm = h.restart() if restart == "clean" else h.crash_restart()
    assert h.rec is not None and "large_bodies" not in h.rec.cleaned, h.rec.cleaned
    assert sorted(_bodies(h)) == sorted(sent)
    h.rec.prepared[xid].commit()
    got = sm.receive("q", 5)
    assert [d.message.message_id for d in got] == sent
    assert all(_read(d.message) == BIG for d in got)


@pytest.mark.parametrize("prepared", [False, True], ids=["rolled back", "prepared, rolled back"])
def test_a_rolled_back_transaction_deletes_its_paged_bodies_at_once(
    h: Harness, prepared: bool
) -> None:
    """Issue 40: a rollback deletes the large bodies of its paged sends when it returns, as it
    does those held in memory (they waited for their page to go, or for the next load's
    sweep); a committed paged large message on the same page is kept and reads whole."""
    sm = h.setup("q")
    sm.send(msg(b"in memory"))
    kept = sm.send(msg(BIG))  # paged: the address holds one message
    tx = sm.begin()
    lost = [tx.send(msg(BIG)), tx.send(msg(BIG))]
    if prepared:
        tx.prepare(Xid(9, b"rollback", b""))
        sm = h.restart()
        assert h.rec is not None
        tx = h.rec.prepared[Xid(9, b"rollback", b"")]
    assert sorted(_bodies(h)) == sorted([kept, *lost])
    tx.rollback()
    assert _bodies(h) == [kept]
    ids = {d.message.message_id: d for d in sm.receive("q", 5)}
    assert kept in ids and not set(lost) & set(ids)
    assert _read(ids[kept].message) == BIG
    sm = h.restart()
    assert h.rec is not None and "large_bodies" not in h.rec.cleaned, h.rec.cleaned
    assert _bodies(h) == [kept]
