"""Opening a store: the configuration picks the back-end (DESIGN §3, §4).

- ``persistence-enabled = false``: zero persistence (nothing written, loads return nothing);
- a ``database-store`` section: the database store (``store.db``);
- otherwise: the native file journal, messages in ``journal-directory`` and bindings in
  ``bindings-directory``.

Opening takes each journal's lock at once, so a second process opening the same store gets
:class:`~store.errors.StoreLockedError` immediately; nothing is read until ``load()``.

Thread-safety: a :class:`Store` may be shared between threads; ``close`` is idempotent.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

from store.config import StoreConfig
from store.errors import StoreError
from store.file.fs import FileSystem, OsFileSystem
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions, RetentionOptions
from store.journal.api import Journal
from store.journal.zero import ZeroJournal

__all__ = ["Store", "file_journal_options", "open_store"]


class Store:
    """The two journals of one store; close it (or use ``with``) to release it."""

    def __init__(
        self,
        config: StoreConfig,
        bindings: Journal,
        messages: Journal,
        *,
        kind: str,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self.bindings = bindings
        self.messages = messages
        #: "file", "database" or "none" (zero persistence).
        self.kind = kind
        self._on_close = on_close
        self._closed = False

    def close(self) -> None:
        """Close both journals (making what was appended durable) and release the store."""
        if self._closed:
            return
        self._closed = True
        errors: list[StoreError] = []
        if self._on_close is not None:
            try:
                self._on_close()
            except StoreError as exc:
                errors.append(exc)
        else:
            for journal in (self.messages, self.bindings):
                try:
                    journal.close()
                except StoreError as exc:
                    errors.append(exc)
        if errors:
            raise errors[0]

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store(kind={self.kind!r}, closed={self._closed})"


def file_journal_options(
    config: StoreConfig, *, fs: FileSystem | None = None, lock: bool = True
) -> tuple[FileJournalOptions, FileJournalOptions]:
    """The (bindings, messages) journal options a file store uses for ``config``."""
    fs = fs or OsFileSystem()
    retention = None
    if config.journal_retention is not None:
        r = config.journal_retention
        retention = RetentionOptions(
            directory=r.directory, period_seconds=r.period_seconds, storage_limit=r.storage_limit
        )
    common = dict(
        min_files=config.journal_min_files,
        pool_files=config.journal_pool_files,
        buffer_timeout_ns=config.journal_buffer_timeout,
        buffer_size=config.journal_buffer_size,
        datasync=config.journal_datasync,
        sync_transactional=config.journal_sync_transactional,
        sync_non_transactional=config.journal_sync_non_transactional,
        compact_min_files=config.journal_compact_min_files,
        compact_percentage=config.journal_compact_percentage,
        max_attic_files=config.journal_max_attic_files,
        fs=fs,
        lock=lock,
    )
    messages = FileJournalOptions(
        directory=config.journal_directory,
        create_directory=config.create_journal_dir,
        file_size=config.journal_file_size,
        journal_type=config.journal_type,
        max_io=config.journal_max_io,
        retention=retention,
        **common,  # type: ignore[arg-type]
    )
    bindings = FileJournalOptions.bindings(
        config.bindings_directory, create_directory=config.create_bindings_dir, **common
    )
    return bindings, messages


def open_store(config: StoreConfig, *, fs: FileSystem | None = None) -> Store:
    """Open the store ``config`` describes; returns a :class:`Store` whose journals need ``load()``.

    ``fs`` replaces the file-system seam of the file store (tests use a fault-injecting one).
    Raises StoreLockedError when another process holds the store, ConfigError for settings the
    back-end refuses, StoreUnavailableError when a database cannot be reached.
    """
    if not config.persistence_enabled:
        return Store(config, ZeroJournal("bindings"), ZeroJournal("messages"), kind="none")
    if config.database_store is not None:
        from store.db import open_database_journals

        journals = open_database_journals(config)
        return Store(
            config, journals.bindings, journals.messages, kind="database", on_close=journals.close
        )
    bindings_opts, messages_opts = file_journal_options(config, fs=fs)
    bindings = FileJournal(bindings_opts)
    try:
        messages = FileJournal(messages_opts)
    except BaseException:
        bindings.close()
        raise
    return Store(config, bindings, messages, kind="file")
