"""The page stores offline: every finding (``store data verify``) and the repairs an operator
consents to (``store data repair --adopt-pages / --remove-pages / --accept-lost-pages``).

Both read the storage through the back-end's own :meth:`~store.paging.base.PageBackend.survey`,
``problems`` and page scan, so the tools and the open cannot disagree about what is damaged.
Checking changes nothing (no directory made, no leftover removed, no table created). A repair
does exactly one thing the operator named:

- **adopt** ``TARGET=ADDRESS``: a folder (file store) or page table (database store) that open
  refuses because it lost its address (or its directory entry) becomes the page store of
  ``ADDRESS`` again (refused when another store holds that address);
- **remove** ``TARGET``: that folder or table is deleted with its pages (a database table the
  directory lists but that is missing is unlisted);
- **accept lost pages** of ``ADDRESS``: its manifest is rewritten to the pages present, as
  they are, so the loss the open reported is accepted and the store opens again.

Thread-safety: none; run it while no process has the store open.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from store.config import StoreConfig
from store.errors import ConfigError, CorruptionError
from store.paging.base import PageBackend
from store.paging.files import ADDRESS_FILE, TOMBSTONE_SUFFIX, FilePageBackend
from store.paging.format import page_binding, scan_page
from store.paging.manifest import MANIFEST_NAME, Manifest, encode_manifest

__all__ = [
    "ERROR",
    "WARNING",
    "PageFinding",
    "accept_lost_pages",
    "adopt_page_store",
    "check_page_stores",
    "page_backend",
    "remove_page_store",
]

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class PageFinding:
    """One finding: ``severity`` (``error``: open refuses the store; ``warning``: a leftover
    the next open removes), ``where`` (folder, file or table), ``offset`` (byte or row id) and
    what is wrong."""

    severity: str
    where: str
    offset: int
    message: str


@contextmanager
def page_backend(config: StoreConfig) -> Iterator[PageBackend]:
    """The page back-end of ``config`` for offline work (a file store's folders, or a
    database store's tables on an engine of its own, disposed after). Raises
    StoreUnavailableError."""
    db = config.database_store
    if db is None:
        yield FilePageBackend(config.paging_directory)
        return
    from store.db.engine import create_store_engine, dispose_store_engine
    from store.db.schema import StoreSchema, TableNames
    from store.paging.database import DatabasePageBackend

    engine, target = create_store_engine(db)
    try:
        yield DatabasePageBackend(
            engine,
            StoreSchema(TableNames.from_config(db)),
            max_page_size=db.jdbc_max_page_size_bytes,
            where=target.display,
        )
    finally:
        dispose_store_engine(engine)


def _error(exc: CorruptionError) -> PageFinding:
    return PageFinding(ERROR, exc.path, exc.offset, exc.reason)


def check_page_stores(config: StoreConfig) -> list[PageFinding]:
    """Every finding in the page stores of ``config``: what open refuses or removes, pages
    missing or shortened against their manifest, and every record of every page (a damaged
    record is an error; only the highest page of a file store may end in a torn tail). Changes
    nothing. Raises StoreIOError / StoreUnavailableError."""
    with page_backend(config) as backend:
        survey = backend.survey()
        out = [PageFinding(WARNING, where, 0, f"the next open removes it: {why}")
               for where, why in survey.leftovers]  # fmt: skip
        out += [_error(exc) for exc in survey.problems]
        for address, locator in survey.stores.items():
            out += _check_store(backend, address, locator)
        return out


def _check_store(backend: PageBackend, address: str, locator: Hashable) -> list[PageFinding]:
    problems = backend.problems(locator)
    out = [_error(exc) for exc in problems]
    manifest = backend.manifest(locator)
    pages = backend.page_numbers(locator)
    for page in pages:
        data = backend.read_bytes(locator, page)
        if data is None:
            continue
        path, label = backend.page_path(locator, page)
        torn = page == pages[-1] and backend.torn_tails
        try:
            binding = page_binding(address, page)
            _records, end = scan_page(data, path=path, torn_tail=torn, binding=binding)
        except CorruptionError as exc:
            reason = f"{label}: {exc.reason}" if label else exc.reason
            out.append(PageFinding(ERROR, exc.path, exc.offset, reason))
            continue
        # a torn tail inside what the manifest lists written is damage, as open judges it
        durable = manifest.expected(page) if manifest is not None else None
        if torn and durable is not None and end < durable[0] and len(data) >= durable[0]:
            out.append(
                PageFinding(
                    ERROR,
                    path,
                    end,
                    f"page {page} has {end} valid bytes; its manifest lists {durable[0]} bytes "
                    "written (records after the damage are gone)",
                )
            )
    return out


def adopt_page_store(config: StoreConfig, target: str, address: str) -> str:
    """Make the folder or table ``target`` the page store of ``address`` (module docstring);
    returns what was done. Raises ConfigError for a target that is not a page store of this
    store or an address another store holds, StoreIOError / StoreUnavailableError."""
    if not address:
        raise ConfigError("--adopt-pages: the address is empty", key="--adopt-pages")
    with page_backend(config) as backend:
        holder = backend.survey().stores.get(address)
        if holder is not None:
            raise ConfigError(
                f"--adopt-pages: address {address!r} already has a page store "
                f"({backend.page_path(holder, 1)[0]})",
                key="--adopt-pages",
            )
        if isinstance(backend, FilePageBackend):
            path = _folder_target(backend, target)
            backend.write_named(path, ADDRESS_FILE, (address + "\n").encode("utf-8"))
            return f"{path} is now the page store of address {address!r}"
        from store.paging.database import DatabasePageBackend

        assert isinstance(backend, DatabasePageBackend)
        table = backend.adopt_table(target, address)
        return f"table {table} is now the page store of address {address!r}"


def _folder_target(backend: FilePageBackend, target: str) -> str:
    path = os.path.realpath(target)
    parent = os.path.realpath(backend.directory)
    if os.path.dirname(path) != parent or not os.path.isdir(path):
        raise ConfigError(
            f"{target} is not a folder of the paging directory {backend.directory}",
            key="--adopt-pages / --remove-pages",
        )
    return path


def remove_page_store(config: StoreConfig, target: str) -> str:
    """Delete the folder or table ``target`` and its pages (module docstring); returns what
    was done. Raises ConfigError for a target that is not a page store's, StoreIOError /
    StoreUnavailableError."""
    with page_backend(config) as backend:
        if isinstance(backend, FilePageBackend):
            path = _folder_target(backend, target)
            tombstone = path + ("" if path.endswith(TOMBSTONE_SUFFIX) else TOMBSTONE_SUFFIX)
            if tombstone != path:
                backend.fs.rename(path, tombstone)
                backend.fs.fsync_dir(backend.directory)
            backend.remove_leftover(tombstone)
            return f"removed {path} and every page in it"
        from store.paging.database import DatabasePageBackend

        assert isinstance(backend, DatabasePageBackend)
        return backend.remove_table(target)


def accept_lost_pages(config: StoreConfig, address: str) -> str:
    """Rewrite the manifest of ``address``'s page store to the pages present (module
    docstring); returns what was done. Raises ConfigError when the address has no page store,
    StoreIOError / StoreUnavailableError."""
    with page_backend(config) as backend:
        locator = backend.survey().stores.get(address)
        if locator is None:
            raise ConfigError(
                f"--accept-lost-pages: address {address!r} has no page store",
                key="--accept-lost-pages",
            )
        lengths = {
            page: len(backend.read_bytes(locator, page) or b"")
            for page in backend.page_numbers(locator)
        }
        if isinstance(backend, FilePageBackend):
            path = backend.store_path(locator)
            pages = dict(lengths)
            current = None
            if pages:
                highest = max(pages)
                current = (highest, 0)
                del pages[highest]
            manifest = encode_manifest(Manifest(pages, current))
            backend.write_named(path, MANIFEST_NAME, manifest)
            where = path
        else:
            from store.paging.database import DatabasePageBackend

            assert isinstance(backend, DatabasePageBackend)
            where = backend.rewrite_manifest(locator, lengths)
        listed = ", ".join(f"{p} ({n} bytes)" for p, n in sorted(lengths.items())) or "none"
        return f"{where}: the manifest now lists the pages present: {listed}"
