"""``store data verify`` and ``store data repair``: every finding, and what a repair changed.

Each command is one call of :func:`store.data.verify_store` / :func:`store.data.repair_store`,
which choose the back-end from the configuration; this module parses the options and formats
each part of the result as it is done (its ``on_part`` hook), with a progress display around
each part (its ``step`` hook).
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from store.cli.data import common
from store.cli.data.options import FORCE_READ, add_store_options, store_config
from store.cli.main import EXIT_CORRUPT, EXIT_OK, EXIT_PROBLEM
from store.cli.output import counted, progress_console
from store.config import StoreConfig
from store.data import repair_store, verify_store
from store.data.advice import repair_advice
from store.data.checking import (
    BodySalvage,
    DatabaseVerify,
    JournalRepair,
    JournalSalvage,
    JournalVerify,
    LargeMessagesVerify,
    PageRepair,
    PageSalvage,
    PagesVerify,
    RepairPart,
    VerifyPart,
)
from store.data.db_check.repair import DatabaseRepairReport
from store.errors import ConfigError
from store.file import salvage, verify

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
        "records, report their lsns and ids, keep the originals in repair-<time>/; then "
        "remove the large messages whose bodies are damaged or gone (and only them), bodies "
        "moved to attic/ (a database store: only the bodies, rows deleted)",
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
        for option in ("skip_bindings", "skip_journal"):
            if getattr(args, option, False):
                name = "--" + option.replace("_", "-")
                raise ConfigError(
                    f"store data {args.data_command} {name}: works on the file store only, and "
                    "this configuration selects the database store",
                    key=name,
                    allowed="the command without it (the database store is checked whole)",
                )
    return config


def _journals_config(args: argparse.Namespace) -> StoreConfig:
    """:func:`_config`, which must select the file or the database store (ConfigError)."""
    config = _config(args)
    if config.store_type != "database":
        common.require_file_store(config, args.data_command)
    return config


# -- verify ------------------------------------------------------------------------------------


def run_verify(args: argparse.Namespace) -> int:
    """Verify the store (each journal, the large messages and the page stores, or the
    database store's tables and page stores) and print its files and findings.

    For each damaged part a ``hint:`` line names the repair that drops least and what it
    drops (:mod:`store.data.advice`). Returns 0 (nothing found), 1 (warnings only) or 5
    (errors); raises StoreError.
    """
    config = _journals_config(args)
    console = common.console()
    result = verify_store(
        config,
        bindings=not args.skip_bindings,
        messages=not args.skip_journal,
        force=args.force,
        step=progress_console(args).status,
        on_part=lambda part: _print_verified(console, part),
    )
    for line in repair_advice(result):
        console.print(f"hint: {line}", markup=False, highlight=False, soft_wrap=True)
    if result.error_count:
        return EXIT_CORRUPT
    return EXIT_PROBLEM if result.warning_count else EXIT_OK


def _print_verified(console: Console, part: VerifyPart) -> None:
    if isinstance(part, JournalVerify):
        _print_journal(console, part)
    elif isinstance(part, LargeMessagesVerify):
        _print_large_messages(console, part)
    elif isinstance(part, PagesVerify):
        _print_pages(console, part)
    else:
        _print_database(console, part)


def _print_journal(console: Console, part: JournalVerify) -> None:
    name, report = part.name, part.report
    console.print(f"[bold]{name}[/bold] journal {report.directory} (prefix {report.prefix})")
    if report.files:
        console.print(_files_table(report))
    if report.findings:
        console.print(_findings_table(report))
    verdict = "ok" if report.ok else "DAMAGED"
    console.print(
        f"{name}: {verdict}: {counted(len(report.files), 'file')}, "
        f"{counted(len(report.errors), 'error')}, {counted(len(report.warnings), 'warning')}"
    )


def _print_large_messages(console: Console, part: LargeMessagesVerify) -> None:
    directory = part.directory
    console.print(f"[bold]large messages[/bold] {directory}")
    if part.findings:
        table = Table("severity", "finding", "where", "detail")
        for f in part.findings:
            where = f.path[len(directory) :].lstrip("/") if f.path.startswith(directory) else f.path
            table.add_row(f.severity, f.kind, where, f.message)
        console.print(table)
    verdict = "DAMAGED" if part.error_count else "ok"
    console.print(
        f"large messages: {verdict}: {counted(part.bodies, 'body', 'bodies')}, "
        f"{counted(part.error_count, 'error')}, {counted(part.warning_count, 'warning')}"
    )


def _print_pages(console: Console, part: PagesVerify) -> None:
    if part.findings:
        table = Table("severity", "where", "offset", "finding")
        for f in part.findings:
            table.add_row(f.severity, f.where, str(f.offset), f.message)
        console.print(table)
    verdict = "ok" if not part.error_count else "DAMAGED"
    console.print(
        f"pages: {verdict}: {counted(part.error_count, 'error')}, "
        f"{counted(part.warning_count, 'warning')}"
    )


def _print_database(console: Console, part: DatabaseVerify) -> None:
    report = part.report
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
        f"database: {verdict}: {counted(len(report.tables), 'table')}, "
        f"{counted(len(report.errors), 'error')}, {counted(len(report.warnings), 'warning')}"
    )


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


# -- repair ------------------------------------------------------------------------------------


def run_repair(args: argparse.Namespace) -> int:
    """Repair (or, with ``--salvage``, salvage) each journal, or the database store's tables,
    or (with a page option) the page store named, and print what was done.

    Returns 0, or 1 when a salvage dropped records; raises ChecksumError / CorruptionError
    (exit 5) for what it refuses.
    """
    pages = args.adopt_pages or args.remove_pages or args.accept_lost_pages
    config = _config(args) if pages else _journals_config(args)
    adopt = None
    if args.adopt_pages:
        target, sep, address = str(args.adopt_pages).rpartition("=")
        if not sep or not target:
            raise ConfigError(
                f"--adopt-pages {args.adopt_pages!r}: expected TARGET=ADDRESS",
                key="--adopt-pages",
            )
        adopt = (target, address)
    console = common.console()
    result = repair_store(
        config,
        bindings=not args.skip_bindings,
        messages=not args.skip_journal,
        force=args.force,
        salvage_journals=args.salvage,
        adopt_pages=adopt,
        remove_pages=args.remove_pages or None,
        accept_lost_pages=args.accept_lost_pages or None,
        step=progress_console(args).status,
        on_part=lambda part: _print_repaired(console, part),
    )
    return EXIT_PROBLEM if result.dropped else EXIT_OK


def _print_repaired(console: Console, part: RepairPart) -> None:
    if isinstance(part, JournalRepair):
        _print_journal_repair(console, part)
    elif isinstance(part, JournalSalvage):
        _print_salvage(console, part)
    elif isinstance(part, BodySalvage):
        _print_body_salvage(console, part)
    elif isinstance(part, PageSalvage):
        _print_page_salvage(console, part)
    elif isinstance(part, PageRepair):
        console.print(f"pages: {part.done}")
    else:
        _print_database_repair(console, part)


def _print_journal_repair(console: Console, part: JournalRepair) -> None:
    name, report = part.name, part.report
    if not report.changed:
        console.print(f"{name}: nothing to repair in {report.directory}")
        return
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


def _print_salvage(console: Console, part: JournalSalvage) -> None:
    name, report = part.name, part.report
    if not report.changed:
        console.print(f"{name}: nothing to salvage in {report.directory} (a load accepts it)")
        return
    for d in report.dropped:
        console.print(f"{name}: DROPPED {_dropped_text(d)}")
    console.print(
        f"{name}: salvaged {report.directory}: {report.kept} valid records read and replayed; "
        f"a load now returns {report.records} records and {report.prepared} prepared "
        "transactions"
        + (
            f" (left out as incomplete: {', '.join(map(str, report.failed))})"
            if report.failed
            else ""
        )
    )
    console.print(f"{name}: the original files are in {report.backup_dir}")


def _print_body_salvage(console: Console, part: BodySalvage) -> None:
    report = part.report
    for lost in report.left:
        console.print(
            f"large messages: KEPT message {lost.message_id} of a prepared transaction: "
            f"{lost.reason} ({lost.path}); commit or roll it back, then repair again"
        )
    if not report.removed:
        console.print(
            f"large messages: nothing to salvage in {report.where} "
            f"({report.checked} bodies read whole)"
        )
        return
    for lost in report.removed:
        where = f"; the body is in {lost.moved_to}" if lost.moved_to else ""
        console.print(
            f"large messages: REMOVED message {lost.message_id} ({lost.size} bytes): "
            f"{lost.reason} ({lost.path}){where}"
        )
    console.print(
        f"large messages: salvaged {report.where}: {len(report.removed)} message(s) removed "
        f"with their bodies, {report.checked - len(report.removed)} read whole and kept"
    )


def _print_page_salvage(console: Console, part: PageSalvage) -> None:
    report = part.report
    if not report.changed:
        console.print(f"pages: nothing to salvage ({report.pages} pages read whole)")
        return
    for r in report.mended:
        mid = "unknown" if r.message_id is None else str(r.message_id)
        kept = f"; its bytes as they were are in {r.kept_in}" if r.kept_in else ""
        console.print(
            f"pages: MENDED the record at offset {r.offset} of page {r.page} of {r.address!r}"
            f" ({r.length} bytes, {r.problem}): only its header was damaged; message {mid} "
            f"is kept{kept}"
        )
    for r in report.replaced:
        if r.records == 1:
            mid = "unknown" if r.message_id is None else str(r.message_id)
            what = f"message {mid} (as its header reads) is dropped"
        else:
            what = f"the {r.records} messages they held (as the page summary counts) are dropped"
        kept = f"; its bytes are in {r.kept_in}" if r.kept_in else ""
        console.print(
            f"pages: REPLACED the record at offset {r.offset} of page {r.page} of {r.address!r}"
            f" ({r.length} bytes, {r.problem}): {what}, {r.acks_deleted} cursor ack(s) of it "
            f"deleted{kept}"
        )
    console.print(
        f"pages: salvaged: {len(report.mended)} record(s) mended, {report.dropped} "
        f"message(s) dropped in {len(report.replaced)} damaged stretch(es) replaced by "
        f"records no queue receives; every other message of the {report.pages} pages is kept"
    )


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


def _print_database_repair(console: Console, report: DatabaseRepairReport) -> None:
    if not report.changed:
        console.print(f"database: nothing to repair in {report.where}")
        return
    for removal in report.removed:
        seqs = f" (seq/id {', '.join(map(str, removal.seqs))})" if removal.seqs else ""
        console.print(f"database: {removal.table}: {removal.kind}: {removal.message}{seqs}")
    total = sum(removal.count for removal in report.removed)
    console.print(f"database: repaired {report.where}: {total} removal(s)")
