"""Page stores and large-message bodies for :func:`store.data.describe.describe_store`.

Page stores are read through their back-end's own survey
(:meth:`~store.paging.base.PageBackend.survey`: the rule open applies, without the clean-up
open does; a print changes nothing), so what print shows as damaged is what open refuses.
Large bodies are read through the large-message stores opened ``read_only`` (nothing
cleaned), with the store's own header check and reader (no second decoder), each complete body
whole, so a truncated, damaged or misplaced chunk is an ``error`` of its entry. The layouts
read here are documented where they are written: :mod:`store.paging.files`,
:mod:`store.paging.database`, :mod:`store.paging.format`, :mod:`store.large.files`,
:mod:`store.large.database` and :mod:`store.db.schema`.

A page is read whole (at most ``page-size-bytes`` plus one record); the page being written
(the highest of an address) may end in a torn tail, which is ignored as a load ignores it.
Damage is reported in the :class:`~store.data.describe.model.Page` entry (after the messages before
it), never raised.

Thread-safety: one generator belongs to one thread.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from store.data.describe.model import (
    DescribeOptions,
    Entry,
    LargeMessage,
    Page,
    PagedMessage,
    PagingAddress,
)
from store.data.describe.records import decode_paged_message
from store.db.schema import StoreSchema
from store.errors import CorruptionError
from store.fs import OsFileSystem
from store.large import files as large_files
from store.large.api import LargeMessageStore, check_body
from store.large.database import (
    MSG_EXTENSION,
    DatabaseLargeMessages,
    msg_name,
    parse_row_name,
)
from store.large.files import FileLargeMessages
from store.paging.base import PageBackend
from store.paging.database import DatabasePageBackend
from store.paging.files import FilePageBackend
from store.paging.format import FRAMING, page_binding, scan_page

__all__ = [
    "database_large_messages",
    "database_paging",
    "file_large_messages",
    "file_paging",
]


def _paging_entries(backend: PageBackend, options: DescribeOptions) -> Iterator[Entry]:
    """The page stores of ``backend`` as its own survey finds them (the rule open applies:
    :mod:`store.paging.files`, :mod:`store.paging.database`), read without changing anything:
    a store open refuses is an entry with its ``error``, each healthy one's pages follow."""
    survey = backend.survey()
    for exc in survey.problems:
        yield PagingAddress(address="", where=exc.path, pages=[], error=str(exc))
    for address, locator in sorted(survey.stores.items()):
        yield from _page_entries(backend, address, locator, options)


def _page_entries(
    backend: PageBackend, address: str, locator: Hashable, options: DescribeOptions
) -> Iterator[Entry]:
    numbers = backend.page_numbers(locator)
    lost = "; ".join(str(exc) for exc in backend.problems(locator)) or None
    where = backend.page_path(locator, 1)[0]
    if isinstance(backend, FilePageBackend):
        where = backend.store_path(locator)
    yield PagingAddress(address=address, where=where, pages=numbers, error=lost)
    chosen = numbers if options.max_pages is None else numbers[: max(options.max_pages, 0)]
    highest = numbers[-1] if numbers else None
    for page in chosen:
        data = backend.read_bytes(locator, page) or b""
        path, _label = backend.page_path(locator, page)
        error = None
        torn = page == highest and backend.torn_tails
        bound = page_binding(address, page)
        try:
            payloads, _end = scan_page(data, path=path, torn_tail=torn, binding=bound)
        except CorruptionError as exc:
            error = f"{exc.reason} at offset {exc.offset}"
            before = data[: exc.offset or 0]
            payloads, _end = scan_page(before, path=path, torn_tail=False, binding=bound)
        yield Page(address=address, page=page, messages=len(payloads), size=len(data), error=error)
        for index, payload in enumerate(payloads):
            yield PagedMessage(
                address=address,
                page=page,
                index=index,
                size=len(payload) + FRAMING,
                decoded=decode_paged_message(payload, safe=options.safe),
            )


# -- file store --------------------------------------------------------------------------------


def file_paging(directory: str, options: DescribeOptions) -> Iterator[Entry]:
    """Every page store of ``directory`` (the paging folder), in address order, with its
    pages; what open refuses as entries with an ``error``. A missing folder has none. Raises
    StoreIOError when a file cannot be read."""
    yield from _paging_entries(FilePageBackend(directory), options)


def file_large_messages(directory: str) -> Iterator[Entry]:
    """Every ``<id>.msg`` (complete) and ``<id>.tmp`` (incomplete) body of ``directory``, by
    id. Each complete body is checked whole by the store's own reader (header, size, every
    chunk's checksum: :func:`_checked`), so a truncated or damaged one carries an ``error``.
    Raises OSError when the directory cannot be listed, StoreIOError when a body cannot be
    read."""
    if not os.path.isdir(directory):
        return
    lm = FileLargeMessages(directory, fs=OsFileSystem(), read_only=True)
    found = []
    for name in os.listdir(directory):
        stem, ext = os.path.splitext(name)
        if ext not in (large_files.MSG, large_files.TMP):
            continue
        try:
            message_id: int | None = int(stem)
        except ValueError:
            message_id = None
        found.append((message_id if message_id is not None else 0, name, message_id))
    for _key, name, message_id in sorted(found):
        complete = name.endswith(large_files.MSG)
        size: int | None = None
        error = None
        if complete and message_id is not None:
            size, error = _checked(lm, message_id)
        # An incomplete body's size is written only when it completes: None.
        yield LargeMessage(
            message_id=message_id, name=name, size=size, complete=complete, error=error
        )


def _checked(lm: LargeMessageStore, message_id: int) -> tuple[int | None, str | None]:
    """(size, error) of a complete body read whole: the size its header or descriptor
    records (None when that is damaged) and what is wrong with it (None: nothing)."""
    try:
        size = lm.size(message_id)
    except CorruptionError as exc:
        return None, f"{exc.reason} (at body offset {exc.offset})"
    try:
        check_body(lm, message_id)
    except CorruptionError as exc:
        return size, f"{exc.reason} (at body offset {exc.offset})"
    return size, None


# -- database store ----------------------------------------------------------------------------


def _existing(engine: Engine) -> set[str]:
    return {name.lower() for name in sa.inspect(engine).get_table_names()}


def database_paging(
    engine: Engine, schema: StoreSchema, options: DescribeOptions
) -> Iterator[Entry]:
    """Every page store of the database, in address order, with its pages; what open
    refuses as entries with an ``error``. Raises StoreUnavailableError when the database
    fails."""
    if schema.page_store.name.lower() not in _existing(engine):
        return
    backend = DatabasePageBackend(engine, schema, max_page_size=2**31, where=str(engine.url))
    yield from _paging_entries(backend, options)


def database_large_messages(engine: Engine, schema: StoreSchema) -> Iterator[Entry]:
    """Every body of the large-message table: complete ones (a descriptor row, each read
    whole by the store's own reader: :func:`_checked`) and incomplete ones (chunk rows
    without a descriptor), by id; a row whose filename or extension is NULL or not ours is
    an entry of its own with an ``error`` naming its row id. Raises SQLAlchemyError /
    StoreUnavailableError when the database fails."""
    t = schema.large_messages
    if t.name.lower() not in _existing(engine):
        return
    with engine.connect() as conn:
        rows = conn.execute(sa.select(t.c.id, t.c.filename, t.c.extension)).all()
        conn.rollback()
    complete: set[int] = set()
    chunk_rows: dict[int, int] = {}
    bad: list[LargeMessage] = []
    for row_id, filename, extension in rows:
        try:
            row = parse_row_name(t.name, row_id, filename, extension)
        except CorruptionError as exc:
            name = filename if isinstance(filename, str) else f"row id {row_id}"
            bad.append(
                LargeMessage(
                    message_id=None, name=name, size=None, complete=False, error=exc.reason
                )
            )
            continue
        if row.extension == MSG_EXTENSION:
            complete.add(row.message_id)
        else:
            chunk_rows[row.message_id] = chunk_rows.get(row.message_id, 0) + 1
    lm = DatabaseLargeMessages(engine, t, read_only=True)
    for mid in sorted(complete | chunk_rows.keys()):
        if mid in complete:
            size, error = _checked(lm, mid)
            yield LargeMessage(
                message_id=mid, name=msg_name(mid), size=size, complete=True, error=error
            )
        else:
            yield LargeMessage(
                message_id=mid, name=f"{mid}.*.chunk ({chunk_rows[mid]} chunk rows)", size=None,
                complete=False,
            )  # fmt: skip
    yield from bad
