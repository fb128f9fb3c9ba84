"""Run a worker module in a child process and kill it with SIGKILL, and reopen the store it
had open: the parts the kill -9 round tests of the storage manager share.

The worker reads a pickled payload from standard input, prints ``READY`` once loaded, then one
report line per event, each flushed at once (the kill may come at any moment).

Thread-safety: none; one test's thread (a reader thread per child is internal).
"""

from __future__ import annotations

import pickle
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import store as store_package
from store import Store, StoreConfig, StoreLockedError, open_store

__all__ = ["reopen", "run_killed"]

ROOT = Path(store_package.__file__).resolve().parent.parent


def reopen(config: StoreConfig) -> Store:
    """Open the store the killed worker had open (a database notices the dead session a
    moment later; until then the store lock is still held: wait up to 10 s)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return open_store(config)
        except StoreLockedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def run_killed(module: str, payload: object, kill_after: float) -> list[str]:
    """Run ``python -m module`` with ``payload`` pickled on its standard input, SIGKILL it
    ``kill_after`` s after it printed READY; returns its other report lines, stripped.
    AssertionError when it is not ready in 60 s or ends before the kill (its stderr shown)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.buffer.write(pickle.dumps(payload))  # type: ignore[attr-defined]
    proc.stdin.close()
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == "READY":
                ready.set()
            else:
                lines.append(line.strip())
        ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert ready.wait(60), "the worker did not get ready"
        assert proc.poll() is None, f"the worker ended: {proc.stderr.read()[-2000:]}"
        time.sleep(kill_after)
        assert proc.poll() is None, f"the worker ended: {proc.stderr.read()[-2000:]}"
        proc.send_signal(signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(10)
    return lines
