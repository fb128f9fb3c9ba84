"""The node manager's contract (docs/ha.md): the live/backup lock two processes sharing one store
use to form a primary/backup pair.

:class:`NodeManager` is the base of both implementations (:mod:`store.ha.database`,
:mod:`store.ha.files`). It owns what they share: the node's role in the activation protocol,
the lock-lost callbacks (run once per loss, on the node manager's own thread, whoever noticed
the loss first), and waiting with timeouts. The subclasses own the locks themselves.

**A store that cannot write gives the live lock up** (docs/ha.md#store-failure; Artemis's critical
I/O error listener, which stops the server and so releases its lock): the store a node serves
reports a failed write through :meth:`NodeManager.store_failed` — a database store through its
write fence (:meth:`store.ha.database.LeaseFence.after_failure`), a file store through the
file-system seam that :func:`store.open_store` wraps (:mod:`store.ha.watch`). The node stops
renewing at once (``is_live`` turns False, so every fenced write raises LockLostError), the
``on_lock_lost`` callbacks run on the node manager's thread, and then the live lock is
released (the database lease, or the file lock), so the backup goes live within one of its
tries instead of waiting for an application restart. The release comes *after* the callbacks
on purpose: a callback is where the application stops writing (Artemis stops the server
before its lock goes), which matters on the file store, whose writes are not fenced.

States (docs/ha.md, reference §4.10; the letter is what the database row / ``server.lock`` byte
holds):

================  ======  =============================================================
state             letter  meaning
================  ======  =============================================================
``ACTIVE``        ``L``   a node has gone live; a backup takes over when the lock frees
``FAILING_BACK``  ``F``   a primary is starting (waiting for the lock): backups wait
``PAUSED``        ``P``   the live node stepped down on purpose (failback): backups wait
``NOT_STARTED``   ``N``   no node has gone live yet (also a NULL row, an empty file)
================  ======  =============================================================

Thread-safety: every public method of a :class:`NodeManager` may be called from any thread;
``close`` is idempotent. :class:`Lease` is immutable.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from store.errors import ConfigError, LockLostError, StoreIOError, StoreUnavailableError

__all__ = [
    "ACTIVE",
    "FAILING_BACK",
    "NOT_STARTED",
    "PAUSED",
    "STATE_LETTERS",
    "Deadline",
    "Lease",
    "NodeManager",
    "go_live",
    "state_of_letter",
]

_log = logging.getLogger(__name__)

ACTIVE: Final = "ACTIVE"
FAILING_BACK: Final = "FAILING_BACK"
PAUSED: Final = "PAUSED"
NOT_STARTED: Final = "NOT_STARTED"
#: State → the letter stored (Artemis's letters).
STATE_LETTERS: Final = {ACTIVE: "L", FAILING_BACK: "F", PAUSED: "P", NOT_STARTED: "N"}
_LETTER_STATES: Final = {letter: state for state, letter in STATE_LETTERS.items()}


def state_of_letter(letter: str | None) -> str:
    """The state a stored letter means; anything unknown (NULL, ``'0'``, blank) is
    NOT_STARTED. Returns the state name; raises nothing."""
    return _LETTER_STATES.get((letter or "").strip().upper(), NOT_STARTED)


@dataclass(frozen=True, slots=True)
class Lease:
    """The live lock as last read: ``holder`` (None when nobody holds it: released, or expired
    by the database clock — a "zombie" lease reads as not held), ``generation`` (the fencing
    token: it rises at every acquisition and is kept across releases) and ``expires_at_ms``
    (epoch ms by the database clock; None on the file store and when released).

    Thread-safety: immutable.
    """

    holder: str | None
    generation: int
    expires_at_ms: int | None


class Deadline:
    """A monotonic deadline for ``timeout`` seconds (None: never). Thread-safety: immutable."""

    __slots__ = ("_at",)

    def __init__(self, timeout: float | None) -> None:
        self._at = None if timeout is None or timeout < 0 else time.monotonic() + timeout

    def left(self) -> float | None:
        """Seconds left (None: unbounded, never negative)."""
        return None if self._at is None else max(0.0, self._at - time.monotonic())

    def passed(self) -> bool:
        """Whether the deadline has passed."""
        return self._at is not None and time.monotonic() >= self._at


class NodeManager(ABC):
    """The live lock of one store, for one node (process) of a primary/backup pair.

    Subclasses implement the lock operations (``_try_live``, ``_renew_or_check``, …); this base
    implements the activation protocol and the loss notification. The node manager's own
    thread (a daemon started with the first lock) renews or watches the locks every
    :attr:`_tick_seconds` and runs the lock-lost callbacks.

    Thread-safety: all public methods may be called from any thread.
    """

    #: "database" or "file".
    kind: str = ""

    def __init__(self, *, poll_seconds: float, tick_seconds: float) -> None:
        self._poll = poll_seconds
        self._tick_seconds = tick_seconds
        self._mutex = threading.RLock()
        self._live = False
        self._backup = False
        self._closed = False
        self._callbacks: list[Callable[[], None]] = []
        self._loss_pending = False
        self._loss_reason = ""
        # Set by store_failed: the live lock is released once the callbacks ran (or at close).
        self._release_pending = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what subclasses implement ---------------------------------------------------------

    @property
    @abstractmethod
    def node_id(self) -> str:
        """The pair's node id: a UUID, the same for both nodes, fixed at first start."""

    @property
    @abstractmethod
    def state(self) -> str:
        """The shared state: ACTIVE, PAUSED, FAILING_BACK or NOT_STARTED (read each time)."""

    @property
    @abstractmethod
    def lease(self) -> Lease:
        """The live lock as it is now (read each time); see :class:`Lease`."""

    @abstractmethod
    def _set_state(self, state: str) -> None:
        """Store ``state``."""

    @abstractmethod
    def _try_live(self) -> bool:
        """Try the live (primary) lock once, without waiting; True when now held."""

    @abstractmethod
    def _release_live(self) -> None:
        """Give the live lock back (no error when not held)."""

    @abstractmethod
    def _try_backup(self) -> bool:
        """Try the backup lock once; True when now held."""

    @abstractmethod
    def _release_backup(self) -> None:
        """Give the backup lock back (no error when not held)."""

    @abstractmethod
    def _tick(self) -> None:
        """On the node manager's thread: renew (or check) the held locks; call
        :meth:`_lock_lost` when the live lock is gone."""

    @abstractmethod
    def _dispose(self) -> None:
        """Release resources (connections, files) after the locks were released."""

    def seq_floor(self) -> int:
        """The least journal ``seq`` a database store opened now through this node manager
        uses (0: no floor). Returns it; raises nothing."""
        return 0

    def fence(self) -> Callable[[Any], None] | None:
        """The check a database store opened with this node manager runs in every write
        batch's transaction (None: this back-end cannot fence writes). Returns the callable;
        raises LockLostError when not live."""
        return None

    # -- the protocol ----------------------------------------------------------------------

    @property
    def is_live(self) -> bool:
        """Whether this node holds the live lock (as far as it knows: a loss noticed by the
        renew or a write's fence makes it False)."""
        return self._live

    def start_primary(self, timeout: float | None = None) -> None:
        """Become the live node: write FAILING_BACK (so backups wait), take the live lock
        (trying every poll interval), start renewing it, write ACTIVE.

        ``timeout`` in seconds (None: the configured acquisition timeout, forever by default).
        A store that does not answer is waited for like a held lock (logged). Returns when
        live. Raises TimeoutError when the timeout passes, LockLostError after :meth:`close`.
        """
        self._check_open()
        if self._live:
            return
        deadline = Deadline(self._timeout(timeout))
        while not self._attempt(self._announce_start):
            self._wait_poll(deadline, "the store to answer")
        while not self._attempt(self._try_live):
            self._wait_poll(deadline, "the live lock")
        self._went_live()
        self._set_state(ACTIVE)

    def start_backup(self, timeout: float | None = None) -> None:
        """Take the backup lock (one backup per pair waits at a time), trying every poll
        interval. Returns when held. Raises as :meth:`start_primary`."""
        self._check_open()
        if self._backup:
            return
        deadline = Deadline(self._timeout(timeout))
        while not self._attempt(self._try_backup):
            self._wait_poll(deadline, "the backup lock")
        with self._mutex:
            self._backup = True
        self._ensure_thread()

    def await_live(self, timeout: float | None = None) -> None:
        """Wait until the live node is gone, then become live: while the state is ACTIVE
        (a live node existed) try the live lock every poll interval; once taken, re-read the
        state and go live only if it is still ACTIVE (a PAUSED or FAILING_BACK state means
        the primary stepped down or is coming back: let go and keep waiting). The backup
        lock is released once live.

        Returns when live. Raises TimeoutError when ``timeout`` seconds pass, and as
        :meth:`start_primary`.
        """
        self._check_open()
        if self._live:
            return
        deadline = Deadline(self._timeout(timeout))
        while not self._attempt(self._take_over):
            self._wait_poll(deadline, "the live node to go away")
        self._went_live()
        self._set_state(ACTIVE)
        if self._backup:
            with self._mutex:
                self._backup = False
            self._release_backup()

    def _announce_start(self) -> bool:
        """A starting primary's first step: FAILING_BACK, so backups wait. Returns True."""
        self._set_state(FAILING_BACK)
        return True

    def _take_over(self) -> bool:
        """One try of a waiting backup (see :meth:`await_live`); True when live."""
        if self.state != ACTIVE or not self._try_live():
            return False
        if self.state == ACTIVE:
            return True
        self._release_live()
        return False

    def _attempt(self, step: Callable[[], bool]) -> bool:
        """Run one try of a waiting loop; a store that does not answer (StoreUnavailableError,
        StoreIOError) counts as "not yet" and is logged: a waiting node outlives an outage
        and goes live when the store answers again. Returns what ``step`` returned."""
        try:
            return step()
        except (StoreUnavailableError, StoreIOError) as exc:
            _log.warning("HA: the store does not answer; still waiting: %s", exc)
            return False

    def on_lock_lost(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once per loss of the live lock, on the node manager's thread
        (also when a write's fence noticed the loss first). An exception it raises is logged.
        Returns nothing."""
        with self._mutex:
            self._callbacks.append(callback)

    def store_failed(self, reason: str) -> None:
        """Report that the store this node serves can no longer write (a write failed with
        StoreUnavailableError / StoreIOError: the journals' writer and the page flusher refuse
        every write after one; see the module docstring). When live: stop renewing now, run
        the ``on_lock_lost`` callbacks once on the node manager's thread, then release the live
        lock (or at :meth:`close`, whichever comes first). Idempotent, callable from any thread
        (it never waits for the database or a file); returns None; raises nothing."""
        with self._mutex:
            if not self._live or self._closed:
                return
            self._release_pending = True
        self._lock_lost(f"the store can no longer write ({reason})")

    def pause(self) -> None:
        """Step down for failback: write PAUSED, stop renewing, release the live lock.
        Backups do not take over while the state is PAUSED. Returns nothing; raises
        StoreUnavailableError / StoreIOError when the state cannot be written."""
        self._check_open()
        self._set_state(PAUSED)
        with self._mutex:
            was_live, self._live = self._live, False
        if was_live:
            self._release_live()

    def close(self) -> None:
        """Stop renewing and release every lock held (the state stays as it is, so a backup
        takes over an ACTIVE pair). Idempotent; raises nothing (a lock it cannot release
        expires, or the kernel drops it)."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            live, backup = self._live, self._backup
            self._live = self._backup = False
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)
        for held, release in ((live, self._release_live), (backup, self._release_backup)):
            if held:
                try:
                    release()
                except Exception:
                    _log.warning("releasing a lock at close failed", exc_info=True)
        self._release_after_failure()
        self._dispose()

    def __enter__(self) -> NodeManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- shared machinery ------------------------------------------------------------------

    def _timeout(self, timeout: float | None) -> float | None:
        return timeout

    def _check_open(self) -> None:
        if self._closed:
            raise LockLostError("the node manager is closed")

    def _wait_poll(self, deadline: Deadline, what: str) -> None:
        if deadline.passed():
            raise TimeoutError(f"timed out waiting for {what}")
        left = deadline.left()
        pause = self._poll if left is None else min(self._poll, left)
        if self._stop.wait(pause):
            raise LockLostError("the node manager was closed while waiting")

    def _went_live(self) -> None:
        with self._mutex:
            self._live = True
            self._loss_pending = False
            self._release_pending = False  # a lock taken again is not the one given up
        self._ensure_thread()

    def _ensure_thread(self) -> None:
        with self._mutex:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name=f"store-ha-{self.kind}", daemon=True
                )
                self._thread.start()

    def _lock_lost(self, reason: str) -> None:
        """Record that the live lock is gone (from any thread); the callbacks then run on the
        node manager's thread. Idempotent per loss."""
        with self._mutex:
            if not self._live:
                return
            self._live = False
            self._loss_pending = True
            self._loss_reason = reason
        _log.error("HA: lost the live lock: %s", reason)
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._tick_seconds)
            self._wake.clear()
            if self._stop.is_set():
                break
            if not self._loss_pending:
                try:
                    self._tick()
                except Exception:
                    _log.exception("HA: the node manager's periodic check failed")
            self._notify_if_lost()

    def _notify_if_lost(self) -> None:
        with self._mutex:
            if not self._loss_pending:
                return
            self._loss_pending = False
            callbacks = list(self._callbacks)
        for callback in callbacks:
            try:
                callback()
            except Exception:
                _log.exception("HA: an on_lock_lost callback failed")
        self._release_after_failure()

    def _release_after_failure(self) -> None:
        """Release the live lock a failed store gave up (:meth:`store_failed`), once: after
        the callbacks on the node manager's thread, or at :meth:`close` if that comes first.
        A release that fails is logged (a database lease then expires; a file lock goes with
        the process)."""
        with self._mutex:
            pending, self._release_pending = self._release_pending, False
        if not pending:
            return
        try:
            self._release_live()
            _log.error("HA: released the live lock: the store can no longer write")
        except Exception:
            _log.warning("HA: releasing the live lock after a store failure failed", exc_info=True)


def go_live(nm: NodeManager, role: str, *, timeout: float | None = None) -> None:
    """Make ``nm`` live in ``role``: "primary" takes the live lock (start_primary); "backup"
    takes the backup lock and waits for the live node to go (start_backup, await_live).
    Returns when live. Raises ConfigError for another role, TimeoutError, and what the node
    manager raises. What both ``store ha run`` and ``store broker`` do before they write."""
    if role == "primary":
        nm.start_primary(timeout=timeout)
    elif role == "backup":
        nm.start_backup(timeout=timeout)
        nm.await_live(timeout=timeout)
    else:
        raise ConfigError(
            f"unknown HA role {role!r}", key="role", value=role, allowed="primary or backup"
        )
