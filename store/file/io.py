"""How flushed bytes reach a journal file: ``journal-type`` NIO, MAPPED or ASYNCIO.

All three write exactly the same bytes (the format of ``store.file.format``); they differ in the
system calls and in what "durable" waits for:

======== ================================================ =========================================
type     write                                            durable after
======== ================================================ =========================================
NIO      ``pwrite`` through the file-system seam          ``fdatasync`` (skipped without datasync)
MAPPED   copy into a shared ``mmap`` of the whole file    ``msync`` of the mapping
ASYNCIO  Linux native AIO (python-libaio) on an           the AIO completion: the file is opened
         ``O_DIRECT`` descriptor, block-aligned buffers   ``O_DIRECT | O_DSYNC`` when datasync is on
======== ================================================ =========================================

ASYNCIO needs block-aligned offsets and lengths, so the writer pads each flush with zeros to
:attr:`IOBackend.alignment` and starts the next flush at the following boundary (the reader
skips zero padding, see the format). If libaio cannot be loaded, the file system is not a real
one (the test seam), or the journal directory refuses ``O_DIRECT`` (tmpfs), :func:`make_backend`
falls back to NIO and logs a warning, as Artemis does ("switching to NIO").

MAPPED and ASYNCIO need real descriptors; crash-simulation tests use NIO through the seam.

Thread-safety: a backend is driven by one flushing thread at a time (the writer guarantees it);
``close_segment`` may be called from the thread that recycles files, never concurrently with a
write to the same segment.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
from typing import Any

from store.errors import StoreIOError
from store.file.segments import Segment
from store.fs import FileSystem

__all__ = ["AsyncIOBackend", "IOBackend", "MappedBackend", "NIOBackend", "make_backend"]

log = logging.getLogger(__name__)


class IOBackend:
    """NIO: positional writes and ``fdatasync`` through the file-system seam."""

    name = "NIO"
    alignment = 1

    def __init__(self, fs: FileSystem, *, datasync: bool) -> None:
        self.fs = fs
        self.datasync = datasync

    def _handle(self, seg: Segment) -> Any:
        if seg.handle is None:
            seg.handle = self.fs.open(seg.path)
        return seg.handle

    def write(self, seg: Segment, offset: int, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` at ``offset``; for ASYNCIO also durable when datasync is on."""
        self._handle(seg).pwrite(data, offset)

    def sync(self, seg: Segment) -> None:
        """Make everything written to ``seg`` durable (no-op without datasync)."""
        if self.datasync:
            self._handle(seg).datasync()

    def close_segment(self, seg: Segment) -> None:
        """Release what this backend holds for ``seg`` (the seam handle stays with the segment)."""

    def close(self) -> None:
        """Release the backend."""


NIOBackend = IOBackend


class MappedBackend(IOBackend):
    """MAPPED: writes are copies into a shared mapping of the whole file; ``msync`` to sync."""

    name = "MAPPED"

    def __init__(self, fs: FileSystem, *, datasync: bool) -> None:
        super().__init__(fs, datasync=datasync)
        self._maps: dict[Segment, mmap.mmap] = {}
        # Mappings written since their last msync. The whole mapping is msync'd: measured here,
        # msync of just the written range was slower (3,100 vs 4,700 syncs/s).
        self._dirty: set[Segment] = set()

    def _map(self, seg: Segment) -> mmap.mmap:
        mm = self._maps.get(seg)
        if mm is None:
            fd = os.open(seg.path, os.O_RDWR | os.O_CLOEXEC)
            try:
                mm = mmap.mmap(fd, seg.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            except OSError as exc:
                raise StoreIOError(f"cannot map {seg.path}: {exc}", path=seg.path) from exc
            finally:
                os.close(fd)
            self._maps[seg] = mm
        return mm

    def write(self, seg: Segment, offset: int, data: bytes | bytearray | memoryview) -> None:
        mm = self._map(seg)
        mm[offset : offset + len(data)] = data
        self._dirty.add(seg)

    def sync(self, seg: Segment) -> None:
        if not self.datasync or seg not in self._dirty:
            return
        self._dirty.discard(seg)
        try:
            self._map(seg).flush()
        except OSError as exc:
            raise StoreIOError(f"cannot msync {seg.path}: {exc}", path=seg.path) from exc

    def close_segment(self, seg: Segment) -> None:
        self._dirty.discard(seg)
        mm = self._maps.pop(seg, None)
        if mm is not None:
            mm.close()

    def close(self) -> None:
        for mm in self._maps.values():
            mm.close()
        self._maps.clear()
        self._dirty.clear()


class _FileNumber:
    """What libaio's ``AIOBlock`` takes as its target: an object with ``fileno()``. One
    module-level class (a class built inside every write cost about 17 µs a write)."""

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd


class AsyncIOBackend(IOBackend):
    """ASYNCIO: libaio writes on an O_DIRECT descriptor from an aligned bounce buffer."""

    name = "ASYNCIO"

    def __init__(self, fs: FileSystem, *, datasync: bool, alignment: int, max_io: int) -> None:
        super().__init__(fs, datasync=datasync)
        import libaio  # imported here: optional, Linux only

        self._libaio = libaio
        self.alignment = alignment
        self._ctx = libaio.AIOContext(max(1, min(max_io, 4096)))
        self._fds: dict[Segment, int] = {}
        self._buf = mmap.mmap(-1, 1 << 20)  # page-aligned, grown on demand

    def _fd(self, seg: Segment) -> int:
        fd = self._fds.get(seg)
        if fd is None:
            flags = os.O_RDWR | os.O_CLOEXEC | os.O_DIRECT
            if self.datasync:
                flags |= os.O_DSYNC
            try:
                fd = os.open(seg.path, flags)
            except OSError as exc:
                raise StoreIOError(
                    f"cannot open {seg.path} for O_DIRECT: {exc}", path=seg.path
                ) from exc
            self._fds[seg] = fd
        return fd

    def write(self, seg: Segment, offset: int, data: bytes | bytearray | memoryview) -> None:
        n = len(data)
        if offset % self.alignment or n % self.alignment:
            raise StoreIOError(
                f"unaligned direct write to {seg.path} at {offset} (+{n})", path=seg.path
            )
        if n > len(self._buf):
            self._buf.close()
            self._buf = mmap.mmap(-1, (n + 0xFFFFF) & ~0xFFFFF)
        self._buf[:n] = data
        view = memoryview(self._buf)[:n]
        fd = self._fd(seg)
        libaio = self._libaio
        done: list[int] = []
        block = libaio.AIOBlock(
            libaio.AIOBLOCK_MODE_WRITE,
            target_file=_FileNumber(fd),
            buffer_list=[view],
            offset=offset,
            onCompletion=lambda _b, res, _res2: done.append(res),
        )
        try:
            self._ctx.submit([block])
            while not done:
                try:
                    self._ctx.getEvents(min_nr=1, nr=1)
                except InterruptedError:
                    # A signal arrived while waiting (a profiler, a handler of the program):
                    # the write is still in flight. Python retries its own calls after EINTR
                    # (PEP 475) and runs the handler; libaio's wait does not, so it is
                    # retried here. Before, the journal took it for a failed write and
                    # refused every write after it.
                    continue
        except OSError as exc:
            raise StoreIOError(f"AIO write to {seg.path} failed: {exc}", path=seg.path) from exc
        finally:
            view.release()
        if done[0] != n:
            code = -done[0] if done[0] < 0 else errno.EIO
            raise StoreIOError(
                f"AIO write to {seg.path} at {offset}: {os.strerror(code)} ({done[0]} of {n})",
                path=seg.path,
            )

    def sync(self, seg: Segment) -> None:
        # O_DSYNC made every completed write durable; nothing is pending.
        return

    def close_segment(self, seg: Segment) -> None:
        fd = self._fds.pop(seg, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        # Taken in one step, as close_segment pops its own: no fd is closed twice.
        fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)
        self._ctx.close()
        self._buf.close()


def direct_io_alignment(directory: str) -> int | None:
    """The smallest block size (512 or 4096) ``directory`` accepts for O_DIRECT writes, or
    None when it refuses O_DIRECT (tmpfs on older kernels, some network file systems).

    Padding each flush to this size is the space cost of ASYNCIO, so the smaller the better
    (Artemis pads to the device block size for the same reason).
    """
    probe = os.path.join(directory, ".aio-test")
    try:
        fd = os.open(probe, os.O_RDWR | os.O_CREAT | os.O_DIRECT | os.O_CLOEXEC, 0o644)
    except OSError:
        return None
    try:
        for size in (512, 4096):
            buf = mmap.mmap(-1, 4096)
            try:
                os.pwrite(fd, memoryview(buf)[:size], size)
                return size
            except OSError:
                continue
            finally:
                buf.close()
        return None
    finally:
        os.close(fd)
        try:
            os.unlink(probe)
        except OSError:
            pass


def make_backend(
    journal_type: str,
    fs: FileSystem,
    directory: str,
    *,
    datasync: bool,
    max_io: int,
) -> IOBackend:
    """The backend for ``journal_type``, falling back to NIO (with a warning) when needed."""
    kind = journal_type.upper()
    if kind == "NIO":
        return IOBackend(fs, datasync=datasync)
    if not fs.native:
        log.warning("journal-type %s needs a real file system; switching to NIO", kind)
        return IOBackend(fs, datasync=datasync)
    if kind == "MAPPED":
        return MappedBackend(fs, datasync=datasync)
    if kind == "ASYNCIO":
        try:
            import libaio  # noqa: F401
        except (ImportError, OSError) as exc:
            log.warning("libaio is not available (%s); switching to NIO", exc)
            return IOBackend(fs, datasync=datasync)
        alignment = direct_io_alignment(directory) if hasattr(os, "O_DIRECT") else None
        if alignment is not None:
            # Never below the page size: a direct write that shares a page with buffered I/O
            # (the header, a zeroed tail) is not coherent with the page cache on Linux, and a
            # later buffered read can return the stale page.
            alignment = max(alignment, mmap.PAGESIZE)
        if alignment is None:
            log.warning(
                "the journal directory %s does not support O_DIRECT/AIO; switching to NIO",
                directory,
            )
            return IOBackend(fs, datasync=datasync)
        return AsyncIOBackend(fs, datasync=datasync, alignment=alignment, max_io=max_io)
    raise ValueError(f"unknown journal type {journal_type!r}")
