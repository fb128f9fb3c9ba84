"""Dead letters and redelivery delay (store.messaging.policies, store.messaging.moves), on the
file store, PostgreSQL, MariaDB and SQLite: the cancel or rollback that reaches
``max-delivery-attempts`` moves the message to its dead-letter address in one journal
transaction, removes it with a WARNING where there is nowhere to go, auto-creates Artemis's
resources; a cancelled message waits out its redelivery delay, across a restart too, and the
journal's delivery updates stay bounded by ``max-redelivery-records``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from store.messaging import Message, StorageManager
from store.messaging.policies import ORIG_ADDRESS, ORIG_MESSAGE_ID, ORIG_QUEUE, origin_filter
from store.store import Store
from tests.messaging.support import Harness, drain, msg, open_wrapped
from tests.messaging.test_page_completion_crash import CutJournal
from tests.support.backends import StoreFactory

#: Every behaviour on MariaDB too, in CI (tests/messaging/conftest.py).
pytestmark = pytest.mark.every_backend

BIG = bytes(range(256)) * 40  # 10 KiB: over the large-message limit below


def _harness(factory: StoreFactory, **settings: Any) -> Harness:
    factory.config = factory.config.replace(
        min_large_message_size=4096,
        address_settings={"orders": {"max_delivery_attempts": 3, **settings}},
    )
    return Harness(factory)


def _with_dla(sm: StorageManager) -> None:
    sm.create_address("DLA", routing_types=("MULTICAST",))
    sm.create_queue("dead", address="DLA", routing_type="MULTICAST")


def _fail(sm: StorageManager, queue: str, times: int) -> None:
    for _ in range(times):
        (d,) = sm.receive(queue)
        assert d.message.message_id is not None
        sm.cancel(queue, d.message.message_id)


def _read(m: Message) -> bytes:
    with m.open_body() as f:
        return f.read()


def test_the_cancel_that_reaches_max_delivery_attempts_moves_it_to_the_dead_letter_address(
    messaging_factory: StoreFactory,
) -> None:
    h = _harness(messaging_factory, dead_letter_address="DLA")
    sm = h.setup("q")
    _with_dla(sm)
    mid = sm.send(msg(b"poison", priority=7, properties={"k": "v"}, expiration=0))
    other = sm.send(msg(b"fine"))
    for count in range(2):  # counts 1 and 2: back on its queue
        (d,) = sm.receive("q")
        assert (d.message.message_id, d.delivery_count) == (mid, count)
        sm.cancel("q", mid)  # type: ignore[arg-type]
    (d,) = sm.receive("q")
    assert d.delivery_count == 2
    sm.cancel("q", mid)  # type: ignore[arg-type]  # count 3 == max: dead
    assert sm.depth("q") == 1 and sm.depth("dead") == 1
    (dead,) = sm.receive("dead")
    m = dead.message
    assert (m.address, m.body, m.priority, dead.delivery_count) == ("DLA", b"poison", 7, 0)
    assert m.message_id != mid
    assert m.properties == {"k": "v", ORIG_ADDRESS: "orders", ORIG_QUEUE: "q", ORIG_MESSAGE_ID: mid}
    # on exactly one queue after a restart too, and the other message untouched
    sm = h.restart()
    assert h.rec is not None and (h.rec.dead_lettered, h.rec.expired) == ({"orders": 1}, {})
    assert [d.message.message_id for d in drain(sm, "q")] == [other]
    [again] = drain(sm, "dead")
    assert again.message.properties[ORIG_MESSAGE_ID] == mid
    assert sm.depth("dead") == 0 and sm.depth("q") == 0


def test_without_a_dead_letter_address_it_is_removed_with_a_warning_naming_it(
    messaging_factory: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    h = _harness(messaging_factory)
    sm = h.setup("q")
    mid = sm.send(msg(b"poison"))
    with caplog.at_level(logging.WARNING, logger="store.messaging.policies"):
        _fail(sm, "q", 3)
    assert sm.depth("q") == 0 and sm.receive("q") == []
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"message {mid}" in warning and "'q'" in warning and "no dead-letter address" in warning
    sm = h.restart()
    assert sm.depth("q") == 0


def test_a_dead_letter_address_without_queues_removes_it_with_a_warning(
    messaging_factory: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    h = _harness(messaging_factory, dead_letter_address="DLA")
    sm = h.setup("q")
    sm.create_address("DLA", routing_types=("MULTICAST",))
    sm.send(msg(b"poison"))
    with caplog.at_level(logging.WARNING, logger="store.messaging.policies"):
        _fail(sm, "q", 3)
    assert sm.depth("q") == 0
    assert any("'DLA' has no queue" in r.getMessage() for r in caplog.records)


def test_auto_created_resources_are_artemis_s_and_take_only_their_address(
    messaging_factory: StoreFactory,
) -> None:
    h = _harness(messaging_factory, dead_letter_address="DLA")
    factory = h.factory
    factory.config = factory.config.replace(
        address_settings={
            "#": {
                "max_delivery_attempts": 1,
                "dead_letter_address": "DLA",
                "auto_create_dead_letter_resources": True,
            }
        }
    )
    sm = h.setup("q")
    sm.create_address("invoices")
    sm.create_queue("inv", address="invoices")
    sm.send(msg(b"order"))
    sm.send(Message("invoices", b"invoice"))
    _fail(sm, "q", 1)
    _fail(sm, "inv", 1)
    queues = {q.name: q for q in sm.queues()}
    assert queues["DLQ.orders"].address == "DLA"
    assert queues["DLQ.orders"].filter == origin_filter("orders")
    assert queues["DLQ.invoices"].filter == origin_filter("invoices")
    assert [a.routing_types for a in sm.addresses() if a.name == "DLA"] == [("MULTICAST",)]
    sm = h.restart()
    assert [d.message.body for d in drain(sm, "DLQ.orders")] == [b"order"]
    assert [d.message.body for d in drain(sm, "DLQ.invoices")] == [b"invoice"]


def test_a_rolled_back_ack_counts_as_a_failed_delivery(messaging_factory: StoreFactory) -> None:
    h = _harness(messaging_factory, dead_letter_address="DLA")
    sm = h.setup("q")
    _with_dla(sm)
    mid = sm.send(msg(b"poison"))
    for _ in range(3):
        assert [d.message.message_id for d in sm.receive("q")] == [mid]
        tx = sm.begin()
        tx.ack("q", mid)  # type: ignore[arg-type]
        tx.rollback()
    assert sm.depth("q") == 0
    [dead] = drain(sm, "dead")
    assert dead.message.properties[ORIG_MESSAGE_ID] == mid


def test_a_large_and_a_paged_message_are_dead_lettered_whole(
    messaging_factory: StoreFactory,
) -> None:
    h = _harness(
        messaging_factory,
        dead_letter_address="DLA",
        max_size_messages=1,
        address_full_policy="PAGE",
        page_size_bytes=1024,
    )
    sm = h.setup("q")
    _with_dla(sm)
    first = sm.send(msg(b"in memory"))
    large = sm.send(msg(BIG))  # paged, and large
    paged = sm.send(msg(b"paged"))
    assert sm.receive("q")[0].message.message_id == first
    sm.ack("q", first)  # type: ignore[arg-type]
    for _ in range(3):
        ds = sm.receive("q", 2)
        assert {d.message.message_id for d in ds} == {large, paged}
        for d in ds:
            sm.cancel("q", d.message.message_id)  # type: ignore[arg-type]
    assert sm.depth("q") == 0 and sm.depth("dead") == 2
    sm = h.restart()
    moved = {d.message.properties[ORIG_MESSAGE_ID]: d.message for d in drain(sm, "dead", ack=False)}
    assert set(moved) == {large, paged}
    assert moved[large].is_large and _read(moved[large]) == BIG
    assert _read(moved[paged]) == b"paged"
    store = h.factory.store
    assert isinstance(store, Store)
    # the original large body went with its message; the copy's is the one left
    assert store.large_messages.ids() == [moved[large].message_id]


def test_minus_one_never_dead_letters(messaging_factory: StoreFactory) -> None:
    h = _harness(messaging_factory, dead_letter_address="DLA", max_delivery_attempts=-1)
    sm = h.setup("q")
    _with_dla(sm)
    sm.send(msg(b"again"))
    _fail(sm, "q", 30)
    (d,) = sm.receive("q")
    assert d.delivery_count == 30 and sm.depth("dead") == 0


def test_the_default_is_ten_attempts(messaging_factory: StoreFactory) -> None:
    h = Harness(messaging_factory)
    sm = h.setup("q")
    sm.send(msg(b"again"))
    _fail(sm, "q", 9)
    assert sm.depth("q") == 1
    _fail(sm, "q", 1)
    assert sm.depth("q") == 0


def _wait(h: Harness, sm: StorageManager, queue: str) -> int:
    """Move the clock 100 ms at a time until ``queue`` delivers; returns how long it took
    (the delivery stays delivered)."""
    start = h.clock.now
    while not sm.receive(queue):
        h.clock.now += 100
    return h.clock.now - start


def test_a_redelivery_delay_is_multiplied_per_delivery_and_capped(
    messaging_factory: StoreFactory,
) -> None:
    h = _harness(
        messaging_factory,
        max_delivery_attempts=-1,
        redelivery_delay=1000,
        redelivery_delay_multiplier=2.0,
        max_redelivery_delay=3000,
    )
    sm = h.setup("q")
    mid = sm.send(msg(b"later"))
    assert sm.receive("q")
    waits = []
    for _ in range(4):
        sm.cancel("q", mid)  # type: ignore[arg-type]
        waits.append(_wait(h, sm, "q"))
    assert waits == [1000, 2000, 3000, 3000]


def test_a_redelivery_delay_holds_across_a_restart(messaging_factory: StoreFactory) -> None:
    h = _harness(messaging_factory, max_delivery_attempts=-1, redelivery_delay=3000)
    sm = h.setup("q")
    mid = sm.send(msg(b"later"))
    sm.receive("q")
    sm.cancel("q", mid)  # type: ignore[arg-type]
    h.clock.now += 1000
    sm = h.restart()
    assert sm.receive("q") == []
    h.clock.now += 1999
    assert sm.receive("q") == []
    h.clock.now += 1
    (d,) = sm.receive("q")
    assert (d.message.message_id, d.delivery_count) == (mid, 1)


def test_delivery_updates_stay_bounded_by_max_redelivery_records(
    messaging_factory: StoreFactory,
) -> None:
    factory = messaging_factory
    factory.config = factory.config.replace(
        max_redelivery_records=2,
        address_settings={"orders": {"max_delivery_attempts": -1, "redelivery_delay": 1}},
    )
    h = Harness(factory)
    sm = h.setup("q")
    sm.send(msg(b"again"))
    for _ in range(20):
        _fail(sm, "q", 1)
        h.clock.now += 10
    sm.close()
    h.sm = None
    store = h.factory.open()
    types = [rec.user_record_type for rec in store.messages.load().records]
    store.bindings.load()
    h.factory.close()
    assert sorted(t for t in types if t in (34, 36)) == [34, 34, 36, 36]
    sm = h.open()
    h.clock.now += 10
    (d,) = sm.receive("q")
    assert d.delivery_count == 2  # the last count written


# -- a crash at every point of a move: on exactly one of its queue and the target ---------


class Crashed(Exception):
    """What a wait for durability raises once the crash point has passed."""


class CrashJournal(CutJournal):
    """A CutJournal that stops the manager at its cut: the write past it, and every wait for
    durability after it, raise :class:`Crashed` (the process would be dead by then, so
    nothing that follows a durable write, such as deleting a page or a body, may go on)."""

    def write(
        self, name: str, target: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if self.armed and self.cut is not None and self.writes >= self.cut:
            self.writes += 1
            raise Crashed(f"crashed after {self.cut} writes")
        return super().write(name, target, args, kwargs)

    def flush(self) -> None:
        if self.armed and self.cut is not None and self.writes > self.cut:
            raise Crashed(f"crashed after {self.cut} writes")
        self._inner.flush()


@pytest.mark.parametrize("kind", ["inline", "large", "paged"])
def test_a_crash_at_every_step_of_a_dead_letter_move_leaves_it_on_exactly_one_queue(
    messaging_factory: StoreFactory, kind: str
) -> None:
    """The move's journal writes cut after each ``k`` (a crash keeps a prefix of them, in
    order; the page and body writes before them are whole): after the restart the message is
    on its queue or on the dead-letter queue, never both, never neither, its body whole. Each
    cut on an address of its own in one store."""
    settings: dict[str, object] = {"dead_letter_address": "DLA", "max_delivery_attempts": 1}
    if kind == "paged":
        settings.update(max_size_messages=1, address_full_policy="PAGE")
    factory = messaging_factory
    factory.config = factory.config.replace(
        min_large_message_size=4096, address_settings={"orders.#": settings}
    )
    h = Harness(factory)
    body = BIG if kind == "large" else b"poison"
    cuts: list[int | None] = [None]  # the whole move first: how many writes it makes
    writes = 0
    while cuts:
        cut = cuts.pop(0)
        sm, journal, _store = open_wrapped(h, CrashJournal)
        if cut is None:
            _with_dla(sm)
        address = f"orders.{cut}"
        sm.create_address(address, routing_types=("MULTICAST",))
        sm.create_queue(address, address=address, routing_type="MULTICAST")
        if kind == "paged":
            sm.send(Message(address, b"first"))  # in memory: the next one pages
        mid = sm.send(Message(address, body))
        ds = sm.receive(address, 2)
        assert ds[-1].message.message_id == mid
        journal.armed, journal.cut = True, cut
        try:
            sm.cancel(address, mid)  # type: ignore[arg-type]
        except Crashed:
            pass
        if cut is None:
            writes = journal.writes  # then a crash after each of its writes, the 0th too
            cuts = list(range(writes))
        h.crash()  # what reached the journal is kept
        sm = h.open()
        left = [d for d in drain(sm, address, ack=False) if d.message.message_id == mid]
        moved = drain(sm, "dead", ack=False)
        assert len(left) + len(moved) == 1, (kind, cut, writes, len(left), len(moved))
        (d,) = left or moved
        assert _read(d.message) == body
        for d in moved:  # the next cut's dead-letter queue starts empty
            sm.ack("dead", d.message.message_id)  # type: ignore[arg-type]
        sm.close()
        h.sm = None
    assert writes >= 3  # the copy and its ref, the ack, the commit
