"""The file store's critical-error report to its node manager (docs/ha.md): a file-system seam
that passes every call through and tells the node manager when a write could not be done.

A file store opened with a node manager (:func:`store.open_store`) does its file I/O through
:class:`WatchedFileSystem` over the seam it would have used. A ``StoreIOError`` from any call
that changes the store's files — ``pwrite``, ``datasync``, ``allocate``, ``truncate`` of a
handle, opening a file for writing, ``rename``, ``remove``, ``fsync_dir``, ``makedirs`` — is a
critical I/O error, as Artemis counts one: the part that failed (a journal's writer, the page
flusher, a large body) refuses writes from then on, so the node calls
:meth:`~store.ha.api.NodeManager.store_failed` and gives the live lock up for the backup.
After that report every such call through this seam raises StoreIOError at once, so the parts
that still work (another address's pages, a large body) write nothing more under a lock the
backup may already hold: file writes have no fence, and this is the nearest thing to one.

Reads (``pread``, ``size``, ``listdir``, ``exists``, opening read-only) pass straight through
and report nothing: a file that cannot be read is corruption or an operator's business, not a
store that can no longer write. Read-only opens return the inner handle itself, so readers keep
their fast paths on real files (large bodies read with ``preadv``).

Not seen here: records that a ``MAPPED`` or ``ASYNCIO`` journal writes through its own
descriptors (the seam opens, pre-allocates and syncs their files, but a mapped copy or an AIO
write bypasses it). A failure there reaches the node manager only at the journal's next
operation through the seam (its next file); an application should also stop on the
StoreIOError its own writes get.

Thread-safety: as the inner seam; the failure flag is set once, under a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from store.errors import StoreIOError
from store.fs import FileHandle, FileSystem

__all__ = ["WatchedFileSystem", "WatchedHandle"]


class WatchedFileSystem:
    """``inner`` with its write-side failures reported to ``on_failure(reason)`` once (module
    docstring). ``native`` is the inner seam's: the journal keeps its ``journal-type``."""

    def __init__(self, inner: FileSystem, on_failure: Callable[[str], None]) -> None:
        self.inner = inner
        self._on_failure = on_failure
        self._guard = threading.Lock()
        #: The first write-side failure (None: none yet); read without the lock.
        self.failed: StoreIOError | None = None

    @property
    def native(self) -> bool:
        return self.inner.native

    def check(self, path: str) -> None:
        """Before a write-side call: refuse it once a write failed. Raises StoreIOError."""
        first = self.failed
        if first is not None:
            raise StoreIOError(
                f"refused: an earlier write of this store failed ({first}) and this node "
                "gave up the live lock",
                path=path,
                hint="restart this node; the backup serves the store now",
            )

    def report(self, exc: StoreIOError) -> None:
        """After a write-side call failed with ``exc``: remember it and tell the node
        manager, the first time only. Returns None; raises what ``on_failure`` raises."""
        with self._guard:
            first = self.failed is None
            if first:
                self.failed = exc
        if first:
            self._on_failure(str(exc))

    def open(self, path: str, *, create: bool = False, read_only: bool = False) -> FileHandle:
        if read_only:
            return self.inner.open(path, read_only=True)
        self.check(path)
        try:
            return WatchedHandle(self.inner.open(path, create=create), self)
        except StoreIOError as exc:
            self.report(exc)
            raise

    def rename(self, src: str, dst: str) -> None:
        self.check(src)
        try:
            self.inner.rename(src, dst)
        except StoreIOError as exc:
            self.report(exc)
            raise

    def remove(self, path: str) -> None:
        self.check(path)
        try:
            self.inner.remove(path)
        except StoreIOError as exc:
            self.report(exc)
            raise

    def fsync_dir(self, path: str) -> None:
        self.check(path)
        try:
            self.inner.fsync_dir(path)
        except StoreIOError as exc:
            self.report(exc)
            raise

    def listdir(self, path: str) -> list[str]:
        return self.inner.listdir(path)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def makedirs(self, path: str) -> None:
        self.check(path)
        try:
            self.inner.makedirs(path)
        except StoreIOError as exc:
            self.report(exc)
            raise


class WatchedHandle:
    """A handle of :class:`WatchedFileSystem`: its writes are checked and reported there."""

    __slots__ = ("_fs", "inner", "path")

    def __init__(self, inner: FileHandle, fs: WatchedFileSystem) -> None:
        self.inner = inner
        self.path = inner.path
        self._fs = fs

    def pwrite(self, data: bytes | bytearray | memoryview, offset: int) -> None:
        self._fs.check(self.path)
        try:
            self.inner.pwrite(data, offset)
        except StoreIOError as exc:
            self._fs.report(exc)
            raise

    def pread(self, size: int, offset: int) -> bytes:
        return self.inner.pread(size, offset)

    def datasync(self) -> None:
        self._fs.check(self.path)
        try:
            self.inner.datasync()
        except StoreIOError as exc:
            self._fs.report(exc)
            raise

    def size(self) -> int:
        return self.inner.size()

    def allocate(self, size: int) -> None:
        self._fs.check(self.path)
        try:
            self.inner.allocate(size)
        except StoreIOError as exc:
            self._fs.report(exc)
            raise

    def truncate(self, size: int) -> None:
        self._fs.check(self.path)
        try:
            self.inner.truncate(size)
        except StoreIOError as exc:
            self._fs.report(exc)
            raise

    def close(self) -> None:
        self.inner.close()
