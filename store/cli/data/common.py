"""What the file-level ``store data`` commands share: the console and the journals chosen.

Thread-safety: functions of the command's one thread.
"""

from __future__ import annotations

import argparse

from rich.console import Console

from store.cli.data.options import store_config
from store.config import StoreConfig
from store.errors import ConfigError
from store.file import file_journal_options, survey
from store.file.options import FileJournalOptions

__all__ = ["console", "file_config", "file_journals", "journal_options"]


def journal_options(parser: argparse.ArgumentParser, *, skips: bool = True) -> None:
    """``--config``, ``--journal``, ``--bindings`` and (``skips``) ``--skip-bindings`` /
    ``--skip-journal``: the options of a command that works on the file journals only."""
    parser.add_argument("--config", metavar="PATH", help="store configuration (TOML or broker.xml)")
    parser.add_argument("--journal", metavar="DIR", help="message journal directory")
    parser.add_argument("--bindings", metavar="DIR", help="bindings journal directory")
    if skips:
        parser.add_argument("--skip-bindings", action="store_true", help="leave the bindings out")
        parser.add_argument("--skip-journal", action="store_true", help="leave the messages out")


def file_config(args: argparse.Namespace) -> StoreConfig:
    """The configuration of ``args``, which must select the file store. Raises ConfigError."""
    config = store_config(args, command=f"store data {args.data_command}")
    if config.store_type != "file":
        raise ConfigError(
            f"store data {args.data_command} works on the file journal, and this configuration "
            f"selects the {config.store_type} store",
            key="database-store" if config.store_type == "database" else "persistence-enabled",
            allowed="a file-store configuration, or --journal / --bindings directories",
        )
    return config


def file_journals(args: argparse.Namespace) -> list[tuple[str, FileJournalOptions]]:
    """The journals the command works on, each checked to hold a journal before any is
    touched (a command never acts on one journal and then fails on the other's path)."""
    bindings, messages = file_journal_options(file_config(args), lock=False)
    chosen = []
    if not getattr(args, "skip_bindings", False):
        chosen.append(("bindings", bindings))
    if not getattr(args, "skip_journal", False):
        chosen.append(("messages", messages))
    for _name, opts in reversed(chosen):  # the message journal first: --journal names it
        survey.require_journal(opts.directory, prefix=opts.prefix, fs=opts.fs)
    return chosen


def console() -> Console:
    """A console for the command's output: a terminal's width, 200 columns into pipes."""
    out = Console(highlight=False, soft_wrap=True)
    if not out.is_terminal:
        # Pipes and logs get whole lines and tables wider than the 80 columns rich assumes.
        out = Console(highlight=False, soft_wrap=True, width=200)
    return out
