"""Whole chunks of a ``bytes`` write go to the file store without a copy (``ChunkBuffer``'s
``direct``): the files written that way are byte for byte the files written from copies
(``bytearray`` and ``memoryview`` writes), for every cut of a body into pieces, and the
chunk handed over is a view of the caller's own bytes."""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import pytest

from store.fs import OsFileSystem
from store.large.chunks import ChunkBuffer
from store.large.files import FileLargeMessages

CHUNK = 64


def _cuts(rng: random.Random, size: int) -> list[int]:
    """Piece sizes adding up to ``size``: around, below and above the chunk size."""
    out: list[int] = []
    while sum(out) < size:
        out.append(min(size - sum(out), rng.choice([1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK, 7])))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_files_from_bytes_and_from_copies_are_identical(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    size = rng.choice([0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 5 * CHUNK + 3, 40 * CHUNK])
    body = rng.randbytes(size)
    cuts = _cuts(rng, size)
    kinds = {"bytes": bytes, "bytearray": bytearray, "memoryview": memoryview}
    files: dict[str, bytes] = {}
    for name, kind in kinds.items():
        lm = FileLargeMessages(str(tmp_path / name), fs=OsFileSystem(), chunk_size=CHUNK)
        with lm.create(7) as w:
            at = 0
            for cut in cuts:
                assert w.write(kind(body[at : at + cut])) == cut
                at += cut
            assert w.size == size
        with lm.open(7) as r:
            assert r.read() == body
        files[name] = (tmp_path / name / "7.msg").read_bytes()
        lm.close()
    assert files["bytes"] == files["bytearray"] == files["memoryview"], cuts


def test_a_whole_chunk_of_bytes_is_handed_over_uncopied() -> None:
    """Only a chunk that starts on a boundary and lies wholly in one ``bytes`` write goes
    over uncopied, with its CRC-32; the rest is copied into frames as before."""
    emitted: list[int] = []
    direct: list[tuple[int, int, memoryview]] = []

    def chunks() -> ChunkBuffer:
        return ChunkBuffer(
            CHUNK,
            lambda i, frame: emitted.append(i),
            direct=lambda i, crc, payload: direct.append((i, crc, payload)),
        )

    data = bytes(range(CHUNK)) * 2 + b"tail"
    buf = chunks()
    buf.write(b"x")  # chunk 0 starts with it: copied; chunk 1 lies wholly in data
    buf.write(data)
    assert emitted == [0] and [(i, p.obj) for i, _, p in direct] == [(1, data)]
    assert direct[0][1] == zlib.crc32(direct[0][2])
    last = buf.finish()
    assert last is not None and bytes(last[4:]) == data[-(len(data) - 63 - CHUNK) :]
    direct.clear()
    aligned = bytes(range(CHUNK, 0, -1)) * 3
    buf = chunks()
    buf.write(aligned)
    assert [i for i, _, _ in direct] == [0, 1, 2]
    assert all(p.obj is aligned for _, _, p in direct)  # views of the caller's bytes
    assert buf.finish() is None and buf.size == 3 * CHUNK and buf.index == 3
    direct.clear()
    buf = chunks()
    buf.write(bytearray(aligned))  # mutable: copied, never handed over
    buf.write(memoryview(aligned))
    assert direct == []
