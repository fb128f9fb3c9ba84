"""What the file-level ``store data`` commands share: the console, the journal options, and the
check that a configuration selects the file store.

Thread-safety: functions of the command's one thread.
"""

from __future__ import annotations

import argparse

from rich.console import Console

from store.config import StoreConfig
from store.errors import ConfigError

__all__ = ["console", "journal_options", "require_file_store"]


def journal_options(parser: argparse.ArgumentParser, *, skips: bool = True) -> None:
    """``--config``, ``--journal``, ``--bindings`` and (``skips``) ``--skip-bindings`` /
    ``--skip-journal``: the options of a command that works on the file journals only."""
    parser.add_argument("--config", metavar="PATH", help="store configuration (TOML or broker.xml)")
    parser.add_argument("--journal", metavar="DIR", help="message journal directory")
    parser.add_argument("--bindings", metavar="DIR", help="bindings journal directory")
    if skips:
        parser.add_argument("--skip-bindings", action="store_true", help="leave the bindings out")
        parser.add_argument("--skip-journal", action="store_true", help="leave the messages out")


def require_file_store(config: StoreConfig, data_command: str) -> StoreConfig:
    """``config``, which must select the file store for ``store data DATA_COMMAND``. Returns
    it; raises ConfigError naming the store it selects instead."""
    if config.store_type != "file":
        raise ConfigError(
            f"store data {data_command} works on the file journal, and this configuration "
            f"selects the {config.store_type} store",
            key="database-store" if config.store_type == "database" else "persistence-enabled",
            allowed="a file-store configuration, or --journal / --bindings directories",
        )
    return config


def console() -> Console:
    """A console for the command's output: a terminal's width, 200 columns into pipes."""
    out = Console(highlight=False, soft_wrap=True)
    if not out.is_terminal:
        # Pipes and logs get whole lines and tables wider than the 80 columns rich assumes.
        out = Console(highlight=False, soft_wrap=True, width=200)
    return out
