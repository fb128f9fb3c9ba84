"""Record bodies for the JVM decoder's parity tests: every kind of record
:func:`store.reporting.decode.decode_body` reads, built with the project's own encoders, and
damaged copies of them (truncations, byte flips, bad versions, bad UTF-8, bad lengths, and
bodies Python's codec reads but ``Message`` refuses)."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

from store.journal.api import ADD, ADD_TX, COMMIT, DELETE, DELETE_TX, EVENT, UPDATE, UPDATE_TX
from store.messaging import Message
from store.messaging import records as r
from store.messaging.codec import Writer
from store.messaging.message_records import encode_large_message, encode_message
from store.messaging.page_records import (
    CursorAck,
    PageComplete,
    PageCounterIncrement,
    PageCounterPending,
    PageCounterValue,
    PageTransaction,
    PageTransactionUpdate,
)

#: (journal, kind, user record type, id, record)
Row = tuple[str, int, int | None, int, bytes | None]

_ARTEMIS = Message(
    address="artemis.q", body=b"hello", timestamp=9, priority=1, message_type="text",
    user_id="ID:1234", expiration=77, scheduled_delivery=5,
    properties={"b8": -3, "s16": 300, "i32": 70_000, "f32": 0.5, "ss": "s", "tn": None,
                "plain": 1.25},
    property_types={"b8": "byte", "s16": "short", "i32": "integer", "f32": "float",
                    "ss": "simple-string", "tn": "long"},
)  # fmt: skip
MESSAGES = (
    Message(address="a", body=b"x" * 64, timestamp=5, priority=7),
    Message(address="orders", body=b"", timestamp=0, priority=0, durable=False),
    Message(address="ünï·地址", body=b"\xff" * 300, timestamp=2**62, expiration=2**63 - 1),
    Message(address="stomp", body=b"frame body",
            properties={"destination": "/queue/a", "content-type": "text/plain", "ü": "vé"}),
    Message(address="all", body=b"b", properties={"n": None, "f": False, "t": True, "i": -5,
            "big": 2**63 - 1, "x": 1.5, "nan": math.nan, "inf": -math.inf, "s": "str",
            "b": b"\x00\x01", "e": ""}),
    _ARTEMIS,
    Message(address="bytes.q", body=b"", message_type="bytes"),
    Message(address="uid", body=b"z", user_id=""),
    Message(address="tnull", body=b"", property_types={"x": "boolean"}, properties={"x": None}),
    # what the delivery policies' moves leave: an origin (dead-letter), an origin and an
    # expiry time (expiry), an origin that is not text (no move wrote it), each as version 1
    # and as version 2 (Artemis's headers)
    Message(address="DLQ", body=b"d", properties={"_AMQ_ORIG_ADDRESS": "orders",
            "_AMQ_ORIG_QUEUE": "orders", "_AMQ_ORIG_MESSAGE_ID": 7}),
    Message(address="EXP", body=b"e", properties={"_AMQ_ORIG_ADDRESS": "örders",
            "_AMQ_ACTUAL_EXPIRY": 123}),
    Message(address="odd", body=b"o", properties={"_AMQ_ORIG_ADDRESS": 5,
            "_AMQ_ACTUAL_EXPIRY": 1}),
    Message(address="only.expiry", body=b"", properties={"_AMQ_ACTUAL_EXPIRY": 1}),
    Message(address="DLQ", body=b"d", message_type="text",
            properties={"_AMQ_ORIG_ADDRESS": "orders"},
            property_types={"_AMQ_ORIG_ADDRESS": "simple-string"}),
    Message(address="EXP", body=b"e", user_id="u",
            properties={"_AMQ_ORIG_ADDRESS": "a", "_AMQ_ACTUAL_EXPIRY": None}),
)  # fmt: skip


def message_bodies() -> list[tuple[int, bytes]]:
    """(user record type, body) of every message of :data:`MESSAGES`, inline (45) and large
    (30)."""
    out: list[tuple[int, bytes]] = []
    for i, m in enumerate(MESSAGES):
        assert isinstance(m.body, bytes)
        out.append((r.ADD_MESSAGE_PROTOCOL, encode_message(m, m.body)))
        out.append((r.ADD_LARGE_MESSAGE, encode_large_message(m, i * 1000)))
    return out


def other_bodies() -> list[tuple[str, int, int, bytes]]:
    """(journal, kind, user record type, body) of every other record read, and of records of
    types and kinds nothing is read from."""
    rt = r.QueueRecord("q", "a", "ANYCAST", None).encode()
    return [
        ("messages", UPDATE, r.ADD_REF, r.RefRecord(7).encode()),
        ("messages", UPDATE_TX, r.ACKNOWLEDGE_REF, r.AckRecord(-8).encode()),
        ("messages", UPDATE, r.UPDATE_DELIVERY_COUNT, r.DeliveryCountRecord(3, 2).encode()),
        ("messages", UPDATE, r.SET_SCHEDULED_DELIVERY_TIME,
         r.ScheduledTimeRecord(4, 1000).encode()),
        ("messages", ADD_TX, r.DUPLICATE_ID, r.DuplicateIdRecord("addr", b"dup").encode()),
        ("messages", ADD, r.DUPLICATE_ID, r.DuplicateIdRecord("", b"").encode()),
        ("messages", ADD, 39, CursorAck(1, 2, 3).encode()),
        ("messages", ADD_TX, 42, PageComplete(1, 5, 10).encode()),
        ("messages", ADD_TX, 35, PageTransaction(77, 3).encode()),
        ("messages", ADD, 35, PageTransaction(-1, 0).encode()),
        ("messages", UPDATE_TX, 35, PageTransactionUpdate(77, 1).encode()),
        ("messages", UPDATE, 35, b"\x09not read"),
        ("messages", ADD, 40, PageCounterValue(1, 2, 3).encode()),
        ("messages", ADD_TX, 41, PageCounterIncrement(1, -2, 3).encode()),
        ("messages", ADD, 43, PageCounterPending(1, 2).encode()),
        ("messages", ADD, r.ID_COUNTER_RECORD, r.IdCounterRecord(5).encode()),
        ("messages", ADD, r.QUEUE_BINDING_RECORD, rt),
        ("bindings", ADD, r.QUEUE_BINDING_RECORD, rt),
        ("bindings", ADD, r.QUEUE_BINDING_RECORD,
         r.QueueRecord("q2", "ä", "MULTICAST", "color='red'").encode()),
        ("bindings", UPDATE, r.QUEUE_BINDING_RECORD, r.QueueRecord("", "", "ANYCAST", "").encode()),
        ("bindings", ADD, r.ADDRESS_BINDING_RECORD,
         r.AddressRecord("a", ("ANYCAST", "MULTICAST")).encode()),
        ("bindings", ADD_TX, r.ADDRESS_BINDING_RECORD, r.AddressRecord("b", ()).encode()),
        ("bindings", ADD, r.ID_COUNTER_RECORD, r.IdCounterRecord(5).encode()),
        ("bindings", ADD, r.ADD_REF, r.RefRecord(7).encode()),
    ]  # fmt: skip


def _message_writer(
    version: int, address: bytes, fixed: tuple[int, ...] = (4, 1, 0, 0, 0)
) -> Writer:
    w = Writer("T", version).raw(address, "address")
    priority, durable, timestamp, expiration, scheduled = fixed
    w.u8(priority, "p").u8(durable, "d").i64(timestamp, "t").i64(expiration, "e")
    return w.i64(scheduled, "s")


def crafted_bodies() -> list[bytes]:
    """Message bodies (type 45, the same with a body size for 30 where it ends in ``i64 0``)
    that reach the checks of the field-by-field decode and of ``Message``: bad UTF-8 in each
    text field, bad lengths and counts, bad header values, duplicate property names under
    Artemis's types."""
    bad_utf8 = (
        b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80", b"\xe2\x82", b"\xff",
        b"\xf0\x9f\x98", b"\xe0\x9f\xbf", b"ok\xf5\x80\x80\x80", b"\xed\x9f\xbf\xf4\x8f\xbf\xbf",
    )  # fmt: skip
    out: list[bytes] = []

    def v1(address: bytes = b"a", fixed: tuple[int, ...] = (4, 1, 0, 0, 0)) -> Writer:
        return _message_writer(1, address, fixed)

    def v2(mtype: int = 0) -> Writer:
        return _message_writer(2, b"a").u8(mtype, "mt").i32(-1, "uid")

    def end(w: Writer) -> bytes:
        return w.raw(b"body", "body").body()

    for bad in bad_utf8:
        out.append(end(v1(bad).i32(0, "n")))
        out.append(end(v1().i32(1, "n").raw(bad, "name").u8(0, "t")))
        out.append(end(v1().i32(1, "n").raw(b"k", "name").u8(5, "t").raw(bad, "v")))
        out.append(end(v2().i32(1, "n").raw(b"k", "name").u8(11, "t").raw(bad, "v")))
        uid = end(_message_writer(2, b"a").u8(0, "mt").i32(len(bad), "uid").i32(0, "n"))
        out.append(uid[:-12] + bad + uid[-12:])  # the user id's bytes, then count and body
    for fixed in ((10, 1, 0, 0, 0), (9, 2, 0, 0, 0), (0, 0, -1, 0, 0), (0, 0, 0, -1, 0),
                  (0, 0, 0, 0, -(2**63)), (255, 255, 0, 0, 0)):  # fmt: skip
        out.append(end(v1(b"a", fixed).i32(0, "n")))
    out.append(end(v1(b"").i32(0, "n")))  # an empty address
    out.append(end(v1().i32(-1, "n")))
    out.append(end(v1().i32(2**31 - 1, "n")))
    out.append(end(v1().i32(1, "n").raw(b"", "name").u8(5, "t").raw(b"v", "v")))  # empty name
    out.append(end(v1().i32(1, "n").raw(b"k", "name").u8(7, "t").i8(1, "v")))  # typed tag in v1
    out.append(end(v1().i32(1, "n").raw(b"k", "name").u8(13, "t")))
    for mtype in (0, 1, 2, 6, 7, 255):
        out.append(end(v2(mtype).i32(0, "n")))
    for length in (-2, -1, 0, 2**31 - 1):
        out.append(end(_message_writer(2, b"a").u8(0, "mt").i32(length, "uid").i32(0, "n")))
    for index in (0, 4, 9, 10, 255):
        out.append(end(v2().i32(1, "n").raw(b"k", "name").u8(12, "t").u8(index, "i")))
    out.extend(_duplicates(v2, end))
    # the move properties named twice in version 1: the last value counts, as in a dict
    origin, expiry = b"_AMQ_ORIG_ADDRESS", b"_AMQ_ACTUAL_EXPIRY"
    for first, second in (((5, b"x"), (3, b"")), ((3, b""), (5, b"y")), ((5, b"x"), (5, b"z"))):
        w = v1().i32(3, "n").raw(expiry, "name").u8(0, "t")
        for tag, text in (first, second):
            w.raw(origin, "name").u8(tag, "t")
            if tag == 5:
                w.raw(text, "v")
            else:
                w.i64(1, "v")
        out.append(end(w))
    return out


def _duplicates(v2: object, end: object) -> list[bytes]:
    """Version 2 bodies naming one property twice: a typed value, then a plain one that
    replaces it (``check_property_types`` judges the type read first against the value read
    last)."""
    typed = [(7, lambda w: w.i8(-3, "v")), (8, lambda w: w.i16(-300, "v")),
             (9, lambda w: w.i32(70_000, "v")), (10, lambda w: w.f32(0.5, "v")),
             (11, lambda w: w.text("s", "v"))]  # fmt: skip
    typed += [(12, lambda w, i=index: w.u8(i, "v")) for index in range(10)]  # typed nulls
    plain = [(0, lambda w: w), (1, lambda w: w), (2, lambda w: w), (3, lambda w: w.i64(5, "v")),
             (3, lambda w: w.i64(1000, "v")), (3, lambda w: w.i64(2**40, "v")),
             (4, lambda w: w.f64(0.1, "v")), (4, lambda w: w.f64(0.25, "v")),
             (4, lambda w: w.f64(math.nan, "v")), (4, lambda w: w.f64(math.inf, "v")),
             (4, lambda w: w.f64(1e300, "v")), (4, lambda w: w.f64(3.4028235677973366e38, "v")),
             (5, lambda w: w.text("x", "v")), (6, lambda w: w.raw(b"x", "v"))]  # fmt: skip
    out = []
    for ttag, tval in typed:
        for ptag, pval in plain:
            for order in (0, 1):
                w = v2().i32(2, "n")  # type: ignore[operator]
                first, second = (
                    ((ttag, tval), (ptag, pval)) if order == 0 else ((ptag, pval), (ttag, tval))
                )
                for tag, val in (first, second):
                    val(w.raw(b"k", "name").u8(tag, "t"))
                out.append(end(w))  # type: ignore[operator]
    return out


def damaged(body: bytes) -> Iterator[bytes]:
    """Every truncation of ``body``, every single byte flipped (xor 0x01, 0x80, 0xff), the
    version byte 0, 2, 3, and a byte too many."""
    for i in range(len(body)):
        yield body[:i]
    for i in range(len(body)):
        for mask in (0x01, 0x80, 0xFF):
            yield body[:i] + bytes([body[i] ^ mask]) + body[i + 1 :]
    for version in (0, 2, 3):
        yield bytes([version]) + body[1:]
    yield body + b"\x00"


def table_rows(seed: int = 28, fuzz: int = 3000) -> list[Row]:
    """The whole table corpus: every record, damaged copies of each, crafted bodies, random
    multi-byte damage (``fuzz`` rows, seeded), null bodies and kinds nothing is read from."""
    rows: list[Row] = []
    rid = 0

    def add(journal: str, kind: int, urt: int | None, body: bytes | None) -> None:
        nonlocal rid
        rid += 1
        rows.append((journal, kind, urt, rid, body))

    messages = message_bodies()
    others = other_bodies()
    for urt, body in messages:
        add("messages", ADD, urt, body)
        for kind in (UPDATE, ADD_TX, UPDATE_TX, EVENT, DELETE, DELETE_TX, COMMIT):
            add("messages", kind, urt, body)
        add("bindings", ADD, urt, body)
    for urt, body in messages[:6] + messages[8:12] + messages[18:20]:
        for bad in damaged(body):
            add("messages", ADD, urt, bad)
    for journal, kind, urt, body in others:
        add(journal, kind, urt, body)
        add(journal, DELETE, urt, body)
        for bad in damaged(body):
            add(journal, kind, urt, bad)
    for body in crafted_bodies():
        add("messages", ADD, r.ADD_MESSAGE_PROTOCOL, body)
        add("messages", ADD_TX, r.ADD_LARGE_MESSAGE, body[:-8] + b"\x00" * 8)
    rng = random.Random(seed)
    pool = [b for _, b in messages] + [b for *_, b in others]
    for _ in range(fuzz):
        data = bytearray(rng.choice(pool))
        for _ in range(rng.randint(1, 3)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        urt = rng.choice([30, 45, 32, 33, 34, 35, 36, 37, 39, 42, 21, 44])
        add(
            "bindings" if urt in (21, 44) else "messages",
            rng.choice([ADD, UPDATE_TX]),
            urt,
            bytes(data),
        )
    for kind in (ADD, UPDATE, ADD_TX, UPDATE_TX, DELETE):
        for urt in (30, 45, 32, 33, 34, 35, 36, 37, 39, 42, 21, 44, 24, None):
            add("messages", kind, urt, None)
            add("bindings", kind, urt, None)
            add("messages", kind, urt, b"")
    return rows


def _synthetic_records() -> list[tuple[int, int, int, int, int, int, bytes]]:
    from store.file import format as fmt
    from store.journal.api import PREPARE, ROLLBACK

    marker = fmt.encode_marker(
        fmt.Marker(fmt.MARKER_FILES, files=(fmt.MarkerEntry(1, 1, 2), fmt.MarkerEntry(2, 3, 9)))
    )
    ref = r.RefRecord(7).encode()
    m = MESSAGES[0]
    assert isinstance(m.body, bytes)
    return [
        (EVENT, fmt.FLAG_MARKER, 0, 0, 0, 0, marker),
        (EVENT, fmt.FLAG_MARKER, 0, 0, 0, 0, b"not a marker body at all"),
        (EVENT, fmt.FLAG_MARKER, 0, 0, 0, 0, marker + b"\x00"),
        (EVENT, fmt.FLAG_MARKER, 0, 0, 0, 0, marker[:4] + b"\x03" + marker[5:]),
        (EVENT, fmt.FLAG_MARKER, 0, 0, 0, 0, marker[:8] + b"\x05" + marker[9:]),
        (EVENT, 0, 0, 0, 0, 0, marker),
        (ADD_TX, 0, 1, 5, 45, 0, encode_message(m, m.body)),
        (UPDATE_TX, 0, 1, 5, 32, 0, ref),
        (PREPARE, 0, 0, 5, 0, 3, b"xid"),  # torn: 2 records, not 3
        (UPDATE_TX, 0, 1, 5, 33, 0, ref),
        (COMMIT, 0, 0, 5, 0, 1, b""),
        (ADD_TX, 0, 2, 6, 45, 0, b"\x01bad"),
        (ROLLBACK, 0, 0, 6, 0, 0, b""),
        (COMMIT, 0, 0, 6, 0, 0, b""),
        (DELETE_TX, 0, 2, 8, 0, 0, b""),
        (PREPARE, 0, 0, 8, 0, 1, b"xid"),
        (COMMIT, 0, 0, 8, 0, 1, b""),
        (UPDATE, 0, 1, 0, 39, 0, CursorAck(1, 2, 3).encode()),
        (ADD, 0, 9, 0, 30, 0, encode_large_message(m, 5)),
    ]


def synthetic_files() -> list[tuple[str, str, bytes]]:
    """Journal files written record by record with :mod:`store.file.format`'s encoders
    (journal, path, content): file-list markers and marker-flagged events that are not
    markers, transactions whose prepare is torn, rolled back or deleted, zero padding (a
    length of zero; 1-3 zeros before a boundary, alone and followed by more zeros), a first
    record missing its predecessors (FLOOR), and a record out of sequence."""
    from store.file import format as fmt

    out = []
    for variant in ("plain", "padded", "floor", "gap", "gap-zeros", "double-pad", "sequence"):
        data = bytearray(fmt.encode_header(7, 0))
        lsn = 0
        for n, (kind, flags, rid, tx_id, urt, tx_count, body) in enumerate(_synthetic_records()):
            if variant == "padded" and n in (3, 9):
                data += bytes(-len(data) % fmt.PAD_UNIT)
            if variant == "double-pad" and n == 3:
                data += bytes(-len(data) % fmt.PAD_UNIT + 100)
            if variant.startswith("gap") and n == 6:
                lsn += 1  # a filler event ending 2 bytes before a boundary, then 2 zeros
                filler = (-len(data) - 2 - fmt.OVERHEAD) % fmt.PAD_UNIT
                data += fmt.encode_record(EVENT, file_id=7, lsn=lsn, durable_lsn=0,
                                          body=bytes(filler))  # fmt: skip
                data += bytes(-len(data) % fmt.PAD_UNIT + 512 * (variant == "gap-zeros"))
            lsn += 1 + (5 if variant == "sequence" and n == 12 else 0)
            data += fmt.encode_record(
                kind, file_id=7, lsn=lsn + (10 if variant == "floor" else 0), durable_lsn=0,
                id=rid, tx_id=tx_id, user_type=urt, tx_count=tx_count, body=body,
                flags=flags | (fmt.FLAG_FLOOR if lsn == 1 else 0),
            )  # fmt: skip
        out.append(("messages", f"synthetic-{variant}", bytes(data) + bytes(700)))
    return out
