"""The compiled framing of a page record (``frame_page_record`` in ``store/_speedups_pages.c``,
what every paged send frames its record with through ``store.paging.format.encode_record``)
against its Python reference, ``python_encode_record``, called directly: the same bytes for
every payload in every kind of buffer, the same refusals, and records that read back (with the
Python reader) as the payloads framed."""

from __future__ import annotations

import mmap
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.paging import format as page_format
from store.paging.format import MAX_RECORD_SIZE, python_encode_record
from store.speedups import SPEEDUPS
from tests.file.test_reader import require_speedups
from tests.support.profile import examples

_bytes_256 = bytes(range(256))

# Payloads around the CRC-32's thresholds (64 bytes: the folded loop; 512: the wide strides).
PAYLOADS = [
    pytest.param(b"", id="empty"),
    pytest.param(b"a", id="one byte"),
    pytest.param(b"{}}{", id="the framing bytes inside"),
    pytest.param(b"x" * 63, id="63 bytes"),
    pytest.param(b"y" * 64, id="64 bytes"),
    pytest.param(_bytes_256[:65], id="65 bytes"),
    pytest.param(_bytes_256 * 2, id="512 bytes"),
    pytest.param(_bytes_256 * 2 + b"z", id="513 bytes"),
    pytest.param(_bytes_256 * 300, id="76,800 bytes"),
]


@pytest.mark.parametrize(
    "wrap",
    [bytes, bytearray, memoryview, lambda b: memoryview(b"..." + b)[3:], lambda b: array("B", b)],
    ids=["bytes", "bytearray", "memoryview", "a memoryview at an offset", "an array of bytes"],
)
@pytest.mark.parametrize("payload", PAYLOADS)
def test_the_compiled_frame_is_the_python_frame(payload: bytes, wrap: object) -> None:
    require_speedups()
    buffer = wrap(payload)  # type: ignore[operator]
    framed = SPEEDUPS.frame_page_record(buffer)
    assert type(framed) is bytes
    assert framed == python_encode_record(buffer) == python_encode_record(payload)


def test_an_array_of_int64_is_framed_as_its_bytes_by_both() -> None:
    require_speedups()
    numbers = array("q", [1, -1, 2**62])
    assert SPEEDUPS.frame_page_record(numbers) == python_encode_record(numbers)
    assert SPEEDUPS.frame_page_record(numbers) == python_encode_record(numbers.tobytes())


@pytest.mark.parametrize("payload", ["text", None, 1.5], ids=["a str", "None", "a float"])
def test_what_is_not_a_buffer_is_a_type_error_of_both(payload: object) -> None:
    require_speedups()
    with pytest.raises(TypeError):
        SPEEDUPS.frame_page_record(payload)
    with pytest.raises(TypeError):
        python_encode_record(payload)  # type: ignore[arg-type]


def test_past_the_largest_record_the_compiled_frame_leaves_it_to_the_python_path(
    tmp_path: Path,
) -> None:
    """One byte past MAX_RECORD_SIZE (the length the Python path refuses with ValueError)
    the compiled frame gives None, for ``encode_record`` to call the Python path; a sparse
    mapping stands in for the 4 GiB payload (neither reads it)."""
    require_speedups()
    assert MAX_RECORD_SIZE == 2**32 - 1 - 10  # the compiled check's constant
    path = tmp_path / "huge"
    with path.open("wb") as f:
        f.truncate(MAX_RECORD_SIZE + 1)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as huge:
        assert SPEEDUPS.frame_page_record(huge) is None


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        pytest.param(memoryview(b"abcdef")[::2], BufferError, id="a strided memoryview"),
        pytest.param(5, TypeError, id="an int"),
    ],
)
def test_what_only_the_python_path_frames(payload: object, error: type[Exception]) -> None:
    """``bytes(payload)`` copies (or, for an int, makes zeros of) what the compiled frame
    refuses; no caller passes either (a send frames the bytes of its record)."""
    require_speedups()
    with pytest.raises(error):
        SPEEDUPS.frame_page_record(payload)
    assert python_encode_record(payload)[9:-1] == bytes(payload)  # type: ignore[arg-type]


@settings(max_examples=examples(300), deadline=None)
@given(payloads=st.lists(st.binary(max_size=1500), max_size=12), kind=st.integers(0, 2))
def test_framed_records_equal_the_python_ones_and_read_back_as_framed(
    payloads: list[bytes], kind: int
) -> None:
    """Any payloads, in any of three buffer types: the compiled records equal the reference's,
    and a page of them scans back (the Python reader: the compiled scan off) to the payloads."""
    require_speedups()
    wrap = (bytes, bytearray, memoryview)[kind]
    framed = [SPEEDUPS.frame_page_record(wrap(p)) for p in payloads]
    assert framed == [python_encode_record(p) for p in payloads]
    page = b"".join(framed)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(page_format, "_COMPILED_SCAN", None)
        records, end = page_format.scan_page(page, path="page", torn_tail=False)
    assert records == payloads and end == len(page)
