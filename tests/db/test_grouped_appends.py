"""Operations of several appends admitted as one (``Journal.group``, :mod:`store.db.writer`
"Outages"), every database: an outage the writer notices between two appends of one operation
never makes it raise "nothing written" with its first records queued.

The outage is the writer's view of one (``Health.down_since`` set, as the writer sets it when
a batch fails), begun at an exact point: after the first record of a send, after its page,
after a transaction's COMMIT. The database itself stays up, so what was queued commits, and a
fresh open shows what the operation's answer promised. Before groups, each of these raised
StoreUnavailableError ("nothing was written") while the records before it committed: a send
retried with its duplicate id was then stored twice, and a commit the caller took as failed
was applied.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from store.db.journal import DatabaseJournal
from store.errors import DuplicateIdError, StoreUnavailableError
from store.journal.api import Journal
from store.messaging import Message, StorageManager
from store.store import Store
from tests.db.conftest import DbStore
from tests.messaging.support import JournalWrapper, bodies, drain


def _health(journal: Any) -> Any:
    journal = getattr(journal, "_inner", journal)  # through a DownAfter
    assert isinstance(journal, DatabaseJournal)
    writer = journal._writer
    assert writer is not None
    return writer.health


def _goes_down(journal: Any) -> None:
    """The writer takes the database to be away from now on (as after a failed batch)."""
    health = _health(journal)
    health.reason = "connection lost (test)"
    health.down_since = time.monotonic()


def _comes_back(journal: Any) -> None:
    _health(journal).down_since = None


def _appended(store: Store) -> list[tuple[int, bytes]]:
    return [(r.id, bytes(r.data)) for r in store.messages.load().records]


class DownAfter(JournalWrapper):
    """The message journal, noticing an outage right after the first ``after`` call once
    armed."""

    def __init__(self, inner: Journal, after: str) -> None:
        super().__init__(inner)
        self.after = after
        self.armed = False

    def write(
        self, name: str, target: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        done = target(*args, **kwargs)
        if self.armed and name == self.after:
            self.armed = False
            _goes_down(self._inner)
        return done


@pytest.fixture
def opened(db: DbStore) -> Iterator[Callable[[dict[str, Any] | None], StorageManager]]:
    """Opens a manager on ``db`` (address and queue ``orders``) with the given address
    settings; closes it at teardown."""
    made: list[StorageManager] = []

    def open_manager(settings: dict[str, Any] | None = None) -> StorageManager:
        if made:
            made.pop().close()
        if settings is not None:
            db.config = db.config.replace(address_settings={"orders": settings})
        sm = StorageManager(db.open(load=False))
        sm.load()
        if "orders" not in {a.name for a in sm.addresses()}:
            sm.create_address("orders")
            sm.create_queue("orders", address="orders")
        made.append(sm)
        return sm

    yield open_manager
    for sm in made:
        sm.close()


def _wrap(sm: StorageManager, after: str) -> DownAfter:
    wrapper = DownAfter(sm._journal, after)
    sm._journal = wrapper  # type: ignore[assignment]
    sm._state.journal = wrapper  # type: ignore[assignment]
    return wrapper


def test_a_group_refuses_its_first_append_or_none(db: DbStore) -> None:
    store = db.open()
    journal = store.messages
    journal.load()
    with journal.group():
        journal.append_add(1, 7, b"one")
        _goes_down(journal)
        journal.append_update(1, 8, b"one's ref")  # admitted with the first
        journal.append_add(2, 7, b"two")
    with pytest.raises(StoreUnavailableError) as refused:
        journal.append_add(3, 7, b"outside")
    assert not refused.value.in_doubt
    with pytest.raises(StoreUnavailableError), journal.group():
        journal.append_add(4, 7, b"a group begun while down")
    with pytest.raises(StoreUnavailableError), journal.group(admit=True):
        pytest.fail("a group entered with admit while down must be refused at its entry")
    _comes_back(journal)
    journal.flush()
    store = db.open(load=False)
    assert _appended(store) == [(1, b"one"), (1, b"one's ref"), (2, b"two")]


@pytest.mark.parametrize("paged", [False, True], ids=["in-memory", "paged"])
def test_a_send_the_outage_catches_midway_returns_and_is_stored_once(
    opened: Callable[[dict[str, Any] | None], StorageManager], paged: bool
) -> None:
    settings = {"max_size_messages": 1, "address_full_policy": "PAGE"} if paged else {}
    sm = opened(settings)
    sm.send(Message("orders", b"first"))  # in memory: the next one pages when paged
    if paged:
        pages = sm._pager  # the outage is noticed once the page record is queued
        page = pages.page

        def page_then_down(*args: Any, **kwargs: Any) -> Any:
            done = page(*args, **kwargs)
            _goes_down(sm._journal)
            return done

        pages.page = page_then_down  # type: ignore[method-assign]
    else:
        _wrap(sm, "append_add").armed = True  # down after the message record
    mid = sm.send(Message("orders", b"second"), dup_id="second")
    assert mid is not None
    _comes_back(sm._journal)
    if paged:
        del pages.page
    sm.flush()
    sm = opened(None)
    with pytest.raises(DuplicateIdError):
        sm.send(Message("orders", b"second"), dup_id="second")
    assert bodies(drain(sm, "orders")) == [b"first", b"second"]


def test_a_commit_the_outage_catches_after_its_commit_record_returns(
    opened: Callable[[dict[str, Any] | None], StorageManager],
) -> None:
    sm = opened({})
    sm.send(Message("orders", b"acked in the transaction"))
    (delivery,) = sm.receive("orders")
    tx = sm.begin()
    tx.send(Message("orders", b"sent in the transaction"))
    assert delivery.message.message_id is not None
    tx.ack("orders", delivery.message.message_id)
    _wrap(sm, "append_commit").armed = True  # the acked message's DELETE comes after it
    tx.commit()
    _comes_back(sm._journal)
    sm.flush()
    sm = opened(None)
    assert bodies(drain(sm, "orders")) == [b"sent in the transaction"]


def test_a_queue_delete_the_outage_catches_after_its_binding_delete_returns(
    opened: Callable[[dict[str, Any] | None], StorageManager],
) -> None:
    sm = opened({})
    sm.create_queue("audit", address="orders")
    sm.send(Message("orders", b"on both queues"))
    sm.send(Message("orders", b"on both queues, too"))
    bindings = sm._store.bindings
    delete = bindings.append_delete

    def delete_then_down(*args: Any, **kwargs: Any) -> Any:
        done = delete(*args, **kwargs)
        _goes_down(sm._journal)  # the acks of the queue's messages come after
        return done

    bindings.append_delete = delete_then_down  # type: ignore[method-assign]
    sm.delete_queue("audit")
    del bindings.append_delete
    _comes_back(sm._journal)
    sm.flush()
    sm = opened(None)
    assert [q.name for q in sm.queues()] == ["orders"]
    assert bodies(drain(sm, "orders")) == [b"on both queues", b"on both queues, too"]
