"""Page records bound to their page (store.paging.format, ``[`` records and
:func:`~store.paging.format.page_binding`): the compiled framing and scans (``frame_page_record``,
``scan_page``, ``scan_bounds`` with a binding, in ``store/_speedups_pages.c``) equal the Python
reference on every input, a record read in another page is refused naming its own page, torn
tail or not, and a torn tail of a bound page is still cut silently."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.errors import CorruptionError
from store.paging import format as page_format
from store.paging.format import (
    RECORD_BOUND,
    RECORD_START,
    decode_page,
    encode_record,
    page_binding,
    python_encode_record,
    scan_page,
)
from store.speedups import SPEEDUPS
from tests.file.test_reader import require_speedups
from tests.support.page_scans import scan_outcome
from tests.support.profile import examples

HERE = page_binding("orders", 7)
ELSEWHERE = page_binding("orders", 5)
OTHER_ADDRESS = page_binding("invoices", 7)

_bindings = st.sampled_from([None, HERE, ELSEWHERE, OTHER_ADDRESS, b"", b"\x00" * 40])


@settings(max_examples=examples(300), deadline=None)
@given(payload=st.binary(max_size=300), binding=_bindings)
def test_the_compiled_frame_equals_the_python_reference(
    payload: bytes, binding: bytes | None
) -> None:
    require_speedups()
    framed = SPEEDUPS.frame_page_record(payload, binding)
    assert framed == python_encode_record(payload, binding)
    assert framed[0] == (RECORD_START if binding is None else RECORD_BOUND)
    assert SPEEDUPS.frame_page_record(payload) == python_encode_record(payload)


@settings(max_examples=examples(300), deadline=None)
@given(
    records=st.lists(st.tuples(st.binary(max_size=60), _bindings), max_size=10),
    flip=st.one_of(st.none(), st.integers(0, 2000)),
    cut=st.integers(0, 30),
    torn_tail=st.booleans(),
    reading=st.sampled_from([HERE, None]),
)
def test_the_compiled_scans_equal_the_python_reference(
    records: list[tuple[bytes, bytes | None]],
    flip: int | None,
    cut: int,
    torn_tail: bool,
    reading: bytes | None,
) -> None:
    """Pages of unbound records, records bound here, to another page or address, damaged or
    cut: the same records and end, or the same CorruptionError, compiled or not."""
    require_speedups()
    data = bytearray(b"".join(python_encode_record(p, b) for p, b in records))
    if flip is not None and data:
        data[flip % len(data)] ^= 0x41
    data = data[: max(0, len(data) - cut)]

    def outcome(scan: Callable[..., Any], compiled: bool) -> object:
        kwargs = {"torn_tail": torn_tail, "binding": reading}
        return scan_outcome(scan, bytes(data), compiled=compiled, **kwargs)

    reference = outcome(page_format.scan_page, False)
    assert outcome(page_format.scan_page, True) == reference
    assert outcome(page_format.scan_records, False) == reference
    assert outcome(page_format.scan_records, True) == reference


@pytest.mark.parametrize("torn_tail", [False, True])
def test_a_page_of_another_page_is_refused_naming_it(torn_tail: bool) -> None:
    page = b"".join(encode_record(b"x%d" % i, ELSEWHERE) for i in range(4))
    with pytest.raises(CorruptionError) as refused:
        decode_page(page, path="000000007.page", torn_tail=torn_tail, binding=HERE)
    assert refused.value.offset == 0
    assert "a record of page 5, not of page 7" in refused.value.reason


def test_a_record_of_another_page_after_good_ones_is_refused_where_it_starts() -> None:
    good = b"".join(encode_record(b"g%d" % i, HERE) for i in range(3))
    page = good + encode_record(b"stray", ELSEWHERE)
    with pytest.raises(CorruptionError, match="a record of page 5, not of page 7") as refused:
        scan_page(page, path="p", torn_tail=True, binding=HERE)
    assert refused.value.offset == len(good)


def test_a_page_of_another_address_reads_as_damage() -> None:
    page = encode_record(b"theirs", OTHER_ADDRESS) + encode_record(b"also", OTHER_ADDRESS)
    with pytest.raises(CorruptionError, match="checksum mismatch"):
        decode_page(page, path="p", torn_tail=False, binding=HERE)


@pytest.mark.parametrize("cut", [1, 5, 9, 12])
def test_a_torn_tail_of_a_bound_page_is_cut(cut: int) -> None:
    records = [b"r%d" % i * 20 for i in range(3)]
    page = b"".join(encode_record(r, HERE) for r in records)
    found, end = scan_page(page[:-cut], path="p", torn_tail=True, binding=HERE)
    assert found == records[:2] and end == len(page) - len(encode_record(records[2], HERE))


def test_unbound_records_read_with_or_without_a_binding() -> None:
    page = b"".join(encode_record(b"old%d" % i) for i in range(3))
    assert decode_page(page, path="p", torn_tail=False) == [b"old0", b"old1", b"old2"]
    assert decode_page(page, path="p", torn_tail=False, binding=HERE) == [
        b"old0",
        b"old1",
        b"old2",
    ]
