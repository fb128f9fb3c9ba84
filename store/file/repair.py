"""Offline maintenance of a file journal: verify, repair, compact, and recover from history.

Each function works on a closed journal, returns a result dataclass and never prints; the
``store data`` commands format those results (CONVENTIONS 5 and 10).

:func:`verify` reads every file and lists **every** finding, not just the first, and changes
nothing. Severities: ``error`` for what makes a load fail (a damaged header, a checksum failure,
two files with one id, a file of the other journal), ``warning`` for what the next open cleans
up by itself (a torn tail, a header-less file, an interrupted compaction, ``.cmp`` / ``.tmp``
leftovers) or that looks wrong without breaking a load (a file name that disagrees with its
header, a missing directory), ``info`` for the rest (stale bytes after the end of data from an
earlier use of a reused file, ``.broken`` backups and ``repair-*`` folders, the attic).

:func:`repair` follows etcd's rule: a torn tail is repaired, a checksum failure is not, unless
the operator insists. For a torn tail it keeps a synced ``<name>.broken`` copy of the file
(``<name>.broken.1``, … when one exists), zeroes the bytes from the end of data to the end of the
last valid record after it, and syncs. With ``force=True`` a checksum failure is cut the same
way at the first bad offset, and every later file holding records is moved into
``<directory>/repair-<yyyyMMddHHmmss>/`` first, because its records may depend on what was cut
(files with a damaged header go there too). It first finishes or discards an interrupted
compaction exactly as an open would (``store.file.compact.finish_interrupted``). It always takes the
directory lock: nothing here ever writes under a live writer. A second run finds nothing to do.
Records already lost (a missing or truncated file, lsns the file list names that are gone:
``store.file.integrity``) are refused even with ``force``: a cut cannot bring them back and
must not hide that they are gone. Keeping every valid record around damage is
``store.file.salvage`` (``store data repair --salvage``), which rewrites the journal and keeps
the original files.

:func:`compact_store` opens a store, loads both journals and runs ``compact()`` on each.

:func:`recover` rebuilds a journal in a new directory from a retention history folder (see
``store.file.retention``) plus the current journal files. Choices, after Artemis's
``data recover`` but explicit:

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

Size: past the ~600 lines of CONVENTIONS 13 because it holds the four offline operations,
one section each, over the result types they share; ``recover`` (with its writer) is the part
to move into a module of its own when it grows.

Thread-safety: each call works alone on its directories; run one at a time per journal.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from store.config import StoreConfig
from store.errors import ConfigError, CorruptionError
from store.file import compact as compaction
from store.file import format as fmt
from store.file import integrity
from store.file.journal import FileJournal
from store.file.lock import DirectoryLock
from store.file.options import FileJournalOptions
from store.file.segments import SegmentNaming
from store.file.survey import (
    HEADER_ZERO,
    DirectoryListing,
    FileScan,
    JournalFile,
    RecordReplay,
    ensure_unlocked,
    replay_history,
    scan_journal,
)
from store.fs import FileHandle, FileSystem, OsFileSystem, copy_file
from store.journal.api import JournalStats, RecordInfo, RecordType
from store.journal.replay import TxOp

__all__ = [
    "CompactResult",
    "Cut",
    "FileReport",
    "Finding",
    "MovedFile",
    "RecoverReport",
    "RepairReport",
    "SourceFile",
    "VerifyReport",
    "compact_store",
    "recover",
    "repair",
    "verify",
]

ERROR = "error"
WARNING = "warning"
INFO = "info"

_CHUNK = 1 << 20


# -- verify ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing :func:`verify` found; ``kind`` is a stable key, ``message`` for people.

    ``severity`` is ``"error"``, ``"warning"`` or ``"info"``; ``size`` the bytes concerned.
    Error kinds are the load's (``store.file.integrity.Problem``): ``bad-header``,
    ``kind-mismatch``, ``duplicate-id``, ``checksum``, ``truncated``, ``missing-file``,
    ``lost-records``.
    Immutable; safe to share.
    """

    severity: str
    kind: str
    path: str
    offset: int | None
    message: str
    size: int | None = None
    #: The lsns known lost (first, last), for ``truncated``, ``missing-file``, ``lost-records``.
    lost: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class FileReport:
    """One journal file as :func:`verify` read it (``end`` is None without a usable header).

    Immutable; safe to share.
    """

    path: str
    name: str
    file_id: int | None
    size: int
    header: str
    records: int = 0
    end: int | None = None
    last_lsn: int = 0
    torn_tail: tuple[int, int] | None = None  # (offset, bytes)
    checksum_error: tuple[int, str] | None = None  # (offset, reason)
    stale_bytes: int = 0
    markers: int = 0  # file-list markers in sequence (not counted in ``records``)


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Every finding of one journal; ``ok`` is False when any of them is an error.

    Immutable once returned; safe to share read-only.
    """

    directory: str
    prefix: str
    files: list[FileReport]
    findings: list[Finding]

    @property
    def errors(self) -> list[Finding]:
        """The findings that make a load fail."""
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def warnings(self) -> list[Finding]:
        """The findings the next open cleans up, or that look wrong without breaking a load."""
        return [f for f in self.findings if f.severity == WARNING]

    @property
    def ok(self) -> bool:
        """True when nothing found stops the journal from loading."""
        return not self.errors


def verify(
    directory: str,
    *,
    prefix: str = "data",
    kind: int | None = None,
    force: bool = False,
    fs: FileSystem | None = None,
) -> VerifyReport:
    """Check the journal ``prefix`` in ``directory`` and list every finding; changes nothing.

    ``kind`` (messages 0, bindings 1), when given, flags files of the other journal.
    Returns the :class:`VerifyReport`. Raises StoreLockedError when a live process holds the
    journal open for writing (unless ``force``), StoreIOError when a file cannot be read.
    """
    fs = fs or OsFileSystem()
    if not fs.exists(directory):
        missing = Finding(WARNING, "missing", directory, None, "the directory does not exist")
        return VerifyReport(directory, prefix, [], [missing])
    ensure_unlocked(directory, force=force)
    js = scan_journal(directory, prefix=prefix, fs=fs, kind=kind)
    findings: list[Finding] = []
    scans = {id(s.file): s for s in js.scans}
    reports = [_file_report(f, scans.get(id(f))) for f in js.listing.files]
    # Errors are exactly the problems a load refuses (store.file.integrity), in its order.
    findings.extend(_problem_finding(p, js.scans) for p in js.problems)
    for f in js.listing.files:
        findings.extend(_header_findings(f))
    for s in js.scans:
        findings.extend(_data_findings(s))
    findings.extend(_leftover_findings(fs, js.listing))
    return VerifyReport(directory, prefix, reports, findings)


def _problem_finding(p: integrity.Problem, scans: list[FileScan]) -> Finding:
    err = p.error
    size = None
    if p.kind == "checksum" and p.index is not None:
        tail = scans[p.index].tail
        size = tail.extent - tail.end
    return Finding(ERROR, p.kind, err.path, err.offset, err.reason, size, p.lost)


def _file_report(f: JournalFile, s: FileScan | None) -> FileReport:
    if s is None:
        return FileReport(f.path, f.name, f.file_id, f.size, f.status)
    tail = s.tail
    torn = (tail.end, tail.extent - tail.end) if s.torn else None
    bad = (s.verdict.offset, s.verdict.reason) if s.verdict is not None else None
    return FileReport(
        f.path, f.name, f.file_id, f.size, f.status, s.user_count, s.end, s.last_lsn, torn, bad,
        s.stale_bytes, len(s.markers),
    )


def _header_findings(f: JournalFile) -> list[Finding]:
    """The header warnings (the errors are load problems, see _problem_finding)."""
    if f.status == HEADER_ZERO:
        return [
            Finding(WARNING, "zero-header", f.path, 0,
                    "no header: a file never finished; the next open moves it to attic/")
        ]
    if f.header is None:
        return []
    found = []
    if f.name_id is not None and f.name_id != f.header.file_id:
        found.append(
            Finding(WARNING, "name-mismatch", f.path, 0,
                    f"the name says file id {f.name_id}, the header {f.header.file_id} "
                    "(the journal goes by the header)")
        )
    return found


def _data_findings(s: FileScan) -> list[Finding]:
    path = s.file.path
    tail = s.tail
    found = []
    if s.verdict is None and tail.records:
        found.append(
            Finding(WARNING, "torn-tail", path, tail.end,
                    f"torn tail: {len(tail.records)} unsynced record(s) after the end of data "
                    "(ignored by a load, zeroed by the next open or by repair)",
                    tail.extent - tail.end)
        )
    if s.stale_bytes:
        found.append(
            Finding(INFO, "stale-bytes", path, s.stale_offset,
                    f"{s.stale_bytes} non-zero bytes after the end of data (an earlier use of "
                    "the file, or a partial write; ignored)", s.stale_bytes)
        )
    return found


def _leftover_findings(fs: FileSystem, listing: DirectoryListing) -> list[Finding]:
    found = []
    for item in listing.leftovers:
        if item.kind == "control":
            ctl = compaction.read_control(fs, SegmentNaming(listing.directory, listing.prefix))
            what = (
                f"an interrupted compaction, committed: the next open finishes it "
                f"({len(ctl.old)} old file(s) replaced by {len(ctl.new)})"
                if ctl is not None
                else "an interrupted compaction that never committed: the next open discards it"
            )
            found.append(Finding(WARNING, "control-file", item.path, None, what))
        elif item.kind in ("compacting", "temporary"):
            found.append(
                Finding(WARNING, "leftover", item.path, None,
                        f"{item.kind} file left by an interruption; the next open removes it")
            )
        elif item.kind == "attic":
            count = len(fs.listdir(item.path))
            found.append(
                Finding(INFO, "attic", item.path, None, f"{count} file(s) set aside in the attic")
            )
        else:
            what = "the file as it was before" if item.kind == "backup" else "files set aside"
            found.append(Finding(INFO, item.kind, item.path, None, f"{what}, kept by a repair"))
    return found


# -- repair ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cut:
    """Bytes :func:`repair` zeroed in one file; ``backup`` is the copy kept beforehand.

    Immutable; safe to share.
    """

    path: str
    offset: int
    removed: int
    backup: str
    reason: str  # "torn-tail" or "checksum"
    #: Where a FILES marker restating the files left was written (a checksum cut in a journal
    #: that has file-list markers: the cut dropped the markers after it), or None.
    marker_at: int | None = None


@dataclass(frozen=True, slots=True)
class MovedFile:
    """A file :func:`repair` moved out of the journal into its ``repair-*`` folder.

    Immutable; safe to share.
    """

    source: str
    target: str
    reason: str


@dataclass(frozen=True, slots=True)
class RepairReport:
    """What :func:`repair` did; nothing at all when ``changed`` is False.

    ``recovered`` lists what finishing an interrupted compaction changed (``removed <name>``,
    ``created <name>``). Immutable once returned; safe to share read-only.
    """

    directory: str
    prefix: str
    cuts: list[Cut] = field(default_factory=list)
    moved: list[MovedFile] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    repair_dir: str | None = None

    @property
    def changed(self) -> bool:
        """True when repair changed anything in the directory."""
        return bool(self.cuts or self.moved or self.recovered)


def repair(
    directory: str,
    *,
    prefix: str = "data",
    kind: int | None = None,
    force: bool = False,
    fs: FileSystem | None = None,
) -> RepairReport:
    """Repair the journal ``prefix`` in ``directory`` (see the module docstring).

    Returns the :class:`RepairReport`. Raises StoreLockedError when a live process holds the
    journal; ChecksumError for a checksum failure and CorruptionError for a damaged header
    (unless ``force``), for two files with one id, or for a file of the other journal
    ``kind``; StoreIOError when the file system refuses.
    """
    fs = fs or OsFileSystem()
    if not fs.exists(directory):
        return RepairReport(directory, prefix)
    lock = DirectoryLock(directory) if fs.native else None
    if lock is not None:
        lock.acquire()
    try:
        return _repair_locked(fs, directory, prefix, kind, force)
    finally:
        if lock is not None:
            lock.release()


def _repair_locked(
    fs: FileSystem, directory: str, prefix: str, kind: int | None, force: bool
) -> RepairReport:
    before = set(fs.listdir(directory))
    compaction.finish_interrupted(fs, SegmentNaming(directory, prefix))
    after = set(fs.listdir(directory))
    recovered = [f"removed {n}" for n in sorted(before - after)]
    recovered += [f"created {n}" for n in sorted(after - before)]
    js = scan_journal(directory, prefix=prefix, fs=fs, kind=kind)
    _refuse_unrepairable(js.problems, force)
    first_bad = next((s for s in js.scans if s.verdict is not None), None)
    if first_bad is not None and not force:
        assert first_bad.verdict is not None
        raise first_bad.verdict
    aside: list[tuple[JournalFile, str]] = [
        (f, f"damaged header: {f.header_error.reason}")
        for f in js.listing.files
        if f.header_error is not None
    ]
    cut_scans = [s for s in js.scans if s.torn]
    restate: list[fmt.MarkerEntry] | None = None
    if first_bad is not None:
        index = js.scans.index(first_bad)
        later = js.scans[index + 1 :]
        aside += [
            (s.file, f"written after the damage in {first_bad.file.name}")
            for s in later
            if s.count or s.tail.records
        ]
        cut_scans = [first_bad]
        if any(s.markers for s in js.scans):
            # The cut drops the file-list markers after it: restate the files that are left.
            restate = [
                fmt.MarkerEntry(s.file.file_id or 0, s.first_lsn, s.last_lsn)
                for s in js.scans[:index]
                if s.count
            ]
    moved: list[MovedFile] = []
    repair_dir = None
    if aside:
        # Set later files aside before cutting: if the repair stops in between, rerunning it
        # meets the same damage again instead of a cut file followed by files that needed it.
        repair_dir = _make_repair_dir(fs, directory)
        moved = [_move(fs, f.path, repair_dir, why) for f, why in aside]
        fs.fsync_dir(repair_dir)
        fs.fsync_dir(directory)
    prev_max = 0
    if first_bad is not None:
        prev_max = max((s.last_lsn for s in js.scans[: js.scans.index(first_bad)]), default=0)
    cuts = [
        _cut(fs, s, "checksum", restate=restate, prev_max=prev_max)
        if s is first_bad
        else _cut(fs, s, "torn-tail")
        for s in cut_scans
    ]
    return RepairReport(directory, prefix, cuts, moved, recovered, repair_dir)


def _refuse_unrepairable(problems: list[integrity.Problem], force: bool) -> None:
    """Raise what repair will not touch: a directory mix-up (always), a damaged header
    (without ``force``), records already lost (always: only salvage rewrites around them).

    The checks are the load's (``store.file.integrity``); checksum failures are the caller's.
    """
    for p in problems:
        if p.kind in ("duplicate-id", "kind-mismatch"):
            raise p.error
    for p in problems:
        if p.kind == "bad-header" and not force:
            raise p.error
        if p.kind in integrity.LOST_KINDS:
            raise CorruptionError(
                p.error.path,
                p.error.offset,
                f"{p.error.reason}; repair cannot bring lost records back and will not hide "
                "that they are gone",
                hint="put the file back if it was moved away; otherwise `store data repair "
                "--salvage` rewrites the journal from what is left, reports every lsn and id "
                "lost and keeps the original files",
            )


def _make_repair_dir(fs: FileSystem, directory: str) -> str:
    base = os.path.join(directory, "repair-" + time.strftime("%Y%m%d%H%M%S", time.gmtime()))
    path, n = base, 1
    while fs.exists(path):
        path, n = f"{base}-{n}", n + 1
    fs.makedirs(path)
    return path


def _move(fs: FileSystem, path: str, folder: str, reason: str) -> MovedFile:
    target = os.path.join(folder, os.path.basename(path))
    fs.rename(path, target)
    return MovedFile(path, target, reason)


def _copy(fs: FileSystem, source: str, target: str) -> None:
    """Copy ``source`` to ``target`` durably (see :func:`store.fs.copy_file`)."""
    copy_file(fs, source, target)


def _cut(
    fs: FileSystem,
    s: FileScan,
    reason: str,
    *,
    restate: list[fmt.MarkerEntry] | None = None,
    prev_max: int = 0,
) -> Cut:
    path = s.file.path
    backup, n = path + ".broken", 1
    while fs.exists(backup):
        backup, n = f"{path}.broken.{n}", n + 1
    _copy(fs, path, backup)
    start, stop = s.tail.end, s.tail.extent
    handle = fs.open(path)
    try:
        pos = start
        while pos < stop:
            n = min(_CHUNK, stop - pos)
            handle.pwrite(bytes(n), pos)
            pos += n
        marker_at = None
        if restate is not None:
            marker_at = _restate(handle, s, restate, prev_max)
        handle.datasync()
    finally:
        handle.close()
    return Cut(path, start, stop - start, backup, reason, marker_at)


def _restate(
    handle: FileHandle, s: FileScan, files: list[fmt.MarkerEntry], prev_max: int
) -> int | None:
    """Write a FILES marker listing ``files`` at the end of data of ``s`` (just cut), the next
    record in sequence; returns its offset, or None when not even an empty one fits."""
    assert s.file.file_id is not None
    lsn = s.last_lsn + 1 if s.count else prev_max + 1
    marker = fmt.Marker(fmt.MARKER_FILES, tuple(files))
    room = s.file.size - s.tail.end
    if fmt.marker_size(len(files)) > room:
        marker = fmt.Marker(fmt.MARKER_FILES, known=False)
        if fmt.marker_size(0) > room:
            return None
    raw = fmt.encode_record(
        int(RecordType.EVENT), file_id=s.file.file_id, lsn=lsn, durable_lsn=lsn - 1,
        body=fmt.encode_marker(marker), flags=fmt.FLAG_MARKER,
    )
    handle.pwrite(raw, s.tail.end)
    return s.tail.end


# -- compact -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompactResult:
    """One journal before and after :func:`compact_store`. Immutable; safe to share."""

    journal: str  # "bindings" or "messages"
    before: JournalStats
    after: JournalStats
    seconds: float


def compact_store(
    config: StoreConfig, *, on_step: Callable[[str], None] | None = None
) -> list[CompactResult]:
    """Open the store ``config`` describes, load both journals and compact each.

    ``on_step`` is called with a short description before each of the four steps (load and
    compact, per journal), for a progress display. Returns one :class:`CompactResult` per
    journal, bindings first. Raises StoreLockedError when the store is open elsewhere,
    CorruptionError when a journal cannot be loaded, StoreIOError on I/O failure.
    """
    from store.store import open_store

    results = []
    with open_store(config) as store:
        for name, journal in (("bindings", store.bindings), ("messages", store.messages)):
            if on_step is not None:
                on_step(f"loading {name}")
            journal.load()
            before = journal.stats()
            if on_step is not None:
                on_step(f"compacting {name}")
            started = time.perf_counter()
            journal.compact()
            results.append(
                CompactResult(name, before, journal.stats(), time.perf_counter() - started)
            )
    return results


# -- recover -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file :func:`recover` read; ``damage`` says why its data ended early, if it did.

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
    """What :func:`recover` read and wrote (counts are records written to ``target``).

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


def recover(
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
    may be None, not both). ``file_size`` defaults to the largest source file. Returns the
    :class:`RecoverReport`. Raises ConfigError when ``target`` is not empty or there is nothing
    to read, StoreLockedError when a live process holds ``journal`` (unless ``force``),
    StoreIOError on I/O failure.
    """
    fs = fs or OsFileSystem()
    if fs.exists(target) and fs.listdir(target):
        raise ConfigError(
            f"the recovery target {target} is not empty",
            key="target", value=target, allowed="a new or empty directory",
        )
    if journal is not None and fs.exists(journal):
        ensure_unlocked(journal, force=force)
    found = replay_history(history, journal, prefix=prefix, undelete=undelete, fs=fs)
    if not found.sources:
        raise ConfigError(
            f"no journal files with prefix {prefix!r} in {history or '-'} or {journal or '-'}",
            key="history", value=history, allowed="a retention folder or journal directory",
        )
    size = file_size or max(s.file.size for s in found.scans)
    written = _write_journal(
        fs, target, prefix, kind, size, found.replay,
        found.deleted if undelete else [], found.events if events else [],
    )
    infos = [
        SourceFile(s.file.path, s.file.file_id or 0, origin, s.count, s.compacted,
                   None if s.verdict is None else s.verdict.reason)
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
    replay: RecordReplay,
    deleted: list[RecordInfo],
    event_list: list[RecordInfo],
) -> tuple[int, int, int, int]:
    """Write the replayed state into a fresh journal; returns the four counts written."""
    opts = FileJournalOptions(
        directory=target, prefix=prefix, kind=kind, file_size=file_size, journal_type="NIO",
        compact_min_files=0, fs=fs,
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
        if op_kind == 0:
            out.append_add_tx(tx_id, rid, urt, body)
        elif op_kind == 1:
            out.append_update_tx(tx_id, rid, urt, body)
        else:
            out.append_delete_tx(tx_id, rid)
    out.append_prepare(tx_id, xid, sync=False)
