"""What the database page stores check the database still holds after an outage
(docs/db.md "Outages"; the journals' counterpart is :mod:`store.db.probes`).

A failover to a standby behind its primary, or a restore, can lose page rows the store
confirmed (acknowledged paged sends) or bring back a page it deleted (acknowledged messages
delivered again). The page stores know each page's length as committed, so after an outage
(the flusher's retry, or any part of the store noticing one: :mod:`store.db.reconnects`) the
first write reads back the page lengths of the stores written last (at most :data:`KEPT`) and
compares them with what was committed. A difference is :class:`~store.errors.LostDataError`
naming the table and the pages: the paging manager stops (every later append gets the error)
until the store is reopened.

A page whose delete failed in the outage (its answer lost: it may have committed) may be
either whole or gone. Pages are written and deleted under the flusher's ``io_lock``, which
the check runs under too, so no write or delete is in flight while it compares.

Thread-safety: called with the flusher's ``io_lock`` held (module docstring).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Final

from store.db.reconnects import Reconnects
from store.errors import LostDataError

__all__ = ["KEPT", "PageProbes"]

#: Page stores whose committed lengths are kept and checked: the last written.
KEPT: Final = 16


class PageProbes:
    """The committed page lengths of the last written page stores (module docstring).
    ``name_of(store)`` names a store's table in errors."""

    def __init__(self, shared: Reconnects, name_of: Callable[[Hashable], str]) -> None:
        self._shared = shared
        self._seen = shared.count
        self._name_of = name_of
        self._committed: OrderedDict[Hashable, dict[int, int]] = OrderedDict()
        self._doubtful: dict[Hashable, set[int]] = {}

    def due(self) -> bool:
        """Whether a part of the store reconnected after an outage since the last check."""
        return self._shared.count != self._seen

    def written(self, store: Hashable, lengths: dict[int, int]) -> None:
        """A write of ``store`` committed; ``lengths`` are its pages' lengths now."""
        self._committed[store] = dict(lengths)
        self._committed.move_to_end(store)
        while len(self._committed) > KEPT:
            gone, _ = self._committed.popitem(last=False)
            self._doubtful.pop(gone, None)

    def deleted(self, store: Hashable, page: int, *, confirmed: bool) -> None:
        """A delete of ``page`` committed (``confirmed``), or failed so that it may have."""
        held = self._committed.get(store)
        if held is None:
            return
        if confirmed:
            held.pop(page, None)
            self._doubtful.get(store, set()).discard(page)
        else:
            self._doubtful.setdefault(store, set()).add(page)

    def forget(self, store: Hashable) -> None:
        """``store`` was removed. Raises nothing."""
        self._committed.pop(store, None)
        self._doubtful.pop(store, None)

    def check(
        self,
        read: Callable[[Hashable], dict[int, int]],
        *,
        skip: Iterable[Hashable] = (),
    ) -> None:
        """Compare each kept store's lengths as ``read(store)`` gives them (the database)
        with the committed ones, except the stores in ``skip`` (a failed write settles
        those). Raises LostDataError (module docstring), or what ``read`` raises."""
        seen = self._shared.count
        passed = set(skip)
        for store, committed in list(self._committed.items()):
            if store in passed:
                continue
            actual = read(store)
            doubtful = self._doubtful.get(store, set())
            wrong = []
            for page in sorted(set(actual) | set(committed)):
                has, had = actual.get(page, 0), committed.get(page, 0)
                if has == had or (page in doubtful and has == 0):
                    continue
                what = "deleted" if had == 0 else f"{had:,} bytes committed"
                wrong.append(f"page {page}: {has:,} bytes in the database, {what}")
            if wrong:
                raise LostDataError(
                    self._name_of(store),
                    0,
                    "after the database came back it lacks page commits the store confirmed: "
                    + "; ".join(wrong)
                    + " (a failover to a standby behind its primary, or a restore?); paging "
                    "stops writing",
                    hint="find what the database lost (the old primary may still hold it), "
                    "then reopen the store; acknowledged messages may be missing or come back",
                )
        self._seen = seen

    def outage(self) -> None:
        """A write of these page stores failed for a lost connection. Raises nothing."""
        self._shared.bump()
