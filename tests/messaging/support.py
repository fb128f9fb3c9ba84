"""Helpers of the storage-manager tests: open a manager on a test's store, restart it (clean or
crash-like), read what one delivers, and a clock the tests move by hand.

A *crash-like* restart closes the store without closing the manager: the journals keep what was
appended (a clean journal close), but the id generator records no clean stop, as after a kill.

Thread-safety: none; one test's thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from store.journal.api import Journal
from store.messaging import Delivery, Message, Recovery, StorageManager
from store.store import Store
from tests.support.backends import StoreFactory

__all__ = [
    "PAGE_EVERY_MESSAGE",
    "Clock",
    "Harness",
    "JournalWrapper",
    "bodies",
    "drain",
    "end_threads",
    "open_wrapped",
]

#: Address settings under which ``orders`` pages every message after the first (1 KiB pages).
PAGE_EVERY_MESSAGE: dict[str, object] = {
    "max_size_messages": 1,
    "address_full_policy": "PAGE",
    "page_size_bytes": 1024,
}

W = TypeVar("W", bound="JournalWrapper")


@dataclass
class Clock:
    """A clock in ms the test moves: ``clock.now += 1000``."""

    now: int = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


class Harness:
    """A storage manager over ``factory``'s store, reopened on demand."""

    def __init__(self, factory: StoreFactory, *, clock: Clock | None = None) -> None:
        self.factory = factory
        self.clock = clock or Clock()
        self.sm: StorageManager | None = None
        self.rec: Recovery | None = None

    def open(self) -> StorageManager:
        """Open the store and load a new manager; returns it (``self.rec`` is its Recovery)."""
        store = self.factory.open()
        assert isinstance(store, Store)
        self.sm = StorageManager(store, clock=self.clock)
        self.rec = self.sm.load()
        return self.sm

    def restart(self) -> StorageManager:
        """Close the manager cleanly, open and load again; returns the new manager."""
        if self.sm is not None:
            self.sm.close()
        return self.open()

    def crash(self) -> None:
        """What a kill leaves: the manager's own threads end (as the process's would) and
        the store is closed under it, with no clean stop of the manager."""
        if self.sm is not None:
            end_threads(self.sm)
        self.factory.close()

    def crash_restart(self) -> StorageManager:
        """Close only the store (no clean stop of the manager), open and load again."""
        self.crash()
        return self.open()

    def setup(self, *queues: str, address: str = "orders") -> StorageManager:
        """Open, create ``address`` and ``queues`` on it; returns the manager."""
        sm = self.open()
        sm.create_address(address, routing_types=("ANYCAST", "MULTICAST"))
        for q in queues:
            sm.create_queue(q, address=address, routing_type="MULTICAST")
        return sm


def end_threads(sm: StorageManager) -> None:
    """Stop ``sm``'s expiry scan thread without closing ``sm``: the part of a simulated crash
    that a real one gets for free. A scan left running on a crashed manager would go on
    moving (and logging) into later tests. Raises nothing."""
    scanner = sm._scanner
    if scanner is not None:
        scanner.stop()


def drain(sm: StorageManager, queue: str, *, ack: bool = True) -> list[Delivery]:
    """Receive everything ready on ``queue`` (acking each unless ``ack`` is false)."""
    out: list[Delivery] = []
    while batch := sm.receive(queue, max_messages=7):
        out.extend(batch)
        if ack:
            for d in batch:
                assert d.message.message_id is not None
                sm.ack(queue, d.message.message_id)
    return out


def bodies(deliveries: list[Delivery]) -> list[bytes]:
    """The inline bodies of ``deliveries``, in order."""
    out: list[bytes] = []
    for d in deliveries:
        assert isinstance(d.message.body, bytes)
        out.append(d.message.body)
    return out


def msg(body: bytes, **kwargs: object) -> Message:
    """A message to "orders" with ``body``."""
    return Message("orders", body, **kwargs)  # type: ignore[arg-type]


class JournalWrapper:
    """A journal whose write calls (``append_*``) go through :meth:`write`, which a test
    overrides to refuse, drop or follow them; everything else passes through."""

    def __init__(self, inner: Journal) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not name.startswith("append_"):
            return target

        def write(*args: Any, **kwargs: Any) -> Any:
            return self.write(name, target, args, kwargs)

        return write

    def write(
        self, name: str, target: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """One write call ``name``; ``target(*args, **kwargs)`` makes it. Passes it through."""
        return target(*args, **kwargs)


def open_wrapped(h: Harness, wrap: Callable[[Journal], W]) -> tuple[StorageManager, W, Store]:
    """Open ``h``'s store with its message journal wrapped by ``wrap`` and load a manager on
    it (``h.sm``); returns the manager, the wrapper and the store."""
    store = h.factory.open()
    assert isinstance(store, Store)
    journal = wrap(store.messages)
    store._parts = dataclasses.replace(store._parts, messages=journal)  # type: ignore[arg-type]
    sm = StorageManager(store, clock=h.clock)
    sm.load()
    h.sm = sm
    return sm, journal, store
