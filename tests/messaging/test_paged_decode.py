"""``PagedMessage.decode``'s unpacked path (issue 27: a load decodes every paged message)
gives what the field-by-field reader gives, and refuses what it refuses."""

from __future__ import annotations

import pytest

from store.messaging.message_records import PagedMessage

CASES = [
    PagedMessage(7, 0, 45, b"record", (3,)),
    PagedMessage(2**62, 9, 30, b"", ()),
    PagedMessage(-5, 1, 45, b"\x00" * 300, (1, 2**40, -3)),
]


@pytest.mark.parametrize("paged", CASES, ids=["one queue", "large, no queue", "three queues"])
def test_the_unpacked_decode_equals_the_field_by_field_one(paged: PagedMessage):
    data = paged.encode()
    assert PagedMessage.decode(data) == PagedMessage._decode_fields(data) == paged


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (CASES[2].encode()[:-1], "ends in queue_id"),
        (CASES[0].encode() + b"\x00", "trailing|left|bytes"),
        (b"\x09" + CASES[0].encode()[1:], "version"),
        (CASES[0].encode()[:10], "ends in"),
        (b"", "empty"),
    ],
    ids=["truncated", "trailing byte", "bad version", "short head", "empty"],
)
def test_a_bad_record_is_refused_with_the_readers_message(data: bytes, match: str):
    with pytest.raises(ValueError, match=match):
        PagedMessage.decode(data)
