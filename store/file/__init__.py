"""The file store: the bindings and messages journals in pre-allocated, checksummed files
(docs/file.md). A store of this kind is assembled (with its large messages and page stores) by
:func:`store.opening.file.open_file_store`, which :func:`store.open_store` calls for a
configuration without a ``database-store`` section; this package gives it the journals and
:func:`file_journal_options`, and imports nothing above it.

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

from store.file.options import FileJournalOptions, RetentionOptions
from store.fs import FileSystem, OsFileSystem

if TYPE_CHECKING:
    from store.config import StoreConfig

__all__ = ["file_journal_options"]


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
