"""``store data verify`` and ``store data repair``: every finding, and what a repair changed.

The configuration's store type chooses the library: the file journals
(:mod:`store.file.verify`, :mod:`store.file.repair`, :mod:`store.file.salvage`) or the database
store (:mod:`store.data.db_verify`).
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from store.cli.data import common
from store.cli.data.options import FORCE_READ, add_store_options, store_config
from store.cli.main import EXIT_CORRUPT, EXIT_OK, EXIT_PROBLEM
from store.cli.output import progress_console
from store.config import StoreConfig
from store.data import db_repair, db_verify, large_verify
from store.errors import ConfigError
from store.file import repair, salvage, verify
from store.paging import repair as page_repair

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add this module's ``store data`` subcommands to ``sub``. Returns nothing."""
    v = sub.add_parser(
        "verify",
        help="check every file and list every finding",
        description="Read every journal file (the file store) or every row (the database "
        "store) and list every finding, not just the first: errors (what makes a load refuse "
        "the store: checksum failures, damaged headers, missing or truncated files; rows of "
        "unknown record types, live records that do not decode, a schema this version does not "
        "know, body chunks missing), warnings (torn tails and leftovers the next open cleans "
        "up; rows of uncommitted transactions, dead rows, incomplete large-message bodies) and "
        "information. Changes nothing. Exits 0 clean, 1 warnings, 5 errors.",
    )
    _store_options(v)
    v.add_argument("--force", action="store_true", help=FORCE_READ)
    v.set_defaults(func=run_verify)

    r = sub.add_parser(
        "repair",
        help="zero torn tails (keeping .broken copies); delete rows a load ignores",
        description="The file store: finish an interrupted compaction and zero torn tails, "
        "keeping a .broken copy of each file changed; a checksum failure is refused unless "
        "--force (cut there, later files moved into repair-<time>/) or --salvage (rewrite the "
        "journal keeping every valid record). The database store: delete, in one transaction, "
        "what a load ignores anyway (rows of uncommitted transactions, dead rows, chunk rows of "
        "incomplete bodies, unlisted page tables) and list every row removed; an undecodable "
        "live row or a row of an unknown record type is refused unless --force (deleted). "
        "Records already lost are never hidden.",
    )
    _store_options(r)
    how = r.add_mutually_exclusive_group()
    how.add_argument(
        "--force",
        action="store_true",
        help="also cut at a checksum failure, moving later files into repair-<time>/ (the "
        "database: also delete undecodable live rows and rows of unknown record types)",
    )
    how.add_argument(
        "--salvage",
        action="store_true",
        help="rewrite the journal keeping every valid record: drop only damaged "
        "records, report their lsns and ids, keep the originals in repair-<time>/",
    )
    pages = r.add_argument_group(
        "page stores",
        "each repairs one page store the operator names, and nothing else: what open refuses "
        "(`store data verify` lists it) is never removed without this consent",
    )
    pages.add_argument(
        "--adopt-pages",
        metavar="TARGET=ADDRESS",
        help="make the page folder (file store) or page table (database store) TARGET the page "
        "store of ADDRESS again (it lost its address.txt, or its directory entry)",
    )
    pages.add_argument(
        "--remove-pages",
        metavar="TARGET",
        help="delete the page folder or page table TARGET with every page in it",
    )
    pages.add_argument(
        "--accept-lost-pages",
        metavar="ADDRESS",
        help="accept that pages of ADDRESS are missing or shortened: its page manifest is "
        "rewritten to the pages present, so the store opens again",
    )
    r.set_defaults(func=run_repair)


def _store_options(parser: argparse.ArgumentParser) -> None:
    add_store_options(parser)
    parser.add_argument(
        "--skip-bindings", action="store_true", help="leave the bindings out (file store)"
    )
    parser.add_argument(
        "--skip-journal", action="store_true", help="leave the messages out (file store)"
    )


def _config(args: argparse.Namespace) -> StoreConfig:
    """The configuration of ``args``; ConfigError for file-only options on a database store."""
    config = store_config(args, command=f"store data {args.data_command}")
    if config.store_type == "database":
        for option in ("skip_bindings", "skip_journal", "salvage"):
            if getattr(args, option, False):
                name = "--" + option.replace("_", "-")
                raise ConfigError(
                    f"store data {args.data_command} {name}: works on the file store only, and "
                    "this configuration selects the database store",
                    key=name,
                    allowed="the command without it (the database store is checked whole)",
                )
    return config


# -- verify and repair -------------------------------------------------------------------------


def run_verify(args: argparse.Namespace) -> int:
    """Verify each journal (or the database store) and print its files and findings.

    Returns 0 (nothing found), 1 (warnings only) or 5 (errors); raises StoreError.
    """
    config = _config(args)
    if config.store_type == "database":
        return _verify_database(config, args)
    console = common.console()
    worst = EXIT_OK
    for name, opts in common.file_journals(args):
        with progress_console(args).status(f"verifying the {name} journal"):
            report = verify.verify(
                opts.directory, prefix=opts.prefix, kind=opts.kind, force=args.force
            )
        console.print(f"[bold]{name}[/bold] journal {opts.directory} (prefix {opts.prefix})")
        if report.files:
            console.print(_files_table(report))
        if report.findings:
            console.print(_findings_table(report))
        verdict = "ok" if report.ok else "DAMAGED"
        console.print(
            f"{name}: {verdict}: {len(report.files)} files, {len(report.errors)} errors, "
            f"{len(report.warnings)} warnings"
        )
        if report.errors:
            worst = max(worst, EXIT_CORRUPT)
        elif report.warnings:
            worst = max(worst, EXIT_PROBLEM)
    worst = max(worst, _verify_large_messages(config, args, console))
    return max(worst, _verify_pages(config, args))


def _verify_large_messages(config: StoreConfig, args: argparse.Namespace, console: Any) -> int:
    """Every large body read whole, and every large message of the message journal checked
    to have one (:mod:`store.data.large_verify`); prints the findings. Returns the exit
    status they call for."""
    journals = dict(common.file_journals(args))
    with progress_console(args).status("verifying the large messages"):
        bodies, findings = large_verify.verify_file_large_messages(config, journals.get("messages"))
    directory = config.large_messages_directory
    console.print(f"[bold]large messages[/bold] {directory}")
    if findings:
        table = Table("severity", "finding", "where", "detail")
        for f in findings:
            where = f.path[len(directory) :].lstrip("/") if f.path.startswith(directory) else f.path
            table.add_row(f.severity, f.kind, where, f.message)
        console.print(table)
    errors = sum(f.severity == "error" for f in findings)
    warnings = len(findings) - errors
    verdict = "DAMAGED" if errors else "ok"
    console.print(
        f"large messages: {verdict}: {bodies} bodies, {errors} errors, {warnings} warnings"
    )
    return EXIT_CORRUPT if errors else EXIT_PROBLEM if warnings else EXIT_OK


def _files_table(report: verify.VerifyReport) -> Table:
    table = Table("file", "id", "header", "records", "end", "last lsn", "tail", "stale bytes")
    for f in report.files:
        if f.checksum_error is not None:
            tail = f"CORRUPT at {f.checksum_error[0]}"
        elif f.torn_tail is not None:
            tail = f"torn at {f.torn_tail[0]} ({f.torn_tail[1]} B)"
        else:
            tail = "clean" if f.end is not None else "-"
        table.add_row(
            f.name,
            _text(f.file_id),
            f.header,
            str(f.records),
            _text(f.end),
            str(f.last_lsn),
            tail,
            str(f.stale_bytes),
        )
    return table


def _findings_table(report: verify.VerifyReport) -> Table:
    table = Table("severity", "finding", "where", "offset", "detail")
    for finding in report.findings:
        where = finding.path
        if where.startswith(report.directory):
            where = where[len(report.directory) :].lstrip("/") or "."
        table.add_row(finding.severity, finding.kind, where, _text(finding.offset), finding.message)
    return table


def _text(value: int | None) -> str:
    return "-" if value is None else str(value)


def run_repair(args: argparse.Namespace) -> int:
    """Repair (or, with ``--salvage``, salvage) each journal and print what was done.

    Returns 0, or 1 when a salvage dropped records; raises ChecksumError / CorruptionError
    (exit 5) for what it refuses.
    """
    config = _config(args)
    if args.adopt_pages or args.remove_pages or args.accept_lost_pages:
        return _repair_pages(config, args)
    if config.store_type == "database":
        return _repair_database(config, args)
    if args.salvage:
        return _run_salvage(args)
    console = common.console()
    for name, opts in common.file_journals(args):
        with progress_console(args).status(f"repairing the {name} journal"):
            report = repair.repair(
                opts.directory, prefix=opts.prefix, kind=opts.kind, force=args.force
            )
        if not report.changed:
            console.print(f"{name}: nothing to repair in {opts.directory}")
            continue
        for line in report.recovered:
            console.print(f"{name}: interrupted compaction: {line}")
        for moved in report.moved:
            console.print(f"{name}: moved {moved.source} to {moved.target} ({moved.reason})")
        for cut in report.cuts:
            console.print(
                f"{name}: {cut.reason}: zeroed {cut.removed} bytes of {cut.path} from offset "
                f"{cut.offset}; the file before the repair is {cut.backup}"
            )
            if cut.marker_at is not None:
                console.print(
                    f"{name}: restated the list of the files left at offset {cut.marker_at} "
                    f"of {cut.path}"
                )
    return EXIT_OK


def _repair_pages(config: StoreConfig, args: argparse.Namespace) -> int:
    console = common.console()
    if args.adopt_pages:
        target, sep, address = str(args.adopt_pages).rpartition("=")
        if not sep or not target:
            raise ConfigError(
                f"--adopt-pages {args.adopt_pages!r}: expected TARGET=ADDRESS",
                key="--adopt-pages",
            )
        console.print(f"pages: {page_repair.adopt_page_store(config, target, address)}")
    if args.remove_pages:
        console.print(f"pages: {page_repair.remove_page_store(config, args.remove_pages)}")
    if args.accept_lost_pages:
        done = page_repair.accept_lost_pages(config, args.accept_lost_pages)
        console.print(f"pages: {done}")
    return EXIT_OK


def _verify_pages(config: StoreConfig, args: argparse.Namespace) -> int:
    """The page stores' findings (both back-ends); returns the exit status they call for."""
    with progress_console(args).status("checking the page stores"):
        findings = page_repair.check_page_stores(config)
    console = common.console()
    if findings:
        table = Table("severity", "where", "offset", "finding")
        for f in findings:
            table.add_row(f.severity, f.where, str(f.offset), f.message)
        console.print(table)
    errors = sum(f.severity == page_repair.ERROR for f in findings)
    warnings = len(findings) - errors
    verdict = "ok" if not errors else "DAMAGED"
    console.print(f"pages: {verdict}: {errors} errors, {warnings} warnings")
    if errors:
        return EXIT_CORRUPT
    return EXIT_PROBLEM if warnings else EXIT_OK


def _run_salvage(args: argparse.Namespace) -> int:
    console = common.console()
    worst = EXIT_OK
    for name, opts in common.file_journals(args):
        with progress_console(args).status(f"salvaging the {name} journal"):
            report = salvage.salvage(
                opts.directory, prefix=opts.prefix, kind=opts.kind, file_size=opts.file_size
            )
        if not report.changed:
            console.print(f"{name}: nothing to salvage in {opts.directory} (a load accepts it)")
            continue
        for d in report.dropped:
            console.print(f"{name}: DROPPED {_dropped_text(d)}")
        console.print(
            f"{name}: salvaged {opts.directory}: {report.kept} valid records read and replayed; "
            f"a load now returns {report.records} records and {report.prepared} prepared "
            "transactions"
            + (
                f" (left out as incomplete: {', '.join(map(str, report.failed))})"
                if report.failed
                else ""
            )
        )
        console.print(f"{name}: the original files are in {report.backup_dir}")
        if report.dropped:
            worst = EXIT_PROBLEM
    return worst


def _dropped_text(d: salvage.Dropped) -> str:
    where = f"{d.path} at offset {d.offset}"
    lsns = f"lsns {d.lsns[0]}..{d.lsns[1]}" if d.lsns is not None else "lsns unknown"
    text = f"{d.reason}: {lsns} ({where}, {d.size} bytes)"
    if d.records:
        text += "; as the damaged headers read: " + ", ".join(
            f"lsn {r.lsn} {r.type} id={r.id}" + (f" tx={r.tx_id}" if r.tx_id else "")
            for r in d.records
        )
    return text + (f"; {d.detail}" if d.detail else "")


# -- the database store ------------------------------------------------------------------------


def _verify_database(config: StoreConfig, args: argparse.Namespace) -> int:
    console = common.console()
    with progress_console(args).status("reading the store's tables"):
        report = db_verify.verify_database(config, force=args.force)
    console.print(f"[bold]database store[/bold] {report.where}")
    if report.tables:
        table = Table("table", "holds", "rows", "rows a load needs", "records a load returns")
        for t in report.tables:
            table.add_row(t.table, t.what, str(t.rows), _text(t.needed), _text(t.records))
        console.print(table)
    if report.findings:
        findings = Table("severity", "finding", "table", "seq", "detail")
        for f in report.findings:
            findings.add_row(f.severity, f.kind, f.table, _text(f.seq), f.message)
        console.print(findings)
    verdict = "ok" if report.ok else "DAMAGED"
    console.print(
        f"database: {verdict}: {len(report.tables)} tables, {len(report.errors)} errors, "
        f"{len(report.warnings)} warnings"
    )
    if report.errors:
        # Without the store's schema there are no page tables to read either.
        schema = any(f.kind == "schema" for f in report.errors)
        return EXIT_CORRUPT if schema else max(EXIT_CORRUPT, _verify_pages(config, args))
    return max(EXIT_PROBLEM if report.warnings else EXIT_OK, _verify_pages(config, args))


def _repair_database(config: StoreConfig, args: argparse.Namespace) -> int:
    console = common.console()
    with progress_console(args).status("repairing the store's tables"):
        report = db_repair.repair_database(config, force=args.force)
    if not report.changed:
        console.print(f"database: nothing to repair in {report.where}")
        return EXIT_OK
    for removal in report.removed:
        seqs = f" (seq/id {', '.join(map(str, removal.seqs))})" if removal.seqs else ""
        console.print(f"database: {removal.table}: {removal.kind}: {removal.message}{seqs}")
    total = sum(removal.count for removal in report.removed)
    console.print(f"database: repaired {report.where}: {total} removal(s)")
    return EXIT_OK
