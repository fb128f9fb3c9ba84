"""Artemis's XML through a store and back (``import_xml`` then ``export_xml``), on generated
messages of every kind: every message type, user ids, every property type (nulls of any type
included), bodies inline and large, priorities, times and scheduled delivery.

The input is what Artemis writes, rendered by the model in :mod:`tests.data.xml.artemis_writer`
(built from Artemis's exporter, not from ours). Two checks per example:

1. the export is the input, byte for byte, ids aside (``imp`` assigns new ids): nothing lost,
   widened or reordered;
2. the export is, byte for byte and ids included, what the model renders for the messages the
   store now holds (read back through ``StorageManager.browse``): what Artemis would write for
   them.

Layout of the generated stores keeps Artemis's hash-map orders and ours equal (a few bindings
with small ids created in name order: ``HashMap<Long>`` order is then id order is name order);
a message's properties are in the model's order as given, and ``_AMQ_SCHED_DELIVERY`` last.
"""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store import StoreConfig, open_store
from store.data.xml.export import export_xml
from store.data.xml.import_ import import_xml
from store.messaging import StorageManager
from store.messaging.values import MESSAGE_TYPES, PROPERTY_TYPES, implied_type
from tests.data.xml.artemis_writer import JavaMessage, hashmap_order, java_to_string, render
from tests.support.backends import file_config_mapping
from tests.support.profile import examples

LARGE = 1024  # min-large-message-size of the stores here
ADDRESSES = [(1, "a0", ("ANYCAST",)), (2, "a1", ("ANYCAST", "MULTICAST"))]
QUEUES = [
    (3, "a0.q0", "a0", None, "ANYCAST"),
    (4, "a1.q0", "a1", "x > 1 & y < 'z' \"q\"", "MULTICAST"),
    (5, "a1.q1", "a1", None, "ANYCAST"),
]
# XML 1.0 can carry it, and Artemis's writer does not change it: no C0 controls (tab,
# newline, carriage return included: Artemis writes them raw into attributes, where every
# reader turns them into spaces), no surrogates, no U+FFFE/U+FFFF.
TEXT = st.text(
    st.characters(exclude_categories=("Cs", "Cc"), exclude_characters="\ufffe\uffff"),
    max_size=12,
)
NAME = TEXT.filter(lambda s: s and s != "_AMQ_SCHED_DELIVERY")
I64 = st.integers(-(2**63), 2**63 - 1)
NONNEG = st.integers(0, 2**63 - 1)
VALUE = st.one_of(
    st.tuples(st.just("boolean"), st.booleans()),
    st.tuples(st.just("byte"), st.integers(-(2**7), 2**7 - 1)),
    st.tuples(st.just("short"), st.integers(-(2**15), 2**15 - 1)),
    st.tuples(st.just("integer"), st.integers(-(2**31), 2**31 - 1)),
    st.tuples(st.just("long"), I64),
    st.tuples(st.just("float"), st.floats(width=32)),
    st.tuples(st.just("double"), st.floats()),
    st.tuples(
        st.sampled_from(["string", "simple-string"]), TEXT.filter(lambda s: s != "_AMQ_NULL")
    ),
    st.tuples(st.just("bytes"), st.binary(max_size=12)),
    st.tuples(st.sampled_from(PROPERTY_TYPES), st.none()),
)


@st.composite
def _message(draw: st.DrawFn, mid: int) -> JavaMessage:
    address = draw(st.sampled_from(["a0", "a1"]))
    mine = [(q[0], q[1]) for q in QUEUES if q[2] == address]
    queues = draw(st.lists(st.sampled_from(mine), min_size=1, unique=True).map(sorted))
    named = draw(st.dictionaries(NAME, VALUE, max_size=6))
    properties = [(name, kind, value) for name, (kind, value) in named.items()]
    scheduled = draw(st.sampled_from([0, 0, 1, 2**62]))
    if scheduled:
        properties.append(("_AMQ_SCHED_DELIVERY", "long", scheduled))
    body = draw(st.one_of(st.binary(max_size=40), st.binary(min_size=LARGE + 1, max_size=2600)))
    return JavaMessage(
        id=mid,
        priority=draw(st.integers(0, 9)),
        expiration=draw(NONNEG),
        timestamp=draw(NONNEG),
        type=draw(st.sampled_from(list(MESSAGE_TYPES))),
        user_id=draw(st.none() | st.uuids().map(str)),
        properties=properties,
        queues=queues,
        body=body,
        large=len(body) > LARGE,
    )


@st.composite
def _messages(draw: st.DrawFn) -> list[JavaMessage]:
    count = draw(st.integers(1, 4))
    return [draw(_message(100 + i)) for i in range(count)]


_IDS = re.compile(rb' id="\d+"')


def _stored(config: StoreConfig) -> bytes:
    """What the model renders for the addresses, queues and messages the store holds."""
    with StorageManager(open_store(config)) as sm:
        sm.load()
        addresses = sorted((sm.address_id(a.name), a.name, a.routing_types) for a in sm.addresses())
        queues = sorted((q.id, q.name, q.address, q.filter, q.routing_type) for q in sm.queues())
        ids = {q[1]: q[0] for q in queues}
        messages = []
        for m, names in sm.browse():
            properties = [
                (name, m.property_types.get(name, implied_type(value)), value)
                for name, value in m.properties.items()
            ]
            if m.scheduled_delivery:
                properties.append(("_AMQ_SCHED_DELIVERY", "long", m.scheduled_delivery))
            with m.open_body() as body:
                data = body.read()
            assert m.message_id is not None
            messages.append(
                JavaMessage(
                    m.message_id,
                    m.priority,
                    m.expiration,
                    m.timestamp,
                    m.message_type,
                    m.user_id,
                    properties,
                    [(ids[n], n) for n in names],
                    data,
                    m.is_large,
                )
            )
    return render(addresses, queues, messages, typed_nulls=True)


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages=_messages())
def test_an_artemis_export_comes_back_out_byte_for_byte(
    messages: list[JavaMessage], tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("round-trip")
    config = StoreConfig.from_mapping(
        {**file_config_mapping(root, "NIO"), "min-large-message-size": LARGE}
    )
    given_xml = render(ADDRESSES, QUEUES, messages, typed_nulls=True)
    (root / "in.xml").write_bytes(given_xml)
    import_xml(config, root / "in.xml")
    out = io.BytesIO()
    export_xml(config, out)
    exported = out.getvalue()
    assert _IDS.sub(b' id=""', exported) == _IDS.sub(b' id=""', given_xml)
    assert exported == _stored(config)


def test_the_model_writes_what_artemis_writes() -> None:
    """The model against a document written out by hand from Artemis's exporter code, so the
    round trip above compares with Artemis and not with a copy of our own writer."""
    m = JavaMessage(
        7,
        4,
        0,
        1,
        "text",
        "0b6a2e4c-1f0d-11ee-be56-0242ac120002",
        [
            ("_AMQ_ROUTING_TYPE", "byte", 1),
            ("f", "float", 1.100000023841858),
            ("d", "double", 1e20),
            ("s", "simple-string", 'a<b & "c"'),
            ("n", "string", None),
        ],
        [(3, "q")],
        b"hi",
        False,
    )
    expected = (
        "\n<activemq-journal>"
        "\n   <bindings>"
        '\n      <address-binding routing-types="ANYCAST" name="a" id="2"/>'
        '\n      <queue-binding address="a" filter-string="" name="q" id="3"'
        ' routing-type="ANYCAST"/>'
        "\n   </bindings>"
        "\n   <messages>"
        '\n      <message id="7" priority="4" expiration="0" timestamp="1" type="text"'
        ' user-id="0b6a2e4c-1f0d-11ee-be56-0242ac120002">'
        "\n         <properties>"
        '\n            <property name="_AMQ_ROUTING_TYPE" value="1" type="byte"/>'
        '\n            <property name="f" value="1.1" type="float"/>'
        '\n            <property name="d" value="1.0E20" type="double"/>'
        '\n            <property name="s" value="a&lt;b &amp; &quot;c&quot;" type="simple-string"/>'
        '\n            <property name="n" value="_AMQ_NULL" type="bytes"/>'
        "\n         </properties>"
        "\n         <queues>"
        '\n            <queue name="q"/>'
        "\n         </queues>"
        "\n         <body>"
        "\n            <![CDATA[aGk=]]>"
        "\n         </body>"
        "\n      </message>"
        "\n   </messages>"
        "\n</activemq-journal>"
    )  # fmt: skip
    got = render([(2, "a", ("ANYCAST",))], [(3, "q", "a", None, "ANYCAST")], [m])
    assert got.decode() == expected


@pytest.mark.parametrize(
    ("value", "fmt", "java"),
    [
        (5e-324, ">d", "4.9E-324"),
        (1e7, ">d", "1.0E7"),
        (0.001, ">d", "0.001"),
        (100.0, ">d", "100.0"),
        (1.401298464324817e-45, ">f", "1.4E-45"),
        (3.4028234663852886e38, ">f", "3.4028235E38"),
        (-0.0, ">f", "-0.0"),
    ],
)
def test_the_model_spells_numbers_as_java(value: float, fmt: str, java: str) -> None:
    assert java_to_string(value, fmt) == java


def test_the_model_orders_long_keys_as_a_java_hashmap() -> None:
    assert hashmap_order([3, 1, 2]) == [1, 2, 3]
    assert hashmap_order([17, 1]) == [17, 1]  # same bucket in 16: insertion order
    assert hashmap_order(list(range(20, 0, -1)))[:3] == [1, 2, 3]  # 32 buckets after a resize
    assert hashmap_order([6, 2**32 + 5]) == [2**32 + 5, 6]  # Long.hashCode folds the halves
