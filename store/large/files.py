"""Large messages of the file store: one file per body in ``large-messages-directory``,
format version 2 (version 1 bodies are still read). No other module reads or writes these
files; :mod:`store.data` checks them through :func:`check_header` and
:meth:`FileLargeMessages.open`.

All integers are little-endian. A body being written is ``<id>.tmp``; a complete one is
``<id>.msg`` (Artemis's name, the id in plain decimal, ``-`` for negative ids: unlike the
journal's zero-padded names these do not sort as text, and ``ids()`` sorts them as numbers).

File header (``HEADER``, 32 bytes)
==================================

======  ====  ==============  ==============================================================
Offset  Size  Field           Description
======  ====  ==============  ==============================================================
0       4     magic           ``b"SLMB"``
4       2     version         format version: ``2`` (written), ``1`` (still read)
6       2     reserved        zero
8       4     chunk_size      bytes per chunk (every chunk but the last is full)
12      8     body_size       the body's length in bytes, written when the body completes
20      8     message_id      signed; the id in the file's name
28      4     header_crc      CRC-32 (zlib) of bytes 0..27
======  ====  ==============  ==============================================================

Chunk ``k`` follows at offset ``32 + k * (4 + chunk_size)`` as a frame of
:mod:`store.large.chunks` (``crc32 | bytes``); the file ends right after the last frame. In a
version 2 file each frame's checksum covers ``message_id`` and ``k`` as well as its bytes, so
two frames swapped within the file (or a frame copied from another body) fail it; version 1
frames cover their bytes only, which is the whole difference between the two versions.

A ``.msg`` file of size ``S`` named ``<id>.msg`` is **valid** if and only if:

1. ``S >= 32``, ``magic`` is as above, ``header_crc`` matches and ``version`` is 1 or 2;
2. ``message_id`` is ``id`` and ``chunk_size >= 1``;
3. ``S == 32 + 4 * ceil(body_size / chunk_size) + body_size`` (a shorter file was truncated:
   a body is never silently short);
4. and each of its frames is valid for the header's version (checked as it is read).

A file that breaks 1-3 raises :class:`~store.errors.CorruptionError` from ``open`` and
``size`` (``offset`` 0 for the header, else the body offset of the first chunk the file does
not hold whole); a damaged frame raises it from the read (``offset``: the chunk's body offset).

Writing and crashes: frames are ``pwrite`` n at their offsets as the writer fills them (the
header's place stays a hole; a whole chunk of an immutable ``bytes`` write is not copied into
a frame but written from the caller's bytes, its checksum and its payload in two
``pwrite`` s, see :class:`~store.large.chunks.ChunkBuffer`); completing writes the header,
``fdatasync``\\ s the file, renames ``<id>.tmp`` to ``<id>.msg`` and syncs the directory, so
a ``.msg`` file is always complete and durable. Every ``.tmp`` file left by a process that
died mid-write is deleted when the store opens (as Artemis does). An aborted body's ``.tmp``
is deleted at once. ``delete`` removes ``<id>.msg`` and syncs the directory before it
returns, so a crash after it cannot bring the body back (``tests/large/test_file_faults.py``).

Versioning: a reader refuses a version it does not know (CorruptionError naming it); a new
version gets a new number and this module keeps reading the old ones. Version 2 changed only
what a frame's checksum covers (above); the header's layout is version 1's.

All I/O goes through the :mod:`store.fs` seam the file store was opened with; a reader of a
real file (``fs.native``) reads chunks with ``preadv`` on its descriptor into one reused buffer.

Thread-safety: :class:`FileLargeMessages` may be shared between threads (one lock guards the
set of bodies being written); a writer or a reader belongs to one thread at a time.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import struct
import threading
import zlib
from typing import BinaryIO, Final, NamedTuple

from store.errors import (
    CorruptionError,
    JournalClosedError,
    LostDataError,
    StoreError,
    StoreIOError,
    UnknownRecordError,
)
from store.fs import FileHandle, FileSystem, OsFileHandle
from store.large.api import LargeMessageStore, LargeMessageWriter
from store.large.chunks import (
    CHUNK_SIZE,
    CRC,
    ChunkBuffer,
    ChunkedBody,
    FramePool,
    chunk_count,
    chunk_length,
    open_body,
    settle_allocator,
)
from store.large.memory import check_message_id

__all__ = [
    "HEADER",
    "HEADER_CRC",
    "HEADER_SIZE",
    "MAGIC",
    "VERSION",
    "BodyHeader",
    "FileLargeMessages",
    "check_header",
    "encode_header",
]

_log = logging.getLogger(__name__)

MAGIC: Final = b"SLMB"
#: The version new bodies are written with; :data:`VERSIONS` are read.
VERSION: Final = 2
VERSIONS: Final = (1, 2)
#: magic, version, reserved, chunk_size, body_size, message_id
HEADER: Final = struct.Struct("<4sHHIQq")
HEADER_CRC: Final = struct.Struct("<I")
HEADER_SIZE: Final = HEADER.size + HEADER_CRC.size
MSG: Final = ".msg"
TMP: Final = ".tmp"


class BodyHeader(NamedTuple):
    """What a valid header says (:func:`check_header`). Immutable."""

    chunk_size: int
    body_size: int
    version: int
    message_id: int

    @property
    def frame_key(self) -> int | None:
        """The message id a frame's checksum covers (version 2), or None (version 1)."""
        return None if self.version == 1 else self.message_id


def encode_header(
    message_id: int, chunk_size: int, body_size: int, *, version: int = VERSION
) -> bytes:
    """Returns the 32-byte header of a complete body (``version``: tests of an old format
    only). Raises struct.error for a bad field."""
    head = HEADER.pack(MAGIC, version, 0, chunk_size, body_size, message_id)
    return head + HEADER_CRC.pack(zlib.crc32(head))


def frame_offset(index: int, chunk_size: int) -> int:
    """Returns the file offset of chunk ``index``'s frame. Raises nothing."""
    return HEADER_SIZE + index * (CRC.size + chunk_size)


def check_header(path: str, message_id: int, data: bytes, file_size: int) -> BodyHeader:
    """Returns what the header of a valid file says (rules 1-3): ``data`` is the file's
    first :data:`HEADER_SIZE` bytes (or all it has), ``file_size`` its size. Raises
    CorruptionError (``offset`` 0 for the header, else the body offset of the first chunk the
    file does not hold whole)."""
    if len(data) < HEADER_SIZE:
        raise CorruptionError(path, 0, f"file of {file_size} bytes has no complete header")
    magic, version, _reserved, chunk_size, body_size, stored_id = HEADER.unpack_from(data)
    (crc,) = HEADER_CRC.unpack_from(data, HEADER.size)
    if magic != MAGIC:
        raise CorruptionError(path, 0, f"not a large-message file (magic {magic!r})")
    if crc != zlib.crc32(data[: HEADER.size]):
        raise CorruptionError(path, 0, "header fails its checksum")
    if version not in VERSIONS:
        raise CorruptionError(path, 0, f"unknown format version {version}")
    if stored_id != message_id or chunk_size < 1:
        raise CorruptionError(path, 0, f"header names message {stored_id}, chunk {chunk_size}")
    chunks = chunk_count(body_size, chunk_size)
    expected = HEADER_SIZE + chunks * CRC.size + body_size
    if file_size != expected:
        # The first chunk the file does not hold whole (or the end, for a file too long).
        index = 0
        while index < chunks and file_size >= frame_offset(index, chunk_size) + CRC.size + (
            chunk_length(index, body_size, chunk_size)
        ):
            index += 1
        # Cut short: what was written is gone (LostDataError, DESIGN's rule for a body that
        # must exist); too long: damage of another kind.
        error = LostDataError if file_size < expected else CorruptionError
        raise error(
            path,
            min(index * chunk_size, body_size),
            f"file holds {file_size} bytes, a body of {body_size} needs {expected}"
            + (" (truncated)" if file_size < expected else ""),
        )
    return BodyHeader(chunk_size, body_size, version, message_id)


_pool_lock = threading.Lock()
_pool: concurrent.futures.ThreadPoolExecutor | None = None


def _background() -> concurrent.futures.ThreadPoolExecutor:
    """The threads that write writers' frames in the background (shared, made on first use;
    each writer has at most one write in flight). Raises nothing."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=4, thread_name_prefix="store-large-write"
            )
        return _pool


class _FileWriter(LargeMessageWriter):
    """Writes ``<id>.tmp``; see the module docstring. One thread at a time; ``abort`` may come
    from :meth:`FileLargeMessages.close` on another thread (a lock orders them)."""

    def __init__(
        self, owner: FileLargeMessages, message_id: int, handle: FileHandle, chunk_size: int
    ) -> None:
        self.message_id = message_id
        self._owner = owner
        self._handle: FileHandle | None = handle
        self._lock = threading.Lock()
        self._chunks = ChunkBuffer(
            chunk_size,
            self._emit,
            buffers=2,
            direct=self._direct,
            pool=owner.frames,
            message_id=message_id,
        )
        # The pwrite of the frame emitted last, running while the next frame fills.
        self._writing: concurrent.futures.Future[None] | None = None
        self._done = False
        self._renamed = False

    def _emit(self, index: int, frame: memoryview) -> None:
        # One frame is written in the background while the caller fills (and the CRC runs
        # over) the next: both release the GIL. The frame before must be on its way out
        # first, since its buffer is the one the next frame fills (ChunkBuffer buffers=2).
        handle = self._handle
        assert handle is not None
        self._wait_written()
        offset = frame_offset(index, self._chunks.chunk_size)
        self._writing = _background().submit(handle.pwrite, frame, offset)

    def _direct(self, index: int, crc: int, payload: memoryview) -> None:
        # A whole chunk of the caller's immutable bytes, not copied: its checksum and its
        # payload go to their places in two writes, in the background as a frame does.
        handle = self._handle
        assert handle is not None
        self._wait_written()
        offset = frame_offset(index, self._chunks.chunk_size)

        def write() -> None:
            handle.pwrite(CRC.pack(crc), offset)
            handle.pwrite(payload, offset + CRC.size)

        self._writing = _background().submit(write)

    def _wait_written(self) -> None:
        """Wait for the background pwrite; raises what it raised (StoreIOError)."""
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.result()

    def write(self, data: bytes | bytearray | memoryview) -> int:
        with self._lock:
            self._owner.check_open()
            if self._done:
                raise StoreError(f"large message {self.message_id}: writer already finished")
            return self._chunks.write(data)

    @property
    def size(self) -> int:
        return self._chunks.size

    def complete(self) -> None:
        with self._lock:
            if self._done:
                return
            self._owner.check_open()
            handle = self._handle
            assert handle is not None
            last = self._chunks.finish()
            self._wait_written()
            if last is not None:
                handle.pwrite(last, frame_offset(self._chunks.index, self._chunks.chunk_size))
            size = self._chunks.size
            handle.pwrite(encode_header(self.message_id, self._chunks.chunk_size, size), 0)
            handle.datasync()
            self._handle = None
            handle.close()
            tmp, msg = self._owner.paths(self.message_id)
            self._owner.fs.rename(tmp, msg)
            self._renamed = True
            self._owner.fs.fsync_dir(self._owner.directory)
            self._done = True
            self._chunks.release()
            self._owner.finished(self.message_id, self)

    def abort(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            tmp, msg = self._owner.paths(self.message_id)
            try:
                with contextlib.suppress(StoreError):
                    self._wait_written()  # never close a handle a pwrite still uses
                self._chunks.release()
                if self._handle is not None:
                    self._handle.close()
                    self._handle = None
                self._owner.fs.remove(msg if self._renamed else tmp)
                self._owner.fs.fsync_dir(self._owner.directory)
            except StoreError as exc:  # the file is removed at the next open
                _log.warning("large message %d: abort left %s: %s", self.message_id, tmp, exc)
            finally:
                self._owner.finished(self.message_id, self)


class FileLargeMessages(LargeMessageStore):
    """Bodies as files in ``directory`` (see module docstring); created if missing.

    ``chunk_size`` is what new bodies are written with. Opening deletes every ``.tmp`` file;
    ``read_only`` (the offline tools) opens without creating or cleaning anything, and then
    ``create`` and ``delete`` raise StoreError. Raises StoreIOError when the directory cannot
    be created, listed or cleaned.
    """

    def __init__(
        self,
        directory: str,
        *,
        fs: FileSystem,
        chunk_size: int = CHUNK_SIZE,
        read_only: bool = False,
    ) -> None:
        self.directory = directory
        self.fs = fs
        self.chunk_size = chunk_size
        self._lock = threading.Lock()
        self._writers: dict[int, _FileWriter] = {}
        #: Frame buffers of writers and readers, reused from one body to the next
        #: (:class:`FramePool`).
        self.frames = FramePool()
        settle_allocator()
        self._closed = False
        self.read_only = read_only
        if read_only:
            return
        fs.makedirs(directory)
        stale = [n for n in fs.listdir(directory) if n.endswith(TMP)]
        for name in stale:
            fs.remove(os.path.join(directory, name))
        if stale:
            fs.fsync_dir(directory)
            _log.info("large messages: removed %d incomplete bodies from %s", len(stale), directory)

    def paths(self, message_id: int) -> tuple[str, str]:
        """Returns (``<id>.tmp``, ``<id>.msg``) paths of ``message_id``. Raises nothing."""
        base = os.path.join(self.directory, str(message_id))
        return base + TMP, base + MSG

    def path(self, message_id: int) -> str:
        """The body file of ``message_id`` (``<directory>/<id>.msg``). Raises nothing."""
        return self.paths(message_id)[1]

    def check_open(self) -> None:
        """Raises JournalClosedError after close; returns None otherwise."""
        if self._closed:
            raise JournalClosedError("the large-message store is closed")

    def _check_writable(self) -> None:
        if self.read_only:
            raise StoreError(f"large messages in {self.directory}: opened read-only")

    def finished(self, message_id: int, writer: _FileWriter) -> None:
        """Forget the writer of ``message_id`` (completed or aborted). Raises nothing."""
        with self._lock:
            if self._writers.get(message_id) is writer:
                del self._writers[message_id]

    def create(self, message_id: int) -> LargeMessageWriter:
        check_message_id(message_id)
        tmp, msg = self.paths(message_id)
        with self._lock:
            self.check_open()
            self._check_writable()
            if message_id in self._writers or self.fs.exists(msg):
                raise StoreError(f"large message {message_id} already has a body")
            handle = self.fs.open(tmp, create=True)
            try:
                handle.truncate(0)
            except BaseException:
                handle.close()
                raise
            writer = _FileWriter(self, message_id, handle, self.chunk_size)
            self._writers[message_id] = writer
        return writer

    def _open(self, message_id: int) -> tuple[FileHandle, BodyHeader]:
        """Returns (handle, header) of a valid complete body. Raises UnknownRecordError,
        CorruptionError, StoreIOError."""
        check_message_id(message_id)
        self.check_open()
        _tmp, msg = self.paths(message_id)
        try:
            handle = self.fs.open(msg, read_only=True)
        except StoreIOError:
            if not self.fs.exists(msg):
                raise UnknownRecordError(
                    f"large message {message_id} has no complete body"
                ) from None
            raise
        try:
            size = handle.size()
            header = check_header(msg, message_id, handle.pread(HEADER_SIZE, 0), size)
        except BaseException:
            handle.close()
            raise
        return handle, header

    def open(self, message_id: int) -> BinaryIO:
        handle, header = self._open(message_id)
        chunk_size, body_size = header.chunk_size, header.body_size
        native = handle if self.fs.native and isinstance(handle, OsFileHandle) else None
        # A real file is read into one frame buffer reused for every chunk (the reader holds
        # one chunk at a time): a fresh 1 MiB object per chunk cost page faults and a copy.
        # A body of a chunk or more takes its buffer from the pool and gives it back closed.
        frame: bytearray | None = None
        if native is not None:
            full = CRC.size + chunk_size
            small = CRC.size + body_size
            frame = self.frames.take(full) if body_size >= chunk_size else bytearray(small)

        def close() -> None:
            handle.close()
            if frame is not None and len(frame) == CRC.size + chunk_size:
                self.frames.give(frame)  # the reader dropped its view of it first

        def fetch(index: int) -> bytes | memoryview:
            self.check_open()
            length = CRC.size + chunk_length(index, body_size, chunk_size)
            offset = frame_offset(index, chunk_size)
            if native is None or frame is None:
                return handle.pread(length, offset)
            view = memoryview(frame)[:length]
            return view[: native.pread_into(view, offset)]

        raw = ChunkedBody(
            path=handle.path,
            size=body_size,
            chunk_size=chunk_size,
            fetch=fetch,
            on_close=close,
            message_id=header.frame_key,
        )
        return open_body(raw)

    def size(self, message_id: int) -> int:
        handle, header = self._open(message_id)
        handle.close()
        return header.body_size

    def delete(self, message_id: int) -> None:
        check_message_id(message_id)
        self.check_open()
        self._check_writable()
        _tmp, msg = self.paths(message_id)
        if not self.fs.exists(msg):
            raise UnknownRecordError(f"large message {message_id} has no complete body")
        self.fs.remove(msg)
        self.fs.fsync_dir(self.directory)

    def ids(self) -> list[int]:
        self.check_open()
        if self.read_only and not self.fs.exists(self.directory):
            return []  # never made: a read-only open does not make it
        out = []
        for name in self.fs.listdir(self.directory):
            if name.endswith(MSG):
                try:
                    out.append(int(name[: -len(MSG)]))
                except ValueError:
                    continue  # not one of ours
        return sorted(out)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            writers = list(self._writers.values())
        for writer in writers:
            writer.abort()

    def __repr__(self) -> str:
        return f"FileLargeMessages({self.directory!r}, closed={self._closed})"
