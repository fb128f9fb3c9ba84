"""A large message whose body is gone or replaced, each back-end (docs/large.md, "Integrity"):
the load checks every queued large message's body to exist with the size its record says and
raises LostDataError (CorruptionError for another size) naming the body; ``open_body()`` of a
message whose body went after the load, a paged one included, raises LostDataError naming it
(the large-message store's own UnknownRecordError named no file)."""

from __future__ import annotations

import pytest

from store.errors import CorruptionError, LostDataError
from store.messaging import Xid
from store.store import Store
from tests.messaging.support import Harness, msg
from tests.support.backends import StoreFactory

LIMIT = 1024
BIG = bytes(range(256)) * 14  # 3584 bytes, over LIMIT


@pytest.fixture
def h(messaging_factory: StoreFactory) -> Harness:
    messaging_factory.config = messaging_factory.config.replace(min_large_message_size=LIMIT)
    return Harness(messaging_factory)


def _store(h: Harness) -> Store:
    store = h.factory.store
    assert isinstance(store, Store)
    return store


def _offline(h: Harness) -> Store:
    """The manager closed and the store opened again without one (as a person with the
    files or the table in hand)."""
    assert h.sm is not None
    h.sm.close()
    h.sm = None
    store = h.factory.open()
    assert isinstance(store, Store)
    return store


def _refused_without_body(h: Harness) -> tuple[int, str, LostDataError]:
    """A small message, then a large one whose body is deleted offline; the next open's
    load refuses the store. Returns the large message's id, where its body was, the error."""
    sm = h.setup("q")
    sm.send(msg(b"small"))
    mid = sm.send(msg(BIG))
    store = _offline(h)
    where = store.large_messages.path(mid)
    store.large_messages.delete(mid)
    h.factory.close()
    with pytest.raises(LostDataError) as caught:
        h.open()
    return mid, where, caught.value


def test_the_load_refuses_a_queued_large_message_whose_body_is_gone(h: Harness) -> None:
    mid, where, error = _refused_without_body(h)
    assert error.path == where and str(mid) in where
    assert f"large message {mid}" in error.reason and "3584 bytes" in error.reason
    assert error.hint is not None and "repair --salvage" in error.hint


def test_the_load_refuses_a_prepared_send_whose_body_is_gone(h: Harness) -> None:
    sm = h.setup("q")
    tx = sm.begin()
    mid = tx.send(msg(BIG))
    tx.prepare(Xid(1, b"lost", b""))
    store = _offline(h)
    store.large_messages.delete(mid)
    h.factory.close()
    with pytest.raises(LostDataError, match=f"large message {mid}"):
        h.open()


def test_the_load_refuses_a_body_of_another_size_than_its_record(h: Harness) -> None:
    sm = h.setup("q")
    mid = sm.send(msg(BIG))
    store = _offline(h)
    store.large_messages.delete(mid)
    with store.large_messages.create(mid) as w:  # an older or another copy, same id
        w.write(BIG[:2000])
    h.factory.close()
    with pytest.raises(CorruptionError) as caught:
        h.open()
    assert not isinstance(caught.value, LostDataError)
    assert caught.value.path == store.large_messages.path(mid)
    assert "holds 2000 bytes, its record 3584" in caught.value.reason


def test_open_body_of_a_body_gone_after_the_load_names_it(h: Harness) -> None:
    sm = h.setup("q")
    mid = sm.send(msg(BIG))
    sm = h.restart()
    (d,) = sm.receive("q", 1)
    _store(h).large_messages.delete(mid)
    with pytest.raises(LostDataError) as caught:
        d.message.open_body()
    assert caught.value.path == _store(h).large_messages.path(mid)


PAGE_AFTER_ONE = {"orders": {"max_size_messages": 1, "address_full_policy": "PAGE"}}


def test_the_load_refuses_a_paged_large_message_whose_body_is_gone(h: Harness) -> None:
    """On a page no queue acknowledged anything of, every record deliverable: the load
    knows the body must exist (from the page's runs, no page read) and names it."""
    h.factory.config = h.factory.config.replace(address_settings=PAGE_AFTER_ONE)
    mid, where, error = _refused_without_body(h)  # the large one paged: only its page names it
    assert error.path == where
    assert f"large message {mid}" in error.reason and "page 1" in error.reason


def test_open_body_of_a_paged_message_whose_body_is_gone_names_it(h: Harness) -> None:
    """A page a queue acknowledged a message of: a body it names may be gone by right (the
    load's sweep deletes an acknowledged one's), so a lost one is found when it is opened."""
    h.factory.config = h.factory.config.replace(address_settings=PAGE_AFTER_ONE)
    sm = h.setup("q")
    sm.send(msg(b"small"))
    first = sm.send(msg(b"paged first"))
    mid = sm.send(msg(BIG))
    got = sm.receive("q", 2)
    assert [d.message.message_id for d in got][1] == first
    for d in got:
        sm.ack("q", d.message.message_id)  # type: ignore[arg-type]
    store = _offline(h)
    store.large_messages.delete(mid)
    h.factory.close()
    sm = h.open()
    (d,) = sm.receive("q", 2)
    assert d.message.message_id == mid
    with pytest.raises(LostDataError) as caught:
        d.message.open_body()
    assert caught.value.path == _store(h).large_messages.path(mid)


@pytest.mark.parametrize("how", ["acknowledged", "rolled-back"])
def test_the_load_accepts_paged_bodies_gone_by_right_while_their_page_stays(
    h: Harness, how: str
) -> None:
    """A paged large message acknowledged by its queue (its body swept by the next load) or
    sent in a transaction rolled back (its body deleted at the rollback), on a page that
    stays for another large message: the loads after never take its body for lost."""
    h.factory.config = h.factory.config.replace(address_settings=PAGE_AFTER_ONE)
    sm = h.setup("q")
    sm.send(msg(b"small"))
    sm.send(msg(b"paged first"))  # unacknowledged: page 1 stays
    if how == "acknowledged":
        gone = sm.send(msg(BIG))
    else:
        tx = sm.begin()
        gone = tx.send(msg(BIG))
        tx.rollback()
    kept = sm.send(msg(BIG))
    if how == "acknowledged":
        got = sm.receive("q", 3)
        assert got[2].message.message_id == gone
        sm.ack("q", gone)  # type: ignore[arg-type]
    sm = h.restart()  # (its sweep deletes an acknowledged body)
    assert _store(h).paging.store("orders").pages() == [1]
    sm = h.restart()
    assert gone not in _store(h).large_messages.ids()
    got = sm.receive("q", 4)
    assert got[-1].message.message_id == kept
    with got[-1].message.open_body() as body:
        assert body.read() == BIG
