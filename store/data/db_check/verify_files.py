"""``store data verify`` on a database store's file tables: the large-message table (every
descriptor, its chunk rows and its body read whole by the store's own reader) and the page
store (its directory against the page tables the database holds). Part of
:mod:`store.data.db_check.verify`, whose docstring lists the findings.

Thread-safety: each call works alone on its store (the caller holds the store lock).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from store.data.db_check.report import ERROR, WARNING, DbFinding, TableSummary, ids_text
from store.db.schema import StoreSchema
from store.errors import CorruptionError
from store.large.api import check_body
from store.large.database import (
    MSG_EXTENSION,
    DatabaseLargeMessages,
    chunk_name,
    decode_descriptor,
    parse_row_name,
)
from store.paging.database import DIRECTORY_ROW, TOMBSTONE_ROW, decode_directory
from store.paging.format import page_number_of

__all__ = ["scan_large", "scan_pages"]


class _LargeRows:
    """The large-message table's rows by message: descriptors, chunk rows, bad rows."""

    __slots__ = ("bad", "chunks", "descriptors", "rows")

    def __init__(self) -> None:
        self.descriptors: dict[int, tuple[int, Any]] = {}  # message id -> (row id, data)
        self.chunks: dict[int, dict[str, int]] = {}  # message id -> filename -> row id
        self.bad: list[DbFinding] = []
        self.rows = 0


def _read_large(engine: Engine, table: sa.Table) -> _LargeRows:
    c = table.c
    found = _LargeRows()
    with engine.connect() as conn:
        for row_id, filename, extension, data in conn.execute(
            sa.select(c.id, c.filename, c.extension, c.data).order_by(c.id)
        ):
            found.rows += 1
            try:
                row = parse_row_name(table.name, row_id, filename, extension)
            except CorruptionError as exc:
                found.bad.append(DbFinding(ERROR, "bad-row", table.name, int(row_id), exc.reason))
                continue
            if row.extension == MSG_EXTENSION:
                found.descriptors[row.message_id] = (int(row_id), data)
            else:
                found.chunks.setdefault(row.message_id, {})[filename] = int(row_id)
    return found


def scan_large(
    engine: Engine, table: sa.Table, live_large: set[int]
) -> tuple[TableSummary, list[DbFinding]]:
    """Check the large-message ``table``: every descriptor, its chunks and its body read
    whole by the store's own reader, chunk rows without a descriptor, and a body for every
    id of ``live_large`` (the live large messages of the message journal)."""
    found = _read_large(engine, table)
    descriptors, chunks, rows = found.descriptors, found.chunks, found.rows
    name = table.name
    findings: list[DbFinding] = found.bad
    reader = DatabaseLargeMessages(engine, table, read_only=True)
    for owner in sorted(set(chunks) - set(descriptors)):
        ids = sorted(chunks[owner].values())
        findings.append(
            DbFinding(
                WARNING,
                "incomplete-body",
                name,
                ids[0],
                f"message {owner}: {len(ids)} chunk row(s) without a descriptor (a body "
                "cut off by a crash); the next open deletes them",
                tuple(ids),
                (owner,),
            )
        )
    for owner, (row_id, data) in sorted(descriptors.items()):
        problem = _body_problem(reader, name, owner, row_id, data, chunks.get(owner, {}))
        if problem is not None:
            findings.append(problem)
    for owner in sorted(live_large - set(descriptors)):
        findings.append(
            DbFinding(
                ERROR,
                "large-body-missing",
                name,
                None,
                f"large message {owner} is live in the message journal but its body has "
                "no rows here",
                (),
                (owner,),
            )
        )
    return TableSummary(name, "large messages", rows), findings


def _body_problem(
    reader: DatabaseLargeMessages,
    name: str,
    owner: int,
    row_id: int,
    data: Any,
    have: dict[str, int],
) -> DbFinding | None:
    """What is wrong with the body of message ``owner`` (descriptor row ``row_id`` holding
    ``data``, chunk rows ``have`` by name): an undecodable descriptor or missing chunks, or a
    body the store's reader cannot read whole; None when it reads."""
    try:
        count = decode_descriptor(f"{name} row {row_id}", owner, data).chunk_count
    except CorruptionError as exc:
        return DbFinding(
            ERROR,
            "missing-chunks",
            name,
            row_id,
            f"message {owner}: {exc.reason}",
            (row_id,),
            (owner,),
        )
    missing = [k for k in range(count) if chunk_name(owner, k) not in have]
    if missing:
        return DbFinding(
            ERROR,
            "missing-chunks",
            name,
            row_id,
            f"message {owner}: chunk(s) {ids_text(missing)} of {count} missing: "
            "the body cannot be read",
            (row_id,),
            (owner,),
        )
    try:
        check_body(reader, owner)
    except CorruptionError as exc:
        return DbFinding(
            ERROR,
            "damaged-body",
            name,
            row_id,
            f"message {owner}: {exc.reason} (at body offset {exc.offset})",
            (row_id,),
            (owner,),
        )
    return None


def scan_pages(engine: Engine, schema: StoreSchema) -> tuple[list[TableSummary], list[DbFinding]]:
    """Check the page store: its directory row against the page tables the database holds."""
    d = schema.page_store
    prefix = schema.names.page_store
    with engine.connect() as conn:
        rows = conn.execute(sa.select(d.c.id, d.c.filename, d.c.data).order_by(d.c.id)).all()
        existing = set()
        for table_name in sa.inspect(conn).get_table_names():
            rest = table_name.lower()[len(prefix) :]
            if table_name.lower().startswith(prefix) and rest.isdigit():
                existing.add(int(rest))
        directory = [row for row in rows if row[1] == DIRECTORY_ROW]
        findings: list[DbFinding] = []
        listed: set[int] = set()
        if directory:
            try:
                listed = decode_directory(bytes(directory[0][2] or b""))
            except ValueError as exc:
                findings.append(
                    DbFinding(
                        ERROR,
                        "bad-directory",
                        d.name,
                        int(directory[0][0]),
                        f"the page directory does not decode: {exc}",
                    )
                )
        summaries = [TableSummary(d.name, "page store", len(rows))]
        for suffix in sorted(listed - existing):
            findings.append(
                DbFinding(
                    ERROR,
                    "missing-page-table",
                    f"{prefix}{suffix}",
                    None,
                    f"the page directory lists table {prefix}{suffix}, which does not "
                    "exist: a load ignores it (its paged messages are gone)",
                    (),
                    (suffix,),
                )
            )
        for suffix in sorted(existing - listed):
            table = schema.page_table(suffix)
            names = set(conn.execute(sa.select(table.c.filename).distinct()).scalars())
            pages = {n for n in names if n is None or page_number_of(n) is not None}
            if pages and TOMBSTONE_ROW not in names:  # store.paging.database: kept, reported
                findings.append(
                    DbFinding(
                        ERROR,
                        "unlisted-page-table-with-pages",
                        table.name,
                        None,
                        f"page table {table.name} holds page rows but the page directory does "
                        "not list it: open refuses the store (`store data repair "
                        "--adopt-pages` or `--remove-pages`)",
                    )
                )
                continue
            findings.append(
                DbFinding(
                    WARNING,
                    "unlisted-page-table",
                    f"{prefix}{suffix}",
                    None,
                    f"page table {prefix}{suffix} is not in the page directory (a crash "
                    "while it was created or removed): the next open drops it",
                    (),
                    (suffix,),
                )
            )
        for suffix in sorted(listed & existing):
            table = schema.page_table(suffix)
            count = conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() or 0
            summaries.append(TableSummary(table.name, "pages", int(count)))
        conn.rollback()
    return summaries, findings
