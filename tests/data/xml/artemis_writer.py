"""A model of the bytes ``artemis data exp`` writes, built from Artemis's code
(apache/activemq-artemis ``artemis-cli/…/tools/xml``: ``XmlDataExporter`` since 2.6 with its
``PrettyPrintHandler``, ``XMLMessageExporter``, ``XmlDataExporterUtil``, ``XmlDataConstants``)
and the JDK's ``XMLStreamWriter`` and ``toString`` methods, never from
:mod:`store.data.xml.export`: the expected side of the byte-exact export tests.

What the model takes from those classes:

- the writer: the JDK's ``XMLStreamWriter`` closes an open start tag with ``>`` (``/>`` for
  an empty element) at the next write, escapes ``& < > "`` in attribute values and ``& < >``
  in text, and writes CDATA as given; no XML declaration (``writeStartDocument`` went in
  2.6); ``PrettyPrintHandler`` writes the line separator (``\\n`` here) and three spaces per
  level before every start element, empty element and CDATA section, and before an end
  element;
- the document: ``<activemq-journal>``, ``<bindings>`` (address bindings, then queue
  bindings, each map in ``HashMap<Long, …>`` order), ``<messages>`` (by id: a ``TreeMap``);
  a message's attributes ``id priority expiration timestamp type [user-id]``, its properties
  (``name``, ``value`` = ``convertProperty``, ``type`` = ``getPropertyType``: ``bytes`` for
  null), its queues (``HashMap<Long, …>`` order of the queue ids), its body (one CDATA of
  URL-safe padded base64, or ``isLarge="true"`` and one CDATA per 1000 bytes);
- values: ``Boolean``/``Byte``/``Short``/``Integer``/``Long``/``String`` ``toString``,
  ``Float.toString`` / ``Double.toString`` (JDK 19+: the shortest decimal that rounds to the
  value, the closest of them, one or two digits when one would do; plain from 10^-3 to below
  10^7, else ``d.dddE±n``), found here by trying decimals of growing length with ``struct``
  (an implementation of its own, not :mod:`store.data.xml.numbers`).

The one thing a caller supplies that Artemis would decide itself: the order of a message's
properties (Artemis: its ``TypedProperties`` hash map's).
"""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal

INDENT = "   "


@dataclass(frozen=True)
class JavaMessage:
    """A message as Artemis holds it: ``properties`` are (name, Java type, value) with value
    None for null."""

    id: int
    priority: int
    expiration: int
    timestamp: int
    type: str
    user_id: str | None
    properties: Sequence[tuple[str, str, object]]
    queues: Sequence[tuple[int, str]]  # (queue id, name)
    body: bytes
    large: bool


class _PrettyStax:
    """The JDK's XMLStreamWriter behind Artemis's PrettyPrintHandler (module docstring)."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.depth = 0
        self.wrap = True
        self.pending: str | None = None  # ">" or "/>": closes the open start tag

    def _close(self) -> None:
        if self.pending is not None:
            self.out.append(self.pending)
            self.pending = None

    def _characters(self, text: str) -> None:
        self._close()
        self.out.append(text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))

    def _newline(self, depth: int) -> None:
        self._characters("\n" + INDENT * depth)

    def start(self, name: str) -> None:
        self._newline(self.depth)
        self.depth += 1
        self._close()
        self.out.append(f"<{name}")
        self.pending = ">"

    def empty(self, name: str) -> None:
        self._newline(self.depth)
        self._close()
        self.out.append(f"<{name}")
        self.pending = "/>"

    def attribute(self, name: str, value: str) -> None:
        escaped = (
            value.replace("&", "&amp;")
            .replace("<", "&lt;")
            .replace(">", "&gt;")
            .replace('"', "&quot;")
        )
        self.out.append(f' {name}="{escaped}"')

    def cdata(self, text: str) -> None:
        self._newline(self.depth)
        self._close()
        self.out.append(f"<![CDATA[{text}]]>")

    def end(self, name: str) -> None:
        self.depth -= 1
        if self.wrap:
            self._newline(self.depth)
        self.wrap = True
        self._close()
        self.out.append(f"</{name}>")


def hashmap_order(keys: Sequence[int]) -> list[int]:
    """The iteration order of a ``java.util.HashMap<Long, …>`` filled with ``keys`` in that
    order (default capacity 16, load factor 0.75, doubling; a bucket keeps insertion order)."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: int) -> int:
        unsigned = key & 0xFFFFFFFFFFFFFFFF
        h = (unsigned ^ (unsigned >> 32)) & 0xFFFFFFFF  # Long.hashCode
        return (h ^ (h >> 16)) & (capacity - 1)  # HashMap.hash, then the index

    return [k for _, _, k in sorted((bucket(k), i, k) for i, k in enumerate(keys))]


def _shortest(value: float, fmt: str) -> Decimal:
    """Java's decimal for positive finite ``value`` of format ``fmt`` (">f" or ">d")."""
    exact = Decimal(value)

    def rounds_to_value(d: Decimal) -> bool:
        try:
            return bool(struct.unpack(fmt, struct.pack(fmt, float(d)))[0] == value)
        except OverflowError:
            return False

    def candidates(length: int) -> list[Decimal]:
        return [
            c
            for c in {
                Context(prec=length, rounding=ROUND_FLOOR).plus(exact),
                Context(prec=length, rounding=ROUND_CEILING).plus(exact),
            }
            if rounds_to_value(c)
        ]

    for length in range(1, 18):
        found = candidates(length)
        if found:
            if length == 1:  # one digit would do: the closest of one or two digits
                found = candidates(2)
            return min(found, key=lambda c: (abs(c - exact), int(c.as_tuple().digits[-1]) % 2))
    raise AssertionError(value)


def java_to_string(value: float, fmt: str) -> str:
    """``Float.toString`` (``fmt`` ">f") or ``Double.toString`` (">d") of ``value``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0.0"
    d = _shortest(abs(value), fmt).normalize()
    if Decimal("0.001") <= d < Decimal(10) ** 7:
        text = format(d, "f")
        if "." not in text:
            text += ".0"
        return sign + text
    digits = "".join(map(str, d.as_tuple().digits))
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{d.adjusted()}"


def convert_property(kind: str, value: object) -> str:
    """``XmlDataExporterUtil.convertProperty`` of a Java value of type ``kind``."""
    if value is None:
        return "_AMQ_NULL"
    if kind == "bytes":
        assert isinstance(value, bytes)
        return base64.urlsafe_b64encode(value).decode()
    if kind == "boolean":
        return "true" if value else "false"
    if kind in ("float", "double"):
        assert isinstance(value, float)
        return java_to_string(value, ">f" if kind == "float" else ">d")
    return str(value)


def render(
    addresses: Sequence[tuple[int, str, Sequence[str]]],
    queues: Sequence[tuple[int, str, str, str | None, str]],
    messages: Sequence[JavaMessage],
    *,
    typed_nulls: bool = False,
) -> bytes:
    """The export of a journal holding ``addresses`` (id, name, routing types) and ``queues``
    (id, name, address, filter, routing type), each in the order the bindings journal loads
    them, and ``messages``. A null's type is ``bytes`` (Artemis's null has none) unless
    ``typed_nulls``: then the one given, as a hand-written file may say."""
    w = _PrettyStax()
    w.start("activemq-journal")
    w.start("bindings")
    by_id = {a[0]: a for a in addresses}
    for key in hashmap_order([a[0] for a in addresses]):
        address_id, name, routing_types = by_id[key]
        w.empty("address-binding")
        w.attribute("routing-types", ",".join(routing_types))
        w.attribute("name", name)
        w.attribute("id", str(address_id))
    queue_by_id = {q[0]: q for q in queues}
    for key in hashmap_order([q[0] for q in queues]):
        queue_id, name, address, filter_, routing_type = queue_by_id[key]
        w.empty("queue-binding")
        w.attribute("address", address)
        w.attribute("filter-string", "" if filter_ is None else filter_)
        w.attribute("name", name)
        w.attribute("id", str(queue_id))
        w.attribute("routing-type", routing_type)
    w.end("bindings")
    w.start("messages")
    for m in sorted(messages, key=lambda m: m.id):
        w.start("message")
        w.attribute("id", str(m.id))
        w.attribute("priority", str(m.priority))
        w.attribute("expiration", str(m.expiration))
        w.attribute("timestamp", str(m.timestamp))
        w.attribute("type", m.type)
        if m.user_id is not None:
            w.attribute("user-id", m.user_id)
        w.start("properties")
        for name, kind, value in m.properties:
            w.empty("property")
            w.attribute("name", name)
            w.attribute("value", convert_property(kind, value))
            w.attribute("type", "bytes" if value is None and not typed_nulls else kind)
        w.end("properties")
        w.start("queues")
        names = dict(m.queues)
        for queue_id in hashmap_order([q for q, _ in m.queues]):
            w.empty("queue")
            w.attribute("name", names[queue_id])
        w.end("queues")
        w.start("body")
        if m.large:
            w.attribute("isLarge", "true")
            for i in range(0, len(m.body), 1000):
                w.cdata(base64.urlsafe_b64encode(m.body[i : i + 1000]).decode())
        else:
            w.cdata(base64.urlsafe_b64encode(m.body).decode())
        w.end("body")
        w.end("message")
    w.end("messages")
    w.end("activemq-journal")
    w._close()
    return "".join(w.out).encode("utf-8")
