"""``store report``'s library call: read a store, run every job, write the report.

:func:`run_report` writes into ``out``: one Parquet dataset per job (``queue_depths/``,
``record_types/``, ``message_ages/``, ``address_bytes/``, ``dead_records/``,
``large_messages/``, ``page_stores/``, and ``audit/`` for a history), PNG charts and a static
``index.html`` showing the tables and the charts (:mod:`store.reporting.html`). It returns a
:class:`ReportSummary` and never prints; progress goes to an optional callback.

Thread-safety: one call at a time per SparkSession.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from store.config import DatabaseStoreConfig, StoreConfig, db_dialect_of
from store.errors import ConfigError, StoreError, StoreUnavailableError
from store.reporting import jobs, schemas, sources
from store.reporting.html import write_charts, write_index

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "AuditWindow",
    "Progress",
    "ReportSource",
    "ReportSummary",
    "check_source",
    "run_report",
]

#: ``(step, done, total)``: called before each step and once at the end (done == total).
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True, kw_only=True)
class AuditWindow:
    """Which messages of a history the audit lists: ``address`` (None: every address) and
    ``start_ms <= timestamp < end_ms`` (None: unbounded), ms since the epoch (UTC)."""

    address: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None


@dataclass(frozen=True, kw_only=True)
class ReportSource:
    """What a report reads: a store ``config`` (file or database store), or a file journal
    by folders (``journal``: the message journal; ``bindings`` and ``paging`` default to the
    sibling folders of those names), and/or a retention ``history`` folder (the audit).

    ``jdbc``: how database tables are read. Thread-safety: immutable.
    """

    config: StoreConfig | None = None
    journal: str | None = None
    bindings: str | None = None
    paging: str | None = None
    history: str | None = None
    jdbc: sources.JdbcRead = field(default_factory=sources.JdbcRead)

    def describe(self) -> str:
        """A one-line, password-free description of the source. Raises nothing."""
        if self.config is not None and self.config.database_store is not None:
            return f"database {self.config.database_store.jdbc_connection_url.split('?')[0]}"
        if self.config is not None:
            return f"file store {self.config.journal_directory}"
        if self.journal is not None:
            return f"file journal {self.journal}"
        return f"history {self.history}"


@dataclass(frozen=True)
class ReportSummary:
    """What a report found and wrote: the source, queues, messages on them and their bytes,
    records read and live, the rows of every dataset, the files written, and how long it
    took (seconds)."""

    out: str
    source: str
    queues: int
    messages: int
    bytes: int
    records_read: int
    live_records: int
    datasets: dict[str, int]
    charts: list[str]
    seconds: float


def check_source(source: ReportSource) -> None:
    """Check, before Spark starts, that ``source`` can be read: its folders exist and its
    database answers. A report of nothing is refused rather than written empty, and an
    unreachable database is one line rather than a Spark traceback, in a second rather than
    after Spark's JDBC retries.

    The database is probed with the store's own Python driver where this install has it
    (PostgreSQL, MySQL/MariaDB, SQLite); other JDBC databases and a missing driver are left to
    Spark, whose JVM must not share the process with a second one. Returns None. Raises
    ConfigError naming the option and folder that does not exist (or a source naming
    nothing), StoreUnavailableError when the database cannot be reached, does not exist or
    refuses the login.
    """
    config = source.config
    folders: list[tuple[str, str | None]] = [("--history", source.history)]
    if config is not None and config.database_store is not None:
        _probe_database(config.database_store)
    elif config is not None:
        folders.append(("journal-directory", config.journal_directory))
    else:
        folders += [("--journal", source.journal), ("--bindings", source.bindings)]
        folders.append(("--paging", source.paging))
        if source.journal is None and source.history is None:
            raise ConfigError(
                "a report needs a store: --config, --jdbc-url, --journal or --history"
            )
    for option, folder in folders:
        if folder is not None and not os.path.isdir(folder):
            what = "is not a folder" if os.path.exists(folder) else "does not exist"
            raise ConfigError(
                f"{option}: {folder} {what}", key=option, value=folder, allowed="a folder"
            )


#: The Python driver module the probe needs, by dialect (sqlite3 is always there).
_PROBE_DRIVERS = {"postgresql": "psycopg", "mysql": "pymysql", "sqlite": None}


def _probe_database(db: DatabaseStoreConfig) -> None:
    import importlib.util

    dialect = db_dialect_of(db.jdbc_connection_url)
    if dialect not in _PROBE_DRIVERS:
        return
    module = _PROBE_DRIVERS[dialect]
    try:
        if module is not None and importlib.util.find_spec(module) is None:
            return
    except ImportError:
        return
    from store.db.engine import create_store_engine, dispose_store_engine

    engine, target = create_store_engine(db)
    try:
        if target.sqlite_path is not None and not os.path.isfile(target.sqlite_path):
            raise StoreUnavailableError(f"the SQLite database {target.sqlite_path} does not exist")
        with engine.connect():
            pass
    except StoreError:
        raise
    except Exception as exc:  # the drivers' and SQLAlchemy's errors have no common class
        cause = exc.__cause__ or exc
        reason = " ".join(str(cause).split())  # one line
        raise StoreUnavailableError(
            f"cannot connect to {target.display}: {type(cause).__name__}: {reason}"
        ) from exc
    finally:
        dispose_store_engine(engine)


def _records(spark: SparkSession, source: ReportSource) -> tuple[DataFrame | None, DataFrame]:
    """(journal RECORDS or None, PAGED_MESSAGES) of ``source``."""
    config = source.config
    if config is not None and config.database_store is not None:
        db = config.database_store
        # Both bounds are read before either table: the cut is taken at one moment.
        bounds = {j: sources.table_bounds(spark, db, j) for j in ("bindings", "messages")}
        frames = [
            sources.table_journal(spark, db, j, read=source.jdbc, bounds=bounds[j])
            for j in ("bindings", "messages")
        ]
        return frames[0].unionByName(frames[1]), sources.table_pages(spark, db)
    if config is not None:
        journal, bindings, paging = (
            config.journal_directory,
            config.bindings_directory,
            config.paging_directory,
        )
    elif source.journal is not None:
        journal = source.journal
        parent = os.path.dirname(os.path.abspath(journal))
        bindings = source.bindings or os.path.join(parent, "bindings")
        paging = source.paging or os.path.join(parent, "paging")
    else:
        return None, spark.createDataFrame([], schemas.PAGED_MESSAGES)
    records = sources.file_journal(spark, journal, "messages").unionByName(
        sources.file_journal(spark, bindings, "bindings")
    )
    return records, sources.file_pages(spark, paging)


def _write(frame: DataFrame, out: str, name: str) -> int:
    frame = frame.cache()
    frame.coalesce(1).write.mode("overwrite").parquet(os.path.join(out, name))
    return int(frame.count())


def _totals(frame: DataFrame | None, *columns: str) -> list[int]:
    if frame is None:
        return [0] * len(columns)
    from pyspark.sql import functions as F

    row = frame.agg(*(F.sum(c).alias(c) for c in columns)).first()
    return [int(row[c] or 0) if row is not None else 0 for c in columns]


def run_report(
    spark: SparkSession,
    source: ReportSource,
    out: str,
    *,
    now_ms: int | None = None,
    window: AuditWindow | None = None,
    progress: Progress | None = None,
) -> ReportSummary:
    """Read ``source``, run every job and write the report into ``out`` (created; datasets
    there are replaced). ``now_ms`` is the time message ages are measured at (default: now).

    Returns the :class:`ReportSummary`. Raises ConfigError when the source names nothing to
    read, ReportError when a JDBC driver is missing, and what the sources raise
    (StoreIOError, CorruptionError) or Spark raises.
    """
    if source.config is None and source.journal is None and source.history is None:
        raise ConfigError("a report needs a store: --config, --jdbc-url, --journal or --history")
    started = time.monotonic()
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    os.makedirs(out, exist_ok=True)
    records, pages = _records(spark, source)
    steps: list[tuple[str, Callable[[], Any]]] = []
    results: dict[str, Any] = {}
    if records is not None:
        records = records.cache()
        pages = pages.cache()
        live = jobs.replay(records).cache()
        steps += [
            ("queue_depths", lambda: jobs.queue_depths(live, pages)),
            ("record_types", lambda: jobs.record_types(live)),
            ("message_ages", lambda: jobs.message_ages(live, pages, now_ms)),
            ("address_bytes", lambda: jobs.address_bytes(live, pages)),
            ("dead_records", lambda: jobs.dead_records(records, live)),
            ("large_messages", lambda: jobs.large_messages(live, pages)),
            ("page_stores", lambda: jobs.page_stores(pages)),
        ]
    if source.history is not None:
        w = window or AuditWindow()
        history = sources.history_journal(spark, source.history)
        steps.append(
            ("audit", lambda: jobs.audit(history, address=w.address, start_ms=w.start_ms,
                                         end_ms=w.end_ms))
        )  # fmt: skip
    total = len(steps) + 1
    datasets: dict[str, int] = {}
    for done, (name, job) in enumerate(steps):
        if progress is not None:
            progress(name, done, total)
        frame = job()
        datasets[name] = _write(frame, out, name)
        results[name] = frame
    if progress is not None:
        progress("index.html", len(steps), total)
    tables = {name: [row.asDict() for row in f.limit(500).collect()] for name, f in results.items()}
    charts = write_charts(tables, out)
    write_index(tables, charts, out, title=f"store report: {source.describe()}")
    if progress is not None:
        progress("done", total, total)
    depths = _totals(results.get("queue_depths"), "messages", "bytes")
    dead = _totals(results.get("dead_records"), "records", "live_records")
    return ReportSummary(
        out=out,
        source=source.describe(),
        queues=datasets.get("queue_depths", 0),
        messages=depths[0],
        bytes=depths[1],
        records_read=dead[0],
        live_records=dead[1],
        datasets=datasets,
        charts=charts,
        seconds=time.monotonic() - started,
    )
