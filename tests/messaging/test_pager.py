"""Paging and the address-full policies of the storage manager (store.messaging.pager and its
parts, through the manager), all back-ends (docs/messaging.md):
PAGE (paged messages delivered after those in memory, in order; cursor acks surviving restarts;
pages deleted once every queue consumed them; a send after acks freed memory still behind older
paged messages), DROP, FAIL, BLOCK (a limit of 0 refused, never waited on), and transactions
acking paged messages (prepared ones held across a restart). Limits inside transactions:
test_transaction_limits.py."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from store.errors import AddressFullError, ConfigError, JournalClosedError
from store.messaging import Message, Xid
from store.messaging.page_records import (
    ACKNOWLEDGE_CURSOR,
    PAGE_CURSOR_COMPLETE,
    PAGE_TRANSACTION,
    CursorAck,
    PageTransaction,
)
from store.store import Store
from tests.messaging.support import Harness, bodies, drain, msg
from tests.support.backends import StoreFactory

X1 = Xid(1, b"paged", b"")


@pytest.fixture
def h(messaging_factory: StoreFactory) -> Harness:
    return Harness(messaging_factory)


def _limit(h: Harness, **settings: Any) -> None:
    h.factory.config = h.factory.config.replace(address_settings={"orders": settings})


def _pages(h: Harness) -> list[int]:
    store = h.factory.store
    assert isinstance(store, Store)
    return store.paging.store("orders").pages()


def _journal_types(h: Harness) -> list[int]:
    assert h.sm is not None
    h.sm.close()
    h.sm = None
    store = h.factory.open()
    types = [rec.user_record_type for rec in store.messages.load().records]
    store.bindings.load()
    h.factory.close()
    return types


def _send(h: Harness, *payloads: bytes, **kwargs: Any) -> None:
    assert h.sm is not None
    for p in payloads:
        assert h.sm.send(msg(p, **kwargs)) is not None


PAYLOADS = [b"m%02d" % i + b"." * 200 for i in range(12)]


def test_paged_messages_follow_those_in_memory_and_pages_go_once_every_queue_consumed_them(
    h: Harness,
) -> None:
    _limit(h, max_size_messages=3, address_full_policy="PAGE", page_size_bytes=1024)
    sm = h.setup("q1", "q2")
    _send(h, *PAYLOADS)
    assert (sm.depth("q1"), sm.depth("q2")) == (12, 12)
    assert len(_pages(h)) >= 2  # 9 paged messages over pages of 1 KiB
    assert bodies(drain(sm, "q1")) == PAYLOADS
    assert sm.depth("q1") == 0 and _pages(h) != []  # q2 still needs them

    sm = h.restart()
    assert h.rec is not None and h.rec.messages == 12 and h.rec.cleaned == {}
    assert (sm.depth("q1"), sm.depth("q2")) == (0, 12)
    assert sm.receive("q1", 5) == []
    assert bodies(drain(sm, "q2")) == PAYLOADS
    assert _pages(h) == []
    types = _journal_types(h)
    assert ACKNOWLEDGE_CURSOR not in types and PAGE_CURSOR_COMPLETE not in types

    sm = h.open()
    assert h.rec is not None and h.rec.messages == 0
    sm.send(msg(b"memory again"))
    assert _pages(h) == []  # the address stopped paging


def test_cursor_acks_survive_a_restart_and_nothing_acked_comes_back(h: Harness) -> None:
    _limit(h, max_size_messages=2, address_full_policy="PAGE", page_size_bytes=1024)
    sm = h.setup("q")
    _send(h, *PAYLOADS)
    got = sm.receive("q", 7)
    assert bodies(got) == PAYLOADS[:7]
    for d in got[:5]:
        sm.ack("q", d.message.message_id)  # type: ignore[arg-type]
    sm.cancel("q", got[5].message.message_id)  # type: ignore[arg-type]
    sm = h.crash_restart()
    assert sm.depth("q") == 7
    assert bodies(drain(sm, "q")) == PAYLOADS[5:]
    assert _pages(h) == []


def test_a_cancelled_paged_message_comes_back_first_with_its_count(h: Harness) -> None:
    _limit(h, max_size_messages=1, address_full_policy="PAGE")
    sm = h.setup("q")
    _send(h, b"a", b"b", b"c")
    a, b = sm.receive("q", 2)
    sm.ack("q", a.message.message_id)  # type: ignore[arg-type]
    sm.cancel("q", b.message.message_id)  # type: ignore[arg-type]
    got = sm.receive("q", 5)
    assert [(d.message.body, d.delivery_count) for d in got] == [(b"b", 1), (b"c", 0)]


def test_a_paged_message_read_back_alone_is_delivered_unless_scheduled_later(h: Harness) -> None:
    """A receive of one message that finds nothing ready reads one paged message back and
    delivers it at once (whatever its priority), but one scheduled later stays on the queue
    until it is due: the next paged message comes first. Delivery counts and acks are as for
    any delivery."""
    _limit(h, max_size_messages=1, address_full_policy="PAGE")
    sm = h.setup("q")
    due = h.clock.now + 10_000
    _send(h, b"memory")
    sm.send(msg(b"later", scheduled_delivery=due))
    _send(h, b"low", priority=1)
    _send(h, b"high", priority=9)
    assert bodies(sm.receive("q", 1)) == [b"memory"]
    assert bodies(sm.receive("q", 1)) == []  # "later" read back, not due
    low = sm.receive("q", 1)
    assert [(d.message.body, d.delivery_count) for d in low] == [(b"low", 0)]
    sm.cancel("q", low[0].message.message_id)  # type: ignore[arg-type]
    got = sm.receive("q", 1)
    assert [(d.message.body, d.delivery_count) for d in got] == [(b"low", 1)]
    sm.ack("q", got[0].message.message_id)  # type: ignore[arg-type]
    assert bodies(sm.receive("q", 1)) == [b"high"]
    assert sm.depth("q") == 3  # memory, later, high: delivered or waiting, none acked
    h.clock.now = due
    assert bodies(sm.receive("q", 5)) == [b"later"]
    sm = h.crash_restart()
    assert sorted(bodies(drain(sm, "q"))) == [b"high", b"later", b"memory"]


def test_paging_applies_a_byte_limit_and_non_durable_messages_stay_in_memory(h: Harness) -> None:
    _limit(h, max_size_bytes=600, address_full_policy="PAGE", page_size_bytes=1024)
    sm = h.setup("q")
    _send(h, *PAYLOADS[:6])
    assert _pages(h) != []
    sm.send(msg(b"volatile", durable=False))
    assert sm.depth("q") == 7
    got = bodies(drain(sm, "q"))
    assert sorted(got) == sorted([b"volatile", *PAYLOADS[:6]])
    assert [b for b in got if b != b"volatile"] == PAYLOADS[:6]
    assert got[-1] == PAYLOADS[5]  # paged: after every message in memory
    assert _pages(h) == []


def test_drop_returns_none_and_stores_nothing_until_an_ack_makes_room(h: Harness) -> None:
    _limit(h, max_size_messages=2, address_full_policy="DROP")
    sm = h.setup("q")
    _send(h, b"1", b"2")
    assert sm.send(msg(b"dropped")) is None
    assert sm.depth("q") == 2
    (d,) = sm.receive("q", 1)
    sm.ack("q", d.message.message_id)  # type: ignore[arg-type]
    assert sm.send(msg(b"3")) is not None
    assert bodies(drain(h.restart(), "q")) == [b"2", b"3"]


def test_fail_raises_address_full_and_stores_nothing(h: Harness) -> None:
    _limit(h, max_size_messages=1, address_full_policy="FAIL")
    sm = h.setup("q")
    _send(h, b"1")
    with pytest.raises(AddressFullError, match="'orders' is full"):
        sm.send(msg(b"2"))
    tx = sm.begin()
    with pytest.raises(AddressFullError):
        tx.send(msg(b"3"))
    tx.commit()
    assert sm.depth("q") == 1
    assert bodies(drain(h.restart(), "q")) == [b"1"]


def test_block_holds_the_sender_until_an_ack_on_another_thread_makes_room(h: Harness) -> None:
    _limit(h, max_size_messages=1, address_full_policy="BLOCK")
    sm = h.setup("q")
    _send(h, b"1")
    sent = threading.Event()

    def blocked_sender() -> None:
        sm.send(msg(b"2"))
        sent.set()

    worker = threading.Thread(target=blocked_sender)
    worker.start()
    assert not sent.wait(0.3)
    assert sm.depth("q") == 1
    (d,) = sm.receive("q", 1)
    sm.ack("q", d.message.message_id)  # type: ignore[arg-type]
    assert sent.wait(10)
    worker.join(10)
    assert bodies(drain(sm, "q")) == [b"2"]


def test_transactional_acks_of_paged_messages_commit_and_roll_back(h: Harness) -> None:
    _limit(h, max_size_messages=1, address_full_policy="PAGE", page_size_bytes=1024)
    sm = h.setup("q")
    _send(h, *PAYLOADS[:5])
    got = sm.receive("q", 3)
    tx = sm.begin()
    for d in got:
        tx.ack("q", d.message.message_id)  # type: ignore[arg-type]
    tx.rollback()
    again = sm.receive("q", 3)
    assert [(d.message.body, d.delivery_count) for d in again] == [(p, 1) for p in PAYLOADS[:3]]
    tx = sm.begin()
    for d in again:
        tx.ack("q", d.message.message_id)  # type: ignore[arg-type]
    tx.commit()
    sm = h.restart()
    assert sm.depth("q") == 2
    assert bodies(drain(sm, "q")) == PAYLOADS[3:5]


def test_paged_messages_acked_in_a_prepared_transaction_are_held_across_a_restart(
    h: Harness,
) -> None:
    _limit(h, max_size_messages=1, address_full_policy="PAGE", page_size_bytes=1024)
    sm = h.setup("q")
    _send(h, *PAYLOADS[:4])
    tx = sm.begin()
    for d in sm.receive("q", 3):
        tx.ack("q", d.message.message_id)  # type: ignore[arg-type]
    tx.prepare(X1)
    sm = h.restart()
    assert sm.depth("q") == 4
    assert bodies(sm.receive("q", 5)) == [PAYLOADS[3]]
    assert h.rec is not None
    h.rec.prepared[X1].rollback()
    again = sm.receive("q", 5)
    assert bodies(again) == PAYLOADS[:3]
    tx = sm.begin()
    for d in again:
        tx.ack("q", d.message.message_id)  # type: ignore[arg-type]
    tx.prepare(X1)
    sm = h.restart()
    assert h.rec is not None and sm.depth("q") == 4
    h.rec.prepared[X1].commit()
    assert sm.depth("q") == 1  # the one delivered outside the transaction was never acked
    sm = h.restart()
    assert sm.depth("q") == 1
    assert bodies(drain(sm, "q")) == [PAYLOADS[3]]
    assert _pages(h) == []


def test_deleting_the_last_queue_that_needs_pages_deletes_them(h: Harness) -> None:
    _limit(h, max_size_messages=1, address_full_policy="PAGE", page_size_bytes=1024)
    sm = h.setup("q1", "q2")
    _send(h, *PAYLOADS)
    drain(sm, "q1")
    assert _pages(h) != []
    sm.delete_queue("q2")
    assert _pages(h) == []
    sm = h.restart()
    assert h.rec is not None and h.rec.messages == 0


def test_cursor_records_of_pages_that_are_gone_are_swept_at_load(h: Harness) -> None:
    sm = h.setup("q")
    qid = sm.queues()[0].id
    sm.close()
    store = h.factory.open()
    store.bindings.load()
    store.messages.load()
    store.messages.append_add(10**6, ACKNOWLEDGE_CURSOR, CursorAck(qid, 77, 0).encode())
    store.messages.append_add(10**6 + 1, ACKNOWLEDGE_CURSOR, CursorAck(999, 1, 0).encode())
    body = PageTransaction(10**6 + 5, 3).encode()  # its records are in no page
    store.messages.append_add_tx(10**6 + 5, 10**6 + 2, PAGE_TRANSACTION, body)
    store.messages.append_commit(10**6 + 5)
    h.factory.close()
    h.sm = None
    h.open()
    assert h.rec is not None
    assert h.rec.cleaned == {"page_cursors": 2, "page_transactions": 1}
    types = _journal_types(h)
    assert ACKNOWLEDGE_CURSOR not in types and PAGE_TRANSACTION not in types


def test_a_blocked_sender_is_released_with_an_error_when_the_manager_closes(h: Harness) -> None:
    _limit(h, max_size_messages=1, address_full_policy="BLOCK")
    sm = h.setup("q")
    _send(h, b"1")
    errors: list[BaseException] = []

    def blocked_sender() -> None:
        try:
            sm.send(msg(b"2"))
        except BaseException as exc:  # checked below
            errors.append(exc)

    worker = threading.Thread(target=blocked_sender)
    worker.start()
    worker.join(0.3)
    assert worker.is_alive()
    sm.close()
    worker.join(10)
    assert not worker.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], JournalClosedError)


@pytest.mark.parametrize("policy", ["PAGE", "BLOCK"])
def test_concurrent_producers_and_consumers_of_a_limited_address_lose_nothing(
    h: Harness, policy: str
) -> None:
    _limit(h, max_size_messages=5, address_full_policy=policy, page_size_bytes=2048)
    sm = h.setup("q")
    producers, per_producer = 3, 30
    expected = {b"%d-%d" % (p, i) for p in range(producers) for i in range(per_producer)}
    received: list[bytes] = []
    errors: list[BaseException] = []

    def produce(p: int) -> None:
        try:
            for i in range(per_producer):
                sm.send(msg(b"%d-%d" % (p, i)), sync=i % 5 == 0)
        except BaseException as exc:  # reported below
            errors.append(exc)

    def consume() -> None:
        try:
            while len(received) < len(expected) and not errors:
                for d in sm.receive("q", 4):
                    sm.ack("q", d.message.message_id, sync=False)  # type: ignore[arg-type]
                    received.append(d.message.body)  # type: ignore[arg-type]
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    threads.append(threading.Thread(target=consume))  # one consumer: its order is the queue's
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and not any(t.is_alive() for t in threads)
    assert sorted(received) == sorted(expected)
    for p in range(producers):  # each producer's messages in its send order
        mine = [b for b in received if b.startswith(b"%d-" % p)]
        assert mine == [b"%d-%d" % (p, i) for i in range(per_producer)]
    sm = h.restart()
    assert sm.depth("q") == 0 and _pages(h) == []


def test_transactional_sends_are_paged_invisibly_and_delivered_in_page_order_from_commit(
    h: Harness,
) -> None:
    _limit(h, max_size_messages=1, address_full_policy="PAGE", page_size_bytes=1024)
    sm = h.setup("q")
    _send(h, b"m0")  # in memory: the address is now full
    tx = sm.begin()
    tx.send(msg(b"t1"))
    tx.send(msg(b"t2"))
    assert sm.depth("q") == 1 and _pages(h) != []
    _send(h, b"m3")  # paged behind the transaction's records, visible at once
    assert bodies(sm.receive("q", 5)) == [b"m0", b"m3"]
    tx.commit()
    assert sm.depth("q") == 4
    assert bodies(sm.receive("q", 5)) == [b"t1", b"t2"]  # the cursor went back for them
    sm = h.restart()
    assert bodies(drain(sm, "q")) == [b"m0", b"t1", b"t2", b"m3"]
    assert _pages(h) == []
    assert PAGE_TRANSACTION not in _journal_types(h)


def test_rolled_back_paged_sends_are_never_delivered_and_their_pages_go(h: Harness) -> None:
    _limit(h, max_size_messages=1, address_full_policy="PAGE", page_size_bytes=1024)
    sm = h.setup("q")
    _send(h, b"m0", b"m1")
    tx = sm.begin()
    tx.send(msg(b"t"))
    tx.rollback()
    assert bodies(drain(sm, "q")) == [b"m0", b"m1"]
    assert _pages(h) == []
    sm = h.restart()
    assert sm.depth("q") == 0 and h.rec is not None and h.rec.messages == 0


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
def test_paged_sends_of_a_prepared_transaction_survive_a_restart_invisible(
    h: Harness, commit: bool
) -> None:
    _limit(h, max_size_messages=1, address_full_policy="PAGE", page_size_bytes=1024)
    sm = h.setup("q")
    _send(h, b"m0")
    tx = sm.begin()
    for p in PAYLOADS[:6]:
        tx.send(msg(p))
    tx.prepare(X1)
    sm = h.crash_restart()
    assert h.rec is not None and list(h.rec.prepared) == [X1] and sm.depth("q") == 1
    assert _pages(h) != []
    prepared = h.rec.prepared[X1]
    prepared.commit() if commit else prepared.rollback()
    expected = [b"m0", *PAYLOADS[:6]] if commit else [b"m0"]
    assert sm.depth("q") == len(expected)
    assert bodies(drain(sm, "q")) == expected
    assert _pages(h) == []
    sm = h.restart()
    assert h.rec is not None and h.rec.messages == 0 and h.rec.cleaned == {}
    assert PAGE_TRANSACTION not in _journal_types(h)


def test_a_zero_limit_under_block_is_refused_at_the_first_send_never_waited_on(
    h: Harness,
) -> None:
    """Matches that meet only on a concrete address pass the configuration's own check; the
    first send to that address raises instead of waiting forever (a send that waits fails the
    test, released by the close)."""
    h.factory.config = h.factory.config.replace(
        address_settings={
            "orders.*": {"max_size_bytes": 0},
            "*.eu": {"address_full_policy": "BLOCK"},
        }
    )
    sm = h.setup("q", address="orders.eu")
    errors: list[BaseException] = []

    def sends() -> None:
        for send in (sm.send, sm.begin().send):
            try:
                send(Message("orders.eu", b"never waits"))
            except BaseException as exc:  # checked below
                errors.append(exc)

    worker = threading.Thread(target=sends)
    worker.start()
    worker.join(10)
    waited = worker.is_alive()
    if waited:
        sm.close()
        worker.join(10)
    assert not waited, "a send to a BLOCK address limited to 0 waited"
    assert [type(e) for e in errors] == [ConfigError, ConfigError]
    assert "BLOCK" in str(errors[0]) and sm.depth("q") == 0


def test_a_send_after_acks_freed_memory_still_waits_behind_the_older_paged_messages(
    h: Harness,
) -> None:
    """Single-threaded: page, free all memory by acks, send again: the address keeps paging
    while paged messages are unacknowledged, so the new message never overtakes them."""
    _limit(h, max_size_messages=2, address_full_policy="PAGE", page_size_bytes=1024)
    sm = h.setup("q")
    _send(h, *PAYLOADS[:6])  # two in memory, four paged
    assert _pages(h) != []
    memory = sm.receive("q", 2)
    assert bodies(memory) == PAYLOADS[:2]
    for d in memory:
        sm.ack("q", d.message.message_id)  # type: ignore[arg-type]
    _send(h, b"new 1")  # memory is empty now: only the paged ones stand before it
    first_paged = sm.receive("q", 2)
    assert bodies(first_paged) == PAYLOADS[2:4]
    for d in first_paged:
        sm.ack("q", d.message.message_id)  # type: ignore[arg-type]
    _send(h, b"new 2")  # two paged messages are still unacknowledged
    assert bodies(sm.receive("q", 10)) == [*PAYLOADS[4:6], b"new 1", b"new 2"]
    sm = h.restart()
    assert bodies(drain(sm, "q")) == [*PAYLOADS[4:6], b"new 1", b"new 2"]
    assert _pages(h) == []
