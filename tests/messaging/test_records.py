"""The storage manager's record codecs (store.messaging.records, .message_records): the
documented bytes, the golden files of version 1, round trips, and refusals of bad bodies."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.messaging import message_records as mr
from store.messaging import records as r
from store.messaging.codec import Writer
from store.messaging.values import Message, Xid
from tests.messaging.make_golden import GOLDEN, Golden, path_of

I64 = st.integers(-(2**63), 2**63 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
NONNEG = st.integers(0, 2**63 - 1)
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
ROUTING = st.sampled_from(["ANYCAST", "MULTICAST"])
PROPERTY = st.one_of(
    st.none(),
    st.booleans(),
    I64,
    st.floats(allow_nan=False),
    TEXT,
    st.binary(max_size=20),
)


@pytest.mark.parametrize("golden", GOLDEN, ids=lambda g: g.name)
def test_golden_bodies_of_version_1_are_written_and_read_byte_for_byte(golden: Golden) -> None:
    with open(path_of(golden), "rb") as f:
        committed = f.read()
    assert golden.encode() == committed
    assert golden.decode(committed) == golden.value
    if golden.record_type is not None and hasattr(golden.value, "record_type"):
        assert golden.value.record_type == golden.record_type


# Hand-built bytes: the module docstrings' tables, field by field.
HAND_BUILT = [
    (r.IdCounterRecord(7), "01 0000000000000007"),
    (r.RefRecord(2), "01 0000000000000002"),
    (r.AckRecord(-1), "01 ffffffffffffffff"),
    (r.DeliveryCountRecord(2, 3), "01 0000000000000002 00000003"),
    (r.ScheduledTimeRecord(2, 1000), "01 0000000000000002 00000000000003e8"),
    (r.DuplicateIdRecord("a", b"\x01\x02"), "01 00000001 61 00000002 0102"),
    (r.AddressRecord("ab", ("ANYCAST",)), "01 00000002 6162 01 00000007 414e5943415354"),
    (
        r.QueueRecord("q", "a", "ANYCAST", None),
        "01 00000001 71 00000001 61 00000007 414e5943415354 ffffffff",
    ),
    (
        r.QueueRecord("q", "a", "ANYCAST", "x"),
        "01 00000001 71 00000001 61 00000007 414e5943415354 00000001 78",
    ),
]


@pytest.mark.parametrize(("record", "hexbody"), HAND_BUILT, ids=lambda v: type(v).__name__)
def test_records_encode_to_their_documented_bytes(record: object, hexbody: str) -> None:
    body = bytes.fromhex(hexbody)
    assert record.encode() == body  # type: ignore[attr-defined]
    assert type(record).decode(body) == record  # type: ignore[attr-defined]


def test_a_message_encodes_to_its_documented_bytes() -> None:
    m = Message(
        "a",
        b"Z",
        priority=9,
        durable=True,
        timestamp=1,
        expiration=2,
        scheduled_delivery=3,
        properties={"k": 5, "t": True},
    )
    expected = bytes.fromhex(
        "01"
        "00000001 61"
        "09"
        "01"
        "0000000000000001"
        "0000000000000002"
        "0000000000000003"
        "00000002"
        "00000001 6b"
        "03 0000000000000005"
        "00000001 74"
        "02"
        "00000001 5a"
    )
    assert mr.encode_message(m, b"Z") == expected
    assert mr.encode_large_message(m, 1)[:-8] == expected[:-5]
    assert mr.encode_large_message(m, 1)[-8:] == (1).to_bytes(8, "big")


@given(id_=I64, count=I32, time=I64)
def test_fixed_size_records_round_trip(id_: int, count: int, time: int) -> None:
    for record in (
        r.IdCounterRecord(id_),
        r.RefRecord(id_),
        r.AckRecord(id_),
        r.DeliveryCountRecord(id_, count),
        r.ScheduledTimeRecord(id_, time),
    ):
        assert type(record).decode(record.encode()) == record


@given(
    name=TEXT,
    address=TEXT,
    routing=ROUTING,
    types=st.lists(ROUTING, max_size=2),
    filt=st.none() | TEXT,
    dup=st.binary(max_size=40),
)
def test_binding_and_duplicate_id_records_round_trip(
    name: str, address: str, routing: str, types: list[str], filt: str | None, dup: bytes
) -> None:
    assert r.AddressRecord.decode(r.AddressRecord(name, tuple(types)).encode()) == r.AddressRecord(
        name, tuple(types)
    )
    queue = r.QueueRecord(name, address, routing, filt)
    assert r.QueueRecord.decode(queue.encode()) == queue
    dup_record = r.DuplicateIdRecord(address, dup)
    assert r.DuplicateIdRecord.decode(dup_record.encode()) == dup_record


@given(
    format_id=I32,
    gtid=st.binary(max_size=64),
    bq=st.binary(max_size=64),
)
def test_xids_round_trip(format_id: int, gtid: bytes, bq: bytes) -> None:
    xid = Xid(format_id, gtid, bq)
    assert r.decode_xid(r.encode_xid(xid)) == xid


def _same_property(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return type(a) is type(b) and a == b


def _message(
    address: str,
    body: bytes,
    durable: bool,
    priority: int,
    times: tuple[int, int, int],
    properties: dict[str, object],
) -> Message:
    return Message(
        address,
        body,
        durable=durable,
        priority=priority,
        timestamp=times[0],
        expiration=times[1],
        scheduled_delivery=times[2],
        properties=properties,  # type: ignore[arg-type]
    )


def _messages(max_properties: int) -> st.SearchStrategy[Message]:
    """Messages with inline bodies, every header and up to ``max_properties`` properties."""
    return st.builds(
        _message,
        TEXT.filter(bool),
        st.binary(max_size=100),
        st.booleans(),
        st.integers(0, 9),
        st.tuples(NONNEG, NONNEG, NONNEG),
        st.dictionaries(TEXT.filter(bool), PROPERTY, max_size=max_properties),
    )


@given(m=_messages(6), message_id=I64, size=NONNEG)
def test_messages_round_trip_with_every_property_type(
    m: Message, message_id: int, size: int
) -> None:
    assert isinstance(m.body, bytes)
    decoded = mr.decode_message(mr.encode_message(m, m.body), message_id)
    assert decoded.message_id == message_id
    assert decoded.same_as(m)
    assert all(_same_property(decoded.properties[k], v) for k, v in m.properties.items())
    large, large_size = mr.decode_large_message(mr.encode_large_message(m, size), message_id)
    assert large_size == size
    assert large.body == b""
    assert large.properties == m.properties


@given(m=_messages(2))
def test_the_packed_message_encoding_is_the_field_by_field_one(m: Message) -> None:
    """encode_message packs a message without properties in one go: the same bytes as
    write_message, the field-by-field reference (which messages with properties take)."""
    assert isinstance(m.body, bytes)
    assert mr.encode_message(m, m.body) == mr.write_message(m, m.body)


def test_a_packed_message_that_does_not_fit_is_refused_naming_the_field() -> None:
    """A field changed after construction to a value its slot cannot hold falls back to the
    field-by-field path, whose error names the field."""
    m = Message("a", b"x")
    m.timestamp = 2**64  # type: ignore[assignment]
    with pytest.raises(ValueError, match="timestamp"):
        mr.encode_message(m, b"x")
    m = Message("\ud800 lone surrogate", b"x")
    with pytest.raises(ValueError, match="address"):
        mr.encode_message(m, b"x")


def test_ref_and_ack_bodies_are_made_once_per_queue_and_encode_alike() -> None:
    """queue_id_body: the body RefRecord and AckRecord both encode, for any queue id."""
    for qid in (0, 1, 2**63 - 1, -5):
        assert r.queue_id_body(qid) == r.RefRecord(qid).encode() == r.AckRecord(qid).encode()
        assert r.RefRecord.decode(r.queue_id_body(qid)).queue_id == qid
    assert r.queue_id_body(77) is r.queue_id_body(77)


_GOOD_MESSAGE = mr.encode_message(Message("a", b"", properties={"k": 1}), b"")


@pytest.mark.parametrize(
    ("decode", "body", "message"),
    [
        pytest.param(r.RefRecord.decode, b"", "ADD_REF: empty body", id="empty"),
        pytest.param(
            r.RefRecord.decode,
            b"\x02" + bytes(8),
            "ADD_REF: body has version 2, not 1",
            id="version",
        ),
        pytest.param(
            r.AckRecord.decode, b"\x01" + bytes(7), "ACKNOWLEDGE_REF: body ends", id="short"
        ),
        pytest.param(
            r.DeliveryCountRecord.decode,
            b"\x01" + bytes(13),
            "UPDATE_DELIVERY_COUNT: 1 unexpected",
            id="trailing",
        ),
        pytest.param(
            r.AddressRecord.decode,
            Writer("x").text("a", "").u8(1, "").text("BROADCAST", "").body(),
            "routing type 'BROADCAST'",
            id="routing-type",
        ),
        pytest.param(
            r.DuplicateIdRecord.decode,
            b"\x01\x00\x00\x00\x01\xff\x00\x00\x00\x00",
            "DUPLICATE_ID: address is not UTF-8",
            id="utf8",
        ),
        pytest.param(
            r.QueueRecord.decode,
            r.QueueRecord("q", "a", "ANYCAST", None).encode()[:-4] + b"\xff\xff\xff\xfe",
            "filter has length -2",
            id="filter-length",
        ),
        pytest.param(
            lambda b: mr.decode_message(b, 1),
            _GOOD_MESSAGE.replace(
                b"\x03" + (1).to_bytes(8, "big"), b"\x09" + (1).to_bytes(8, "big")
            ),
            "ADD_MESSAGE_PROTOCOL: property 'k' has unknown type tag 9",
            id="property-tag",
        ),
        pytest.param(
            lambda b: mr.decode_message(b, 1),
            _GOOD_MESSAGE[:6] + b"\x0a" + _GOOD_MESSAGE[7:],
            "priority 10 is not 0..9",
            id="priority",
        ),
        pytest.param(
            lambda b: mr.decode_message(b, 1),
            _GOOD_MESSAGE[:-1],
            "ADD_MESSAGE_PROTOCOL: body ends",
            id="message-short",
        ),
        pytest.param(
            lambda b: mr.decode_large_message(b, 1),
            _GOOD_MESSAGE,
            "ADD_LARGE_MESSAGE: body ends",
            id="large-as-inline",
        ),
        pytest.param(
            r.decode_xid,
            b"\x01\x00\x00\x00\x01\x00\x00\x00\x41" + bytes(65) + bytes(4),
            "at most 64 bytes",
            id="xid-too-long",
        ),
    ],
)
def test_bad_bodies_are_refused_with_a_value_error_naming_the_record(
    decode: object, body: bytes, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        decode(body)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(lambda: r.AddressRecord("a", ("X",)).encode(), "routing type 'X'", id="rt"),
        pytest.param(lambda: r.DeliveryCountRecord(1, 2**31).encode(), "count", id="count"),
        pytest.param(lambda: r.DuplicateIdRecord("\ud800", b"").encode(), "UTF-8", id="surrogate"),
    ],
)
def test_values_that_do_not_fit_are_refused_when_encoding(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"priority": 10}, "priority"),
        ({"timestamp": -1}, "timestamp"),
        ({"timestamp": 1.5}, "timestamp"),
        ({"expiration": True}, "expiration"),
        ({"scheduled_delivery": 2**63}, "scheduled_delivery"),
        ({"properties": {"k": 2**63}}, "64 bits"),
        ({"properties": {"k": [1]}}, "list is not one of"),
        ({"properties": {"": 1}}, "non-empty"),
    ],
)
def test_messages_with_bad_headers_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Message("a", b"", **kwargs)  # type: ignore[arg-type]


@given(
    mid=I64,
    tx=I64,
    kind=st.sampled_from([30, 45]),
    record=st.binary(max_size=40),
    queues=st.lists(I64, max_size=5),
)
def test_paged_messages_round_trip(
    mid: int, tx: int, kind: int, record: bytes, queues: list[int]
) -> None:
    paged = mr.PagedMessage(mid, tx, kind, record, tuple(queues))
    assert mr.PagedMessage.decode(paged.encode()) == paged


def test_a_paged_message_gives_back_the_message_it_wraps() -> None:
    m = Message("a", b"body", priority=2, properties={"k": "v"})
    paged = mr.PagedMessage(9, 0, 45, mr.encode_message(m, b"body"), (1,))
    back = mr.PagedMessage.decode(paged.encode()).message()
    assert back.message_id == 9 and back.same_as(m)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(
            mr.PagedMessage(1, 0, 45, b"", ()).encode().replace(b"\x2d", b"\x1f", 1),
            "record type 31 is not 45 or 30",
            id="record-type",
        ),
        pytest.param(mr.PagedMessage(1, 0, 45, b"", (1,)).encode()[:-1], "body ends", id="short"),
    ],
)
def test_bad_paged_messages_are_refused(body: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mr.PagedMessage.decode(body)


def _peek_bodies(rng: random.Random) -> list[bytes]:
    """ADD_MESSAGE_PROTOCOL bodies of every shape a peek must tell apart: valid ones without
    properties, ones with properties, and valid ones spoiled field by field, truncated,
    lengthened and flipped at random."""
    import struct

    out: list[bytes] = []
    for _ in range(300):
        address = rng.choice(["q", "orders.eu", "é-ü", "x" * 300])
        props = {"k": 1} if rng.random() < 0.2 else {}
        m = Message(address, rng.randbytes(rng.choice([0, 1, 50])), priority=rng.randrange(10),
                    durable=rng.random() < 0.5, properties=props,
                    scheduled_delivery=rng.choice([0, 1, 2**40]))  # fmt: skip
        body = mr.encode_message(m, m.body)
        out.append(body)
        raw = bytearray(body)
        end = 5 + len(address.encode())
        spoil = rng.randrange(9)
        if spoil == 0:
            raw[0] = 2  # another version
        elif spoil == 1:
            raw[end] = rng.choice([10, 255])  # priority
        elif spoil == 2:
            raw[end + 1] = 2  # durable
        elif spoil in (3, 4, 5):  # a negative time
            raw[end + 2 + 8 * (spoil - 3)] |= 0x80
        elif spoil == 6:
            raw[1:5] = struct.pack(">I", 0)  # empty address
        elif spoil == 7:
            raw[5] = 0xFF  # not UTF-8
        else:
            raw[end + 26 : end + 30] = struct.pack(">i", -1)  # property count
        out.append(bytes(raw))
        out.append(body[: rng.randrange(len(body))])
        out.append(body + b"\0")
        flipped = bytearray(body)
        flipped[rng.randrange(len(body))] ^= 1 << rng.randrange(8)
        out.append(bytes(flipped))
    return out


def test_compiled_peek_message_equals_the_python_reference() -> None:
    """The compiled ``peek_message`` against :func:`python_peek_message` on valid and spoiled
    bodies: the same header or None for each, and the same cache of decoded addresses; a
    peeked body decodes, and an accepted header matches the decoded message."""
    from tests.file.test_reader import require_speedups

    require_speedups()
    assert mr.COMPILED_PEEK is not None
    bodies = _peek_bodies(random.Random(3))
    got_cache: dict[bytes, str] = {}
    want_cache: dict[bytes, str] = {}
    accepted = 0
    for body in bodies:
        got = mr.peek_message(body, got_cache)
        want = mr.python_peek_message(body, want_cache)
        assert got == want, body
        assert type(got) is type(want)
        if got is not None:
            accepted += 1
            m = mr.decode_message(body, 1)
            assert (m.address, m.priority, m.durable, m.scheduled_delivery) == got
    assert got_cache == want_cache
    assert 0 < accepted < len(bodies)
