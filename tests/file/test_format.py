"""store.file.format: the documented tables match the code, the validity rules hold byte by byte,
and every record and header survives an encode/decode round trip."""

from __future__ import annotations

import re
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.errors import CorruptionError
from store.file import format as fmt
from store.journal.api import MAX_ID, MIN_ID, RecordType
from tests.support.doctables import tables

# -- the docstring tables ----------------------------------------------------------------------


TABLES = tables(fmt.__doc__ or "")
HEADER_TABLE = next(rows for title, rows in TABLES.items() if title.startswith("File header"))
RECORD_TABLE = next(rows for title, rows in TABLES.items() if title.startswith("Record"))


def _struct_sizes(s: struct.Struct) -> list[int]:
    sizes = []
    for count, code in re.findall(r"(\d*)([xcbB?hHiIlLqQnNefdsp])", s.format):
        n = int(count) if count else 1
        if code == "s":
            sizes.append(n)
        else:
            sizes.extend([struct.calcsize("<" + code)] * n)
    return sizes


def _offset(text: str, n: int) -> int:
    return int(eval(text, {"n": n}))  # "52+n", "56+n": the table's own arithmetic


def test_docstring_has_both_tables() -> None:
    assert [f for _o, _s, f in HEADER_TABLE] == [
        "magic",
        "version",
        "kind",
        "file_id",
        "created_ns",
        "file_size",
        "header_crc",
    ]
    assert [f for _o, _s, f in RECORD_TABLE][-3:] == ["body", "checksum", "length_copy"]


def test_header_table_matches_struct_sizes_and_offsets() -> None:
    sizes = [int(s) for _o, s, _f in HEADER_TABLE]
    assert sizes == _struct_sizes(fmt.HEADER) + _struct_sizes(fmt.HEADER_CRC)
    offset = 0
    for off, size, field in HEADER_TABLE:
        assert int(off) == offset, field
        offset += int(size)
    assert offset == fmt.HEADER_SIZE == 32
    assert fmt.DATA_START == fmt.HEADER_SIZE


def test_record_table_matches_struct_sizes_and_offsets() -> None:
    head = RECORD_TABLE[:-3]
    assert [int(s) for _o, s, _f in head] == _struct_sizes(fmt.RECORD_HEAD)
    offset = 0
    for off, size, field in head:
        assert int(off) == offset, field
        offset += int(size)
    assert offset == fmt.RECORD_HEAD.size == 52
    body, checksum, length_copy = RECORD_TABLE[-3:]
    n = 17
    assert _offset(body[0], n) == 52 and body[1] == "n"
    assert _offset(checksum[0], n) == 52 + n and int(checksum[1]) == 4
    assert _offset(length_copy[0], n) == 56 + n and int(length_copy[1]) == 4
    assert _struct_sizes(fmt.RECORD_TAIL) == [4, 4]
    assert fmt.OVERHEAD == 60


def test_header_fields_sit_where_the_table_says() -> None:
    raw = fmt.encode_header(
        0x0102030405060708, fmt.KIND_BINDINGS, created_ns=0x1122334455667788, file_size=0x0A0B0C0D
    )
    expected = {
        "magic": int.from_bytes(b"SJNL", "little"),
        "version": fmt.FORMAT_VERSION,
        "kind": fmt.KIND_BINDINGS,
        "file_id": 0x0102030405060708,
        "created_ns": 0x1122334455667788,
        "file_size": 0x0A0B0C0D,
        "header_crc": zlib.crc32(raw[:28]),
    }
    for off, size, field in HEADER_TABLE:
        value = int.from_bytes(raw[int(off) : int(off) + int(size)], "little")
        assert value == expected[field], field


def test_record_fields_sit_where_the_table_says() -> None:
    body = b"the body!"
    raw = fmt.encode_record(
        RecordType.PREPARE,
        file_id=77,
        lsn=1001,
        durable_lsn=999,
        id=-5,
        tx_id=-6,
        user_type=45,
        tx_count=3,
        body=body,
        compact_count=2,
    )
    n = len(body)
    expected = {
        "length": 60 + n,
        "type": int(RecordType.PREPARE),
        "user_type": 45,
        "compact_count": 2,
        "flags": 0,
        "file_id": 77,
        "lsn": 1001,
        "durable_lsn": 999,
        "id": -5,
        "tx_id": -6,
        "tx_count": 3,
        "checksum": zlib.crc32(raw[:52], zlib.crc32(body)),
        "length_copy": 60 + n,
    }
    for off, size, field in RECORD_TABLE:
        start = _offset(off, n)
        if field == "body":
            assert raw[start : start + n] == body
            continue
        signed = field in ("id", "tx_id")
        value = int.from_bytes(raw[start : start + int(size)], "little", signed=signed)
        assert value == expected[field], field
    assert len(raw) == 60 + n


# -- decoding records: hand-built bytes ---------------------------------------------------------

FILE_ID = 0xABCDEF


def raw_record(
    *,
    type: int = int(RecordType.ADD),
    file_id: int = FILE_ID,
    body: bytes = b"hello",
    length: int | None = None,
    length_copy: int | None = None,
    crc: int | None = None,
    lsn: int = 7,
) -> bytes:
    """A record packed field by field, with a correct checksum unless ``crc`` is given."""
    n = 60 + len(body) if length is None else length
    head = struct.pack("<IBBBBQQQqqI", n, type, 3, 0, 0, file_id, lsn, 6, 42, 0, 0)
    checksum = zlib.crc32(head, zlib.crc32(body)) if crc is None else crc
    copy = n if length_copy is None else length_copy
    return head + body + struct.pack("<II", checksum, copy)


def _flip(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


GOOD = raw_record()

INVALID_CASES = [
    pytest.param(GOOD[:59], FILE_ID, id="short-below-overhead"),
    pytest.param(GOOD[:-1], FILE_ID, id="short-truncated-tail"),
    pytest.param(raw_record(length=59), FILE_ID, id="bad-length-below-60"),
    pytest.param(raw_record(length=len(GOOD) + 1), FILE_ID, id="bad-length-beyond-data"),
    pytest.param(raw_record(type=9), FILE_ID, id="bad-type-9"),
    pytest.param(raw_record(type=20), FILE_ID, id="bad-type-20"),
    pytest.param(raw_record(type=0), FILE_ID, id="bad-type-0"),
    pytest.param(raw_record(file_id=FILE_ID + 1), FILE_ID, id="wrong-file-id"),
    pytest.param(raw_record(length_copy=len(GOOD) + 1), FILE_ID, id="bad-length-copy"),
    pytest.param(raw_record(length_copy=0), FILE_ID, id="zero-length-copy"),
    pytest.param(raw_record(crc=zlib.crc32(b"x")), FILE_ID, id="bad-checksum"),
    pytest.param(_flip(GOOD, 53), FILE_ID, id="body-flipped"),
    pytest.param(_flip(GOOD, 16), FILE_ID, id="head-flipped-lsn"),
    pytest.param(_flip(GOOD, 5), FILE_ID, id="head-flipped-user-type"),
    pytest.param(bytes(60), FILE_ID, id="zeros"),
]


@pytest.mark.parametrize(("data", "file_id"), INVALID_CASES)
def test_decode_record_rejects(data: bytes, file_id: int) -> None:
    assert fmt.decode_record(data, 0, file_id) is None


@pytest.mark.parametrize("rtype", list(RecordType), ids=[t.name for t in RecordType])
def test_decode_record_accepts_every_type(rtype: RecordType) -> None:
    raw = raw_record(type=int(rtype), body=b"payload")
    rec = fmt.decode_record(b"\xff" * 10 + raw + b"\xee" * 5, 10, FILE_ID)
    assert rec is not None
    assert (rec.type, rec.offset, rec.length, rec.body) == (int(rtype), 10, len(raw), b"payload")
    assert (rec.user_type, rec.file_id, rec.lsn, rec.durable_lsn, rec.id) == (3, FILE_ID, 7, 6, 42)


def test_decode_record_accepts_an_empty_body_at_the_end_of_the_data() -> None:
    raw = raw_record(type=int(RecordType.COMMIT), body=b"")
    rec = fmt.decode_record(bytes(100) + raw, 100, FILE_ID)
    assert rec is not None and rec.length == 60 and rec.body == b""


# -- decoding headers ----------------------------------------------------------------------------


def _header(*, magic: bytes = b"SJNL", version: int = 1, crc: int | None = None) -> bytes:
    head = struct.pack("<4sHHQQI", magic, version, 0, 65536, 123, 0)
    return head + struct.pack("<I", zlib.crc32(head) if crc is None else crc)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(bytes(32), id="zeros"),
        pytest.param(bytes(4096), id="zeros-whole-file"),
        pytest.param(_header()[:31], id="short"),
    ],
)
def test_decode_header_returns_none_for_a_file_never_finished(data: bytes) -> None:
    assert fmt.decode_header(data, "f.jrn") is None


@pytest.mark.parametrize(
    ("data", "reason", "hint"),
    [
        pytest.param(_header(magic=b"XJNL"), "not a journal file", None, id="bad-magic"),
        pytest.param(_header(crc=1), "checksum", None, id="bad-crc"),
        pytest.param(_header(version=2), "version 2", "upgrade", id="unknown-version"),
        pytest.param(_header(version=0), "version 0", "upgrade", id="version-zero"),
    ],
)
def test_decode_header_refuses(data: bytes, reason: str, hint: str | None) -> None:
    with pytest.raises(CorruptionError) as info:
        fmt.decode_header(data, "dir/data-1.jrn")
    err = info.value
    assert err.path == "dir/data-1.jrn" and err.offset == 0
    assert reason in err.reason
    if hint is not None:
        assert err.hint is not None and hint in err.hint


def test_decode_header_reads_a_valid_header() -> None:
    header = fmt.decode_header(_header() + b"rest of file", "f")
    assert header == fmt.FileHeader(file_id=65536, kind=0, version=1, created_ns=123)


# -- round trips -----------------------------------------------------------------------------------

U64 = st.integers(0, 2**64 - 1)
IDS = st.integers(MIN_ID, MAX_ID)


@given(
    rtype=st.sampled_from(list(RecordType)),
    file_id=U64,
    lsn=U64,
    durable_lsn=U64,
    rid=IDS,
    tx_id=IDS,
    user_type=st.integers(0, 255),
    tx_count=st.integers(0, 2**32 - 1),
    compact_count=st.integers(0, 255),
    body=st.binary(max_size=600),
    before=st.binary(max_size=40),
    after=st.binary(max_size=40),
)
def test_record_round_trip(
    rtype: RecordType,
    file_id: int,
    lsn: int,
    durable_lsn: int,
    rid: int,
    tx_id: int,
    user_type: int,
    tx_count: int,
    compact_count: int,
    body: bytes,
    before: bytes,
    after: bytes,
) -> None:
    raw = fmt.encode_record(
        int(rtype),
        file_id=file_id,
        lsn=lsn,
        durable_lsn=durable_lsn,
        id=rid,
        tx_id=tx_id,
        user_type=user_type,
        tx_count=tx_count,
        body=body,
        compact_count=compact_count,
    )
    rec = fmt.decode_record(before + raw + after, len(before), file_id)
    assert rec is not None
    assert (rec.offset, rec.length, rec.type, rec.body) == (len(before), len(raw), int(rtype), body)
    assert (rec.file_id, rec.lsn, rec.durable_lsn) == (file_id, lsn, durable_lsn)
    assert (rec.id, rec.tx_id, rec.user_type) == (rid, tx_id, user_type)
    assert (rec.tx_count, rec.compact_count) == (tx_count, compact_count)


@given(body=st.binary(max_size=300))
def test_precomputed_body_crc_gives_the_same_bytes(body: bytes) -> None:
    plain = fmt.encode_record(int(RecordType.ADD), file_id=1, lsn=2, durable_lsn=1, body=body)
    pre = fmt.encode_record(
        int(RecordType.ADD), file_id=1, lsn=2, durable_lsn=1, body=body, body_crc=zlib.crc32(body)
    )
    assert plain == pre


@given(file_id=U64, kind=st.integers(0, 2**16 - 1), created_ns=U64)
def test_header_round_trip(file_id: int, kind: int, created_ns: int) -> None:
    raw = fmt.encode_header(file_id, kind, created_ns=created_ns)
    assert len(raw) == fmt.HEADER_SIZE
    header = fmt.decode_header(raw, "f")
    assert header == fmt.FileHeader(file_id=file_id, kind=kind, version=1, created_ns=created_ns)
