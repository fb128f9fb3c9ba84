"""What ``store data print`` shows of a store, as a stream of entries: the library side of the
command (docs/cli.md, reference §6), on the file store and on the database store.

Usage::

    from store.data.describe import DescribeOptions, describe_store

    for entry in describe_store(config, DescribeOptions(safe=True)):
        ...                      # NodeId, Journal, JournalFile, Marker, Record, Summary,
                                 # PagingAddress, Page, PagedMessage, LargeMessage

Order: the node id; then per journal (bindings, then messages) its start (:class:`Journal`),
its files and markers (file store), its records in journal order, and its :class:`Summary`;
then every paging address with its pages and their messages; then every large-message body.

**Streaming.** Entries are produced as the store is read: memory is bounded by one journal
file (file store) or one fetch of rows (database), one page, plus what a journal's summary
counts (per type, and the ids of the live records without their bodies, to say what a load
returns). A journal is read twice: once to judge it (the load's own rules:
:mod:`store.file.survey` / the row index of :mod:`store.db.rows`), then to produce its
records, so each file's entry already carries its verdict.

**Read-only.** Nothing is written: the file store is read through the file-system seam's
read-only opens (a read-only file system works), the database through ``SELECT`` s. A store
a live process holds is refused (StoreLockedError naming the holder) unless ``force``: the
file store by its journals' directory locks and the HA live lock, the database by taking the
store lock (:func:`store.db.lock.acquire_store_lock`) for the whole read, released when the
iterator ends or is closed, and by a live HA lease. ``force`` reads without either (reading
rows without the lock is safe; a file journal's tail may be in flight).

**Reclaimed** (``reclaimed=True``): also records the load would not return but that can still
be read, each with ``reclaimed`` saying why: on the file store the valid records after a
file's end of data (a torn or stale tail), records left over from an earlier use of a reused
or free file (another file id), and the records of files an interrupted compaction retires;
on the database the rows no load needs (:func:`store.db.maintenance.sweep_dead_rows`'s rule).
Without it those are only counted in the summary.

**Modules**, each importing only those above it in this list (this package's ``__init__``
imports :mod:`.model` when it is imported, and the reader a store needs on first use):

- :mod:`.model` — the entries and :class:`DescribeOptions` (and ``Decoded``), shared by all;
- :mod:`.records` — decoding journal and page records by user record type;
- :mod:`.parts` — page stores and large-message bodies, on both back-ends;
- :mod:`.file` / :mod:`.db` — the file store's and the database store's entries;
- this package — :func:`describe_store`, which picks one of the two.

Thread-safety: one iterator belongs to one thread; entries are immutable.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from store.data.describe.model import (
    DescribeOptions,
    Entry,
    Journal,
    JournalFile,
    LargeMessage,
    Marker,
    NodeId,
    Page,
    PagedMessage,
    PagingAddress,
    Record,
    Summary,
)

if TYPE_CHECKING:
    from store.config import StoreConfig

__all__ = [
    "DescribeOptions",
    "Entry",
    "Journal",
    "JournalFile",
    "LargeMessage",
    "Marker",
    "NodeId",
    "Page",
    "PagedMessage",
    "PagingAddress",
    "Record",
    "Summary",
    "describe_store",
]


def describe_store(config: StoreConfig, options: DescribeOptions | None = None) -> Iterator[Entry]:
    """The entries of the store ``config`` describes (module docstring), read-only.

    Returns an iterator; the store's checks run at its first ``next()``: ConfigError when a
    journal to read does not exist (never creating one), StoreLockedError naming the holder
    when a live process holds the store (unless ``options.force``), StoreIOError /
    StoreUnavailableError when the files or the database cannot be read. Damage is reported
    in the entries (a summary's ``problems``, a page's ``error``, a record's
    ``decoded.error``), never raised. Close the iterator (or read it to the end) to release
    the database store lock.
    """
    options = options or DescribeOptions()
    if config.store_type == "database":
        from store.data.describe.db import database_entries

        return database_entries(config, options)
    if config.store_type == "file":
        from store.data.describe.file import file_entries

        return file_entries(config, options)
    from store.errors import ConfigError

    raise ConfigError(
        "store data print: persistence is disabled in this configuration, there is no store",
        key="persistence-enabled",
        value=False,
        allowed="a file store or a database store",
    )
