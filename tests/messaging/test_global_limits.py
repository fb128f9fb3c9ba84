"""Global limits (issue 27, Artemis's ``global-max-size`` / ``global-max-messages``) on every
back-end: once all addresses together hold the limit in memory, every address is full,
whatever its own limits, and its own ``address-full-policy`` applies (PAGE by default, DROP,
FAIL, BLOCK); paged messages come back after those in memory, in send order, exactly once,
across restarts. The kill -9 rounds are in test_global_limits_kill9.py."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from store.errors import AddressFullError
from store.messaging import Message
from store.messaging.pager import MEMORY_PER_MESSAGE
from store.store import Store
from tests.messaging.support import Harness, bodies, drain
from tests.support.backends import StoreFactory


@pytest.fixture
def h(messaging_factory: StoreFactory) -> Harness:
    return Harness(messaging_factory)


def _configure(h: Harness, settings: dict[str, Any] | None = None, **limits: Any) -> None:
    h.factory.config = h.factory.config.replace(address_settings=settings or {}, **limits)


def _setup(h: Harness, *addresses: str) -> None:
    sm = h.open()
    for name in addresses:
        sm.create_address(name)
        sm.create_queue(name, address=name)


def _paged_addresses(h: Harness) -> set[str]:
    store = h.factory.store
    assert isinstance(store, Store)
    return {a for a in store.paging.addresses() if store.paging.store(a).pages()}


def _send(h: Harness, address: str, *payloads: bytes) -> None:
    assert h.sm is not None
    for p in payloads:
        assert h.sm.send(Message(address, p)) is not None


def test_an_address_without_a_limit_pages_past_global_max_messages_and_keeps_send_order(
    h: Harness,
):
    _configure(h, global_max_messages=3)
    _setup(h, "other", "orders")
    _send(h, "other", b"o1", b"o2")  # two of the three the store may hold
    _send(h, "orders", b"m0", b"m1", b"m2")  # m0 fills the global limit; m1, m2 page
    assert _paged_addresses(h) == {"orders"}
    sm = h.crash_restart()
    _send(h, "orders", b"m3")  # still paging: behind m1, m2
    assert sm.depth("orders") == 4
    assert bodies(drain(sm, "orders")) == [b"m0", b"m1", b"m2", b"m3"]
    assert bodies(drain(sm, "other")) == [b"o1", b"o2"]
    sm = h.restart()
    assert drain(sm, "orders") == [] and sm.depth("orders") == 0


def test_global_max_size_counts_each_message_with_its_memory_overhead(h: Harness):
    # Two 10-byte messages are far below 2 x MEMORY_PER_MESSAGE bytes of records, but their
    # memory estimate reaches it: the third pages.
    _configure(h, global_max_size=2 * MEMORY_PER_MESSAGE)
    _setup(h, "orders")
    _send(h, "orders", b"a" * 10, b"b" * 10)
    assert _paged_addresses(h) == set()
    _send(h, "orders", b"c" * 10, b"d" * 10)
    assert _paged_addresses(h) == {"orders"}
    sm = h.restart()
    assert bodies(drain(sm, "orders")) == [b"a" * 10, b"b" * 10, b"c" * 10, b"d" * 10]


def test_the_global_limit_applies_over_a_larger_limit_of_the_address(h: Harness):
    _configure(h, {"orders": {"max_size_messages": 100}}, global_max_messages=2)
    _setup(h, "orders")
    _send(h, "orders", b"1", b"2", b"3")
    assert _paged_addresses(h) == {"orders"}
    assert h.sm is not None and bodies(drain(h.sm, "orders")) == [b"1", b"2", b"3"]


def test_acks_free_global_room_and_new_messages_stay_in_memory_again(h: Harness):
    _configure(h, global_max_messages=2)
    _setup(h, "other", "orders")
    _send(h, "other", b"o1", b"o2")
    sm = h.sm
    assert sm is not None
    drain(sm, "other")  # acked: nothing held any more
    _send(h, "orders", b"m1", b"m2")
    assert _paged_addresses(h) == set()


@pytest.mark.parametrize("policy", ["DROP", "FAIL"])
def test_the_address_policy_applies_when_the_global_limit_is_reached(h: Harness, policy: str):
    _configure(h, {"orders": {"address_full_policy": policy}}, global_max_messages=2)
    _setup(h, "other", "orders")
    _send(h, "other", b"o1", b"o2")
    assert h.sm is not None
    if policy == "DROP":
        assert h.sm.send(Message("orders", b"dropped")) is None
    else:
        with pytest.raises(AddressFullError, match="global-max-messages 2"):
            h.sm.send(Message("orders", b"refused"))
    assert h.sm.depth("orders") == 0 and _paged_addresses(h) == set()


def test_a_sender_blocked_by_the_global_limit_is_released_by_an_ack_on_another_address(
    h: Harness,
):
    _configure(h, {"orders": {"address_full_policy": "BLOCK"}}, global_max_messages=1)
    _setup(h, "other", "orders")
    _send(h, "other", b"o1")
    sm = h.sm
    assert sm is not None
    sent: list[int | None] = []
    sender = threading.Thread(target=lambda: sent.append(sm.send(Message("orders", b"m"))))
    sender.start()
    sender.join(0.3)
    assert sender.is_alive() and not sent  # blocked: the store holds its one message
    drain(sm, "other")
    sender.join(10)
    assert not sender.is_alive() and sent and sent[0] is not None
    assert bodies(drain(sm, "orders")) == [b"m"]


def _hold_and_release(h: Harness, how: str) -> None:
    """Make "other" hold two messages in memory and then release them, ``how``: acked after
    a restart (the load counts them), committed in a transaction and acked, or sent in a
    transaction that rolls back."""
    sm = h.sm
    assert sm is not None
    if how == "restart":
        _send(h, "other", b"o" * 1000, b"p" * 1000)
        sm = h.restart()
    else:
        tx = sm.begin()
        tx.send(Message("other", b"o" * 1000))
        tx.send(Message("other", b"p" * 1000))
        if how == "rollback":
            tx.rollback()
            return
        tx.commit()
    assert bodies(drain(sm, "other")) == [b"o" * 1000, b"p" * 1000]


@pytest.mark.parametrize("how", ["restart", "commit", "rollback"])
def test_global_max_size_is_freed_when_held_messages_go(h: Harness, how: str):
    # The bytes count, not only the message count, goes down: room for exactly two messages
    # (a message's record is a little over its 1000-byte body).
    _configure(h, global_max_size=2 * (MEMORY_PER_MESSAGE + 1000))
    _setup(h, "other", "orders")
    for _ in range(3):  # each time the same room comes back
        _hold_and_release(h, how)
        _send(h, "orders", b"a" * 1000, b"b" * 1000)
        assert _paged_addresses(h) == set(), how
        assert h.sm is not None and bodies(drain(h.sm, "orders")) == [b"a" * 1000, b"b" * 1000]
    _send(h, "orders", b"a" * 1000, b"b" * 1000, b"c" * 1000)
    assert _paged_addresses(h) == {"orders"}  # the limit still holds
