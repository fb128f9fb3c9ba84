"""Page stores and large-message bodies for :func:`store.data.describe.describe_store`, read
without the paging manager or the large-message store (both clean up when they open: they
remove crashed folders, tables a directory row does not list, incomplete bodies; a print must
not). The layouts read here are documented where they are written: :mod:`store.paging.files`,
:mod:`store.paging.database`, :mod:`store.paging.format`, :mod:`store.large.files`,
:mod:`store.large.database` and :mod:`store.db.schema`.

A page is read whole (at most ``page-size-bytes`` plus one record); the page being written
(the highest of an address) may end in a torn tail, which is ignored as a load ignores it.
Damage is reported in the :class:`~store.data.describe.Page` entry (after the messages before
it), never raised.

Thread-safety: one generator belongs to one thread.
"""

from __future__ import annotations

import os
import zlib
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
from store.large import files as large_files
from store.large.database import decode_descriptor
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
    id. Raises OSError when a file cannot be read."""
    if not os.path.isdir(directory):
        return
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
        path = os.path.join(directory, name)
        complete = name.endswith(large_files.MSG)
        size: int | None = None
        error = None
        if complete:
            size, error = _file_body_size(path, message_id)
        # An incomplete body's size is written only when it completes: None.
        yield LargeMessage(
            message_id=message_id, name=name, size=size, complete=complete, error=error
        )


def _file_body_size(path: str, message_id: int | None) -> tuple[int | None, str | None]:
    with open(path, "rb") as f:
        head = f.read(large_files.HEADER_SIZE)
    if len(head) < large_files.HEADER_SIZE:
        return None, f"file of {len(head)} bytes has no complete header"
    magic, _version, _reserved, _chunk, body_size, stored_id = large_files.HEADER.unpack_from(head)
    (crc,) = large_files.HEADER_CRC.unpack_from(head, large_files.HEADER.size)
    if magic != large_files.MAGIC or crc != zlib.crc32(head[: large_files.HEADER.size]):
        return None, "header fails its magic or checksum"
    if stored_id != message_id:
        return int(body_size), f"header names message {stored_id}"
    return int(body_size), None


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
    """Every body of the large-message table: complete ones (a descriptor row) and
    incomplete ones (chunk rows without a descriptor), by id. Raises SQLAlchemyError."""
    t = schema.large_messages
    if t.name.lower() not in _existing(engine):
        return
    with engine.connect() as conn:
        descriptors = conn.execute(
            sa.select(t.c.filename, t.c.data).where(t.c.extension == "msg")
        ).all()
        chunk_names = conn.execute(
            sa.select(t.c.filename).where(t.c.extension == "chunk")
        ).scalars()
        chunk_ids: dict[int, int] = {}
        for name in chunk_names:
            head = (name or "").split(".", 1)[0]
            try:
                mid = int(head)
            except ValueError:
                continue
            chunk_ids[mid] = chunk_ids.get(mid, 0) + 1
        conn.rollback()
    entries: dict[int, LargeMessage] = {}
    for name, data in descriptors:
        try:
            mid = int((name or "").split(".", 1)[0])
        except ValueError:
            continue
        try:
            size = decode_descriptor(f"{t.name} {name}", mid, data).body_size
            entries[mid] = LargeMessage(message_id=mid, name=name, size=size, complete=True)
        except CorruptionError as exc:
            entries[mid] = LargeMessage(
                message_id=mid, name=name, size=None, complete=True, error=exc.reason
            )
    for mid, count in chunk_ids.items():
        if mid not in entries:
            entries[mid] = LargeMessage(
                message_id=mid, name=f"{mid}.*.chunk ({count} chunk rows)", size=None,
                complete=False,
            )  # fmt: skip
    for mid in sorted(entries):
        yield entries[mid]
