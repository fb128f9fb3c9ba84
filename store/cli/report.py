"""``store report``: a Spark report of a store (docs/reporting.md).

::

    store report --config etc/store.toml --out report/            # file or database store
    store report --jdbc-url jdbc:postgresql://db/broker --jdbc-user app --out report/
    store report --journal data/journal --out report/             # a file journal, offline
    store report --history data/history --address orders --out audit/
    store report --config etc/store.toml --out report/ --master spark://127.0.0.1:7077

One call of :func:`store.reporting.run_report`; progress on stderr while Spark runs, a short
summary on stdout. Without the spark extra (PySpark, PyArrow): one line naming it, exit 2. Before
Spark starts: a folder that does not exist is exit 2, a database that cannot be reached (or
does not exist) exit 4. No Java or no JDBC driver jar is a ``ReportError``: one line, exit 6.
Damaged data (what ``store data verify`` calls an error, or a live record that does not decode)
is exit 5 with the error's one line, before a report is written; ``--salvage`` reports what is
readable instead, and its first summary line (and the page's header) says so. An embedded
Derby or H2 database that a store or broker has open is exit 3 (the report's JVM cannot open
it), one that does not exist exit 4 (docs/reporting.md#embedded). An ``--out`` folder that
holds anything already (an earlier report, or files of someone else's) is exit 2, left as it
is, unless ``--force`` (then the report's own files in it are replaced).

Thread-safety: a command runs once per process; nothing is shared.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from store.config import load_config
from store.errors import ConfigError
from store.extras import require

if TYPE_CHECKING:
    from store.reporting.report import ReportSummary

__all__ = ["register", "run_report_command"]


def register(subparsers: Any) -> None:
    """Add ``report`` to the ``store`` parser. Returns nothing."""
    parser = subparsers.add_parser(
        "report",
        help="a Spark report of a store: Parquet datasets, charts, index.html",
        description="Read a store with Spark and write a report (Parquet, PNG, index.html).",
    )
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--config", metavar="PATH", help="store configuration (.toml, broker.xml)")
    src.add_argument("--jdbc-url", metavar="URL", help="a database store's JDBC URL")
    src.add_argument("--journal", metavar="DIR", help="a file store's message journal folder")
    parser.add_argument("--history", metavar="DIR", help="a retention history folder (audit)")
    parser.add_argument("--jdbc-user", metavar="USER", help="database user (with --jdbc-url)")
    parser.add_argument("--jdbc-password", metavar="PW", help="database password")
    parser.add_argument("--bindings", metavar="DIR", help="bindings folder (with --journal)")
    parser.add_argument("--address", help="the audit's address (default: every address)")
    parser.add_argument("--since", type=int, metavar="MS", help="audit window start, epoch ms")
    parser.add_argument("--until", type=int, metavar="MS", help="audit window end, epoch ms")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder the report goes to")
    parser.add_argument(
        "--force",
        action="store_true",
        help="write into an --out folder that holds files already (an earlier report's are "
        "replaced); without it such a folder is exit 2, left as it is",
    )
    parser.add_argument("--master", default="local[*]", help="Spark master (default: local[*])")
    parser.add_argument(
        "--partitions", type=int, default=4, help="parallel JDBC reads per table (default: 4)"
    )
    parser.add_argument(
        "--salvage",
        action="store_true",
        help="report what is readable of a damaged store, leaving the damage out (said at "
        "the top of the page and in the summary); without it damage is exit 5",
    )
    parser.set_defaults(func=run_report_command)


def _source(args: argparse.Namespace) -> Any:
    from store.config import StoreConfig
    from store.reporting.report import ReportSource
    from store.reporting.sources import JdbcRead

    jdbc = JdbcRead(partitions=args.partitions)
    if args.config is not None:
        return ReportSource(config=load_config(args.config), history=args.history, jdbc=jdbc)
    if args.jdbc_url is not None:
        section: dict[str, Any] = {"jdbc-connection-url": args.jdbc_url}
        if args.jdbc_user is not None:
            section["jdbc-user"] = args.jdbc_user
        if args.jdbc_password is not None:
            section["jdbc-password"] = args.jdbc_password
        config = StoreConfig.from_mapping({"database-store": section})
        return ReportSource(config=config, history=args.history, jdbc=jdbc)
    return ReportSource(journal=args.journal, bindings=args.bindings, history=args.history)


def check_out(out: str, *, force: bool) -> None:
    """Refuse an ``--out`` that is a file, or a folder holding anything, unless ``force``
    (a file is refused even then). Raises ConfigError naming it; returns None."""
    if os.path.isdir(out):
        held = sorted(os.listdir(out))
        if held and not force:
            what = "a report" if "index.html" in held else f"{len(held)} entries"
            raise ConfigError(
                f"--out {out} holds {what} already; nothing was written",
                hint="give a new folder, or --force to write the report into this one",
            )
    elif os.path.exists(out):
        raise ConfigError(f"--out {out} is a file, not a folder; nothing was written")


def run_report_command(args: argparse.Namespace) -> int:
    """Run the report and print its summary. Returns 0.

    Raises ReportError (no Java, PySpark or driver), ConfigError, and what the report raises
    (mapped to exit codes by ``store``).
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    for module in ("pyspark", "pyarrow"):
        require(module, "store report")
    from store.cli.output import progress_console
    from store.reporting import class_archive
    from store.reporting.report import (
        AuditWindow,
        check_source,
        find_damage,
        run_report,
        small_source,
    )
    from store.reporting.session import build_session, jdbc_driver_for, require_java

    check_out(args.out, force=args.force)
    source = _source(args)
    # Before Spark starts, fail fast: folders that are not there (exit 2), a database that
    # does not answer (exit 4), a JDBC driver jar or Java that is missing (exit 6).
    check_source(source)
    database = source.config.database_store if source.config is not None else None
    if database is not None:
        jdbc_driver_for(database.jdbc_connection_url)
    require_java()
    # Damage verify would report is refused here, before Spark starts (exit 5, verify's line);
    # what only decoding shows is refused by run_report before anything is written.
    damaged = find_damage(source)
    if damaged and not args.salvage:
        raise damaged[0]
    window = AuditWindow(address=args.address, start_ms=args.since, end_ms=args.until)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        transient=True,
        console=progress_console(args),
    ) as bar:
        task = bar.add_task("starting Spark", total=None)
        from pyspark import SparkContext

        # a session this process had already (an embedding program's) is not this command's
        # to end, nor its class archive this command's to write
        own = SparkContext._active_spark_context is None
        spark = build_session(master=args.master, small_store=small_source(source))

        def progress(step: str, done: int, total: int) -> None:
            bar.update(task, description=step, completed=done, total=total)

        summary = run_report(
            spark, source, args.out, window=window, progress=progress,
            salvage=args.salvage, damaged=damaged,
        )  # fmt: skip
        if own and class_archive.writing():  # once per Java and Spark (class_archive)
            bar.update(task, description="keeping Spark's classes for the next reports")
            class_archive.finish()
    _print_summary(summary)
    return 0


def _print_summary(summary: ReportSummary) -> None:
    """The summary lines of a written report."""
    salvaged = f"{summary.warnings[0]}; " if summary.salvaged else ""
    print(f"{salvaged}report of {summary.source} in {summary.out} ({summary.seconds:.1f} s)")
    for line in summary.warnings[1:]:
        print(f"  left out: {line}")
    if summary.cut is not None:
        print(f"cut: {summary.cut}")
    print(
        f"queues {summary.queues}, messages {summary.messages}, bytes {summary.bytes}; "
        f"records read {summary.records_read}, live {summary.live_records}"
    )
    from store.reporting.health import iso_time

    h = summary.health
    print(f"health: {h.verdict}" + ("" if h.actions else " (nothing to repair, nothing to do)"))
    for action in h.actions:
        print(f"  - {action}")
    if h.ha is not None:
        print(h.ha)
    t = summary.totals
    oldest = "none" if t.oldest_timestamp is None else iso_time(t.oldest_timestamp)
    print(
        f"oldest message {oldest}; dead bytes {t.dead_bytes}; large bodies {t.large_bodies} "
        f"({t.large_bytes} bytes, {t.large_missing} missing or damaged); orphan large bodies "
        f"{t.orphan_bodies} ({t.orphan_bytes} bytes); paged addresses {t.paged_addresses}; "
        f"dead-lettered waiting {t.dead_lettered}, expired waiting {t.expired}"
    )
    print("datasets: " + ", ".join(f"{n} ({rows})" for n, rows in summary.datasets.items()))
