"""Opening a store to read it and change nothing: ``open_store(config, read_only=True)``.

What the read-only tools that go through the storage manager use (``store data exp``): a
store opened this way loads as a normal open would, and leaves every byte of a file store and
every row of a database store as it found them.

- **Journals**: each a :class:`~store.journal.readonly.ReadOnlyJournal`. The file store's
  journals are replayed by the offline scan (:func:`store.file.survey.scan_journal`, the load's
  own dispatch, files opened read-only; an interrupted compaction is seen as the load would
  finish it, a torn tail is ignored, not zeroed); a directory a load would refuse raises the
  same CorruptionError. A database journal is read by
  :meth:`~store.db.journal.DatabaseJournal.replay` on connections that refuse writes
  (:func:`~store.db.engine.read_only_sessions`), and a store without a schema is refused,
  never created.
- **Large messages and page stores**: opened with their ``read_only`` flag: no incomplete body
  is cleaned up, no leftover page folder or table removed, no page created, cut or deleted.
- **Locks**: a file store's journal directories are held with a *shared* lock on their existing
  lock files (a writer that starts meanwhile is refused, and a live writer refuses us:
  StoreLockedError naming it); a live HA node on the store is refused too. A database store
  takes its usual store lock (an advisory lock on PostgreSQL and MariaDB, no row written; on
  SQLite the ``flock`` sidecar file beside the database, which is not the store's data).

Every write a code path would still attempt is refused with JournalStateError naming the part
(or, on a database, the database's own read-only error), so nothing changes silently. A
storage manager over such a store (``Store.read_only``) applies what its load would sweep to
its own view only and records nothing at close.

The parts are assembled here, beside the back-ends' writable openers (:mod:`store.opening`),
and from the same back-end pieces.

Thread-safety: as :class:`~store.store.Store`.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import TYPE_CHECKING, Protocol

from store.errors import StoreError
from store.journal.api import LoadResult
from store.journal.readonly import ReadOnlyJournal
from store.parts import StoreParts

if TYPE_CHECKING:
    from store.config import StoreConfig
    from store.file.options import FileJournalOptions

__all__ = ["open_read_only_parts"]


def open_read_only_parts(config: StoreConfig) -> StoreParts:
    """The parts of the store ``config`` describes, opened read-only (see the module
    docstring). Raises StoreLockedError when a writer or a live HA node holds the store,
    ConfigError when a journal directory holds no journal, SchemaError when a database holds
    no store (or an old one), StoreUnavailableError when it cannot be reached."""
    if not config.persistence_enabled:
        from store.opening.zero import open_zero_store

        return dataclasses.replace(
            open_zero_store(page_size_of=config.page_size_of), read_only=True
        )
    if config.database_store is not None:
        return _database(config)
    return _file(config)


def _file(config: StoreConfig) -> StoreParts:
    from store.file import file_journal_options
    from store.file.lock import SharedDirectoryLock
    from store.large.files import FileLargeMessages
    from store.opening.file import refuse_live_file_node
    from store.paging.files import FilePagingManager

    refuse_live_file_node(config)
    bindings_opts, messages_opts = file_journal_options(config, lock=False)
    locks: list[SharedDirectoryLock] = []

    def release() -> None:
        for lock in locks:
            lock.release()

    try:
        for opts in (bindings_opts, messages_opts):
            lock = SharedDirectoryLock(opts.directory)
            lock.acquire()
            locks.append(lock)
        bindings = ReadOnlyJournal(
            bindings_opts.directory, partial(_replay_file_journal, bindings_opts)
        )
        messages = ReadOnlyJournal(
            messages_opts.directory, partial(_replay_file_journal, messages_opts)
        )
        fs = bindings_opts.fs
        large = FileLargeMessages(config.large_messages_directory, fs=fs, read_only=True)
        paging = FilePagingManager(
            config.paging_directory,
            page_size_of=config.page_size_of,
            sync_timeout_ns=config.page_sync_timeout,
            fs=fs,
            read_only=True,
        )
    except BaseException:
        release()
        raise

    def close() -> None:
        try:
            _close_all(paging, large)
        finally:
            release()

    return StoreParts(
        kind="file",
        bindings=bindings,
        messages=messages,
        large_messages=large,
        paging=paging,
        close=close,
        read_only=True,
    )


def _replay_file_journal(opts: FileJournalOptions) -> LoadResult:
    """A file journal's load, read-only: the offline scan with the load's dispatch. Raises
    the first problem a load would raise (a CorruptionError), StoreIOError."""
    from store.file.survey import scan_journal

    scan = scan_journal(opts.directory, prefix=opts.prefix, fs=opts.fs, replay=True, kind=opts.kind)
    if scan.problems:
        raise scan.problems[0].error
    assert scan.replay is not None
    return scan.replay.result()


def _database(config: StoreConfig) -> StoreParts:
    from store.db import open_database_journals
    from store.large.database import DatabaseLargeMessages
    from store.paging.database import DatabasePagingManager

    db = config.database_store
    assert db is not None
    journals = open_database_journals(config, read_only=True)
    try:
        bindings = ReadOnlyJournal(journals.bindings.name, journals.bindings.replay)
        messages = ReadOnlyJournal(journals.messages.name, journals.messages.replay)
        large = DatabaseLargeMessages(
            journals.engine, journals.schema.large_messages, read_only=True
        )
        large.check_rows()  # damage a normal open refuses is refused here too
        paging = DatabasePagingManager(
            journals.engine,
            journals.schema,
            page_size_of=config.page_size_of,
            sync_timeout_ns=config.page_sync_timeout,
            max_page_size=db.jdbc_max_page_size_bytes,
            where=journals.target.display,
            read_only=True,
        )
    except BaseException:
        journals.close()
        raise

    def close() -> None:
        _close_all(paging, large, journals)

    return StoreParts(
        kind="database",
        bindings=bindings,
        messages=messages,
        large_messages=large,
        paging=paging,
        close=close,
        read_only=True,
    )


class _Closable(Protocol):
    def close(self) -> None: ...


def _close_all(*parts: _Closable) -> None:
    """Close every part; raises the first StoreError after closing the others."""
    errors: list[StoreError] = []
    for part in parts:
        try:
            part.close()
        except StoreError as exc:
            errors.append(exc)
    if errors:
        raise errors[0]
