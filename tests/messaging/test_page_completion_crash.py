"""A crash at every point of the ack that completes a page, all back-ends (issue 40's planted
bug: a completion that deleted the queue's cursor acks before, and outside, the journal
transaction adding its PAGE_CURSOR_COMPLETE brought acknowledged paged messages back when the
crash fell between the two).

A crash keeps a prefix of what was appended to the message journal, in order (the file
journal's records are durable in append order, a database's batches commit in order). The
test makes that prefix exactly: the store's message journal is wrapped so that, from the
completing ack on, only its first ``k`` write calls reach the journal; the store is then
closed without the manager (what was appended becomes durable, nothing else), reopened and
loaded. For every ``k``, nothing acknowledged before that ack comes back, and the message of
that ack comes back at most once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from store.journal.api import Journal
from store.store import Store
from tests.messaging.support import (
    PAGE_EVERY_MESSAGE,
    Harness,
    JournalWrapper,
    bodies,
    drain,
    msg,
    open_wrapped,
)
from tests.support.backends import StoreFactory

PAYLOADS = [b"m%02d" % i + b"." * 200 for i in range(12)]


class CutJournal(JournalWrapper):
    """A journal whose write calls stop reaching it after ``cut`` of them, once armed (the
    others are dropped, as a crash drops what was not yet written). Reads and ``flush``
    pass through. One thread (the manager's lock orders every call)."""

    def __init__(self, inner: Journal) -> None:
        super().__init__(inner)
        self.armed = False
        self.cut: int | None = None
        self.writes = 0

    def write(
        self, name: str, target: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if self.armed:
            self.writes += 1
            if self.cut is not None and self.writes > self.cut:
                return None
        return target(*args, **kwargs)


@pytest.fixture
def h(messaging_factory: StoreFactory) -> Harness:
    messaging_factory.config = messaging_factory.config.replace(
        address_settings={"orders": PAGE_EVERY_MESSAGE}
    )
    return Harness(messaging_factory)


def _first_page_count(h: Harness) -> int:
    """How many of PAYLOADS the first page holds (the first is in memory)."""
    store = h.factory.store
    assert isinstance(store, Store)
    pages = store.paging.store("orders")
    return len(pages.read_page(pages.pages()[0]))


def _run_to_the_completing_ack(h: Harness, cut: int | None) -> tuple[int, CutJournal]:
    """Send PAYLOADS to q1 and q2, ack on q1 every message of the first page, the last of
    those acks with the journal cut after ``cut`` writes; returns (messages q1 acked before
    that ack, the journal wrapper)."""
    sm, journal, _store = open_wrapped(h, CutJournal)
    sm.create_address("orders", routing_types=("MULTICAST",))
    for q in ("q1", "q2"):
        sm.create_queue(q, address="orders", routing_type="MULTICAST")
    for p in PAYLOADS:
        sm.send(msg(p))
    first = 1 + _first_page_count(h)  # the one in memory, then the first page
    assert first < len(PAYLOADS)  # a second page: the first is complete, not current
    got = sm.receive("q1", first)
    assert bodies(got) == PAYLOADS[:first]
    for d in got[:-1]:
        sm.ack("q1", d.message.message_id)  # type: ignore[arg-type]
    journal.armed, journal.cut = True, cut
    sm.ack("q1", got[-1].message.message_id)  # type: ignore[arg-type]
    return first - 1, journal


def test_the_completing_ack_writes_its_completion_in_one_transaction(h: Harness) -> None:
    _acked, journal = _run_to_the_completing_ack(h, None)
    writes = journal.writes
    assert writes >= 2  # the cursor ack, then the completion (its transaction)
    h.factory.close()
    h.sm = None
    sm = h.open()
    assert bodies(drain(sm, "q1")) == PAYLOADS[_acked + 1 :]
    assert bodies(drain(sm, "q2")) == PAYLOADS


@pytest.mark.parametrize("cut", range(5))  # the completion writes 4; a cut past them: all
def test_a_crash_inside_the_completing_ack_brings_nothing_acknowledged_back(
    h: Harness, cut: int
) -> None:
    acked, _journal = _run_to_the_completing_ack(h, cut)
    h.factory.close()  # the crash: what reached the journal is kept, nothing else
    h.sm = None
    sm = h.open()
    left = bodies(drain(sm, "q1"))
    # The last ack may be lost (it was never durable); nothing acknowledged before it returns.
    assert left in (PAYLOADS[acked:], PAYLOADS[acked + 1 :]), (cut, [p[:3] for p in left])
    assert bodies(drain(sm, "q2")) == PAYLOADS
