"""Page stores and large-message bodies for :func:`store.data.describe.describe_store`.

Page stores are read without the paging manager (it cleans up when it opens: crashed folders,
tables a directory row does not list; a print must not). Large bodies are read through the
large-message stores opened ``read_only`` (nothing cleaned), with the store's own header check
and reader (no second decoder), each complete body whole, so a truncated, damaged or misplaced
chunk is an ``error`` of its entry. The layouts read here are documented where they are
written: :mod:`store.paging.files`, :mod:`store.paging.database`, :mod:`store.paging.format`,
:mod:`store.large.files`, :mod:`store.large.database` and :mod:`store.db.schema`.

A page is read whole (at most ``page-size-bytes`` plus one record); the page being written
(the highest of an address) may end in a torn tail, which is ignored as a load ignores it.
Damage is reported in the :class:`~store.data.describe.Page` entry (after the messages before
it), never raised.

Thread-safety: one generator belongs to one thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from store.data.describe import (
    DescribeOptions,
    Entry,
    LargeMessage,
    Page,
    PagedMessage,
    PagingAddress,
)
from store.data.describe_records import decode_paged_message
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
from store.paging.database import ADDRESS_ROW, DIRECTORY_ROW, decode_directory
from store.paging.files import ADDRESS_FILE, TOMBSTONE_SUFFIX
from store.paging.format import FRAMING, page_file_name, page_number_of, scan_page

__all__ = [
    "database_large_messages",
    "database_paging",
    "file_large_messages",
    "file_paging",
]


def _page_entries(
    address: str,
    where: str,
    numbers: list[int],
    read: Callable[[int], bytes | None],
    options: DescribeOptions,
) -> Iterator[Entry]:
    yield PagingAddress(address=address, where=where, pages=numbers)
    chosen = numbers if options.max_pages is None else numbers[: max(options.max_pages, 0)]
    highest = numbers[-1] if numbers else None
    for page in chosen:
        data = read(page) or b""
        error = None
        try:
            payloads, _end = scan_page(data, path=where, torn_tail=page == highest)
        except CorruptionError as exc:
            error = f"{exc.reason} at offset {exc.offset}"
            payloads, _end = scan_page(data[: exc.offset or 0], path=where, torn_tail=False)
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


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def file_paging(directory: str, options: DescribeOptions) -> Iterator[Entry]:
    """Every address folder of ``directory`` (the paging folder) that holds ``address.txt``,
    in address order, with its pages. A missing folder has none. Raises OSError when a file
    cannot be read."""
    if not os.path.isdir(directory):
        return
    found = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name.endswith(TOMBSTONE_SUFFIX) or not os.path.isdir(path):
            continue
        raw = _read(os.path.join(path, ADDRESS_FILE))
        if raw is None:
            continue
        text = raw.decode("utf-8", errors="replace")
        found.append((text[:-1] if text.endswith("\n") else text, path))
    for address, path in sorted(found):
        numbers = sorted(n for n in map(page_number_of, os.listdir(path)) if n is not None)

        def read(page: int, path: str = path) -> bytes | None:
            return _read(os.path.join(path, page_file_name(page)))

        yield from _page_entries(address, path, numbers, read, options)


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
    """Every address the page directory lists whose table exists, in address order, with its
    pages. Raises SQLAlchemyError when the database fails."""
    existing = _existing(engine)
    d = schema.page_store
    if d.name.lower() not in existing:
        return
    with engine.connect() as conn:
        row = conn.execute(
            sa.select(d.c.data).where(d.c.filename == DIRECTORY_ROW).order_by(d.c.id)
        ).first()
        suffixes = decode_directory(bytes(row[0] or b"")) if row is not None else set()
        found = []
        for suffix in sorted(suffixes):
            table = schema.page_table(suffix)
            if table.name.lower() not in existing:
                continue
            address_row = conn.execute(
                sa.select(table.c.data).where(table.c.filename == ADDRESS_ROW)
            ).first()
            if address_row is None:
                continue
            found.append((bytes(address_row[0] or b"").decode("utf-8", "replace"), table))
        conn.rollback()
    for address, table in sorted(found, key=lambda item: item[0]):
        with engine.connect() as conn:
            names = conn.execute(
                sa.select(table.c.filename).where(table.c.extension == "page").distinct()
            ).scalars()
            numbers = sorted(n for n in (page_number_of(x or "") for x in names) if n is not None)
            conn.rollback()

        def read(page: int, table: Any = table) -> bytes | None:
            with engine.connect() as conn:
                rows = conn.execute(
                    sa.select(table.c.data)
                    .where(table.c.filename == page_file_name(page))
                    .order_by(table.c.id)
                ).all()
                conn.rollback()
            return b"".join(bytes(r[0] or b"") for r in rows) if rows else None

        yield from _page_entries(address, f"table {table.name}", numbers, read, options)


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
