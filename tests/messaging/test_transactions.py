"""Transactions of the storage manager on each back-end (docs/messaging.md, reference SM-27..SM-36):
local commit and rollback of sends and acks, XA prepare surviving restarts with identical XIDs,
then commit delivering in order or rollback restoring, duplicate ids counted from commit."""

from __future__ import annotations

import pytest

from store.errors import DuplicateIdError, StoreError, UnknownMessageError
from store.messaging import StorageManager, Transaction, Xid
from tests.messaging.support import Harness, bodies, drain, msg
from tests.support.backends import StoreFactory

X1 = Xid(0x1234, b"global-1", b"branch-1")
X2 = Xid(0x1234, b"global-2", b"branch-1")


@pytest.fixture
def h(messaging_factory: StoreFactory) -> Harness:
    return Harness(messaging_factory)


def _send_all(tx: Transaction, *payloads: bytes) -> None:
    for p in payloads:
        assert tx.send(msg(p)) is not None


def _deliver(sm: StorageManager, queue: str, n: int) -> list[int]:
    ids = [d.message.message_id for d in sm.receive(queue, n)]
    assert len(ids) == n and all(i is not None for i in ids)
    return ids  # type: ignore[return-value]


def _prepared(h: Harness) -> dict[Xid, Transaction]:
    assert h.rec is not None
    return h.rec.prepared


def test_transactional_sends_are_invisible_until_commit_then_in_send_order(h: Harness) -> None:
    sm = h.setup("q")
    tx = sm.begin()
    _send_all(tx, b"t1", b"t2")
    sm.send(msg(b"plain"))
    assert sm.depth("q") == 1 and bodies(sm.receive("q", 5)) == [b"plain"]
    tx.commit()
    assert tx.state == "committed"
    assert sm.depth("q") == 3
    assert bodies(sm.receive("q", 5)) == [b"t1", b"t2"]
    # after a restart, the order is the order they became deliverable in
    assert bodies(drain(h.restart(), "q")) == [b"plain", b"t1", b"t2"]


def test_rolled_back_sends_are_gone_also_after_a_restart(h: Harness) -> None:
    sm = h.setup("q")
    tx = sm.begin()
    _send_all(tx, b"t1", b"t2")
    tx.rollback()
    assert sm.depth("q") == 0
    with pytest.raises(StoreError, match="rolled back"):
        tx.commit()
    sm = h.crash_restart()
    assert sm.depth("q") == 0 and h.rec is not None and h.rec.messages == 0


def test_a_transactional_ack_holds_the_message_until_commit(h: Harness) -> None:
    sm = h.setup("q")
    for p in (b"a", b"b", b"c"):
        sm.send(msg(p))
    a, _ = _deliver(sm, "q", 2)
    tx = sm.begin()
    tx.ack("q", a)
    with pytest.raises(UnknownMessageError):
        tx.ack("q", a)  # already held
    with pytest.raises(UnknownMessageError):
        sm.ack("q", a)
    assert sm.depth("q") == 3
    tx.commit()
    assert sm.depth("q") == 2
    sm = h.restart()
    assert bodies(drain(sm, "q")) == [b"b", b"c"]


def test_a_rolled_back_ack_puts_the_message_back_at_the_head_with_count_plus_one(
    h: Harness,
) -> None:
    sm = h.setup("q")
    for p in (b"a", b"b", b"c"):
        sm.send(msg(p))
    (a,) = _deliver(sm, "q", 1)
    tx = sm.begin()
    tx.ack("q", a)
    tx.rollback()
    got = sm.receive("q", 3)
    assert [(d.message.body, d.delivery_count) for d in got] == [(b"a", 1), (b"b", 0), (b"c", 0)]
    sm = h.restart()
    got = sm.receive("q", 1)
    assert [(d.message.body, d.delivery_count) for d in got] == [(b"a", 1)]


def test_prepared_sends_survive_restarts_with_the_same_xid_then_commit_delivers_in_order(
    h: Harness,
) -> None:
    sm = h.setup("q")
    tx = sm.begin()
    _send_all(tx, b"m1", b"m2", b"m3", b"m4")
    tx.prepare(X1)
    assert tx.state == "prepared" and tx.xid == X1
    with pytest.raises(StoreError, match="prepared"):
        tx.send(msg(b"late"))
    assert sm.depth("q") == 0
    h.restart()
    sm = h.crash_restart()  # twice, once without a clean stop
    (xid,) = _prepared(h)
    assert xid == X1 and (xid.format_id, xid.global_transaction_id, xid.branch_qualifier) == (
        0x1234,
        b"global-1",
        b"branch-1",
    )
    assert sm.depth("q") == 0
    _prepared(h)[X1].commit()
    assert bodies(drain(sm, "q")) == [b"m1", b"m2", b"m3", b"m4"]
    sm = h.restart()
    assert _prepared(h) == {} and sm.depth("q") == 0


def test_prepared_sends_rolled_back_after_a_restart_deliver_nothing(h: Harness) -> None:
    sm = h.setup("q")
    tx = sm.begin()
    _send_all(tx, b"m1", b"m2")
    tx.prepare(X1)
    sm = h.restart()
    _prepared(h)[X1].rollback()
    assert sm.depth("q") == 0
    sm = h.restart()
    assert _prepared(h) == {} and sm.depth("q") == 0 and h.rec is not None
    assert h.rec.messages == 0


def test_prepared_acks_hold_messages_across_a_restart_until_resolved(h: Harness) -> None:
    sm = h.setup("q1", "q2")
    for p in (b"m1", b"m2", b"m3", b"m4"):
        sm.send(msg(p), queues=["q1"])
        sm.send(msg(p + b"'"), queues=["q2"])
    tx1, tx2 = sm.begin(), sm.begin()
    for mid in _deliver(sm, "q1", 4):
        tx1.ack("q1", mid)
    for mid in _deliver(sm, "q2", 4):
        tx2.ack("q2", mid)
    tx1.prepare(X1)
    tx2.prepare(X2)
    sm = h.restart()
    assert set(_prepared(h)) == {X1, X2}
    assert (sm.depth("q1"), sm.depth("q2")) == (4, 4)  # held: counted, not delivered
    assert sm.receive("q1", 10) == [] and sm.receive("q2", 10) == []
    _prepared(h)[X1].commit()
    _prepared(h)[X2].rollback()
    assert sm.depth("q1") == 0
    got = sm.receive("q2", 10)
    assert bodies(got) == [b"m1'", b"m2'", b"m3'", b"m4'"]
    assert {d.delivery_count for d in got} == {1}
    sm = h.restart()
    assert _prepared(h) == {}
    assert (sm.depth("q1"), sm.depth("q2")) == (0, 4)


def test_several_xids_resolve_independently_and_an_empty_one_survives(h: Harness) -> None:
    sm = h.setup("q")
    xids = [Xid(1, b"g%d" % i, b"") for i in range(4)]
    for i, xid in enumerate(xids):
        tx = sm.begin()
        if i:  # the first one is empty
            _send_all(tx, b"%d-a" % i, b"%d-b" % i)
        tx.prepare(xid)
        if i == 2:
            tx.commit()
    sm = h.restart()
    assert set(_prepared(h)) == {xids[0], xids[1], xids[3]}
    assert bodies(sm.receive("q", 10)) == [b"2-a", b"2-b"]
    _prepared(h)[xids[3]].commit()
    _prepared(h)[xids[1]].rollback()
    _prepared(h)[xids[0]].rollback()
    assert bodies(sm.receive("q", 10)) == [b"3-a", b"3-b"]
    h.restart()
    assert _prepared(h) == {}


def test_non_durable_messages_of_a_prepared_transaction_are_gone_but_the_xid_survives(
    h: Harness,
) -> None:
    sm = h.setup("q")
    tx = sm.begin()
    tx.send(msg(b"v", durable=False))
    tx.prepare(X1)
    sm = h.restart()
    assert list(_prepared(h)) == [X1]
    _prepared(h)[X1].commit()
    assert sm.depth("q") == 0
    h.restart()
    assert _prepared(h) == {}


def test_an_xid_can_be_prepared_by_one_transaction_at_a_time(h: Harness) -> None:
    sm = h.setup("q")
    first, second = sm.begin(), sm.begin()
    first.prepare(X1)
    with pytest.raises(StoreError, match="another transaction"):
        second.prepare(X1)
    first.rollback()
    second.prepare(X1)
    second.commit()


def test_a_committed_duplicate_id_is_refused_at_once_without_a_restart(h: Harness) -> None:
    """The commit moves the transaction's reservation into the cache: a plain send and a
    transactional send of the same id raise DuplicateIdError right away (a commit that only
    released the reservation let them through until a restart reloaded the cache)."""
    sm = h.setup("q")
    tx = sm.begin()
    tx.send(msg(b"1"), dup_id=b"k")
    tx.commit()
    with pytest.raises(DuplicateIdError):
        sm.send(msg(b"2"), dup_id=b"k")
    again = sm.begin()
    with pytest.raises(DuplicateIdError):
        again.send(msg(b"3"), dup_id=b"k")
    again.rollback()
    prepared = sm.begin()
    prepared.send(msg(b"4"), dup_id=b"j")
    prepared.prepare(X1)
    prepared.commit()
    with pytest.raises(DuplicateIdError):
        sm.send(msg(b"5"), dup_id=b"j")
    assert bodies(drain(sm, "q")) == [b"1", b"4"]


def test_duplicate_ids_in_a_transaction_count_from_commit(h: Harness) -> None:
    sm = h.setup("q")
    tx = sm.begin()
    tx.send(msg(b"1"), dup_id=b"k")
    with pytest.raises(DuplicateIdError):  # pending in a transaction
        sm.send(msg(b"2"), dup_id=b"k")
    with pytest.raises(DuplicateIdError):
        tx.send(msg(b"3"), dup_id=b"k")
    tx.rollback()
    sm.send(msg(b"4"), dup_id=b"k")  # released by the rollback
    tx = sm.begin()
    tx.send(msg(b"5"), dup_id=b"j")
    tx.prepare(X1)
    sm = h.restart()
    with pytest.raises(DuplicateIdError):  # reserved by the recovered prepared transaction
        sm.send(msg(b"6"), dup_id=b"j")
    _prepared(h)[X1].commit()
    sm = h.restart()
    for dup in (b"j", b"k"):
        with pytest.raises(DuplicateIdError):
            sm.send(msg(b"7"), dup_id=dup)
    assert bodies(drain(sm, "q")) == [b"4", b"5"]
