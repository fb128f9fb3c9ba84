"""The worker process of ``store perf``'s crash run, and the parent's side of it.

The parent (:func:`run_killed_worker`) starts ``python -m store.perf.messaging_worker FD``,
writes the pickled :class:`WorkerPlan` to its standard input, and reads lines from the pipe
whose write end is ``FD`` in the worker:

=================  ===============================================================
line               meaning
=================  ===============================================================
``ready``          the store is loaded and the destinations exist; the workload starts
``s QUEUE ID``     the send of message ``ID`` to ``QUEUE`` is acknowledged (durable)
``r QUEUE ID``     message ``ID`` was received from ``QUEUE``; its ack is about to be called
``a QUEUE ID``     the ack of message ``ID`` on ``QUEUE`` is acknowledged (durable)
``error TEXT``     the workload failed (the worker exits with status 1)
=================  ===============================================================

Each line is written with one ``write`` after the call it reports returned, so a line cut by
the kill was never complete and is ignored. The parent kills the worker with SIGKILL
``kill_after`` seconds after ``ready``; a worker never killed stops by itself after
``max_seconds``.

Thread-safety: :func:`run_killed_worker` may run in any thread; it owns its process and
reader thread.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import store
from store.config import StoreConfig
from store.errors import StoreError
from store.messaging import StorageManager
from store.perf.messaging_workload import Ledger, Workload, WorkloadSpec, ensure_destinations
from store.store import open_store

__all__ = ["KilledWorker", "WorkerPlan", "run_killed_worker"]

_READY_TIMEOUT = 120.0  # seconds for the worker to import, open and load the store
_KINDS = {"s": "send", "r": "receive", "a": "ack"}


@dataclass(frozen=True, kw_only=True)
class WorkerPlan:
    """What the worker runs: the store, the workload, its seed, and a time limit."""

    config: StoreConfig
    spec: WorkloadSpec
    seed: int
    max_seconds: float = 600.0


@dataclass(frozen=True, kw_only=True)
class KilledWorker:
    """One worker run: seconds from ready to the kill, the acks reported, whether it was
    really killed (False: it ended by itself first)."""

    ran_seconds: float
    sends: int
    acks: int
    killed: bool
    load_seconds: float  #: the worker's own load of the store, from start to ready


def run_killed_worker(plan: WorkerPlan, *, kill_after: float, ledger: Ledger) -> KilledWorker:
    """Run the workload in a worker process and kill it with SIGKILL ``kill_after`` seconds
    after it is ready; every acknowledgement it reported goes into ``ledger``.

    Returns the :class:`KilledWorker`. Raises StoreError when the worker fails before the
    kill (its report or the tail of its standard error in the message) or is not ready in
    time.
    """
    read_fd, write_fd = os.pipe()
    env = dict(os.environ)
    # The worker runs this very code, whatever is installed.
    root = os.path.dirname(os.path.dirname(os.path.abspath(store.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "store.perf.messaging_worker", str(write_fd)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        pass_fds=(write_fd,),
        env=env,
    )
    os.close(write_fd)
    ready = threading.Event()
    state: dict[str, object] = {"sends": 0, "acks": 0, "error": None}
    reader = threading.Thread(
        target=_read, args=(read_fd, ledger, ready, state), name="store-perf-reader", daemon=True
    )
    reader.start()
    stderr_tail = b""
    killed = False
    try:
        assert proc.stdin is not None
        proc.stdin.write(pickle.dumps(plan))
        proc.stdin.close()
        if not ready.wait(_READY_TIMEOUT) or state["error"] is not None:
            proc.kill()
            raise StoreError(_failure("the perf worker did not get ready", state, proc))
        ready_at = time.monotonic()
        load_seconds = ready_at - started
        try:
            proc.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            killed = True
        ran = time.monotonic() - ready_at
    finally:
        if proc.poll() is None:
            proc.kill()
        assert proc.stderr is not None
        stderr_tail = proc.stderr.read()[-2000:]
        proc.wait()
        reader.join()
    if not killed and (proc.returncode != 0 or state["error"] is not None):
        state["stderr"] = stderr_tail
        raise StoreError(_failure("the perf worker failed before it was killed", state, proc))
    return KilledWorker(
        ran_seconds=ran,
        sends=int(state["sends"]),  # type: ignore[call-overload]
        acks=int(state["acks"]),  # type: ignore[call-overload]
        killed=killed,
        load_seconds=load_seconds,
    )


def _failure(what: str, state: dict[str, object], proc: subprocess.Popen[bytes]) -> str:
    detail = state.get("error") or state.get("stderr") or f"exit status {proc.poll()}"
    if isinstance(detail, bytes):
        detail = detail.decode(errors="replace").strip()
    return f"{what}: {detail}"


def _read(fd: int, ledger: Ledger, ready: threading.Event, state: dict[str, object]) -> None:
    """The reader thread: lines of the pipe into ``ledger`` until end of file."""
    with os.fdopen(fd, "rb") as pipe:
        for raw in pipe:
            if not raw.endswith(b"\n"):
                break  # cut by the kill: never reported
            line = raw[:-1].decode()
            kind, _, rest = line.partition(" ")
            if kind in _KINDS:
                queue, _, mid = rest.partition(" ")
                ledger.record(_KINDS[kind], queue, int(mid))
                key = {"s": "sends", "a": "acks"}.get(kind)
                if key is not None:
                    state[key] = int(state[key]) + 1  # type: ignore[call-overload]
            elif kind == "ready":
                ready.set()
            elif kind == "error":
                state["error"] = rest
                ready.set()
    ready.set()  # end of file: whoever waits for ready sees the outcome


def _worker(fd: int) -> int:
    """The worker's body (see the module docstring). Returns the exit status."""
    plan: WorkerPlan = pickle.load(sys.stdin.buffer)
    lock = threading.Lock()

    def say(line: str) -> None:
        data = (line + "\n").encode()
        with lock:
            os.write(fd, data)

    try:
        with StorageManager(open_store(plan.config)) as sm:
            sm.load()
            ensure_destinations(sm, plan.spec)
            work = Workload(
                sm,
                plan.spec,
                seed=plan.seed,
                report=lambda kind, queue, mid: say(f"{kind[0]} {queue} {mid}"),
            )
            say("ready")
            work.start()
            deadline = time.monotonic() + plan.max_seconds
            while not work.errors and time.monotonic() < deadline:
                time.sleep(0.05)
            work.stop()
            work.join()
    except Exception as exc:
        say(f"error {type(exc).__name__}: {exc}".replace("\n", " "))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_worker(int(sys.argv[1])))
