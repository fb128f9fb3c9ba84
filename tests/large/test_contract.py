"""Contract: large messages (docs/large.md, store.large.api rules 1-6) on every back-end.

Every test uses ``store.large_messages`` right after ``open_store``, without ``load()``: the
contract says it is usable then. Zero persistence keeps its bodies in memory, so everything
holds there too except surviving a reopen.
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections.abc import Callable

import pytest

from store.errors import JournalClosedError, StoreError, UnknownRecordError
from store.journal.api import MAX_ID, MIN_ID
from store.large.chunks import CRC
from store.large.files import FileLargeMessages
from tests.large.support import (
    body_bytes,
    chunk_size_of,
    read_all,
    stored_names,
    write_body,
)
from tests.support.backends import BackendSpec, StoreFactory


def test_written_body_reads_back_and_is_listed(backend: BackendSpec, store_factory) -> None:
    """Rule 1: a body written in pieces and completed by the block is listed, sized, and
    reads back byte for byte."""
    lm = store_factory.open().large_messages
    size = 2 * chunk_size_of(lm) + 12345
    digest = write_body(lm, 7, size)
    assert lm.ids() == [7]
    assert lm.size(7) == size
    assert read_all(lm, 7) == digest


def test_seek_tell_readinto_across_chunk_boundaries(backend: BackendSpec, store_factory) -> None:
    """open() gives a seekable binary file: seek (all whences), tell, read(n) and readinto
    return the right bytes on both sides of a chunk boundary and stop at the end."""
    lm = store_factory.open().large_messages
    cs = chunk_size_of(lm)
    data = body_bytes(3, 2 * cs + 10)
    with lm.create(3) as w:
        w.write(data)
    with lm.open(3) as r:
        assert r.seekable() and r.readable()
        assert r.tell() == 0
        assert r.seek(cs - 5) == cs - 5
        assert r.read(10) == data[cs - 5 : cs + 5]
        assert r.tell() == cs + 5
        buf = bytearray(cs)
        assert r.readinto(buf) == cs
        assert bytes(buf) == data[cs + 5 : 2 * cs + 5]
        assert r.seek(-3, io.SEEK_END) == len(data) - 3
        assert r.read(100) == data[-3:]
        assert r.read(1) == b""
        assert r.seek(-(cs + 1), io.SEEK_CUR) == len(data) - cs - 1
        assert r.read(2) == data[len(data) - cs - 1 : len(data) - cs + 1]
        r.seek(0)
        assert r.read() == data
        r.seek(len(data) + 100)
        assert r.read(5) == b""
        # From a chunk's first byte into a buffer of a whole chunk (handed to the raw
        # reader as it is), the last one short; and two chunks at once.
        r.seek(0)
        whole = memoryview(bytearray(cs))
        for start, length in ((0, cs), (cs, cs), (2 * cs, 10)):
            assert r.readinto(whole) == length
            assert whole[:length].tobytes() == data[start : start + length]
        assert r.readinto(whole) == 0
        r.seek(0)
        two = bytearray(2 * cs + 3)
        assert r.readinto(two) == 2 * cs + 3
        assert bytes(two) == data[: 2 * cs + 3]


def test_empty_body(backend: BackendSpec, store_factory) -> None:
    """A body with no bytes is a body: listed, size 0, reads b""."""
    lm = store_factory.open().large_messages
    with lm.create(1):
        pass
    assert lm.ids() == [1]
    assert lm.size(1) == 0
    with lm.open(1) as r:
        assert r.read() == b""
        assert r.read(10) == b""


@pytest.mark.parametrize("extra", [0, 1], ids=["k-chunks", "k-chunks-plus-1"])
def test_body_of_whole_chunks_and_one_more_byte(
    backend: BackendSpec, store_factory, extra: int
) -> None:
    """Bodies of exactly 2 chunks and 2 chunks + 1 byte keep every byte, the last one too."""
    lm = store_factory.open().large_messages
    data = body_bytes(11, 2 * chunk_size_of(lm) + extra)
    with lm.create(11) as w:
        w.write(data)
    assert lm.size(11) == len(data)
    with lm.open(11) as r:
        assert r.read() == data
        r.seek(len(data) - 1)
        assert r.read(5) == data[-1:]


def test_create_of_an_existing_body_raises_store_error(backend: BackendSpec, store_factory) -> None:
    """Rule 1: create of an id with a complete body, or one being written, raises StoreError
    and leaves the existing body as it was."""
    lm = store_factory.open().large_messages
    with lm.create(5) as w:
        w.write(b"first")
    with pytest.raises(StoreError):
        lm.create(5)
    w2 = lm.create(6)
    with pytest.raises(StoreError):
        lm.create(6)
    w2.abort()
    with lm.open(5) as r:
        assert r.read() == b"first"
    if backend.persistent:
        lm = store_factory.reopen().large_messages  # a new open knows the bodies there
        with pytest.raises(StoreError):
            lm.create(5)
    lm.delete(5)
    with lm.create(5) as w:  # a deleted body's id may be written again
        w.write(b"second")
    with lm.open(5) as r:
        assert r.read() == b"second"


@pytest.mark.parametrize("call", ["open", "size", "delete"])
def test_unknown_id_raises_unknown_record_error(
    backend: BackendSpec, store_factory, call: str
) -> None:
    """Rule 3: open/size/delete of an id that never had a body, of one being written, and of
    a deleted one raise UnknownRecordError."""
    lm = store_factory.open().large_messages
    with pytest.raises(UnknownRecordError):
        getattr(lm, call)(404)
    writer = lm.create(405)
    writer.write(b"in progress")
    with pytest.raises(UnknownRecordError):
        getattr(lm, call)(405)
    writer.abort()
    with lm.create(406) as w:
        w.write(b"x")
    lm.delete(406)
    with pytest.raises(UnknownRecordError):
        getattr(lm, call)(406)
    assert lm.ids() == []


def test_block_that_raises_leaves_nothing(backend: BackendSpec, store_factory) -> None:
    """Rules 1-2: a block left by an exception aborts: the id is not listed, not readable,
    nothing of it is stored (no file, no row), and create of the same id works again."""
    lm = store_factory.open().large_messages
    before = stored_names(lm)
    with pytest.raises(RuntimeError, match="producer failed"), lm.create(9) as w:
        for data in (body_bytes(9, 2 * chunk_size_of(lm) + 77),):
            w.write(data)
        raise RuntimeError("producer failed")
    assert lm.ids() == []
    with pytest.raises(UnknownRecordError):
        lm.open(9)
    assert stored_names(lm) == before
    digest = write_body(lm, 9, 1000)
    assert read_all(lm, 9) == digest


def test_bodies_survive_reopen(backend: BackendSpec, store_factory: StoreFactory) -> None:
    """Rule 1: a completed body is durable: after a reopen it is listed and reads back
    (zero persistence keeps nothing across a reopen)."""
    lm = store_factory.open().large_messages
    digests = {i: write_body(lm, i, size) for i, size in ((1, 0), (2, 5000), (3, 1 << 21))}
    lm = store_factory.reopen().large_messages
    if not backend.persistent:
        assert lm.ids() == []
        return
    assert lm.ids() == [1, 2, 3]
    for i, digest in digests.items():
        assert read_all(lm, i) == digest


def test_many_bodies_written_and_read_from_threads(backend: BackendSpec, store_factory) -> None:
    """Thread-safety: 6 threads each write 3 bodies (of a chunk and a half) at once in small
    pieces, then read them all back at once; every body has its own bytes."""
    lm = store_factory.open().large_messages
    size = chunk_size_of(lm) * 3 // 2
    errors: list[BaseException] = []
    digests: dict[int, str] = {}

    def run(work: Callable[[int], None], t: int) -> None:
        try:
            work(t)
        except BaseException as exc:
            errors.append(exc)

    def writer(t: int) -> None:
        for k in range(3):
            mid = t * 100 + k
            digests[mid] = write_body(lm, mid, size, piece=32_771)

    def reader(t: int) -> None:
        for k in range(3):
            mid = t * 100 + k
            assert read_all(lm, mid, piece=50_000) == digests[mid]

    for work in (writer, reader):
        threads = [threading.Thread(target=run, args=(work, t)) for t in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert not errors, [(e, str(e.__cause__)) for e in errors]
    assert lm.ids() == sorted(digests)


def test_a_finished_writer_gives_its_frame_buffers_to_the_next(
    body_backend: BackendSpec, body_store_factory: StoreFactory
) -> None:
    """Memory: a writer's frame buffers go back to the store's pool when the body completes
    or aborts, so the next body reuses them (a fresh 1 MiB buffer cost 0.7 ms of page
    faults), and a recycled buffer's old bytes never reach another body. (Zero persistence
    keeps bodies as they are written, in no frames.)"""
    lm = body_store_factory.open().large_messages
    cs = chunk_size_of(lm)
    frame = CRC.size + cs
    size = cs + cs // 2
    first = body_bytes(1, size)
    with lm.create(1) as w:
        w.write(bytearray(first))  # mutable: copied into frames (never handed over whole)
    recycled = lm.frames.take(frame)
    assert recycled[CRC.size : CRC.size + cs // 2] == first[cs:]  # chunk 1 was framed in it
    lm.frames.give(recycled)
    second = body_bytes(2, cs // 3)
    with pytest.raises(RuntimeError, match="producer failed"), lm.create(2) as w:
        w.write(bytearray(second))
        raise RuntimeError("producer failed")
    recycled = lm.frames.take(frame)
    assert recycled[CRC.size : CRC.size + len(second)] == second
    lm.frames.give(recycled)
    third = body_bytes(3, cs // 4)  # shorter than what the recycled buffers hold
    with lm.create(3) as w:
        w.write(bytearray(third))
    for mid, data in ((1, first), (3, third)):
        with lm.open(mid) as r:
            assert r.read() == data
    assert lm.ids() == [1, 3]
    if isinstance(lm, FileLargeMessages):  # its readers take their buffer from the pool too
        with lm.open(1) as r:
            assert r.read() == first
        recycled = lm.frames.take(frame)
        assert recycled[CRC.size : CRC.size + cs // 2] == first[cs:]


def test_calls_after_close_raise_journal_closed_error(backend: BackendSpec, store_factory) -> None:
    """Rule 6: after the store closes, every call of the store and of a writer left open
    raises JournalClosedError; the open writer's body was aborted."""
    store = store_factory.open()
    lm = store.large_messages
    with lm.create(1) as w:
        w.write(b"kept")
    open_writer = lm.create(2)
    open_writer.write(b"never completed")
    store.close()
    for call in (
        lambda: lm.create(3),
        lambda: lm.open(1),
        lambda: lm.size(1),
        lambda: lm.delete(1),
        lm.ids,
        lambda: open_writer.write(b"more"),
    ):
        with pytest.raises(JournalClosedError):
            call()
    lm = store_factory.open().large_messages
    assert lm.ids() == ([1] if backend.persistent else [])


@pytest.mark.parametrize("mid", [MIN_ID, -1, 0, MAX_ID], ids=["min", "minus-1", "zero", "max"])
def test_extreme_and_negative_ids(backend: BackendSpec, store_factory, mid: int) -> None:
    """Ids are signed 64-bit: the extremes and negatives work and list in numeric order;
    ids outside the range (and non-ints) raise ValueError."""
    lm = store_factory.open().large_messages
    with lm.create(mid) as w:
        w.write(mid.to_bytes(8, "little", signed=True))
    with lm.create(12) as w:
        w.write(b"other")
    assert lm.ids() == sorted([mid, 12])
    with lm.open(mid) as r:
        assert r.read() == mid.to_bytes(8, "little", signed=True)
    lm.delete(mid)
    assert lm.ids() == [12]
    for bad in (MAX_ID + 1, MIN_ID - 1, True, "1"):
        with pytest.raises(ValueError):
            lm.create(bad)  # type: ignore[arg-type]


def test_writer_counts_bytes_and_rejects_writes_after_finishing(
    backend: BackendSpec, store_factory
) -> None:
    """A writer's size counts what was written; write after complete or abort raises
    StoreError; complete and abort are idempotent and abort after complete is a no-op."""
    lm = store_factory.open().large_messages
    w = lm.create(1)
    assert w.write(b"abc") == 3
    assert w.write(memoryview(b"defg")) == 4
    assert w.size == 7
    w.complete()
    w.complete()
    w.abort()
    with pytest.raises(StoreError):
        w.write(b"late")
    with lm.open(1) as r:
        assert hashlib.sha256(r.read()).digest() == hashlib.sha256(b"abcdefg").digest()
