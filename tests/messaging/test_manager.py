"""The storage manager without transactions, each back-end (docs/messaging.md): send, route,
receive, ack, cancel, order, scheduling, ids, non-durable messages, duplicate ids, errors, and
what survives a restart."""

from __future__ import annotations

import threading

import pytest

from store.errors import (
    DuplicateIdError,
    JournalClosedError,
    JournalStateError,
    StoreError,
    UnknownMessageError,
    UnknownQueueError,
)
from store.messaging import Message, QueueInfo, StorageManager
from store.messaging.records import DUPLICATE_ID
from tests.messaging.support import Harness, bodies, drain, msg
from tests.support.backends import StoreFactory


@pytest.fixture
def h(messaging_factory: StoreFactory) -> Harness:
    return Harness(messaging_factory)


def _raw_message_records(h: Harness) -> list[int]:
    """User record types of the live message-journal records (the manager closed)."""
    store = h.factory.open()
    loaded = store.messages.load()
    store.bindings.load()
    h.factory.close()
    return [r.user_record_type for r in loaded.records]


def test_a_message_is_routed_to_every_queue_and_survives_a_restart_until_acked(h: Harness) -> None:
    sm = h.setup("q1", "q2")
    props = {"region": "eu", "n": 7, "f": 1.5, "ok": True, "raw": b"\x00", "none": None}
    sent = Message(
        "orders", b"body-1", priority=6, timestamp=123, expiration=4102444800000, properties=props
    )
    mid = sm.send(sent)
    assert mid is not None and sent.message_id == mid
    sm.send(msg(b"body-2"))
    assert (sm.depth("q1"), sm.depth("q2")) == (2, 2)
    assert bodies(drain(sm, "q1")) == [b"body-1", b"body-2"]
    assert sm.depth("q1") == 0

    sm = h.restart()
    assert h.rec is not None and h.rec.messages == 2
    assert set(h.rec.queues) == {"q1", "q2"} and set(h.rec.addresses) == {"orders"}
    assert sm.receive("q1", 5) == []
    got = drain(sm, "q2")
    assert bodies(got) == [b"body-1", b"body-2"]
    first = got[0].message
    assert first.message_id == mid and first.same_as(sent)
    assert (got[0].queue, got[0].delivery_count) == ("q2", 0)

    sm = h.restart()
    assert h.rec is not None and h.rec.messages == 0 and sm.depth("q2") == 0
    sm.close()
    assert 45 not in _raw_message_records(h)  # every message record was deleted


def test_the_ack_of_a_messages_last_ref_is_its_delete_alone(h: Harness) -> None:
    """A message on two queues: the first ack writes an ACKNOWLEDGE_REF, the last writes only
    the DELETE that drops the message (no ACKNOWLEDGE_REF before it). Both acks hold after a
    crash (the store closed without a clean stop of the manager)."""
    from store.messaging.records import ACKNOWLEDGE_REF

    sm = h.setup("q1", "q2")
    journal = sm._store.messages
    written: list[tuple[str, int, int]] = []
    real_update, real_delete = journal.append_update, journal.append_delete

    def update(id: int, user_record_type: int, data: bytes, *, sync: bool = False) -> None:
        written.append(("update", id, user_record_type))
        real_update(id, user_record_type, data, sync=sync)

    def delete(id: int, *, sync: bool = False) -> None:
        written.append(("delete", id, 0))
        real_delete(id, sync=sync)

    journal.append_update = update  # type: ignore[method-assign]
    journal.append_delete = delete  # type: ignore[method-assign]
    mid = sm.send(msg(b"both"))
    assert mid is not None
    written.clear()
    assert bodies(drain(sm, "q1")) == [b"both"]
    assert written == [("update", mid, ACKNOWLEDGE_REF)]
    written.clear()
    assert bodies(drain(sm, "q2")) == [b"both"]
    assert written == [("delete", mid, 0)]

    sm = h.crash_restart()
    assert h.rec is not None and h.rec.messages == 0
    assert (sm.depth("q1"), sm.depth("q2")) == (0, 0)
    sm.close()


def test_queues_deliver_by_priority_then_send_order_also_after_a_restart(h: Harness) -> None:
    sm = h.setup("q")
    for i, p in enumerate([4, 9, 0, 9, 4, 5]):
        sm.send(msg(b"%d-p%d" % (i, p), priority=p))
    expected = [b"1-p9", b"3-p9", b"5-p5", b"0-p4", b"4-p4", b"2-p0"]
    assert bodies(drain(h.restart(), "q", ack=False)) == expected
    assert bodies(drain(h.restart(), "q", ack=False)) == expected


def test_receive_hands_out_at_most_max_messages_and_never_twice(h: Harness) -> None:
    sm = h.setup("q")
    for i in range(5):
        sm.send(msg(b"%d" % i))
    assert bodies(sm.receive("q", 2)) == [b"0", b"1"]
    assert bodies(sm.receive("q", 2)) == [b"2", b"3"]
    assert bodies(sm.receive("q", 9)) == [b"4"]
    assert sm.receive("q", 9) == []
    assert sm.depth("q") == 5  # delivered, not acknowledged
    assert bodies(drain(h.restart(), "q", ack=False)) == [b"0", b"1", b"2", b"3", b"4"]


def test_a_scheduled_message_is_held_until_due_also_across_a_restart(h: Harness) -> None:
    sm = h.setup("q")
    due = h.clock.now + 10_000
    sm.send(msg(b"later", scheduled_delivery=due))
    sm.send(msg(b"now"))
    assert bodies(sm.receive("q", 5)) == [b"now"]
    assert sm.depth("q") == 2
    sm = h.restart()
    assert bodies(sm.receive("q", 5)) == [b"now"]
    h.clock.now = due
    assert bodies(sm.receive("q", 5)) == [b"later"]


def test_cancel_puts_a_message_back_at_the_head_with_a_persisted_delivery_count(
    h: Harness,
) -> None:
    sm = h.setup("q")
    for b in (b"a", b"b", b"c"):
        sm.send(msg(b))
    for _ in range(2):
        a, b = sm.receive("q", 2)
        sm.cancel("q", b.message.message_id)  # type: ignore[arg-type]
        sm.cancel("q", a.message.message_id)  # type: ignore[arg-type]
    got = sm.receive("q", 3)
    assert [(d.message.body, d.delivery_count) for d in got] == [(b"a", 2), (b"b", 2), (b"c", 0)]
    sm = h.restart()
    got = sm.receive("q", 3)
    assert [(d.message.body, d.delivery_count) for d in got] == [(b"a", 2), (b"b", 2), (b"c", 0)]


def test_message_ids_never_repeat_across_clean_and_crash_like_restarts(h: Harness) -> None:
    sm = h.setup("q")
    seen: list[int] = []
    for round_ in range(4):
        for _ in range(3):
            mid = sm.send(msg(b"x"))
            assert mid is not None
            seen.append(mid)
        sm = h.restart() if round_ % 2 else h.crash_restart()
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    assert sm.queues()[0].id < seen[0]


def test_non_durable_messages_are_delivered_but_gone_after_a_restart(h: Harness) -> None:
    sm = h.setup("q")
    sm.send(msg(b"volatile", durable=False))
    sm.send(msg(b"kept"))
    sm.send(msg(b"volatile-2", durable=False))
    got = sm.receive("q", 1)
    sm.ack("q", got[0].message.message_id)  # type: ignore[arg-type]
    assert sm.depth("q") == 2
    sm = h.restart()
    assert bodies(drain(sm, "q")) == [b"kept"]
    sm.close()
    assert 45 not in _raw_message_records(h)


def test_a_send_routed_to_no_queue_stores_nothing_and_returns_none(h: Harness) -> None:
    sm = h.setup()
    assert sm.send(msg(b"nobody")) is None
    assert sm.send(Message("unknown-address", b"x")) is None
    sm.close()
    assert _raw_message_records(h) == []


def test_send_to_named_queues_routes_only_there(h: Harness) -> None:
    sm = h.setup("q1", "q2")
    sm.send(msg(b"only-2"), queues=["q2"])
    assert (sm.depth("q1"), sm.depth("q2")) == (0, 1)
    with pytest.raises(UnknownQueueError, match="nope"):
        sm.send(msg(b"x"), queues=["nope"])
    sm.create_address("other")
    sm.create_queue("elsewhere", address="other")
    with pytest.raises(ValueError, match="bound to 'other'"):
        sm.send(msg(b"x"), queues=["elsewhere"])
    assert (sm.depth("q1"), sm.depth("q2"), sm.depth("elsewhere")) == (0, 1, 0)


def test_a_duplicate_id_is_refused_and_stores_nothing_also_after_a_restart(h: Harness) -> None:
    sm = h.setup("q")
    assert sm.send(msg(b"first"), dup_id=b"order-1") is not None
    with pytest.raises(DuplicateIdError):
        sm.send(msg(b"again"), dup_id=b"order-1")
    with pytest.raises(DuplicateIdError):
        sm.send(msg(b"as str"), dup_id="order-1")  # a str is its UTF-8 bytes
    sm.send(msg(b"other"), dup_id=b"order-2")
    assert sm.depth("q") == 2
    sm = h.crash_restart()
    with pytest.raises(DuplicateIdError):
        sm.send(msg(b"after restart"), dup_id=b"order-1")
    assert bodies(drain(sm, "q")) == [b"first", b"other"]
    with pytest.raises(DuplicateIdError):  # acknowledged messages keep their ids cached
        sm.send(msg(b"after ack"), dup_id=b"order-2")


def _configure(h: Harness, **changes: object) -> None:
    h.factory.config = h.factory.config.replace(**changes)


def test_the_duplicate_cache_forgets_the_oldest_id_when_it_wraps_and_deletes_its_record(
    h: Harness,
) -> None:
    _configure(h, id_cache_size=3)
    sm = h.setup("q")
    for dup in (b"a", b"b", b"c", b"d"):
        sm.send(msg(dup), dup_id=dup)
    sm.send(msg(b"a again"), dup_id=b"a")  # "a" was pushed out by "d"; now "b" is out
    with pytest.raises(DuplicateIdError):
        sm.send(msg(b"x"), dup_id=b"c")
    sm.close()
    assert _raw_message_records(h).count(DUPLICATE_ID) == 3
    sm = h.open()
    sm.send(msg(b"b again"), dup_id=b"b")
    for dup in (b"d", b"a", b"b"):
        with pytest.raises(DuplicateIdError):
            sm.send(msg(b"x"), dup_id=dup)


def test_a_duplicate_cache_of_size_0_remembers_nothing(h: Harness) -> None:
    _configure(h, id_cache_size=0)
    sm = h.setup("q")
    sm.send(msg(b"1"), dup_id=b"k")
    sm.send(msg(b"2"), dup_id=b"k")
    tx = sm.begin()
    tx.send(msg(b"3"), dup_id=b"k")
    tx.send(msg(b"4"), dup_id=b"k")
    tx.commit()
    assert sm.depth("q") == 4
    sm.close()
    assert DUPLICATE_ID not in _raw_message_records(h)


def test_an_unpersisted_duplicate_cache_is_empty_after_a_restart(h: Harness) -> None:
    _configure(h, persist_id_cache=False)
    sm = h.setup("q")
    sm.send(msg(b"1"), dup_id=b"k")
    with pytest.raises(DuplicateIdError):
        sm.send(msg(b"2"), dup_id=b"k")
    sm = h.restart()
    assert sm.send(msg(b"3"), dup_id=b"k") is not None


def test_delete_queue_deletes_the_messages_only_it_held(h: Harness) -> None:
    sm = h.setup("q1", "q2")
    sm.send(msg(b"shared"))
    sm.send(msg(b"only-1"), queues=["q1"])
    sm.delete_queue("q1")
    assert [q.name for q in sm.queues()] == ["q2"]
    with pytest.raises(UnknownQueueError):
        sm.depth("q1")
    sm = h.restart()
    assert h.rec is not None and h.rec.messages == 1 and h.rec.cleaned == {}
    assert set(h.rec.queues) == {"q2"}
    assert bodies(drain(sm, "q2")) == [b"shared"]


def test_addresses_and_queues_are_listed_and_deleted(h: Harness) -> None:
    sm = h.setup("q")
    assert [a.name for a in sm.addresses()] == ["orders"]
    q = sm.queues()[0]
    assert isinstance(q, QueueInfo) and (q.name, q.address, q.routing_type) == (
        "q",
        "orders",
        "MULTICAST",
    )
    filtered = sm.create_queue("f", address="orders", filter="region = 'eu'")
    with pytest.raises(StoreError, match="still has queues: f, q"):
        sm.delete_address("orders")
    sm = h.restart()
    assert h.rec is not None and h.rec.queues["f"] == filtered
    sm.delete_queue("q")
    sm.delete_queue("f")
    sm.delete_address("orders")
    sm = h.restart()
    assert sm.addresses() == [] and sm.queues() == []
    assert h.rec is not None and h.rec.addresses == {} and h.rec.queues == {}


def test_refusals_name_what_is_wrong(h: Harness) -> None:
    sm = h.setup("q")
    sm.send(msg(b"x"))
    for call in (
        lambda: sm.receive("nope", 1),
        lambda: sm.ack("nope", 1),
        lambda: sm.cancel("nope", 1),
        lambda: sm.depth("nope"),
        lambda: sm.delete_queue("nope"),
    ):
        with pytest.raises(UnknownQueueError, match="'nope'"):
            call()
    (d,) = sm.receive("q", 1)
    mid = d.message.message_id
    assert mid is not None
    with pytest.raises(UnknownMessageError):
        sm.ack("q", mid + 1000)
    sm.ack("q", mid)
    with pytest.raises(UnknownMessageError):
        sm.ack("q", mid)  # twice
    with pytest.raises(UnknownMessageError):
        sm.cancel("q", mid)
    undelivered = sm.send(msg(b"y"))
    assert undelivered is not None
    with pytest.raises(UnknownMessageError):  # on the queue but not delivered
        sm.ack("q", undelivered)
    with pytest.raises(UnknownMessageError):
        sm.cancel("q", undelivered)
    for bad in (0, -1):
        with pytest.raises(ValueError, match="at least 1"):
            sm.receive("q", bad)
    with pytest.raises(StoreError, match="already exists"):
        sm.create_queue("q", address="orders")
    with pytest.raises(StoreError, match="already exists"):
        sm.create_address("orders")
    with pytest.raises(StoreError, match="does not exist"):
        sm.create_queue("q9", address="missing")
    with pytest.raises(StoreError, match="does not exist"):
        sm.delete_address("missing")
    with pytest.raises(JournalStateError):
        sm.load()


def test_nothing_works_before_load_or_after_close(messaging_factory: StoreFactory) -> None:
    sm = StorageManager(messaging_factory.open())  # type: ignore[arg-type]
    with pytest.raises(JournalStateError, match="load"):
        sm.send(msg(b"x"))
    sm.load()
    sm.close()
    sm.close()  # idempotent
    with pytest.raises(JournalClosedError):
        sm.receive("q", 1)


def test_concurrent_senders_and_ackers_lose_nothing(h: Harness) -> None:
    sm = h.setup("q")
    per_thread, threads = 40, 4
    errors: list[BaseException] = []

    def sender(n: int) -> None:
        try:
            for i in range(per_thread):
                sm.send(msg(b"%d-%d" % (n, i)))
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=sender, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    acked: list[bytes] = []
    while any(w.is_alive() for w in workers):
        for d in sm.receive("q", 5):
            sm.ack("q", d.message.message_id, sync=False)  # type: ignore[arg-type]
            acked.append(d.message.body)  # type: ignore[arg-type]
    for w in workers:
        w.join()
    acked.extend(bodies(drain(sm, "q")))
    assert not errors
    assert sorted(acked) == sorted(
        b"%d-%d" % (n, i) for n in range(threads) for i in range(per_thread)
    )
    for n in range(threads):  # each sender's messages in its send order
        mine = [b for b in acked if b.startswith(b"%d-" % n)]
        assert mine == [b"%d-%d" % (n, i) for i in range(per_thread)]
    sm.flush()
    sm.sync_future().result(timeout=30)
    assert h.restart().depth("q") == 0


def test_the_manager_runs_on_zero_persistence_and_remembers_nothing(tmp_path) -> None:
    from tests.support.backends import ZERO_BACKEND

    factory = StoreFactory(ZERO_BACKEND, tmp_path, "t00000000_")
    try:
        h = Harness(factory)
        sm = h.setup("q")
        sm.send(msg(b"a"), dup_id=b"k")
        tx = sm.begin()
        tx.send(msg(b"b"), sync=False)
        tx.commit()
        assert bodies(drain(sm, "q")) == [b"a", b"b"]
        sm = h.restart()
        assert sm.queues() == [] and h.rec is not None and h.rec.messages == 0
    finally:
        factory.teardown()


@pytest.mark.parametrize("durable", [True, False])
@pytest.mark.parametrize("transactional", [False, True])
def test_a_sent_message_is_encoded_once_and_held_in_one_form(
    h: Harness, monkeypatch: pytest.MonkeyPatch, durable: bool, transactional: bool
) -> None:
    """The record a send encodes to size the message is the one it writes (not encoded a
    second time), and it is not kept once written: an in-memory message holds its Message
    only, durable or not, transactional or not."""
    from store.messaging import stored

    sm = h.setup("q1")
    encoded: list[int] = []
    real = stored.encode_message

    def counting(m: Message, body: bytes) -> bytes:
        encoded.append(1)
        return real(m, body)

    monkeypatch.setattr(stored, "encode_message", counting)
    m = Message("orders", b"body", durable=durable)
    if transactional:
        tx = sm.begin()
        mid = tx.send(m)
        tx.commit()
    else:
        mid = sm.send(m)
    assert mid is not None and len(encoded) == 1
    held = sm._state.messages[mid]
    assert held._record is None and held._encoded is None
    assert held.size > 0
    assert bodies(drain(sm, "q1")) == [b"body"]
