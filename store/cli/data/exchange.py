"""``store data exp`` / ``store data imp``: a store's messages in Artemis's XML export format.

Thin layers over :func:`store.data.xml.export.export_xml` and
:func:`store.data.xml.import_.import_xml` (their docstrings say what is exported, what an
import does and what a failed one keeps). ``exp`` writes the XML to standard output or
``--output FILE``, its summary to stderr; ``imp`` reads ``--input FILE`` and prints its
summary. Both show a progress bar (messages) on stderr unless ``--quiet``.

Exit codes: 0 done; 2 no store to export, a bad configuration, or an ``--input`` that does
not exist or cannot be read (a usage error: nothing is wrong with the store); 3 the store is
held by another process; 4 the output cannot be written or the store is unavailable; 7 the
input is malformed or refused (file, line and column named; nothing imported) -- its own code,
so that a script can tell a bad file from a damaged store (5); 6 the store refused a message
(e.g. an address full under the FAIL policy: what was committed stays).

Unlike the other ``store data`` commands, ``imp`` creates the store when it does not exist
(a fresh store is where an import usually goes); ``exp`` never creates one.

Thread-safety: a command runs once per process; nothing is shared.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from store.cli.data.options import add_store_options, store_config
from store.cli.main import EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEM
from store.cli.output import progress_console
from store.errors import ConfigError, StoreIOError

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add this module's ``store data`` subcommands to ``sub``. Returns nothing."""
    e = sub.add_parser(
        "exp",
        help="export addresses, queues and messages as Artemis's XML",
        description="Export every address, queue and message still routed to a queue (with "
        "the names of the queues that hold it, paged messages included) in Artemis's XML "
        "export format, to standard output or --output FILE. Reads the store through the "
        "storage manager, opened read-only: not a byte or row of the store changes (a store "
        "a running process holds is refused, and none can start meanwhile). Never creates a "
        "store.",
    )
    add_store_options(e)
    e.add_argument("--output", metavar="FILE", help="write the XML here (default: stdout)")
    e.add_argument(
        "--skip-damaged",
        action="store_true",
        help="export everything readable: leave out each large message whose body is damaged "
        "or gone and each damaged page record, and list them (exit 1 when anything was left "
        "out); without it a damaged store fails naming the damage",
    )
    e.set_defaults(func=run_export)
    i = sub.add_parser(
        "imp",
        help="import Artemis's XML export into a store",
        description="Import an XML export (Artemis's format) into the store, creating it, and "
        "the addresses and queues, when they do not exist. The whole file is checked first "
        "(nothing is imported from a malformed file, or one with a DTD or entities); then each "
        "message is sent to its queues with new ids, committed every --commit-interval "
        "messages (a failure keeps what was committed) or in one transaction "
        "(--transactional: a failure keeps nothing).",
    )
    add_store_options(i)
    i.add_argument("--input", metavar="FILE", required=True, help="the XML file to import")
    i.add_argument(
        "--commit-interval",
        type=_positive,
        default=1000,
        metavar="N",
        help="commit every N messages (default 1000)",
    )
    i.add_argument(
        "--transactional",
        action="store_true",
        help="import everything in one transaction",
    )
    i.set_defaults(func=run_import)


def _check_input(path: str) -> None:
    """Refuse an ``--input`` that is not a readable file before any store is opened. Raises
    ConfigError (exit 2: the command line names something that is not there)."""
    try:
        with open(path, "rb"):
            pass
        if not os.path.isfile(path):
            raise IsADirectoryError(errno.EISDIR, "not a regular file", path)
    except OSError as exc:
        raise _unreadable(path, exc) from exc


def _unreadable(path: str, exc: BaseException) -> ConfigError:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return ConfigError(
        f"cannot read {path}: {reason}",
        key="--input",
        value=path,
        allowed="a readable XML export file",
    )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


@contextlib.contextmanager
def _progress(
    args: argparse.Namespace, what: str
) -> Iterator[tuple[Callable[[int], None], Callable[[int, int], None]]]:
    """``(start(total), update(done, total))`` for a progress bar that appears once the store
    is open (a command that fails before gets its one-line error and no bar)."""
    progress = Progress(
        TextColumn(what),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=progress_console(args),
        transient=False,
    )
    task = progress.add_task(what, total=None, start=False)
    started = [False]

    def start(total: int) -> None:
        progress.start()
        progress.start_task(task)
        progress.update(task, total=total)
        started[0] = True

    def update(done: int, total: int) -> None:
        progress.update(task, completed=done, total=total)

    try:
        yield start, update
    finally:
        if started[0]:
            progress.stop()


def run_export(args: argparse.Namespace) -> int:
    """Export the store. Returns 0, or 1 when ``--skip-damaged`` left something out (each
    listed on stderr); raises StoreError (no store, locked, I/O, corruption)."""
    from store.data.xml.export import export_xml

    config = store_config(args, command="store data exp")
    with _progress(args, "exporting messages") as (start, update):
        output = args.output if args.output else sys.stdout.buffer
        result = export_xml(
            config,
            output,
            on_open=lambda: start(0),
            on_progress=update,
            skip_damaged=args.skip_damaged,
        )
        if not args.output:
            sys.stdout.buffer.flush()
    err = progress_console(args)
    err.print(
        f"exported {result.addresses} addresses, {result.queues} queues, "
        f"{result.messages} messages ({result.large_messages} large, {result.body_bytes} "
        f"body bytes) in {result.seconds:.1f} s" + (f" to {args.output}" if args.output else "")
    )
    for line in result.skipped:
        err.print(f"skipped: {line}", soft_wrap=True)
    if result.skipped:
        err.print(f"{len(result.skipped)} damaged part(s) left out of the export")
        return EXIT_PROBLEM
    return EXIT_OK


def run_import(args: argparse.Namespace) -> int:
    """Import the file. Returns 0, or 7 (one line on stderr) when the file is malformed or
    refused. Raises ConfigError (exit 2) for an ``--input`` that cannot be read, StoreError
    for the store's failures (locked, unavailable, I/O)."""
    from store.data.xml.import_ import import_xml
    from store.data.xml.reader import XmlFormatError

    config = store_config(args, command="store data imp")
    _check_input(args.input)
    try:
        with _progress(args, "importing messages") as (start, update):
            result = import_xml(
                config,
                args.input,
                commit_interval=args.commit_interval,
                transactional=args.transactional,
                on_open=start,
                on_progress=update,
            )
    except XmlFormatError as exc:
        print(f"store: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except StoreIOError as exc:
        if exc.path is not None and os.path.abspath(exc.path) == os.path.abspath(args.input):
            raise _unreadable(args.input, exc.__cause__ or exc) from exc
        raise
    print(
        f"imported {result.messages} messages ({result.large_messages} large, "
        f"{result.body_bytes} body bytes); created {result.addresses_created} addresses and "
        f"{result.queues_created} queues; {result.seconds:.1f} s"
    )
    return EXIT_OK
