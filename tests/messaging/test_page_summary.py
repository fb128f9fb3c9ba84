"""The page summary (store.messaging.page_summary, issue 27) on every back-end: a clean close
writes what the load needs of each page, the next load reads no page it covers and delivers
exactly what a load reading every page delivers; an open for writing deletes it (a crash then
leaves none); a stale, truncated or corrupted summary is detected, logged and ignored (every
page is read)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from store.data import verify_store
from store.data.advice import repair_advice
from store.data.summary_check import check_summaries
from store.errors import CorruptionError
from store.messaging import StorageManager, Xid
from store.messaging.message_records import PagedMessage
from store.messaging.page_summary import decode_summary, encode_summary
from store.paging.api import PageStore
from store.paging.base import _Store
from store.store import Store
from tests.messaging.support import Harness, bodies, drain, msg
from tests.support.backends import StoreFactory

X1 = Xid(7, b"summary", b"")
BODIES = [b"s%03d" % i + b"." * 150 for i in range(60)]


@pytest.fixture
def h(messaging_factory: StoreFactory) -> Harness:
    h = Harness(messaging_factory)
    h.factory.config = h.factory.config.replace(
        address_settings={
            "orders": {
                "max_size_messages": 2,
                "address_full_policy": "PAGE",
                "page_size_bytes": 2048,
            }
        }
    )
    return h


@pytest.fixture
def pages_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every page number a load reads whole (``PageStore.read_pages``), spied on the real
    page store (nothing is replaced: the reads still happen)."""
    seen: list[int] = []
    real = _Store.read_pages

    def spy(self: _Store, pages: Sequence[int]) -> Iterator[tuple[int, Sequence[bytes]]]:
        seen.extend(pages)
        return real(self, pages)

    monkeypatch.setattr(_Store, "read_pages", spy)
    return seen


def _fill(h: Harness) -> list[bytes]:
    """Two queues on "orders", 60 sends (2 in memory, the rest paged over several pages),
    a committed transaction's paged sends, the first 5 received and acknowledged on q1.
    Returns what q1 must still deliver, in order (q2 gets every body)."""
    sm = h.setup("q1", "q2")
    for body in BODIES[:40]:
        assert sm.send(msg(body)) is not None
    tx = sm.begin()
    for body in BODIES[40:50]:
        tx.send(msg(body))
    tx.commit()
    for body in BODIES[50:]:
        assert sm.send(msg(body)) is not None
    for d in sm.receive("q1", 5):
        assert d.message.message_id is not None
        sm.ack("q1", d.message.message_id)
    return BODIES[5:]


@contextlib.contextmanager
def _raw_pages(h: Harness) -> Iterator[PageStore]:
    """The page store of "orders", of the store opened without a storage manager (nothing
    loaded or deleted); closed after."""
    if h.sm is not None:
        h.sm.close()
        h.sm = None
    store = h.factory.open()
    assert isinstance(store, Store)
    try:
        yield store.paging.store("orders")
    finally:
        h.factory.close()


def _summary(h: Harness) -> bytes | None:
    with _raw_pages(h) as pages:
        return pages.read_summary()


def _put_summary(h: Harness, data: bytes | None) -> None:
    with _raw_pages(h) as pages:
        pages.write_summary(data)


def _check_delivers(h: Harness, q1: Sequence[bytes]) -> None:
    sm = h.open()
    assert sm.depth("q1") == len(q1) and sm.depth("q2") == len(BODIES)
    assert bodies(drain(sm, "q1")) == list(q1)
    assert bodies(drain(sm, "q2")) == BODIES


def test_a_clean_close_writes_a_summary_the_next_load_reads_no_page_it_covers(
    h: Harness, pages_read: list[int]
) -> None:
    q1 = _fill(h)
    data = _summary(h)
    assert data is not None
    with _raw_pages(h) as pages:
        present = pages.pages()
    assert len(present) > 3 and sorted(decode_summary(data)) == present
    pages_read.clear()
    sm = h.open()
    assert pages_read == []  # nothing read whole: the summary covered every page
    assert h.factory.store.paging.store("orders").read_summary() is None  # deleted at open
    assert sm.depth("q1") == len(q1) and sm.depth("q2") == len(BODIES)
    assert bodies(drain(sm, "q1")) == q1
    assert bodies(drain(sm, "q2")) == BODIES
    sm = h.restart()
    assert sm.depth("q1") == sm.depth("q2") == 0


def test_a_crash_after_open_leaves_no_summary_and_the_load_reads_every_page(
    h: Harness, pages_read: list[int]
) -> None:
    q1 = _fill(h)
    h.restart()  # loads from the summary, which open deleted
    assert h.factory.store.paging.store("orders").read_summary() is None
    pages_read.clear()
    h.crash_restart()
    assert pages_read != []
    h.sm = None
    h.factory.close()
    _check_delivers(h, q1)


def test_pages_appended_after_a_load_from_the_summary_are_summarised_at_the_next_close(
    h: Harness, pages_read: list[int]
) -> None:
    q1 = _fill(h)
    more = _send_and_close(h, h.restart(), b"late", 30)
    pages_read.clear()
    sm = h.open()
    assert pages_read == []
    assert bodies(drain(sm, "q1")) == [*q1, *more]
    assert bodies(drain(sm, "q2")) == [*BODIES, *more]


def _send_and_close(h: Harness, sm: StorageManager, tag: bytes, n: int) -> list[bytes]:
    """Send ``n`` bodies starting with ``tag`` to "orders", then close ``sm`` cleanly (a
    page summary is written); returns the bodies."""
    more = [tag + b"%02d" % i + b"." * 150 for i in range(n)]
    for body in more:
        assert sm.send(msg(body)) is not None
    sm.close()
    h.sm = None
    return more


def _stale(h: Harness) -> list[bytes]:
    """A summary from an earlier clean close put back after more was paged: it lists the
    page then being written at its length then."""
    q1 = _fill(h)
    old = _summary(h)
    more = _send_and_close(h, h.open(), b"more", 3)
    _put_summary(h, old)
    BODIES.extend(more)
    return [*q1, *more]


@pytest.mark.parametrize(
    "damage",
    ["stale", "truncated", "corrupted", "not a summary"],
)
def test_a_damaged_or_stale_summary_is_logged_and_ignored_every_page_is_read(
    h: Harness, pages_read: list[int], caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    saved = list(BODIES)
    try:
        if damage == "stale":
            q1 = _stale(h)
        else:
            q1 = _fill(h)
            data = _summary(h)
            assert data is not None
            mid = len(data) // 2
            bad = {
                "truncated": data[:-9],
                "corrupted": data[:mid] + bytes([data[mid] ^ 0x10]) + data[mid + 1 :],
                "not a summary": b"pages 1\n",
            }[damage]
            _put_summary(h, bad)
        pages_read.clear()
        with caplog.at_level(logging.WARNING, logger="store.messaging.paging"):
            _check_delivers(h, q1)
        assert pages_read != []
        said = " ".join(r.getMessage() for r in caplog.records)
        assert "the page summary of address 'orders'" in said
        assert ("is stale" if damage == "stale" else "is ignored") in said
    finally:
        BODIES[:] = saved


def test_a_page_holding_a_prepared_transaction_s_sends_is_left_out_and_read(
    h: Harness, pages_read: list[int]
) -> None:
    sm = h.setup("q1", "q2")
    for body in BODIES[:30]:
        assert sm.send(msg(body)) is not None
    tx = sm.begin()
    for body in BODIES[30:34]:
        tx.send(msg(body))
    tx.prepare(X1)
    every_page, prepared_pages = _pages_with_a_transaction(h)
    pages_read.clear()
    sm = h.open()
    # exactly the pages holding the prepared sends were read; the summary covered the others
    assert prepared_pages and set(prepared_pages) < set(every_page)
    assert sorted(set(pages_read)) == prepared_pages
    assert h.rec is not None and list(h.rec.prepared) == [X1]
    h.rec.prepared[X1].commit()
    assert bodies(drain(sm, "q1")) == BODIES[:34]


def _pages_with_a_transaction(h: Harness) -> tuple[list[int], list[int]]:
    """(every page of "orders", the pages holding a record of a paging transaction), read
    from the raw store."""
    with _raw_pages(h) as pages:
        every = sorted(pages.pages())
        with_tx = [
            page
            for page, records in pages.read_pages(every)
            if any(PagedMessage.decode(bytes(record)).tx_id for record in records)
        ]
    return every, sorted(with_tx)


def test_the_summary_round_trips_and_refuses_runs_that_do_not_cover_the_page() -> None:
    from store.messaging.page_summary import PageSummary

    pages: dict[int, Any] = {
        3: PageSummary(4096, 5, ((0, 3, 0, (1, 2)), (3, 2, 9, (2,))), (77,)),
        4: PageSummary(10, 0, (), ()),
    }
    assert decode_summary(encode_summary(pages)) == pages
    gap = {5: PageSummary(100, 4, ((0, 3, 0, (1,)),), ())}
    with pytest.raises(ValueError, match="do not cover"):
        decode_summary(encode_summary(gap))


@pytest.mark.parametrize("lie", ["queues", "transaction", "count"])
def test_a_summary_that_disagrees_with_its_page_is_corruption_naming_the_page(
    h: Harness, lie: str
) -> None:
    """A summary of the right lengths whose page holds something else (its records routed to
    other queues, in another transaction, or more of them than listed): trusted as it is, it
    delivered the page's messages to the wrong queues or dropped them with the page. The
    first read of that page (or the load, about to delete a page the summary says no queue
    needs) compares it with the summary and raises CorruptionError naming the page; nothing
    is delivered from it."""
    _fill(h)
    data = _summary(h)
    assert data is not None
    summary = decode_summary(data)
    first = min(summary)
    known = summary[first]
    (start, count, tx_id, queue_ids), *rest = known.runs
    if lie == "queues":
        told = [(start, count, tx_id, queue_ids[:1]), *rest]
        runs, records = told, known.records
    elif lie == "transaction":
        runs, records = [(start, count, 999, queue_ids), *rest], known.records
    else:  # one record fewer than the page holds: the last run shortened
        *head, (s, c, t, q) = known.runs
        runs, records = [*head, (s, c - 1, t, q)], known.records - 1
    summary[first] = dataclasses.replace(known, runs=tuple(runs), records=records)
    _put_summary(h, encode_summary(summary))
    with _raw_pages(h) as pages:
        where = pages.page_path(first)
    found = [f for f in check_summaries(h.factory.config) if f.severity == "error"]
    assert [f.where for f in found] == [where.split(" (")[0]]  # verify says so first
    advice = " ".join(repair_advice(verify_store(h.factory.config)))
    assert "summary of the last clean close" in advice
    with pytest.raises(CorruptionError) as caught:  # at the load (a page it would delete)
        drain(h.open(), "q2")  # or when a queue first reads it
    assert caught.value.path == where and f"page {first} of address 'orders'" in str(caught.value)
    assert "summary" in caught.value.reason
