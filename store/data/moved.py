"""The messages the delivery policies moved that still wait on a queue, by original address:
what ``store data print`` and ``store report`` show as dead-lettered and expired.

A message a dead-letter or expiry move made carries ``_AMQ_ORIG_ADDRESS`` (the address it
was sent to); one an expiry move made also carries ``_AMQ_ACTUAL_EXPIRY``
(:mod:`store.messaging.policies`). :func:`moved_counts` loads the store read-only and browses
every message still on a queue, the paged ones included (each page is read once; bodies are
not read), so the counts are exact: :class:`~store.messaging.Recovery`'s own counts leave the
paged messages out, which its load does not read.

A message dead-lettered and then expired off its dead-letter queue counts as expired (its
last move), under the address it was first sent to (a move keeps the first origin).

Thread-safety: one call per thread; it opens its own read-only store.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from store.messaging.policies import ACTUAL_EXPIRY, ORIG_ADDRESS

if TYPE_CHECKING:
    from store.config import StoreConfig

__all__ = ["MovedCounts", "moved_counts"]


@dataclass(frozen=True)
class MovedCounts:
    """Messages waiting after a move, by original address: ``dead_lettered`` and
    ``expired``; ``messages`` every message browsed."""

    dead_lettered: dict[str, int] = field(default_factory=dict)
    expired: dict[str, int] = field(default_factory=dict)
    messages: int = 0


def moved_counts(config: StoreConfig) -> MovedCounts:
    """Load ``config``'s store read-only (no expiry scan: nothing moves while it is read) and
    count the moved messages still waiting. Raises what ``open_store(read_only=True)`` and a
    load raise (StoreLockedError while a live process holds the store, LostDataError,
    CorruptionError)."""
    from store import open_store
    from store.messaging import StorageManager

    quiet = config.replace(message_expiry_scan_period=-1)
    dead: Counter[str] = Counter()
    expired: Counter[str] = Counter()
    messages = 0
    with StorageManager(open_store(quiet, read_only=True)) as sm:
        sm.load()
        for message, _queues in sm.browse():
            messages += 1
            props = message.properties
            if ORIG_ADDRESS in props:
                (expired if ACTUAL_EXPIRY in props else dead)[str(props[ORIG_ADDRESS])] += 1
    return MovedCounts(dict(sorted(dead.items())), dict(sorted(expired.items())), messages)
