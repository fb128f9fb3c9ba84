"""Entry point of the ``store`` command.

Each subcommand lives in its own module of this package and exposes
``register(subparsers) -> None``, adding its parser(s) with ``set_defaults(func=...)``; the
function takes the parsed ``argparse.Namespace`` and returns an exit code. Subcommands parse,
call one public library function, and format its result; they never hold logic of their own.

``main()`` maps :class:`~store.errors.StoreError` to a one-line message (plus the error's hint,
unless the message already says it) on stderr and an exit code; ``--traceback`` shows the whole
chain instead.

Exit codes scripts can rely on:

====  =====================================================================
0     success
1     the command ran and found a problem (verify found damage, perf lost a record)
2     bad usage or bad configuration (ConfigError)
3     the store is locked by another process or the lock was lost
4     the store or database is unavailable, or an I/O error
5     corruption that needs an operator (CorruptionError)
6     any other StoreError
====  =====================================================================
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import traceback
from collections.abc import Sequence

from store.errors import (
    ConfigError,
    CorruptionError,
    LockLostError,
    StoreError,
    StoreIOError,
    StoreLockedError,
    StoreUnavailableError,
)

__all__ = ["build_parser", "main"]

# Modules of this package that contribute subcommands, in the order of ``store --help``.
_COMMAND_MODULES = ("perf", "data", "db", "ha", "mask", "report")

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2
EXIT_LOCKED = 3
EXIT_UNAVAILABLE = 4
EXIT_CORRUPT = 5
EXIT_ERROR = 6


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="store", description="Persistence layer of a message broker: journals, tools, reports."
    )
    parser.add_argument("--traceback", action="store_true", help="show full tracebacks on errors")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log more (-v info, -vv debug)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(f"store.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"store.cli.{name}":
                continue  # that area's commands are not part of this build
            raise
        module.register(sub)
    return parser


def exit_code_for(exc: StoreError) -> int:
    if isinstance(exc, ConfigError):
        return EXIT_USAGE
    if isinstance(exc, (StoreLockedError, LockLostError)):
        return EXIT_LOCKED
    if isinstance(exc, (StoreUnavailableError, StoreIOError)):
        return EXIT_UNAVAILABLE
    if isinstance(exc, CorruptionError):
        return EXIT_CORRUPT
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args))
    except StoreError as exc:
        if args.traceback:
            traceback.print_exc()
        else:
            print(f"store: error: {exc}", file=sys.stderr)
            if exc.hint and exc.hint not in str(exc):  # said once: "did you mean" is in both
                print(f"store: hint: {exc.hint}", file=sys.stderr)
        return exit_code_for(exc)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
