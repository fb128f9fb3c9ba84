"""Chunked, checksummed bodies: the part of large messages every persistent back-end shares.

A body is stored as a sequence of *chunks*: chunk ``k`` holds body bytes
``[k * chunk_size, min((k + 1) * chunk_size, size))``, so every chunk but the last is full and
an empty body has no chunk at all. Each chunk is stored as a *frame*:

Frame (``CRC`` 4 bytes, then the payload)
=========================================

======  ====  ==============  ==============================================================
Offset  Size  Field           Description
======  ====  ==============  ==============================================================
0       4     crc             CRC-32 (zlib), unsigned little-endian: version 2, of the
                              16-byte key (:data:`FRAME_KEY`: the message id, signed
                              64-bit, then ``k``, unsigned 64-bit, both little-endian)
                              followed by ``payload``; version 1, of ``payload`` alone
4       n     payload         the chunk's body bytes (``n`` = ``chunk_size``, less for the
                              last chunk)
======  ====  ==============  ==============================================================

The key is not stored: a reader knows which body and which chunk it asked for, and the CRC
then fails for a frame that is in the wrong place. Version 1 bound only the payload, so two
frames swapped within a file, or two chunk rows renamed, read back as valid, wrong bytes;
version 2 (what every body is now written with) makes a chunk moved, swapped or copied from
another body a checksum failure. The version is the body's (file header, database
descriptor): a reader of a version 1 body checks its frames as version 1 did.

Where a frame lives is the back-end's business (:mod:`store.large.files`: at a computed
offset of one file; :mod:`store.large.database`: one row per chunk). The chunk size is
recorded with every body (file header, database descriptor), so it may change between bodies
and versions without making old bodies unreadable.

A frame of chunk ``k`` of body ``id`` is **valid** if and only if:

1. its length is ``4 + chunk_length(k)``;
2. its ``crc`` matches: version 2, ``crc32(FRAME_KEY.pack(id, k) + payload)``; version 1,
   ``crc32(payload)``.

A reader checks every frame before it hands out one byte of it, so a damaged or misplaced
chunk raises :class:`~store.errors.CorruptionError` and never yields wrong bytes; the error's
``path`` names the body, its ``offset`` is the body offset of the chunk's first byte. A
dropped chunk is caught by the back-end (the file's size, the missing row); a duplicated one
by rule 2.

:class:`ChunkBuffer` cuts what a writer writes into frames; :class:`ChunkedBody` is the raw
reader a back-end wraps with :func:`open_body`. Memory: a writer holds one frame, a reader one
frame plus the ``io.BufferedReader`` buffer.

Why 1 MiB (:data:`CHUNK_SIZE`): large enough that the per-chunk cost (a database round trip
and commit, a ``pwrite`` and CRC call) is small beside moving the bytes (measured in
``bench/large_messages.py``), small enough that "memory bounded by a chunk" stays well
inside what a broker spends per message in flight, and below every database's default packet
limit (MariaDB's ``max_allowed_packet`` is 16 MiB).

Thread-safety: a :class:`ChunkBuffer` or :class:`ChunkedBody` belongs to one thread at a time.
"""

from __future__ import annotations

import io
import struct
import threading
from collections.abc import Callable
from typing import BinaryIO, Final

from store.errors import CorruptionError
from store.speedups import crc32

__all__ = [
    "CHUNK_SIZE",
    "CRC",
    "ChunkBuffer",
    "ChunkedBody",
    "Frame",
    "FRAME_KEY",
    "FramePool",
    "chunk_count",
    "chunk_length",
    "frame_seed",
    "open_body",
    "settle_allocator",
]

#: The chunk size new bodies are written with (bytes).
CHUNK_SIZE: Final = 1 << 20
#: The frame's checksum field.
CRC: Final = struct.Struct("<I")
#: The key a version 2 frame's checksum covers before its payload: message id, chunk index.
FRAME_KEY: Final = struct.Struct("<qQ")
#: The BufferedReader's buffer of an opened body: small reads are served from it, reads at
#: least this large go straight into the caller's buffer.
READ_BUFFER: Final = 64 * 1024

#: What a back-end returns for a chunk: the stored frame (crc + payload).
Frame = bytes | bytearray | memoryview


_settled = False


def settle_allocator() -> None:
    """Frees one untouched block of four chunks, once per process, so that chunk-sized
    objects come from the heap and reuse its pages instead of each being an ``mmap`` of its
    own. Raises nothing.

    glibc's ``malloc`` serves a request at least as large as its mmap threshold (128 KiB at
    start) with a new ``mmap``, and raises the threshold to the size of the largest such
    block freed (``man mallopt``, ``M_MMAP_THRESHOLD``). A request exactly as large as the last
    block freed is still served by ``mmap``, so a reader whose driver returns one 1 MiB + 4
    byte row after another got a fresh mapping every time: 257 page faults to fill it (about
    0.55 ms here) and an ``munmap`` to free it, against 0.05 ms for the same cycle from the
    heap. Those costs made up most of what separated a 1 MiB read from the raw select of the
    same bytes. After this block is freed, the threshold is 4 MiB and chunks come from the
    heap. Memory: glibc then keeps up to twice the threshold (8 MiB) of freed heap before it
    returns memory to the system. Elsewhere (another ``malloc``, or a threshold fixed by
    ``MALLOC_MMAP_THRESHOLD_``) this changes nothing.
    """
    global _settled
    if not _settled:
        _settled = True
        block = bytes(4 * CHUNK_SIZE)  # calloc: a mapping whose pages are never touched
        del block


def chunk_count(size: int, chunk_size: int) -> int:
    """Returns how many chunks a body of ``size`` bytes has (0 for an empty body)."""
    return -(-size // chunk_size)


def frame_seed(message_id: int | None, index: int) -> int:
    """Returns the CRC-32 a frame's checksum starts from: that of :data:`FRAME_KEY` for
    ``(message_id, index)`` (version 2), or 0 when ``message_id`` is None (version 1, the
    payload alone). Raises struct.error for an id that is not signed 64-bit."""
    if message_id is None:
        return 0
    return crc32(FRAME_KEY.pack(message_id, index))


def chunk_length(index: int, size: int, chunk_size: int) -> int:
    """Returns how many body bytes chunk ``index`` holds; raises nothing (0 past the end)."""
    return max(0, min(chunk_size, size - index * chunk_size))


class FramePool:
    """Frame buffers kept for the next writer (or, on the file store, reader) of a store, at
    most ``keep`` of them.

    A new 1 MiB ``bytearray`` is fresh memory from the operating system: the first write into
    it faults in its 257 pages, which measured 0.7-0.8 ms per body here (a 1 MiB copy into a
    recycled buffer takes 0.02 ms), more than half of what a 1 MiB body cost the SQLite store
    above its insert. A writer takes its buffers from the pool and gives them back when it is
    done, so a store that writes one body after another reuses the same memory. Memory: at
    most ``keep`` idle frames (2 MiB at the default chunk size).

    Thread-safety: thread-safe.
    """

    def __init__(self, keep: int = 2) -> None:
        self._keep = keep
        self._free: list[bytearray] = []
        self._lock = threading.Lock()

    def take(self, size: int) -> bytearray:
        """Returns a buffer of ``size`` bytes (contents undefined), recycled when one of that
        size is free. Raises nothing."""
        with self._lock:  # the one given back last first: its pages are the warmest
            for k in range(len(self._free) - 1, -1, -1):
                if len(self._free[k]) == size:
                    return self._free.pop(k)
        return bytearray(size)

    def give(self, buffer: bytearray) -> None:
        """Keep ``buffer`` for a later :meth:`take` (dropped when ``keep`` are kept). The
        caller must not use it, nor any view of it, afterwards. Raises nothing."""
        with self._lock:
            if len(self._free) < self._keep:
                self._free.append(buffer)


class ChunkBuffer:
    """Cuts a stream of writes into frames and hands each full one to ``emit(index, frame)``.

    A full frame is handed over only once a later byte arrives (or by :meth:`finish`), so the
    last frame of a body (full or not) is always the one :meth:`finish` returns: a back-end
    can store it together with what completes the body. ``frame`` is a view of this buffer's
    own memory: with ``buffers=1`` it is valid only during the call; with ``buffers=2`` the
    frames alternate between two buffers, so a frame stays valid until the next ``emit`` call
    returns (a back-end may write it in the background while the next frame fills, as long as
    each ``emit`` first waits for the write of the frame before). Memory: ``buffers`` frames.

    ``direct(index, crc, payload)``, when given, takes whole chunks of an immutable ``bytes``
    write without copying them: a chunk that starts at a chunk boundary and lies wholly in
    such a write is handed over as the CRC-32 of ``payload`` and a view of the caller's
    bytes (immutable, so a back-end may write it in the background as long as it holds the
    view), at once rather than when a later byte arrives; the last frame :meth:`finish`
    returns is then only the part of the body after the last chunk handed over that way
    (None when the body ended on it). A 1 MiB piece copied into the frame cost 0.2-0.5 ms
    per body on the file store, where its write and sync took 0.9 ms. The frame buffers are
    allocated when a write first needs one, from ``pool`` when given; :meth:`release` gives
    them back.

    ``message_id`` is the body's: every frame's checksum covers it and the chunk's index
    (version 2, module docstring); None writes version 1 frames (tests of the old format).

    Thread-safety: one thread at a time.
    """

    def __init__(
        self,
        chunk_size: int,
        emit: Callable[[int, memoryview], None],
        *,
        buffers: int = 1,
        direct: Callable[[int, int, memoryview], None] | None = None,
        pool: FramePool | None = None,
        message_id: int | None = None,
    ) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk size must be at least 1 byte, not {chunk_size}")
        if buffers not in (1, 2):
            raise ValueError(f"buffers must be 1 or 2, not {buffers}")
        self.chunk_size = chunk_size
        self._emit = emit
        self._direct = direct
        self._pool = pool
        self._message_id = message_id
        self._frame_buffer: bytearray | None = None
        # The other buffer (buffers=2), allocated when the first frame is emitted.
        self._spare: bytearray | None = None
        self._double = buffers == 2
        self._fill = 0
        #: Index of the chunk being filled (= chunks handed to ``emit`` so far).
        self.index = 0
        #: Body bytes written so far.
        self.size = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Append ``data``; returns its length. Raises what ``emit`` raises (the bytes of the
        frame being emitted are then lost: the writer must abort)."""
        view = memoryview(data).cast("B")
        total = len(view)
        direct = self._direct if type(data) is bytes else None
        while view:
            if direct is not None and self._fill == 0 and len(view) >= self.chunk_size:
                payload = view[: self.chunk_size]
                seed = frame_seed(self._message_id, self.index)
                direct(self.index, crc32(payload, seed), payload)
                self.index += 1
                self.size += self.chunk_size
                view = view[self.chunk_size :]
                continue
            if self._fill == self.chunk_size:
                self._emit(self.index, self._sealed())
                self.index += 1
                self._fill = 0
                if self._double:
                    spare = self._spare or self._new_frame()
                    self._spare, self._frame = self._frame, spare
                continue
            take = min(self.chunk_size - self._fill, len(view))
            start = CRC.size + self._fill
            # Through a memoryview: a bytearray slice assignment took twice as long (1 MiB).
            memoryview(self._frame)[start : start + take] = view[:take]
            self._fill += take
            self.size += take
            view = view[take:]
        return total

    @property
    def _frame(self) -> bytearray:
        frame = self._frame_buffer
        if frame is None:
            frame = self._frame_buffer = self._new_frame()
        return frame

    @_frame.setter
    def _frame(self, frame: bytearray) -> None:
        self._frame_buffer = frame

    def _new_frame(self) -> bytearray:
        size = CRC.size + self.chunk_size
        return bytearray(size) if self._pool is None else self._pool.take(size)

    def _sealed(self) -> memoryview:
        end = CRC.size + self._fill
        seed = frame_seed(self._message_id, self.index)
        CRC.pack_into(self._frame, 0, crc32(memoryview(self._frame)[CRC.size : end], seed))
        return memoryview(self._frame)[:end]

    def finish(self) -> memoryview | None:
        """Returns the last frame (chunk :attr:`index`), or None for an empty body."""
        if self._fill == 0:
            return None
        return self._sealed()

    def release(self) -> None:
        """Give the frame buffers to the pool, once the body is complete or aborted and every
        write of a frame handed out has finished: neither this buffer nor any frame it handed
        out may be used after. Raises nothing."""
        buffers = (self._spare, self._frame_buffer)  # the current frame is taken first
        self._frame_buffer = self._spare = None
        if self._pool is not None:
            for buffer in buffers:
                if buffer is not None:
                    self._pool.give(buffer)


class ChunkedBody(io.RawIOBase):
    """A complete body as a seekable raw binary stream; chunk ``k``'s frame comes from
    ``fetch(k)`` and is verified before any of it is returned.

    ``path`` names the body in errors; ``on_close`` releases what the back-end holds for
    this reader (a file handle); ``message_id`` is the body's for a version 2 body (each
    frame's checksum covers it and the chunk's index), None for a version 1 body. Reads raise
    CorruptionError for an invalid frame (see the module docstring) and what ``fetch``
    raises. Memory: the current chunk's frame.

    Thread-safety: one thread at a time.
    """

    def __init__(
        self,
        *,
        path: str,
        size: int,
        chunk_size: int,
        fetch: Callable[[int], Frame],
        on_close: Callable[[], None] | None = None,
        message_id: int | None = None,
    ) -> None:
        super().__init__()
        self.message_id = message_id
        self.path = path
        self.size = size
        self.chunk_size = chunk_size
        self._fetch = fetch
        self._on_close = on_close
        self._pos = 0
        self._index = -1
        self._payload = memoryview(b"")

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        self._check_closed()
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Move to ``offset`` (``whence`` as for files); returns the new position. Raises
        ValueError for a negative position or an unknown ``whence``."""
        self._check_closed()
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self.size + offset
        else:
            raise ValueError(f"invalid whence {whence!r}")
        if pos < 0:
            raise ValueError(f"negative seek position {pos}")
        self._pos = pos
        return pos

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        """Copy body bytes at the current position into ``buffer``, at most up to the end of
        the current chunk; returns how many (0 at the end of the body). Raises CorruptionError
        for a damaged chunk and what ``fetch`` raises."""
        self._check_closed()
        out = memoryview(buffer).cast("B")
        if not out or self._pos >= self.size:
            return 0
        index, within = divmod(self._pos, self.chunk_size)
        if index != self._index:
            self._load(index)
        n = min(len(out), len(self._payload) - within)
        out[:n] = self._payload[within : within + n]
        self._pos += n
        return n

    def _load(self, index: int) -> None:
        self._payload = memoryview(b"")
        self._index = -1
        frame = memoryview(self._fetch(index)).cast("B")
        offset = index * self.chunk_size
        expected = chunk_length(index, self.size, self.chunk_size)
        if len(frame) != CRC.size + expected:
            raise CorruptionError(
                self.path,
                offset,
                f"chunk {index} holds {len(frame) - CRC.size} bytes, expected {expected}",
            )
        (stored,) = CRC.unpack_from(frame)
        payload = frame[CRC.size :]
        actual = crc32(payload, frame_seed(self.message_id, index))
        if stored != actual:
            raise CorruptionError(
                self.path,
                offset,
                f"chunk {index} fails its checksum (stored {stored:#010x}, computed "
                f"{actual:#010x}): damaged, or a chunk of another place or body",
                hint="the body is damaged; delete it or restore it from a backup",
            )
        self._payload = payload
        self._index = index

    def close(self) -> None:
        if self.closed:
            return
        self._payload = memoryview(b"")
        try:
            if self._on_close is not None:
                self._on_close()
        finally:
            super().close()

    def _check_closed(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on a closed large-message body")


def open_body(raw: ChunkedBody) -> BinaryIO:
    """Returns ``raw`` wrapped in an ``io.BufferedReader`` (``read(n)`` returns ``n`` bytes
    until the end of the body). Raises nothing."""
    return io.BufferedReader(raw, buffer_size=READ_BUFFER)
