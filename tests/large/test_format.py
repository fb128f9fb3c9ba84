"""The documented large-message formats match the code: the file header table of
store.large.files, the frame table of store.large.chunks and the descriptor table in
store.db.schema (docs/conventions.md#2), and both headers round-trip."""

from __future__ import annotations

import re
import struct

import pytest

import store.db.schema as schema
from store.large import chunks, database, files
from tests.support.doctables import tables


def _sizes(s: struct.Struct) -> list[int]:
    out = []
    for count, code in re.findall(r"(\d*)([xcbB?hHiIlLqQnNefdsp])", s.format):
        n = int(count) if count else 1
        out.extend([n] if code == "s" else [struct.calcsize("<" + code)] * n)
    return out


def _table(doc: str | None, title: str) -> list[tuple[str, str, str]]:
    return next(rows for t, rows in tables(doc or "").items() if t.startswith(title))


@pytest.mark.parametrize(
    ("doc", "title", "structs", "total"),
    [
        (files.__doc__, "File header", (files.HEADER, files.HEADER_CRC), files.HEADER_SIZE),
        (
            schema.__doc__,
            "Large-message descriptor",
            (database.DESCRIPTOR, database.DESCRIPTOR_CRC),
            database.DESCRIPTOR_SIZE,
        ),
    ],
    ids=["file-header", "descriptor"],
)
def test_table_matches_struct(
    doc: str, title: str, structs: tuple[struct.Struct, ...], total: int
) -> None:
    rows = _table(doc, title)
    assert [int(size) for _o, size, _f in rows] == [n for s in structs for n in _sizes(s)]
    offset = 0
    for off, size, field in rows:
        assert int(off) == offset, field
        offset += int(size)
    assert offset == total
    assert all(s.format.startswith("<") for s in structs)


def test_frame_table_matches_crc_field() -> None:
    rows = _table(chunks.__doc__, "Frame")
    assert [(o, s, f) for o, s, f in rows] == [("0", "4", "crc"), ("4", "n", "payload")]
    assert chunks.CRC.size == 4


def test_headers_round_trip() -> None:
    head = files.encode_header(-5, 4096, 10_000)
    assert files.check_header("p", -5, head, 32 + 3 * 4 + 10_000)[:2] == (4096, 10_000)
    desc = database.encode_descriptor(2**63 - 1, 4096, 8192)
    assert database.decode_descriptor("p", 2**63 - 1, desc)[:3] == (4096, 8192, 2)


def test_a_version_2_frame_checksum_is_the_documented_one() -> None:
    """Rule 2 of store.large.chunks, computed here from its words: CRC-32 of the message id
    (signed 64-bit LE), the chunk index (unsigned 64-bit LE) and the payload; version 1 (no
    id), of the payload alone."""
    import zlib

    frames: list[bytes] = []
    buf = chunks.ChunkBuffer(4, lambda k, f: frames.append(bytes(f)), message_id=-7)
    buf.write(bytearray(b"abcdefg"))
    last = buf.finish()
    assert last is not None
    frames.append(bytes(last))
    for k, payload in enumerate((b"abcd", b"efg")):
        key = struct.pack("<qQ", -7, k)
        assert frames[k] == struct.pack("<I", zlib.crc32(key + payload)) + payload
    assert chunks.FRAME_KEY.size == 16
    assert chunks.frame_seed(None, 3) == 0
