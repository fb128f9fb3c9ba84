"""The file-system seam: the only place the store calls ``os`` on the files it keeps.

Every back-end's file I/O (the file journal's files today; large messages and page files of
either back-end) goes through a :class:`FileSystem` passed in through options (never a
global), so tests can substitute a fault-injecting implementation that drops or tears unsynced
writes, crashes at the Nth sync, or raises ``ENOSPC`` / ``EIO`` on a chosen call
(docs/conventions.md#6). :class:`OsFileSystem` is the real one.

``open(path, read_only=True)`` opens for reading only: the offline readers (``store data
print``, ``verify``, ``recover``'s sources) use it, so they work on a read-only file system
and can never write by mistake; a write through such a handle fails.

Durability model the seam promises and the fault layer simulates:

- ``pwrite`` data is volatile until ``datasync`` of the same handle returns;
- creating, renaming and removing a directory entry is volatile until ``fsync_dir`` of the
  directory returns;
- ``allocate`` extends a file with zeros (volatile like a write).

Every ``OSError`` is turned into :class:`~store.errors.StoreIOError` naming the path.

Thread-safety: handles may be used from several threads for ``pwrite``/``pread`` at distinct
offsets; ``datasync`` may run concurrently with writes to later offsets.
"""

from __future__ import annotations

import errno
import os
from typing import Protocol, runtime_checkable

from store.errors import StoreIOError

__all__ = ["FileHandle", "FileSystem", "OsFileHandle", "OsFileSystem", "copy_file"]


@runtime_checkable
class FileHandle(Protocol):
    """An open file: positional reads and writes, sync, size changes."""

    path: str

    def pwrite(self, data: bytes | bytearray | memoryview, offset: int) -> None: ...

    def pread(self, size: int, offset: int) -> bytes: ...

    def datasync(self) -> None: ...

    def size(self) -> int: ...

    def allocate(self, size: int) -> None: ...

    def truncate(self, size: int) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class FileSystem(Protocol):
    """Directory-level operations and the factory of :class:`FileHandle`."""

    def open(self, path: str, *, create: bool = False, read_only: bool = False) -> FileHandle:
        """A handle on ``path``; ``create`` makes the file if missing, ``read_only`` opens it for
        reading only (not with ``create``). Raises StoreIOError."""
        ...

    def rename(self, src: str, dst: str) -> None: ...

    def remove(self, path: str) -> None: ...

    def fsync_dir(self, path: str) -> None: ...

    def listdir(self, path: str) -> list[str]: ...

    def exists(self, path: str) -> bool: ...

    def makedirs(self, path: str) -> None: ...

    @property
    def native(self) -> bool:
        """True when handles are real OS files (mmap and Linux AIO need a real descriptor)."""
        ...


def _io_error(exc: OSError, what: str, path: str) -> StoreIOError:
    hint = None
    if exc.errno == errno.ENOSPC:
        hint = "the disk is full: free space or move the journal directory"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        hint = "check the permissions of the directory"
    return StoreIOError(f"{what} {path}: {exc.strerror or exc}", path=path, hint=hint)


class OsFileHandle:
    """A real file opened with ``os.open``; positional I/O with ``pwrite``/``pread``."""

    __slots__ = ("fd", "path")

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self.fd = fd

    def pwrite(self, data: bytes | bytearray | memoryview, offset: int) -> None:
        try:
            view = memoryview(data)
            while view:
                n = os.pwrite(self.fd, view, offset)
                view = view[n:]
                offset += n
        except OSError as exc:
            raise _io_error(exc, "cannot write", self.path) from exc

    def pread(self, size: int, offset: int) -> bytes:
        try:
            chunks = []
            while size > 0:
                chunk = os.pread(self.fd, size, offset)
                if not chunk:
                    break
                chunks.append(chunk)
                size -= len(chunk)
                offset += len(chunk)
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        except OSError as exc:
            raise _io_error(exc, "cannot read", self.path) from exc

    def pread_into(self, view: memoryview, offset: int) -> int:
        """Fill ``view`` from ``offset``; returns how many bytes were read (fewer only at the
        end of the file). Lets a reader reuse one buffer where :meth:`pread` makes a new
        object per call. Raises StoreIOError."""
        done = 0
        try:
            while done < len(view):
                n = os.preadv(self.fd, [view[done:]], offset + done)
                if n == 0:
                    break
                done += n
        except OSError as exc:
            raise _io_error(exc, "cannot read", self.path) from exc
        return done

    def datasync(self) -> None:
        try:
            os.fdatasync(self.fd)
        except OSError as exc:
            raise _io_error(exc, "cannot sync", self.path) from exc

    def size(self) -> int:
        try:
            return os.fstat(self.fd).st_size
        except OSError as exc:
            raise _io_error(exc, "cannot stat", self.path) from exc

    def allocate(self, size: int) -> None:
        """Extend the file to ``size`` bytes of written zeros.

        Zeros are written rather than ``posix_fallocate``d: fallocate leaves *unwritten*
        extents, and the first write into each of them makes the next ``fdatasync`` commit a
        metadata change, which halves the sync rate of a fresh file (measured here: ~5,900 vs
        ~10,000 syncs/s). Artemis fills its files for the same reason.
        """
        try:
            current = os.fstat(self.fd).st_size
            if current >= size:
                return
            block = bytes(1 << 20)
            pos = current
            while pos < size:
                n = min(len(block), size - pos)
                os.pwrite(self.fd, memoryview(block)[:n], pos)
                pos += n
        except OSError as exc:
            raise _io_error(exc, "cannot allocate", self.path) from exc

    def truncate(self, size: int) -> None:
        try:
            os.ftruncate(self.fd, size)
        except OSError as exc:
            raise _io_error(exc, "cannot truncate", self.path) from exc

    def close(self) -> None:
        # The fd is taken and the slot cleared in one step (no call between them, so no
        # other thread runs in between): two threads closing one handle close its fd once,
        # never a number the kernel has since given to another file or socket.
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


class OsFileSystem:
    """The real file system."""

    native = True

    def open(self, path: str, *, create: bool = False, read_only: bool = False) -> OsFileHandle:
        if create and read_only:
            raise ValueError("a file opened read-only cannot be created")
        flags = (os.O_RDONLY if read_only else os.O_RDWR) | getattr(os, "O_CLOEXEC", 0)
        if create:
            flags |= os.O_CREAT
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as exc:
            raise _io_error(exc, "cannot open", path) from exc
        return OsFileHandle(path, fd)

    def rename(self, src: str, dst: str) -> None:
        try:
            os.replace(src, dst)
        except OSError as exc:
            raise _io_error(exc, f"cannot rename to {dst}:", src) from exc

    def remove(self, path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise _io_error(exc, "cannot remove", path) from exc

    def fsync_dir(self, path: str) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise _io_error(exc, "cannot sync directory", path) from exc

    def listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise _io_error(exc, "cannot list", path) from exc

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def makedirs(self, path: str) -> None:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise _io_error(exc, "cannot create directory", path) from exc


def copy_file(fs: FileSystem, source: str, target: str, *, chunk: int = 1 << 20) -> None:
    """Copy ``source`` to ``target`` durably: written to ``<target>.tmp``, synced, renamed,
    directory synced, so a file under ``target`` is always complete."""
    tmp = target + ".tmp"
    src = fs.open(source, read_only=True)
    try:
        dst = fs.open(tmp, create=True)
        try:
            dst.truncate(0)
            size = src.size()
            pos = 0
            while pos < size:
                data = src.pread(min(chunk, size - pos), pos)
                if not data:
                    break
                dst.pwrite(data, pos)
                pos += len(data)
            dst.datasync()
        finally:
            dst.close()
    finally:
        src.close()
    fs.rename(tmp, target)
    fs.fsync_dir(os.path.dirname(target) or ".")
