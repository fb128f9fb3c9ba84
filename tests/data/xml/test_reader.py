"""The hardened streaming reader: what it yields, what it refuses (DTDs, entities, the classic
XML attacks), and where it says the fault is."""

from __future__ import annotations

import io

import pytest

from store.data.xml.document import XmlMessage, read_document
from store.data.xml.reader import FEED, XmlFormatError, read_events

_MESSAGE = (
    '<activemq-journal><bindings><address-binding routing-types="ANYCAST" name="a" id="1"/>'
    '<queue-binding address="a" filter-string="" name="q" id="2" routing-type="ANYCAST"/>'
    '</bindings><messages><message id="3" priority="4" expiration="0" timestamp="0" type="default">'
    '<properties/><queues><queue name="q"/></queues><body>{body}</body></message></messages>'
    "</activemq-journal>"
)


def _events(text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [e.kind for e in read_events(io.BytesIO(data), "x.xml")]


def test_events_arrive_in_document_order() -> None:
    kinds = _events(_MESSAGE.format(body="<![CDATA[aGk=]]>"))
    assert kinds == [
        "address-binding",
        "queue-binding",
        "message",
        "queue",
        "body",
        "body-text",
        "/body",
        "/message",
    ]


def test_a_big_body_arrives_in_pieces_never_whole() -> None:
    body = "QUJD" * (FEED // 2)  # 2 feeds' worth of base64 in one CDATA section
    events = list(
        read_events(io.BytesIO(_MESSAGE.format(body=f"<![CDATA[{body}]]>").encode()), "x")
    )
    pieces = [e.text for e in events if e.kind == "body-text"]
    assert len(pieces) > 1 and max(map(len, pieces)) <= FEED
    assert "".join(pieces) == body


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<activemq-journal>&lol4;</activemq-journal>"""

QUADRATIC = (
    '<?xml version="1.0"?>\n<!DOCTYPE kaboom [<!ENTITY a "' + "x" * 50_000 + '">]>\n'
    "<activemq-journal>" + "&a;" * 10_000 + "</activemq-journal>"
)

EXTERNAL = """<?xml version="1.0"?>
<!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<activemq-journal><bindings>&xxe;</bindings></activemq-journal>"""

PARAMETER = """<?xml version="1.0"?>
<!DOCTYPE foo [<!ENTITY % remote SYSTEM "http://127.0.0.1:1/evil.dtd"> %remote;]>
<activemq-journal/>"""

EXTERNAL_DTD = """<?xml version="1.0"?>
<!DOCTYPE activemq-journal SYSTEM "http://127.0.0.1:1/artemis.dtd">
<activemq-journal/>"""


@pytest.mark.parametrize(
    "document",
    [BILLION_LAUGHS, QUADRATIC, EXTERNAL, PARAMETER, EXTERNAL_DTD],
    ids=[
        "billion-laughs",
        "quadratic-blowup",
        "external-entity",
        "parameter-entity",
        "external-dtd",
    ],
)
def test_dtds_and_entities_are_refused_before_anything_is_expanded(document: str) -> None:
    with pytest.raises(XmlFormatError) as info:
        _events(document)
    assert "DOCTYPE" in str(info.value) and info.value.line == 2
    assert str(info.value).startswith("x.xml: line 2, column ")


def test_an_undeclared_entity_is_malformed_xml() -> None:
    with pytest.raises(XmlFormatError, match="undefined entity"):
        _events("<activemq-journal>&xxe;</activemq-journal>")


@pytest.mark.parametrize(
    ("document", "line", "column", "words"),
    [
        pytest.param(
            "<activemq-journal>\n  <bindings>\n</activemq-journal>",
            3,
            3,
            "mismatched tag",
            id="mismatched",
        ),
        pytest.param("", 1, 1, "no element found", id="empty"),
        pytest.param(
            "<activemq-journal>\n<message/>\n</activemq-journal>",
            2,
            1,
            "unexpected <message>",
            id="misplaced-element",
        ),
        pytest.param("<journal/>", 1, 1, "as the document's root", id="wrong-root"),
        pytest.param(
            "<activemq-journal>\n  text\n</activemq-journal>",
            3,  # buffered text is judged where it ends
            1,
            "unexpected text",
            id="stray-text",
        ),
    ],
)
def test_faults_name_the_file_line_and_column(
    document: str, line: int, column: int, words: str
) -> None:
    with pytest.raises(XmlFormatError) as info:
        _events(document)
    assert (info.value.line, info.value.column) == (line, column)
    assert words in str(info.value)


def _messages(body: str, *, kind: str = "default") -> list[XmlMessage]:
    text = _MESSAGE.format(body=body).replace('type="default"', f'type="{kind}"')
    return [
        m
        for m in read_document(io.BytesIO(text.encode()), "x", keep_bodies=True)
        if isinstance(m, XmlMessage)
    ]


def _body(body: str, *, kind: str = "default") -> bytes:
    (message,) = _messages(body, kind=kind)
    assert message.body is not None
    with message.body:
        return message.body.read()


@pytest.mark.parametrize(
    ("body", "kind", "expected"),
    [
        pytest.param("<![CDATA[aGVsbG8=]]>", "default", b"hello", id="base64"),
        pytest.param(
            "\n  <![CDATA[aGVs]]>\n  <![CDATA[bG8=]]>\n", "default", b"hello", id="pieces"
        ),
        pytest.param("aGVsbG8=", "default", b"hello", id="plain-character-data"),
        pytest.param("<![CDATA[+//+]]>", "default", b"\xfb\xff\xfe", id="standard-alphabet"),
        pytest.param("", "default", b"", id="empty"),
        pytest.param("<![CDATA[aGVsbG8=]]>", "text", b"hello", id="text-as-base64"),
        pytest.param("<![CDATA[hello, world]]>", "text", b"hello, world", id="text-plain"),
        pytest.param("<![CDATA[caf\u00e9]]>", "text", "caf\u00e9".encode(), id="text-utf8"),
        pytest.param(
            "<![CDATA[abcd]]>", "text", b"i\xb7\x1d", id="text-that-is-base64-reads-as-base64"
        ),
    ],
)
def test_bodies_decode_as_documented(body: str, kind: str, expected: bytes) -> None:
    assert _body(body, kind=kind) == expected


def test_a_bad_body_names_its_place() -> None:
    with pytest.raises(XmlFormatError, match="base64") as info:
        _messages("\n<![CDATA[not*base64]]>")
    assert info.value.line == 2


def test_a_message_without_a_queue_is_refused() -> None:
    text = _MESSAGE.format(body="").replace('<queue name="q"/>', "")
    with pytest.raises(XmlFormatError, match="names no queue"):
        list(read_document(io.BytesIO(text.encode()), "x", keep_bodies=False))


def test_scheduled_delivery_property_becomes_the_header() -> None:
    text = _MESSAGE.format(body="").replace(
        "<properties/>",
        '<properties><property name="_AMQ_SCHED_DELIVERY" value="123" type="long"/>'
        '<property name="k" value="v" type="string"/></properties>',
    )
    (m,) = [
        x
        for x in read_document(io.BytesIO(text.encode()), "x", keep_bodies=False)
        if isinstance(x, XmlMessage)
    ]
    assert m.scheduled_delivery == 123 and m.properties == {"k": "v"}
