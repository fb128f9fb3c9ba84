"""The golden page of format version 1 (tests/testdata/paging/page-v1.page, written by
tests/paging/make_golden.py): today's encoder produces it byte for byte, it decodes to the
known records, and its framing is the documented one (checked here field by field)."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from store.paging.format import decode_page
from tests.paging import make_golden

GOLDEN = Path(make_golden.GOLDEN_DIR) / make_golden.PAGE_FILE


def test_the_encoder_still_writes_exactly_the_committed_bytes() -> None:
    assert make_golden.build() == GOLDEN.read_bytes(), "the page format changed: see make_golden"


def test_the_golden_page_decodes_to_the_known_records() -> None:
    data = GOLDEN.read_bytes()
    assert decode_page(data, path=str(GOLDEN), torn_tail=False) == list(make_golden.RECORDS)


def test_the_golden_page_has_the_documented_framing() -> None:
    """'{', u32 length, u32 CRC-32 of length+payload, payload, '}' (big-endian)."""
    data = GOLDEN.read_bytes()
    offset = 0
    for record in make_golden.RECORDS:
        start, length, crc = struct.unpack_from(">BII", data, offset)
        payload = data[offset + 9 : offset + 9 + length]
        assert (start, length, payload) == (0x7B, len(record), record)
        assert crc == zlib.crc32(payload, zlib.crc32(length.to_bytes(4, "big")))
        assert data[offset + 9 + length] == 0x7D
        offset += 10 + length
    assert offset == len(data)


def test_the_generator_writes_where_the_test_reads(tmp_path: Path) -> None:
    path = make_golden.write(str(tmp_path))
    assert Path(path).read_bytes() == GOLDEN.read_bytes()
