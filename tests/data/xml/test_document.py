"""The export document's items (store.data.xml.document): Artemis's headers kept as written
(type, user id, each property's Java type), and Artemis 1.x's ``<binding>`` read as Artemis's
importer reads it."""

from __future__ import annotations

import io

import pytest

from store.data.xml.document import AddressBinding, Item, QueueBinding, XmlMessage, read_document
from store.data.xml.reader import XmlFormatError


def _items(text: str) -> list[Item]:
    return list(read_document(io.BytesIO(text.encode()), "x.xml", keep_bodies=False))


def test_type_user_id_and_every_property_type_are_kept_as_written() -> None:
    (m,) = _items(
        '<activemq-journal><messages><message id="1" priority="4" expiration="0" timestamp="0"'
        ' type="map" user-id="0b6a2e4c-1f0d-11ee-be56-0242ac120002"><properties>'
        '<property name="b" value="-3" type="byte"/>'
        '<property name="s" value="7" type="short"/>'
        '<property name="i" value="8" type="integer"/>'
        '<property name="l" value="9" type="long"/>'
        '<property name="f" value="1.1" type="float"/>'
        '<property name="d" value="1.1" type="double"/>'
        '<property name="t" value="x" type="string"/>'
        '<property name="ss" value="y" type="simple-string"/>'
        '<property name="n" value="_AMQ_NULL" type="integer"/>'
        '<property name="_AMQ_SCHED_DELIVERY" value="5" type="long"/>'
        '</properties><queues><queue name="q"/></queues><body/></message></messages>'
        "</activemq-journal>"
    )
    assert isinstance(m, XmlMessage)
    assert (m.type, m.user_id, m.scheduled_delivery) == (
        "map",
        "0b6a2e4c-1f0d-11ee-be56-0242ac120002",
        5,
    )
    assert m.properties == {
        "b": -3,
        "s": 7,
        "i": 8,
        "l": 9,
        "f": 1.100000023841858,  # the 32-bit float Artemis holds
        "d": 1.1,
        "t": "x",
        "ss": "y",
        "n": None,
    }
    assert m.property_types == {
        "b": "byte",
        "s": "short",
        "i": "integer",
        "l": "long",
        "f": "float",
        "d": "double",
        "t": "string",
        "ss": "simple-string",
        "n": "integer",
    }


def test_a_message_without_user_id_has_none() -> None:
    (m,) = _items(
        '<activemq-journal><messages><message id="1"><properties/><queues><queue name="q"/>'
        "</queues></message></messages></activemq-journal>"
    )
    assert isinstance(m, XmlMessage)
    assert (m.type, m.user_id, m.property_types) == ("default", None, {})


# Artemis 1.5's export: <binding> elements, JMS prefixes, the ignored filter of a topic.
OLD = """<?xml version="1.0"?>
<activemq-journal>
   <bindings>
      <binding address="jms.queue.orders" filter-string="" queue-name="jms.queue.orders" id="2"/>
      <binding address="jms.topic.news" filter-string="__AMQX=-1" queue-name="jms.topic.news" id="3"/>
      <binding address="jms.topic.news" filter-string="kind = 'a'" queue-name="client.sub" id="4"/>
      <binding address="plain" filter-string="" queue-name="plain.q" id="5"/>
   </bindings>
   <messages>
      <message id="6" priority="4" expiration="0" timestamp="0" type="text">
         <properties/>
         <queues>
            <queue name="jms.queue.orders"/>
         </queues>
         <body><![CDATA[aGk=]]></body>
      </message>
      <message id="7" priority="4" expiration="0" timestamp="0" type="text">
         <properties/>
         <queues>
            <queue name="client.sub"/>
         </queues>
         <body><![CDATA[aGk=]]></body>
      </message>
   </messages>
</activemq-journal>
"""  # noqa: E501


def test_an_artemis_1x_binding_becomes_an_address_and_a_queue_as_artemis_imports_it() -> None:
    items = _items(OLD)
    bindings = [(type(i).__name__, *_fields(i)) for i in items if not isinstance(i, XmlMessage)]
    assert bindings == [
        ("AddressBinding", "orders", ("ANYCAST",)),
        ("QueueBinding", "orders", "orders", "ANYCAST", None),
        ("AddressBinding", "news", ("MULTICAST",)),  # the topic's placeholder: no queue
        ("AddressBinding", "news", ("MULTICAST",)),
        ("QueueBinding", "client.sub", "news", "MULTICAST", "kind = 'a'"),
        ("AddressBinding", "plain", ("MULTICAST",)),  # no prefix: MULTICAST, as Artemis
        ("QueueBinding", "plain.q", "plain", "MULTICAST", None),
    ]
    queues = [m.queues for m in items if isinstance(m, XmlMessage)]
    assert queues == [["orders"], ["client.sub"]]  # the renamed queue renamed in messages


def _fields(item: Item) -> tuple[object, ...]:
    if isinstance(item, AddressBinding):
        return item.name, item.routing_types
    assert isinstance(item, QueueBinding)
    return item.name, item.address, item.routing_type, item.filter


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        ('<binding filter-string="" queue-name="q" id="1"/>', "non-empty address"),
        ('<binding address="a" filter-string="" id="1"/>', "non-empty queue-name"),
        ('<binding address="jms.queue." queue-name="q" id="1"/>', "names nothing"),
    ],
)
def test_a_bad_1x_binding_is_refused_naming_its_place(binding: str, message: str) -> None:
    with pytest.raises(XmlFormatError, match=message) as info:
        _items(f"<activemq-journal>\n<bindings>\n{binding}</bindings></activemq-journal>")
    assert (info.value.line, info.value.column) == (3, 1)
