"""Damaged bodies (store.large.api rule 5, store.large.files validity rules): a flipped byte
in a chunk, a truncated or damaged ``.msg`` file, a damaged descriptor row raise
CorruptionError naming the body and the offset, and no wrong byte is ever returned."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from store import StoreConfig, open_store
from store.errors import CorruptionError, LostDataError
from store.large.database import DatabaseLargeMessages, msg_name
from store.large.files import FileLargeMessages
from tests.large.support import body_bytes, chunk_size_of, damage_chunk
from tests.support.backends import BackendSpec, StoreFactory, file_config_mapping


def _body_path(lm: object, mid: int) -> str:
    if isinstance(lm, FileLargeMessages):
        return lm.paths(mid)[1]
    assert isinstance(lm, DatabaseLargeMessages)
    return f"{lm.table.name}/{msg_name(mid)}"


def test_flipped_byte_in_a_chunk_raises_corruption_before_any_wrong_byte(
    body_backend: BackendSpec, body_store_factory: StoreFactory
) -> None:
    """A flipped byte in chunk 1 of 3: a sequential read returns exactly the body's first
    chunk, then raises CorruptionError naming the body and chunk 1's body offset; chunks 0
    and 2 still read; a read landing inside chunk 1 raises too."""
    lm = body_store_factory.open().large_messages
    cs = chunk_size_of(lm)
    data = body_bytes(42, 2 * cs + 500)
    with lm.create(42) as w:
        w.write(data)
    damage_chunk(lm, 42, 1, at=1234)
    got = bytearray()
    with lm.open(42) as r, pytest.raises(CorruptionError) as caught:
        while piece := r.read(65536):
            got += piece
    assert bytes(got) == data[: len(got)]
    assert len(got) == cs
    assert caught.value.offset == cs
    assert caught.value.path == _body_path(lm, 42)
    with lm.open(42) as r:
        assert r.read(cs) == data[:cs]
        r.seek(2 * cs)
        assert r.read() == data[2 * cs :]
        r.seek(cs + 5000)
        with pytest.raises(CorruptionError):
            r.read(10)


def test_whole_chunk_readinto_of_a_damaged_chunk_leaves_none_of_its_bytes(
    body_backend: BackendSpec, body_store_factory: StoreFactory
) -> None:
    """``readinto`` of a buffer of a whole chunk, from a chunk's first byte (the
    BufferedReader hands such reads to the raw reader with the caller's buffer): chunk 0
    comes back whole; chunk 1, damaged, raises CorruptionError at its offset, and the buffer
    then holds no byte of it."""
    lm = body_store_factory.open().large_messages
    cs = chunk_size_of(lm)
    data = body_bytes(43, 2 * cs + 500)
    with lm.create(43) as w:
        w.write(data)
    damage_chunk(lm, 43, 1, at=cs // 2)
    buf = bytearray(b"\xaa" * cs)
    with lm.open(43) as r:
        assert r.readinto(buf) == cs
        assert buf[:cs] == data[:cs]
        buf[:] = b"\xaa" * len(buf)
        with pytest.raises(CorruptionError) as caught:
            r.readinto(buf)
        assert caught.value.offset == cs
        assert set(buf) <= {0, 0xAA}
        r.seek(2 * cs)
        assert r.readinto(buf) == 500
        assert buf[:500] == data[2 * cs :]
        r.seek(0)
        with pytest.raises(CorruptionError):
            r.readinto(bytearray(2 * cs))


def _file_store(tmp_path: Path) -> StoreConfig:
    return StoreConfig.from_mapping(file_config_mapping(tmp_path, "NIO"))


@pytest.mark.parametrize(
    ("cut", "offset"),
    [
        (lambda cs: 20, 0),  # inside the header
        (lambda cs: 32 + 4 + cs + 4 + 100, 1),  # inside chunk 1: chunk 0 is whole
        (lambda cs: 32 + 2 * (4 + cs) + 4 + 10, 2),  # the last byte of the last chunk gone
    ],
    ids=["in-header", "in-chunk-1", "last-byte"],
)
def test_truncated_msg_file_raises_corruption_at_open(
    tmp_path: Path, cut: Callable[[int], int], offset: int
) -> None:
    """A truncated ``.msg`` file is never a short body: open and size raise CorruptionError
    naming the file and the body offset of the first chunk it does not hold whole (0 when
    the header itself is cut); a cut past the header is LostDataError."""
    with open_store(_file_store(tmp_path)) as store:
        lm = store.large_messages
        cs = chunk_size_of(lm)
        with lm.create(5) as w:
            w.write(body_bytes(5, 2 * cs + 11))
        path = lm.paths(5)[1]  # type: ignore[attr-defined]
        os.truncate(path, cut(cs))
        for call in (lm.open, lm.size):
            with pytest.raises(CorruptionError) as caught:
                call(5)
            assert caught.value.path == path
            assert caught.value.offset == offset * cs
            # past a whole header, what is missing was written: LostDataError (docs/large.md)
            assert isinstance(caught.value, LostDataError) == (offset > 0)
        assert lm.ids() == [5]  # listed: an operator sees it, and can delete it
        lm.delete(5)
        assert lm.ids() == []


@pytest.mark.parametrize("at", [0, 5, 12, 20, 29], ids=["magic", "version", "size", "id", "crc"])
def test_damaged_msg_header_raises_corruption(tmp_path: Path, at: int) -> None:
    """A flipped byte anywhere in the 32-byte header (magic, version, size, id, checksum)
    raises CorruptionError at offset 0 from open and size."""
    with open_store(_file_store(tmp_path)) as store:
        lm = store.large_messages
        with lm.create(6) as w:
            w.write(b"abc" * 1000)
        path = lm.paths(6)[1]  # type: ignore[attr-defined]
        with open(path, "r+b") as f:
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 0x01]))
        for call in (lm.open, lm.size):
            with pytest.raises(CorruptionError) as caught:
                call(6)
            assert (caught.value.path, caught.value.offset) == (path, 0)


def test_msg_file_of_another_id_raises_corruption(tmp_path: Path) -> None:
    """A valid body renamed to another id's name is refused (the header names its id)."""
    with open_store(_file_store(tmp_path)) as store:
        lm = store.large_messages
        with lm.create(7) as w:
            w.write(b"seven")
        os.rename(lm.paths(7)[1], lm.paths(8)[1])  # type: ignore[attr-defined]
        with pytest.raises(CorruptionError):
            lm.open(8)


def test_damaged_descriptor_row_raises_corruption(
    body_backend: BackendSpec, body_store_factory: StoreFactory
) -> None:
    """Database: a damaged ``<id>.msg`` descriptor raises CorruptionError (offset 0) from
    open and size, and delete still removes every row of the body. File store: a damaged
    header, the same."""
    lm = body_store_factory.open().large_messages
    with lm.create(9) as w:
        w.write(body_bytes(9, chunk_size_of(lm) + 1))
    if isinstance(lm, FileLargeMessages):
        with open(lm.paths(9)[1], "r+b") as f:
            f.seek(14)
            f.write(b"\xff")
    else:
        import sqlalchemy as sa

        assert isinstance(lm, DatabaseLargeMessages)
        t = lm.table
        with lm.engine.begin() as conn:
            conn.execute(sa.update(t).where(t.c.filename == msg_name(9)).values(data=b"\x00" * 40))
    for call in (lm.open, lm.size):
        with pytest.raises(CorruptionError) as caught:
            call(9)
        assert (caught.value.path, caught.value.offset) == (_body_path(lm, 9), 0)
    lm.delete(9)
    assert lm.ids() == []
    from tests.large.support import stored_names

    assert stored_names(lm) == []


def test_reader_rejects_bad_seeks(backend: BackendSpec, store_factory: StoreFactory) -> None:
    """seek to a negative position or with an unknown whence raises ValueError (all
    back-ends, as files do)."""
    lm = store_factory.open().large_messages
    with lm.create(1) as w:
        w.write(b"x")
    with lm.open(1) as r:
        with pytest.raises((ValueError, OSError)):
            r.seek(-1)
        with pytest.raises((ValueError, OSError)):
            r.seek(0, 7)
        assert r.seek(0, io.SEEK_END) == 1
