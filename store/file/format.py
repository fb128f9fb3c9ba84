"""Byte format of the native file journal, version 1.

This module is the format's one definition: the tables below, the structs and constants, and
the encoders and decoders of headers, records and markers. Every other module writes and reads
these bytes through it (compaction, salvage, the markers, the offline tools), except three
per-record loops kept in one frame for speed, each tied to this module by tests:

- ``store.file.reader.python_scan``: a load's scan, applying the validity rules below inline
  (the same rules as :func:`decode_record`); it is the reference of the compiled scan;
- ``store.file.journal.FileJournal._append``: the append hot path packs ``RECORD_HEAD`` and
  ``RECORD_TAIL`` itself where the compiled encoder is not built;
- ``store/_speedups_journal.c``: the compiled scan and append (and the scan-and-replay of
  ``store/_speedups_load.c``, on the same scan loop). Their differential tests
  (``tests/file/test_speedups.py``) require the scans to equal ``python_scan``, the append to
  write the bytes of :func:`encode_record`, and journals written by either path to load the
  same in the other; ``tests/file/test_golden.py`` reads files of this version written earlier.

All integers are little-endian. A journal file is a header followed by records, pre-allocated
to ``journal-file-size`` bytes; the unused rest of a file is zeros (a new file) or left-over
records of an earlier use of the file (a reused file is not re-zeroed).

File header (``HEADER``, 32 bytes)
==================================

======  ====  ==============  ==============================================================
Offset  Size  Field           Description
======  ====  ==============  ==============================================================
0       4     magic           ``b"SJNL"``
4       2     version         format version, ``1``
6       2     kind            0 = messages journal, 1 = bindings journal (user version)
8       8     file_id         unsigned; stamped into every record written in this use of the file
16      8     created_ns      wall-clock time the header was written (informational)
24      4     file_size       the size the file was pre-allocated to, in bytes; 0 = unknown
                              (files written before this field existed, when it was
                              ``reserved`` and always zero)
28      4     header_crc      CRC-32 (zlib) of bytes 0..27
======  ====  ==============  ==============================================================

Records start at offset 32 (``DATA_START``). A file whose size on disk is below its header's
``file_size`` has been truncated: what the missing bytes held is lost (see
``store.file.integrity``). Journal files are at most 2 GiB (``journal-file-size`` is an
int, as in Artemis); a size that does not fit the field is written as 0 (unknown).

Record (``RECORD_HEAD`` 52 bytes, body, ``RECORD_TAIL`` 8 bytes)
================================================================

======  ====  ==============  ==============================================================
Offset  Size  Field           Description
======  ====  ==============  ==============================================================
0       4     length          total record length in bytes, head + body + tail (>= 60)
4       1     type            :class:`~store.journal.api.RecordType`, 10..19
5       1     user_type       user record type 0..255 (0 where it does not apply)
6       1     compact_count   0 when appended, 1 when written by the compactor
7       1     flags           bit 0 ``SYNCED``: written by the compactor into a file synced
                              before use; bit 1 ``FLOOR``: ``durable_lsn`` is at least the
                              last lsn of the file written before this one; bit 2
                              ``MARKER``: an ``EVENT`` record written by the journal itself
                              (a file-list marker, below); every other
                              bit zero (reserved)
8       8     file_id         the header ``file_id`` of the file the record was written into
16      8     lsn             log sequence number: +1 per record, across files
24      8     durable_lsn     highest lsn known durable when this record was appended
32      8     id              record id (signed); 0 for prepare / commit / rollback
40      8     tx_id           transaction id (signed); 0 outside transactions
48      4     tx_count        prepare / commit: records of this transaction written in this
                              same file before it; 0 otherwise
52      n     body            the record data; the XID for a prepare; empty for deletes,
                              commits and rollbacks
52+n    4     checksum        CRC-32 (zlib) of ``body`` followed by bytes 0..51 of the record
56+n    4     length_copy     the same value as ``length``
======  ====  ==============  ==============================================================

The checksum covers the body first so that writers can checksum large bodies before taking
the append lock and then extend the CRC over the head (``zlib.crc32(head, crc32(body))``).

A record at offset ``p`` of a file whose header says ``file_id = F`` and whose size is ``S`` is
**valid** if and only if:

1. ``p + 60 <= S``;
2. ``60 <= length <= S - p``;
3. ``type`` is one of 10..19;
4. the record's ``file_id`` equals ``F`` (otherwise it is left over from an earlier use);
5. ``length_copy == length``;
6. ``checksum`` matches.

Reading a file walks records **in sequence**: the first record starts at ``DATA_START``; the
next starts where the previous one ends, or, when no valid record starts there and the bytes
there are zero padding, at the following multiple of ``PAD_UNIT`` (writers with aligned I/O pad a
flush with zeros up to their alignment, a multiple of ``PAD_UNIT``). Padding is recognised in two
ways: a ``length`` of zero (the next record starts at the ``PAD_UNIT`` boundary at or before the
next non-zero byte), or 1 to 3 zero bytes right before a ``PAD_UNIT`` boundary (a pad shorter
than the ``length`` field, whose ``length`` therefore reads into the next record). A record in
sequence must be valid and its ``lsn`` must be the previous record's ``lsn + 1``; the first
record in sequence, when it carries ``FLOOR``, must have ``durable_lsn >= lsn - 1`` (otherwise
it was not the first record written into the file: the ones before it are missing, and the
file has no record in sequence). **End of data** is the first place where no record in
sequence starts.

Why ``FLOOR``: the first record of a file has no predecessor in the file to check its lsn
against, and with aligned writers a lost first flush leaves zeros from the header to the next
flush that read like padding. A writer syncs a file before it writes the next, so by the time
any record of a file reaches the disk, every lsn of the previous file is durable; the writer
stamps that into ``durable_lsn`` and sets ``FLOOR``. Records without ``FLOOR`` (written before
the bit existed, or by the compactor) are not held to the rule.

What lies after the end of data decides what it was (see ``store.file.reader``):

- nothing valid (zeros, or records of another ``file_id``): pre-allocated space, a clean end;
- valid records that no later record proves durable: a **torn tail**, the unsynced part of the
  last write; ignored by a load and zeroed when the journal opens for writing;
- a valid record whose ``durable_lsn`` is at least the ``lsn`` the missing record would have had,
  or that carries the ``SYNCED`` flag, or any valid data after the end in a file that is not the
  last one written: the data at the end of data had been durable, so it is **corrupt** — a
  :class:`~store.errors.ChecksumError` naming the file and offset, never a silent skip.

Writers keep this decidable: a file is fdatasync'd before the first write to the next file, so
at most the last file written has an unsynced tail.

File-list markers
=================

The journal records which data files must exist in the journal itself, in ``EVENT`` records
(type 10) with the ``MARKER`` flag, ``id`` 0, ``tx_id`` 0 and ``user_type`` 0. An ordinary
event can never carry the flag (``append_event`` cannot set flags), and a reader that does not
know markers skips them as it skips every event: they need no new format version. A load never
returns them, compaction drops them, and tools do not count them as records. Their body:

Marker body
===========

======  ====  ==============  ==============================================================
Offset  Size  Field           Description
======  ====  ==============  ==============================================================
0       4     magic           ``b"SJFL"``
4       1     kind            1 = ``FILES``, 2 = ``CHANGE``
5       1     known           ``FILES``: 1 = the list is complete, 0 = the list was left out
                              (too long for the file), so which files must exist is unknown
                              until the next ``FILES`` marker; ``CHANGE``: 1
6       2     reserved        zero
8       4     retired         ``CHANGE``: how many of the entries are retired files (they
                              come first); ``FILES``: 0
12      4     count           number of entries
16      24n   entries         per file: ``file_id`` (8), ``first_lsn`` (8), ``last_lsn`` (8);
                              lsns 0 where they do not matter (retired files)
======  ====  ==============  ==============================================================

- ``FILES`` is the first record of every file the writer starts appending into while there is
  at least one other data file, and lists every other data file with the lsns it holds (the
  records in sequence from ``first_lsn`` to ``last_lsn``). A repair that cuts a file may
  append one at the cut, restating the files left. A ``FILES`` marker anywhere replaces what
  the markers before it said.
- ``CHANGE`` follows every change of the set of data files made while a file is being written
  (reclaim retiring files, a compaction replacing files by its output); it is durable before
  any retired file is reused or removed.

Which files must exist is what the markers in sequence of the newest file holding records say
(``store.file.integrity``).

Versioning: ``version`` is bumped for any change a version-1 reader would misread; readers
refuse versions they do not know (``CorruptionError`` with a hint to upgrade). Golden files of
each version live in ``tests/testdata/`` and are regenerated only on purpose.
"""

from __future__ import annotations

import struct
import time
import zlib
from dataclasses import dataclass
from typing import Final, NamedTuple

from store.errors import CorruptionError
from store.journal.api import EVENT, ROLLBACK, RecordType

__all__ = [
    "DATA_START",
    "FLAG_FLOOR",
    "FLAG_MARKER",
    "FLAG_SYNCED",
    "FILE_ID_FIELD",
    "FILE_ID_OFFSET",
    "FORMAT_VERSION",
    "HEADER",
    "HEADER_SIZE",
    "KIND_BINDINGS",
    "KIND_MESSAGES",
    "MAGIC",
    "MARKER_CHANGE",
    "MARKER_FILES",
    "MARKER_ENTRY",
    "MARKER_HEAD",
    "MAX_TYPE",
    "MIN_TYPE",
    "OVERHEAD",
    "PAD_UNIT",
    "RECORD_HEAD",
    "RECORD_TAIL",
    "FileHeader",
    "Marker",
    "MarkerEntry",
    "Record",
    "RecordHead",
    "decode_head",
    "decode_header",
    "decode_marker",
    "decode_record",
    "encode_header",
    "encode_marker",
    "encode_record",
    "marker_size",
]

MAGIC: Final = b"SJNL"
FORMAT_VERSION: Final = 1
KIND_MESSAGES: Final = 0
KIND_BINDINGS: Final = 1
FLAG_SYNCED: Final = 0x01
FLAG_FLOOR: Final = 0x02
FLAG_MARKER: Final = 0x04

HEADER: Final = struct.Struct("<4sHHQQI")  # magic, version, kind, file_id, created_ns, file_size
HEADER_CRC: Final = struct.Struct("<I")
HEADER_SIZE: Final = HEADER.size + HEADER_CRC.size  # 32
DATA_START: Final = HEADER_SIZE

# length, type, user_type, compact_count, flags, file_id, lsn, durable_lsn, id, tx_id, tx_count
RECORD_HEAD: Final = struct.Struct("<IBBBBQQQqqI")
RECORD_TAIL: Final = struct.Struct("<II")  # checksum, length_copy
OVERHEAD: Final = RECORD_HEAD.size + RECORD_TAIL.size  # 60
PAD_UNIT: Final = 512

#: A record's ``type`` is one of MIN_TYPE..MAX_TYPE (RecordType 10..19; validity rule 3).
MIN_TYPE: Final = EVENT
MAX_TYPE: Final = ROLLBACK
#: A record's ``file_id`` field: where it sits in the record and how it is packed (a reader
#: looking for the records of one file searches for these bytes).
FILE_ID_OFFSET: Final = 8
FILE_ID_FIELD: Final = struct.Struct("<Q")

MARKER_MAGIC: Final = b"SJFL"
MARKER_FILES: Final = 1
MARKER_CHANGE: Final = 2
MARKER_HEAD: Final = struct.Struct("<4sBBHII")  # magic, kind, known, reserved, retired, count
MARKER_ENTRY: Final = struct.Struct("<QQQ")  # file_id, first_lsn, last_lsn
_MAX_FILE_SIZE: Final = 2**32 - 1

assert HEADER_SIZE == 32 and RECORD_HEAD.size == 52 and OVERHEAD == 60
assert RECORD_HEAD.unpack(bytes(FILE_ID_OFFSET) + FILE_ID_FIELD.pack(7) + bytes(36))[5] == 7
assert MARKER_HEAD.size == 16 and MARKER_ENTRY.size == 24


@dataclass(frozen=True, slots=True)
class FileHeader:
    """The decoded header of a journal file."""

    file_id: int
    kind: int
    version: int = FORMAT_VERSION
    created_ns: int = 0
    #: Bytes the file was pre-allocated to; 0 when unknown (written before the field existed).
    file_size: int = 0


class Record:
    """One decoded record; ``offset`` is where it starts in its file, ``length`` its size."""

    __slots__ = (
        "body",
        "compact_count",
        "durable_lsn",
        "file_id",
        "flags",
        "id",
        "length",
        "lsn",
        "offset",
        "tx_count",
        "tx_id",
        "type",
        "user_type",
    )

    def __init__(
        self,
        offset: int,
        length: int,
        type: int,
        user_type: int,
        compact_count: int,
        file_id: int,
        lsn: int,
        durable_lsn: int,
        id: int,
        tx_id: int,
        tx_count: int,
        body: bytes,
        flags: int = 0,
    ) -> None:
        self.offset = offset
        self.flags = flags
        self.length = length
        self.type = type
        self.user_type = user_type
        self.compact_count = compact_count
        self.file_id = file_id
        self.lsn = lsn
        self.durable_lsn = durable_lsn
        self.id = id
        self.tx_id = tx_id
        self.tx_count = tx_count
        self.body = body

    def __repr__(self) -> str:
        kind = RecordType(self.type).name if MIN_TYPE <= self.type <= MAX_TYPE else self.type
        return (
            f"Record({kind} id={self.id} tx={self.tx_id} lsn={self.lsn} "
            f"@{self.offset}+{self.length} body={len(self.body)}B)"
        )


def encode_header(
    file_id: int, kind: int, *, created_ns: int | None = None, file_size: int = 0
) -> bytes:
    """The 32 header bytes of a file with ``file_id`` pre-allocated to ``file_size`` bytes
    (0: unknown; a size beyond the 32-bit field is written as 0)."""
    if created_ns is None:
        created_ns = time.time_ns()
    if not 0 <= file_size <= _MAX_FILE_SIZE:
        file_size = 0
    head = HEADER.pack(MAGIC, FORMAT_VERSION, kind, file_id, created_ns, file_size)
    return head + HEADER_CRC.pack(zlib.crc32(head))


def decode_header(data: bytes, path: str) -> FileHeader | None:
    """Decode a file header; returns None when the header is all zeros (a file never finished).

    Raises CorruptionError for a header that is neither zeros nor a valid version-1 header.
    """
    if len(data) < HEADER_SIZE:
        return None
    raw = bytes(data[:HEADER_SIZE])
    if raw == bytes(HEADER_SIZE):
        return None
    magic, version, kind, file_id, created_ns, file_size = HEADER.unpack_from(raw, 0)
    (crc,) = HEADER_CRC.unpack_from(raw, HEADER.size)
    if magic != MAGIC:
        raise CorruptionError(path, 0, f"not a journal file (magic {magic!r})")
    if zlib.crc32(raw[: HEADER.size]) != crc:
        raise CorruptionError(path, 0, "file header checksum mismatch")
    if version != FORMAT_VERSION:
        raise CorruptionError(
            path,
            0,
            f"journal format version {version} is not supported "
            f"(this build reads {FORMAT_VERSION})",
            hint="open it with the version of store that wrote it, or upgrade store",
        )
    return FileHeader(
        file_id=file_id, kind=kind, version=version, created_ns=created_ns, file_size=file_size
    )


def encode_record(
    type: int,
    *,
    file_id: int,
    lsn: int,
    durable_lsn: int,
    id: int = 0,
    tx_id: int = 0,
    user_type: int = 0,
    tx_count: int = 0,
    body: bytes = b"",
    compact_count: int = 0,
    flags: int = 0,
    body_crc: int | None = None,
) -> bytes:
    """All bytes of one record (head, body, tail). ``body_crc`` may be precomputed."""
    length = OVERHEAD + len(body)
    head = RECORD_HEAD.pack(
        length,
        type,
        user_type,
        compact_count,
        flags,
        file_id,
        lsn,
        durable_lsn,
        id,
        tx_id,
        tx_count,
    )
    crc = zlib.crc32(head, zlib.crc32(body) if body_crc is None else body_crc)
    return b"".join((head, body, RECORD_TAIL.pack(crc, length)))


_unpack_head = RECORD_HEAD.unpack_from
_unpack_tail = RECORD_TAIL.unpack_from
_crc32 = zlib.crc32


class RecordHead(NamedTuple):
    """The fields of a record's head (``RECORD_HEAD``), in their order."""

    length: int
    type: int
    user_type: int
    compact_count: int
    flags: int
    file_id: int
    lsn: int
    durable_lsn: int
    id: int
    tx_id: int
    tx_count: int


def decode_head(data: bytes, offset: int) -> RecordHead:
    """The head at ``offset`` as it reads, checked against nothing (none of rules 1-6): for
    describing records that are not valid (salvage lists the damaged records it drops by
    them). ``offset + RECORD_HEAD.size`` must be within ``data``."""
    return RecordHead._make(_unpack_head(data, offset))


def decode_record(data: bytes, offset: int, file_id: int) -> Record | None:
    """The valid record at ``offset`` (rules 1-6 of the module docstring), or None."""
    size = len(data)
    if offset + OVERHEAD > size:
        return None
    (length, rtype, user_type, cc, flags, fid, lsn, dlsn, rid, tx_id, tx_count) = _unpack_head(
        data, offset
    )
    if length < OVERHEAD or length > size - offset:
        return None
    if rtype < MIN_TYPE or rtype > MAX_TYPE or fid != file_id:
        return None
    end = offset + length
    crc, length_copy = _unpack_tail(data, end - 8)
    if length_copy != length:
        return None
    body = bytes(data[offset + 52 : end - 8])
    if _crc32(data[offset : offset + 52], _crc32(body)) != crc:
        return None
    return Record(
        offset, length, rtype, user_type, cc, fid, lsn, dlsn, rid, tx_id, tx_count, body, flags
    )


# -- file-list markers ---------------------------------------------------------------------------


class MarkerEntry(NamedTuple):
    """One file named by a marker: its id and the lsns of its records in sequence."""

    file_id: int
    first_lsn: int
    last_lsn: int


@dataclass(frozen=True, slots=True)
class Marker:
    """A decoded marker body (see "File-list markers" in the module docstring).

    ``FILES``: ``files`` lists the other data files (``known`` False: the list was left out).
    ``CHANGE``: ``retired`` files left the set of data files, ``files`` joined it.
    """

    kind: int
    files: tuple[MarkerEntry, ...] = ()
    retired: tuple[MarkerEntry, ...] = ()
    known: bool = True


def marker_size(entries: int) -> int:
    """Bytes of a whole marker record (head, body, tail) naming ``entries`` files."""
    return OVERHEAD + MARKER_HEAD.size + entries * MARKER_ENTRY.size


def encode_marker(marker: Marker) -> bytes:
    """The body of a marker record."""
    entries = (*marker.retired, *marker.files)
    head = MARKER_HEAD.pack(
        MARKER_MAGIC, marker.kind, int(marker.known), 0, len(marker.retired), len(entries)
    )
    return head + b"".join(MARKER_ENTRY.pack(*e) for e in entries)


def decode_marker(body: bytes) -> Marker | None:
    """The marker in ``body`` (of an EVENT record with ``FLAG_MARKER``), or None when the body
    is not a marker this version understands (a reader then ignores it, as any event)."""
    if len(body) < MARKER_HEAD.size:
        return None
    magic, kind, known, _reserved, retired, count = MARKER_HEAD.unpack_from(body, 0)
    if magic != MARKER_MAGIC or kind not in (MARKER_FILES, MARKER_CHANGE) or retired > count:
        return None
    if len(body) != MARKER_HEAD.size + count * MARKER_ENTRY.size:
        return None
    entries = tuple(
        MarkerEntry._make(MARKER_ENTRY.unpack_from(body, MARKER_HEAD.size + i * MARKER_ENTRY.size))
        for i in range(count)
    )
    return Marker(kind, entries[retired:], entries[:retired], bool(known))
