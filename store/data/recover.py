"""Rebuilding a store's message journal from its retention history: :func:`recover_store`, the
library behind ``store data recover`` (docs/cli.md).

It chooses between the two ways a journal is rebuilt from its history: every message ever
added (:func:`~store.data.recover_messages.recover_messages_from_history`, the default, as
Artemis's ``data recover``) or the journal record for record
(:func:`~store.file.history.recover_from_history`, when ``records``, ``undelete`` or
``events`` is asked for). The database store keeps no retention history and is refused.
It returns a result and never prints.

Thread-safety: each call works alone on its directories.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.config import StoreConfig
from store.data.recover_messages import MessageRecoverReport, recover_messages_from_history
from store.errors import ConfigError
from store.file import file_journal_options
from store.file import history as file_history

__all__ = ["StoreRecoverResult", "recover_store"]


@dataclass(frozen=True, slots=True)
class StoreRecoverResult:
    """What :func:`recover_store` read and wrote: the ``history`` folder and the ``journal``
    directory it read, and the report of the way it rebuilt the journal —
    :class:`~store.file.history.RecoverReport` (record for record) or
    :class:`~store.data.recover_messages.MessageRecoverReport` (every message). Immutable."""

    history: str
    journal: str
    report: file_history.RecoverReport | MessageRecoverReport


def recover_store(
    config: StoreConfig,
    target: str,
    *,
    history_dir: str | None = None,
    records: bool = False,
    undelete: bool = False,
    events: bool = False,
    file_size: int | None = None,
    force: bool = False,
) -> StoreRecoverResult:
    """Rebuild the message journal of the file store ``config`` describes in the new, empty
    directory ``target``, from ``history_dir`` (default: the configuration's journal-retention
    directory) and the current journal files.

    By default every message ever added is written, each routed once to each queue it was
    ever routed to, with the page transactions (a large message whose body is gone from the
    large-message folder is left out and listed). ``records`` writes the live state record for
    record instead; ``undelete`` (implies ``records``) also writes back every committed record
    a delete removed; ``events`` (implies ``records``) writes retention events as plain adds.
    ``file_size`` is the new files' size (default: the largest source file); ``force`` reads a
    journal a live process holds.

    Returns the :class:`StoreRecoverResult`. Raises ConfigError for a database store or a
    store without persistence, without a history folder, when ``target`` is not empty or
    there is nothing to read; StoreLockedError naming the holder (without ``force``);
    StoreIOError on I/O failure.
    """
    if config.store_type != "file":
        raise ConfigError(
            f"recover works on the file store, and this configuration selects the "
            f"{config.store_type} store (the database store keeps no retention history)",
            key="database-store" if config.store_type == "database" else "persistence-enabled",
            allowed="a file-store configuration with a journal-retention folder",
        )
    if history_dir is None and config.journal_retention is not None:
        history_dir = config.journal_retention.directory
    if history_dir is None:
        raise ConfigError(
            "recover needs a history folder: the configuration has no journal-retention "
            "directory and none was given",
            key="journal-retention",
            allowed="the retention folder to recover from",
        )
    _bindings, messages = file_journal_options(config, lock=False)
    report: file_history.RecoverReport | MessageRecoverReport
    if records or undelete or events:
        report = file_history.recover_from_history(
            history_dir,
            target,
            journal=messages.directory,
            prefix=messages.prefix,
            kind=messages.kind,
            file_size=file_size,
            undelete=undelete,
            events=events,
            force=force,
        )
    else:
        report = recover_messages_from_history(
            history_dir,
            target,
            journal=messages.directory,
            large_messages=config.large_messages_directory,
            prefix=messages.prefix,
            kind=messages.kind,
            file_size=file_size,
            force=force,
        )
    return StoreRecoverResult(history_dir, messages.directory, report)
