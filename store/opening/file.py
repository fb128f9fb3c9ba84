"""Opening a file store (docs/file.md): the bindings and messages journals in their
directories, the large-message bodies in ``large-messages-directory`` and the page stores in
``paging-directory``, all through one file-system seam.

A file store opened with an HA node manager holds the node manager's live lock instead of
the journals' directory locks (docs/ha.md), so a plain open (and a read-only one) first asks
:func:`refuse_live_file_node` whether a node is live on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from store.errors import StoreError, StoreLockedError
from store.file import file_journal_options
from store.file.journal import FileJournal
from store.fs import FileSystem
from store.ha.files import live_holder
from store.large.files import FileLargeMessages
from store.paging.files import FilePagingManager
from store.parts import StoreParts

if TYPE_CHECKING:
    from store.config import StoreConfig

__all__ = ["open_file_store", "refuse_live_file_node"]


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


def refuse_live_file_node(config: StoreConfig) -> None:
    """A file store opened with a node manager holds the live lock instead of the journals'
    directory locks, so a plain open checks that lock. Raises StoreLockedError naming the
    holder when an HA node is live on this store."""
    holder = live_holder(config.node_manager_lock_directory)
    if holder is not None:
        raise StoreLockedError(
            f"the file store is live in an HA pair: the live lock in "
            f"{config.node_manager_lock_directory} is held by {holder}",
            holder=holder,
            hint="open it through the HA node manager (store ha run), or stop that node",
        )
