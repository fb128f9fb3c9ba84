"""What a load reads of a page (store.messaging.page_scan, store.paging.format.scan_page): the
compiled loops give exactly what the Python reference gives, refuse what it refuses, and the
runs say what the records say."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.errors import CorruptionError
from store.messaging import page_scan
from store.messaging.message_records import PagedMessage
from store.paging import format as page_format
from store.speedups import SPEEDUPS
from tests.file.test_reader import require_speedups
from tests.support.page_scans import scan_outcome
from tests.support.profile import examples

_paged = st.builds(
    PagedMessage,
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, 0, 7, 2**40]),
    st.sampled_from([45, 45, 30]),
    st.binary(max_size=40),
    st.sampled_from([(), (1,), (1,), (2,), (1, 2), (2**62, -3)]),
)


def _expanded(runs: list[page_scan.PagedRun]) -> list[tuple[int, tuple[int, ...]]]:
    """One (tx_id, queue_ids) per record, from the runs."""
    return [(tx, qids) for _, count, tx, qids in runs for _ in range(count)]


@settings(max_examples=examples(300), deadline=None)
@given(messages=st.lists(_paged, max_size=25))
def test_runs_say_what_each_record_says(messages: list[PagedMessage]) -> None:
    records = [m.encode() for m in messages]
    runs, large = page_scan.python_paged_runs(records)
    assert _expanded(runs) == [(m.tx_id, m.queue_ids) for m in messages]
    assert large == [m.message_id for m in messages if m.record_type == 30]
    starts = [start for start, *_ in runs]
    assert starts == sorted(starts) and all(count > 0 for _, count, *_ in runs)
    # Maximal: two neighbouring runs always differ.
    assert all(a[2:] != b[2:] for a, b in itertools.pairwise(runs))


@settings(max_examples=examples(300), deadline=None)
@given(messages=st.lists(_paged, max_size=25), damage=st.data())
def test_the_compiled_runs_equal_the_python_reference(
    messages: list[PagedMessage], damage: st.DataObject
) -> None:
    require_speedups()
    records = [m.encode() for m in messages]
    if records and damage.draw(st.booleans()):
        # Any record cut short, grown or with another version: the compiled loop gives the
        # page back to the Python code, which names the fault.
        at = damage.draw(st.integers(0, len(records) - 1))
        bad = damage.draw(
            st.sampled_from([records[at][:-1], records[at] + b"\x00", b"\x09" + records[at][1:]])
        )
        records[at] = bad
        assert SPEEDUPS.paged_runs(records, 1) is None
        with pytest.raises(ValueError):
            page_scan.paged_runs(records)
        return
    assert page_scan.paged_runs(records) == page_scan.python_paged_runs(records)
    assert SPEEDUPS.paged_runs(records, 1) is not None


def _page(payloads: list[bytes]) -> bytes:
    return b"".join(page_format.encode_record(p) for p in payloads)


def _python_scan(data: bytes, *, torn_tail: bool) -> tuple[list[bytes], int]:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(page_format, "_COMPILED_SCAN", None)
        return page_format.scan_page(data, path="p", torn_tail=torn_tail)


@settings(max_examples=examples(300), deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=60), max_size=12),
    flip=st.one_of(st.none(), st.integers(0, 2000)),
    cut=st.integers(0, 40),
    torn_tail=st.booleans(),
)
def test_the_compiled_page_scan_equals_the_python_reference(
    payloads: list[bytes], flip: int | None, cut: int, torn_tail: bool
) -> None:
    """Whole pages, pages cut short and pages with a flipped byte: the same records and end,
    or the same CorruptionError (path, offset, reason)."""
    require_speedups()
    assert page_format._COMPILED_SCAN is not None
    data = bytearray(_page(payloads))
    if flip is not None and data:
        data[flip % len(data)] ^= 0x41
    data = data[: max(0, len(data) - cut)]

    def outcome(compiled: bool) -> object:
        try:
            if compiled:
                return page_format.scan_page(bytes(data), path="p", torn_tail=torn_tail)
            return _python_scan(bytes(data), torn_tail=torn_tail)
        except CorruptionError as exc:
            return (exc.path, exc.offset, exc.reason)

    assert outcome(True) == outcome(False)


def test_a_compiled_scan_stops_at_the_first_invalid_record() -> None:
    require_speedups()
    data = bytearray(_page([b"a", b"bb", b"ccc"]))
    data[11 + 6] ^= 1  # a byte of the second record's checksum
    assert SPEEDUPS.scan_page(bytes(data)) == ([b"a"], 11)
    with pytest.raises(CorruptionError) as caught:
        page_format.scan_page(bytes(data), path="p", torn_tail=True)
    assert caught.value.offset == 11 and "checksum" in caught.value.reason


def _records_of(payloads: list[bytes]) -> page_format.PageRecords:
    records, end = page_format.scan_records(_page(payloads), path="p", torn_tail=False)
    assert end == len(_page(payloads))
    return records


@settings(max_examples=examples(200), deadline=None)
@given(messages=st.lists(_paged, max_size=25), bad=st.booleans())
def test_runs_over_a_pages_bytes_equal_runs_over_its_records(
    messages: list[PagedMessage], bad: bool
) -> None:
    """paged_runs of a PageRecords (compiled: paged_runs_in over the page's bytes) gives what
    the Python reference gives for the same records, and refuses what it refuses."""
    payloads = [m.encode() for m in messages]
    if bad and payloads:
        payloads[-1] = payloads[-1][:-1]
    records = _records_of(payloads)
    assert records == payloads and len(records) == len(payloads)
    try:
        expected: object = page_scan.python_paged_runs(payloads)
    except ValueError:
        expected = ValueError
    try:
        got: object = page_scan.paged_runs(records)
    except ValueError:
        got = ValueError
    assert got == expected


@settings(max_examples=examples(300), deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=60), max_size=12),
    flip=st.one_of(st.none(), st.integers(0, 2000)),
    cut=st.integers(0, 40),
    torn_tail=st.booleans(),
)
def test_scan_records_finds_what_scan_page_finds(
    payloads: list[bytes], flip: int | None, cut: int, torn_tail: bool
) -> None:
    """The same records and end, or the same CorruptionError, compiled or not."""
    data = bytearray(_page(payloads))
    if flip is not None and data:
        data[flip % len(data)] ^= 0x41
    data = data[: max(0, len(data) - cut)]

    def outcome(scan: Callable[..., Any], compiled: bool) -> object:
        return scan_outcome(scan, bytes(data), compiled=compiled, torn_tail=torn_tail)

    reference = outcome(page_format.scan_page, False)
    assert outcome(page_format.scan_records, False) == reference
    assert outcome(page_format.scan_records, True) == reference


def test_page_records_index_like_a_list() -> None:
    payloads = [b"a", b"", b"ccc"]
    records = _records_of(payloads)
    assert [records[i] for i in range(3)] == payloads
    assert records[-1] == b"ccc" and records[1:] == [b"", b"ccc"]
    assert records == payloads and records != [b"a"] and records != "a"
    with pytest.raises(IndexError):
        records[3]
    assert _records_of([]) == [] and len(_records_of([])) == 0
