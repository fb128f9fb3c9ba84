"""The expiry scan (:mod:`store.messaging.policies`): every ``message-expiry-scan-period`` ms,
the messages in memory whose expiration has passed are moved to their expiry address or
removed, without waiting for a receive to come to them.

The scan pops the manager's heap of expirations (:meth:`Policies.due`): its cost is what
expired (a log factor aside), whatever the depth, and it reads no page: a paged message is
checked when a receive reads it back. The messages a load recovered enter the heap on the
scan's first run, a bounded slice at a time under the lock (:data:`LOAD_SLICE`), so a restart
does not wait for them; a message recovered that a receive meets first is checked there.

A message is moved from each queue that holds it ready or scheduled; one delivered (in flight)
or held by a transaction is left to its ack, cancel or rollback (a receive after a cancel
checks it again).

Thread-safety: :class:`ExpiryScanner` runs one daemon thread per manager; :func:`expire_due`
may be called from any thread (it takes the manager's lock, and moves without it).
"""

from __future__ import annotations

import logging
import threading
from typing import Final

from store.errors import JournalClosedError, StoreError
from store.messaging.moves import Creator, move_away
from store.messaging.queues import MessageQueue
from store.messaging.state import ManagerState

__all__ = ["LOAD_SLICE", "ExpiryScanner", "expire_due"]

log = logging.getLogger("store.messaging.policies")

#: Recovered messages looked at per lock hold on the scan's first run.
LOAD_SLICE: Final = 20_000


def watch_loaded(st: ManagerState) -> None:
    """Without the lock: put the recovered messages that have an expiration on the heap, a
    slice at a time. Raises nothing (a manager closed meanwhile ends it)."""
    below = st.policies.recovered_below  # those sent since are on the heap already
    with st.lock:
        ids = [mid for mid in st.messages if mid < below]
    for start in range(0, len(ids), LOAD_SLICE):
        with st.lock:
            if st.closed:
                return
            for mid in ids[start : start + LOAD_SLICE]:
                stored = st.messages.get(mid)
                if stored is not None and stored.position is None:
                    expiration = stored.expiration
                    if expiration:
                        st.policies.watch(mid, expiration)


def expire_due(st: ManagerState, creator: Creator) -> int:
    """Without the lock: move or remove every watched message expired by now. Returns how
    many refs were moved or removed. Raises what a move raises (the message stays)."""
    if not st.policies.loaded_watched:
        watch_loaded(st)
        st.policies.loaded_watched = True
    claimed: list[tuple[MessageQueue, int]] = []
    with st.lock:
        st.check_ready()
        now = st.clock()
        for mid in st.policies.due(now):
            stored = st.messages.get(mid)
            if stored is None:
                continue  # acknowledged since
            for qid in stored.queue_ids():
                queue = st.queues_by_id.get(qid)
                if queue is not None and queue.claim(mid) is not None:
                    claimed.append((queue, mid))
    failed: Exception | None = None
    for queue, mid in claimed:
        try:
            move_away(st, creator, queue, mid, expiry=True)
        except Exception as exc:  # each on its own: the others still move
            failed = failed or exc
    if failed is not None:
        raise failed
    return len(claimed)


class ExpiryScanner:
    """The thread that runs :func:`expire_due` every ``period_ms`` (after one
    :func:`watch_loaded`) until :meth:`stop`."""

    def __init__(self, st: ManagerState, creator: Creator, period_ms: int) -> None:
        self._st = st
        self._creator = creator
        self._period = period_ms / 1000
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="store-expiry-scan", daemon=True)

    def start(self) -> None:
        """Start the thread. Raises nothing."""
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and wait for it (a scan in progress finishes its move). Raises
        nothing."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            try:
                expire_due(self._st, self._creator)
            except JournalClosedError:
                return
            except StoreError as exc:  # the store is away: the next period tries again
                log.warning("expiry scan: %s", exc)
            except Exception:  # a bug must not end the scan for the manager's life
                log.exception("expiry scan failed; trying again in the next period")
