"""The page record format (store.paging.format): framing, and which damage is a torn tail of
the page being written (ignored) and which is a CorruptionError naming the page and offset."""

from __future__ import annotations

import pytest

from store.errors import CorruptionError
from store.paging.format import (
    FRAMING,
    decode_page,
    encode_record,
    encoded_size,
    page_file_name,
    page_number_of,
    python_encode_record,
    scan_page,
)
from store.paging.memory import PageRoller

RECORDS = [b"", b"a", "é✓".encode(), bytes(range(256)), b"x" * 1000]
PAGE = b"".join(encode_record(r) for r in RECORDS)
# Offset of each record in PAGE, and of the end.
OFFSETS = [sum(encoded_size(len(r)) for r in RECORDS[:i]) for i in range(len(RECORDS) + 1)]


def test_a_record_is_framed_with_ten_bytes() -> None:
    framed = encode_record(b"hello")
    assert FRAMING == 10 and len(framed) == encoded_size(5) == 15
    assert framed[0] == 0x7B and framed[-1] == 0x7D
    assert framed[1:5] == (5).to_bytes(4, "big")
    assert framed[9:14] == b"hello"


@pytest.mark.parametrize("record", RECORDS, ids=["empty", "1", "utf-8", "256", "1000"])
def test_the_compiled_framing_writes_what_the_python_one_writes(record: bytes) -> None:
    """``encode_record`` (compiled where built) and its Python reference frame every payload
    alike, whatever buffer it comes in (the 256- and 1000-byte ones take the folded CRC)."""
    for payload in (record, bytearray(record), memoryview(record)):
        assert encode_record(payload) == python_encode_record(record)
    (decoded,) = decode_page(encode_record(record), path="p", torn_tail=False)
    assert decoded == record


@pytest.mark.parametrize("torn_tail", [False, True])
def test_a_whole_page_decodes_to_its_records(torn_tail: bool) -> None:
    assert decode_page(PAGE, path="p", torn_tail=torn_tail) == RECORDS
    assert scan_page(PAGE, path="p", torn_tail=torn_tail) == (RECORDS, len(PAGE))


@pytest.mark.parametrize("cut", [1, 5, 9, 10, 500, OFFSETS[-1] - OFFSETS[-2] - 1])
def test_a_cut_off_last_record_is_a_torn_tail_of_the_page_being_written(cut: int) -> None:
    torn = PAGE[: len(PAGE) - cut]
    records, end = scan_page(torn, path="p", torn_tail=True)
    assert records == RECORDS[:-1]
    assert end == OFFSETS[-2]


def test_the_same_cut_on_a_finished_page_is_corruption_at_the_last_record() -> None:
    with pytest.raises(CorruptionError) as caught:
        decode_page(PAGE[:-3], path="000000001.page", torn_tail=False)
    assert caught.value.path == "000000001.page"
    assert caught.value.offset == OFFSETS[-2]


@pytest.mark.parametrize("zeros", [1, 9, 10, 4096])
def test_zeros_after_the_last_record_are_a_torn_tail(zeros: int) -> None:
    assert decode_page(PAGE + bytes(zeros), path="p", torn_tail=True) == RECORDS


# Every record but the last, every field (an empty record has no payload byte to flip).
FLIPS = [
    (record, at)
    for record in range(len(RECORDS) - 1)
    for at in ("start", "length", "checksum", "payload", "end")
    if RECORDS[record] or at != "payload"
]


@pytest.mark.parametrize(("record", "at"), FLIPS)
def test_a_flipped_byte_before_the_last_record_is_reported_with_its_place(
    record: int, at: str
) -> None:
    offset = OFFSETS[record]
    size = len(RECORDS[record])
    where = {"start": 0, "length": 4, "checksum": 6, "payload": 9, "end": 9 + size}[at]
    damaged = bytearray(PAGE)
    damaged[offset + where] ^= 0x20
    for torn_tail in (False, True):
        with pytest.raises(CorruptionError) as caught:
            decode_page(bytes(damaged), path="/x/000000003.page", torn_tail=torn_tail)
        assert caught.value.path == "/x/000000003.page"
        assert caught.value.offset == offset
        assert "damaged page record" in str(caught.value)


def test_page_file_names_are_nine_digits() -> None:
    assert page_file_name(1) == "000000001.page"
    assert page_file_name(123456789) == "123456789.page"
    assert page_number_of("000000042.page") == 42
    assert page_number_of("000000042.page.tmp") is None
    assert page_number_of("address.txt") is None
    assert page_number_of("000000000.page") is None
    with pytest.raises(ValueError):
        page_file_name(0)


@pytest.mark.parametrize(
    ("page_size", "payloads", "expected"),
    [
        # each record is len + 10 bytes; a page takes records while they fit
        (30, [10, 10, 10], [(1, 0), (2, 0), (3, 0)]),
        (40, [10, 10, 10], [(1, 0), (1, 1), (2, 0)]),
        (40, [0, 0, 0, 0, 0], [(1, 0), (1, 1), (1, 2), (1, 3), (2, 0)]),
        # a record larger than the page gets a page of its own
        (20, [5, 100, 5], [(1, 0), (2, 0), (3, 0)]),
        (20, [100, 100], [(1, 0), (2, 0)]),
        # exactly full is still the same page
        (20, [0, 0], [(1, 0), (1, 1)]),
    ],
)
def test_the_roll_rule(
    page_size: int, payloads: list[int], expected: list[tuple[int, int]]
) -> None:
    roller = PageRoller(page_size)
    placed = [roller.place(n) for n in payloads]
    assert [(p.page, p.index) for p in placed] == expected
