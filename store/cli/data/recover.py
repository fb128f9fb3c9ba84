"""``store data recover``: rebuild a message journal in a new directory from the retention
history: every message ever added (the default, as Artemis's ``data recover``), or the journal
record for record (``--records``, ``--undelete``, ``--events``). One call of
:func:`store.data.recover_store`, which chooses the way; this module formats its result."""

from __future__ import annotations

import argparse
from typing import Any

from store.cli.data import common
from store.cli.data.options import FORCE_READ, add_store_options, store_config
from store.cli.main import EXIT_OK, EXIT_PROBLEM
from store.cli.output import progress_console
from store.config import StoreConfig
from store.data import recover_store
from store.errors import ConfigError
from store.file import history

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add this module's ``store data`` subcommands to ``sub``. Returns nothing."""
    rc = sub.add_parser(
        "recover",
        help="rebuild the message journal in a new directory from the retention history",
        description="Read every history copy plus the current journal files and write a NEW "
        "journal directory. By default (as Artemis's data recover) it holds every message ever "
        "added, whatever happened to it since (acked and rolled-back messages come back), each "
        "routed once to each queue it was ever routed to, and the page transactions; no acks, "
        "delivery counts or deletes. A large message whose body file is gone from the "
        "large-message folder is left out and listed. Open the target as the journal directory "
        "of a configuration with the original bindings. --records instead writes the live "
        "state record for record as of the newest data; --undelete (implies --records) also "
        "writes back every committed record a delete removed; --events (implies --records) "
        "writes retention events as plain adds. The database store keeps no retention history: "
        "it cannot be recovered from.",
    )
    add_store_options(rc)
    rc.add_argument(
        "--history",
        metavar="DIR",
        help="retention folder (default: journal-retention directory of --config)",
    )
    rc.add_argument("--target", metavar="DIR", required=True, help="new, empty directory")
    rc.add_argument("--records", action="store_true", help="write the live state record for record")
    rc.add_argument(
        "--undelete",
        action="store_true",
        help="also write records that were deleted (implies --records)",
    )
    rc.add_argument(
        "--events", action="store_true", help="also write event records as adds (implies --records)"
    )
    rc.add_argument("--force", action="store_true", help=FORCE_READ)
    rc.set_defaults(func=run_recover)


# -- recover -----------------------------------------------------------------------------------


def _config(args: argparse.Namespace) -> StoreConfig:
    """The file-store configuration of ``args``. Raises ConfigError for a database store."""
    config = store_config(args, command="store data recover")
    if config.store_type == "database":
        raise ConfigError(
            "store data recover: the database store keeps no retention history (journal "
            "retention copies finished journal files; the database store has none, and its "
            "deleted rows are gone), so there is nothing to recover from; Artemis too: "
            '"JDBC not supported on recover"',
            key="database-store",
            allowed="a file-store configuration with a journal-retention folder; for a database "
            "store, restore a database backup, or use store data exp while the rows exist",
        )
    if config.store_type != "file":
        raise ConfigError(
            "store data recover works on the file journal, and this configuration selects "
            f"the {config.store_type} store",
            key="persistence-enabled",
            allowed="a file-store configuration, or --journal / --history directories",
        )
    return config


def run_recover(args: argparse.Namespace) -> int:
    """Rebuild the message journal into ``--target`` and print what was read and written.

    Returns 0, or 1 when some source was damaged (read up to the damage) or a large message
    was left out; raises StoreError.
    """
    config = _config(args)
    if args.history is None and config.journal_retention is None:
        raise ConfigError(
            "store data recover needs --history (or a journal-retention directory in --config)",
            key="history",
            allowed="the retention folder to recover from",
        )
    console = common.console()
    with progress_console(args).status("reading the history"):
        result = recover_store(
            config,
            args.target,
            history_dir=args.history,
            records=args.records,
            undelete=args.undelete,
            events=args.events,
            file_size=config.journal_file_size if args.config else None,
            force=args.force,
        )
    report, history_dir = result.report, result.history
    from_history = sum(1 for s in report.sources if s.origin == "history")
    console.print(
        f"read {len(report.sources)} files ({from_history} from {history_dir}, "
        f"{len(report.sources) - from_history} from {result.journal}), "
        f"{report.generations} compaction generation(s)"
    )
    damaged = [s for s in report.sources if s.damage is not None]
    for s in damaged:
        console.print(f"damaged: {s.path}: {s.damage} (read up to the damage)")
    if isinstance(report, history.RecoverReport):
        console.print(
            f"wrote {report.records} records, {report.prepared} prepared transactions, "
            f"{report.deleted} deleted records and {report.events} events to {report.target}"
        )
        if report.failed:
            console.print(f"left out incomplete transactions: {', '.join(map(str, report.failed))}")
        return EXIT_PROBLEM if damaged else EXIT_OK
    console.print(
        f"wrote {report.messages} messages ({report.large_messages} large), {report.refs} "
        f"queue references and {report.page_transactions} page transactions to {report.target}"
    )
    if report.missing_bodies:
        console.print(
            f"left out {len(report.missing_bodies)} large message(s) whose body is gone from "
            f"{config.large_messages_directory} (and their {report.refs_left_out} queue "
            f"references): {', '.join(map(str, report.missing_bodies))}"
        )
    if report.bad_refs:
        console.print(f"left out {report.bad_refs} queue reference(s) that do not decode")
    problems = damaged or report.missing_bodies or report.bad_refs
    return EXIT_PROBLEM if problems else EXIT_OK
