"""Consoles for the commands: standard output that lets ``store … | head`` end quietly, and
the stderr console of progress displays, silenced by ``--quiet``.

rich's own answer to a closed pipe is ``SystemExit(1)``, so ``store perf | head`` exited 1
with no word of why. :class:`StdoutConsole` raises :class:`BrokenPipeError` instead, which
:func:`store.cli.main.main` turns into a quiet exit (a command with a verdict, such as
``store perf``, keeps its own exit status).

Thread-safety: as rich's Console.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

__all__ = ["StdoutConsole", "counted", "progress_console"]


class StdoutConsole(Console):
    """A Console on stdout whose closed pipe raises BrokenPipeError (see module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError("standard output was closed by its reader")


def progress_console(args: argparse.Namespace) -> Console:
    """The stderr console progress displays draw on: silent with ``--quiet`` (``-q``), so a
    script gets only the command's results and its errors. Lines it prints are never wrapped
    by rich (``soft_wrap``): a pipe or a log got them cut at 80 columns, mid-word. Raises
    nothing."""
    return Console(stderr=True, quiet=bool(getattr(args, "quiet", False)), soft_wrap=True)


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 warning``, ``2 warnings``, ``0 bodies`` (``plural`` when not ``noun`` + s)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
