"""``store data exp``: a store's addresses, queues and messages as Artemis's XML export
(reference §6, docs/cli.md; the format in :mod:`store.data.xml.format`).

:func:`export_xml` opens the store its configuration describes (file or database), taking the
store's lock (a store a live process holds is refused: StoreLockedError naming the holder),
loads it through :class:`~store.messaging.StorageManager` and writes:

- every address (``sm.addresses()``, by name) and every queue (``sm.queues()``, by name), with
  the store's own ids; a queue without a filter has ``filter-string=""``;
- every message still routed to a queue (``sm.browse()``: not acknowledged; paged ones and
  ones held by a prepared transaction included), once, in message id order, with the names
  of the queues that still hold it. Non-durable messages are never stored, so never exported.

Message attributes: ``id`` (the store's message id), ``priority``, ``expiration``,
``timestamp``, ``type`` (``Message.message_type``: ``default`` unless the message came from
Artemis), and ``user-id`` when the message has one. Properties in the message's own order,
each with its Java type (``Message.property_types``, else the type its value implies; values
spelt as Java's ``toString`` spells them: :mod:`store.data.xml.format`), then a non-zero
``scheduled_delivery`` as ``_AMQ_SCHED_DELIVERY`` (``long``). The body is URL-safe base64
with padding in one CDATA section on its own line; a large body (``isLarge="true"``) is a
series of CDATA sections, each the base64 of 1000 raw bytes, read from
``message.open_body()`` a megabyte at a time, so memory stays bounded whatever its size.

The bytes are Artemis's (``XmlDataExporter`` since 2.6 with its ``PrettyPrintHandler``, on a
system whose line separator is ``\n``): no XML declaration; every element and CDATA section
on a line of its own, preceded by the newline and three spaces per level (so the document
starts with a newline and ends with ``</activemq-journal>``, no newline after it); empty
elements as ``<name …/>``; attributes in Artemis's order, their values escaping ``& < > "``.
One deliberate difference: we also escape tab, newline and carriage return in attribute
values (``&#9;`` …), which Artemis writes raw and every XML reader then turns into spaces. A
name or value holding a character XML 1.0 cannot carry (U+0000 and the other C0 controls but
tab, newline, carriage return) is refused with an error naming it (Artemis writes it and
its file does not parse). Two orders are ours: messages by id (Artemis: the journal's by
id, then the paged ones by page) and properties as the message holds them (Artemis: its hash
map's order, with ``_AMQ_SCHED_DELIVERY`` among them); an import keeps the file's order, so a
file Artemis wrote comes back out in its order.

Read-only: the store is opened with ``open_store(config, read_only=True)``
(:mod:`store.opening.read_only`), so a file store is left byte for byte and a database store
row for row as they were: what a normal load would sweep (large bodies without a message,
messages without a queue, stale cursor records) is left out of the export but stays in the
store, a torn tail is not zeroed, and nothing is recorded at close. A writer or a live HA node
on the store refuses the export (StoreLockedError), and one cannot start while it runs. It
never creates a store: a file store's journal directories must hold journals, a database must
hold the store's schema.

Output: :func:`export_xml` writes to a binary stream, or to a file path through a temporary
file beside it that replaces the file only once the export is complete (a failed export
leaves an existing file as it was); the temporary file is created before the store is opened,
so an output that cannot be written fails first.

Thread-safety: one call works alone on its store; the store's lock keeps others out.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

from store.config import StoreConfig
from store.data.xml import format as f
from store.errors import ConfigError, CorruptionError, StoreError, StoreIOError
from store.messaging import Message, StorageManager

__all__ = ["ExportResult", "export_xml", "open_output", "write_xml"]

_INDENT: Final = "   "
#: Raw bytes read from a large body at a time: a whole number of CDATA chunks.
_READ: Final = f.BODY_CHUNK * 1024
_NOT_XML: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_ESCAPES: Final = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        '"': "&quot;",
        "\t": "&#9;",
        "\n": "&#10;",
        "\r": "&#13;",
    }
)

#: ``on_progress(messages written, messages the store holds)``.
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What :func:`export_xml` wrote. Immutable."""

    addresses: int
    queues: int
    messages: int
    large_messages: int
    body_bytes: int
    seconds: float
    #: With ``skip_damaged``: what was left out, one line each (file or table, offset, what
    #: is wrong); empty otherwise.
    skipped: tuple[str, ...] = ()


def _attr(value: str, what: str) -> str:
    bad = _NOT_XML.search(value)
    if bad:
        raise StoreError(
            f"{what} holds the character U+{ord(bad.group()):04X}, which XML 1.0 cannot carry"
        )
    return value.translate(_ESCAPES)


def _attrs(what: str, pairs: list[tuple[str, str]]) -> str:
    return " ".join(f'{name}="{_attr(value, f"{what} {name}")}"' for name, value in pairs)


class _Writer:
    """Writes the document to a binary stream, counting what it wrote."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self.messages = 0
        self.large = 0
        self.body_bytes = 0

    def line(self, depth: int, text: str) -> None:
        """Write ``text`` on a line of its own at ``depth`` (Artemis's layout: the newline
        comes before each line, none after the last)."""
        self._out.write(f"\n{_INDENT * depth}{text}".encode())

    def message(self, message: Message, queues: tuple[str, ...]) -> None:
        mid = message.message_id
        what = f"message {mid}"
        pairs = [
            ("id", str(mid)),
            ("priority", str(message.priority)),
            ("expiration", str(message.expiration)),
            ("timestamp", str(message.timestamp)),
            ("type", message.message_type),
        ]
        if message.user_id is not None:
            pairs.append((f.USER_ID, message.user_id))
        lines = [f"{_INDENT * 2}<message {_attrs(what, pairs)}>", f"{_INDENT * 3}<properties>"]
        types = message.property_types
        for name, value in message.properties.items():
            lines.append(self._property(what, name, *f.encode_property(value, types.get(name))))
        if message.scheduled_delivery:
            text, kind = f.encode_property(message.scheduled_delivery)
            lines.append(self._property(what, f.SCHEDULED_DELIVERY, text, kind))
        lines.append(f"{_INDENT * 3}</properties>")
        lines.append(f"{_INDENT * 3}<queues>")
        for name in queues:
            lines.append(f'{_INDENT * 4}<queue name="{_attr(name, f"{what} queue")}"/>')
        lines.append(f"{_INDENT * 3}</queues>")
        self._out.write(("\n" + "\n".join(lines)).encode())
        if message.is_large:
            self._large_body(message)
        else:
            assert isinstance(message.body, bytes)
            self.line(3, "<body>")
            self.line(4, f"<![CDATA[{f.encode_b64(message.body)}]]>")
            self.body_bytes += len(message.body)
            self.line(3, "</body>")
        self.line(2, "</message>")
        self.messages += 1

    @staticmethod
    def _property(what: str, name: str, text: str, kind: str) -> str:
        pairs = [("name", name), ("value", text), ("type", kind)]
        return f"{_INDENT * 4}<property {_attrs(f'{what} property', pairs)}/>"

    def _large_body(self, message: Message) -> None:
        self.line(3, f'<body {f.IS_LARGE}="true">')
        prefix = f"\n{_INDENT * 4}<![CDATA["
        with message.open_body() as body:
            for block in _blocks(body):
                view = memoryview(block)
                text = "".join(
                    f"{prefix}{f.encode_b64(view[i : i + f.BODY_CHUNK])}]]>"
                    for i in range(0, len(block), f.BODY_CHUNK)
                )
                self._out.write(text.encode("ascii"))
                self.body_bytes += len(block)
        self.line(3, "</body>")
        self.large += 1


def _blocks(body: BinaryIO) -> Iterator[bytes]:
    """``body`` in blocks of :data:`_READ` bytes (the last one shorter)."""
    while True:
        parts, size = [], 0
        while size < _READ:
            chunk = body.read(_READ - size)
            if not chunk:
                break
            parts.append(bytes(chunk))
            size += len(chunk)
        if parts:
            yield b"".join(parts)
        if size < _READ:
            return


def write_xml(
    sm: StorageManager,
    out: BinaryIO,
    *,
    total: int = 0,
    on_progress: Progress | None = None,
    skip_damaged: bool = False,
) -> ExportResult:
    """Write the export document of loaded storage manager ``sm`` to ``out`` (see the module
    docstring); ``on_progress(written, total)`` is called after each message.
    ``skip_damaged``: a large message whose body cannot be read whole is left out (its body
    is read through once before anything of it is written) and listed, with what ``sm``'s
    load and browse skipped, in the result's ``skipped``. Returns the
    :class:`ExportResult`. Raises StoreError for a name or value XML cannot carry, and what
    the store and ``out`` raise (CorruptionError for damage, without ``skip_damaged``)."""
    started = time.perf_counter()
    w = _Writer(out)
    w.line(0, f"<{f.ROOT}>")
    w.line(1, f"<{f.BINDINGS}>")
    addresses = sm.addresses()
    for a in addresses:
        pairs = [
            ("routing-types", ",".join(a.routing_types)),
            ("name", a.name),
            ("id", str(sm.address_id(a.name))),
        ]
        w.line(2, f"<{f.ADDRESS_BINDING} {_attrs(f'address {a.name!r}', pairs)}/>")
    queues = sm.queues()
    for q in queues:
        pairs = [
            ("address", q.address),
            ("filter-string", q.filter or ""),
            ("name", q.name),
            ("id", str(q.id)),
            ("routing-type", q.routing_type),
        ]
        w.line(2, f"<{f.QUEUE_BINDING} {_attrs(f'queue {q.name!r}', pairs)}/>")
    w.line(1, f"</{f.BINDINGS}>")
    w.line(1, f"<{f.MESSAGES}>")
    skipped: list[str] = []
    for message, names in sm.browse():
        if skip_damaged and message.is_large:
            try:
                _read_through(message)
            except CorruptionError as exc:
                skipped.append(f"{exc} (message {message.message_id} left out)")
                continue
        w.message(message, names)
        if on_progress is not None:
            on_progress(w.messages, max(total, w.messages))
    w.line(1, f"</{f.MESSAGES}>")
    w.line(0, f"</{f.ROOT}>")
    return ExportResult(
        len(addresses),
        len(queues),
        w.messages,
        w.large,
        w.body_bytes,
        time.perf_counter() - started,
        (*sm.skipped, *skipped),
    )


def _read_through(message: Message) -> None:
    """Read a large body to its end (every chunk checked), holding one block at a time.
    Raises CorruptionError (LostDataError for a body gone) naming it."""
    with message.open_body() as body:
        while body.read(1 << 20):
            pass


def require_store(config: StoreConfig) -> StoreConfig:
    """Check that ``config`` names an existing store (file: both journal directories hold a
    journal; database: its schema exists) before anything opens it; returns the
    configuration to open it with (directory creation off). Raises ConfigError naming the
    directory or tables, StoreUnavailableError when a database cannot be reached."""
    if config.store_type == "file":
        from store.file import file_journal_options
        from store.file.survey import require_journal

        bindings, messages = file_journal_options(config, lock=False)
        for opts in (messages, bindings):  # the message journal first: --journal names it
            require_journal(opts.directory, prefix=opts.prefix, fs=opts.fs)
        return config.replace(create_journal_dir=False, create_bindings_dir=False)
    if config.store_type == "database":
        from store.db import migrate
        from store.db.urls import resolve_target

        db = config.database_store
        assert db is not None
        path = resolve_target(db).sqlite_path
        # An SQLite file that does not exist holds no store; connecting would create it.
        missing = path is not None and not os.path.exists(path)
        if missing or migrate.current(config).current is None:
            raise ConfigError(
                f"no store in the database: its schema (tables {db.bindings_table_name}, "
                f"{db.message_table_name}, …) does not exist",
                key="jdbc-connection-url",
                allowed="a database that holds a store",
            )
    return config


@contextlib.contextmanager
def open_output(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A temporary file beside ``path`` to write an export into; it replaces ``path`` when
    the block exits normally and is removed when it raises. Yields the open binary file.
    Raises ConfigError naming ``path`` when the file cannot be created (a folder that does
    not exist or may not be written: the caller's input, which trying again does not fix;
    ``store data exp`` exits 2, not 4), StoreIOError naming it when writing or renaming it
    fails."""
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or "."
        )
    except OSError as exc:
        raise ConfigError(
            f"cannot write {target}: {exc.strerror or exc}",
            key="output",
            value=str(target),
            allowed="a file in a folder this user may write",
        ) from exc
    try:
        with os.fdopen(fd, "wb", buffering=1 << 20) as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise StoreIOError(
                f"cannot write {target}: {exc.strerror or exc}", path=str(target)
            ) from exc
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def export_xml(
    config: StoreConfig,
    output: BinaryIO | str | os.PathLike[str],
    *,
    on_progress: Progress | None = None,
    on_open: Callable[[], None] | None = None,
    skip_damaged: bool = False,
) -> ExportResult:
    """Export the store ``config`` describes to ``output`` (a binary stream, or a file path
    written through :func:`open_output`); see the module docstring. ``on_open()`` is called
    once the store is loaded (a progress display starts then), ``on_progress(written,
    total)`` after each message. ``skip_damaged`` exports everything readable and lists what
    it left out (large messages whose bodies are damaged or gone, damaged page records; see
    ``StorageManager.load``), instead of failing at the first damage. Returns the
    :class:`ExportResult`. Raises ConfigError when
    there is no store or the output file cannot be created (before the store is opened),
    StoreIOError when writing it fails, StoreLockedError when another process holds the
    store, and what loading and reading the store raise."""
    config = require_store(config)
    if isinstance(output, (str, os.PathLike)):
        with open_output(output) as out:
            return _export(config, out, on_progress, on_open, skip_damaged)
    return _export(config, output, on_progress, on_open, skip_damaged)


def _export(
    config: StoreConfig,
    out: BinaryIO,
    on_progress: Progress | None,
    on_open: Callable[[], None] | None,
    skip_damaged: bool,
) -> ExportResult:
    from store.store import open_store

    with StorageManager(open_store(config, read_only=True)) as sm:
        rec = sm.load(skip_damaged=skip_damaged)
        if on_open is not None:
            on_open()
        return write_xml(
            sm, out, total=rec.messages, on_progress=on_progress, skip_damaged=skip_damaged
        )
