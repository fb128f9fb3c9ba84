"""A chunk is bound to its body and its place (store.large.chunks, format version 2): two
frames swapped within a file, two chunk rows whose filenames were swapped, or a chunk copied
from another body raise CorruptionError naming the body and the chunk's offset, never wrong
bytes; a version 1 body, built here by hand in the old format (checksums of the bytes alone),
still reads, on the file store and every database."""

from __future__ import annotations

import os
import struct
import zlib

import pytest
import sqlalchemy as sa

from store.errors import CorruptionError
from store.large.api import LargeMessageStore
from store.large.database import DatabaseLargeMessages, chunk_name, msg_name
from store.large.files import FileLargeMessages, frame_offset
from tests.large.support import body_bytes, chunk_size_of
from tests.support.backends import BackendSpec, StoreFactory


def _body_path(lm: LargeMessageStore, mid: int) -> str:
    if isinstance(lm, FileLargeMessages):
        return lm.paths(mid)[1]
    assert isinstance(lm, DatabaseLargeMessages)
    return f"{lm.table.name}/{msg_name(mid)}"


def _read_whole(lm: LargeMessageStore, mid: int) -> bytes:
    with lm.open(mid) as r:
        return r.read()


def _frame(lm: LargeMessageStore, mid: int, index: int) -> bytes:
    """Chunk ``index``'s stored frame (crc + payload) of a body."""
    cs = chunk_size_of(lm)
    if isinstance(lm, FileLargeMessages):
        with open(lm.paths(mid)[1], "rb") as f:
            f.seek(frame_offset(index, cs))
            return f.read(4 + cs)  # full chunks only
    assert isinstance(lm, DatabaseLargeMessages)
    t = lm.table
    with lm.engine.connect() as conn:
        data = conn.execute(
            sa.select(t.c.data).where(t.c.filename == chunk_name(mid, index))
        ).scalar_one()
        conn.rollback()
    return bytes(data)


def _put_frame(lm: LargeMessageStore, mid: int, index: int, frame: bytes) -> None:
    """Overwrite chunk ``index``'s stored frame (same length) of a body."""
    if isinstance(lm, FileLargeMessages):
        with open(lm.paths(mid)[1], "r+b") as f:
            f.seek(frame_offset(index, chunk_size_of(lm)))
            f.write(frame)
        return
    assert isinstance(lm, DatabaseLargeMessages)
    t = lm.table
    with lm.engine.begin() as conn:
        conn.execute(sa.update(t).where(t.c.filename == chunk_name(mid, index)).values(data=frame))


def _swap(lm: LargeMessageStore, mid: int, a: int, b: int) -> None:
    """Swap chunks ``a`` and ``b`` of a body: the frames in the file, the rows' filenames in
    the table (what an operator's or a tool's mistake does)."""
    if isinstance(lm, FileLargeMessages):
        fa, fb = _frame(lm, mid, a), _frame(lm, mid, b)
        _put_frame(lm, mid, a, fb)
        _put_frame(lm, mid, b, fa)
        return
    assert isinstance(lm, DatabaseLargeMessages)
    t = lm.table
    na, nb, tmp = chunk_name(mid, a), chunk_name(mid, b), f"{mid}.swap.tmp"
    with lm.engine.begin() as conn:
        for old, new in ((na, tmp), (nb, na), (tmp, nb)):
            conn.execute(sa.update(t).where(t.c.filename == old).values(filename=new))


def test_two_chunks_swapped_raise_corruption_not_wrong_bytes(
    body_backend: BackendSpec, body_store_factory: StoreFactory
) -> None:
    """Chunks 0 and 1 of a three-chunk body swapped: the first read raises CorruptionError
    naming the body at offset 0, and a read from chunk 1 raises it at chunk 1's offset; the
    untouched last chunk still reads."""
    lm = body_store_factory.open().large_messages
    cs = chunk_size_of(lm)
    data = body_bytes(70, 2 * cs + 300)
    with lm.create(70) as w:
        w.write(data)
    _swap(lm, 70, 0, 1)
    with pytest.raises(CorruptionError) as caught:
        _read_whole(lm, 70)
    assert (caught.value.path, caught.value.offset) == (_body_path(lm, 70), 0)
    with lm.open(70) as r:
        r.seek(cs + 10)
        with pytest.raises(CorruptionError) as caught:
            r.read(10)
        assert caught.value.offset == cs
        r.seek(2 * cs)
        assert r.read() == data[2 * cs :]


def test_chunk_copied_from_another_body_raises_corruption(
    body_backend: BackendSpec, body_store_factory: StoreFactory
) -> None:
    """Chunk 1 of body 72 overwritten with chunk 1 of body 71 (a valid frame of the same
    index and length): reading body 72 raises CorruptionError at chunk 1's offset."""
    lm = body_store_factory.open().large_messages
    cs = chunk_size_of(lm)
    for mid in (71, 72):
        with lm.create(mid) as w:
            w.write(body_bytes(mid, 2 * cs + 7))
    _put_frame(lm, 72, 1, _frame(lm, 71, 1))
    with pytest.raises(CorruptionError) as caught:
        _read_whole(lm, 72)
    assert (caught.value.path, caught.value.offset) == (_body_path(lm, 72), cs)
    assert _read_whole(lm, 71) == body_bytes(71, 2 * cs + 7)


# -- version 1, built by hand --------------------------------------------------------------------


def _v1_frames(data: bytes, chunk_size: int) -> list[bytes]:
    """Version 1 frames: CRC-32 of the payload alone, little-endian, then the payload."""
    out = []
    for start in range(0, len(data), chunk_size):
        payload = data[start : start + chunk_size]
        out.append(struct.pack("<I", zlib.crc32(payload)) + payload)
    return out


def _write_v1(lm: LargeMessageStore, mid: int, data: bytes, chunk_size: int) -> None:
    """Store ``data`` as body ``mid`` in format version 1, bypassing the writer."""
    frames = _v1_frames(data, chunk_size)
    if isinstance(lm, FileLargeMessages):
        head = struct.pack("<4sHHIQq", b"SLMB", 1, 0, chunk_size, len(data), mid)
        with open(lm.paths(mid)[1], "wb") as f:
            f.write(head + struct.pack("<I", zlib.crc32(head)) + b"".join(frames))
        return
    assert isinstance(lm, DatabaseLargeMessages)
    count = len(frames)
    head = struct.pack("<4sHHIQqQ", b"SLMD", 1, 0, chunk_size, len(data), mid, count)
    rows = [
        {"filename": chunk_name(mid, k), "extension": "chunk", "data": frame}
        for k, frame in enumerate(frames)
    ]
    rows.append(
        {
            "filename": msg_name(mid),
            "extension": "msg",
            "data": head + struct.pack("<I", zlib.crc32(head)),
        }
    )
    with lm.engine.begin() as conn:
        for row in rows:
            conn.execute(sa.insert(lm.table).values(row))


@pytest.mark.parametrize("chunk_size", [4096, 1 << 20], ids=["4k-chunks", "1m-chunks"])
def test_version_1_body_still_reads(
    body_backend: BackendSpec, body_store_factory: StoreFactory, chunk_size: int
) -> None:
    """A body written in format version 1 (by hand: header/descriptor version 1, frames
    checked by their bytes alone) is listed, sized and read back whole after a reopen; a
    flipped byte in one of its chunks is still a CorruptionError at that chunk's offset."""
    lm = body_store_factory.open().large_messages
    data = body_bytes(80, 2 * chunk_size + 99)
    _write_v1(lm, 80, data, chunk_size)
    lm = body_store_factory.reopen().large_messages
    assert lm.ids() == [80]
    assert lm.size(80) == len(data)
    assert _read_whole(lm, 80) == data
    with lm.open(80) as r:
        r.seek(chunk_size + 5)
        assert r.read(100) == data[chunk_size + 5 : chunk_size + 105]
    frame = bytearray(_v1_frames(data, chunk_size)[1])
    frame[4 + 17] ^= 0x20
    if isinstance(lm, FileLargeMessages):
        with open(lm.paths(80)[1], "r+b") as f:
            f.seek(frame_offset(1, chunk_size))
            f.write(frame)
    else:
        assert isinstance(lm, DatabaseLargeMessages)
        t = lm.table
        with lm.engine.begin() as conn:
            name = chunk_name(80, 1)
            conn.execute(sa.update(t).where(t.c.filename == name).values(data=bytes(frame)))
    with pytest.raises(CorruptionError) as caught:
        _read_whole(lm, 80)
    assert (caught.value.path, caught.value.offset) == (_body_path(lm, 80), chunk_size)
    lm.delete(80)
    assert lm.ids() == []
    if isinstance(lm, FileLargeMessages):
        assert os.listdir(lm.directory) == []
