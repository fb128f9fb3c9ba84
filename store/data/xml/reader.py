"""A hardened, streaming reader of Artemis's XML export format (:mod:`store.data.xml.format`).

:func:`read_events` parses a file with the standard library's expat, at the SAX level, fed 64
KiB at a time, and yields the document's parts as small events in document order
(:class:`Event`); a body's text arrives as many ``body-text`` events (expat hands character
data over in pieces), so no body is ever held whole. Memory stays bounded by the feed size
plus the largest start tag (a property's value is held whole).

Hardening: the export format needs no DTD, so the reader refuses, before anything is expanded,

1. any ``<!DOCTYPE …>`` (a DTD, internal or external): the only place entities can be declared;
2. any entity declaration, notation or unparsed entity (should one get past 1);
3. any external entity reference, and parameter entities (parsing of them is off);

so an external entity (a file or URL read), a parameter entity, billion laughs and a quadratic
blow-up (one big entity referenced many times) all fail at their DOCTYPE with a clear error and
nothing expanded. A reference to an undeclared entity is malformed XML. Only the five
predefined entities and character references are expanded.

Structure: elements are checked against the format (a ``message`` only under ``messages``, a
``property`` only under ``properties`` …); an unknown element is an error (a typo must not
silently drop data); unknown attributes are ignored, as Artemis ignores them.

Every error is an :class:`XmlFormatError` naming the file, the line and the column (1-based).

Thread-safety: a generator belongs to the thread that iterates it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO, Final
from xml.parsers import expat

from store.data.xml import format as f
from store.errors import CorruptionError, StoreError

__all__ = ["FEED", "Event", "XmlFormatError", "read_events"]

#: Bytes handed to expat at a time.
FEED: Final = 64 * 1024

# element -> the elements it may hold (None: the document's root)
_CHILDREN: Final[dict[str | None, tuple[str, ...]]] = {
    None: (f.ROOT,),
    f.ROOT: (f.BINDINGS, f.MESSAGES),
    f.BINDINGS: (f.ADDRESS_BINDING, f.QUEUE_BINDING, f.OLD_BINDING),
    f.ADDRESS_BINDING: (),
    f.OLD_BINDING: (),
    f.QUEUE_BINDING: (),
    f.MESSAGES: (f.MESSAGE,),
    f.MESSAGE: (f.PROPERTIES, f.QUEUES, f.BODY),
    f.PROPERTIES: (f.PROPERTY,),
    f.PROPERTY: (),
    f.QUEUES: (f.QUEUE,),
    f.QUEUE: (),
    f.BODY: (),
}
# elements whose start and end are events (the others only structure the document)
_EVENTS: Final = frozenset(
    {f.ADDRESS_BINDING, f.QUEUE_BINDING, f.OLD_BINDING, f.MESSAGE, f.PROPERTY, f.QUEUE}
)


class XmlFormatError(CorruptionError):
    """Raised when an XML export file is malformed, refused (a DTD or entity declaration) or
    does not follow the export format; names the file, line and column."""

    def __init__(self, path: str, line: int, column: int, reason: str) -> None:
        StoreError.__init__(self, f"{path}: line {line}, column {column}: {reason}")
        self.path = path
        self.offset = 0
        self.reason = reason
        self.line = line
        self.column = column


@dataclass(frozen=True, slots=True)
class Event:
    """One part of the document: ``kind`` is the element's name for a start (``message``,
    ``property``, ``queue``, ``address-binding``, ``queue-binding``, 1.x's ``binding``,
    ``body``), ``/message``
    and ``/body`` for those ends, or ``body-text`` for a piece of a body's text (``text``: what
    its CDATA sections and its character data hold, except character data that is only
    whitespace, the layout between sections; at most one piece per feed). ``line`` and
    ``column`` (1-based) locate it."""

    kind: str
    line: int
    column: int
    attrs: dict[str, str] = field(default_factory=dict)
    text: str = ""


class _Refused(Exception):
    """A handler's refusal, carried out of expat (which only lets exceptions through)."""


def read_events(stream: BinaryIO, path: str) -> Iterator[Event]:
    """The events of the document read from ``stream`` (named ``path`` in errors), in
    document order (see the module docstring). Raises XmlFormatError (malformed XML, a
    refused construct, a structure the format does not have) and what ``stream.read``
    raises."""
    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.buffer_size = FEED
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    events: deque[Event] = deque()
    stack: list[str] = []
    cdata = [False]
    pending: list[str] = []  # a body's text since the last event, handed over as one
    pending_at = [1, 1]

    def where() -> tuple[int, int]:
        return parser.CurrentLineNumber, parser.CurrentColumnNumber + 1

    def refuse(what: str) -> None:
        raise _Refused(what, *where())

    def flush() -> None:
        if pending:
            line, column = pending_at
            events.append(Event("body-text", line, column, text="".join(pending)))
            pending.clear()

    def start(name: str, attrs: dict[str, str]) -> None:
        flush()
        parent = stack[-1] if stack else None
        allowed = _CHILDREN.get(parent, ())
        if name not in allowed:
            inside = f"inside <{parent}>" if parent else "as the document's root"
            expected = ", ".join(f"<{a}>" for a in allowed) or "no element"
            refuse(f"unexpected <{name}> {inside} (expected {expected})")
        stack.append(name)
        if name in _EVENTS or name == f.BODY:
            events.append(Event(name, *where(), attrs=attrs))

    def end(name: str) -> None:
        flush()
        stack.pop()
        if name in (f.MESSAGE, f.BODY):
            events.append(Event("/" + name, *where()))

    def text(data: str) -> None:
        if stack and stack[-1] == f.BODY:
            if cdata[0] or data.strip():  # whitespace between CDATA sections is layout
                if not pending:
                    pending_at[:] = where()
                pending.append(data)
        elif data.strip():
            inside = f"<{stack[-1]}>" if stack else "the document"
            refuse(f"unexpected text {data.strip()[:40]!r} inside {inside}")

    def start_cdata() -> None:
        cdata[0] = True

    def end_cdata() -> None:
        cdata[0] = False

    def doctype(name: str, *_: object) -> None:
        refuse(f"a DOCTYPE ({name}) is not allowed: the export format has no DTD and no entities")

    def entity(name: str, is_parameter: bool, *_: object) -> None:
        kind = "parameter entity" if is_parameter else "entity"
        refuse(f"the {kind} declaration {name!r} is not allowed")

    def external(
        context: str | None, base: str | None, system: str | None, public: str | None
    ) -> int:
        what = system or public or context
        refuse(f"the external entity reference {what!r} is not allowed")
        return 0

    def notation(name: str, *_: object) -> None:
        refuse(f"the notation or unparsed entity {name!r} is not allowed")

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    parser.StartCdataSectionHandler = start_cdata
    parser.EndCdataSectionHandler = end_cdata
    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = entity
    parser.ExternalEntityRefHandler = external
    parser.NotationDeclHandler = notation
    parser.UnparsedEntityDeclHandler = notation

    def feed(data: bytes, final: bool) -> None:
        try:
            parser.Parse(data, final)
        except _Refused as exc:
            what, line, column = exc.args
            raise XmlFormatError(path, line, column, what) from None
        except expat.ExpatError as exc:
            reason = expat.errors.messages[exc.code] if exc.code else str(exc)
            raise XmlFormatError(path, exc.lineno, exc.offset + 1, reason) from None

    while True:
        chunk = stream.read(FEED)
        feed(chunk, not chunk)
        flush()
        while events:
            yield events.popleft()
        if not chunk:
            return
