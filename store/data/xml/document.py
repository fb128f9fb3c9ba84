"""The items of Artemis's XML export (:mod:`store.data.xml.format`): bindings, and messages
whose bodies are decoded piece by piece, over the hardened event reader
(:mod:`store.data.xml.reader`).

:func:`read_document` yields :class:`AddressBinding`, :class:`QueueBinding` and
:class:`XmlMessage` in document order, each value converted and checked (a fault is an
XmlFormatError naming its line and column). A body is decoded as its text arrives into a
``tempfile.SpooledTemporaryFile`` (in memory up to :data:`SPOOL` bytes, on disk past it), or
only checked and measured, so memory stays bounded whatever a body's size.

Bodies: base64 in either alphabet, in any number of padded pieces (CDATA sections, or
character data that is not only whitespace). ``type="text"`` bodies (Artemis's JMS text
messages; a hand-written file may carry plain text): the body's text is read as base64 when it
is complete, padded base64 as a whole (whitespace ignored), as Artemis's importer reads every
body; otherwise it is the text itself, stored as UTF-8. So a text that happens to be valid
base64 (``abcd``) is read as base64: write such a text as base64. A base64 body is kept as
decoded; Artemis's own text-message framing inside it is not interpreted. Large bodies
(``isLarge="true"``) are always base64.

Message attributes: ``id`` is read and checked, and not used further by the importer;
``user-id`` is kept as written (Artemis's importer makes a new one; we keep the message's);
missing ``priority``, ``expiration`` and ``timestamp`` are 0, as in Artemis's importer;
``type`` is one of Artemis's (``default`` when missing). Each property's ``type`` is kept in
``XmlMessage.property_types``. ``_AMQ_SCHED_DELIVERY`` becomes ``scheduled_delivery``. An
address's empty ``routing-types`` is an empty tuple here (the importer decides);
``filter-string=""`` is no filter.

Artemis 1.x's ``<binding address filter-string queue-name id/>`` is read as Artemis's
importer reads it (without ``--legacy-prefixes``): an address starting ``jms.queue.`` is
ANYCAST, any other MULTICAST, and ``jms.queue.`` / ``jms.topic.`` is cut from the address
and the queue name; it yields an :class:`AddressBinding` with that one routing type and a
:class:`QueueBinding` (none for the filter ``__AMQX=-1``, 1.x's placeholder of a topic), and
the messages' ``<queue name>`` of a renamed queue is renamed alike.

Thread-safety: a generator belongs to the thread that iterates it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, Final, cast

from store.data.xml import format as f
from store.data.xml.reader import Event, XmlFormatError, read_events
from store.messaging.values import ANYCAST, MULTICAST, ROUTING_TYPES, PropertyValue

__all__ = [
    "SPOOL",
    "AddressBinding",
    "Item",
    "QueueBinding",
    "XmlMessage",
    "read_document",
]

#: Bytes of a body kept in memory before its temporary file goes to disk.
SPOOL: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class AddressBinding:
    """An ``<address-binding>``: its name, routing types (maybe empty) and exported id."""

    name: str
    routing_types: tuple[str, ...]
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class QueueBinding:
    """A ``<queue-binding>``."""

    name: str
    address: str
    routing_type: str
    filter: str | None
    line: int
    column: int


@dataclass(slots=True)
class XmlMessage:
    """A ``<message>``: headers, properties (``_AMQ_SCHED_DELIVERY`` taken out into
    ``scheduled_delivery``), queue names, and the decoded body in a temporary file positioned
    at its start (None when the reader was told not to keep bodies). Close ``body``."""

    exported_id: int
    priority: int
    expiration: int
    timestamp: int
    type: str
    user_id: str | None
    scheduled_delivery: int
    properties: dict[str, PropertyValue]
    property_types: dict[str, str]
    queues: list[str]
    body: BinaryIO | None
    body_size: int
    large: bool
    line: int
    column: int


Item = AddressBinding | QueueBinding | XmlMessage


class _Fault(Exception):
    """A value that does not convert; becomes an XmlFormatError at its event's place."""


def _int(attrs: dict[str, str], name: str, default: int, low: int, high: int) -> int:
    text = attrs.get(name)
    if text is None:
        return default
    try:
        value = int(text.strip())
    except ValueError:
        raise _Fault(f"{name}={text!r} is not an integer") from None
    if not low <= value <= high:
        raise _Fault(f"{name}={value} is outside {low}..{high}")
    return value


def _required(attrs: dict[str, str], name: str, element: str) -> str:
    value = attrs.get(name)
    if not value:
        raise _Fault(f"<{element}> needs a non-empty {name} attribute")
    return value


def _routing_type(text: str) -> str:
    value = text.strip().upper()
    if value not in ROUTING_TYPES:
        raise _Fault(f"routing type {text!r} is not one of {', '.join(ROUTING_TYPES)}")
    return value


_I64: Final = 2**63 - 1


def _spool() -> BinaryIO:
    return cast(BinaryIO, tempfile.SpooledTemporaryFile(SPOOL))


class _Body:
    """Decodes one ``<body>``'s text pieces into a sink (see the module docstring)."""

    def __init__(self, *, text: bool, keep: bool) -> None:
        self.decoder = f.Base64Decoder()
        self.sink: BinaryIO | None = _spool() if keep else None
        self.text = text
        self.raw: BinaryIO | None = None
        if text:  # the text as it is, in case it turns out not to be base64
            self.raw = _spool() if keep else None
            self.base64 = True
            self.raw_size = 0

    def feed(self, piece: str) -> None:
        if self.text:
            data = piece.encode("utf-8", "surrogatepass")
            self.raw_size += len(data)
            if self.raw is not None:
                self.raw.write(data)
            if not self.base64:
                return
            try:
                out = self.decoder.feed(piece)
            except ValueError:
                self.base64 = False
                return
        else:
            out = self.decoder.feed(piece)
        if self.sink is not None and out:
            self.sink.write(out)

    def finish(self) -> tuple[BinaryIO | None, int]:
        """The body and its size."""
        if self.text:
            strict = self.base64 and self.decoder.complete  # complete, padded base64
            if not strict:
                if self.sink is not None:
                    self.sink.close()
                sink, size = self.raw, self.raw_size
                if sink is not None:
                    sink.seek(0)
                return sink, size
            if self.raw is not None:
                self.raw.close()
        out = self.decoder.finish()
        if self.sink is not None:
            self.sink.write(out)
            self.sink.seek(0)
        return self.sink, self.decoder.decoded

    def close(self) -> None:
        for part in (self.sink, self.raw):
            if part is not None:
                part.close()


class _MessageBuilder:
    """Collects one ``<message>``'s events."""

    def __init__(self, event: Event, *, keep: bool) -> None:
        a = event.attrs
        self.event = event
        self.keep = keep
        self.exported_id = _int(a, "id", 0, -(2**63), _I64)
        self.priority = _int(a, "priority", 0, 0, 9)
        self.expiration = _int(a, "expiration", 0, 0, _I64)
        self.timestamp = _int(a, "timestamp", 0, 0, _I64)
        self.type = a.get("type", f.DEFAULT_TYPE).strip() or f.DEFAULT_TYPE
        if self.type not in f.MESSAGE_TYPES:
            raise _Fault(f"message type {self.type!r} is not one of {', '.join(f.MESSAGE_TYPES)}")
        self.user_id = a.get(f.USER_ID)
        self.properties: dict[str, PropertyValue] = {}
        self.property_types: dict[str, str] = {}
        self.scheduled = 0
        self.queues: list[str] = []
        self.body: _Body | None = None
        self.result: tuple[BinaryIO | None, int] | None = None
        self.large = False

    def property(self, event: Event) -> None:
        a = event.attrs
        name = _required(a, "name", f.PROPERTY)
        kind = a.get("type", "").strip()
        try:
            value = f.decode_property(kind, a.get("value", ""))
        except ValueError as exc:
            raise _Fault(f"property {name!r}: {exc}") from None
        if name in self.properties or (name == f.SCHEDULED_DELIVERY and self.scheduled):
            raise _Fault(f"property {name!r} appears twice")
        if name == f.SCHEDULED_DELIVERY:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise _Fault(f"{f.SCHEDULED_DELIVERY} is a time in ms (a long >= 0), not {value!r}")
            self.scheduled = value
        else:
            self.properties[name] = value
            self.property_types[name] = kind

    def close(self) -> None:
        if self.body is not None:
            self.body.close()
        if self.result is not None and self.result[0] is not None:
            self.result[0].close()

    def build(self, end: Event) -> XmlMessage:
        if not self.queues:
            raise _Fault(f"message {self.exported_id} names no queue")
        body, size = self.result if self.result is not None else (None, 0)
        if body is None and self.keep:  # no <body>: an empty one
            body = _spool()
        e = self.event
        return XmlMessage(
            self.exported_id,
            self.priority,
            self.expiration,
            self.timestamp,
            self.type,
            self.user_id,
            self.scheduled,
            self.properties,
            self.property_types,
            self.queues,
            body,
            size,
            self.large,
            e.line,
            e.column,
        )


def _strip_old_prefix(name: str) -> str:
    for prefix in (f.OLD_QUEUE_PREFIX, f.OLD_TOPIC_PREFIX):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def _old_binding(event: Event, renamed: dict[str, str]) -> Iterator[Item]:
    """The address (and queue) of a 1.x ``<binding>`` (see the module docstring); records a
    renamed queue in ``renamed``."""
    a = event.attrs
    old_address = _required(a, f.OLD_ADDRESS, f.OLD_BINDING)
    old_queue = _required(a, f.OLD_QUEUE, f.OLD_BINDING)
    routing = ANYCAST if old_address.startswith(f.OLD_QUEUE_PREFIX) else MULTICAST
    address, queue = _strip_old_prefix(old_address), _strip_old_prefix(old_queue)
    if not address or not queue:
        raise _Fault(f"<{f.OLD_BINDING}> names nothing once its JMS prefix is cut")
    if queue != old_queue:
        renamed[old_queue] = queue
    yield AddressBinding(address, (routing,), event.line, event.column)
    filter_ = a.get(f.OLD_FILTER) or None
    if filter_ != f.IGNORED_FILTER:
        yield QueueBinding(queue, address, routing, filter_, event.line, event.column)


def read_document(stream: BinaryIO, path: str, *, keep_bodies: bool) -> Iterator[Item]:
    """The bindings and messages of the export document in ``stream`` (named ``path`` in
    errors), in document order. With ``keep_bodies`` each message's body is decoded into a
    temporary file (the caller closes ``XmlMessage.body``); without, bodies are checked and
    measured only. Raises XmlFormatError naming the line and column of the first fault."""
    current: _MessageBuilder | None = None
    event: Event | None = None
    renamed: dict[str, str] = {}  # 1.x queue names -> ours
    try:
        for event in read_events(stream, path):
            kind = event.kind
            if kind == f.ADDRESS_BINDING:
                a = event.attrs
                types = tuple(
                    dict.fromkeys(
                        _routing_type(t) for t in a.get("routing-types", "").split(",") if t.strip()
                    )
                )
                yield AddressBinding(_required(a, "name", kind), types, event.line, event.column)
            elif kind == f.QUEUE_BINDING:
                a = event.attrs
                yield QueueBinding(
                    _required(a, "name", kind),
                    _required(a, "address", kind),
                    _routing_type(a.get("routing-type", ANYCAST)),
                    a.get("filter-string") or None,
                    event.line,
                    event.column,
                )
            elif kind == f.OLD_BINDING:
                yield from _old_binding(event, renamed)
            elif kind == f.MESSAGE:
                current = _MessageBuilder(event, keep=keep_bodies)
            elif current is None:
                raise _Fault(f"<{kind.lstrip('/')}> outside a message")
            elif kind == f.PROPERTY:
                current.property(event)
            elif kind == f.QUEUE:
                name = _required(event.attrs, "name", kind)
                current.queues.append(renamed.get(name, name))
            elif kind == f.BODY:
                if current.body is not None:
                    raise _Fault("a message has one body")
                current.large = event.attrs.get(f.IS_LARGE, "false").strip().lower() == "true"
                text = current.type == f.TEXT_TYPE and not current.large
                current.body = _Body(text=text, keep=keep_bodies)
            elif kind == "body-text":
                assert current.body is not None
                current.body.feed(event.text)
            elif kind == "/body":
                assert current.body is not None
                current.result = current.body.finish()
            elif kind == "/message":
                message, current = current.build(event), None
                yield message
    except (_Fault, ValueError) as exc:
        if current is not None:
            current.close()
        line, column = (event.line, event.column) if event is not None else (1, 1)
        raise XmlFormatError(path, line, column, str(exc)) from None
    except BaseException:
        if current is not None:
            current.close()
        raise
