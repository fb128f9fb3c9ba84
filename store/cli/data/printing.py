"""``store data print``: list a store's journals, records and pages."""

from __future__ import annotations

import argparse
from typing import Any

from store.cli.data import common
from store.cli.data.options import FORCE_READ
from store.cli.main import EXIT_CORRUPT, EXIT_OK
from store.file import format as fmt
from store.file import survey
from store.journal.api import RecordType

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add this module's ``store data`` subcommands to ``sub``. Returns nothing."""
    p = sub.add_parser(
        "print",
        help="list journal files and their records",
        description="List every journal file (header, records, end of data, tail) and its "
        "records in sequence, then what a load would return. Read-only: works on a read-only "
        "file system. Exits 5 when a load would refuse the journal, naming why.",
    )
    common.journal_options(p)
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
    p.add_argument("--force", action="store_true", help=FORCE_READ)
    p.set_defaults(func=run_print)


# -- print -------------------------------------------------------------------------------------


def run_print(args: argparse.Namespace) -> int:
    """Print the files and records of each journal.

    Returns 0, or 5 when a load would refuse a journal (its problems are printed); raises
    StoreError.
    """
    worst = EXIT_OK
    for name, opts in common.file_journals(args):
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
