"""Acks the store refuses (a database outage), all back-ends: an ack refused raises having
changed nothing, and a page's completion and deletion after an ack are the pager's tidying,
never the ack's failure (:mod:`store.messaging.pager_deletion`).

An ack writes its record before it changes anything in memory: refused, it raises
StoreUnavailableError and the message is still delivered to its consumer, who can ack it (or
cancel it) again once the store answers.

The ack of a page's last message queues its cursor-ack record, then completes and deletes the
page. When that tidying is refused (a database outage refuses the completion's journal
transaction or the page store's delete; a file store fails to remove the page), the ack has
been applied all the same: raising would tell the consumer nothing was written, and one told
so expects the message again, which the cursor ack already removed for good (a CI run of
tests/db/test_outages.py lost an acknowledged send to exactly that). So the ack returns, the
page is tidied at the next chance once the store works again, and nothing acknowledged comes
back after a restart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from store.errors import StoreUnavailableError
from store.journal.api import Journal
from store.messaging import pager_deletion
from store.messaging.manager import StorageManager
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
#: The journal calls of a page's completion (one transaction).
_COMPLETION = ("append_add_tx", "append_deletes_tx", "append_commit")


class RefusingJournal(JournalWrapper):
    """The message journal, refusing the calls named in ``refuse`` as an outage does
    (StoreUnavailableError, nothing written); the rest pass through."""

    def __init__(self, inner: Journal) -> None:
        super().__init__(inner)
        self.refuse: tuple[str, ...] = ()
        self.refused = 0

    def write(
        self, name: str, target: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if name in self.refuse:
            self.refused += 1
            raise StoreUnavailableError("the database is away; nothing was written")
        return target(*args, **kwargs)


@pytest.fixture
def h(messaging_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch) -> Harness:
    messaging_factory.config = messaging_factory.config.replace(
        address_settings={"orders": PAGE_EVERY_MESSAGE}
    )
    monkeypatch.setattr(pager_deletion, "_TIDY_AGAIN", 0.0)  # try again at the next ack
    return Harness(messaging_factory)


def _open(h: Harness) -> tuple[StorageManager, RefusingJournal, Store]:
    sm, journal, store = open_wrapped(h, RefusingJournal)
    sm.create_address("orders")
    sm.create_queue("orders", address="orders")
    for p in PAYLOADS:
        sm.send(msg(p))
    return sm, journal, store


def _first_page(store: Store) -> tuple[int, int]:
    """(the first page's number, how many of PAYLOADS it holds); the first is in memory."""
    pages = store.paging.store("orders")
    first = pages.pages()[0]
    return first, len(pages.read_page(first))


def _refuse_deletes(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the page store refuse to delete pages; returns the list of pages it refused."""
    pages = store.paging.store("orders")
    refused: list[int] = []

    def delete_page(page: int) -> None:
        refused.append(page)
        raise StoreUnavailableError(f"deleting page {page} failed: the database is away")

    monkeypatch.setattr(pages, "delete_page", delete_page)
    return refused


@pytest.mark.parametrize("refused", ["completion", "page delete"])
def test_an_ack_whose_page_cannot_be_tidied_returns_and_stays_acknowledged(
    h: Harness, monkeypatch: pytest.MonkeyPatch, refused: str
) -> None:
    sm, journal, store = _open(h)
    page, held = _first_page(store)
    got = sm.receive("orders", 1 + held)  # the one in memory, then the whole first page
    assert bodies(got) == PAYLOADS[: 1 + held]
    for d in got[:-1]:
        sm.ack("orders", d.message.message_id)  # type: ignore[arg-type]
    if refused == "completion":
        journal.refuse = _COMPLETION
    else:
        deletes = _refuse_deletes(store, monkeypatch)
    sm.ack("orders", got[-1].message.message_id)  # type: ignore[arg-type]  # returns
    if refused == "completion":
        assert journal.refused == 1, "the completion was never tried"
    else:
        assert deletes == [page], "the page's delete was never tried"
    assert page in store.paging.store("orders").pages()  # left for later
    h.factory.close()
    h.sm = None
    again = h.open()
    assert bodies(drain(again, "orders")) == PAYLOADS[1 + held :], "an acknowledged one is back"


def test_a_page_left_untidy_is_deleted_at_the_next_ack_once_the_store_works(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    sm, _journal, store = _open(h)
    page, held = _first_page(store)
    got = sm.receive("orders", 2 + held)  # the first page, and one message of the second
    for d in got[: 1 + held - 1]:
        sm.ack("orders", d.message.message_id)  # type: ignore[arg-type]
    deletes = _refuse_deletes(store, monkeypatch)
    sm.ack("orders", got[held].message.message_id)  # type: ignore[arg-type]
    assert deletes == [page]
    monkeypatch.undo()  # the store works again
    monkeypatch.setattr(pager_deletion, "_TIDY_AGAIN", 0.0)
    assert page in store.paging.store("orders").pages()
    sm.ack("orders", got[-1].message.message_id)  # type: ignore[arg-type]  # any later ack
    assert page not in store.paging.store("orders").pages(), "the page was never tidied"
    h.factory.close()
    h.sm = None
    again = h.open()
    assert bodies(drain(again, "orders")) == PAYLOADS[2 + held :]


@pytest.mark.parametrize("paged", [False, True], ids=["in-memory", "paged"])
def test_a_refused_ack_raises_and_leaves_the_message_delivered(h: Harness, paged: bool) -> None:
    sm, journal, _store = _open(h)
    got = sm.receive("orders", 2)  # the first is in memory, the second paged
    d = got[1] if paged else got[0]
    mid = d.message.message_id
    assert mid is not None
    journal.refuse = ("append_add", "append_update", "append_delete")  # every ack's record
    with pytest.raises(StoreUnavailableError):
        sm.ack("orders", mid)
    assert journal.refused == 1
    journal.refuse = ()  # the database answers again
    sm.ack("orders", mid)  # still delivered: the second ack is the one that counts
    other = got[0] if paged else got[1]
    sm.cancel("orders", other.message.message_id)  # type: ignore[arg-type]
    h.factory.close()
    h.sm = None
    again = h.open()
    assert bodies(drain(again, "orders")) == [p for p in PAYLOADS if p != d.message.body]
