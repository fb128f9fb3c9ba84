"""``damaged_records`` and ``readable_records`` on damage to a record's start byte or length
(store.paging.format): the next valid record is found byte by byte; a record whose header
alone is damaged is mended, damage across a header and more holds as many records as the
page summary's count leaves it, and without that count (or with two such stretches, or a
count that cannot fit) the damage is refused naming the offset."""

from __future__ import annotations

import pytest

from store.errors import CorruptionError
from store.paging.format import (
    FRAMING,
    damaged_records,
    encode_record,
    page_binding,
    readable_records,
)

BOUND = page_binding("orders", 3)
PAYLOADS = [b"record %d " % i + b"x" * (40 + 7 * i) for i in range(6)]


def _page() -> tuple[bytearray, list[int]]:
    """Six records bound to page 3 of ``orders``, and each one's offset."""
    data = bytearray()
    offsets = []
    for p in PAYLOADS:
        offsets.append(len(data))
        data += encode_record(p, BOUND)
    return data, offsets


def _flip(data: bytearray, at: int, width: int = 1) -> None:
    for i in range(at, at + width):
        data[i] ^= 0xFF


@pytest.mark.parametrize("record", [0, 2, 5])
@pytest.mark.parametrize("at", [0, 1, 2, 4], ids=["start", "length-0", "length-1", "length-3"])
def test_a_damaged_header_alone_is_mended_wherever_the_record_is(record: int, at: int) -> None:
    data, offsets = _page()
    whole = bytes(data)
    _flip(data, offsets[record] + at)
    (bad,) = damaged_records(data, path="p", binding=BOUND)
    length = len(encode_record(PAYLOADS[record], BOUND))
    assert (bad.index, bad.offset, bad.length, bad.records) == (record, offsets[record], length, 1)
    assert bad.header == whole[offsets[record] : offsets[record] + 5]
    records, listed = readable_records(data, path="p", binding=BOUND)
    assert records == PAYLOADS and listed == [bad]


def test_damage_across_two_headers_holds_what_the_summary_count_leaves() -> None:
    data, offsets = _page()
    _flip(data, offsets[2], offsets[3] - offsets[2] + FRAMING + 3)  # records 2 and 3
    with pytest.raises(CorruptionError, match="page summary") as refused:
        damaged_records(data, path="p", binding=BOUND)
    assert refused.value.offset == offsets[2]
    (bad,) = damaged_records(data, path="p", binding=BOUND, records=6)
    assert (bad.index, bad.offset, bad.length, bad.records, bad.header) == (
        2, offsets[2], offsets[4] - offsets[2], 2, None,
    )  # fmt: skip
    records, _ = readable_records(data, path="p", binding=BOUND, records=6)
    assert records == [PAYLOADS[0], PAYLOADS[1], None, None, PAYLOADS[4], PAYLOADS[5]]


def test_a_flipped_payload_after_a_counted_stretch_keeps_its_index() -> None:
    data, offsets = _page()
    _flip(data, offsets[1], offsets[2] - offsets[1] + FRAMING + 3)  # records 1 and 2
    _flip(data, offsets[4] + FRAMING + 5)  # record 4's payload
    stretch, flipped = damaged_records(data, path="p", binding=BOUND, records=6)
    assert (stretch.index, stretch.records) == (1, 2)
    assert (flipped.index, flipped.offset, flipped.records) == (4, offsets[4], 1)


@pytest.mark.parametrize("records", [4, 6 + 40])
def test_a_summary_count_that_cannot_fit_is_refused(records: int) -> None:
    data, offsets = _page()
    _flip(data, offsets[2], offsets[3] - offsets[2] + FRAMING + 3)
    with pytest.raises(CorruptionError, match="leaves"):
        damaged_records(data, path="p", binding=BOUND, records=records)


def test_two_stretches_of_unknown_extent_are_refused() -> None:
    data, offsets = _page()
    _flip(data, offsets[0], offsets[1] + FRAMING + 3)
    _flip(data, offsets[3], offsets[4] - offsets[3] + FRAMING + 3)
    with pytest.raises(CorruptionError, match="second such stretch") as refused:
        damaged_records(data, path="p", binding=BOUND, records=6)
    assert refused.value.offset == offsets[3]
