"""``PagedMessage.decode``'s unpacked path (issue 27: a load decodes every paged message)
gives what the field-by-field reader gives, and refuses what it refuses."""

from __future__ import annotations

from array import array

import pytest

from store.messaging.message_records import PagedMessage, new_paged, python_new_paged

CASES = [
    PagedMessage(7, 0, 45, b"record", (3,)),
    PagedMessage(2**62, 9, 30, b"", ()),
    PagedMessage(-5, 1, 45, b"\x00" * 300, (1, 2**40, -3)),
]


@pytest.mark.parametrize("paged", CASES, ids=["one queue", "large, no queue", "three queues"])
def test_the_unpacked_decode_equals_the_field_by_field_one(paged: PagedMessage):
    data = paged.encode()
    assert PagedMessage.decode(data) == PagedMessage._decode_fields(data) == paged


#: Bad records and what the reader's error says of each.
BAD = {
    "truncated": (CASES[2].encode()[:-1], "ends in queue_id"),
    "trailing byte": (CASES[0].encode() + b"\x00", "trailing|left|bytes"),
    "bad version": (b"\x09" + CASES[0].encode()[1:], "version"),
    "short head": (CASES[0].encode()[:10], "ends in"),
    "empty": (b"", "empty"),
}


@pytest.mark.parametrize(("data", "match"), list(BAD.values()), ids=list(BAD))
def test_a_bad_record_is_refused_with_the_readers_message(data: bytes, match: str):
    with pytest.raises(ValueError, match=match):
        PagedMessage.decode(data)


@pytest.mark.parametrize("paged", CASES, ids=["one queue", "large, no queue", "three queues"])
def test_a_record_decoded_in_place_in_a_page_s_bytes_equals_its_copy_s(paged: PagedMessage):
    """A page cache decodes a record where it lies in the page's bytes (start, stop)."""
    before, after = CASES[2].encode(), CASES[0].encode()
    data = before + paged.encode() + after
    start, stop = len(before), len(data) - len(after)
    assert PagedMessage.decode(data, start, stop) == paged


@pytest.mark.parametrize(("data", "match"), list(BAD.values()), ids=list(BAD))
def test_a_bad_record_in_place_is_refused_and_never_read_past_its_end(data: bytes, match: str):
    """Its neighbour's bytes (a whole record after it) never make a bad record decode."""
    page = data + CASES[1].encode()
    with pytest.raises(ValueError, match=match):
        PagedMessage.decode(page, 0, len(data))


def test_a_page_cache_decodes_a_record_when_asked_and_keeps_appended_ones() -> None:
    from store.messaging.page_cache import PageCache
    from store.paging.format import PageRecords

    encoded = [c.encode() for c in CASES]
    data = b"".join(encoded)
    offsets = [sum(len(e) for e in encoded[:i]) for i in range(len(encoded))]
    pairs = [v for o, e in zip(offsets, encoded, strict=True) for v in (o, len(e))]
    bounds = array("q", pairs).tobytes()  # native int64 pairs, as scan_bounds gives them
    for raw in (PageRecords(data, bounds), encoded):
        cache = PageCache(raw)
        assert len(cache) == 3 and cache[2] == CASES[2] and cache[0] == CASES[0]
        extra = PagedMessage(99, 0, 45, b"r", (1,))
        cache.append(extra)
        assert len(cache) == 4 and cache[3] is extra and cache[1] == CASES[1]
    # decoded when asked for: a bad record fails only the one asking for it
    bad = PageCache([encoded[0], b"\x09" + encoded[1][1:], encoded[2]])
    assert bad[0] == CASES[0] and bad[2] == CASES[2]
    with pytest.raises(ValueError, match="version"):
        bad[1]


@pytest.mark.parametrize("paged", CASES, ids=["one queue", "large, no queue", "three queues"])
def test_the_compiled_encode_writes_what_the_python_paths_write(paged: PagedMessage) -> None:
    """``encode`` (compiled where built), the packed Python path and the field-by-field one
    write the same bytes, and each decodes back to the message."""
    assert paged.encode() == paged.write_packed() == paged.write_fields()
    assert PagedMessage.decode(paged.encode()) == paged


@pytest.mark.parametrize(
    ("paged", "field"),
    [
        (PagedMessage(2**63, 0, 45, b"r", (1,)), "message_id"),
        (PagedMessage(1, -(2**63) - 1, 45, b"r", (1,)), "tx_id"),
        (PagedMessage(1, 0, 45, b"r", (1, 2**64)), "queue_id"),
    ],
    ids=["message id", "tx id", "queue id"],
)
def test_a_value_that_does_not_fit_is_refused_naming_its_field(
    paged: PagedMessage, field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        paged.encode()


@pytest.mark.parametrize("paged", CASES, ids=["one queue", "large, no queue", "three queues"])
def test_a_send_s_paged_message_made_in_one_step_equals_the_class_s_own(
    paged: PagedMessage,
) -> None:
    """``new_paged`` (compiled where built: slots written without ``__init__``) makes what
    the class makes: equal, hashing alike, as frozen, and encoding the same record."""
    fields = (paged.message_id, paged.tx_id, paged.record_type, paged.record, paged.queue_ids)
    for make in (new_paged, python_new_paged):
        made = make(PagedMessage, *fields)
        assert type(made) is PagedMessage
        assert made == paged and hash(made) == hash(paged)
        assert made.encode() == paged.encode()
        with pytest.raises(AttributeError):
            made.tx_id = 1  # type: ignore[misc]


def test_new_paged_is_compiled_where_the_speedups_are_built() -> None:
    """Where the C part is built (CI's main pass), every paged send uses the compiled maker."""
    from store.speedups import SPEEDUPS

    assert (new_paged is python_new_paged) == (SPEEDUPS is None)
