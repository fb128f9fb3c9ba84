"""``store data imp``: Artemis's XML export (reference §6, docs/cli.md) into a store, through
:class:`~store.messaging.StorageManager`.

:func:`import_xml` works in two streaming passes over the file, with bounded memory
(:mod:`store.data.xml.document`; bodies are decoded piece by piece into temporary files):

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

A message keeps its body, properties (exactly: none added, each with its Java type;
``_AMQ_SCHED_DELIVERY`` becomes ``scheduled_delivery``), priority, expiration, timestamp, type
and user id (``Message.message_type``, ``user_id``, ``property_types``), so that its export
is what the file said. Bodies arrive decoded in
temporary files (:mod:`store.data.xml.document`, which also says how ``type="text"`` bodies
are read) and are sent as streams, so the storage manager puts one over
``min-large-message-size`` in the large-message store without ever holding it whole;
``isLarge`` only says how the exporter wrote it.

An address with empty ``routing-types`` gets the routing types of its queues in the file
(ANYCAST when it has none): the store needs at least one. A message's ``id`` is dropped (new
ids are assigned).

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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

from store.config import StoreConfig
from store.data.xml.document import AddressBinding, Item, QueueBinding, XmlMessage, read_document
from store.data.xml.reader import XmlFormatError
from store.errors import StoreError, StoreIOError
from store.messaging import Message, StorageManager, Transaction
from store.messaging.values import ANYCAST

__all__ = ["ImportResult", "Plan", "import_xml", "scan"]

log = logging.getLogger(__name__)

#: ``on_progress(messages imported, messages in the file)``.
Progress = Callable[[int, int], None]


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


# -- the check pass ---------------------------------------------------------------------------


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

    # The file's timestamps are kept exactly, 0 included (no send time stamped over them).
    with StorageManager(open_store(config), stamp_timestamps=False) as sm:
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
            message_type=item.type,
            user_id=item.user_id,
            property_types=item.property_types,
        )
        tx.send(message, queues=list(dict.fromkeys(item.queues)))
