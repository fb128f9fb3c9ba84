"""``store data imp``: Artemis's XML export (reference §6, DESIGN §10) into a store, through
:class:`~store.messaging.StorageManager`.

:func:`import_xml` works in two streaming passes over the file, with bounded memory
(:mod:`store.data.xml_reader`; bodies are decoded piece by piece into temporary files):

1. **Check** (:func:`scan`), before any store is opened or created: the whole file must be
   well-formed, free of DTDs and entities, follow the format, and every value must convert
   (attributes, property types and values, base64 bodies, a queue for every message).
   A fault fails with the file, line and column and nothing is imported.
2. **Import**: open (or create) the store and load it; check that every queue a message names
   is declared in the file or exists in the store and that the existing addresses and
   queues agree with the file; create the addresses and queues that do not exist (one with
   the same name is reused); then send each message with ``tx.send(message, queues=[…])`` in
   transactions committed every ``commit_interval`` messages, or in one transaction
   (``transactional``). A message's address is its queues' address; new ids are assigned.

A message keeps its body, properties (exactly: none added; ``_AMQ_SCHED_DELIVERY`` becomes
``scheduled_delivery``), priority, expiration and timestamp. Bodies go through a
``tempfile.SpooledTemporaryFile`` (in memory up to 1 MiB, on disk past it) and are sent as a
stream, so the storage manager puts one over ``min-large-message-size`` in the large-message
store without ever holding it whole; ``isLarge`` only says how the exporter wrote it.

Bodies of ``type="text"`` messages (Artemis's JMS text messages; a hand-written file may carry
plain text): the body's text (CDATA sections, and character data that is not only whitespace)
is read as base64 when it is complete, padded base64 as a whole (whitespace ignored), as
Artemis's importer reads every body; otherwise it is the text itself, stored as UTF-8. So a
text that happens to be valid base64 (``abcd``) is read as base64: write such a text as
base64. A base64 body is stored as decoded; Artemis's own text-message framing inside it is
not interpreted. Large bodies are always base64.

Other decisions: an address with empty ``routing-types`` gets the routing types of its queues
in the file (ANYCAST when it has none): the store needs at least one. ``filter-string=""`` is
no filter. A message's ``id`` and ``user-id`` are read and dropped (new ids are assigned);
missing ``priority``, ``expiration`` and ``timestamp`` are 0, as in Artemis's importer.

Failure: a failed import keeps what it committed (every ``commit_interval`` messages) and the
addresses and queues it created; the open transaction is rolled back. With
``transactional``, nothing: the one transaction is rolled back and the addresses and queues
this import created are deleted again (best effort: a store that went away keeps them, and
the error says so in the log). Because the first pass checked the whole file, what can fail
in the second is the store (or a file changed between the passes).

Thread-safety: one call works alone on its store; the store's lock keeps others out.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO, Final, cast

from store.config import StoreConfig
from store.data import xml_format as f
from store.data.xml_reader import Event, XmlFormatError, read_events
from store.errors import StoreError, StoreIOError
from store.messaging import Message, StorageManager, Transaction
from store.messaging.values import ANYCAST, ROUTING_TYPES, PropertyValue

__all__ = [
    "AddressBinding",
    "ImportResult",
    "Plan",
    "QueueBinding",
    "XmlMessage",
    "import_xml",
    "read_document",
    "scan",
]

log = logging.getLogger(__name__)

#: Bytes of a body kept in memory before its temporary file goes to disk.
SPOOL: Final = 1 << 20

#: ``on_progress(messages imported, messages in the file)``.
Progress = Callable[[int, int], None]


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
    scheduled_delivery: int
    properties: dict[str, PropertyValue]
    queues: list[str]
    body: BinaryIO | None
    body_size: int
    large: bool
    line: int
    column: int


Item = AddressBinding | QueueBinding | XmlMessage


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What :func:`import_xml` did. Immutable."""

    addresses_created: int
    queues_created: int
    messages: int
    large_messages: int
    body_bytes: int
    seconds: float


@dataclass(slots=True)
class Plan:
    """What the check pass learnt: the bindings declared in the file (first declaration of
    each name), the queue names messages use that the file does not declare, and the message
    count."""

    addresses: dict[str, AddressBinding] = field(default_factory=dict)
    queues: dict[str, QueueBinding] = field(default_factory=dict)
    undeclared: dict[str, tuple[int, int]] = field(default_factory=dict)
    messages: int = 0


# -- reading the document ---------------------------------------------------------------------


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
        self.properties: dict[str, PropertyValue] = {}
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
            self.scheduled,
            self.properties,
            self.queues,
            body,
            size,
            self.large,
            e.line,
            e.column,
        )


def read_document(stream: BinaryIO, path: str, *, keep_bodies: bool) -> Iterator[Item]:
    """The bindings and messages of the export document in ``stream`` (named ``path`` in
    errors), in document order. With ``keep_bodies`` each message's body is decoded into a
    temporary file (the caller closes ``XmlMessage.body``); without, bodies are checked and
    measured only. Raises XmlFormatError naming the line and column of the first fault."""
    current: _MessageBuilder | None = None
    event: Event | None = None
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
            elif kind == f.MESSAGE:
                current = _MessageBuilder(event, keep=keep_bodies)
            elif current is None:
                raise _Fault(f"<{kind.lstrip('/')}> outside a message")
            elif kind == f.PROPERTY:
                current.property(event)
            elif kind == f.QUEUE:
                current.queues.append(_required(event.attrs, "name", kind))
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


def _open_input(path: str | os.PathLike[str]) -> BinaryIO:
    try:
        return open(path, "rb")
    except OSError as exc:
        raise StoreIOError(
            f"cannot read {os.fspath(path)}: {exc.strerror or exc}", path=os.fspath(path)
        ) from exc


def scan(path: str | os.PathLike[str]) -> Plan:
    """The check pass (see the module docstring): reads the whole file at ``path`` without
    keeping bodies. Returns the :class:`Plan`. Raises StoreIOError when the file cannot be
    read, XmlFormatError (file, line, column) for the first fault."""
    name = os.fspath(path)
    plan = Plan()
    with _open_input(path) as stream:
        try:
            for item in read_document(stream, name, keep_bodies=False):
                _plan_item(plan, item, name)
        except OSError as exc:
            raise StoreIOError(f"cannot read {name}: {exc.strerror or exc}", path=name) from exc
    for queue in plan.queues.values():
        if queue.address not in plan.addresses:
            plan.addresses[queue.address] = AddressBinding(
                queue.address, (), queue.line, queue.column
            )
    return plan


def _plan_item(plan: Plan, item: Item, path: str) -> None:
    if isinstance(item, AddressBinding):
        seen = plan.addresses.get(item.name)
        if seen is not None and seen.routing_types != item.routing_types:
            raise XmlFormatError(
                path,
                item.line,
                item.column,
                f"address {item.name!r} is declared twice, differently",
            )
        plan.addresses.setdefault(item.name, item)
    elif isinstance(item, QueueBinding):
        seen_q = plan.queues.get(item.name)
        if seen_q is not None and (seen_q.address, seen_q.routing_type, seen_q.filter) != (
            item.address,
            item.routing_type,
            item.filter,
        ):
            raise XmlFormatError(
                path, item.line, item.column, f"queue {item.name!r} is declared twice, differently"
            )
        plan.queues.setdefault(item.name, item)
    else:
        plan.messages += 1
        addresses = {plan.queues[q].address for q in item.queues if q in plan.queues}
        if len(addresses) > 1:
            raise XmlFormatError(
                path,
                item.line,
                item.column,
                f"message {item.exported_id} names queues of several addresses: "
                + ", ".join(sorted(addresses)),
            )
        for q in item.queues:
            if q not in plan.queues:
                plan.undeclared.setdefault(q, (item.line, item.column))


# -- importing --------------------------------------------------------------------------------


@dataclass(slots=True)
class _Created:
    addresses: list[str] = field(default_factory=list)
    queues: list[str] = field(default_factory=list)


def _bindings(sm: StorageManager, plan: Plan, path: str) -> dict[str, str]:
    """Check the file's bindings against the store's; returns queue name -> address for every
    queue a message may name. Raises XmlFormatError when they disagree (nothing created)."""
    have_addresses = {a.name: a for a in sm.addresses()}
    have_queues = {q.name: q for q in sm.queues()}
    for name, (line, column) in plan.undeclared.items():
        if name not in have_queues:
            raise XmlFormatError(
                path,
                line,
                column,
                f"queue {name!r} is neither declared in the file nor in the store",
            )
    for q in plan.queues.values():
        have = have_queues.get(q.name)
        if have is not None and have.address != q.address:
            raise XmlFormatError(
                path,
                q.line,
                q.column,
                f"queue {q.name!r} exists in the store on address {have.address!r},"
                f" not {q.address!r}",
            )
        address = have_addresses.get(q.address)
        if have is None and address is not None and q.routing_type not in address.routing_types:
            raise XmlFormatError(
                path,
                q.line,
                q.column,
                f"address {q.address!r} exists in the store and accepts "
                f"{', '.join(address.routing_types)},"
                f" not {q.routing_type}",
            )
    routes = {name: q.address for name, q in have_queues.items()}
    routes.update({name: q.address for name, q in plan.queues.items()})
    return routes


def _create_bindings(sm: StorageManager, plan: Plan, created: _Created) -> None:
    existing_addresses = {a.name for a in sm.addresses()}
    existing_queues = {q.name for q in sm.queues()}
    for a in plan.addresses.values():
        if a.name in existing_addresses:
            continue
        types = (
            a.routing_types
            or tuple(
                dict.fromkeys(q.routing_type for q in plan.queues.values() if q.address == a.name)
            )
            or (ANYCAST,)
        )
        sm.create_address(a.name, routing_types=types)
        created.addresses.append(a.name)
    for q in plan.queues.values():
        if q.name not in existing_queues:
            sm.create_queue(q.name, address=q.address, routing_type=q.routing_type, filter=q.filter)
            created.queues.append(q.name)


def _undo_bindings(sm: StorageManager, created: _Created) -> None:
    try:
        for name in reversed(created.queues):
            sm.delete_queue(name)
        for name in reversed(created.addresses):
            sm.delete_address(name)
    except StoreError as exc:
        log.error("the addresses and queues this import created could not all be deleted: %s", exc)


def import_xml(
    config: StoreConfig,
    path: str | os.PathLike[str],
    *,
    commit_interval: int = 1000,
    transactional: bool = False,
    on_progress: Progress | None = None,
    on_open: Callable[[int], None] | None = None,
) -> ImportResult:
    """Import the export file at ``path`` into the store ``config`` describes (opened, or
    created when it does not exist); see the module docstring. ``on_open(messages)`` is
    called once the file is checked and the store loaded, ``on_progress(imported, total)``
    after each message. Returns the :class:`ImportResult`. Raises ValueError for
    ``commit_interval`` < 1; StoreIOError when the file cannot be read and XmlFormatError
    (file, line, column) for a fault in it, both before any store is opened;
    StoreLockedError when another process holds the store; and what the store raises."""
    if (
        isinstance(commit_interval, bool)
        or not isinstance(commit_interval, int)
        or commit_interval < 1
    ):
        raise ValueError(f"commit_interval must be at least 1, not {commit_interval!r}")
    started = time.perf_counter()
    name = os.fspath(path)
    plan = scan(path)
    from store.store import open_store

    with StorageManager(open_store(config)) as sm:
        sm.load()
        routes = _bindings(sm, plan, name)
        if on_open is not None:
            on_open(plan.messages)
        created = _Created()
        tx: Transaction | None = None
        counts = [0, 0, 0]  # messages, large, body bytes
        try:
            _create_bindings(sm, plan, created)
            with _open_input(path) as stream:
                for item in read_document(stream, name, keep_bodies=True):
                    if not isinstance(item, XmlMessage):
                        continue
                    if tx is None:
                        tx = sm.begin()
                    _send(tx, item, routes, name)
                    counts[0] += 1
                    counts[1] += item.large
                    counts[2] += item.body_size
                    if not transactional and counts[0] % commit_interval == 0:
                        tx.commit()
                        tx = None
                    if on_progress is not None:
                        on_progress(counts[0], plan.messages)
            if tx is not None:
                tx.commit()
                tx = None
        except BaseException:
            if tx is not None:
                try:
                    tx.rollback()
                except StoreError as exc:
                    log.error("the import's open transaction could not be rolled back: %s", exc)
            if transactional:
                _undo_bindings(sm, created)
            raise
    return ImportResult(
        len(created.addresses),
        len(created.queues),
        counts[0],
        counts[1],
        counts[2],
        time.perf_counter() - started,
    )


def _send(tx: Transaction, item: XmlMessage, routes: dict[str, str], path: str) -> None:
    addresses = {routes[q] for q in item.queues}
    if len(addresses) != 1:
        raise XmlFormatError(
            path,
            item.line,
            item.column,
            f"message {item.exported_id} names queues of several addresses: "
            + ", ".join(sorted(addresses)),
        )
    assert item.body is not None
    with item.body:
        message = Message(
            addresses.pop(),
            item.body,
            priority=item.priority,
            expiration=item.expiration,
            timestamp=item.timestamp,
            scheduled_delivery=item.scheduled_delivery,
            properties=item.properties,
        )
        tx.send(message, queues=list(dict.fromkeys(item.queues)))
