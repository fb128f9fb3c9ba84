"""The database store, through the public API, beside raw-driver baselines measured in the same
run on the same table shape (:mod:`bench.db_baselines`).

Figures (rows per second), per database (``--database postgresql mariadb sqlite``):

* ``durable append, 64 threads``: 64 threads calling ``messages.append_add(id, 45, 100 B,
  sync=True)`` in a loop on one store (the group commit shares commits between them);
* ``durable append, 1 thread``: the same from one thread (one commit per record at best);
* ``non-blocking durable, 1,000 in flight``: one producer calling ``append_add(sync=False)``
  and ``sync_future()`` per record, keeping up to 1,000 futures unfinished; counts records
  whose future completed (the group commit without 64 blocked threads to wake);
* ``load``: a messages table of ``--load-rows`` rows (default 1,000,000, written with the raw
  driver) is opened with ``open_store`` and ``messages.load()`` is timed: the streaming read
  plus the replay into a LoadResult; ``raw read`` is the bare driver reading the same table.

Targets (from the issue; the comparison table says "meets" or "misses", it never fails):
PostgreSQL 64-thread durable appends at least 25x ``one commit per record`` and at least 30%
of ``COPY, batches of 1000``; load at least 400,000 rows/s on PostgreSQL and 150,000 on
MariaDB. Artemis reports 1,000-2,000 rows/s for its start-up reconciliation (seed 004).

Each run uses its own tables (prefix ``bench<hex>_``) created by the store's migration and
dropped at the end. Servers as in tests/support/db_backends.py (``STORE_TEST_POSTGRESQL_URL`` …);
SQLite lives under ``--dir``.

Run: ``python -m bench.db_bench [--database postgresql mariadb sqlite] [--seconds S]
[--repeat K] [--load-rows N] [--markdown FILE] [--json FILE]``.

Thread-safety: the store's journal is shared by the worker threads, as the contract allows;
everything else runs on the main thread.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench.common import (
    Result,
    add_common_arguments,
    configure,
    console,
    machine_info,
    markdown_table,
    median_rate,
    print_machine,
    print_results,
    results_markdown,
    run_threads,
    write_json,
    write_markdown,
)
from bench.db_baselines import BODY, baselines, fill, raw_read_rate
from store import StoreConfig, open_store
from store.db.engine import create_store_engine, dispose_store_engine
from store.db.migrate import drop_schema, upgrade
from store.db.schema import TableNames

__all__ = ["bench_store", "database_config", "main"]


def database_config(which: str, data_dir: Path) -> StoreConfig:
    """A store configuration on ``which`` with fresh bench table names."""
    from tests.support.db_backends import mysql_url, postgresql_url, store_mapping

    prefix = f"bench{uuid.uuid4().hex[:6]}_"
    if which == "postgresql":
        url, user, password = postgresql_url()
    elif which == "mariadb":
        url, user, password = mysql_url()
    else:
        data_dir.mkdir(parents=True, exist_ok=True)
        url, user, password = f"jdbc:sqlite:{data_dir / (prefix + 'store.db')}", None, None
    return StoreConfig.from_mapping(store_mapping(url, prefix, user=user, password=password))


@contextlib.contextmanager
def bench_store(config: StoreConfig) -> Iterator[tuple[sa.Engine, TableNames]]:
    """Create the store's tables, yield (a side engine, the table names), drop them."""
    assert config.database_store is not None
    upgrade(config)
    engine = create_store_engine(config.database_store)[0]
    try:
        yield engine, TableNames.from_config(config.database_store)
    finally:
        dispose_store_engine(engine)
        drop_schema(config)


def _empty(engine: sa.Engine, table: str) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DELETE FROM {table}")


def durable_rate(config: StoreConfig, threads: int, seconds: float, ids: Any) -> float:
    """Rows/s of sync appends from ``threads`` threads on a freshly opened store."""
    with open_store(config) as store:
        store.bindings.load()
        journal = store.messages
        journal.load()

        def worker(stop: threading.Event) -> int:
            n = 0
            while not stop.is_set():
                journal.append_add(next(ids), 45, BODY, sync=True)
                n += 1
            return n

        return run_threads(threads, seconds, worker)


def non_blocking_rate(config: StoreConfig, seconds: float, ids: Any) -> float:
    """Rows/s made durable by one producer keeping up to 1,000 sync futures in flight."""
    with open_store(config) as store:
        store.bindings.load()
        journal = store.messages
        journal.load()
        inflight: collections.deque[Any] = collections.deque()
        done = 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            for _ in range(100):
                journal.append_add(next(ids), 45, BODY)
                inflight.append(journal.sync_future())
            while len(inflight) > 1000:
                inflight.popleft().result()
                done += 1
            while inflight and inflight[0].done():
                inflight.popleft()
                done += 1
        while inflight:
            inflight.popleft().result()
            done += 1
        return done / (time.perf_counter() - start)


def load_rate(config: StoreConfig) -> tuple[float, int]:
    """(rows/s, records) of ``messages.load()`` on the filled table."""
    with open_store(config) as store:
        store.bindings.load()
        t0 = time.perf_counter()
        loaded = store.messages.load()
        elapsed = time.perf_counter() - t0
        return len(loaded.records) / elapsed, len(loaded.records)


def _verdict(ok: bool) -> str:
    return "meets" if ok else "misses"


def run_database(which: str, args: argparse.Namespace) -> tuple[list[Result], list[list[str]]]:
    """Every figure of one database and its comparison rows."""
    config = database_config(which, args.dir)
    ids = itertools.count(1)
    with bench_store(config) as (engine, names):
        table = names.messages
        base = baselines(engine, table, seconds=args.seconds, repeat=args.repeat)
        ours: dict[str, Result] = {}
        for threads in (64, 1):
            name = f"durable append, {threads} thread{'s' if threads > 1 else ''}"
            ours[name] = median_rate(
                name,
                lambda threads=threads: durable_rate(config, threads, args.seconds, ids),
                repeat=args.repeat,
                unit="rows/s",
            )
            _empty(engine, table)
        name = "non-blocking durable, 1,000 in flight"
        ours[name] = median_rate(
            name,
            lambda: non_blocking_rate(config, args.seconds, ids),
            repeat=args.repeat,
            unit="rows/s",
        )
        _empty(engine, table)
        fill(engine, table, args.load_rows)
        raw_rate, rows = raw_read_rate(engine, table)
        base["raw read"] = Result("raw read", raw_rate, "rows/s", (raw_rate,), f"{rows:,} rows")
        loads = [load_rate(config) for _ in range(max(1, args.repeat))]
        rates = sorted(r for r, _ in loads)
        ours["load"] = Result(
            "load", rates[len(rates) // 2], "rows/s", tuple(rates), f"{loads[0][1]:,} records"
        )
    results = [*(r for r in base.values()), *ours.values()]
    rows_out = _comparisons(which, base, ours)
    return results, rows_out


# (our figure, reference figure, how the ratio reads, target on PostgreSQL, target test)
_WRITE_COMPARISONS: list[tuple[str, str, str, str, Any]] = [
    ("durable append, 64 threads", "one commit per record", "x", "≥ 25x", lambda r: r >= 25),
    ("durable append, 64 threads", "COPY, batches of 1000", "%", "≥ 30%", lambda r: r >= 0.30),
    ("durable append, 64 threads", "executemany, batches of 1000", "%", "", None),
    ("non-blocking durable, 1,000 in flight", "one commit per record", "x", "", None),
    ("non-blocking durable, 1,000 in flight", "COPY, batches of 1000", "%", "", None),
]
_LOAD_TARGETS = {"postgresql": 400_000, "mariadb": 150_000}


def _comparisons(which: str, base: dict[str, Result], ours: dict[str, Result]) -> list[list[str]]:
    rows: list[list[str]] = []
    for mine, theirs, kind, target, meets in _WRITE_COMPARISONS:
        if theirs not in base:
            continue
        a, b = ours[mine].value, base[theirs].value
        ratio = a / b
        shown = f"{ratio:.1f}x" if kind == "x" else f"{ratio:.0%}"
        judged = which == "postgresql" and meets is not None
        rows.append(
            [
                which,
                f"{mine} vs {theirs}",
                f"{a:,.0f}",
                f"{b:,.0f}",
                shown,
                target if judged else "(recorded)",
                _verdict(meets(ratio)) if judged else "",
            ]
        )
    load, raw = ours["load"].value, base["raw read"].value
    goal = _LOAD_TARGETS.get(which)
    rows.append(
        [
            which,
            "load vs raw read",
            f"{load:,.0f}",
            f"{raw:,.0f}",
            f"{load / raw:.0%}",
            f"≥ {goal:,} rows/s" if goal else "(recorded)",
            _verdict(load >= goal) if goal else "",
        ]
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument(
        "--database",
        nargs="+",
        default=["postgresql", "mariadb", "sqlite"],
        choices=["postgresql", "mariadb", "sqlite"],
    )
    parser.add_argument("--load-rows", type=int, default=1_000_000)
    args = parser.parse_args()
    configure(args)
    out = console()
    info = machine_info(args.dir)
    print_machine(info, out)
    tables: list[tuple[str, str]] = []
    comparisons: list[list[str]] = []
    sections: dict[str, Any] = {}
    for which in args.database:
        results, rows = run_database(which, args)
        print_results(
            f"{which}: ours and raw-driver baselines (same run, same table)", results, out
        )
        tables.append((f"{which}: ours and raw-driver baselines", results_markdown(results)))
        comparisons += rows
        sections[which] = results
    header = ("database", "comparison", "ours", "reference", "ratio", "target", "")
    text = markdown_table(header, comparisons, right=(2, 3, 4))
    out.print(text)
    tables.append(("Comparison with the targets", text))
    if args.markdown:
        write_markdown(args.markdown, info, tables)
    if args.json:
        write_json(args.json, info, sections)


if __name__ == "__main__":
    main()
