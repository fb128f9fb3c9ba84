"""Large messages of the database store: rows of ``large-message-table-name``.

The table is the file table of :mod:`store.db.schema` (``id``, ``filename``, ``extension``,
``data``); the row layout (one row per chunk, then one descriptor row named ``<id>.msg``) and
the descriptor's bytes are documented there, beside the table definition. The descriptor's
``struct`` is :data:`DESCRIPTOR` below.

How a body is written (O(body size) in total on every database: each chunk is inserted once,
nothing is ever appended to a growing blob):

- every full chunk is inserted in a transaction of its own, begun and committed inside the
  ``write`` call that filled it, so no transaction stays open while the caller produces the
  next bytes (SQLite has one writer at a time: the journals' writer waits at most one chunk's
  insert, within its ``busy_timeout``). On PostgreSQL these commits are asynchronous
  (``synchronous_commit`` off for the transaction): the final commit is synchronous and makes
  every earlier one durable with it (WAL is flushed in order);
- the last chunk and the descriptor row go in one final transaction: the body appears
  (``ids()``, ``open``) exactly when that commits, and is durable then;
- an aborted body's chunk rows (and a descriptor row whose commit failed) are deleted at
  once; a body whose process died leaves chunk rows without a descriptor, deleted when the
  store next opens. ``delete`` removes the descriptor and every chunk row in one transaction.

Integrity (docs/large.md): every chunk's checksum covers the message id and the chunk's index
(descriptor version 2, :mod:`store.large.chunks`), so two chunk rows whose filenames were
swapped, or a row copied from another body, read as a CorruptionError rather than wrong
bytes; a version 1 descriptor (written before) marks a body whose chunks are checked as they
were written, by their bytes alone. A NULL, or a value of the wrong type (SQLite keeps what it
is given), in ``filename``, ``extension`` or ``data`` is a CorruptionError naming the table
and the row's ``id``, never a TypeError: at open for a row whose body cannot be told (a bad
``filename`` or ``extension``: the sweep of incomplete bodies cannot know whose it is, and
removes nothing it cannot prove incomplete), when the body is read for a bad ``data``.

Reading chunk ``k`` is one select by ``filename`` (indexed) on a connection taken from the
pool for that select. Database errors become :class:`~store.errors.StoreUnavailableError`
naming the table and the step (parameters never shown); nothing is retried. The HA fence, when
the store has one, runs first in every write transaction and its last check just before the
commit; a write that fails once the live lock is lost raises LockLostError.

Thread-safety: :class:`DatabaseLargeMessages` may be shared between threads (each
transaction takes its own pooled connection; one lock guards the set of bodies being
written); a writer or a reader belongs to one thread at a time.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import struct
import threading
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, BinaryIO, Final, NamedTuple, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from store.db.dialects import PG_ASYNC_COMMIT, SQLITE_BEGIN_WRITE, Compiled
from store.db.reconnects import reconnects
from store.db.writer import Fence, fence_before_commit, fenced_failure, is_outage
from store.errors import (
    CorruptionError,
    JournalClosedError,
    LostDataError,
    StoreError,
    StoreUnavailableError,
    UnknownRecordError,
)
from store.large.api import LargeMessageStore, LargeMessageWriter
from store.large.chunks import (
    CHUNK_SIZE,
    ChunkBuffer,
    ChunkedBody,
    Frame,
    FramePool,
    chunk_count,
    open_body,
    settle_allocator,
)
from store.large.db_probes import BodyProbes
from store.large.memory import check_message_id

__all__ = [
    "CHUNK_EXTENSION",
    "DESCRIPTOR",
    "DESCRIPTOR_CRC",
    "VERSION",
    "DatabaseLargeMessages",
    "Descriptor",
    "MSG_EXTENSION",
    "RowName",
    "chunk_name",
    "decode_descriptor",
    "encode_descriptor",
    "parse_row_name",
]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

MAGIC: Final = b"SLMD"
#: The descriptor version new bodies get (2: chunk checksums bind id and index); 1 is read.
VERSION: Final = 2
VERSIONS: Final = (1, 2)
#: magic, version, reserved, chunk_size, body_size, message_id, chunk_count
DESCRIPTOR: Final = struct.Struct("<4sHHIQqQ")
DESCRIPTOR_CRC: Final = struct.Struct("<I")
DESCRIPTOR_SIZE: Final = DESCRIPTOR.size + DESCRIPTOR_CRC.size
MSG_EXTENSION: Final = "msg"
CHUNK_EXTENSION: Final = "chunk"
_MYSQL_MAX_PACKET: Final = "SELECT @@max_allowed_packet"


def msg_name(message_id: int) -> str:
    """Returns the descriptor row's filename, ``<id>.msg``. Raises nothing."""
    return f"{message_id}.{MSG_EXTENSION}"


def chunk_name(message_id: int, index: int) -> str:
    """Returns chunk ``index``'s row filename, ``<id>.<index, 9 digits>.chunk``."""
    return f"{message_id}.{index:09d}.{CHUNK_EXTENSION}"


class Descriptor(NamedTuple):
    """What a valid descriptor says (:func:`decode_descriptor`). Immutable."""

    chunk_size: int
    body_size: int
    chunk_count: int
    version: int
    message_id: int

    @property
    def frame_key(self) -> int | None:
        """The message id a chunk's checksum covers (version 2), or None (version 1)."""
        return None if self.version == 1 else self.message_id


class RowName(NamedTuple):
    """A row's filename and extension, parsed (:func:`parse_row_name`). Immutable."""

    message_id: int
    extension: str  # MSG_EXTENSION or CHUNK_EXTENSION
    chunk: int  # the chunk's index; -1 for a descriptor


def encode_descriptor(
    message_id: int, chunk_size: int, body_size: int, *, version: int = VERSION
) -> bytes:
    """Returns the descriptor of a complete body (``version``: tests of an old format only).
    Raises struct.error for a bad field."""
    count = chunk_count(body_size, chunk_size)
    head = DESCRIPTOR.pack(MAGIC, version, 0, chunk_size, body_size, message_id, count)
    return head + DESCRIPTOR_CRC.pack(zlib.crc32(head))


def decode_descriptor(path: str, message_id: int, data: object) -> Descriptor:
    """Returns what a valid descriptor says. Raises CorruptionError (offset 0) naming what is
    wrong: a NULL or a value that is not bytes included."""
    if data is None:
        raise CorruptionError(path, 0, "descriptor row has a NULL data")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise CorruptionError(path, 0, f"descriptor data is a {type(data).__name__}, not bytes")
    data = bytes(data)
    if len(data) != DESCRIPTOR_SIZE:
        raise CorruptionError(path, 0, f"descriptor of {len(data)} bytes, not {DESCRIPTOR_SIZE}")
    magic, version, _reserved, chunk_size, body_size, stored_id, count = DESCRIPTOR.unpack_from(
        data
    )
    (crc,) = DESCRIPTOR_CRC.unpack_from(data, DESCRIPTOR.size)
    if magic != MAGIC or crc != zlib.crc32(data[: DESCRIPTOR.size]):
        raise CorruptionError(path, 0, "descriptor fails its magic or checksum")
    if version not in VERSIONS:
        raise CorruptionError(path, 0, f"unknown descriptor version {version}")
    if stored_id != message_id or chunk_size < 1 or count != chunk_count(body_size, chunk_size):
        raise CorruptionError(
            path, 0, f"descriptor names message {stored_id}, {count} chunks of {chunk_size}"
        )
    return Descriptor(chunk_size, body_size, count, version, message_id)


def parse_row_name(table: str, row_id: object, filename: object, extension: object) -> RowName:
    """Returns whose row this is: ``<id>.msg`` / ``msg`` or ``<id>.<k:09d>.chunk`` /
    ``chunk``, and nothing else. Raises CorruptionError (``path`` the table, ``offset`` the
    row's id) for a NULL, a value that is not a string, an unknown extension, a filename not
    of that form or not of that extension."""
    where = int(row_id) if isinstance(row_id, int) else -1

    def bad(reason: str) -> CorruptionError:
        return CorruptionError(
            table,
            where,
            f"row id {row_id}: {reason}",
            hint="not a row this store wrote; restore the table, or delete the row once its "
            "body is known to be gone",
        )

    if not isinstance(filename, str):
        raise bad("filename is NULL" if filename is None else f"filename is {filename!r}")
    if extension not in (MSG_EXTENSION, CHUNK_EXTENSION):
        raise bad("extension is NULL" if extension is None else f"extension is {extension!r}")
    parts = filename.split(".")
    try:
        if extension == MSG_EXTENSION and len(parts) == 2 and parts[1] == MSG_EXTENSION:
            mid = int(parts[0])
            if msg_name(mid) == filename:
                return RowName(mid, MSG_EXTENSION, -1)
        elif extension == CHUNK_EXTENSION and len(parts) == 3:
            mid, index = int(parts[0]), int(parts[1])
            if chunk_name(mid, index) == filename and index >= 0:
                return RowName(mid, CHUNK_EXTENSION, index)
    except ValueError:
        pass
    raise bad(f"filename {filename!r} is not a {extension} row's name")


def _var(name: str) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=sa.String(255))


class _LargeSQL:
    """The statements on one large-message table for one database (positional parameters).

    Thread-safety: immutable; methods run on the DBAPI connection they are given.
    """

    def __init__(self, table: sa.Table, dialect: Any) -> None:
        if not dialect.positional:
            dialect = type(dialect)(paramstyle="format")
        self.name: str = dialect.name
        self.dialect: Any = dialect
        #: Write transactions one at a time in this process. JDBC (Derby): concurrent inserts
        #: into the table's identity column failed now and then with SQLState 40XL1 ("A lock
        #: could not be obtained within the time requested") within seconds, well before any
        #: lock timeout: Derby allocates identity values in a nested transaction that does not
        #: wait. Embedded Derby serialises its log writes anyway.
        self.serial_writes: bool = self.name not in ("postgresql", "mysql", "mariadb", "sqlite")
        c = table.c
        values = {"filename": _var("f"), "extension": _var("e"), "data": sa.bindparam("d")}
        self.insert = Compiled(sa.insert(table).values(values).inline(), dialect, ("f", "e", "d"))
        by_name = c.filename == _var("f")
        self.data = Compiled(sa.select(c.id, c.data).where(by_name), dialect, ("f",))
        # A body's descriptor and its chunk 0 in one round trip (what ``open`` needs first).
        self.head = Compiled(
            sa.select(c.id, c.filename, c.data).where(c.filename.in_([_var("f"), _var("g")])),
            dialect,
            ("f", "g"),
        )
        self.exists = Compiled(sa.select(c.id).where(by_name), dialect, ("f",))
        self.names = Compiled(
            sa.select(c.id, c.filename, c.extension).where(c.extension == _var("e")),
            dialect,
            ("e",),
        )
        self.all_names = Compiled(sa.select(c.id, c.filename, c.extension), dialect, ())
        # Every body's descriptor (the messaging load checks the queued bodies' sizes).
        self.descriptors = Compiled(
            sa.select(c.id, c.filename, c.extension, c.data).where(c.extension == _var("e")),
            dialect,
            ("e",),
        )
        self.delete = Compiled(sa.delete(table).where(by_name), dialect, ("f",))

    def begin_write(self, conn: Any) -> None:
        """Start a write transaction (DB-API connections begin implicitly; the store's SQLite
        connections are in autocommit mode and take the write lock at once)."""
        if self.name == "sqlite":
            conn.execute(SQLITE_BEGIN_WRITE)

    def relax_commit(self, cursor: Any) -> None:
        """Make this transaction's commit asynchronous where a later synchronous commit makes
        it durable anyway (PostgreSQL); a no-op elsewhere."""
        if self.name == "postgresql":
            cursor.execute(PG_ASYNC_COMMIT)

    def read_cursor(self, conn: Any) -> Any:
        """A cursor that returns ``data`` as bytes the cheapest way (binary on PostgreSQL)."""
        if self.name == "postgresql":
            return conn.cursor(binary=True)
        return conn.cursor()

    def chunk_size(self, conn: Any) -> int:
        """The chunk size new bodies get: :data:`CHUNK_SIZE`, or less where the database's
        packet limit could not take a statement carrying it (MySQL/MariaDB escape bytes, up
        to twice their size). Raises driver errors."""
        if self.name not in ("mysql", "mariadb"):
            return CHUNK_SIZE
        cursor = conn.cursor()
        try:
            cursor.execute(_MYSQL_MAX_PACKET)
            (packet,) = cursor.fetchone()
        finally:
            cursor.close()
        size = CHUNK_SIZE
        while size > 4096 and 2 * size + 65536 > int(packet):
            size //= 2
        return size


class _DatabaseWriter(LargeMessageWriter):
    """Inserts one body's rows; see the module docstring. One thread at a time; ``abort``
    may come from :meth:`DatabaseLargeMessages.close` on another thread (a lock orders them)."""

    def __init__(self, owner: DatabaseLargeMessages, message_id: int, chunk_size: int) -> None:
        self.message_id = message_id
        self._owner = owner
        self._lock = threading.Lock()
        self._chunks = ChunkBuffer(chunk_size, self._emit, pool=owner.frames, message_id=message_id)
        self._done = False

    def _emit(self, index: int, frame: memoryview) -> None:
        row = (chunk_name(self.message_id, index), CHUNK_EXTENSION, bytes(frame))
        self._owner.write_rows("insert chunk", [row], final=False)

    def write(self, data: bytes | bytearray | memoryview) -> int:
        with self._lock:
            self._owner.check_open()
            if self._done:
                raise StoreError(f"large message {self.message_id}: writer already finished")
            return self._chunks.write(data)

    @property
    def size(self) -> int:
        return self._chunks.size

    def complete(self) -> None:
        with self._lock:
            if self._done:
                return
            self._owner.check_open()
            rows = []
            last = self._chunks.finish()
            if last is not None:
                name = chunk_name(self.message_id, self._chunks.index)
                rows.append((name, CHUNK_EXTENSION, bytes(last)))
            descriptor = encode_descriptor(
                self.message_id, self._chunks.chunk_size, self._chunks.size
            )
            rows.append((msg_name(self.message_id), MSG_EXTENSION, descriptor))
            self._owner.write_rows("complete body", rows, final=True)
            self._done = True
            self._chunks.release()
            self._owner.finished(self.message_id, self, clean=True, completed=True)

    def abort(self) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
            self._chunks.release()  # every frame was copied into its row (``_emit``)
            # Chunk ``index`` too: its insert may have failed at a commit the database applied.
            names = [chunk_name(self.message_id, k) for k in range(self._chunks.index + 1)]
            names.append(msg_name(self.message_id))
            clean = False
            try:
                self._owner.delete_rows("abort body", names)
                clean = True
            except StoreError as exc:  # the rows are removed at the next open
                _log.warning("large message %d: abort left rows: %s", self.message_id, exc)
            finally:
                self._owner.finished(self.message_id, self, clean=clean)


class DatabaseLargeMessages(LargeMessageStore):
    """Bodies as rows of ``table`` on ``engine`` (see module docstring).

    Opening removes the rows of bodies that never completed; ``read_only`` (the offline tools)
    opens without reading or removing anything, and then ``create`` and ``delete`` raise
    StoreError. ``fence`` runs first in every write transaction (the HA lease check). Raises
    StoreUnavailableError when the database cannot be used.
    """

    def __init__(
        self,
        engine: Engine,
        table: sa.Table,
        *,
        fence: Fence | None = None,
        read_only: bool = False,
    ) -> None:
        self.engine = engine
        self.table = table
        self._sql = _LargeSQL(table, engine.dialect)
        self._fence = fence
        self._lock = threading.Lock()
        # Held around each write transaction where the database needs them one at a time.
        self._write_lock = threading.Lock()
        self._writers: dict[int, _DatabaseWriter] = {}
        #: Frame buffers reused from one body to the next (:class:`FramePool`).
        self.frames = FramePool()
        settle_allocator()  # the driver's chunk rows from the heap, not an mmap each
        # Ids whose abort could not delete their rows: refused by create until reopened.
        self._dirty: set[int] = set()
        # Ids of the complete bodies (descriptor rows), read at open and kept up to date by
        # complete() and delete(): this process holds the store lock, so no one else adds or
        # removes bodies, and create() need not ask the database (one round trip per body).
        self._complete: set[int] = set()
        self._closed = False
        #: what the first write after an outage checks the database still holds
        self._probes = BodyProbes(reconnects(engine), table.name, self._sql.exists, msg_name)
        self.read_only = read_only
        self.chunk_size: int = CHUNK_SIZE
        if not read_only:
            self.chunk_size = self._run("read settings", self._sql.chunk_size)
            self._remove_incomplete()

    # -- transactions --------------------------------------------------------------------------

    def _run(self, step: str, work: Callable[[Any], _T], *, write: bool = False) -> _T:
        """Run ``work(conn)`` on a pooled DBAPI connection, in a committed transaction when
        ``write``. Returns what ``work`` returns. Raises StoreUnavailableError for a database
        error (after rolling back), or the StoreError ``work`` or the fence raised."""
        with self._write_lock if write and self._sql.serial_writes else contextlib.nullcontext():
            return self._run_unlocked(step, work, write=write)

    def _run_unlocked(self, step: str, work: Callable[[Any], _T], *, write: bool) -> _T:
        conn = None
        try:
            if write and self._probes.lost is not None:
                raise copy.copy(self._probes.lost)
            conn = self.engine.raw_connection()
            if write:
                self._sql.begin_write(conn)
                if self._fence is not None:
                    self._fence(conn)
                if self._probes.due():  # after an outage (store.large.db_probes)
                    self._probes.check(conn)
            result = work(conn)
            if write:
                if self._fence is not None:
                    fence_before_commit(self._fence, conn)
                conn.commit()
            return result
        except StoreError:
            _rollback_quietly(conn)
            raise
        except Exception as exc:
            _rollback_quietly(conn)
            if is_outage(exc):
                self._probes.outage()
            lost = fenced_failure(self._fence) if write else None
            if lost is not None:
                raise lost from exc
            raise StoreUnavailableError(
                f"large messages: database {'write' if write else 'read'} on table "
                f"{self.table.name} failed at {step!r}: {type(exc).__name__}: {_first_line(exc)}",
                hint="nothing was retried; a body being written is aborted",
            ) from exc
        finally:
            if conn is not None:
                conn.close()

    def write_rows(self, step: str, rows: Sequence[tuple[str, str, bytes]], *, final: bool) -> None:
        """Insert ``rows`` (filename, extension, data) in one transaction, committed
        synchronously when ``final``. Raises as :meth:`_run`."""

        def work(conn: Any) -> None:
            cursor = conn.cursor()
            try:
                if not final:
                    self._sql.relax_commit(cursor)
                if len(rows) == 1:
                    cursor.execute(self._sql.insert.sql, rows[0])
                else:  # one round trip where the driver can (psycopg pipelines, PyMySQL
                    # sends one multi-row INSERT)
                    cursor.executemany(self._sql.insert.sql, list(rows))
            finally:
                cursor.close()

        self._run(step, work, write=True)

    def delete_rows(self, step: str, names: Sequence[str], *, first: str | None = None) -> None:
        """Delete the rows named ``first`` and ``names`` in one transaction. ``first`` must
        exist: when it does not, nothing is deleted and UnknownRecordError is raised. Raises
        as :meth:`_run` otherwise."""

        def work(conn: Any) -> None:
            cursor = conn.cursor()
            try:
                if first is not None:
                    cursor.execute(self._sql.delete.sql, (first,))
                    if cursor.rowcount == 0:
                        raise UnknownRecordError(f"{first} is not in table {self.table.name}")
                if names:
                    cursor.executemany(self._sql.delete.sql, [(n,) for n in names])
            finally:
                cursor.close()

        self._run(step, work, write=True)

    def _rows(self, step: str, query: Compiled, params: tuple[str, ...]) -> list[Any]:
        def work(conn: Any) -> list[Any]:
            binary = query in (self._sql.data, self._sql.head, self._sql.descriptors)
            cursor = self._sql.read_cursor(conn) if binary else conn.cursor()
            try:
                cursor.execute(query.sql, params)
                return list(cursor.fetchall())
            finally:
                cursor.close()

        return self._run(step, work)

    def _names(self, step: str, extension: str | None) -> list[RowName]:
        """Every row of ``extension`` (None: every row), parsed. Raises CorruptionError naming
        the first row whose filename or extension is NULL or not ours, and as :meth:`_run`."""
        if extension is None:
            rows = self._rows(step, self._sql.all_names, ())
        else:
            rows = self._rows(step, self._sql.names, (extension,))
        return [parse_row_name(self.table.name, *row) for row in rows]

    def check_rows(self) -> None:
        """What opening checks, for a store opened ``read_only`` (store.opening.read_only):
        every row's name is parsed, and one whose owner cannot be told raises CorruptionError
        naming it; nothing is removed. Raises StoreUnavailableError."""
        self._incomplete()

    def _incomplete(self) -> dict[int, list[str]]:
        """Parse every row (CorruptionError for one whose owner cannot be told), note the
        complete bodies; returns the chunk names of bodies without a descriptor, by id."""
        rows = self._names("list rows", None)
        complete = {r.message_id for r in rows if r.extension == MSG_EXTENSION}
        self._complete = complete
        orphans: dict[int, list[str]] = {}
        for r in rows:
            if r.extension == CHUNK_EXTENSION and r.message_id not in complete:
                orphans.setdefault(r.message_id, []).append(chunk_name(r.message_id, r.chunk))
        return orphans

    def _remove_incomplete(self) -> None:
        """Delete the chunk rows of bodies without a descriptor (a writer that died). Every
        row is parsed first: one whose owner cannot be told stops the open (CorruptionError,
        module docstring) before anything is deleted."""
        orphans = self._incomplete()
        for names in orphans.values():
            self.delete_rows("remove incomplete body", names)
        if orphans:
            _log.info(
                "large messages: removed %d incomplete bodies from table %s",
                len(orphans),
                self.table.name,
            )

    # -- the contract --------------------------------------------------------------------------

    def check_open(self) -> None:
        """Raises JournalClosedError after close; returns None otherwise."""
        if self._closed:
            raise JournalClosedError("the large-message store is closed")

    def finished(
        self, message_id: int, writer: _DatabaseWriter, *, clean: bool, completed: bool = False
    ) -> None:
        """Forget the writer of ``message_id``; ``clean`` False keeps the id refused until
        the store is reopened (its rows may remain); ``completed`` records a complete body.
        Raises nothing."""
        with self._lock:
            if self._writers.get(message_id) is writer:
                del self._writers[message_id]
            if not clean:
                self._dirty.add(message_id)
            if completed:
                self._complete.add(message_id)
        if completed:
            self._probes.completed(message_id)

    def _check_writable(self) -> None:
        if self.read_only:
            raise StoreError(f"large messages in table {self.table.name}: opened read-only")

    def path(self, message_id: int) -> str:
        """Returns how errors name a body: ``<table>/<id>.msg``. Raises nothing."""
        return f"{self.table.name}/{msg_name(message_id)}"

    def create(self, message_id: int) -> LargeMessageWriter:
        check_message_id(message_id)
        with self._lock:
            self.check_open()
            self._check_writable()
            if message_id in self._writers or message_id in self._dirty:
                raise StoreError(f"large message {message_id} already has a body being written")
            if message_id in self._complete:
                raise StoreError(f"large message {message_id} already has a body")
            writer = _DatabaseWriter(self, message_id, self.chunk_size)
            self._writers[message_id] = writer
        return writer

    def _descriptor(self, message_id: int) -> Descriptor:
        check_message_id(message_id)
        self.check_open()
        found = self._rows("read descriptor", self._sql.data, (msg_name(message_id),))
        return self._decode(message_id, found)

    def _decode(self, message_id: int, found: list[Any]) -> Descriptor:
        """The descriptor of ``found`` (its rows as (id, data)). Raises UnknownRecordError for
        none, CorruptionError for several or a bad one (naming its row id)."""
        if not found:
            raise UnknownRecordError(f"large message {message_id} has no complete body")
        path = self.path(message_id)
        if len(found) > 1:
            raise CorruptionError(path, 0, f"{len(found)} descriptor rows")
        row_id, data = found[0]
        try:
            return decode_descriptor(path, message_id, data)
        except CorruptionError as exc:
            raise CorruptionError(path, 0, f"row id {row_id}: {exc.reason}") from None

    def _fetch(self, message_id: int, index: int, chunk_size: int) -> Frame:
        self.check_open()
        found = self._rows("read chunk", self._sql.data, (chunk_name(message_id, index),))
        if len(found) == 1:
            return self._frame(message_id, index, chunk_size, found[0])
        path = self.path(message_id)
        if not found and not self._rows("check body", self._sql.exists, (msg_name(message_id),)):
            raise UnknownRecordError(f"large message {message_id} was deleted while being read")
        if not found:  # its descriptor is there, a chunk's row is gone
            raise LostDataError(path, index * chunk_size, f"the row of chunk {index} is gone")
        raise CorruptionError(path, index * chunk_size, f"{len(found)} rows for chunk {index}")

    def _frame(self, message_id: int, index: int, chunk_size: int, row: Any) -> Frame:
        """The frame in chunk row ``row`` (id, data). Raises CorruptionError at the chunk's
        body offset, naming the row, for a NULL or a value that is not bytes."""
        row_id, data = row
        if isinstance(data, bytes | bytearray | memoryview):
            return data
        what = "NULL" if data is None else f"a {type(data).__name__}, not bytes"
        raise CorruptionError(
            self.path(message_id),
            index * chunk_size,
            f"chunk {index} (row id {row_id}): data is {what}",
            hint="the body is damaged; delete it or restore it from a backup",
        )

    def open(self, message_id: int) -> BinaryIO:
        check_message_id(message_id)
        self.check_open()
        descriptor, first = msg_name(message_id), chunk_name(message_id, 0)
        rows = self._rows("read descriptor", self._sql.head, (descriptor, first))
        found = self._decode(
            message_id, [(rid, data) for rid, name, data in rows if name == descriptor]
        )
        chunk_size = found.chunk_size
        # Chunk 0 came with the descriptor: the reader's first fetch takes it (once).
        ahead = [(rid, data) for rid, name, data in rows if name == first]
        if len(ahead) != 1:
            ahead = []  # none, or duplicates that the fetch reports as corruption

        def fetch(index: int) -> Frame:
            if index == 0 and ahead:
                return self._frame(message_id, 0, chunk_size, ahead.pop())
            return self._fetch(message_id, index, chunk_size)

        raw = ChunkedBody(
            path=self.path(message_id),
            size=found.body_size,
            chunk_size=chunk_size,
            fetch=fetch,
            message_id=found.frame_key,
        )
        return open_body(raw)

    def size(self, message_id: int) -> int:
        return self._descriptor(message_id).body_size

    def sizes(self, message_ids: Iterable[int]) -> dict[int, int]:
        """As the base class, in one query over every descriptor row. Raises CorruptionError
        for a damaged descriptor of a wanted body or a row name that is not ours, and
        StoreUnavailableError."""
        self.check_open()
        wanted = set(message_ids)
        rows = self._rows("read descriptors", self._sql.descriptors, (MSG_EXTENSION,))
        found: dict[int, list[tuple[Any, Any]]] = {}
        for row_id, filename, extension, data in rows:
            owner = parse_row_name(self.table.name, row_id, filename, extension).message_id
            if owner in wanted:
                found.setdefault(owner, []).append((row_id, data))
        return {mid: self._decode(mid, held).body_size for mid, held in sorted(found.items())}

    def delete(self, message_id: int) -> None:
        check_message_id(message_id)
        self.check_open()
        self._check_writable()
        try:
            count = self._descriptor(message_id).chunk_count
            names = [chunk_name(message_id, k) for k in range(count)]
        except CorruptionError:  # the descriptor cannot say how many: find the chunk rows
            names = []
            for row in self._rows("list chunks", self._sql.names, (CHUNK_EXTENSION,)):
                try:
                    r = parse_row_name(self.table.name, *row)
                except CorruptionError:
                    continue  # not this body's (whose it is, nobody can tell)
                if r.message_id == message_id:
                    names.append(chunk_name(message_id, r.chunk))
        # The descriptor goes first: a concurrent delete of the same body finds it gone.
        self._probes.deleting(message_id)
        try:
            self.delete_rows("delete body", names, first=msg_name(message_id))
        except UnknownRecordError:
            self._probes.deleted(message_id, confirmed=False)
            with self._lock:
                self._complete.discard(message_id)
            raise UnknownRecordError(f"large message {message_id} has no complete body") from None
        except BaseException:
            self._probes.deleted(message_id, confirmed=False)  # its answer may be lost
            raise
        self._probes.deleted(message_id, confirmed=True)
        with self._lock:
            self._complete.discard(message_id)

    def ids(self) -> list[int]:
        """Ids of complete bodies, ascending. Raises CorruptionError for a descriptor row
        whose filename is NULL or not ours, and StoreUnavailableError."""
        self.check_open()
        return sorted(r.message_id for r in self._names("list bodies", MSG_EXTENSION))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            writers = list(self._writers.values())
        for writer in writers:
            writer.abort()

    def __repr__(self) -> str:
        return f"DatabaseLargeMessages({self.table.name!r}, closed={self._closed})"


def _rollback_quietly(conn: Any) -> None:
    if conn is None:
        return
    try:
        conn.rollback()
    except Exception as exc:  # the connection is discarded by the pool anyway
        _log.debug("large messages: rollback failed: %s", exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""
