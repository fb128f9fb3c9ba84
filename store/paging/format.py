"""The page record format, shared by every back-end (docs/paging.md, reference §5).

A page is a sequence of records with nothing between them; the file store writes it to an
``NNNNNNNNN.page`` file, the database store to the rows of the page in the address's table
(their ``data`` concatenated in ``id`` order is the same byte stream). Integers are big-endian,
as Artemis's ``{ int size … }`` framing; ours adds a checksum (Artemis has none).

======  ====  ============================================================================
offset  size  field
======  ====  ============================================================================
0       1     ``{`` (0x7B), record start
1       4     payload length ``n`` (unsigned)
5       4     CRC-32 (zlib) of bytes 1..4 (the length) followed by the payload
9       n     payload: the record as given to ``PageStore.append``
9+n     1     ``}`` (0x7D), record end
======  ====  ============================================================================

So a record's framing is :data:`FRAMING` = 10 bytes, and its encoded size is ``n + 10``; the
roll rule (``page-size-bytes``) counts encoded sizes.

Reading (:func:`decode_page`) stops at the first record that is not valid. On the page being
written, that is its *torn tail* when no valid record starts anywhere after it (a crash cut
the last write short, or extended the file before its data reached the disk): the rest is
ignored. A flipped byte in the last record of the page being written looks exactly like a
write cut short and is treated as one. Anything else (a valid record after the damage, or
damage on a page that is not being written, or on a database, where a commit is atomic) is a
:class:`~store.errors.CorruptionError` with the page's ``path`` and the bad record's
``offset``: records after a damaged one are never dropped silently.

Thread-safety: pure functions.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, overload

from store.errors import CorruptionError
from store.speedups import SPEEDUPS, crc32

__all__ = [
    "FRAMING",
    "MAX_RECORD_SIZE",
    "PageRecords",
    "RECORD_END",
    "RECORD_START",
    "DamagedRecord",
    "damaged_records",
    "decode_page",
    "encode_record",
    "encoded_size",
    "page_file_name",
    "page_number_of",
    "readable_records",
    "scan_page",
    "scan_records",
]

RECORD_START: Final = 0x7B
RECORD_END: Final = 0x7D
_HEAD: Final = struct.Struct(">BII")
FRAMING: Final = _HEAD.size + 1
#: The largest payload a record can hold (the length field is 32-bit).
MAX_RECORD_SIZE: Final = 2**32 - 1 - FRAMING
_PAGE_SUFFIX: Final = ".page"
#: The compiled loop over a page's valid records (``store/_speedups_pages.c``), or None.
_COMPILED_SCAN = getattr(SPEEDUPS, "scan_page", None)
_COMPILED_BOUNDS = getattr(SPEEDUPS, "scan_bounds", None)
#: The compiled :func:`encode_record` (every paged send frames a record), or None.
_COMPILED_FRAME = getattr(SPEEDUPS, "frame_page_record", None)


def encoded_size(payload_size: int) -> int:
    """Bytes a record of ``payload_size`` takes in a page. Raises nothing."""
    return payload_size + FRAMING


def encode_record(payload: bytes | bytearray | memoryview) -> bytes:
    """The framed record of ``payload``. Raises ValueError past :data:`MAX_RECORD_SIZE`."""
    if _COMPILED_FRAME is not None:  # the lines below, compiled (tested equal)
        framed: bytes | None = _COMPILED_FRAME(payload)
        if framed is not None:
            return framed
    return python_encode_record(payload)


def python_encode_record(payload: bytes | bytearray | memoryview) -> bytes:
    """:func:`encode_record` in Python: the reference of the compiled one. Raises
    ValueError past :data:`MAX_RECORD_SIZE`."""
    data = bytes(payload)
    if len(data) > MAX_RECORD_SIZE:
        raise ValueError(f"a page record holds at most {MAX_RECORD_SIZE} bytes, not {len(data)}")
    length = len(data).to_bytes(4, "big")
    crc = crc32(data, crc32(length))
    return b"".join((_HEAD.pack(RECORD_START, len(data), crc), data, bytes((RECORD_END,))))


def _problem(data: memoryview, offset: int) -> str | None:
    """Why the record at ``offset`` is not valid, or None if it is."""
    size = len(data)
    if size - offset < FRAMING:
        return "record header cut off"
    start, length, crc = _HEAD.unpack_from(data, offset)
    if start != RECORD_START:
        return f"no record start (0x{start:02x} instead of 0x7b)"
    end = offset + FRAMING + length
    if end > size:
        return f"record length {length} runs past the end of the page ({size} bytes)"
    payload = data[offset + _HEAD.size : end - 1]
    if crc32(payload, crc32(length.to_bytes(4, "big"))) != crc:
        return "checksum mismatch"
    if data[end - 1] != RECORD_END:
        return f"no record end (0x{data[end - 1]:02x} instead of 0x7d)"
    return None


def _valid_record_after(data: memoryview, offset: int) -> bool:
    """Whether a valid record starts anywhere after ``offset``."""
    raw = data.obj if isinstance(data.obj, bytes) else bytes(data)
    position = raw.find(bytes((RECORD_START,)), offset + 1)
    while position != -1:
        if _problem(data, position) is None:
            return True
        position = raw.find(bytes((RECORD_START,)), position + 1)
    return False


def decode_page(data: bytes | bytearray | memoryview, *, path: str, torn_tail: bool) -> list[bytes]:
    """The records of one page's bytes, in order.

    ``torn_tail`` says the page is the one being written, whose torn tail is ignored (module
    docstring). Returns the payloads. Raises CorruptionError naming ``path`` and the offset of
    the first invalid record otherwise.
    """
    return scan_page(data, path=path, torn_tail=torn_tail)[0]


def scan_page(
    data: bytes | bytearray | memoryview, *, path: str, torn_tail: bool
) -> tuple[list[bytes], int]:
    """As :func:`decode_page`, also returning where the valid records end (the length to cut
    a torn tail back to before appending after it). Raises CorruptionError as decode_page.

    Where the compiled module is built, its ``scan_page`` takes the valid records up to the
    first invalid one; what that record means is decided by the same code as without it."""
    view = memoryview(data).cast("B")
    records: list[bytes] = []
    offset = 0
    if _COMPILED_SCAN is not None:
        records, offset = _COMPILED_SCAN(view)

    def add(start: int, length: int) -> None:
        records.append(bytes(view[start : start + length]))

    return records, _scan_rest(view, offset, add, path=path, torn_tail=torn_tail)


def scan_records(
    data: bytes | bytearray | memoryview, *, path: str, torn_tail: bool
) -> tuple[PageRecords, int]:
    """As :func:`scan_page`, the records as a :class:`PageRecords` over the page's bytes
    instead of a bytes object each (what a load reads every page with). Raises as
    scan_page."""
    raw = data if type(data) is bytes else bytes(data)
    pairs = array("q")
    offset = 0
    if _COMPILED_BOUNDS is not None:
        bounds, offset = _COMPILED_BOUNDS(raw)
        pairs.frombytes(bounds)

    def add(start: int, length: int) -> None:
        pairs.extend((start, length))

    end = _scan_rest(memoryview(raw), offset, add, path=path, torn_tail=torn_tail)
    return PageRecords(raw, pairs.tobytes()), end


def _scan_rest(
    view: memoryview, offset: int, add: Callable[[int, int], None], *, path: str, torn_tail: bool
) -> int:
    """The records from ``offset`` on, each valid one handed to ``add(payload offset,
    length)``, up to the end or a torn tail; returns where the valid records end. Raises
    CorruptionError for damage that is not a torn tail (module docstring)."""
    while offset < len(view):
        problem = _problem(view, offset)
        if problem is None:
            length = int.from_bytes(view[offset + 1 : offset + 5], "big")
            add(offset + _HEAD.size, length)
            offset += FRAMING + length
            continue
        if torn_tail and not _valid_record_after(view, offset):
            break
        raise CorruptionError(path, offset, f"damaged page record: {problem}")
    return offset


class PageRecords(Sequence[bytes]):
    """A page's records without a bytes object each: ``data``, the page's bytes, and
    ``bounds``, each record's payload as a pair of native int64 (offset in ``data``, length),
    as :func:`scan_records` found them. Indexing gives a payload as bytes (a copy); equal to
    any sequence of the same payloads (a list from ``read_page``). Immutable; thread-safe."""

    __slots__ = ("_pairs", "bounds", "data")

    def __init__(self, data: bytes, bounds: bytes) -> None:
        self.data = data
        self.bounds = bounds
        self._pairs = memoryview(bounds).cast("q")

    def __len__(self) -> int:
        return len(self._pairs) // 2

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> list[bytes]: ...

    def __getitem__(self, index: int | slice) -> bytes | list[bytes]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        count = len(self)
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError("page record index out of range")
        start = self._pairs[2 * index]
        return self.data[start : start + self._pairs[2 * index + 1]]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PageRecords({list(self)!r})"


@dataclass(frozen=True, slots=True)
class DamagedRecord:
    """A record of a page that fails its checks but whose framing still says where it ends:
    its ``index`` among the page's records, ``offset`` and encoded ``length`` in the page, and
    what is wrong. Immutable."""

    index: int
    offset: int
    length: int
    problem: str


def damaged_records(data: bytes | bytearray | memoryview, *, path: str) -> list[DamagedRecord]:
    """Every damaged record of a page a salvage can replace one for one: a record whose
    start byte and length are intact (so the next record, or the page's end, follows it)
    but whose checksum or end byte is not; empty for a page that reads whole. Indexes stay
    those of the page as written. Raises CorruptionError naming ``path`` and the offset for
    damage that leaves the records after it without a known start (a damaged start byte
    or length: no one can tell how many records it covered)."""
    view = memoryview(data).cast("B")
    found: list[DamagedRecord] = []
    offset = index = 0
    while offset < len(view):
        problem = _problem(view, offset)
        if problem is None:
            offset += FRAMING + int.from_bytes(view[offset + 1 : offset + 5], "big")
            index += 1
            continue
        if len(view) - offset >= FRAMING and view[offset] == RECORD_START:
            end = offset + FRAMING + int.from_bytes(view[offset + 1 : offset + 5], "big")
            if end == len(view) or (end < len(view) and _problem(view, end) is None):
                found.append(DamagedRecord(index, offset, end - offset, problem))
                offset, index = end, index + 1
                continue
        raise CorruptionError(
            path,
            offset,
            f"damaged page record: {problem}; its start or length is damaged too, so where "
            "the records after it start is unknown",
        )
    return found


def readable_records(
    data: bytes | bytearray | memoryview, *, path: str
) -> tuple[list[bytes | None], list[DamagedRecord]]:
    """The records of a page with each damaged one (:func:`damaged_records`) as None, so
    indexes stay those of the page, and the damaged ones. Raises CorruptionError as
    damaged_records for damage that hides where the next record starts."""
    bad = {d.offset: d for d in damaged_records(data, path=path)}
    view = memoryview(data).cast("B")
    records: list[bytes | None] = []
    offset = 0
    while offset < len(view):
        length = int.from_bytes(view[offset + 1 : offset + 5], "big")
        if offset in bad:
            records.append(None)
        else:
            records.append(bytes(view[offset + _HEAD.size : offset + _HEAD.size + length]))
        offset += FRAMING + length
    return records, sorted(bad.values(), key=lambda d: d.offset)


def page_file_name(page: int) -> str:
    """``NNNNNNNNN.page``: the page number zero-padded to 9 digits. Raises ValueError for a
    page number below 1."""
    if page < 1:
        raise ValueError(f"page numbers start at 1, not {page}")
    return f"{page:09d}{_PAGE_SUFFIX}"


def page_number_of(name: str) -> int | None:
    """The page number of a page file name (the digits before the first ``.``), or None when
    ``name`` is not one. Raises nothing."""
    if not name.endswith(_PAGE_SUFFIX):
        return None
    digits = name.split(".", 1)[0]
    return int(digits) if digits.isdigit() and int(digits) >= 1 else None
