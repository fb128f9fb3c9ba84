"""Page stores in database tables (DESIGN §7.2, reference §4.8, §4.9).

The tables and rows are documented beside their definition (:mod:`store.db.schema`, "Page
tables"): a directory row ``directory.txt`` in ``page-store-table-name`` lists the suffixes of
the address tables ``<page-store-table-name><suffix>``; each holds ``address.txt`` and one row
per flushed batch of a page, so an append is an ``INSERT`` of the batch's records (never a
rewrite of a growing blob) and ``read_page`` is one indexed select.

Crash order:

- a new store: create its table (with its index), insert ``address.txt``, then add the suffix
  to the directory in one transaction. A table of the prefix that the directory does not list
  is a leftover of a crash and is dropped at open. A new suffix is the next integer after the
  largest in the directory and among the existing tables (before leftovers are dropped), so a
  half-made table's name is never reused while it may exist; the name must fit the
  database's identifier limit (``ConfigError`` otherwise);
- removing a store: rewrite the directory without it, then drop its table (a crash between
  leaves a leftover table, dropped at the next open).

Each flush is one transaction holding the batches of every address. A database commits
atomically, so a page has no torn tail: any damage is a ``CorruptionError`` whose ``path`` is
the table and whose message names the page. Database errors become
:class:`~store.errors.StoreUnavailableError` (statement kind and table named, parameters never
shown); nothing is retried. The engine is the journals' (``DatabaseJournals.engine``); on
SQLite every write transaction starts with ``BEGIN IMMEDIATE`` and is kept short (SQLite has
one writer at a time; the engine's busy timeout is ``jdbc-network-timeout``).

Thread-safety: see :class:`~store.paging.base.PageBackend`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Hashable, Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from store.db.dialects import SQLITE_WRITE_LOCK_OPTION
from store.db.schema import StoreSchema
from store.db.writer import Fence, fence_before_commit, fenced_failure
from store.errors import StoreError, StoreUnavailableError
from store.paging.base import GroupCommitPagingManager, PageBackend
from store.paging.flusher import WriteBatch
from store.paging.format import page_file_name, page_number_of

__all__ = [
    "ADDRESS_ROW",
    "DIRECTORY_ROW",
    "DatabasePageBackend",
    "DatabasePagingManager",
    "decode_directory",
    "encode_directory",
]

_log = logging.getLogger(__name__)

DIRECTORY_ROW = "directory.txt"
ADDRESS_ROW = "address.txt"
_PAGE_EXTENSION = "page"


def encode_directory(suffixes: set[int]) -> bytes:
    """The data of the directory row: each suffix in decimal ASCII followed by ``\\n``,
    ascending. Raises nothing."""
    return b"".join(f"{s}\n".encode("ascii") for s in sorted(suffixes))


def decode_directory(data: bytes) -> set[int]:
    """The suffixes a directory row lists. Raises ValueError for a line that is not a
    non-negative decimal integer."""
    out: set[int] = set()
    for line in data.decode("ascii").splitlines():
        if line.strip():
            if not line.strip().isdigit():
                raise ValueError(f"not a page table suffix: {line!r}")
            out.add(int(line))
    return out


class _Table:
    """One address's page table."""

    __slots__ = ("suffix", "table")

    def __init__(self, suffix: int, table: sa.Table) -> None:
        self.suffix = suffix
        self.table = table


def _table(locator: Hashable) -> _Table:
    assert isinstance(locator, _Table)
    return locator


class DatabasePageBackend(PageBackend):
    """Pages in tables of ``schema`` through ``engine`` (module docstring); pages are capped
    at ``max_page_size`` bytes (``jdbc-max-page-size-bytes``); ``where`` names the database in
    messages."""

    torn_tails = False

    def __init__(
        self,
        engine: Engine,
        schema: StoreSchema,
        *,
        max_page_size: int,
        where: str,
        fence: Fence | None = None,
    ) -> None:
        self.engine = engine
        self.fence = fence
        self.schema = schema
        self.max_page_size = max_page_size
        self.where = where
        self.directory = schema.page_store
        self._suffixes: set[int] = set()
        self._largest = 0

    def describe(self) -> str:
        return f"{self.where} table {self.directory.name}"

    @contextlib.contextmanager
    def _errors(self, what: str, table: str) -> Iterator[None]:
        try:
            yield
        except StoreError:
            raise
        except (sa.exc.SQLAlchemyError, OSError) as exc:
            lost = fenced_failure(self.fence)
            if lost is not None:
                raise lost from exc
            text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
            raise StoreUnavailableError(
                f"paging: {what} on table {table} of {self.where} failed: "
                f"{type(exc).__name__}: {text[0][:300] if text else ''}",
                hint="paging refuses writes until the store is reopened; "
                "everything acknowledged before is in the database",
            ) from exc

    @contextlib.contextmanager
    def _write(self) -> Iterator[Connection]:
        """A connection in a write transaction, committed when the block exits normally; the
        fence (HA) runs first in it, before any of the block's statements, and its last check
        just before the commit."""
        with self.engine.connect() as conn:
            if conn.dialect.name == "sqlite":
                conn.execution_options(**{SQLITE_WRITE_LOCK_OPTION: True})
            with conn.begin():
                if self.fence is not None:
                    self.fence(conn.connection.driver_connection)
                yield conn
                if self.fence is not None:
                    fence_before_commit(self.fence, conn.connection.driver_connection)

    # -- the directory -----------------------------------------------------------------------

    def _read_directory(self, conn: Connection) -> set[int]:
        d = self.directory
        rows = conn.execute(
            sa.select(d.c.data).where(d.c.filename == DIRECTORY_ROW).order_by(d.c.id)
        ).all()
        if not rows:
            return set()
        return decode_directory(bytes(rows[0][0] or b""))

    def _set_directory(self, conn: Connection, suffixes: set[int]) -> None:
        d = self.directory
        data = encode_directory(suffixes)
        found = conn.execute(sa.select(d.c.id).where(d.c.filename == DIRECTORY_ROW)).first()
        if found is None:
            conn.execute(d.insert().values(filename=DIRECTORY_ROW, extension="txt", data=data))
        else:
            conn.execute(d.update().where(d.c.id == found[0]).values(data=data))

    def _existing_tables(self, conn: Connection) -> set[int]:
        prefix = self.schema.names.page_store
        out = set()
        for name in sa.inspect(conn).get_table_names():
            rest = name.lower()[len(prefix) :]
            if name.lower().startswith(prefix) and rest.isdigit():
                out.add(int(rest))
        return out

    def discover(self) -> dict[str, Hashable]:
        with self._errors("reading the page directory", self.directory.name):
            with self._write() as conn:
                listed = self._read_directory(conn)
                existing = self._existing_tables(conn)
            self._largest = max(listed | existing, default=0)
            for suffix in sorted(existing - listed):
                _log.warning(
                    "dropping page table %s: the page directory does not list it (a crash "
                    "while it was created or removed)",
                    self.schema.page_table(suffix).name,
                )
                with self._write() as conn:
                    self.schema.page_table(suffix).drop(conn)
            found: dict[str, Hashable] = {}
            for suffix in sorted(listed):
                table = self.schema.page_table(suffix)
                if suffix not in existing:
                    _log.warning("page table %s is listed but missing; ignored", table.name)
                    continue
                with self.engine.connect() as conn:
                    row = conn.execute(
                        sa.select(table.c.data).where(table.c.filename == ADDRESS_ROW)
                    ).first()
                if row is None:
                    _log.warning("page table %s has no %s; ignored", table.name, ADDRESS_ROW)
                    continue
                address = bytes(row[0] or b"").decode("utf-8", errors="replace")
                if address in found:
                    _log.warning("page table %s repeats address %r; ignored", table.name, address)
                    continue
                found[address] = _Table(suffix, table)
            self._suffixes = {_table(t).suffix for t in found.values()}
            return found

    def create(self, address: str) -> Hashable:
        suffix = self._largest + 1
        table = self.schema.page_table(suffix)  # ConfigError past the identifier limit
        self._largest = suffix
        with self._errors("creating a page store", table.name):
            with self._write() as conn:
                table.create(conn)
            with self._write() as conn:
                conn.execute(
                    table.insert().values(
                        filename=ADDRESS_ROW, extension="txt", data=address.encode("utf-8")
                    )
                )
            with self._write() as conn:
                self._set_directory(conn, self._suffixes | {suffix})
        self._suffixes.add(suffix)
        return _Table(suffix, table)

    def page_size(self, configured: int) -> int:
        return min(configured, self.max_page_size)

    # -- pages -----------------------------------------------------------------------------

    def page_numbers(self, locator: Hashable) -> list[int]:
        t = _table(locator).table
        with self._errors("listing pages", t.name), self.engine.connect() as conn:
            names = conn.execute(
                sa.select(t.c.filename).where(t.c.extension == _PAGE_EXTENSION).distinct()
            ).scalars()
            numbers = (page_number_of(name or "") for name in names)
            return sorted(n for n in numbers if n is not None)

    def read_bytes(self, locator: Hashable, page: int) -> bytes | None:
        t = _table(locator).table
        with self._errors(f"reading page {page}", t.name), self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(t.c.data).where(t.c.filename == page_file_name(page)).order_by(t.c.id)
            ).all()
        if not rows:
            return None
        return b"".join(bytes(r[0] or b"") for r in rows)

    def page_path(self, locator: Hashable, page: int) -> tuple[str, str]:
        return _table(locator).table.name, f"page {page} ({page_file_name(page)})"

    def cut(self, locator: Hashable, page: int, length: int) -> None:
        del locator, page, length  # never called: a database page has no torn tail

    def write(self, batch: WriteBatch) -> None:
        names = ", ".join(_table(loc).table.name for loc, _ in batch)
        with self._errors("appending page records", names), self._write() as conn:
            for locator, chunks in batch:
                t = _table(locator).table
                conn.execute(
                    t.insert(),
                    [
                        {
                            "filename": page_file_name(c.page),
                            "extension": _PAGE_EXTENSION,
                            "data": bytes(c.data),
                        }
                        for c in chunks
                    ],
                )

    def delete_page(self, locator: Hashable, page: int) -> None:
        t = _table(locator).table
        with self._errors(f"deleting page {page}", t.name), self._write() as conn:
            conn.execute(t.delete().where(t.c.filename == page_file_name(page)))

    def remove(self, locator: Hashable) -> None:
        found = _table(locator)
        with self._errors("removing a page store", found.table.name):
            with self._write() as conn:
                self._set_directory(conn, self._suffixes - {found.suffix})
            self._suffixes.discard(found.suffix)
            with self._write() as conn:
                found.table.drop(conn)

    def close(self) -> None:
        """Nothing to release: connections go back to the journals' pool."""


class DatabasePagingManager(GroupCommitPagingManager):
    """Every address's page store in the database of ``engine`` (see module docstring).

    ``page_size_of(address)`` gives ``page-size-bytes`` (capped at ``max_page_size``,
    ``jdbc-max-page-size-bytes``); ``sync_timeout_ns`` is ``page-sync-timeout``. Construction
    reads the directory and drops leftover tables; raises StoreUnavailableError.
    """

    def __init__(
        self,
        engine: Engine,
        schema: StoreSchema,
        *,
        page_size_of: Callable[[str], int],
        sync_timeout_ns: int,
        max_page_size: int,
        where: str,
        fence: Fence | None = None,
    ) -> None:
        super().__init__(
            DatabasePageBackend(
                engine, schema, max_page_size=max_page_size, where=where, fence=fence
            ),
            page_size_of=page_size_of,
            sync_timeout_ns=sync_timeout_ns,
        )
