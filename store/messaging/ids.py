"""The id generator: message, queue, address, transaction and duplicate-id record ids, from one
counter persisted in the bindings journal in batches (reference §3.3).

How ids never repeat or go back, across clean stops and crashes:

1. Ids are handed out from a *reserved range* ``[next, limit)``. Before the first id at or past
   ``limit`` is handed out, an ID_COUNTER_RECORD (type 24) holding the new ``limit`` is added
   to the bindings journal and made durable (``flush``, whatever the sync settings say), so a
   crash can only lose ids that were never used.
2. A clean stop (:meth:`IdGenerator.close`) records the exact next id, so a restart continues
   where the stop left off; a crash continues from the last reserved ``limit``, skipping at most
   one batch.
3. At load, the next id is the largest recorded value, and past every record id and
   transaction id either journal still holds (a defence against a counter record written with
   ``journal-datasync`` off and lost). Every counter record but the newest is deleted then, and
   each new counter record deletes its predecessor once it is durable, so at most two are live.

The batch (:data:`DEFAULT_BATCH`, 10,000) trades one synced bindings write per batch against
the ids a crash skips; Artemis uses 2^31-1, which makes every crash skip two billion ids.

Thread-safety: every method may be called from any thread (one lock; a reservation holds it
for one bindings sync).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Final

from store.errors import StoreError
from store.journal.api import MAX_ID, Journal
from store.messaging.records import IdCounterRecord

__all__ = ["DEFAULT_BATCH", "IdGenerator"]

#: Ids reserved by one ID_COUNTER_RECORD.
DEFAULT_BATCH: Final = 10_000

log = logging.getLogger(__name__)


class IdGenerator:
    """Hands out increasing ids persisted in ``journal`` (see the module docstring).

    Call :meth:`recover` once, after the bindings journal's load, before the first
    :meth:`next_id`. Raises ValueError for a batch below 1.
    """

    def __init__(self, journal: Journal, *, batch: int = DEFAULT_BATCH) -> None:
        if batch < 1:
            raise ValueError(f"id batch must be at least 1, not {batch}")
        self._journal = journal
        self._batch = batch
        self._lock = threading.Lock()
        self._next = 1
        self._limit = 1
        self._counter_ids: list[int] = []
        self._recovered = False
        self._closed = False

    def recover(
        self,
        counters: Iterable[tuple[int, IdCounterRecord]],
        highest_seen: int,
        *,
        sweep: bool = True,
    ) -> int:
        """Set the counter from the loaded ``(record id, record)`` counter records and the
        highest record or transaction id either journal holds; delete every counter record but
        the newest (``sweep=False``, a read-only load: only count them). Returns how many are
        stale. Raises StoreError when called twice, and
        what the journal's ``append_delete`` raises."""
        with self._lock:
            if self._recovered:
                raise StoreError("the id generator is already recovered")
            self._recovered = True
            loaded = list(counters)
            recorded = max((c.next_id for _, c in loaded), default=1)
            self._next = self._limit = max(recorded, highest_seen + 1, 1)
            newest = max(loaded, key=lambda rc: rc[1].next_id, default=None)
            stale = [rid for rid, _ in loaded if newest is None or rid != newest[0]]
            for rid in stale if sweep else ():
                self._journal.append_delete(rid)
            self._counter_ids = [] if newest is None else [newest[0]]
            log.debug("id generator recovered: next=%d, stale_counters=%d", self._next, len(stale))
            return len(stale)

    def next_id(self) -> int:
        """The next id, strictly greater than every id handed out before (also before a
        restart). Raises StoreError before ``recover`` or after ``close``, and what the
        bindings journal raises when a new batch cannot be recorded."""
        with self._lock:
            if not self._recovered or self._closed:
                state = "closed" if self._closed else "not recovered yet"
                raise StoreError(f"the id generator is {state}")
            if self._next >= self._limit:
                # The counter record takes the first id of the new range for its own record id.
                self._record(self._next + 1 + self._batch)
            if self._next >= MAX_ID:
                raise StoreError("the id generator ran out of signed 64-bit ids")
            value = self._next
            self._next += 1
            return value

    @property
    def peek(self) -> int:
        """The id the next call of ``next_id`` would return (a new batch aside). Raises
        nothing."""
        with self._lock:
            return self._next

    def _record(self, limit: int) -> None:
        # Lock held. Write the new counter durably before any id of its range is used, then
        # delete its predecessors (their values are smaller, so losing the delete is harmless).
        record_id = self._next
        self._next += 1
        self._journal.append_add(
            record_id, IdCounterRecord.record_type, IdCounterRecord(limit).encode()
        )
        self._journal.flush()
        for old in self._counter_ids:
            self._journal.append_delete(old)
        self._counter_ids = [record_id]
        self._limit = limit

    def close(self) -> None:
        """Record the exact next id (a clean stop) and refuse further ids. Idempotent; a no-op
        before ``recover``. Raises what the bindings journal raises."""
        with self._lock:
            if self._closed or not self._recovered:
                self._closed = True
                return
            self._closed = True
            # The record's own id is the last id this run uses; the next run starts after it.
            self._record(self._next + 1)
