"""``store report``'s library call: read a store, run every job, write the report.

:func:`run_report` writes into ``out``: one Parquet dataset per job (``queue_depths/``,
``record_types/``, ``message_ages/``, ``message_age_histogram/``, ``address_bytes/``,
``dead_records/``, ``large_messages/``, ``page_stores/``, and ``audit/`` for a history), PNG
charts and a static
``index.html`` showing the tables and the charts (:mod:`store.reporting.page`). It returns a
:class:`ReportSummary` and never prints; progress goes to an optional callback.

``large_messages/`` reads the large-message store too (:func:`_bodies`,
:mod:`store.reporting.large`): each kept large message's stored size beside its claimed one,
and the orphan bodies the next load sweeps; a missing or damaged body is shown there, not
refused.

Damaged data is refused, not reported (:mod:`store.reporting.damage`): the first error
``store data verify`` would give is raised before anything is written, unless ``salvage``
asks for what is readable, which the page and the summary then say at the top.

Thread-safety: one call at a time per SparkSession (its datasets' jobs run in threads of its
own, :data:`_DATASET_THREADS`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from store.config import StoreConfig
from store.errors import (
    ConfigError,
    CorruptionError,
    ReportError,
    StoreError,
)
from store.reporting import damage, health, jobs, probe, schemas, snapshot, sources, tuning
from store.reporting.datasets import Written, write_dataset
from store.reporting.health import HEALTHY, Health
from store.reporting.page import Totals, write_charts, write_index

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "AuditWindow",
    "Progress",
    "ReportSource",
    "ReportSummary",
    "SALVAGED",
    "check_source",
    "find_damage",
    "small_source",
    "run_report",
]

#: How many datasets' Spark jobs run at once. A small store's job is mostly the driver's
#: planning and scheduling, one task per stage: three side by side took a 500-message
#: store's eight datasets from 4.6-4.8 s to 3.7-3.9 s on 2 cores (bench/RESULTS.md); a large
#: store's tasks share the executors' cores as any concurrent jobs do.
_DATASET_THREADS: Final = 3

#: The first warning of a salvaged report (``warnings[0]``), on its page and summary line.
SALVAGED = "SALVAGED: this report leaves out damaged data that a load refuses"

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
    #: The page header's totals (whole datasets) and the time ages are measured at (the cut).
    totals: Totals = field(default_factory=Totals)
    cut_ms: int = 0
    #: What the cut is (:func:`store.reporting.snapshot.cut_note`; None: files as read).
    cut: str | None = None
    #: With ``salvage``: one line per damaged place the report left out (empty: none).
    warnings: tuple[str, ...] = ()
    #: The first screen's verdict, what needs doing, limits and HA (store.reporting.health).
    health: Health = field(default_factory=lambda: Health(verdict=HEALTHY))

    @property
    def salvaged(self) -> bool:
        """True when the report left damaged data out (``salvage`` and something was)."""
        return bool(self.warnings)


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
        probe.probe_database(config.database_store)
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


def _folders(source: ReportSource) -> dict[str, str] | None:
    """journal / "paging" -> folder of a file source (None for a database or a history)."""
    config = source.config
    if config is not None and config.database_store is None:
        return {
            "messages": config.journal_directory,
            "bindings": config.bindings_directory,
            "paging": config.paging_directory,
        }
    if config is None and source.journal is not None:
        parent = os.path.dirname(os.path.abspath(source.journal))
        return {
            "messages": source.journal,
            "bindings": source.bindings or os.path.join(parent, "bindings"),
            "paging": source.paging or os.path.join(parent, "paging"),
        }
    return None


def _tables(source: ReportSource) -> dict[str, str] | None:
    """journal -> table name of a database source (None otherwise)."""
    if source.config is None or source.config.database_store is None:
        return None
    from store.db.schema import TableNames

    names = TableNames.from_config(source.config.database_store)
    return {"messages": names.messages, "bindings": names.bindings}


def small_source(source: ReportSource) -> bool:
    """Whether ``source`` is a small store (:mod:`store.reporting.tuning`), judged before Spark
    starts from its files, or a database's tables where this install has its Python driver
    (else: not small). Raises nothing."""
    folders = _folders(source)
    extra = [source.history] if source.history is not None else []
    if folders is not None:
        return tuning.small_files([*folders.values(), *extra])
    config = source.config
    if config is not None and config.database_store is not None:
        db = config.database_store
        bounds = probe.seq_bounds(db) if probe.python_driver(db) else None
        return bounds is not None and tuning.small_tables(bounds)
    return tuning.small_files(extra)


def find_damage(source: ReportSource) -> list[CorruptionError]:
    """The errors ``store data verify`` finds in ``source`` without decoding a record: its
    file journals as the load judges them, and its page stores (file folders, or a database's
    page tables where this install has the database's Python driver). Called before Spark
    starts; :func:`run_report` checks what only decoding shows. Returns the findings, the
    first being what a report fails with. Raises ConfigError (a folder holding no journal),
    StoreIOError, StoreUnavailableError."""
    found: list[CorruptionError] = []
    folders = _folders(source)
    if folders is not None:
        for journal in ("messages", "bindings"):
            if journal == "messages" or os.path.isdir(folders[journal]):
                found += damage.journal_damage(folders[journal], journal)
        paging = StoreConfig.from_mapping(
            {"journal-directory": folders["messages"], "paging-directory": folders["paging"]}
        )
        found += damage.page_damage(source.config or paging)
    elif (
        source.config is not None
        and source.config.database_store is not None
        and probe.python_driver(source.config.database_store)
    ):
        found += damage.page_damage(source.config)
    return found


def _records(spark: SparkSession, source: ReportSource) -> tuple[DataFrame | None, DataFrame]:
    """(journal RECORDS or None, PAGED_MESSAGES) of ``source``."""
    records, pages, _small = _sources(spark, source)
    return records, pages


def _sources(spark: SparkSession, source: ReportSource) -> tuple[DataFrame | None, DataFrame, bool]:
    """(journal RECORDS or None, PAGED_MESSAGES, whether the store is small:
    :mod:`store.reporting.tuning`) of ``source``."""
    config = source.config
    if config is not None and config.database_store is not None:
        db = config.database_store
        # Both bounds are read before either table; with a PostgreSQL snapshot in ``read``
        # every read (bounds, partitions, page tables) sees one instant (store.reporting
        # .snapshot), else each table is cut at its largest seq when the report starts.
        read = source.jdbc
        bounds = {
            j: sources.table_bounds(spark, db, j, read=read) for j in ("bindings", "messages")
        }
        frames = [
            sources.table_journal(spark, db, j, read=read, bounds=bounds[j])
            for j in ("bindings", "messages")
        ]
        small = tuning.small_tables(bounds.values())
        return frames[0].unionByName(frames[1]), sources.table_pages(spark, db, read=read), small
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
        return None, schemas.empty(spark, schemas.PAGED_MESSAGES), True
    records = sources.file_journal(spark, journal, "messages").unionByName(
        sources.file_journal(spark, bindings, "bindings")
    )
    small = tuning.small_files([journal, bindings, paging])
    return records, sources.file_pages(spark, paging), small


def _bodies(spark: SparkSession, source: ReportSource) -> DataFrame:
    """LARGE_BODIES of ``source``'s large-message store: a database's table, a file store's
    folder, or for a journal folder the sibling ``largemessages`` folder (the default
    layout); none for a history."""
    config = source.config
    if config is not None and config.database_store is not None:
        return sources.table_large_bodies(spark, config.database_store, read=source.jdbc)
    if config is not None:
        return sources.file_large_bodies(spark, config.large_messages_directory)
    if source.journal is not None:
        parent = os.path.dirname(os.path.abspath(source.journal))
        return sources.file_large_bodies(spark, os.path.join(parent, "largemessages"))
    return schemas.empty(spark, schemas.LARGE_BODIES)


def _large_totals(written: Written | None) -> tuple[int, int, int, int, int]:
    """(kept large messages, their stored bytes, missing or damaged ones, orphan bodies,
    their stored bytes) of the LARGE_MESSAGES dataset."""
    if written is None:
        return 0, 0, 0, 0, 0
    if written.table is not None:
        rows = written.table.select(["status", "stored_bytes"]).to_pylist()
        kept = [r["stored_bytes"] for r in rows if r["status"] != "orphan"]
        orphans = [r["stored_bytes"] for r in rows if r["status"] == "orphan"]
        broken = sum(1 for r in rows if r["status"] in ("missing", "damaged"))
        return len(kept), sum(kept), broken, len(orphans), sum(orphans)
    from pyspark.sql import functions as F

    assert written.frame is not None
    orphan = F.col("status") == "orphan"
    bad = F.col("status").isin("missing", "damaged")
    row = written.frame.agg(
        F.sum(F.when(~orphan, 1)), F.sum(F.when(~orphan, F.col("stored_bytes"))),
        F.sum(F.when(bad, 1)), F.sum(F.when(orphan, 1)),
        F.sum(F.when(orphan, F.col("stored_bytes"))),
    ).first()  # fmt: skip
    values = [0] * 5 if row is None else [int(v or 0) for v in row]
    return values[0], values[1], values[2], values[3], values[4]


def _settled(live: DataFrame) -> DataFrame:
    """The replayed ``live`` entries :func:`_pinned` in partitions sized to their data:
    shuffled on (journal, id), which adaptive execution coalesces to as few partitions as the
    rows need (one for a small store; up to ``spark.sql.shuffle.partitions`` for a large one).
    Without it the cache keeps the partitions of the sources (every JDBC range read and file,
    plus the replay's own shuffles), and each of a report's dozens of jobs scans all of them:
    for a small store most of the report's time was that per-task overhead."""
    return _pinned(live.repartition("journal", "id"))


def _pinned(frame: DataFrame) -> DataFrame:
    """The frame of :func:`_pinned_plan`, or ``frame`` itself when it is local data (the
    empty page frame of a store that does not page: Spark's optimizer then knows it is empty
    and leaves out what every job would join with it)."""
    return frame if frame.isLocal() else _pinned_plan(frame)


def _pinned_plan(frame: DataFrame) -> DataFrame:
    """``frame`` computed now and kept in the executors' block stores (memory, then disk), as
    a frame whose plan is that stored data alone (``localCheckpoint``). A cached frame keeps
    its whole plan: every job built on the replay (dozens of joins, windows and unions over
    the sources) had Spark analyse and optimise that plan again, which was most of the time
    of a small store's report (4.0 s of a queue-depth job's 4.0 s became 1.1 s). It also
    means a report reads its store once: a lost executor fails the report (run it again)
    instead of reading the store a second time, which after a database's snapshot has gone
    would mix two instants."""
    return frame.localCheckpoint(eager=True)


def _write(job: Callable[[], DataFrame], out: str, name: str, collect: bool) -> Written:
    return write_dataset(job(), out, name, collect=collect)


def _totals(written: Written | None, *columns: str) -> list[int]:
    return [0] * len(columns) if written is None else written.sums(*columns)


def run_report(
    spark: SparkSession,
    source: ReportSource,
    out: str,
    *,
    now_ms: int | None = None,
    window: AuditWindow | None = None,
    progress: Progress | None = None,
    salvage: bool = False,
    damaged: list[CorruptionError] | None = None,
) -> ReportSummary:
    """Read ``source``, run every job and write the report into ``out`` (created; datasets
    there are replaced). ``now_ms`` is the time message ages are measured at (default: now).

    Damage (:mod:`store.reporting.damage`) is refused before anything is written: the first
    error is raised. With ``salvage`` the report leaves the damaged data out instead (records
    in sequence before a checksum failure are read, undecodable rows and pages are not) and
    says so in ``index.html``'s header and :attr:`ReportSummary.warnings`. ``damaged``: what
    :func:`find_damage` found when the caller ran it already (the CLI, before Spark starts);
    None runs it here.

    Returns the :class:`ReportSummary`. Raises ConfigError when the source names nothing to
    read, CorruptionError for damaged data (without ``salvage``), ReportError when a JDBC
    driver is missing or an embedded Derby / H2 database is to be read on a cluster,
    StoreLockedError when another process (a store of this one included) has that embedded
    database open, StoreUnavailableError when it does not exist
    (:mod:`store.reporting.sources`), and what the sources raise (StoreIOError) or Spark
    raises. An embedded Derby database is shut down in Spark's JVM when the report ends, even
    when it fails.
    """
    if source.config is None and source.journal is None and source.history is None:
        raise ConfigError("a report needs a store: --config, --jdbc-url, --journal or --history")
    started = time.monotonic()
    found = find_damage(source) if damaged is None else list(damaged)
    if found and not salvage:
        raise found[0]
    db = source.config.database_store if source.config is not None else None
    embedded = None if db is None else sources.embedded_database(db.jdbc_connection_url)
    if embedded is not None and not (spark.sparkContext.master or "").startswith("local"):
        raise ReportError(
            f"the embedded database {embedded} is read in local mode only (--master local[*]): "
            "a cluster's executors would open it on their own hosts"
        )
    try:
        with snapshot.exported_snapshot(db) as cut:
            # the cut's time: taken once the snapshot (if any) is, before any table is read
            now_ms = int(time.time() * 1000) if now_ms is None else now_ms
            read = dataclasses.replace(source.jdbc, snapshot=cut)
            return _report(
                spark, dataclasses.replace(source, jdbc=read), out, now_ms=now_ms,
                window=window, progress=progress, salvage=salvage, found=found,
                started=started, cut=snapshot.cut_note(db, cut),
            )  # fmt: skip
    except StoreError:
        raise
    except Exception as exc:  # Py4J and PySpark errors have no common class
        if db is None:
            raise
        error = sources.jdbc_error(db, exc)
        if error is exc:
            raise
        raise error from exc
    finally:
        if db is not None and embedded is not None:
            sources.release_embedded(spark, db)


def _report(
    spark: SparkSession,
    source: ReportSource,
    out: str,
    *,
    now_ms: int,
    window: AuditWindow | None,
    progress: Progress | None,
    salvage: bool,
    found: list[CorruptionError],
    started: float,
    cut: str | None,
) -> ReportSummary:
    """:func:`run_report` once its damage checks passed, inside the database's snapshot."""
    records, pages, small = _sources(spark, source)
    if source.history is not None:
        small = small and tuning.small_files([source.history])
    with tuning.interpreted(spark, small):
        return _jobs(
            spark, source, out, records, pages, small=small, now_ms=now_ms, window=window,
            progress=progress, salvage=salvage, found=found, started=started, cut=cut,
        )  # fmt: skip


def _jobs(
    spark: SparkSession,
    source: ReportSource,
    out: str,
    records: DataFrame | None,
    pages: DataFrame,
    *,
    small: bool,
    now_ms: int,
    window: AuditWindow | None,
    progress: Progress | None,
    salvage: bool,
    found: list[CorruptionError],
    started: float,
    cut: str | None,
) -> ReportSummary:
    """:func:`_report` once the sources are read: every job, then the page. A ``small``
    store's datasets are all collected (:func:`store.reporting.datasets.write_dataset`)."""
    steps: list[tuple[str, Callable[[], Any]]] = []
    results: dict[str, Written] = {}
    if records is not None:
        from pyspark.sql import functions as F

        records = _pinned(records)
        pages = _pinned(pages)  # a store that does not page: empty and local, as it is
        live = _settled(jobs.replay(records))
        found += damage.row_damage(
            records, live, pages, tables=_tables(source), folders=_folders(source)
        )
        if found and not salvage:
            raise found[0]
        if found:  # salvage: what does not decode is left out, as if it were not there
            records = _pinned(
                records.filter(F.col("error").isNull() & F.col("kind").between(10, 19))
            )
            pages = _pinned(pages.filter(F.col("error").isNull()))
            live = _settled(jobs.replay(records))
        # what five jobs count, computed once (each of them recomputing it was half a
        # small store's report)
        held = _pinned(jobs.held_messages(live, pages))
        steps += [
            ("queue_depths", lambda: jobs.queue_depths(live, pages, held=held)),
            ("record_types", lambda: jobs.record_types(live)),
            ("message_ages", lambda: jobs.message_ages(live, pages, now_ms, held=held)),
            (
                "message_age_histogram",
                lambda: jobs.message_age_histogram(live, pages, now_ms, held=held),
            ),
            ("address_bytes", lambda: jobs.address_bytes(live, pages, held=held)),
            ("dead_records", lambda: jobs.dead_records(records, live)),
            (
                "large_messages",
                lambda: jobs.large_messages(
                    records, live, pages, _bodies(spark, source), held=held
                ),
            ),
            ("page_stores", lambda: jobs.page_stores(pages)),
        ]
    if source.history is not None:
        w = window or AuditWindow()
        history = sources.history_journal(spark, source.history)
        steps.append(
            ("audit", lambda: jobs.audit(history, address=w.address, start_ms=w.start_ms,
                                         end_ms=w.end_ms))
        )  # fmt: skip
    os.makedirs(out, exist_ok=True)
    total = len(steps) + 1
    datasets: dict[str, int] = {}
    # The datasets' jobs run side by side (_DATASET_THREADS); each is written as it comes,
    # in step order, and the first to fail fails the report once the others have ended.
    with ThreadPoolExecutor(max_workers=_DATASET_THREADS) as pool:
        futures = [pool.submit(_write, job, out, name, small) for name, job in steps]
        for done, ((name, _job), future) in enumerate(zip(steps, futures, strict=True)):
            if progress is not None:
                progress(name, done, total)
            written = future.result()
            datasets[name] = written.count
            results[name] = written
    if progress is not None:
        progress("index.html", len(steps), total)
    tables = {name: w.first_rows() for name, w in results.items()}
    charts = write_charts(tables, out)
    warnings = tuple(damage.describe(found))
    if warnings:
        places = f"{len(found)} damaged place{'' if len(found) == 1 else 's'}"
        warnings = (f"{SALVAGED} ({places} left out):", *warnings)
    depths = _totals(results.get("queue_depths"), "messages", "bytes")
    moved = _totals(results.get("address_bytes"), "dead_lettered", "expired")
    dead = _totals(results.get("dead_records"), "records", "live_records", "dead_bytes")
    large = _large_totals(results.get("large_messages"))
    ages = results.get("message_ages")
    oldest = None if ages is None else ages.minimum("oldest_timestamp")
    totals = Totals(
        messages=depths[0],
        bytes=depths[1],
        queues=datasets.get("queue_depths", 0),
        oldest_timestamp=oldest,
        dead_bytes=dead[2],
        large_bodies=large[0],
        large_bytes=large[1],
        large_missing=large[2],
        orphan_bodies=large[3],
        orphan_bytes=large[4],
        paged_addresses=datasets.get("page_stores", 0),
        dead_lettered=moved[0],
        expired=moved[1],
    )
    db = source.config.database_store if source.config is not None else None
    verdict = health.assess(
        source.config, found=found, large_missing=large[2], orphan_bodies=large[3],
        orphan_bytes=large[4], tables=tables, now_ms=now_ms,
        verify=source.config is not None and (db is None or probe.python_driver(db)),
    )  # fmt: skip
    write_index(
        tables, charts, out, title=f"store report: {source.describe()}",
        source=source.describe(), cut_ms=now_ms, totals=totals, warnings=warnings, cut=cut,
        health=verdict,
    )  # fmt: skip
    if progress is not None:
        progress("done", total, total)
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
        totals=totals,
        cut_ms=now_ms,
        cut=cut,
        warnings=warnings,
        health=verdict,
    )
