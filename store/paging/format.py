"""The page record format, shared by every back-end (docs/paging.md, reference §5).

A page is a sequence of records with nothing between them; the file store writes it to an
``NNNNNNNNN.page`` file, the database store to the rows of the page in the address's table
(their ``data`` concatenated in ``id`` order is the same byte stream). Integers are big-endian,
as Artemis's ``{ int size … }`` framing; ours adds a checksum (Artemis has none).

======  ====  ============================================================================
offset  size  field
======  ====  ============================================================================
0       1     ``[`` (0x5B), a record bound to its page (``{``, 0x7B: one written before)
1       4     payload length ``n`` (unsigned)
5       4     CRC-32 (zlib) of bytes 1..4 (the length), then the payload, then (``[``
              only) the page's *binding*: :func:`page_binding`, its page number and address
9       n     payload: the record as given to ``PageStore.append``
9+n     1     ``}`` (0x7D), record end
======  ====  ============================================================================

The binding makes a record read from another page than its own fail its checksum, the same
as a damaged one: a page file replaced by another page of its address (a restore from the
wrong backup, a copy by hand) is a :class:`~store.errors.CorruptionError` naming the page it
is in and the page its records were written for (found by trying the address's other page
numbers), never a page read as its own (whose messages were then acknowledged for good, or
delivered twice). The binding costs no byte: it is not stored, only checked. Records
``{`` of stores written before bindings read as before, unbound; every append writes ``[``.
A page copied from another address reads as damage (its page cannot be named).

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
    "RECORD_BOUND",
    "RECORD_END",
    "RECORD_START",
    "DamagedRecord",
    "damaged_records",
    "decode_page",
    "encode_record",
    "encoded_size",
    "page_binding",
    "page_file_name",
    "page_number_of",
    "raise_misplaced",
    "readable_records",
    "scan_page",
    "scan_records",
]

RECORD_START: Final = 0x7B
#: The start byte of a record bound to its page (module docstring).
RECORD_BOUND: Final = 0x5B
RECORD_END: Final = 0x7D
#: How many page numbers below a page a misplaced record's own page is looked for among (and
#: :data:`_LOOK_ABOVE` above it): a page restored from an old backup is an old page.
_LOOK_BELOW: Final = 100_000
_LOOK_ABOVE: Final = 10_000
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


def page_binding(address: str, page: int) -> bytes:
    """What a record of ``address``'s page ``page`` is bound to (module docstring): the page
    number (8 bytes, big-endian) and the address's name in UTF-8. Raises nothing for a page
    number of 0 or more."""
    return page.to_bytes(8, "big") + address.encode("utf-8", "surrogatepass")


def encode_record(payload: bytes | bytearray | memoryview, binding: bytes | None = None) -> bytes:
    """The framed record of ``payload``, bound to ``binding`` (:func:`page_binding`; None: an
    unbound ``{`` record, as written before bindings). Raises ValueError past
    :data:`MAX_RECORD_SIZE`."""
    if _COMPILED_FRAME is not None:  # the lines below, compiled (tested equal)
        framed: bytes | None = _COMPILED_FRAME(payload, binding)
        if framed is not None:
            return framed
    return python_encode_record(payload, binding)


def python_encode_record(
    payload: bytes | bytearray | memoryview, binding: bytes | None = None
) -> bytes:
    """:func:`encode_record` in Python: the reference of the compiled one. Raises
    ValueError past :data:`MAX_RECORD_SIZE`."""
    data = bytes(payload)
    if len(data) > MAX_RECORD_SIZE:
        raise ValueError(f"a page record holds at most {MAX_RECORD_SIZE} bytes, not {len(data)}")
    length = len(data).to_bytes(4, "big")
    crc = crc32(data, crc32(length))
    start = RECORD_START
    if binding is not None:
        crc, start = crc32(binding, crc), RECORD_BOUND
    return b"".join((_HEAD.pack(start, len(data), crc), data, bytes((RECORD_END,))))


def _problem(data: memoryview, offset: int, binding: bytes | None = None) -> str | None:
    """Why the record at ``offset`` is not valid (bound records checked against
    ``binding``; None: every bound record is invalid), or None if it is."""
    size = len(data)
    if size - offset < FRAMING:
        return "record header cut off"
    start, length, crc = _HEAD.unpack_from(data, offset)
    if start != RECORD_START and start != RECORD_BOUND:
        return f"no record start (0x{start:02x} instead of 0x5b or 0x7b)"
    end = offset + FRAMING + length
    if end > size:
        return f"record length {length} runs past the end of the page ({size} bytes)"
    payload = data[offset + _HEAD.size : end - 1]
    found = crc32(payload, crc32(length.to_bytes(4, "big")))
    if start == RECORD_BOUND:
        if binding is None:
            return "a record bound to a page, read without its page"
        found = crc32(binding, found)
    if found != crc:
        return "checksum mismatch"
    if data[end - 1] != RECORD_END:
        return f"no record end (0x{data[end - 1]:02x} instead of 0x7d)"
    return None


def _own_page(data: memoryview, offset: int, binding: bytes | None) -> int | None:
    """The page of this address whose binding the bound record at ``offset`` verifies
    with, when that is not ``binding``'s page (a record in the wrong page); None when it is
    no such record. Tries the page numbers near ``binding``'s (module docstring)."""
    size = len(data)
    if binding is None or size - offset < FRAMING or data[offset] != RECORD_BOUND:
        return None
    _, length, crc = _HEAD.unpack_from(data, offset)
    end = offset + FRAMING + length
    if end > size or data[end - 1] != RECORD_END:
        return None
    base = crc32(data[offset + _HEAD.size : end - 1], crc32(length.to_bytes(4, "big")))
    page, address = int.from_bytes(binding[:8], "big"), binding[8:]
    for other in range(max(0, page - _LOOK_BELOW), page + _LOOK_ABOVE):
        if other != page and crc32(address, crc32(other.to_bytes(8, "big"), base)) == crc:
            return other
    return None


def _valid_record_after(data: memoryview, offset: int, binding: bytes | None = None) -> bool:
    """Whether a valid record starts anywhere after ``offset``."""
    raw = data.obj if isinstance(data.obj, bytes) else bytes(data)
    for start in (RECORD_START, RECORD_BOUND):
        position = raw.find(bytes((start,)), offset + 1)
        while position != -1:
            if _problem(data, position, binding) is None:
                return True
            position = raw.find(bytes((start,)), position + 1)
    return False


def decode_page(
    data: bytes | bytearray | memoryview,
    *,
    path: str,
    torn_tail: bool,
    binding: bytes | None = None,
) -> list[bytes]:
    """The records of one page's bytes, in order.

    ``torn_tail`` says the page is the one being written, whose torn tail is ignored (module
    docstring); ``binding`` is the page's (:func:`page_binding`; None: only unbound records
    are valid). Returns the payloads. Raises CorruptionError naming ``path`` and the offset
    of the first invalid record otherwise (a record of another page of the address: always,
    torn tail or not, naming that page).
    """
    return scan_page(data, path=path, torn_tail=torn_tail, binding=binding)[0]


def scan_page(
    data: bytes | bytearray | memoryview,
    *,
    path: str,
    torn_tail: bool,
    binding: bytes | None = None,
) -> tuple[list[bytes], int]:
    """As :func:`decode_page`, also returning where the valid records end (the length to cut
    a torn tail back to before appending after it). Raises CorruptionError as decode_page.

    Where the compiled module is built, its ``scan_page`` takes the valid records up to the
    first invalid one; what that record means is decided by the same code as without it."""
    view = memoryview(data).cast("B")
    records: list[bytes] = []
    offset = 0
    if _COMPILED_SCAN is not None:
        records, offset = _COMPILED_SCAN(view, binding)

    def add(start: int, length: int) -> None:
        records.append(bytes(view[start : start + length]))

    end = _scan_rest(view, offset, add, path=path, torn_tail=torn_tail, binding=binding)
    return records, end


def scan_records(
    data: bytes | bytearray | memoryview,
    *,
    path: str,
    torn_tail: bool,
    binding: bytes | None = None,
) -> tuple[PageRecords, int]:
    """As :func:`scan_page`, the records as a :class:`PageRecords` over the page's bytes
    instead of a bytes object each (what a load reads every page with). Raises as
    scan_page."""
    raw = data if type(data) is bytes else bytes(data)
    pairs = array("q")
    offset = 0
    if _COMPILED_BOUNDS is not None:
        bounds, offset = _COMPILED_BOUNDS(raw, binding)
        pairs.frombytes(bounds)

    def add(start: int, length: int) -> None:
        pairs.extend((start, length))

    end = _scan_rest(memoryview(raw), offset, add, path=path, torn_tail=torn_tail, binding=binding)
    return PageRecords(raw, pairs.tobytes()), end


def _scan_rest(
    view: memoryview,
    offset: int,
    add: Callable[[int, int], None],
    *,
    path: str,
    torn_tail: bool,
    binding: bytes | None,
) -> int:
    """The records from ``offset`` on, each valid one handed to ``add(payload offset,
    length)``, up to the end or a torn tail; returns where the valid records end. Raises
    CorruptionError for damage that is not a torn tail (module docstring)."""
    while offset < len(view):
        problem = _problem(view, offset, binding)
        if problem is None:
            length = int.from_bytes(view[offset + 1 : offset + 5], "big")
            add(offset + _HEAD.size, length)
            offset += FRAMING + length
            continue
        raise_misplaced(view, offset, path=path, binding=binding)
        if torn_tail and not _valid_record_after(view, offset, binding):
            break
        raise CorruptionError(path, offset, f"damaged page record: {problem}")
    return offset


def raise_misplaced(
    data: bytes | bytearray | memoryview, offset: int, *, path: str, binding: bytes | None
) -> None:
    """Raise CorruptionError naming both pages when the record at ``offset`` is a record of
    another page of the address than ``binding``'s (a page copied or restored over this
    one; never taken for a torn tail). Returns when it is not."""
    view = memoryview(data).cast("B")
    own = _own_page(view, offset, binding)
    if own is None or binding is None:
        return
    page = int.from_bytes(binding[:8], "big")
    raise CorruptionError(
        path,
        offset,
        f"damaged page record: a record of page {own}, not of page {page}: this page's data "
        f"is page {own}'s (a page file copied or restored over another)",
        hint=f"restore page {page} from the backup it came from; `store data verify` lists "
        "every page it affects",
    )


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
    """Damaged bytes of a page whose extent is known: ``offset`` and ``length`` in the page,
    the ``index`` of the first record they held and how many they held (``records``), and
    what is wrong. ``header``: the start byte and length (5 bytes) that make them one valid
    record again, when only those were damaged (its checksum, which covers the length and
    the payload, verifies with them); None otherwise. Immutable."""

    index: int
    offset: int
    length: int
    problem: str
    records: int = 1
    header: bytes | None = None


def damaged_records(
    data: bytes | bytearray | memoryview,
    *,
    path: str,
    binding: bytes | None = None,
    records: int | None = None,
) -> list[DamagedRecord]:
    """Every damaged stretch of a page, in page order (empty for a page that reads whole),
    so that a salvage can replace or mend each and keep every other record at its index:

    - a record whose start byte and length are intact but whose checksum or end byte is not:
      one record, its extent known;
    - a damaged start byte or length: the next valid record is looked for byte by byte (a
      bound record's checksum covers its page, so a chance match is about 2**-32); when the
      bytes up to it verify as one record with a corrected header, that is the damage
      (``header`` mends it, nothing is lost); otherwise how many records the bytes held is
      known only from ``records``, the page's record count in the summary of the last clean
      close: with it, the one such stretch of the page holds what the other records leave.

    Raises CorruptionError naming ``path`` and the offset for damage whose record count is
    unknown (no ``records``, or two such stretches on one page, or a count that does not
    fit), and for a record of another page (:func:`raise_misplaced`)."""
    view = memoryview(data).cast("B")
    found: list[DamagedRecord] = []
    unknown: DamagedRecord | None = None
    offset = index = 0
    while offset < len(view):
        problem = _problem(view, offset, binding)
        if problem is None:
            offset += FRAMING + int.from_bytes(view[offset + 1 : offset + 5], "big")
            index += 1
            continue
        raise_misplaced(view, offset, path=path, binding=binding)
        if len(view) - offset >= FRAMING and view[offset] in (RECORD_START, RECORD_BOUND):
            end = offset + FRAMING + int.from_bytes(view[offset + 1 : offset + 5], "big")
            if end == len(view) or (end < len(view) and _problem(view, end, binding) is None):
                found.append(DamagedRecord(index, offset, end - offset, problem))
                offset, index = end, index + 1
                continue
        end = _next_valid(view, offset + 1, binding)
        header = _mended_header(view, offset, end, binding)
        if header is not None:
            found.append(DamagedRecord(index, offset, end - offset, problem, 1, header))
            offset, index = end, index + 1
            continue
        if records is None or unknown is not None:
            raise CorruptionError(
                path,
                offset,
                f"damaged page record: {problem}; its start or length is damaged and the "
                f"{end - offset} bytes up to the next valid record (offset {end}) are not one "
                "record: "
                + (
                    "how many records they held is unknown without the page summary of a "
                    "clean close"
                    if records is None
                    else "a second such stretch on this page leaves their counts unknown"
                ),
            )
        unknown = DamagedRecord(index, offset, end - offset, problem, 0)
        found.append(unknown)
        offset = end
    if unknown is None or records is None:
        return found
    return _counted(found, unknown, records - index, path=path, records=records)


def _counted(
    found: list[DamagedRecord], unknown: DamagedRecord, held: int, *, path: str, records: int
) -> list[DamagedRecord]:
    """``found`` with the stretch ``unknown`` holding ``held`` records (what the page's
    ``records`` leave it) and the indexes after it moved on by them. Raises CorruptionError
    when that many records cannot be in it."""
    if held < 1 or held * _MIN_RECORD > unknown.length:
        raise CorruptionError(
            path,
            unknown.offset,
            f"damaged page record: {unknown.problem}; the page summary says the page holds "
            f"{records} records, which leaves {held} for the {unknown.length} damaged bytes",
        )
    out = []
    for d in found:
        if d.offset < unknown.offset:
            out.append(d)
        elif d is unknown:
            out.append(DamagedRecord(d.index, d.offset, d.length, d.problem, held))
        else:
            out.append(
                DamagedRecord(d.index + held, d.offset, d.length, d.problem, d.records, d.header)
            )
    return out


#: The fewest bytes a record takes: its framing (a salvage's replacement needs more).
_MIN_RECORD: Final = FRAMING


def _next_valid(view: memoryview, offset: int, binding: bytes | None) -> int:
    """The offset of the first valid record at or after ``offset``, or the page's end."""
    raw = view.obj if isinstance(view.obj, bytes | bytearray) else bytes(view)
    size = len(view)
    while offset < size:
        hits = [i for i in (raw.find(b"[", offset), raw.find(b"{", offset)) if i >= 0]
        if not hits:
            return size
        offset = min(hits)
        if _problem(view, offset, binding) is None:
            return offset
        offset += 1
    return size


def _mended_header(view: memoryview, offset: int, end: int, binding: bytes | None) -> bytes | None:
    """The start byte and length that make bytes ``offset..end`` one valid record, or None
    when no such header verifies (more than the header is damaged)."""
    length = end - offset - FRAMING
    if length < 0 or view[end - 1] != RECORD_END:
        return None
    crc = int.from_bytes(view[offset + 5 : offset + 9], "big")
    found = crc32(view[offset + _HEAD.size : end - 1], crc32(length.to_bytes(4, "big")))
    size = length.to_bytes(4, "big")
    if binding is not None and crc32(binding, found) == crc:
        return bytes([RECORD_BOUND]) + size
    if found == crc:
        return bytes([RECORD_START]) + size
    return None


def readable_records(
    data: bytes | bytearray | memoryview,
    *,
    path: str,
    binding: bytes | None = None,
    records: int | None = None,
) -> tuple[list[bytes | None], list[DamagedRecord]]:
    """The records of a page with each damaged one (:func:`damaged_records`) as None, so
    indexes stay those of the page (a record whose header alone is damaged is read with its
    mended header), and the damaged stretches. ``records``: the page's record count when
    known. Raises CorruptionError as damaged_records does."""
    bad = {d.offset: d for d in damaged_records(data, path=path, binding=binding, records=records)}
    view = memoryview(data).cast("B")
    out: list[bytes | None] = []
    offset = 0
    while offset < len(view):
        d = bad.get(offset)
        if d is not None:
            if d.header is not None:
                out.append(bytes(view[offset + _HEAD.size : offset + d.length - 1]))
            else:
                out.extend([None] * d.records)
            offset += d.length
            continue
        length = int.from_bytes(view[offset + 1 : offset + 5], "big")
        out.append(bytes(view[offset + _HEAD.size : offset + _HEAD.size + length]))
        offset += FRAMING + length
    return out, sorted(bad.values(), key=lambda d: d.offset)


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
