"""Recovering a journal from its retention history: ``store data recover``.

Two recoveries, both into a NEW directory, from a retention history folder (see
``store.file.retention``) plus the current journal files:

- :func:`recover_messages_from_history` (the default of ``store data recover``, Artemis's
  ``data recover``): **every message ever added**, whatever happened to it since;
- :func:`recover_from_history` (``store data recover --records``): the journal record for
  record, as of the newest data (optionally with what deletes removed).

:func:`replay_history` is their read-only half.

Every message ever added (:func:`recover_messages_from_history`), as Artemis's recover does:
every valid record of every source file is read, whatever its transaction became (committed,
rolled back, never completed), and the new journal holds

- every message ADD (ADD_MESSAGE_PROTOCOL 45, ADD_LARGE_MESSAGE 30; as ADD, ADD_TX or a
  retention EVENT) once per message id, as a plain ADD, in the order first seen;
- every ADD_REF (32) once per (message, queue), as a plain UPDATE after the messages, in the
  order first seen (the order a queue delivers them in again), for the messages written;
- every PAGE_TRANSACTION (35, its ADD) once per record id;
- nothing else: no ACKNOWLEDGE_REF, no delivery counts, no schedules, no duplicate ids, no
  deletes, no transactions. Acked, expired, rolled-back messages come back.

Large-message bodies are not in the history (they live in the large-message folder, and this
store writes no body events): a large message whose body file ``<id>.msg`` is still in the
large-message folder is kept (the recovered journal opens with that folder and delivers it);
one whose body is gone (acked and deleted) is **left out** with its refs and listed in
``MessageRecoverReport.missing_bodies``, so the recovered journal always loads and every
message it holds can be read. Without a large-message folder every large message is left out
and listed. Paged messages are in page files, not in the journal, so only what the history
holds of them (their page transactions) comes back.

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

import os
from collections.abc import Callable
from dataclasses import dataclass, field

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
from store.journal.api import ADD, ADD_TX, EVENT, UPDATE, UPDATE_TX, RecordInfo
from store.journal.replay import OP_ADD, OP_UPDATE, TxOp

__all__ = [
    "HistoryReplay",
    "MessageRecoverReport",
    "RecoverReport",
    "SourceFile",
    "recover_from_history",
    "recover_messages_from_history",
    "replay_history",
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
    """One file :func:`recover_from_history` read; ``damage`` says why its data ended early,
    if it did.

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
    _check_target(fs, target, history)
    if journal is not None and fs.exists(journal):
        ensure_unlocked(journal, force=force)
    found = replay_history(history, journal, prefix=prefix, undelete=undelete, fs=fs)
    if not found.sources:
        raise ConfigError(
            f"no journal files with prefix {prefix!r} in {history or '-'} or {journal or '-'}",
            key="history",
            value=history,
            allowed="a retention folder or journal directory",
        )
    size = file_size or max(s.file.size for s in found.scans)
    written = _write_journal(
        fs,
        target,
        prefix,
        kind,
        size,
        found.replay,
        found.deleted if undelete else [],
        found.events if events else [],
    )
    infos = [
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
    failed = found.replay.result().failed
    return RecoverReport(target, infos, *written, failed, found.generations)


def _write_journal(
    fs: FileSystem,
    target: str,
    prefix: str,
    kind: int,
    file_size: int,
    replay: FileReplay,
    deleted: list[RecordInfo],
    event_list: list[RecordInfo],
) -> tuple[int, int, int, int]:
    """Write the replayed state into a fresh journal; returns the four counts written."""
    opts = FileJournalOptions(
        directory=target,
        prefix=prefix,
        kind=kind,
        file_size=file_size,
        journal_type="NIO",
        compact_min_files=0,
        fs=fs,
    )
    out = FileJournal(opts)
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


# -- every message ever added ---------------------------------------------------------------------

#: User record types of the storage manager (store.messaging.records, page_records): kept
#: here as numbers so the file package does not import the messaging package.
_ADD_LARGE_MESSAGE = 30
_ADD_REF = 32
_PAGE_TRANSACTION = 35
_ADD_MESSAGE_PROTOCOL = 45
_REF_BODY = 9  # ADD_REF body: version u8, queue id i64 (store.messaging.records.RefRecord)


@dataclass(frozen=True, slots=True)
class MessageRecoverReport:
    """What :func:`recover_messages_from_history` read and wrote.

    ``messages`` / ``refs`` / ``page_transactions`` are the records written to ``target``;
    ``missing_bodies`` the large messages left out because their body is gone (with
    ``refs_left_out`` refs); ``bad_refs`` the ADD_REF records whose body did not decode (left
    out). Immutable once returned; safe to share read-only.
    """

    target: str
    sources: list[SourceFile]
    messages: int
    large_messages: int
    refs: int
    page_transactions: int
    missing_bodies: list[int] = field(default_factory=list)
    refs_left_out: int = 0
    bad_refs: int = 0
    generations: int = 1


class _MessageCollector:
    """Every message add, ref and page transaction of the raw records, first occurrence kept.

    Thread-safety: none; used by one recovery.
    """

    def __init__(self) -> None:
        self.messages: dict[int, tuple[int, bytes]] = {}  # id -> (user type, body)
        self.refs: dict[tuple[int, int], bytes] = {}  # (message id, queue id) -> body
        self.page_txs: dict[int, bytes] = {}
        self.bad_refs = 0

    def __call__(self, records: list[RecordView]) -> None:
        messages, refs = self.messages, self.refs
        for rec in records:
            rtype, urt, rid, body = rec.type, rec.user_type, rec.id, rec.body
            if urt == _ADD_REF and rtype in (UPDATE, UPDATE_TX, EVENT):
                if len(body) != _REF_BODY:
                    self.bad_refs += 1
                    continue
                key = (rid, int.from_bytes(body[1:], "big", signed=True))
                if key not in refs:
                    refs[key] = bytes(body)
            elif rtype in (ADD, ADD_TX, EVENT):
                if urt in (_ADD_MESSAGE_PROTOCOL, _ADD_LARGE_MESSAGE):
                    if rid not in messages:
                        messages[rid] = (urt, bytes(body))
                elif urt == _PAGE_TRANSACTION and rtype != EVENT and rid not in self.page_txs:
                    self.page_txs[rid] = bytes(body)


def recover_messages_from_history(
    history: str | None,
    target: str,
    *,
    journal: str | None = None,
    large_messages: str | None = None,
    prefix: str = "data",
    kind: int = fmt.KIND_MESSAGES,
    file_size: int | None = None,
    force: bool = False,
    fs: FileSystem | None = None,
) -> MessageRecoverReport:
    """Write every message ever added into a new journal in ``target`` (module docstring).

    ``history``, ``journal``, ``target``, ``file_size`` and ``force`` are as for
    :func:`recover_from_history`; ``large_messages`` is the large-message folder the recovered
    journal will be opened with (large messages whose ``<id>.msg`` is not there are left out).
    Returns the :class:`MessageRecoverReport`. Raises ConfigError when ``target`` is not
    empty, ``history`` does not exist or there is nothing to read, StoreLockedError when a live
    process holds ``journal`` (unless ``force``), StoreIOError on I/O failure.
    """
    fs = fs or OsFileSystem()
    _check_target(fs, target, history)
    if journal is not None and fs.exists(journal):
        ensure_unlocked(journal, force=force)
    found_records = _MessageCollector()
    found = replay_history(history, journal, prefix=prefix, fs=fs, on_records=found_records)
    if not found.sources:
        raise ConfigError(
            f"no journal files with prefix {prefix!r} in {history or '-'} or {journal or '-'}",
            key="history",
            value=history,
            allowed="a retention folder or journal directory",
        )
    missing = [
        mid
        for mid, (urt, _body) in found_records.messages.items()
        if urt == _ADD_LARGE_MESSAGE
        and (large_messages is None or not fs.exists(os.path.join(large_messages, f"{mid}.msg")))
    ]
    gone = set(missing)
    messages = [(mid, v) for mid, v in found_records.messages.items() if mid not in gone]
    refs = [(k, b) for k, b in found_records.refs.items() if k[0] in found_records.messages]
    kept_refs = [(k, b) for k, b in refs if k[0] not in gone]
    size = file_size or max(s.file.size for s in found.scans)
    opts = FileJournalOptions(
        directory=target,
        prefix=prefix,
        kind=kind,
        file_size=size,
        journal_type="NIO",
        compact_min_files=0,
        fs=fs,
    )
    out = FileJournal(opts)
    try:
        out.load()
        for mid, (urt, body) in messages:
            out.append_add(mid, urt, body)
        for rid, body in found_records.page_txs.items():
            out.append_add(rid, _PAGE_TRANSACTION, body)
        for (mid, _qid), body in kept_refs:
            out.append_update(mid, _ADD_REF, body)
        out.flush()
    finally:
        out.close()
    infos = [
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
    return MessageRecoverReport(
        target,
        infos,
        messages=len(messages),
        large_messages=sum(1 for _mid, (urt, _b) in messages if urt == _ADD_LARGE_MESSAGE),
        refs=len(kept_refs),
        page_transactions=len(found_records.page_txs),
        missing_bodies=missing,
        refs_left_out=len(refs) - len(kept_refs),
        bad_refs=found_records.bad_refs,
        generations=found.generations,
    )


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
