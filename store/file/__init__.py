"""The file store: the bindings and messages journals in pre-allocated, checksummed files
(docs/file.md). Its one opener is :func:`open_file_store`; :func:`store.open_store` calls it for a
configuration without a ``database-store`` section.

The modules, one concern each. The journal (``store.file.journal`` ties these together):

- ``format``: the bytes (file header, record, file-list marker), documented as tables;
- ``segments``: journal files: naming, pre-allocation, reuse, the pre-opened file;
- ``writer``: buffering and group commit; ``io``: NIO, MAPPED and ASYNCIO;
- ``reader``: records in sequence, what follows the end of data, and ``replay_file``, the one
  dispatch of record types (the load, the compactor and every offline tool go through it);
- ``index``: live ids and the reclaim counts; ``integrity``: every judgement of a directory
  (torn tail or corruption, missing or truncated files) for the load and the tools alike;
- ``compact``: the compactor and finishing an interrupted compaction;
- ``retention``: history copies; ``lock``: one writer per directory; ``options``: settings.

The offline tools (``store data``), which never create a journal and only read unless they
repair:

- ``survey``: listing, scanning and judging a directory read-only, as a load would see it;
- ``verify``: every finding; ``repair``: torn tails and forced cuts; ``salvage``: rewriting a
  damaged journal around its damage; ``history``: rebuilding one from retention history.

The file-system seam they all use is ``store.fs``; ``store.maintenance`` compacts a whole
store of either back-end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.errors import StoreError
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions, RetentionOptions
from store.fs import FileSystem, OsFileSystem
from store.large.files import FileLargeMessages
from store.paging.files import FilePagingManager
from store.parts import StoreParts

if TYPE_CHECKING:
    from store.config import StoreConfig

__all__ = ["file_journal_options", "open_file_store"]


def file_journal_options(
    config: StoreConfig, *, fs: FileSystem | None = None, lock: bool = True
) -> tuple[FileJournalOptions, FileJournalOptions]:
    """The (bindings, messages) journal options a file store uses for ``config``. Raises
    nothing (the configuration is validated already)."""
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


def open_file_store(
    config: StoreConfig, *, fs: FileSystem | None = None, lock: bool = True
) -> StoreParts:
    """Open the file store ``config`` describes: both journals, each locked at once (nothing is
    read until ``load()``). ``fs`` replaces the file-system seam (tests inject faults);
    ``lock=False`` skips the journals' directory locks (a store opened with the HA node
    manager: its live lock replaces them, docs/ha.md).

    The large-message directory is created when missing and cleared of bodies a dead process
    left incomplete (:mod:`store.large.files`). Returns its :class:`~store.parts.StoreParts`.
    Raises StoreLockedError when another process holds a journal directory, ConfigError for a
    directory that may not be created, StoreIOError when a directory cannot be used.
    """
    bindings_opts, messages_opts = file_journal_options(config, fs=fs, lock=lock)
    bindings = FileJournal(bindings_opts)
    try:
        messages = FileJournal(messages_opts)
    except BaseException:
        bindings.close()
        raise
    try:
        large_messages = FileLargeMessages(config.large_messages_directory, fs=bindings_opts.fs)
        try:
            paging = _paging(config, fs)
        except BaseException:
            large_messages.close()
            raise
    except BaseException:
        messages.close()
        bindings.close()
        raise

    def close() -> None:
        errors: list[StoreError] = []
        for part in (paging, large_messages, messages, bindings):
            try:
                part.close()
            except StoreError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    return StoreParts(
        kind="file",
        bindings=bindings,
        messages=messages,
        large_messages=large_messages,
        paging=paging,
        close=close,
    )


def _paging(config: StoreConfig, fs: FileSystem | None) -> FilePagingManager:
    """The page stores in ``paging-directory``. Raises StoreIOError."""
    return FilePagingManager(
        config.paging_directory,
        page_size_of=config.page_size_of,
        sync_timeout_ns=config.page_sync_timeout,
        fs=fs,
    )
