"""What ``store ha run`` does, as library calls: go live in a role, then a steady writer that
sends durable messages until it is stopped or the live lock is lost (docs/ha.md).

::

    runner = NodeRunner(config, "backup", acknowledged=print)
    signal.signal(signal.SIGTERM, lambda *_: runner.stop())   # or stop() from another thread
    result = runner.run()        # waits to go live, writes until stopped: NodeRunResult
                                 # raises StoreLockedError (timeout), LockLostError (lost)

:class:`NodeRunner` is the whole node (``store ha run`` is one call of it); going live
(:func:`store.ha.go_live`, the HA contract's) and :func:`steady_writer` are its two halves.

The writer sends real messages through the storage manager (to the queue ``store-ha.smoke``,
created on first use), not raw journal records: a pair an operator tried by hand is then a
store like any other, which ``store data verify`` finds clean and a broker can load. The
messages stay in the queue: they are the evidence that a takeover lost nothing
acknowledged (a smoke test runs minutes, and each waiting message costs about 1.4 KB).

Thread-safety: :func:`go_live` and :func:`steady_writer` run on the caller's thread; ``stop``
may be set from any thread. :class:`NodeRunner` says its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from store.errors import LockLostError, StoreLockedError
from store.ha import go_live, open_node_manager
from store.messaging import Message, StorageManager
from store.store import open_store

if TYPE_CHECKING:
    from store.config import StoreConfig
    from store.ha.api import Lease, NodeManager

__all__ = ["SMOKE_QUEUE", "NodeRunResult", "NodeRunner", "steady_writer"]

#: How often a node waiting to go live looks whether it was asked to stop (seconds).
_STOP_POLL = 0.05

#: The address and (anycast) queue the steady writer sends to.
SMOKE_QUEUE = "store-ha.smoke"


def steady_writer(
    config: StoreConfig,
    nm: NodeManager,
    *,
    acknowledged: Callable[[int], None],
    stop: threading.Event,
    payload: bytes = b"x" * 64,
    pause: float = 0.0,
) -> int:
    """Open the store through the live ``nm`` under a storage manager, load it, and send
    messages with body ``payload`` to :data:`SMOKE_QUEUE` (``sync=True``) until ``stop`` is
    set, calling ``acknowledged(message_id)`` after each durable send. Returns how many were
    sent. Raises LockLostError when the live lock is lost (a fenced write, or the node
    manager's notice before a write on the file store, whose writes cannot be fenced), and
    the store's errors."""
    lost = threading.Event()
    nm.on_lock_lost(lost.set)
    written = 0
    with StorageManager(open_store(config, node_manager=nm)) as sm:
        sm.load()
        if SMOKE_QUEUE not in {a.name for a in sm.addresses()}:
            sm.create_address(SMOKE_QUEUE)
        if SMOKE_QUEUE not in {q.name for q in sm.queues()}:
            sm.create_queue(SMOKE_QUEUE, address=SMOKE_QUEUE)
        while not stop.is_set():
            if lost.is_set() or not nm.is_live:
                raise LockLostError("the live lock was lost: this node stopped writing")
            mid = sm.send(Message(SMOKE_QUEUE, payload), sync=True)
            assert mid is not None  # its queue exists: never dropped
            acknowledged(mid)
            written += 1
            if pause:
                stop.wait(pause)
    return written


@dataclass(frozen=True, slots=True)
class NodeRunResult:
    """How :meth:`NodeRunner.run` ended when it was stopped: ``live`` is False when the node
    stopped before going live; ``written`` counts the messages sent and acknowledged.
    Immutable."""

    role: str
    live: bool
    written: int


class NodeRunner:
    """One node of a shared-store HA pair (docs/ha.md), run by :meth:`run`: open the node
    manager, wait to go live in ``role`` (:func:`go_live`), then run the steady writer
    (:func:`steady_writer`) until :meth:`stop` is called or the live lock is lost; the node
    manager is closed (every lock it holds released) however it ends.

    ``timeout`` bounds the wait to go live (seconds; None: forever), ``pause`` the time
    between sends. The hooks run on :meth:`run`'s thread: ``on_waiting(node_id)`` before the
    wait, ``on_live(lease, seconds_waited)`` once live, ``acknowledged(message_id)`` after each
    durable send. Each message's body names the role, the generation and the holder, so what
    each node wrote can be told apart.

    Stopping: :meth:`stop` (or a KeyboardInterrupt on :meth:`run`'s thread, e.g. Ctrl-C) ends a
    wait at once — the node manager is closed, which ends it — and lets a live node finish its
    current send and stop.

    Thread-safety: :meth:`run` once, on one thread (it waits on a helper thread of its own);
    :meth:`stop` from any thread or a signal handler (it only sets an event).
    """

    def __init__(
        self,
        config: StoreConfig,
        role: str,
        *,
        timeout: float | None = None,
        pause: float = 0.0,
        on_waiting: Callable[[str], None] | None = None,
        on_live: Callable[[Lease, float], None] | None = None,
        acknowledged: Callable[[int], None] | None = None,
    ) -> None:
        self.config = config
        self.role = role
        self.timeout = timeout
        self.pause = pause
        self._on_waiting = on_waiting
        self._on_live = on_live
        self._acknowledged = acknowledged
        self._stop = threading.Event()
        self._written = 0

    def stop(self) -> None:
        """Ask the node to stop: a node still waiting stops waiting, a live one finishes its
        current send. Returns at once; raises nothing."""
        self._stop.set()

    def run(self) -> NodeRunResult:
        """Run the node (class docstring) until it is stopped.

        Returns the :class:`NodeRunResult`. Raises StoreLockedError naming the holder when
        ``timeout`` passes before the node goes live, LockLostError when the live lock is
        lost while writing (the backup has taken over), ConfigError for an unknown role or a
        store HA cannot use, and what the store raises.
        """
        nm = open_node_manager(self.config)
        try:
            if self._on_waiting is not None:
                self._on_waiting(nm.node_id)
            started = time.monotonic()
            if not self._wait_live(nm):
                return NodeRunResult(self.role, live=False, written=0)
            lease = nm.lease
            if self._on_live is not None:
                self._on_live(lease, time.monotonic() - started)
            self._write(nm, f"{self.role} generation {lease.generation} {lease.holder}".encode())
            return NodeRunResult(self.role, live=True, written=self._written)
        finally:
            nm.close()

    def _wait_live(self, nm: NodeManager) -> bool:
        """Go live on a helper thread while this one watches for a stop. Returns True when
        live, False when stopped first; raises what :func:`go_live` raises (a timeout as
        StoreLockedError)."""
        failed: list[BaseException] = []
        done = threading.Event()

        def wait() -> None:
            try:
                go_live(nm, self.role, timeout=self.timeout)
            except BaseException as exc:  # handed to run()'s thread, raised there
                failed.append(exc)
            finally:
                done.set()

        helper = threading.Thread(target=wait, name=f"store-ha-{self.role}-wait", daemon=True)
        helper.start()
        try:
            while not done.wait(_STOP_POLL):
                if self._stop.is_set():
                    break
        except KeyboardInterrupt:
            self._stop.set()
        if not done.is_set():
            nm.close()  # ends the wait (go_live raises LockLostError on the helper)
            helper.join()
            return False
        helper.join()
        if failed:
            exc = failed[0]
            if isinstance(exc, TimeoutError):
                holder = nm.lease.holder
                raise StoreLockedError(
                    f"{exc} after {self.timeout} s (live lock held by {holder or 'nobody'})",
                    holder=holder,
                ) from exc
            raise exc
        return True

    def _write(self, nm: NodeManager, payload: bytes) -> None:
        def acknowledged(message_id: int) -> None:
            self._written += 1
            if self._acknowledged is not None:
                self._acknowledged(message_id)

        try:
            steady_writer(
                self.config,
                nm,
                acknowledged=acknowledged,
                stop=self._stop,
                pause=self.pause,
                payload=payload,
            )
        except KeyboardInterrupt:  # Ctrl-C while writing is a stop, as stop() is
            self._stop.set()
        except LockLostError as exc:
            raise LockLostError(
                f"lost the live lock; stopped writing: {exc}",
                hint="the backup has taken over; restart this node as the backup",
            ) from exc
