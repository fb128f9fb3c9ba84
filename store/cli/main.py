"""Entry point of the ``store`` command.

Each subcommand lives in its own module of this package and exposes
``register(subparsers) -> None``, adding its parser(s) with ``set_defaults(func=...)``; the
function takes the parsed ``argparse.Namespace`` and returns an exit code. Subcommands parse,
call one public library function, and format its result; they never hold logic of their own.

``main()`` maps :class:`~store.errors.StoreError` to a one-line message (plus the error's hint,
unless the message already says it) on stderr and an exit code; ``--traceback`` shows the whole
chain instead. The library's log records go to stderr one line each (warnings by default, ``-v``
info, ``-vv`` debug); an exception logged with a record is summarised on its line unless
``--traceback``. ``--traceback``, ``-q`` (no progress display) and ``-v`` are accepted before
and after the subcommand.

Exit codes scripts can rely on:

====  =====================================================================
0     success
1     the command ran and found a problem (verify found damage, perf lost a record)
2     bad usage or bad configuration (ConfigError: an option naming a file that is not
      there included), or a missing extra (the line names the pip command of this
      Python that installs it)
3     the store is locked by another process or the lock was lost
4     the store or database is unavailable, or an I/O error
5     corruption that needs an operator (CorruptionError)
6     any other StoreError
7     bad input: a file the command reads is malformed or refused (``store data imp``)
====  =====================================================================
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import logging
import os
import sys
import traceback
from collections.abc import Iterator, Sequence

from store.errors import (
    ConfigError,
    CorruptionError,
    LockLostError,
    StoreError,
    StoreIOError,
    StoreLockedError,
    StoreUnavailableError,
)
from store.extras import extra_for, missing_extra_message

__all__ = ["build_parser", "main", "package_version", "parse_args", "silence_stdout"]

# Modules of this package that contribute subcommands, in the order of ``store --help``.
_COMMAND_MODULES = ("perf", "data", "db", "ha", "broker", "mask", "report")
#: Commands a module registers besides the one named as it.
_COMMAND_ALIASES = {"perf-journal": "perf"}

EXIT_OK = 0
EXIT_PROBLEM = 1
EXIT_USAGE = 2
EXIT_LOCKED = 3
EXIT_UNAVAILABLE = 4
EXIT_CORRUPT = 5
EXIT_ERROR = 6
EXIT_BAD_INPUT = 7


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``store`` parser with every subcommand of this build, or with only those of the
        command module ``only`` (what :func:`main` builds for a command line that names one: the
        other modules' imports, SQLAlchemy's among them, then cost a command nothing).

        ``--traceback``, ``-q`` (no progress display) and ``-v`` are accepted before and after the
    subcommand. Returns the parser.
        Raises nothing (a subcommand module that is missing from this build is left out).
    """
    parser = argparse.ArgumentParser(
        prog="store",
        description="Persistence layer of a message broker: journals, tools, reports.",
        epilog="exit codes: 0 success, 1 the command found a problem, 2 bad usage or "
        "configuration (or a missing extra: the line names the pip install), 3 the store is "
        "locked (or the lock was lost), 4 store or database unavailable, 5 corruption that "
        "needs an operator, 6 any other store error, 7 bad input (a malformed or refused file)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    _add_shell_options(parser, depth=0)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES if only is None else (only,):
        try:
            module = importlib.import_module(f"store.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"store.cli.{name}":
                continue  # that area's commands are not part of this build
            raise
        module.register(sub)
    _add_shell_options_to_subcommands(parser, depth=1)
    return parser


def package_version() -> str:
    """The installed package's version, else ``store.__version__`` if any, else "unknown (…)"."""
    try:
        return importlib.metadata.version("store")
    except importlib.metadata.PackageNotFoundError:
        import store

        return str(getattr(store, "__version__", "unknown (the package is not installed)"))


# The options of the shell (this module), accepted at every level of subcommands. argparse parses
# a subcommand's arguments into a fresh namespace and copies every attribute it set over the
# caller's, so below the top the options have no default (SUPPRESS: an option given before the
# subcommand is not overwritten) and each level counts -v under its own name (-v given at several
# levels adds up).
_VERBOSE_AT = "verbose_at_level_"


def _add_shell_options(parser: argparse.ArgumentParser, *, depth: int) -> None:
    existing = parser._option_string_actions  # a subcommand's own option of that name wins
    top = depth == 0
    if "--traceback" not in existing:
        parser.add_argument(
            "--traceback",
            action="store_true",
            default=False if top else argparse.SUPPRESS,
            help="show full tracebacks on errors",
        )
    if "-q" not in existing and "--quiet" not in existing:
        parser.add_argument(
            "-q",
            "--quiet",
            action="store_true",
            default=False if top else argparse.SUPPRESS,
            help="no progress display",
        )
    if "-v" not in existing and "--verbose" not in existing:
        parser.add_argument(
            "-v",
            "--verbose",
            action="count",
            dest="verbose" if top else f"{_VERBOSE_AT}{depth}",
            default=0 if top else argparse.SUPPRESS,
            help="log more (-v info, -vv debug)",
        )


def _add_shell_options_to_subcommands(parser: argparse.ArgumentParser, *, depth: int) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for subparser in action.choices.values():
                if id(subparser) not in seen:  # aliases share one parser
                    seen.add(id(subparser))
                    _add_shell_options(subparser, depth=depth)
                    _add_shell_options_to_subcommands(subparser, depth=depth + 1)


def parse_args(
    argv: Sequence[str] | None = None, parser: argparse.ArgumentParser | None = None
) -> argparse.Namespace:
    """Parse a ``store`` command line (``sys.argv[1:]`` when ``argv`` is ``None``).

    Returns the namespace, with ``verbose`` the number of ``-v`` given at any level and
    ``traceback`` true when ``--traceback`` was given at any level. Raises ``SystemExit`` on
    bad usage, ``--help`` and ``--version``, as argparse does.
    """
    args = (parser or build_parser()).parse_args(argv)
    levels = [name for name in vars(args) if name.startswith(_VERBOSE_AT)]
    args.verbose += sum(getattr(args, name) for name in levels)
    for name in levels:
        delattr(args, name)
    return args


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


def _command_module(argv: Sequence[str]) -> str | None:
    """The command module of the command ``argv`` names (its first word that is not an
    option: the top-level options take no value), or None when it names none this build
    knows. Raises nothing."""
    for word in argv:
        if not word.startswith("-"):
            module = _COMMAND_ALIASES.get(word, word)
            return module if module in _COMMAND_MODULES else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``store`` command line. Returns the exit code (see the module docstring)."""
    parser = build_parser(_command_module(sys.argv[1:] if argv is None else argv))
    args = parse_args(argv, parser)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    with _logging_to_stderr(verbose=args.verbose, show_traceback=args.traceback):
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
        except ModuleNotFoundError as exc:
            # A module of an extra this install lacks (a driver, PySpark): one line naming the
            # extra, as the drivers' ConfigError says it. Any other missing module is a bug.
            extra = extra_for(exc.name)
            if extra is None or args.traceback:
                raise
            print(f"store: error: {missing_extra_message(exc.name or '?', extra)}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:
            # `store … | head`: the reader stopped listening; nothing more to say to it.
            silence_stdout()
            return EXIT_OK


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush into a pipe the reader
    closed does not fail again at exit. Returns nothing; raises nothing."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


class _OneLineFormatter(logging.Formatter):
    """``WARNING store.config.broker_xml: <message>``: one line per record.

    An exception logged with the record (``log.exception`` in a background thread, e.g. a full
    disk while pre-opening a journal file) is summarised on the same line unless
    ``--traceback``: the failure that matters reaches the command as a StoreError, shown as one
    line plus its hint.
    """

    def __init__(self, *, show_traceback: bool) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")
        self.show_traceback = show_traceback

    def format(self, record: logging.LogRecord) -> str:
        if self.show_traceback:
            return super().format(record)
        record.message = record.getMessage()
        text = self.formatMessage(record)
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            text += f" ({type(exc).__name__}: {exc})"
        return text


class _StderrHandler(logging.Handler):
    """Writes each record to whatever ``sys.stderr`` is at that time (tests replace it).

    Thread-safety: ``logging.Handler.handle`` holds the handler's lock around :meth:`emit`.
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def _logging_to_stderr(*, verbose: int, show_traceback: bool) -> Iterator[None]:
    # Warnings show by default; -v adds info, -vv debug. Restored afterwards, so main() can run
    # many times in one process (tests) without stacking handlers.
    root = logging.getLogger()
    handler = _StderrHandler()
    handler.setFormatter(_OneLineFormatter(show_traceback=show_traceback))
    old_level = root.level
    root.setLevel(logging.WARNING - 10 * min(verbose, 2))
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


if __name__ == "__main__":
    sys.exit(main())
