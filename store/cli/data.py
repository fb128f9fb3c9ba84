"""``store data``: inspect, verify, repair, compact and recover the file journals offline.

::

    store data print   [--config F | --journal D --bindings D] [--safe] [--max-records N]
    store data verify  [--config F | --journal D --bindings D] [--force]
    store data repair  [--config F | --journal D --bindings D] [--force | --salvage]
    store data compact [--config F | --journal D --bindings D]
    store data recover [--config F | --journal D] --history D --target D [--undelete] [--events]

Every subcommand calls one library function and only formats its result: ``print``
``store.file.survey.scan_journal``, ``verify`` ``store.file.verify.verify``, ``repair``
``store.file.repair.repair`` (``--salvage``: ``store.file.salvage.salvage``), ``compact``
``store.maintenance.compact_store``, ``recover`` ``store.file.history.recover_from_history``. The
directories come from ``--config`` (TOML or broker.xml; Artemis's defaults ``data/journal`` and
``data/bindings`` without one), overridden by ``--journal`` / ``--bindings``;
``--skip-bindings`` / ``--skip-journal`` leave one out.

No command creates a store: every journal a command works on must already hold one
(``store.file.survey.require_journal``), checked before any is touched; ``print`` and
``verify`` only read (read-only opens, no lock taken), so they work on a read-only file system.

Exit codes (``store.cli.main``): 0 nothing to report, 1 findings that need no operator
(torn tails, leftovers the next open cleans up, damaged sources a recovery read around, records
a salvage dropped), 2 a path that holds no journal (or another configuration error), 5
corruption (whatever makes a load refuse the journal: a checksum failure,
a damaged header, a missing or truncated file; ``print`` and ``verify`` report it, ``repair``
without ``--force`` refuses it), 3 when a broker holds the journal.

``print`` and ``verify`` judge a journal exactly as a load does (``store.file.integrity``): on a
journal the load refuses, ``print`` still lists what it can read, then names the problems and
exits 5 instead of claiming what a load would return.

Thread-safety: a command runs once per process; nothing is shared.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from store import maintenance
from store.cli.main import EXIT_CORRUPT, EXIT_OK, EXIT_PROBLEM
from store.config import StoreConfig, load_config
from store.errors import ConfigError
from store.file import file_journal_options, history, repair, salvage, survey, verify
from store.file import format as fmt
from store.file.options import FileJournalOptions
from store.journal.api import RecordType

__all__ = ["register"]

_FORCE_READ = "read even while a broker holds the journal (its tail may be in flight)"


def register(subparsers: Any) -> None:
    """Add ``store data`` and its subcommands to the ``store`` parser. Returns nothing."""
    data = subparsers.add_parser(
        "data",
        help="inspect, verify, repair, compact or recover the file journals offline",
        description="Work on the file store's journals while no broker runs. The directories "
        "come from --config (TOML or broker.xml), else Artemis's defaults data/journal and "
        "data/bindings, overridden by --journal / --bindings. A path that holds no journal is "
        "an error: these commands never create one.",
    )
    sub = data.add_subparsers(dest="data_command", metavar="SUBCOMMAND", required=True)

    p = sub.add_parser(
        "print",
        help="list journal files and their records",
        description="List every journal file (header, records, end of data, tail) and its "
        "records in sequence, then what a load would return. Read-only: works on a read-only "
        "file system. Exits 5 when a load would refuse the journal, naming why.",
    )
    _journal_options(p)
    p.add_argument("--safe", action="store_true", help="structure only: never print bodies")
    p.add_argument(
        "--max-records", type=int, metavar="N", help="print at most N records per journal"
    )
    p.add_argument(
        "--body-bytes",
        type=int,
        default=32,
        metavar="N",
        help="bytes of each body printed as hex (default 32; 0 prints whole bodies)",
    )
    p.add_argument("--force", action="store_true", help=_FORCE_READ)
    p.set_defaults(func=run_print)

    v = sub.add_parser(
        "verify",
        help="check every file and list every finding",
        description="Read every journal file and list every finding, not just the first: "
        "errors (what makes a load refuse the journal: checksum failures, damaged headers, "
        "missing or truncated files), warnings (torn tails and leftovers the next open cleans "
        "up) and information. Changes nothing. Exits 0 clean, 1 warnings, 5 errors.",
    )
    _journal_options(v)
    v.add_argument("--force", action="store_true", help=_FORCE_READ)
    v.set_defaults(func=run_verify)

    r = sub.add_parser(
        "repair",
        help="zero torn tails (keeping .broken copies)",
        description="Finish an interrupted compaction and zero torn tails, keeping a .broken "
        "copy of each file changed. A checksum failure is refused unless --force (cut there, "
        "later files moved into repair-<time>/) or --salvage (rewrite the journal keeping every "
        "valid record). Records already lost are never hidden.",
    )
    _journal_options(r)
    how = r.add_mutually_exclusive_group()
    how.add_argument(
        "--force",
        action="store_true",
        help="also cut at a checksum failure, moving later files into repair-<time>/",
    )
    how.add_argument(
        "--salvage",
        action="store_true",
        help="rewrite the journal keeping every valid record: drop only damaged "
        "records, report their lsns and ids, keep the originals in repair-<time>/",
    )
    r.set_defaults(func=run_repair)

    c = sub.add_parser(
        "compact",
        help="open the store and compact both journals",
        description="Open the configured store (file or database), load both journals and "
        "compact each: live records rewritten into as few files as possible (the file store) "
        "or dead rows removed (the database). The store never grows: free files beyond "
        "journal-min-files and the one pre-opened file are removed afterwards.",
    )
    _journal_options(c, skips=False)
    c.set_defaults(func=run_compact)

    rc = sub.add_parser(
        "recover",
        help="rebuild the message journal in a new directory from the retention history",
        description="Replay every history copy plus the current journal files and write the "
        "live state as of the newest data into a NEW journal directory. --undelete also writes "
        "back every committed record a delete removed; --events writes retention events as "
        "plain adds.",
    )
    rc.add_argument("--config", metavar="PATH", help="store configuration (TOML or broker.xml)")
    rc.add_argument("--journal", metavar="DIR", help="current message journal directory")
    rc.add_argument(
        "--history",
        metavar="DIR",
        help="retention folder (default: journal-retention directory of --config)",
    )
    rc.add_argument("--target", metavar="DIR", required=True, help="new, empty directory")
    rc.add_argument("--undelete", action="store_true", help="also write records that were deleted")
    rc.add_argument("--events", action="store_true", help="also write event records as adds")
    rc.add_argument("--force", action="store_true", help=_FORCE_READ)
    rc.set_defaults(func=run_recover)


def _journal_options(parser: argparse.ArgumentParser, *, skips: bool = True) -> None:
    parser.add_argument("--config", metavar="PATH", help="store configuration (TOML or broker.xml)")
    parser.add_argument("--journal", metavar="DIR", help="message journal directory")
    parser.add_argument("--bindings", metavar="DIR", help="bindings journal directory")
    if skips:
        parser.add_argument("--skip-bindings", action="store_true", help="leave the bindings out")
        parser.add_argument("--skip-journal", action="store_true", help="leave the messages out")


def _config(args: argparse.Namespace, *, file_only: bool = True) -> StoreConfig:
    """The configuration named by the arguments (see the module docstring)."""
    config = load_config(args.config) if args.config else StoreConfig()
    changes: dict[str, object] = {}
    if args.journal:
        changes["journal_directory"] = args.journal
    if getattr(args, "bindings", None):
        changes["bindings_directory"] = args.bindings
    if not args.config:
        # Without a file, keep the file size the message journal already has.
        size = survey.detect_file_size(args.journal or config.journal_directory, prefix="data")
        if size is not None and size >= 1024:
            changes["journal_file_size"] = size
    config = config.replace(**changes) if changes else config
    if file_only and config.store_type != "file":
        raise ConfigError(
            f"store data {args.data_command} works on the file journal, and this configuration "
            f"selects the {config.store_type} store",
            key="database-store" if config.store_type == "database" else "persistence-enabled",
            allowed="a file-store configuration, or --journal / --bindings directories",
        )
    return config


def _journals(args: argparse.Namespace) -> list[tuple[str, FileJournalOptions]]:
    """The journals the command works on, each checked to hold a journal before any is
    touched (a command never acts on one journal and then fails on the other's path)."""
    bindings, messages = file_journal_options(_config(args), lock=False)
    chosen = []
    if not getattr(args, "skip_bindings", False):
        chosen.append(("bindings", bindings))
    if not getattr(args, "skip_journal", False):
        chosen.append(("messages", messages))
    for _name, opts in reversed(chosen):  # the message journal first: --journal names it
        survey.require_journal(opts.directory, prefix=opts.prefix, fs=opts.fs)
    return chosen


def _console() -> Console:
    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        # Pipes and logs get whole lines and tables wider than the 80 columns rich assumes.
        console = Console(highlight=False, soft_wrap=True, width=200)
    return console


# -- print -------------------------------------------------------------------------------------


def run_print(args: argparse.Namespace) -> int:
    """Print the files and records of each journal.

    Returns 0, or 5 when a load would refuse a journal (its problems are printed); raises
    StoreError.
    """
    worst = EXIT_OK
    for name, opts in _journals(args):
        survey.ensure_unlocked(opts.directory, force=args.force)
        js = survey.scan_journal(
            opts.directory,
            prefix=opts.prefix,
            keep_records=True,
            max_records=args.max_records,
            replay=True,
            kind=opts.kind,
        )
        print(f"{name} journal {opts.directory} (prefix {opts.prefix})")
        scans = {id(s.file): s for s in js.scans}
        for f in js.files:
            s = scans.get(id(f))
            print(_file_line(f, s))
            for marker in s.markers if s is not None else []:
                print(_marker_line(marker))
            for rec in s.records if s is not None else []:
                print(_record_line(rec, safe=args.safe, body_bytes=args.body_bytes))
        if js.records_kept < js.records_total:
            print(f"  ... {js.records_total - js.records_kept} more records not printed")
        for f in js.retired:
            print(
                f"  file {f.name} retired by an interrupted compaction (the next open removes it)"
            )
        for item in js.listing.leftovers:
            print(f"  {item.kind}: {item.name}")
        assert js.replay is not None
        counts = ", ".join(f"{RecordType(t).name} {n}" for t, n in sorted(js.replay.counts.items()))
        head = f"  summary: {js.records_total} records in {len(js.scans)} files"
        head += f" ({counts})" if counts else ""
        if js.problems:
            # The same judgement as the load: never claim what a load of this journal returns.
            for problem in js.problems:
                print(f"  DAMAGED: {problem.kind}: {problem.error}")
            print(
                f"{head}; a load refuses this journal ({len(js.problems)} problem(s): "
                "see `store data verify`)"
            )
            worst = EXIT_CORRUPT
            continue
        loaded = js.replay.result()
        print(
            f"{head}; a load returns {len(loaded.records)} records, {len(loaded.prepared)} "
            f"prepared and {len(loaded.failed)} failed transactions"
        )
    return worst


def _file_line(f: survey.JournalFile, s: survey.FileScan | None) -> str:
    line = f"  file {f.name} id {f.file_id if f.file_id is not None else '-'} size {f.size} "
    line += f"header {f.status}"
    if f.header_error is not None:
        line += f" ({f.header_error.reason})"
    if s is None:
        return line
    line += f" records {s.count} end {s.end}"
    if s.tail.records:
        what = "CORRUPT" if s.verdict is not None else "torn tail"
        line += f" {what}: {len(s.tail.records)} valid record(s) after the end"
    return line


def _marker_line(view: survey.MarkerView) -> str:
    m = view.marker
    if m.kind == fmt.MARKER_FILES and not m.known:
        what = "FILES list left out"
    else:
        files = ", ".join(f"{e.file_id} lsns {e.first_lsn}..{e.last_lsn}" for e in m.files)
        what = (
            f"FILES [{files}]"
            if m.kind == fmt.MARKER_FILES
            else (
                f"CHANGE retired [{', '.join(str(e.file_id) for e in m.retired)}] added [{files}]"
            )
        )
    return f"    marker @{view.offset} lsn={view.lsn} {what}"


def _record_line(rec: survey.RecordView, *, safe: bool, body_bytes: int) -> str:
    rtype = RecordType(rec.type).name
    line = (
        f"    @{rec.offset:<8} {rtype:<9} id={rec.id} user_type={rec.user_type} "
        f"tx={rec.tx_id} lsn={rec.lsn} size={rec.length}"
    )
    if rec.type in (RecordType.PREPARE, RecordType.COMMIT):
        line += f" tx_count={rec.tx_count}"
    if rec.compact_count:
        line += f" compacted={rec.compact_count}"
    if safe or not rec.body:
        return line + f" body={len(rec.body)}B"
    shown = rec.body if body_bytes <= 0 else rec.body[:body_bytes]
    more = len(rec.body) - len(shown)
    return line + f" body={shown.hex()}" + (f"...(+{more}B)" if more else "")


# -- verify and repair -------------------------------------------------------------------------


def run_verify(args: argparse.Namespace) -> int:
    """Verify each journal and print its files and findings.

    Returns 0 (nothing found), 1 (warnings only) or 5 (errors); raises StoreError.
    """
    console = _console()
    worst = EXIT_OK
    for name, opts in _journals(args):
        report = verify.verify(opts.directory, prefix=opts.prefix, kind=opts.kind, force=args.force)
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
    return worst


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
    if args.salvage:
        return _run_salvage(args)
    console = _console()
    for name, opts in _journals(args):
        report = repair.repair(opts.directory, prefix=opts.prefix, kind=opts.kind, force=args.force)
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


def _run_salvage(args: argparse.Namespace) -> int:
    console = _console()
    worst = EXIT_OK
    for name, opts in _journals(args):
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


# -- compact -----------------------------------------------------------------------------------


def run_compact(args: argparse.Namespace) -> int:
    """Compact both journals with a progress display, then print before/after figures.

    Returns 0; raises StoreError (locked store, corruption, I/O).
    """
    console = _console()
    config = _config(args, file_only=False)
    steps = 4
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console
    )
    # Shown from the first step on: a store that cannot be opened (no journal at the path, a
    # lock held elsewhere) gets its one-line error and no progress bar.
    task = progress.add_task("opening the store", total=steps, start=False)
    done = [0]

    def on_step(what: str) -> None:
        if not done[0]:
            progress.start()
        progress.update(task, description=what, completed=done[0])
        done[0] += 1

    try:
        results = maintenance.compact_store(config, on_step=on_step)
        progress.update(task, description="compacted", completed=steps)
    finally:
        if done[0]:
            progress.stop()
    table = Table("journal", "data files", "live bytes", "total bytes", "seconds")
    for r in results:
        before_files = r.before.extra.get("data_files", r.before.files)
        after_files = r.after.extra.get("data_files", r.after.files)
        table.add_row(
            r.journal,
            f"{before_files} -> {after_files}",
            f"{r.before.bytes_live} -> {r.after.bytes_live}",
            f"{r.before.bytes_total} -> {r.after.bytes_total}",
            f"{r.seconds:.3f}",
        )
    console.print(table)
    return EXIT_OK


# -- recover -----------------------------------------------------------------------------------


def run_recover(args: argparse.Namespace) -> int:
    """Rebuild the message journal into ``--target`` and print what was read and written.

    Returns 0, or 1 when some source was damaged (read up to the damage); raises StoreError.
    """
    args.bindings = None
    config = _config(args)
    history_dir = args.history
    if history_dir is None and config.journal_retention is not None:
        history_dir = config.journal_retention.directory
    if history_dir is None:
        raise ConfigError(
            "store data recover needs --history (or a journal-retention directory in --config)",
            key="history",
            allowed="the retention folder to recover from",
        )
    _bindings, messages = file_journal_options(config, lock=False)
    report = history.recover_from_history(
        history_dir,
        args.target,
        journal=messages.directory,
        prefix=messages.prefix,
        kind=messages.kind,
        file_size=config.journal_file_size if args.config else None,
        undelete=args.undelete,
        events=args.events,
        force=args.force,
    )
    console = _console()
    from_history = sum(1 for s in report.sources if s.origin == "history")
    console.print(
        f"read {len(report.sources)} files ({from_history} from {history_dir}, "
        f"{len(report.sources) - from_history} from {messages.directory}), "
        f"{report.generations} compaction generation(s)"
    )
    damaged = [s for s in report.sources if s.damage is not None]
    for s in damaged:
        console.print(f"damaged: {s.path}: {s.damage} (read up to the damage)")
    console.print(
        f"wrote {report.records} records, {report.prepared} prepared transactions, "
        f"{report.deleted} deleted records and {report.events} events to {report.target}"
    )
    if report.failed:
        console.print(f"left out incomplete transactions: {', '.join(map(str, report.failed))}")
    return EXIT_PROBLEM if damaged else EXIT_OK
