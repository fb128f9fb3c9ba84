"""Page stores in database tables (docs/paging.md, reference §4.8, §4.9).

The tables and rows are documented beside their definition (:mod:`store.db.schema`, "Page
tables"): a directory row ``directory.txt`` in ``page-store-table-name`` lists the suffixes of
the address tables ``<page-store-table-name><suffix>``; each holds ``address.txt`` and one row
per flushed batch of a page, so an append is an ``INSERT`` of the batch's records (never a
rewrite of a growing blob) and ``read_page`` is one indexed select.

Crash order:

- a new store: create its table (with its index), insert ``address.txt`` and an empty page
  manifest (``pages.txt``, :mod:`store.paging.manifest`), then add the suffix to the directory
  in one transaction. A new suffix is the next integer after the largest in the directory and
  among the existing tables, so a half-made table's name is never reused while it may exist;
  the name must fit the database's identifier limit (``ConfigError`` otherwise);
- removing a store: one transaction rewrites the directory without it and renames its
  ``address.txt`` row to ``removed.txt`` (a tombstone), then its table is dropped;
- every write of page rows and every page delete updates the manifest row in the same
  transaction, so the manifest always states every page's exact length;
- a clean close writes the page summary row ``summary.bin``
  (:mod:`store.messaging.page_summary`); an open for writing deletes it.

**What open may delete** (the rule, for this back-end): only what the store can prove is its
own unfinished work: a table of the prefix that the directory does not list and that holds a
tombstone (its removal was committed) or no page row (a crash while it was created). Anything
else is kept and reported by raising :class:`~store.errors.CorruptionError` naming the table
(and the row): an unlisted table holding page rows (say the directory row was deleted or
emptied), a listed table that is missing (:class:`~store.errors.LostDataError`) or has no or an
empty ``address.txt``, a directory, manifest or page row with a NULL or undecodable column,
two tables claiming one address, a page its manifest lists that is missing or of another
length. ``store data repair --pages`` adopts or removes such a table with the operator's
consent (:mod:`store.paging.repair`).

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
from collections.abc import Callable, Hashable, Iterator, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from store.db.dialects import SQLITE_WRITE_LOCK_OPTION
from store.db.reconnects import reconnects
from store.db.schema import StoreSchema
from store.db.writer import Fence, fence_before_commit, fenced_failure, is_outage
from store.errors import (
    ConfigError,
    CorruptionError,
    LostDataError,
    StoreError,
    StoreUnavailableError,
)
from store.paging.base import SUMMARY_NAME, GroupCommitPagingManager, PageBackend, Survey
from store.paging.db_probes import PageProbes
from store.paging.flusher import WriteBatch
from store.paging.format import page_file_name, page_number_of
from store.paging.manifest import (
    MANIFEST_NAME,
    Manifest,
    decode_manifest,
    encode_manifest,
    manifest_problems,
)

__all__ = [
    "ADDRESS_ROW",
    "DIRECTORY_ROW",
    "TOMBSTONE_ROW",
    "DatabasePageBackend",
    "DatabasePagingManager",
    "decode_directory",
    "encode_directory",
]

_log = logging.getLogger(__name__)

DIRECTORY_ROW = "directory.txt"
ADDRESS_ROW = "address.txt"
TOMBSTONE_ROW = "removed.txt"
_PAGE_EXTENSION = "page"
_REPAIR_HINT = (
    "nothing was dropped; adopt or remove it with `store data repair --pages` "
    "(see `store data verify`)"
)


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
    """One address's page table; its manifest (None: written before manifests) and the id of
    the manifest's row, and each page's length once known (the flusher keeps them)."""

    __slots__ = ("lengths", "manifest", "manifest_id", "suffix", "table")

    def __init__(
        self, suffix: int, table: sa.Table, manifest: Manifest | None, manifest_id: int | None
    ) -> None:
        self.suffix = suffix
        self.table = table
        self.manifest = manifest
        self.manifest_id = manifest_id
        self.lengths: dict[int, int] | None = None


#: At most this many pages per query of ``read_many`` ...
_READ_MANY_PAGES = 256
#: ... and about this many bytes of pages whose length is known (a page larger than this is
#: read alone).
_READ_MANY_BYTES = 16 * 2**20


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
        # The batch whose transaction write() began last, with each page store's page
        # lengths before it; None once it committed (the flusher thread only).
        self._attempt: tuple[WriteBatch, list[dict[int, int]]] | None = None
        #: what the first write after an outage checks the database still holds
        self._probes = PageProbes(reconnects(engine), lambda store: _table(store).table.name)
        self._noticed: WriteBatch | None = None  # the failed batch the probes were told of

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
        if rows[0][0] is None:
            raise CorruptionError(
                d.name, 0, f"the {DIRECTORY_ROW} row has no data", hint=_REPAIR_HINT
            )
        try:
            return decode_directory(bytes(rows[0][0]))
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorruptionError(
                d.name, 0, f"the {DIRECTORY_ROW} row is damaged: {exc}", hint=_REPAIR_HINT
            ) from None

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

    def survey(self) -> Survey:
        out = Survey()
        where = self.directory.name
        with self._errors("reading the page directory", where), self.engine.connect() as conn:
            try:
                listed = self._read_directory(conn)
            except CorruptionError as exc:
                out.problems.append(exc)
                listed = set()
            existing = self._existing_tables(conn)
            self._largest = max(listed | existing, default=0)
            for suffix in sorted(existing - listed):
                self._survey_unlisted(conn, self.schema.page_table(suffix), out)
            for suffix in sorted(listed):
                self._survey_listed(conn, suffix, suffix in existing, out)
            conn.rollback()
        return out

    def _survey_unlisted(self, conn: Connection, table: sa.Table, out: Survey) -> None:
        """A table of the prefix the directory does not list: a leftover when it holds a
        tombstone or no page row, a problem otherwise (module docstring)."""
        names = set(conn.execute(sa.select(table.c.filename).distinct()).scalars())
        if TOMBSTONE_ROW in names:
            out.leftovers.append((table.name, "unlisted, its removal was committed"))
        elif not {n for n in names if n is None or page_number_of(n) is not None}:
            out.leftovers.append((table.name, "unlisted, no page row: a crash while created"))
        else:
            out.problems.append(
                CorruptionError(
                    table.name,
                    0,
                    f"page table {table.name} holds page rows but {self.directory.name} does "
                    "not list it; it is kept",
                    hint=_REPAIR_HINT,
                )
            )

    def _survey_listed(self, conn: Connection, suffix: int, exists: bool, out: Survey) -> None:
        table = self.schema.page_table(suffix)
        if not exists:
            out.problems.append(
                LostDataError(
                    table.name,
                    0,
                    f"page table {table.name} is listed in {self.directory.name} but missing: "
                    "the pages of its address are gone",
                    hint="restore it from a backup, or unlist it with "
                    "`store data repair --remove-pages`",
                )
            )
            return
        try:
            address = self.read_address(conn, table)
            manifest, manifest_id = self.read_manifest(conn, table)
        except CorruptionError as exc:
            out.problems.append(exc)
            return
        if address in out.stores:
            other = _table(out.stores[address]).table.name
            out.problems.append(
                CorruptionError(
                    table.name,
                    0,
                    f"page table {table.name} claims address {address!r}, as {other} does",
                    hint=_REPAIR_HINT,
                )
            )
            return
        out.stores[address] = _Table(suffix, table, manifest, manifest_id)

    def remove_leftover(self, where: str) -> None:
        prefix = self.schema.names.page_store
        table = self.schema.page_table(int(where.lower()[len(prefix) :]))
        with self._errors("dropping a leftover page table", table.name), self._write() as conn:
            table.drop(conn)

    def adopt(self, stores: dict[str, Hashable]) -> None:
        self._suffixes = {_table(t).suffix for t in stores.values()}

    def read_address(self, conn: Connection, table: sa.Table) -> str:
        """The address of a page table. Raises CorruptionError when its row is missing,
        NULL, empty or not UTF-8."""
        row = conn.execute(
            sa.select(table.c.id, table.c.data).where(table.c.filename == ADDRESS_ROW)
        ).first()
        if row is None:
            raise CorruptionError(
                table.name,
                0,
                f"page table {table.name} has no {ADDRESS_ROW} row",
                hint=_REPAIR_HINT,
            )
        try:
            address = bytes(row[1]).decode("utf-8") if row[1] is not None else ""
        except UnicodeDecodeError:
            address = ""
        if not address:
            raise CorruptionError(
                table.name,
                row[0],
                f"row id {row[0]} ({ADDRESS_ROW}) has no valid address (NULL, empty or not UTF-8)",
                hint=_REPAIR_HINT,
            )
        return address

    def read_manifest(
        self, conn: Connection, table: sa.Table
    ) -> tuple[Manifest | None, int | None]:
        """(the page manifest, its row id) of a page table, (None, None) when it has none.
        Raises CorruptionError for a NULL or damaged one."""
        row = conn.execute(
            sa.select(table.c.id, table.c.data).where(table.c.filename == MANIFEST_NAME)
        ).first()
        if row is None:
            return None, None
        where = f"{table.name} row id {row[0]} ({MANIFEST_NAME})"
        if row[1] is None:
            raise CorruptionError(table.name, row[0], f"{where} has no data")
        return decode_manifest(bytes(row[1]), path=where), int(row[0])

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
                conn.execute(
                    table.insert().values(
                        filename=MANIFEST_NAME, extension="txt", data=encode_manifest(Manifest())
                    )
                )
            with self.engine.connect() as conn:
                manifest, manifest_id = self.read_manifest(conn, table)
            with self._write() as conn:
                self._set_directory(conn, self._suffixes | {suffix})
        self._suffixes.add(suffix)
        found = _Table(suffix, table, manifest, manifest_id)
        found.lengths = {}
        return found

    def page_size(self, configured: int) -> int:
        return min(configured, self.max_page_size)

    # -- pages -----------------------------------------------------------------------------

    def page_numbers(self, locator: Hashable) -> list[int]:
        t = _table(locator).table
        with self._errors("listing pages", t.name), self.engine.connect() as conn:
            names = conn.execute(sa.select(t.c.filename).distinct()).scalars()
            numbers = (page_number_of(name or "") for name in names)
            return sorted(n for n in numbers if n is not None)

    def read_bytes(self, locator: Hashable, page: int) -> bytes | None:
        t = _table(locator).table
        with self._errors(f"reading page {page}", t.name), self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(t.c.id, t.c.data)
                .where(t.c.filename == page_file_name(page))
                .order_by(t.c.id)
            ).all()
        if not rows:
            return None
        for row_id, data in rows:
            if data is None:
                raise CorruptionError(
                    t.name, row_id, f"row id {row_id} of page {page} has no data (NULL)"
                )
        return b"".join(bytes(data) for _, data in rows)

    def read_many(
        self, locator: Hashable, pages: Sequence[int]
    ) -> Iterator[tuple[int, bytes | None]]:
        """As ``read_bytes`` for each page, up to :data:`_READ_MANY_PAGES` pages (and about
        :data:`_READ_MANY_BYTES` of those whose length is known) per query: a load reads
        every page, and a deep queue has thousands. A page's error is raised when its turn
        comes, after the pages before it."""
        found = _table(locator)
        known = found.lengths or {}
        batch: list[int] = []
        size = 0
        for page in pages:
            length = known.get(page, 0)
            if batch and (len(batch) >= _READ_MANY_PAGES or size + length > _READ_MANY_BYTES):
                yield from self._read_batch(found.table, batch)
                batch, size = [], 0
            batch.append(page)
            size += length
        if batch:
            yield from self._read_batch(found.table, batch)

    def _read_batch(self, t: sa.Table, pages: list[int]) -> Iterator[tuple[int, bytes | None]]:
        names = {page_file_name(page): page for page in pages}
        what = f"reading pages {pages[0]} to {pages[-1]}"
        with self._errors(what, t.name), self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(t.c.id, t.c.filename, t.c.data)
                .where(t.c.filename.in_(list(names)))
                .order_by(t.c.filename, t.c.id)  # zero-padded names: page order
            ).all()
        chunks: dict[int, list[bytes]] = {}
        bad: dict[int, CorruptionError] = {}
        for row_id, name, data in rows:
            page = names[name]
            if data is None:
                message = f"row id {row_id} of page {page} has no data (NULL)"
                bad.setdefault(page, CorruptionError(t.name, row_id, message))
            else:
                chunks.setdefault(page, []).append(bytes(data))
        for page in pages:
            if page in bad:
                raise bad[page]
            got = chunks.get(page)
            yield page, None if got is None else b"".join(got)

    def _page_lengths(self, found: _Table) -> dict[int, int]:
        """Every page's length as stored (and kept in ``found``). Raises CorruptionError for
        a row without a filename or data, or with a filename that is not one of the table's."""
        found.lengths = self._stored_lengths(found)
        return found.lengths

    def _stored_lengths(self, locator: Hashable) -> dict[int, int]:
        found = _table(locator)
        t = found.table
        with self._errors("listing pages", t.name), self.engine.connect() as conn:
            rows = conn.execute(sa.select(t.c.id, t.c.filename, sa.func.length(t.c.data))).all()
        lengths: dict[int, int] = {}
        for row_id, name, length in rows:
            page = page_number_of(name or "")
            if page is None and name in (ADDRESS_ROW, MANIFEST_NAME, SUMMARY_NAME):
                continue
            if page is None:
                raise CorruptionError(
                    t.name, row_id, f"row id {row_id} has filename {name!r}, not a page's"
                )
            if length is None:
                raise CorruptionError(
                    t.name, row_id, f"row id {row_id} of page {page} has no data (NULL)"
                )
            lengths[page] = lengths.get(page, 0) + int(length)
        return lengths

    def manifest(self, locator: Hashable) -> Manifest | None:
        return _table(locator).manifest

    def problems(self, locator: Hashable) -> list[CorruptionError]:
        found = _table(locator)
        try:
            lengths = self._page_lengths(found)
        except CorruptionError as exc:
            return [exc]
        if found.manifest is None:
            return []
        name = found.table.name
        paths = {p: f"{name} page {p}" for p in found.manifest.listed()}
        where = f"{name}'s {MANIFEST_NAME}"
        out = manifest_problems(found.manifest, lengths, where=where, page_path=paths)
        for page in sorted(set(lengths) - found.manifest.listed()):
            out.append(
                CorruptionError(name, 0, f"page {page} has rows but {where} does not list it")
            )
        return out

    def stale_pages(self, locator: Hashable) -> list[int]:
        return []  # a page delete and its manifest update commit together

    def _note(self, conn: Connection, found: _Table, lengths: dict[int, int]) -> int | None:
        """Write ``lengths`` as the table's manifest in ``conn``'s transaction; returns the
        manifest row's id (the caller records it, with the manifest, once committed)."""
        data = encode_manifest(Manifest(dict(lengths)))
        t = found.table
        if found.manifest_id is not None:
            conn.execute(t.update().where(t.c.id == found.manifest_id).values(data=data))
            return found.manifest_id
        conn.execute(t.insert().values(filename=MANIFEST_NAME, extension="txt", data=data))
        row = conn.execute(sa.select(t.c.id).where(t.c.filename == MANIFEST_NAME)).first()
        return None if row is None else int(row[0])

    @staticmethod
    def _noted(found: _Table, lengths: dict[int, int], manifest_id: int | None) -> None:
        found.lengths = lengths
        found.manifest = Manifest(dict(lengths))
        found.manifest_id = manifest_id

    def page_path(self, locator: Hashable, page: int) -> tuple[str, str]:
        return _table(locator).table.name, f"page {page} ({page_file_name(page)})"

    def cut(self, locator: Hashable, page: int, length: int) -> None:
        del locator, page, length  # never called: a database page has no torn tail

    def overwrite(self, locator: Hashable, page: int, offset: int, data: bytes) -> None:
        t = _table(locator).table
        with self._errors(f"rewriting page {page}", t.name), self._write() as conn:
            rows = conn.execute(
                sa.select(t.c.id, t.c.data)
                .where(t.c.filename == page_file_name(page))
                .order_by(t.c.id)
            ).all()
            start, stop = offset, offset + len(data)
            if offset < 0 or stop > sum(len(bytes(r[1] or b"")) for r in rows):
                raise ValueError(f"bytes {start}..{stop} are past page {page}")
            at = 0
            for row_id, value in rows:
                chunk = bytearray(value or b"")
                lo, hi = max(start, at), min(stop, at + len(chunk))
                if lo < hi:
                    chunk[lo - at : hi - at] = data[lo - start : hi - start]
                    conn.execute(sa.update(t).where(t.c.id == row_id).values(data=bytes(chunk)))
                at += len(chunk)

    def write(self, batch: WriteBatch) -> None:
        names = ", ".join(_table(loc).table.name for loc, _ in batch)
        with self._errors("appending page records", names):
            if self._probes.due():  # another part reconnected after an outage
                self._probes.check(self._stored_lengths)
            updated: list[tuple[_Table, dict[int, int]]] = []
            befores: list[dict[int, int]] = []
            for locator, chunks in batch:
                found = _table(locator)
                lengths = dict(
                    found.lengths if found.lengths is not None else self._page_lengths(found)
                )
                befores.append(dict(lengths))
                for c in chunks:
                    lengths[c.page] = lengths.get(c.page, 0) + len(c.data)
                updated.append((found, lengths))
            ids: list[int | None] = []
            # What rewrite() compares with, should the transaction's answer be lost (a read
            # of the pages meanwhile updates ``found.lengths`` with what the database holds).
            self._attempt = (batch, befores)
            with self._write() as conn:
                for (_, chunks), (found, lengths) in zip(batch, updated, strict=True):
                    t = found.table
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
                    ids.append(self._note(conn, found, lengths))
            self._attempt = None
            for (found, lengths), manifest_id in zip(updated, ids, strict=True):
                self._noted(found, lengths, manifest_id)
                self._probes.written(found, lengths)

    def rewrite(self, batch: WriteBatch) -> None:
        """After :meth:`write` of ``batch`` failed in an outage: settle whether it was applied
        (one transaction, so every page store's page lengths read back are either those
        before it or those after it) and write it if it was not. Raises
        StoreUnavailableError while the database is away, LostDataError when the lengths
        are neither (or when the probes find commits lost, :mod:`store.paging.db_probes`)."""
        if self._noticed is not batch:  # the first retry: tell the other parts
            self._noticed = batch
            self._probes.outage()
        with self._errors("checking page lengths", self.directory.name):
            self._probes.check(self._stored_lengths, skip=[loc for loc, _ in batch])
        self._settle(batch)

    def _settle(self, batch: WriteBatch) -> None:
        attempt = self._attempt
        if attempt is None or attempt[0] is not batch:  # it stopped before its transaction
            self.write(batch)
            return
        applied: bool | None = None
        for (locator, chunks), before in zip(batch, attempt[1], strict=True):
            found = _table(locator)
            actual = self._page_lengths(found)  # read back (and kept in ``found``)
            after = dict(before)
            for c in chunks:
                after[c.page] = after.get(c.page, 0) + len(c.data)
            if actual == after:
                applied = True
            elif actual == before:
                applied = False
            else:
                raise LostDataError(
                    found.table.name,
                    0,
                    f"page lengths {actual} after a write failed in an outage are neither "
                    f"those before it ({before}) nor after it ({after}): the database lacks "
                    "page commits the store confirmed (a failover to a standby behind its "
                    "primary, or a restore?); paging stops writing",
                )
        if applied:
            for locator, _ in batch:
                found = _table(locator)
                t = found.table
                with self._errors("reading the manifest", t.name), self.engine.connect() as conn:
                    row = conn.execute(
                        sa.select(t.c.id).where(t.c.filename == MANIFEST_NAME)
                    ).first()
                lengths = dict(found.lengths or {})
                self._noted(found, lengths, None if row is None else int(row[0]))
                self._probes.written(found, lengths)
            self._attempt = None
            return
        self.write(batch)

    def delete_page(self, locator: Hashable, page: int) -> None:
        found = _table(locator)
        t = found.table
        with self._errors(f"deleting page {page}", t.name):
            lengths = dict(
                found.lengths if found.lengths is not None else self._page_lengths(found)
            )
            lengths.pop(page, None)
            try:
                with self._write() as conn:
                    conn.execute(t.delete().where(t.c.filename == page_file_name(page)))
                    manifest_id = self._note(conn, found, lengths)
            except BaseException:
                self._probes.deleted(found, page, confirmed=False)  # its answer may be lost
                raise
            self._noted(found, lengths, manifest_id)
            self._probes.deleted(found, page, confirmed=True)

    def remove(self, locator: Hashable) -> None:
        found = _table(locator)
        t = found.table
        with self._errors("removing a page store", t.name):
            with self._write() as conn:
                self._set_directory(conn, self._suffixes - {found.suffix})
                conn.execute(
                    t.update().where(t.c.filename == ADDRESS_ROW).values(filename=TOMBSTONE_ROW)
                )
            self._suffixes.discard(found.suffix)
            self._probes.forget(found)
            with self._write() as conn:
                t.drop(conn)

    def page_lengths(self, locator: Hashable) -> dict[int, int]:
        found = _table(locator)
        return dict(found.lengths if found.lengths is not None else self._page_lengths(found))

    def read_summary(self, locator: Hashable) -> bytes | None:
        t = _table(locator).table
        with self._errors("reading the page summary", t.name), self.engine.connect() as conn:
            row = conn.execute(sa.select(t.c.data).where(t.c.filename == SUMMARY_NAME)).first()
        return None if row is None or row[0] is None else bytes(row[0])

    def write_summary(self, locator: Hashable, data: bytes | None) -> None:
        t = _table(locator).table
        with self._errors("writing the page summary", t.name), self._write() as conn:
            conn.execute(t.delete().where(t.c.filename == SUMMARY_NAME))
            if data is not None:
                conn.execute(t.insert().values(filename=SUMMARY_NAME, extension="bin", data=data))

    # -- the operator's repairs (store.paging.repair) -----------------------------------------

    def _suffix_of(self, name: str) -> int:
        prefix = self.schema.names.page_store
        rest = name.lower()[len(prefix) :]
        if not name.lower().startswith(prefix) or not rest.isdigit():
            raise ConfigError(
                f"{name} is not a page table of this store (they are named {prefix}<n>)",
                key="--adopt-pages / --remove-pages",
            )
        return int(rest)

    def adopt_table(self, name: str, address: str) -> str:
        """Make the page table ``name`` the store of ``address``: its address row written and
        the table listed in the directory, in one transaction. Returns the table's name.
        Raises ConfigError when it is not one of this store's page tables."""
        suffix = self._suffix_of(name)
        table = self.schema.page_table(suffix)
        with self._errors("adopting a page table", table.name), self._write() as conn:
            if suffix not in self._existing_tables(conn):
                raise ConfigError(f"page table {table.name} does not exist", key="--adopt-pages")
            try:
                listed = self._read_directory(conn)
            except CorruptionError:
                listed = set()
            data = address.encode("utf-8")
            named = sa.or_(table.c.filename == ADDRESS_ROW, table.c.filename == TOMBSTONE_ROW)
            conn.execute(table.delete().where(named | table.c.filename.is_(None)))
            conn.execute(table.insert().values(filename=ADDRESS_ROW, extension="txt", data=data))
            self._set_directory(conn, listed | {suffix})
        return table.name

    def remove_table(self, name: str) -> str:
        """Unlist the page table ``name`` and drop it (or only unlist it when it is missing).
        Returns what was done. Raises ConfigError when it is not one of this store's."""
        suffix = self._suffix_of(name)
        table = self.schema.page_table(suffix)
        with self._errors("removing a page table", table.name):
            with self._write() as conn:
                try:
                    listed = self._read_directory(conn)
                except CorruptionError:
                    listed = set()
                exists = suffix in self._existing_tables(conn)
                if suffix in listed:
                    self._set_directory(conn, listed - {suffix})
            if exists:
                with self._write() as conn:
                    table.drop(conn)
        return f"removed table {table.name}" + ("" if exists else " from the page directory")

    def rewrite_manifest(self, locator: Hashable, lengths: dict[int, int]) -> str:
        """Replace the store's manifest by ``lengths`` (accepting a loss). Returns the table's
        name."""
        found = _table(locator)
        with self._errors("rewriting a page manifest", found.table.name), self._write() as conn:
            manifest_id = self._note(conn, found, lengths)
        self._noted(found, lengths, manifest_id)
        return found.table.name

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
        read_only: bool = False,
        network_timeout: float = 0.0,
    ) -> None:
        backend = DatabasePageBackend(
            engine, schema, max_page_size=max_page_size, where=where, fence=fence
        )
        super().__init__(
            backend,
            page_size_of=page_size_of,
            sync_timeout_ns=sync_timeout_ns,
            read_only=read_only,
        )
        # Only a server has outages to ride out (SQLite's errors are its file's; Derby's are
        # embedded); an outage is what the connection says it is (a missing table is not).
        if engine.dialect.name in ("postgresql", "mysql", "mariadb"):
            self.flusher.retry = backend.rewrite
            self.flusher.outage_timeout = network_timeout
            self.flusher.is_outage = is_outage
