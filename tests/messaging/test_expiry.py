"""Expiry (store.messaging.policies, store.messaging.expiry), on the file store, PostgreSQL,
MariaDB and SQLite: an expired message is never delivered, it moves to its expiry address with
Artemis's properties or is removed; the send-time delays; the scan, which costs what expired
and reads no page; a paged and a large message expired; a crash at every step of the move."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from store.messaging import Message, StorageManager
from store.messaging.policies import ACTUAL_EXPIRY, ORIG_ADDRESS, ORIG_MESSAGE_ID, ORIG_QUEUE
from store.paging.api import PageStore
from store.store import Store
from tests.messaging.support import Harness, drain, msg, open_wrapped
from tests.messaging.test_dead_letters import BIG, Crashed, CrashJournal, _read
from tests.support.backends import StoreFactory

#: Every behaviour on MariaDB too, in CI (tests/messaging/conftest.py).
pytestmark = pytest.mark.every_backend


def _harness(factory: StoreFactory, **settings: Any) -> Harness:
    factory.config = factory.config.replace(
        min_large_message_size=4096, address_settings={"orders": settings}
    )
    return Harness(factory)


def _with_exp(sm: StorageManager) -> None:
    sm.create_address("EXP", routing_types=("MULTICAST",))
    sm.create_queue("expired", address="EXP", routing_type="MULTICAST")


def test_an_expired_message_is_not_delivered_but_moved_with_artemis_s_properties(
    messaging_factory: StoreFactory,
) -> None:
    h = _harness(messaging_factory, expiry_address="EXP")
    sm = h.setup("q")
    _with_exp(sm)
    now = h.clock.now
    old = sm.send(msg(b"old", expiration=now + 1000, priority=8, properties={"k": 1}))
    fresh = sm.send(msg(b"fresh", expiration=now + 60_000))
    never = sm.send(msg(b"never"))
    h.clock.now += 1000  # "old" expires now (expiration <= now)
    got = sm.receive("q", 3)
    assert [d.message.message_id for d in got] == [fresh, never]
    (moved,) = drain(sm, "expired")
    m = moved.message
    assert (m.address, m.body, m.priority, m.expiration, moved.delivery_count) == (
        "EXP",
        b"old",
        8,
        0,
        0,
    )
    assert m.properties == {
        "k": 1,
        ORIG_ADDRESS: "orders",
        ORIG_QUEUE: "q",
        ORIG_MESSAGE_ID: old,
        ACTUAL_EXPIRY: h.clock.now,
    }
    sm = h.restart()
    assert sorted(d.message.message_id for d in drain(sm, "q")) == sorted([fresh, never])
    assert sm.depth("expired") == 0


def test_the_load_counts_what_waits_after_an_expiry_move(messaging_factory: StoreFactory) -> None:
    h = _harness(messaging_factory, expiry_address="EXP")
    sm = h.setup("q")
    _with_exp(sm)
    for i in range(2):
        sm.send(msg(b"m%d" % i, expiration=h.clock.now + 1))
    h.clock.now += 1
    assert sm.expire() == 2
    assert sm.policy_counts() == {"dead_lettered": {}, "expired": {"orders": 2}}
    assert sm.policy_moves() == 2
    sm = h.restart()
    assert h.rec is not None and (h.rec.expired, h.rec.dead_lettered) == ({"orders": 2}, {})


def test_without_an_expiry_address_it_is_removed_and_the_next_one_delivered(
    messaging_factory: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    h = _harness(messaging_factory)
    sm = h.setup("q")
    for i in range(3):
        sm.send(msg(b"gone%d" % i, expiration=h.clock.now + 10))
    keep = sm.send(msg(b"kept"))
    h.clock.now += 10
    with caplog.at_level(logging.WARNING, logger="store.messaging.policies"):
        got = sm.receive("q")  # three expired at the head, then the one to deliver
    assert [d.message.message_id for d in got] == [keep]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3 and all("no expiry address" in w for w in warnings)
    assert sm.depth("q") == 1
    sm = h.restart()
    assert [d.message.message_id for d in drain(sm, "q")] == [keep]


@pytest.mark.parametrize(
    ("settings", "own", "expected"),
    [
        ({"expiry_delay": 5000}, 0, 5000),  # given where the message has none
        ({"expiry_delay": 5000}, 100, 100),  # kept where it has one
        ({"min_expiry_delay": 1000, "max_expiry_delay": 9000}, 0, 9000),
        ({"min_expiry_delay": 1000}, 0, 1000),
        ({"min_expiry_delay": 1000, "max_expiry_delay": 9000}, 500, 1000),
        ({"min_expiry_delay": 1000, "max_expiry_delay": 9000}, 20_000, 9000),
        ({"min_expiry_delay": 1000, "max_expiry_delay": 9000}, 4000, 4000),
        ({}, 0, None),
    ],
)
def test_expiry_delays_set_or_bound_the_expiration_at_send(
    messaging_factory: StoreFactory, settings: dict[str, int], own: int, expected: int | None
) -> None:
    h = _harness(messaging_factory, **settings)
    sm = h.setup("q")
    now = h.clock.now
    sm.send(msg(b"m", expiration=now + own if own else 0))
    sm = h.restart()
    (d,) = sm.receive("q")
    assert d.message.expiration == (0 if expected is None else now + expected)


def test_the_scan_moves_what_expired_without_a_receive(messaging_factory: StoreFactory) -> None:
    h = _harness(messaging_factory, expiry_address="EXP")
    sm = h.setup("q1", "q2")  # both queues hold each message
    _with_exp(sm)
    soon = sm.send(msg(b"soon", expiration=h.clock.now + 100))
    sm.send(msg(b"later", expiration=h.clock.now + 10_000))
    in_flight = sm.send(msg(b"in flight", expiration=h.clock.now + 100))
    assert sm.receive("q2", 3)[-1].message.message_id == in_flight  # q2: all delivered
    h.clock.now += 100
    assert sm.expire() == 2  # soon and in flight on q1; q2's are in flight
    moved = drain(sm, "expired")
    assert sorted(
        (d.message.properties[ORIG_MESSAGE_ID], d.message.properties[ORIG_QUEUE]) for d in moved
    ) == [
        (soon, "q1"),
        (in_flight, "q1"),
    ]
    assert sm.depth("q1") == 1 and sm.depth("q2") == 3
    sm.cancel("q2", soon)  # type: ignore[arg-type]  # back on q2, expired: a receive moves it
    assert [d.message.body for d in sm.receive("q2", 5)] == []
    assert sm.depth("q2") == 2


def test_the_scan_covers_recovered_messages(messaging_factory: StoreFactory) -> None:
    h = _harness(messaging_factory)
    sm = h.setup("q")
    for i in range(5):
        sm.send(msg(b"m%d" % i, expiration=h.clock.now + 100 * (i + 1)))
    sm = h.restart()
    h.clock.now += 300
    assert sm.expire() == 3
    assert sm.depth("q") == 2


class _PageSpy:
    """Counts the page reads of every page store of a store."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads = 0
        for cls in {type(ps) for ps in _page_stores(store)}:
            monkeypatch.setattr(cls, "read_page", self._counted(cls.read_page))

    def _counted(self, original: Any) -> Any:
        def read_page(ps: PageStore, page: int) -> list[bytes]:
            self.reads += 1
            return original(ps, page)  # type: ignore[no-any-return]

        return read_page


def _page_stores(store: Store) -> list[PageStore]:
    return [store.paging.store(a) for a in store.paging.addresses()]


@pytest.mark.parametrize("depth", [2_000, 1_000_000])
def test_the_scan_of_a_deep_queue_reads_no_page_and_looks_at_what_expired_only(
    messaging_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch, depth: int
) -> None:
    """Ten expiring messages in memory, then ``depth`` paged ones: the scan moves the ten,
    pops exactly ten expirations and reads no page, at any depth (2,000 and 1,000,000: about
    40 s of sends on the file store)."""
    if messaging_factory.spec.name != "file-nio" and depth > 2_000:
        pytest.skip("the depth is the file store's to show; the databases page the same way")
    h = _harness(
        messaging_factory, max_size_messages=10, address_full_policy="PAGE", page_size_bytes=1 << 20
    )
    sm = h.setup("q")
    for i in range(10):
        sm.send(msg(b"x%d" % i, expiration=h.clock.now + 50), sync=False)
    for _ in range(depth):
        sm.send(msg(b"p" * 20), sync=False)
    sm.flush()
    store = h.factory.store
    assert isinstance(store, Store)
    spy = _PageSpy(store, monkeypatch)
    popped: list[int] = []
    due = type(sm._state.policies).due

    def counting_due(policies: Any, now: int) -> list[int]:
        found = due(policies, now)
        popped.extend(found)
        return found

    monkeypatch.setattr(type(sm._state.policies), "due", counting_due)
    h.clock.now += 50
    assert sm.expire() == 10
    assert (spy.reads, len(popped)) == (0, 10)
    assert sm.depth("q") == depth


def test_a_paged_and_a_large_message_expire_whole(messaging_factory: StoreFactory) -> None:
    h = _harness(
        messaging_factory,
        expiry_address="EXP",
        max_size_messages=1,
        address_full_policy="PAGE",
        page_size_bytes=1024,
    )
    sm = h.setup("q")
    _with_exp(sm)
    first = sm.send(msg(b"in memory"))
    large = sm.send(msg(BIG, expiration=h.clock.now + 10))  # paged and large
    paged = sm.send(msg(b"paged", expiration=h.clock.now + 10))
    h.clock.now += 10
    assert [d.message.message_id for d in sm.receive("q", 5)] == [first]
    sm = h.restart()
    moved = {
        d.message.properties[ORIG_MESSAGE_ID]: d.message for d in drain(sm, "expired", ack=False)
    }
    assert set(moved) == {large, paged}
    assert moved[large].is_large and _read(moved[large]) == BIG
    assert _read(moved[paged]) == b"paged"
    assert ACTUAL_EXPIRY in moved[paged].properties


@pytest.mark.parametrize("kind", ["inline", "large", "paged"])
def test_a_crash_at_every_step_of_an_expiry_move_leaves_it_on_exactly_one_queue(
    messaging_factory: StoreFactory, kind: str
) -> None:
    """As the dead-letter move's test: the move's journal writes cut after each ``k``; after
    the restart the message is on its queue (expired: the next receive moves it) or on the
    expiry queue, never both, never neither."""
    settings: dict[str, object] = {"expiry_address": "EXP"}
    if kind == "paged":
        settings.update(max_size_messages=1, address_full_policy="PAGE")
    factory = messaging_factory
    factory.config = factory.config.replace(
        min_large_message_size=4096, address_settings={"orders.#": settings}
    )
    h = Harness(factory)
    body = BIG if kind == "large" else b"late"
    cuts: list[int | None] = [None]
    writes = 0
    while cuts:
        cut = cuts.pop(0)
        sm, journal, _store = open_wrapped(h, CrashJournal)
        if cut is None:
            _with_exp(sm)
        address = f"orders.{cut}"
        sm.create_address(address, routing_types=("MULTICAST",))
        sm.create_queue(address, address=address, routing_type="MULTICAST")
        if kind == "paged":
            sm.send(Message(address, b"first"))
        mid = sm.send(Message(address, body, expiration=h.clock.now + 5))
        h.clock.now += 5
        journal.armed, journal.cut = True, cut
        try:
            sm.receive(address, 2)
        except Crashed:
            pass
        if cut is None:
            writes = journal.writes
            cuts = list(range(writes))
        h.crash()
        h.clock.now -= 5  # not expired yet after the restart: count where it is
        sm = h.open()
        left = [d for d in drain(sm, address, ack=False) if d.message.message_id == mid]
        moved = drain(sm, "expired", ack=False)
        assert len(left) + len(moved) == 1, (kind, cut, writes, len(left), len(moved))
        (d,) = left or moved
        assert _read(d.message) == body
        for d in moved:
            sm.ack("expired", d.message.message_id)  # type: ignore[arg-type]
        sm.close()
        h.sm = None
        h.clock.now += 5
    assert writes >= 3
