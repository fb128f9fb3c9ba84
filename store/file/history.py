"""Recovering a journal from its retention history: ``store data recover --records``.

From a retention history folder (see ``store.file.retention``) plus the current journal
files, into a NEW directory:

- :func:`recover_from_history` (``store data recover --records``): the journal record for
  record, as of the newest data (optionally with what deletes removed);
- :func:`replay_history` is its read-only half, and :func:`recovery_replay`,
  :func:`source_files` and :func:`target_journal` the steps any recovery from history shares.

The default of ``store data recover``, every message ever added (Artemis's ``data recover``),
is message-level and so lives above the messaging package, in
:mod:`store.data.recover_messages`: it reads the same replay, given every valid record of every
file (``on_records``), and decodes the message records with the storage manager's own codecs.
This module knows records, not messages.

Choices of the record-level recovery (:func:`recover_from_history`):

- sources are every history copy and every journal file, one per file id (the journal's own
  file wins over its copy), replayed in file-id order with the load's rules; damaged data is
  read up to the damage and reported, since this is a salvage tool;
- a compactor output (files whose records were all rewritten by compaction, with consecutive
  ids and lsns) restates the live state of every file before it, so the replay starts afresh
  there instead of counting those records twice. One case cannot be told apart: a compaction
  whose only input was the previous compaction's output, when both outputs are in the history
  (only possible when the journal was reopened between the two with nothing written); its
  records are then written twice;
- by default the new journal holds the **live state as of the newest data found**: the
  committed records in journal order, and the prepared transactions (with their XIDs, still
  prepared); failed transactions are left out and listed;
- ``undelete=True`` additionally writes, after the live state, every committed add and update
  that a delete removed, in the order they were written (rolled-back and failed transactions
  never committed anything, so nothing of theirs comes back);
- ``events=True`` additionally writes every retention event record as a plain add (events
  exist to make paged and large-message data replayable; a load never returns an event).

It returns a result dataclass and never prints (docs/conventions.md#10).

Thread-safety: each call works alone on its directories; a :class:`HistoryReplay` belongs to
one caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from store.errors import ConfigError
from store.file import format as fmt
from store.file import integrity
from store.file.journal import FileJournal
from store.file.options import FileJournalOptions
from store.file.reader import FileReplay
from store.file.retention import history_files
from store.file.segments import SegmentNaming
from store.file.survey import (
    FileScan,
    JournalFile,
    RecordView,
    ensure_unlocked,
    facts_of,
    list_directory,
    loaded_files,
    open_journal_file,
    read_bytes,
    scan_file,
    set_verdicts,
)
from store.fs import FileSystem, OsFileSystem
from store.journal.api import RecordInfo
from store.journal.replay import OP_ADD, OP_UPDATE, TxOp

__all__ = [
    "HistoryReplay",
    "RecoverReport",
    "SourceFile",
    "recover_from_history",
    "recovery_replay",
    "replay_history",
    "source_files",
    "target_journal",
]


@dataclass(slots=True)
class HistoryReplay:
    """A retention folder plus a journal directory, replayed as one journal.

    ``scans`` (judged, records dropped) and ``origins`` (``"history"`` / ``"journal"``) are
    parallel, in file-id order; ``replay`` holds the newest generation's state, ``deleted`` and
    ``events`` what every generation deleted and the event records. Thread-safety: none; one
    caller builds and reads it.
    """

    scans: list[FileScan]
    origins: list[str]
    replay: FileReplay
    deleted: list[RecordInfo]
    events: list[RecordInfo]
    generations: int = 1

    @property
    def sources(self) -> list[JournalFile]:
        """The files read, in file-id order."""
        return [s.file for s in self.scans]


def replay_history(
    history: str | None,
    journal: str | None,
    *,
    prefix: str = "data",
    undelete: bool = False,
    fs: FileSystem | None = None,
    on_records: Callable[[list[RecordView]], None] | None = None,
) -> HistoryReplay:
    """Replay every history copy in ``history`` and every file of ``journal`` (read-only).

    One file per file id (the journal's own file wins over its copy), in file-id order, with
    the load's rules; damaged data is read up to the damage (the verdicts are on the scans).
    A compactor output restates the live state of everything before it, so the replay starts
    a new **generation** at the first file of each output: a file whose records were all
    rewritten by compaction and that does not continue the previous one (consecutive id and
    lsn). With ``undelete``, what each generation deleted is kept. ``on_records`` is given
    every valid record of each file, in file-id order, before it is replayed. Returns the
    :class:`HistoryReplay`. Raises StoreIOError when a file cannot be read.
    """
    fs = fs or OsFileSystem()
    by_id: dict[int, tuple[JournalFile, str]] = {}
    if history is not None and fs.exists(history):
        for fid, path in history_files(fs, SegmentNaming(history, prefix), history):
            f = open_journal_file(fs, path, name_id=fid)
            if f.file_id is not None:
                by_id[f.file_id] = (f, "history")
    if journal is not None:
        # As a load reads it: an interrupted compaction counts as finished.
        for f in loaded_files(fs, list_directory(journal, prefix=prefix, fs=fs))[0]:
            if f.file_id is not None:
                by_id[f.file_id] = (f, "journal")
    result = HistoryReplay([], [], FileReplay(keep_deleted=undelete), [], [])
    prev: FileScan | None = None
    for key in sorted(by_id):
        f, origin = by_id[key]
        s = scan_file(f, read_bytes(fs, f.path), keep_records=True)
        result.scans.append(s)
        result.origins.append(origin)
        if not s.count:
            continue
        if on_records is not None:
            on_records(s.records)
        if prev is not None and _starts_generation(prev, s):
            _close_generation(result)
            result.replay = FileReplay(keep_deleted=undelete)
            result.generations += 1
        result.replay.feed(s.records, path=f.path, file_id=key)
        s.records = []
        prev = s
    _close_generation(result)
    # Damaged data was read up to the damage; the load's tail judgement says where it was.
    set_verdicts(result.scans, integrity.tail_problems([facts_of(s) for s in result.scans]))
    return result


def _close_generation(result: HistoryReplay) -> None:
    result.deleted.extend(result.replay.deleted())
    result.events.extend(result.replay.events)


def _starts_generation(prev: FileScan, s: FileScan) -> bool:
    if not s.compacted:
        return False
    continues = (
        prev.compacted
        and s.file.file_id == (prev.file.file_id or 0) + 1
        and s.first_lsn == prev.last_lsn + 1
    )
    return not continues


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file a recovery from history read (:func:`source_files`); ``damage`` says why its
    data ended early, if it did.

    Immutable; safe to share.
    """

    path: str
    file_id: int
    origin: str  # "history" or "journal"
    records: int
    compacted: bool
    damage: str | None = None


@dataclass(frozen=True, slots=True)
class RecoverReport:
    """What :func:`recover_from_history` read and wrote (counts are records written to ``target``).

    ``failed`` lists the transactions found incomplete (left out); ``generations`` how many
    compaction generations were replayed. Immutable once returned; safe to share read-only.
    """

    target: str
    sources: list[SourceFile]
    records: int
    prepared: int
    deleted: int
    events: int
    failed: list[int]
    generations: int


def recover_from_history(
    history: str | None,
    target: str,
    *,
    journal: str | None = None,
    prefix: str = "data",
    kind: int = fmt.KIND_MESSAGES,
    file_size: int | None = None,
    undelete: bool = False,
    events: bool = False,
    force: bool = False,
    fs: FileSystem | None = None,
) -> RecoverReport:
    """Rebuild a journal in the new directory ``target`` (see the module docstring).

    ``history`` is the retention folder and ``journal`` the current journal directory (either
    may be None, not both; a journal directory that does not exist is read as empty: recovering
    from history alone is what this is for when the journal is gone). ``file_size`` defaults to
    the largest source file; nothing is written before every check passed. Returns the
    :class:`RecoverReport`. Raises ConfigError when ``target`` is not empty, ``history`` does
    not exist or there is nothing to read, StoreLockedError when a live process holds
    ``journal`` (unless ``force``), StoreIOError on I/O failure.
    """
    fs = fs or OsFileSystem()
    found = recovery_replay(
        history, target, journal=journal, prefix=prefix, force=force, fs=fs, undelete=undelete
    )
    out = target_journal(found, target, prefix=prefix, kind=kind, file_size=file_size, fs=fs)
    written = _write_journal(
        out,
        found.replay,
        found.deleted if undelete else [],
        found.events if events else [],
    )
    failed = found.replay.result().failed
    return RecoverReport(target, source_files(found), *written, failed, found.generations)


def recovery_replay(
    history: str | None,
    target: str,
    *,
    journal: str | None,
    prefix: str,
    force: bool,
    fs: FileSystem,
    undelete: bool = False,
    on_records: Callable[[list[RecordView]], None] | None = None,
) -> HistoryReplay:
    """The checks and the replay every recovery from history starts with, before it writes
    anything: ``target`` is new or empty, ``history`` (if given) exists, no live process holds
    ``journal`` (unless ``force``); then :func:`replay_history` (``prefix``, ``undelete``,
    ``on_records`` as there), which must find some file. Returns the
    :class:`HistoryReplay`. Raises ConfigError when ``target`` is not empty, ``history`` does
    not exist or there is nothing to read, StoreLockedError when a live process holds
    ``journal`` (unless ``force``), StoreIOError on I/O failure.
    """
    _check_target(fs, target, history)
    if journal is not None and fs.exists(journal):
        ensure_unlocked(journal, force=force)
    found = replay_history(
        history, journal, prefix=prefix, undelete=undelete, fs=fs, on_records=on_records
    )
    if not found.sources:
        raise ConfigError(
            f"no journal files with prefix {prefix!r} in {history or '-'} or {journal or '-'}",
            key="history",
            value=history,
            allowed="a retention folder or journal directory",
        )
    return found


def source_files(found: HistoryReplay) -> list[SourceFile]:
    """What a recovery's report says of each file ``found`` read, in file-id order. Raises
    nothing."""
    return [
        SourceFile(
            s.file.path,
            s.file.file_id or 0,
            origin,
            s.count,
            s.compacted,
            None if s.verdict is None else s.verdict.reason,
        )
        for s, origin in zip(found.scans, found.origins, strict=True)
    ]


def target_journal(
    found: HistoryReplay,
    target: str,
    *,
    prefix: str,
    kind: int,
    file_size: int | None,
    fs: FileSystem,
) -> FileJournal:
    """The new journal a recovery writes into ``target``, not loaded yet: NIO, never compacted,
    files of ``file_size`` bytes (None: the largest file ``found`` read). The caller loads,
    writes and closes it. Raises what opening a file journal raises (StoreIOError)."""
    opts = FileJournalOptions(
        directory=target,
        prefix=prefix,
        kind=kind,
        file_size=file_size or max(s.file.size for s in found.scans),
        journal_type="NIO",
        compact_min_files=0,
        fs=fs,
    )
    return FileJournal(opts)


def _write_journal(
    out: FileJournal,
    replay: FileReplay,
    deleted: list[RecordInfo],
    event_list: list[RecordInfo],
) -> tuple[int, int, int, int]:
    """Write the replayed state into the fresh journal ``out`` (loaded here, closed at the
    end); returns the four counts written."""
    try:
        out.load()
        writer = _EntryWriter(out)
        live = replay.result().records
        open_txs = replay.open_transactions()
        prepared = {tx: (ops, xid) for tx, (ops, xid) in open_txs.items() if xid is not None}
        writer.reserved.update(prepared)
        writer.write(live)
        writer.write(deleted)
        for info in event_list:
            out.append_add(info.id, info.user_record_type, info.data)
        for tx_id, (ops, xid) in prepared.items():
            _write_prepared(out, tx_id, ops, xid or b"")
        out.flush()
    finally:
        out.close()
    return len(live), len(prepared), len(deleted), len(event_list)


class _EntryWriter:
    """Appends load entries so that a load of the new journal returns them in this order.

    An update of an id that no plain add made live (an update inside a committed
    transaction may name any id) goes through a one-record transaction, committed at once.
    Thread-safety: none; used by one recovery.
    """

    def __init__(self, journal: FileJournal) -> None:
        self.journal = journal
        self.added: set[int] = set()
        self.reserved: set[int] = set()
        self._next_tx = 1

    def write(self, entries: list[RecordInfo]) -> None:
        j = self.journal
        for info in entries:
            if not info.is_update:
                j.append_add(info.id, info.user_record_type, info.data)
                self.added.add(info.id)
            elif info.id in self.added:
                j.append_update(info.id, info.user_record_type, info.data)
            else:
                while self._next_tx in self.reserved:
                    self._next_tx += 1
                j.append_update_tx(self._next_tx, info.id, info.user_record_type, info.data)
                j.append_commit(self._next_tx, sync=False)


def _write_prepared(out: FileJournal, tx_id: int, ops: list[TxOp], xid: bytes) -> None:
    for op_kind, rid, urt, body in ops:
        if op_kind == OP_ADD:
            out.append_add_tx(tx_id, rid, urt, body)
        elif op_kind == OP_UPDATE:
            out.append_update_tx(tx_id, rid, urt, body)
        else:
            out.append_delete_tx(tx_id, rid)
    out.append_prepare(tx_id, xid, sync=False)


def _check_target(fs: FileSystem, target: str, history: str | None) -> None:
    """Raise ConfigError for a target that is not empty or a history that does not exist."""
    if fs.exists(target) and fs.listdir(target):
        raise ConfigError(
            f"the recovery target {target} is not empty",
            key="target",
            value=target,
            allowed="a new or empty directory",
        )
    if history is not None and not fs.exists(history):
        raise ConfigError(
            f"no retention history in {history}: the directory does not exist",
            key="history",
            value=history,
            allowed="the journal-retention directory",
        )
