"""Repairing a database store offline: ``store data repair`` on PostgreSQL, MariaDB/MySQL,
SQLite (and the JDBC databases) — the counterpart of :mod:`store.file.repair`.

:func:`repair_database` verifies the store first
(:func:`store.data.db_check.verify.verify_opened`, under the store lock), then removes what a
load ignores anyway — the rows of uncommitted transactions, dead rows, updates without an add
of the message journal's ref types, chunk rows of incomplete bodies, unlisted page tables and
the directory entries of missing ones — in one database transaction, and reports each removal
(table, seqs or row ids, count). A finding it cannot fix safely is refused as CorruptionError
naming table and seq: an undecodable live row or a row of an unknown record type only with
``force`` (it is deleted then, and reported); a schema problem or missing chunks always. It
returns a result dataclass and never prints.

Thread-safety: each call works alone on its store, under the store lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from store.config import StoreConfig
from store.data.db_check.verify import DatabaseVerifyReport, DbFinding, opened, verify_opened
from store.db.schema import StoreSchema
from store.errors import CorruptionError, SchemaError, StoreUnavailableError
from store.paging.database import DIRECTORY_ROW, decode_directory, encode_directory

__all__ = ["DatabaseRepairReport", "Removal", "repair_database"]

_CHUNK = 500


@dataclass(frozen=True, slots=True)
class Removal:
    """What :func:`repair_database` removed for one finding: ``count`` rows (journal ``seqs``
    or file-table row ids) of ``table``, or the table itself (``kind`` ``unlisted-page-table``)
    or a directory entry (``missing-page-table``). Immutable."""

    table: str
    kind: str
    count: int
    seqs: tuple[int, ...]
    message: str


@dataclass(frozen=True, slots=True)
class DatabaseRepairReport:
    """What :func:`repair_database` did; nothing when ``changed`` is False. Immutable."""

    where: str
    removed: list[Removal] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when the repair changed anything."""
        return bool(self.removed)


def repair_database(config: StoreConfig, *, force: bool = False) -> DatabaseRepairReport:
    """Remove from the database store what a load ignores anyway (module docstring), under
    the store lock, in one database transaction.

    ``force`` also deletes undecodable live rows and rows of unknown record types. Returns the
    :class:`DatabaseRepairReport`. Raises CorruptionError naming table and seq for a finding it
    will not fix (without ``force``: undecodable live rows, unknown record types; always:
    missing chunks), SchemaError for a schema problem, StoreLockedError naming the holder,
    ConfigError without a database store, StoreUnavailableError when the database fails.
    """
    with opened(config, lock=True) as (engine, schema, where):
        report = verify_opened(engine, schema, where, lease=config)
        _refuse(report, force)
        removals = [_removal(f) for f in report.findings if _fixable(f, force)]
        if not removals:
            return DatabaseRepairReport(where)
        try:
            with engine.begin() as conn:
                for f in report.findings:
                    if _fixable(f, force):
                        _apply(conn, schema, f)
        except sa.exc.SQLAlchemyError as exc:
            raise StoreUnavailableError(
                f"repair of the store at {where} failed (nothing was changed): "
                f"{type(exc).__name__}: {exc.__cause__ or exc}"
            ) from exc
        return DatabaseRepairReport(where, removals)


_REMOVABLE: Final = frozenset(
    (
        "uncommitted-transaction",
        "dead-rows",
        "incomplete-body",
        "unlisted-page-table",
        "missing-page-table",
    )
)
_FORCED: Final = frozenset(("undecodable", "bad-record-type"))


def _fixable(f: DbFinding, force: bool) -> bool:
    if f.kind == "update-without-add":
        return bool(f.seqs)
    return f.kind in _REMOVABLE or (force and f.kind in _FORCED)


def _refuse(report: DatabaseVerifyReport, force: bool) -> None:
    for f in report.errors:
        if f.kind == "schema":
            raise SchemaError(f"repair refused: {f.message}")
        if f.kind in _FORCED and force:
            continue
        hint = (
            "--force deletes the row (its record is lost; `store data print` shows it first)"
            if f.kind in _FORCED
            else "restore the rows from a backup: repair cannot bring lost data back"
        )
        raise CorruptionError(
            f.table,
            f.seq if f.seq is not None else 0,
            f"{f.kind}: {f.message}; repair refuses it",
            hint=hint,
        )


def _removal(f: DbFinding) -> Removal:
    if f.kind in ("unlisted-page-table", "missing-page-table"):
        what = (
            "dropped the table"
            if f.kind == "unlisted-page-table"
            else ("removed the table from the page directory")
        )
        return Removal(f.table, f.kind, 1, (), f"{what}: {f.message}")
    return Removal(
        f.table, f.kind, len(f.seqs), f.seqs, f"deleted {len(f.seqs)} row(s): {f.message}"
    )


def _apply(conn: Connection, schema: StoreSchema, f: DbFinding) -> None:
    if f.kind == "unlisted-page-table":
        schema.page_table(f.ids[0]).drop(conn)
        return
    if f.kind == "missing-page-table":
        d = schema.page_store
        row = conn.execute(
            sa.select(d.c.id, d.c.data).where(d.c.filename == DIRECTORY_ROW).order_by(d.c.id)
        ).first()
        if row is not None:
            left = decode_directory(bytes(row[1] or b"")) - {f.ids[0]}
            conn.execute(d.update().where(d.c.id == row[0]).values(data=encode_directory(left)))
        return
    if f.table == schema.large_messages.name:
        table, key = schema.large_messages, schema.large_messages.c.id
    else:
        table = schema.bindings if f.table == schema.bindings.name else schema.messages
        key = table.c.seq
    seqs = list(f.seqs)
    for start in range(0, len(seqs), _CHUNK):
        conn.execute(table.delete().where(key.in_(seqs[start : start + _CHUNK])))
