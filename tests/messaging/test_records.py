"""The storage manager's record codecs (store.messaging.records, .message_records): the
documented bytes, the golden files of version 1, round trips, and refusals of bad bodies."""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.messaging import message_records as mr
from store.messaging import packed
from store.messaging import records as r
from store.messaging.codec import VERSION, Writer
from store.messaging.message_facts import message_summary
from store.messaging.values import MESSAGE_TYPES, PROPERTY_TYPES, Message, Xid, implied_type
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


@given(m=_messages(2), message_id=I64)
def test_the_packed_message_decoding_is_the_field_by_field_one(m: Message, message_id: int) -> None:
    """decode_message unpacks a record without properties in one go: a message equal to
    read_message's, the field-by-field reference (which records with properties take)."""
    assert isinstance(m.body, bytes)
    data = mr.encode_message(m, m.body)
    packed, reference = mr.decode_message(data, message_id), mr.read_message(data, message_id)
    assert packed.same_as(reference) and packed.message_id == reference.message_id == message_id
    assert packed.properties == reference.properties and packed.body == reference.body


def test_the_packed_path_s_string_tag_is_the_codec_s() -> None:
    """packed.py writes and reads string properties by their tag alone: it must be the one
    message_records gives a string (else every STOMP header would decode as another type)."""
    assert packed.STRING_TAG == mr._STR


@given(
    m=_messages(0),
    headers=st.dictionaries(TEXT.filter(bool), TEXT, max_size=8),
    message_id=I64,
)
def test_string_properties_pack_and_unpack_as_field_by_field(
    m: Message, headers: dict[str, str], message_id: int
) -> None:
    """A STOMP frame's headers are string properties: both packed paths take them, and
    give the bytes and the message of the field-by-field ones."""
    m = Message(m.address, m.body, properties=dict(headers), priority=m.priority)
    assert isinstance(m.body, bytes)
    data = mr.encode_message(m, m.body)
    assert data == mr.write_message(m, m.body)
    packed, reference = mr.decode_message(data, message_id), mr.read_message(data, message_id)
    assert packed.same_as(reference) and packed.properties == reference.properties == headers


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d[:-1],  # the body cut short
        lambda d: d + b"x",  # a byte after the body
        lambda d: d[:5] + b"\xff" + d[6:],  # the address not UTF-8
        lambda d: b"\x07" + d[1:],  # an unknown version
        lambda d: d[:6] + b"\x0a" + d[7:],  # priority 10
        lambda d: d[:7] + b"\x02" + d[8:],  # durable flag 2
    ],
    ids=["short", "long", "utf-8", "version", "priority", "durable"],
)
def test_a_bad_record_fails_the_packed_decoding_as_the_field_by_field_one(damage: Any) -> None:
    data = damage(mr.encode_message(Message("a", b"body"), b"body"))
    with pytest.raises(ValueError) as reference:
        mr.read_message(data, 1)
    with pytest.raises(ValueError) as packed:
        mr.decode_message(data, 1)
    assert str(packed.value) == str(reference.value)


@given(
    message_id=I64,
    tx_id=I64,
    kind=st.sampled_from([30, 45]),
    record=st.binary(max_size=64),
    queue_ids=st.lists(I64, max_size=5).map(tuple),
)
def test_the_packed_paged_message_encoding_is_the_field_by_field_one(
    message_id: int, tx_id: int, kind: int, record: bytes, queue_ids: tuple[int, ...]
) -> None:
    paged = mr.PagedMessage(message_id, tx_id, kind, record, queue_ids)
    assert paged.encode() == paged.write_fields()
    assert mr.PagedMessage.decode(paged.encode()) == paged


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


# -- version 2: Artemis's headers (message type, user id, exact property types) --------------

#: (Java type, value) pairs of every Artemis property type, nulls of any type included.
TYPED_PROPERTY = st.one_of(
    st.tuples(st.just("boolean"), st.booleans()),
    st.tuples(st.just("byte"), st.integers(-(2**7), 2**7 - 1)),
    st.tuples(st.just("short"), st.integers(-(2**15), 2**15 - 1)),
    st.tuples(st.just("integer"), I32),
    st.tuples(st.just("long"), I64),
    st.tuples(st.just("float"), st.floats(width=32)),
    st.tuples(st.just("double"), st.floats()),
    st.tuples(st.sampled_from(["string", "simple-string"]), TEXT),
    st.tuples(st.just("bytes"), st.binary(max_size=20)),
    st.tuples(st.sampled_from(PROPERTY_TYPES), st.none()),
)


@st.composite
def _artemis_messages(draw: st.DrawFn) -> Message:
    typed = draw(st.dictionaries(TEXT.filter(bool), TYPED_PROPERTY, max_size=8))
    return Message(
        draw(TEXT.filter(bool)),
        draw(st.binary(max_size=50)),
        priority=draw(st.integers(0, 9)),
        timestamp=draw(NONNEG),
        expiration=draw(NONNEG),
        scheduled_delivery=draw(NONNEG),
        properties={name: value for name, (_, value) in typed.items()},
        property_types={name: kind for name, (kind, _) in typed.items()},
        message_type=draw(st.sampled_from(list(MESSAGE_TYPES))),
        user_id=draw(st.none() | TEXT),
    )


def _types_of(m: Message) -> dict[str, str]:
    """Every property's Java type: the recorded one, else the one its value implies."""
    return {k: m.property_types.get(k, implied_type(v)) for k, v in m.properties.items()}


@given(m=_artemis_messages(), message_id=I64, size=NONNEG)
def test_messages_with_artemis_headers_round_trip_exactly(
    m: Message, message_id: int, size: int
) -> None:
    """Type, user id and each property's Java type survive the 45 and 30 records and the
    paged-message wrapper; a message that has any of them is written as version 2, any other
    as version 1."""
    assert isinstance(m.body, bytes)
    encoded = mr.encode_message(m, m.body)
    artemis = bool(m.property_types) or m.user_id is not None or m.message_type != "default"
    assert encoded[0] == (2 if artemis else 1)
    decoded = mr.decode_message(encoded, message_id)
    large, large_size = mr.decode_large_message(mr.encode_large_message(m, size), message_id)
    paged = mr.PagedMessage.decode(mr.PagedMessage(message_id, 0, 45, encoded, (1,)).encode())
    for back in (decoded, large, paged.message()):
        assert (back.message_type, back.user_id) == (m.message_type, m.user_id)
        assert back.property_types == m.property_types
        assert _types_of(back) == _types_of(m)
        assert list(back.properties) == list(m.properties)
        assert all(_same_property(back.properties[k], v) for k, v in m.properties.items())
    assert large_size == size


def test_a_message_with_artemis_headers_encodes_to_its_documented_bytes() -> None:
    m = Message(
        "a",
        b"Z",
        priority=4,
        properties={"b": -1, "f": 1.5, "n": None, "s": "x", "l": 7},
        property_types={"b": "byte", "f": "float", "n": "string", "s": "simple-string"},
        message_type="text",
        user_id="u",
    )
    expected = bytes.fromhex(
        "02"
        "00000001 61"
        "04"
        "01"
        "0000000000000000"
        "0000000000000000"
        "0000000000000000"
        "03"  # message type: text
        "00000001 75"  # user id
        "00000005"
        "00000001 62 07 ff"  # byte -1
        "00000001 66 0a 3fc00000"  # float 1.5
        "00000001 6e 0c 07"  # a null string (index 7 of PROPERTY_TYPES)
        "00000001 73 0b 00000001 78"  # simple-string
        "00000001 6c 03 0000000000000007"  # long: the implied type, as in version 1
        "00000001 5a"
    )
    assert mr.encode_message(m, b"Z") == expected
    assert mr.decode_message(expected, 1).same_as(m)


def test_a_version_2_body_is_handed_back_to_python_by_the_peek() -> None:
    """The load's peek (compiled and Python) takes version 1 bodies without properties only:
    a version 2 body, even without properties, is decoded in full, headers and all."""
    m = Message("a", b"body", message_type="bytes", user_id="ID:1")
    body = mr.encode_message(m, b"body")
    assert mr.python_peek_message(body, {}) is None
    assert mr.peek_message(body, {}) is None  # compiled where built
    assert mr.decode_message(body, 3).same_as(m)
    assert message_summary(body, 45, 3) == ("a", 0, 4, 4)


_V2_HEAD = bytes.fromhex("02 00000001 61 04 01") + bytes(24)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(_V2_HEAD + bytes.fromhex("01 ffffffff 00000000 00000000"), "message type 1",
                     id="unknown-message-type"),
        pytest.param(_V2_HEAD + bytes.fromhex("00 ffffffff 00000001 00000001 6e 0c 0a 00000000"),
                     "null of unknown type 10", id="unknown-null-type"),
        pytest.param(_V2_HEAD + bytes.fromhex("00 ffffffff 00000001 00000001 6e 0d 00000000"),
                     "unknown type tag 13", id="unknown-tag"),
        pytest.param(bytes.fromhex("01 00000001 61 04 01") + bytes(24)
                     + bytes.fromhex("00000001 00000001 6e 07 01 00000000"),
                     "unknown type tag 7", id="typed-tag-in-version-1"),
        pytest.param(b"\x03" + _V2_HEAD[1:], "version 3, not 1 or 2", id="version-3"),
    ],
)  # fmt: skip
def test_bad_version_2_bodies_are_refused(body: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mr.decode_message(body, 1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"message_type": "blob"}, "message_type is one of"),
        ({"user_id": 5}, "user_id is a str"),
        ({"properties": {"k": 1}, "property_types": {"x": "long"}}, "not a property"),
        ({"properties": {"k": 128}, "property_types": {"k": "byte"}}, "range of a byte"),
        ({"properties": {"k": 2**31}, "property_types": {"k": "integer"}}, "range of a integer"),
        ({"properties": {"k": 0.1}, "property_types": {"k": "float"}}, "not exactly a float"),
        ({"properties": {"k": 1e39}, "property_types": {"k": "float"}}, "not exactly a float"),
        ({"properties": {"k": "s"}, "property_types": {"k": "long"}}, "a str cannot be a 'long'"),
        ({"properties": {"k": True}, "property_types": {"k": "byte"}}, "bool cannot be"),
        ({"properties": {"k": None}, "property_types": {"k": "char"}}, "cannot be a 'char'"),
    ],
)
def test_bad_artemis_headers_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Message("a", b"", **kwargs)  # type: ignore[arg-type]


def test_implied_property_types_are_not_recorded() -> None:
    """A type the value implies anyway (long, double, string, boolean, bytes; bytes for
    None) is dropped, so such a message stays a version 1 record."""
    m = Message(
        "a",
        b"",
        properties={"i": 1, "x": 1.5, "s": "s", "t": True, "b": b"", "n": None},
        property_types={"i": "long", "x": "double", "s": "string", "t": "boolean",
                        "b": "bytes", "n": "bytes"},
    )  # fmt: skip
    assert m.property_types == {}
    assert mr.encode_message(m, b"")[0] == 1


def test_compiled_message_decoding_equals_the_packed_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The compiled ``plain_message`` against :func:`packed.unpack_message` on valid and
    spoiled bodies: it accepts exactly what the peek accepts, and an accepted body gives the
    reference's message, attribute for attribute and in the same order (the layout every
    Message shares), with dicts of its own; :func:`decode_message` gives what the Python
    paths give, or the same error."""
    from store.messaging.values import DEFAULT_MESSAGE_TYPE
    from tests.file.test_reader import require_speedups

    require_speedups()
    compiled = mr.COMPILED_MESSAGE
    assert compiled is not None
    bodies = _peek_bodies(random.Random(5))
    accepted = 0
    made = []
    for body in bodies:
        got = compiled(body, 7, Message, {}, VERSION, DEFAULT_MESSAGE_TYPE)
        assert (got is None) == (mr.python_peek_message(body, {}) is None), body
        if got is None:
            continue
        accepted += 1
        want = packed.unpack_message(body, 7)
        assert want is not None
        assert list(vars(got).items()) == list(vars(want).items())
        made.append(got)
    assert 0 < accepted < len(bodies)
    assert made[0].properties is not made[1].properties
    assert made[0].property_types is not made[1].property_types
    fast = [_decoded_or_error(body) for body in bodies]
    monkeypatch.setattr(mr, "COMPILED_MESSAGE", None)
    assert fast == [_decoded_or_error(body) for body in bodies]


def _decoded_or_error(body: bytes) -> object:
    try:
        return vars(mr.decode_message(body, 3))
    except ValueError as exc:
        return str(exc)


def test_compiled_paged_decoding_equals_the_python_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled ``paged_message`` against :meth:`PagedMessage.decode`'s Python path on
    well-formed page records (in place in a larger buffer too) and spoiled ones: the same
    paged message, or None where the Python path decides (and then decodes or refuses)."""
    from tests.file.test_reader import require_speedups

    require_speedups()
    compiled = mr.COMPILED_PAGED
    assert compiled is not None
    rng = random.Random(11)
    records = []
    for n in range(200):
        m = Message(f"a{n % 3}", bytes(rng.randrange(40)), priority=n % 10)
        inner = mr.encode_message(m, m.body) if n % 4 else mr.encode_large_message(m, 5000)
        paged = mr.PagedMessage(
            rng.randrange(-(2**63), 2**63),
            rng.choice([0, rng.randrange(2**63)]),
            45 if n % 4 else 30,
            inner,
            tuple(rng.randrange(-(2**63), 2**63) for _ in range(rng.randrange(6))),
        )
        data = paged.encode()
        records.append(data)
        records.append(data[: rng.randrange(len(data))])
        records.append(data + b"\0")
        flipped = bytearray(data)
        flipped[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        records.append(bytes(flipped))

    def decoded(data: bytes, start: int = 0, stop: int | None = None) -> object:
        try:
            return mr.PagedMessage.decode(data, start, stop)
        except (ValueError, struct.error) as exc:
            return type(exc)

    def forms(data: bytes) -> list[tuple[bytes | bytearray, int, int]]:
        page = bytearray(b"\x07" * 5 + data + b"\x09" * 3)
        return [(data, 0, len(data)), (page, 5, 5 + len(data))]

    taken = 0
    fast = []
    for data in records:
        for args in forms(data):
            got = compiled(*args, VERSION, mr.PagedMessage)
            if got is not None:
                taken += 1
                assert type(got) is mr.PagedMessage
            fast.append((got, decoded(*args)))
    assert taken > len(records) // 4
    assert all(got is None or got == want for got, want in fast)
    monkeypatch.setattr(mr, "COMPILED_PAGED", None)
    assert [want for _, want in fast] == [decoded(*args) for d in records for args in forms(d)]
