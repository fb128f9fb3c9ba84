"""Options of one file journal, derived from :class:`~store.config.StoreConfig`.

Each field says its default (Artemis's, from the configuration) and its trade-off. Test seams
(the file system) come in here, never through globals.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from store.file.format import KIND_BINDINGS, KIND_MESSAGES
from store.fs import FileSystem, OsFileSystem

__all__ = ["FileJournalOptions", "RetentionOptions"]


@dataclass(frozen=True, slots=True)
class RetentionOptions:
    """Journal retention: every finished file is copied to ``directory``."""

    directory: str
    #: Copies older than this many seconds are removed; None keeps them forever.
    period_seconds: float | None = None
    #: Budget in bytes, counted as number of copies x journal-file-size (as Artemis counts);
    #: the oldest copies go first. None: unlimited.
    storage_limit: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FileJournalOptions:
    """How one journal (messages or bindings) lays out and writes its files."""

    #: Folder of the journal files (created when missing and ``create_directory`` is set).
    directory: str
    #: File name prefix: ``data`` for the messages journal, ``bindings`` for the bindings one.
    prefix: str = "data"
    #: Header kind stamped into every file (messages 0, bindings 1).
    kind: int = KIND_MESSAGES
    create_directory: bool = True
    #: Size of every journal file (journal-file-size, default 10 MiB). Bigger files mean fewer
    #: rolls and reclaim decisions, but more dead space before a file can be reclaimed.
    file_size: int = 10 * 1024 * 1024
    #: Files kept ready (journal-min-files, default 2).
    min_files: int = 2
    #: Upper bound on files kept for reuse (journal-pool-files, default -1 = unbounded).
    pool_files: int = -1
    #: NIO, MAPPED or ASYNCIO (journal-type); same bytes on disk for all three.
    journal_type: str = "NIO"
    #: Flush at the latest this long after a non-sync append (journal-buffer-timeout, ns);
    #: 0 writes every append at once. Sync appends never wait for it (see store.file.writer).
    buffer_timeout_ns: int = 3_333_333
    #: Flush when this many bytes are buffered (journal-buffer-size, default 490 KiB).
    buffer_size: int = 490 * 1024
    #: Writes in flight for ASYNCIO (journal-max-io).
    max_io: int = 1
    #: fdatasync / msync / O_DSYNC on sync (journal-datasync). Off: survives a process crash,
    #: not a power loss.
    datasync: bool = True
    #: Whether prepare/commit/rollback wait for durability (journal-sync-transactional).
    sync_transactional: bool = True
    #: Whether non-transactional sync appends wait (journal-sync-non-transactional).
    sync_non_transactional: bool = True
    #: Compaction starts when there are more data files than this (0 disables automatic
    #: compaction; compact() still works).
    compact_min_files: int = 10
    #: ... and live bytes are below this percentage of the data files' size.
    compact_percentage: int = 30
    #: Files kept in attic/ (journal-max-attic-files).
    max_attic_files: int = 10
    retention: RetentionOptions | None = None
    #: The file-system seam (tests pass a fault-injecting one).
    fs: FileSystem = field(default_factory=OsFileSystem)
    #: Test seam, 0 (default) in production: the backend's own alignment (1 for NIO and
    #: MAPPED, the block size for ASYNCIO). A multiple of 512 makes the NIO writer pad every
    #: flush with zeros to that boundary exactly as ASYNCIO does, so crash simulation through
    #: ``fs`` (which can only run NIO) covers the aligned layout and its short pads too.
    io_alignment: int = 0
    #: Take the directory lock (refuse a second writer); off only for offline read-only tools.
    lock: bool = True

    @staticmethod
    def bindings(directory: str, **kw: object) -> FileJournalOptions:
        """Options of a bindings journal: 1 MiB NIO files, as Artemis keeps them."""
        kw.setdefault("prefix", "bindings")
        kw.setdefault("kind", KIND_BINDINGS)
        kw.setdefault("file_size", 1024 * 1024)
        kw.setdefault("journal_type", "NIO")
        kw.setdefault("retention", None)
        return FileJournalOptions(directory=directory, **kw)  # type: ignore[arg-type]
