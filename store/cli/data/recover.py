"""``store data recover``: rebuild a message journal from a retention history folder."""

from __future__ import annotations

import argparse
from typing import Any

from store.cli.data import common
from store.cli.data.options import FORCE_READ
from store.cli.main import EXIT_OK, EXIT_PROBLEM
from store.errors import ConfigError
from store.file import file_journal_options, history

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add this module's ``store data`` subcommands to ``sub``. Returns nothing."""
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
    rc.add_argument("--force", action="store_true", help=FORCE_READ)
    rc.set_defaults(func=run_recover)


# -- recover -----------------------------------------------------------------------------------


def run_recover(args: argparse.Namespace) -> int:
    """Rebuild the message journal into ``--target`` and print what was read and written.

    Returns 0, or 1 when some source was damaged (read up to the damage); raises StoreError.
    """
    args.bindings = None
    config = common.file_config(args)
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
    console = common.console()
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
