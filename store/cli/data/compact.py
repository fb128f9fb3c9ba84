"""``store data compact``: offline compaction of both journals, file or database."""

from __future__ import annotations

import argparse
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from store import maintenance
from store.cli.data import common
from store.cli.data.options import add_store_options, store_config
from store.cli.main import EXIT_OK
from store.cli.output import progress_console

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add this module's ``store data`` subcommands to ``sub``. Returns nothing."""
    c = sub.add_parser(
        "compact",
        help="open the store and compact both journals",
        description="Open the configured store (file or database), load both journals and "
        "compact each: live records rewritten into as few files as possible (the file store) "
        "or dead rows removed (the database). The store never grows: free files beyond "
        "journal-min-files and the one pre-opened file are removed afterwards.",
    )
    add_store_options(c)
    c.set_defaults(func=run_compact)


# -- compact -----------------------------------------------------------------------------------


def run_compact(args: argparse.Namespace) -> int:
    """Compact both journals with a progress display, then print before/after figures.

    Returns 0; raises StoreError (locked store, corruption, I/O).
    """
    console = common.console()
    config = store_config(args, command="store data compact")
    steps = 4
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=progress_console(args),
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
    # a database journal's "files" are its table's rows
    unit = "rows" if config.database_store is not None else "data files"
    table = Table("journal", unit, "live bytes", "total bytes", "seconds")
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
