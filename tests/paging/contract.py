"""Helpers of the paging tests: a paging manager per back-end with a chosen page size, and a
look at what is durable without going through the manager under test.

:class:`PagingFactory` opens the back-end's own manager class on the test's store
(``paging-directory`` of a file store, the tables of a database store, memory for zero
persistence) with an explicit page size and sync timeout, so roll-rule tests can use small
pages; ``tests/paging/test_wiring.py`` checks that ``open_store`` builds the same classes.
:meth:`PagingFactory.durable_records` reads a page from the storage itself (the page file,
or the rows through a separate engine), so a test can check that ``flush`` made records
durable without closing the manager (a clean close would make them durable anyway).

Thread-safety: a factory belongs to one test's thread; the managers it opens are shared
between threads as the contract allows.
"""

from __future__ import annotations

import os
from typing import Any

import sqlalchemy as sa

from store.db import DatabaseJournals, open_database_journals
from store.db.engine import create_store_engine, dispose_store_engine
from store.db.schema import StoreSchema, TableNames
from store.paging.api import DEFAULT_PAGE_SIZE, PagingManager
from store.paging.database import ADDRESS_ROW, DatabasePagingManager, decode_directory
from store.paging.files import ADDRESS_FILE, FilePagingManager
from store.paging.format import decode_page, page_binding, page_file_name
from store.paging.memory import MemoryPagingManager
from tests.support.backends import StoreFactory

__all__ = ["SYNC_TIMEOUT_NS", "PagingFactory"]

#: 0.1 ms: tests do not wait long for the group commit.
SYNC_TIMEOUT_NS = 100_000


class PagingFactory:
    """Opens, reopens and closes the paging manager of one test's store (module docstring)."""

    def __init__(self, stores: StoreFactory) -> None:
        self.stores = stores
        self.spec = stores.spec
        self.config = stores.config
        self.persistent = stores.spec.persistent
        self.page_size = DEFAULT_PAGE_SIZE
        self.manager: PagingManager | None = None
        self._journals: DatabaseJournals | None = None
        self._engine: Any = None

    @property
    def kind(self) -> str:
        """ "file", "database" or "none"."""
        if not self.persistent:
            return "none"
        return "database" if self.config.database_store is not None else "file"

    def open(
        self, *, page_size: int | None = None, sync_timeout_ns: int = SYNC_TIMEOUT_NS
    ) -> PagingManager:
        """Close the manager opened before and open a new one (``page_size`` stays for later
        reopens); returns it."""
        self.close()
        if page_size is not None:
            self.page_size = page_size
        size = self.page_size

        def page_size_of(address: str) -> int:
            del address
            return size

        if self.kind == "none":
            self.manager = MemoryPagingManager(page_size_of)
        elif self.kind == "file":
            self.manager = FilePagingManager(
                self.config.paging_directory,
                page_size_of=page_size_of,
                sync_timeout_ns=sync_timeout_ns,
            )
        else:
            db = self.config.database_store
            assert db is not None
            self._journals = open_database_journals(self.config)
            self.manager = DatabasePagingManager(
                self._journals.engine,
                self._journals.schema,
                page_size_of=page_size_of,
                sync_timeout_ns=sync_timeout_ns,
                max_page_size=db.jdbc_max_page_size_bytes,
                where=self._journals.target.display,
            )
        return self.manager

    def reopen(self) -> PagingManager:
        """Close and open again (same page size); returns the new manager."""
        return self.open()

    def close(self) -> None:
        """Close the current manager (and the database journals under it). Raises what the
        manager's close raises."""
        manager, self.manager = self.manager, None
        journals, self._journals = self._journals, None
        try:
            if manager is not None:
                manager.close()
        finally:
            if journals is not None:
                journals.close()

    # -- looking at the storage directly -----------------------------------------------------

    @property
    def schema(self) -> StoreSchema:
        """The database store's tables (database back-ends only)."""
        assert self.config.database_store is not None
        return StoreSchema(TableNames.from_config(self.config.database_store))

    @property
    def side_engine(self) -> Any:
        """A separate engine on the database (not the store's)."""
        if self._engine is None:
            assert self.config.database_store is not None
            self._engine = create_store_engine(self.config.database_store)[0]
        return self._engine

    def folders(self) -> dict[str, str]:
        """File store: address -> folder path, read from the disk."""
        root = self.config.paging_directory
        out = {}
        for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
            marker = os.path.join(root, name, ADDRESS_FILE)
            if os.path.exists(marker):
                with open(marker, encoding="utf-8") as f:
                    out[f.read()[:-1]] = os.path.join(root, name)
        return out

    def page_file(self, address: str, page: int) -> str:
        """File store: the path of ``address``'s ``page``."""
        return os.path.join(self.folders()[address], page_file_name(page))

    def directory(self) -> set[int]:
        """Database: the suffixes the directory row lists."""
        d = self.schema.page_store
        with self.side_engine.connect() as conn:
            row = conn.execute(sa.select(d.c.data).where(d.c.filename == "directory.txt")).first()
        return decode_directory(bytes(row[0] or b"")) if row is not None else set()

    def page_tables(self) -> dict[str, str]:
        """Database: address -> table name, for every table the directory lists."""
        out = {}
        for suffix in self.directory():
            table = self.schema.page_table(suffix)
            with self.side_engine.connect() as conn:
                row = conn.execute(
                    sa.select(table.c.data).where(table.c.filename == ADDRESS_ROW)
                ).first()
            assert row is not None, f"{table.name} has no {ADDRESS_ROW}"
            out[bytes(row[0]).decode("utf-8")] = table.name
        return out

    def existing_page_tables(self) -> set[str]:
        """Database: every table named ``<page-store-table-name><digits>``."""
        prefix = self.schema.names.page_store
        with self.side_engine.connect() as conn:
            names = sa.inspect(conn).get_table_names()
        return {
            n.lower() for n in names if n.lower().startswith(prefix) and n[len(prefix) :].isdigit()
        }

    def durable_records(self, address: str, page: int) -> list[bytes]:
        """The records of ``address``'s ``page`` as the storage holds them now (none when
        the page is not there)."""
        bound = page_binding(address, page)
        if self.kind == "file":
            path = self.page_file(address, page)
            if not os.path.exists(path):
                return []
            with open(path, "rb") as f:
                return decode_page(f.read(), path="page", torn_tail=True, binding=bound)
        assert self.kind == "database"
        name = self.page_tables()[address]
        suffix = int(name[len(self.schema.names.page_store) :])
        table = self.schema.page_table(suffix)
        with self.side_engine.connect() as conn:
            rows = conn.execute(
                sa.select(table.c.data)
                .where(table.c.filename == page_file_name(page))
                .order_by(table.c.id)
            ).all()
        data = b"".join(bytes(r[0]) for r in rows)
        return decode_page(data, path=name, torn_tail=False, binding=bound)

    def teardown(self) -> None:
        """Close everything (errors of a store broken on purpose are ignored)."""
        try:
            self.close()
        except Exception:
            pass
        if self._engine is not None:
            dispose_store_engine(self._engine)
            self._engine = None
