"""An exclusive lock on a journal directory, so a second process cannot write the same journal.

The lock is ``fcntl.flock(LOCK_EX | LOCK_NB)`` on ``<directory>/journal.lock``. The kernel drops
it when the holder exits (also on ``kill -9``), so a crashed process never leaves a stale lock.
The holder writes ``pid``, host name and start time into the file; a process that finds the
lock taken raises :class:`~store.errors.StoreLockedError` at once, naming that holder.

flock locks belong to an open file description, so a second open in the *same* process is
refused too (two journals over one directory in one process would corrupt each other).

This is the plain exclusion lock; the shared-store HA node manager (live/backup with waiting)
is a separate component (docs/ha.md).

Thread-safety: acquire/release from one thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Iterator

from store.errors import StoreIOError, StoreLockedError

__all__ = ["LOCK_NAME", "DirectoryLock", "SharedDirectoryLock", "held_while"]

LOCK_NAME = "journal.lock"


class DirectoryLock:
    """Holds ``<directory>/journal.lock`` exclusively until :meth:`release`."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, LOCK_NAME)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock. Raises StoreLockedError if held elsewhere, StoreIOError on I/O failure."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StoreIOError(f"cannot open lock file {self.path}: {exc}", path=self.path) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise StoreLockedError(
                f"journal {os.path.dirname(self.path)} is open for writing by another process"
                + (f" ({holder})" if holder else ""),
                holder=holder or None,
                hint="stop the other process (or wait until it exits), then try again",
            ) from None
        except OSError as exc:
            os.close(fd)
            raise StoreIOError(f"cannot lock {self.path}: {exc}", path=self.path) from exc
        since = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        info = f"pid={os.getpid()} host={socket.gethostname()} since={since}\n"
        # The holder line is informational only: failing to write it must not fail the lock.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, info.encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        fd = self._fd
        self._fd = None
        if fd is not None:
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            os.close(fd)


class SharedDirectoryLock:
    """A reader's hold on ``<directory>/journal.lock``: ``flock(LOCK_SH)`` on the file opened
    read-only, so no writer can take the lock while it is held, and the file is never created
    or changed (a read-only tool leaves the directory byte for byte as it was). A directory
    without a lock file was never opened by a writer of this code, so there is nothing to
    hold: :meth:`acquire` then holds nothing."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, LOCK_NAME)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the shared lock. Raises StoreLockedError naming the holder when a writer has
        the directory, StoreIOError when the lock file cannot be opened."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreIOError(f"cannot open lock file {self.path}: {exc}", path=self.path) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd) or "another process"
            os.close(fd)
            raise StoreLockedError(
                f"journal {os.path.dirname(self.path)} is open for writing by another process"
                f" ({holder})",
                holder=holder,
                hint="stop the other process (or wait until it exits), then try again",
            ) from None
        except OSError as exc:
            os.close(fd)
            raise StoreIOError(f"cannot lock {self.path}: {exc}", path=self.path) from exc
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _read_holder(fd: int) -> str:
    try:
        return os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""


@contextlib.contextmanager
def held_while(directory: str, *, native: bool) -> Iterator[None]:
    """Hold ``directory``'s lock for the block (an offline tool that rewrites a journal); on a
    file system that is not the real one (the test seam) there is nothing to lock. Raises
    StoreLockedError when a live process holds it."""
    lock = DirectoryLock(directory) if native else None
    if lock is not None:
        lock.acquire()
    try:
        yield
    finally:
        if lock is not None:
            lock.release()
