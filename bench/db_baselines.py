"""Raw-driver baselines for the database store, on the journal's own table shape.

What the database store is judged against, measured with the drivers alone (no store code on
the write or read path; the table is created by the store's migration so the shape, the
primary key on ``seq`` and the two indexes are the same as the store's):

* ``one commit per record``: one INSERT and one COMMIT per row, one thread;
* ``executemany, batches of 1000``: the driver's ``executemany`` of 1,000 rows, then COMMIT
  (PyMySQL turns it into multi-row INSERTs, psycopg into a pipeline);
* ``COPY, batches of 1000`` (PostgreSQL): binary ``COPY`` of 1,000 rows, then COMMIT;
* ``read``: the whole table in ``seq`` order, through a binary server-side cursor
  (PostgreSQL), an unbuffered ``SSCursor`` (PyMySQL) or a plain cursor (SQLite), fetched
  10,000 rows at a time, every row touched.

Rows are 100-byte records, like the store's benchmark. Run on its own:
``python -m bench.db_baselines --database postgresql`` (or ``mariadb``, ``sqlite``);
``bench.db_bench`` runs these in the same process before its own figures.

Thread-safety: single-threaded; each function owns its connection.
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

import sqlalchemy as sa

from bench.common import (
    Result,
    add_common_arguments,
    configure,
    console,
    machine_info,
    median_rate,
    print_machine,
    print_results,
)
from store import StoreConfig

__all__ = ["BODY", "baselines", "fill", "raw_read_rate"]

BODY = b"r" * 100
_COLUMNS = "id, recordtype, txid, userrecordtype, variablesize, record, txdatasize, txdata, seq"


def _row(seq: int) -> tuple[Any, ...]:
    return (seq, 11, 0, 45, len(BODY), BODY, 0, None, seq)


def _raw(engine: sa.Engine) -> Any:
    return engine.raw_connection()


def _placeholders(dialect: str) -> str:
    mark = "?" if dialect == "sqlite" else "%s"
    return ", ".join([mark] * 9)


def one_commit_rate(engine: sa.Engine, table: str, seconds: float, start: int) -> float:
    """Rows/s of INSERT + COMMIT per row."""
    raw = _raw(engine)
    conn = raw.driver_connection
    sql = f"INSERT INTO {table} ({_COLUMNS}) VALUES ({_placeholders(engine.dialect.name)})"
    counter = itertools.count(start)
    try:
        cur = conn.cursor()
        n = 0
        t0 = time.perf_counter()
        deadline = t0 + seconds
        while time.perf_counter() < deadline:
            if engine.dialect.name == "sqlite":
                conn.execute("BEGIN")
            cur.execute(sql, _row(next(counter)))
            conn.commit()
            n += 1
        return n / (time.perf_counter() - t0)
    finally:
        raw.close()


def executemany_rate(engine: sa.Engine, table: str, seconds: float, start: int) -> float:
    """Rows/s of executemany of 1,000 rows + COMMIT."""
    raw = _raw(engine)
    conn = raw.driver_connection
    sql = f"INSERT INTO {table} ({_COLUMNS}) VALUES ({_placeholders(engine.dialect.name)})"
    counter = itertools.count(start)
    try:
        cur = conn.cursor()
        n = 0
        t0 = time.perf_counter()
        deadline = t0 + seconds
        while time.perf_counter() < deadline:
            rows = [_row(next(counter)) for _ in range(1000)]
            if engine.dialect.name == "sqlite":
                conn.execute("BEGIN")
            cur.executemany(sql, rows)
            conn.commit()
            n += 1000
        return n / (time.perf_counter() - t0)
    finally:
        raw.close()


def copy_rate(engine: sa.Engine, table: str, seconds: float, start: int) -> float:
    """Rows/s of binary COPY of 1,000 rows + COMMIT (PostgreSQL)."""
    raw = _raw(engine)
    conn = raw.driver_connection
    counter = itertools.count(start)
    types = ["int8", "int2", "int8", "int2", "int4", "bytea", "int4", "bytea", "int8"]
    try:
        cur = conn.cursor()
        n = 0
        t0 = time.perf_counter()
        deadline = t0 + seconds
        while time.perf_counter() < deadline:
            with cur.copy(f"COPY {table} ({_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(types)
                for _ in range(1000):
                    copy.write_row(_row(next(counter)))
            conn.commit()
            n += 1000
        return n / (time.perf_counter() - t0)
    finally:
        raw.close()


def _chunks(engine: sa.Engine, conn: Any, sql: str) -> Iterator[list[Any]]:
    name = engine.dialect.name
    if name == "postgresql":
        cur = conn.cursor(name="bench_read", binary=True)
        cur.itersize = 10_000
    elif name in ("mysql", "mariadb"):
        import pymysql.cursors  # type: ignore[import-untyped]

        cur = conn.cursor(pymysql.cursors.SSCursor)
    else:
        cur = conn.cursor()
    cur.execute(sql)
    while rows := cur.fetchmany(10_000):
        yield rows
    cur.close()


def raw_read_rate(engine: sa.Engine, table: str) -> tuple[float, int]:
    """(rows/s, rows) of reading the whole table in seq order, touching every row."""
    raw = _raw(engine)
    conn = raw.driver_connection
    columns = "id, recordtype, txid, userrecordtype, record, txdata, seq"
    sql = f"SELECT {columns} FROM {table} ORDER BY seq"
    try:
        n = 0
        total = 0
        t0 = time.perf_counter()
        for rows in _chunks(engine, conn, sql):
            for row in rows:
                total += len(row[4])
            n += len(rows)
        elapsed = time.perf_counter() - t0
        conn.rollback()
        return n / elapsed, n
    finally:
        raw.close()


def fill(engine: sa.Engine, table: str, rows: int, *, start: int = 1) -> None:
    """Put ``rows`` 100-byte add rows into ``table`` (seq and id from ``start``), fast."""
    raw = _raw(engine)
    conn = raw.driver_connection
    name = engine.dialect.name
    try:
        cur = conn.cursor()
        batch = 10_000
        for first in range(start, start + rows, batch):
            last = min(first + batch, start + rows)
            if name == "postgresql":
                types = ["int8", "int2", "int8", "int2", "int4", "bytea", "int4", "bytea", "int8"]
                with cur.copy(f"COPY {table} ({_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
                    copy.set_types(types)
                    for seq in range(first, last):
                        copy.write_row(_row(seq))
            else:
                if name == "sqlite":
                    conn.execute("BEGIN")
                sql = f"INSERT INTO {table} ({_COLUMNS}) VALUES ({_placeholders(name)})"
                cur.executemany(sql, [_row(seq) for seq in range(first, last)])
            conn.commit()
        if name == "postgresql":
            conn.autocommit = True
            cur.execute(f"VACUUM ANALYZE {table}")
            conn.autocommit = False
    finally:
        raw.close()


def baselines(engine: sa.Engine, table: str, *, seconds: float, repeat: int) -> dict[str, Result]:
    """Every write baseline of this database, on ``table`` (emptied between figures).

    Returns {figure name: Result}.
    """
    counter = itertools.count(1, 10_000_000)
    out: dict[str, Result] = {}
    figures: list[tuple[str, Callable[..., float]]] = [
        ("one commit per record", one_commit_rate),
        ("executemany, batches of 1000", executemany_rate),
    ]
    if engine.dialect.name == "postgresql":
        figures.append(("COPY, batches of 1000", copy_rate))
    for name, fn in figures:
        out[name] = median_rate(
            name,
            lambda fn=fn: fn(engine, table, seconds, next(counter)),
            repeat=repeat,
            unit="rows/s",
        )
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DELETE FROM {table}")
    return out


def main() -> None:
    from bench.db_bench import bench_store, database_config

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument(
        "--database", default="postgresql", choices=["postgresql", "mariadb", "sqlite"]
    )
    args = parser.parse_args()
    configure(args)
    out = console()
    print_machine(machine_info(args.dir), out)
    config: StoreConfig = database_config(args.database, args.dir)
    with bench_store(config) as (engine, names):
        results = baselines(engine, names.messages, seconds=args.seconds, repeat=args.repeat)
        fill(engine, names.messages, 200_000)
        rate, rows = raw_read_rate(engine, names.messages)
        results["read"] = Result("read", rate, "rows/s", (rate,), note=f"{rows:,} rows")
    print_results(f"raw {args.database} baselines", list(results.values()), out)


if __name__ == "__main__":
    main()
