"""The page-record codecs of the message journal (store.messaging.page_records): the bytes
each record encodes to (documented in the module's table), round trips, and refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.messaging.page_records import (
    VERSION,
    CursorAck,
    PageComplete,
    PageCounterIncrement,
    PageCounterPending,
    PageCounterValue,
    PageRecord,
    PageTransaction,
    PageTransactionUpdate,
    decode_page_record,
)
from store.paging.api import PagePosition

I64 = st.integers(-(2**63), 2**63 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)

# (record, its user record type, its body in hex): the module docstring's table, byte for byte.
GOLDEN: list[tuple[PageRecord, int, str]] = [
    (PageTransaction(7, 3), 35, "01 0000000000000007 00000003"),
    (PageTransactionUpdate(7, -1), 35, "01 0000000000000007 ffffffff"),
    (CursorAck(2, 5, 9), 39, "01 0000000000000002 0000000000000005 00000009"),
    (PageCounterValue(2, 10, 4096), 40, "01 0000000000000002 000000000000000a 0000000000001000"),
    (PageCounterIncrement(2, -3, -300), 41, "01 0000000000000002 fffffffd fffffffffffffed4"),
    (PageComplete(2, 5, 100), 42, "01 0000000000000002 0000000000000005 00000064"),
    (PageCounterPending(2, 6), 43, "01 0000000000000002 0000000000000006"),
]


@pytest.mark.parametrize(("record", "record_type", "body"), GOLDEN, ids=lambda v: str(v)[:30])
def test_each_record_encodes_to_its_documented_bytes(
    record: PageRecord, record_type: int, body: str
) -> None:
    assert record.record_type == record_type
    assert record.encode() == bytes.fromhex(body)
    update = isinstance(record, PageTransactionUpdate)
    assert decode_page_record(record_type, bytes.fromhex(body), update=update) == record


def test_a_cursor_ack_names_its_page_position() -> None:
    ack = CursorAck.at(4, PagePosition(12, 0))
    assert ack == CursorAck(4, 12, 0)
    assert ack.position == PagePosition(12, 0)


def test_page_positions_order_as_appended() -> None:
    positions = [PagePosition(2, 0), PagePosition(1, 7), PagePosition(1, 0), PagePosition(2, 1)]
    assert sorted(positions) == [
        PagePosition(1, 0),
        PagePosition(1, 7),
        PagePosition(2, 0),
        PagePosition(2, 1),
    ]


@given(queue=I64, page=I64, index=I32, value=I64, size=I64, count=I32)
def test_every_record_round_trips(
    queue: int, page: int, index: int, value: int, size: int, count: int
) -> None:
    for record in (
        PageTransaction(queue, count),
        CursorAck(queue, page, index),
        PageCounterValue(queue, value, size),
        PageCounterIncrement(queue, count, size),
        PageComplete(queue, page, count),
        PageCounterPending(queue, page),
    ):
        assert decode_page_record(record.record_type, record.encode()) == record
    update = PageTransactionUpdate(queue, count)
    assert decode_page_record(35, update.encode(), update=True) == update
    ack = CursorAck(queue, page, index)
    assert CursorAck.body_of(queue, PagePosition(page, index)) == ack.encode()


def test_a_field_too_wide_for_its_slot_is_refused_when_encoding() -> None:
    with pytest.raises(ValueError, match="CursorAck"):
        CursorAck(1, 1, 2**31).encode()
    with pytest.raises(ValueError, match="CursorAck"):
        CursorAck.body_of(1, PagePosition(1, 2**31))


@pytest.mark.parametrize(
    ("record_type", "body", "message"),
    [
        (36, b"", "type 36 is not a page record"),
        (39, CursorAck(1, 2, 3).encode()[:-1], r"CursorAck \(type 39\) body is 20 bytes"),
        (43, PageCounterPending(1, 2).encode() + b"\0", "expected 17"),
        (42, bytes([VERSION + 1]) + PageComplete(1, 2, 3).encode()[1:], "version 2, not 1"),
    ],
)
def test_bodies_of_the_wrong_type_length_or_version_are_refused(
    record_type: int, body: bytes, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        decode_page_record(record_type, body)
