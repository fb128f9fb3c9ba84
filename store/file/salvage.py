"""Salvage a damaged file journal: drop only the damaged records, keep every valid one, loudly.

``store data repair --salvage`` calls :func:`salvage`. Where a plain repair (``--force``) cuts a
file at a checksum failure and sets every later file aside, salvage keeps everything a reader
can still prove valid, and reports exactly what it drops:

1. Every file is read in file-id order. Where the records in sequence stop at damage (the
   load's rule: valid records follow that prove the missing one had been durable), reading
   **resynchronises** at the next valid record of the file (found by the file id every record
   carries, as ``store.file.reader.find_after`` does) and goes on. The bytes skipped are one
   :class:`Dropped` entry with the lsns they held (the gap between the lsns around them) and,
   as far as the damaged headers can still be read in sequence, each dropped record's lsn, type,
   id and transaction. A torn tail of the last file (never acknowledged) is dropped as a load
   drops it, and reported too.
2. What cannot be read at all is reported from the load's own judgement
   (``store.file.integrity``): missing files, truncated files and records lost from a file, with
   the lsns the file-list markers say they held; files with a damaged header, whole.
3. Everything read is replayed with the load's rules (``store.file.reader.FileReplay``: a
   transaction whose records were dropped fails its record count and is reported failed, never
   applied half) and written as a **new, consistent journal** the way the compactor writes
   (``store.file.compact.OutputWriter``): the committed records in journal order, then the
   prepared transactions, with fresh lsns, in files whose ids are above every file present,
   each starting with a file-list marker. Events are not carried over (as compaction drops
   them; retention keeps them).
4. The original files are copied, synced, into ``<directory>/repair-<time>/`` **before**
   anything changes; then the switch is one committed compaction (control file listing every
   original file as old and the new ``.cmp`` files as new, finished by
   ``store.file.compact.finish_interrupted``), so a crash at any point leaves either the
   original journal or the salvaged one, never a mix.

Duplicate file ids and files of the other journal are refused: they are not damage but a
directory mix-up for an operator to sort out. A journal with nothing to salvage (no error a load
refuses) is left alone.

Thread-safety: run one salvage at a time per journal; it takes the directory lock.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass, field

from store.errors import ChecksumError, ConfigError
from store.file import compact as compaction
from store.file import format as fmt
from store.file import integrity
from store.file.lock import held_while
from store.file.reader import Cursor, FileReplay, Tail, find_after, marker_of, scan
from store.file.segments import SegmentManager, SegmentNaming
from store.file.survey import (
    FileScan,
    JournalScan,
    RecordView,
    read_bytes,
    require_journal,
    scan_file,
    scan_journal,
)
from store.fs import FileSystem, OsFileSystem, copy_file
from store.journal.api import ADD, ADD_TX, DELETE_TX, PREPARE, UPDATE, UPDATE_TX, RecordType
from store.journal.replay import OP_ADD, OP_DELETE, OP_UPDATE

__all__ = ["DroppedRecord", "Dropped", "SalvageReport", "salvage"]

_OP_TO_TYPE = {OP_ADD: ADD_TX, OP_UPDATE: UPDATE_TX, OP_DELETE: DELETE_TX}


@dataclass(frozen=True, slots=True)
class DroppedRecord:
    """A dropped record as its (still readable) header describes it. Immutable."""

    lsn: int
    type: str
    id: int
    tx_id: int
    offset: int


@dataclass(frozen=True, slots=True)
class Dropped:
    """What :func:`salvage` could not keep from one place, and why.

    ``reason`` is ``checksum`` (damaged bytes skipped), ``torn-tail`` (an unsynced tail, as a
    load drops it), ``bad-header`` (a whole file unreadable), or one of the load's lost-data
    problems (``truncated``, ``missing-file``, ``lost-records``). ``lsns`` is the lsn range
    dropped when known; ``records`` what the damaged headers still say (possibly fewer than
    the lsns: a header that no longer reads in sequence ends the list). A header is listed only
    when its file id, type, lsn and length all fit where it sits, but the checksum covers header
    and body together, so a listed id may itself be the damaged byte: treat it as a lead, and
    the lsns as the fact. Immutable.
    """

    path: str
    offset: int
    size: int
    reason: str
    lsns: tuple[int, int] | None = None
    records: tuple[DroppedRecord, ...] = ()
    detail: str = ""


@dataclass(frozen=True, slots=True)
class SalvageReport:
    """What :func:`salvage` did; nothing when ``changed`` is False.

    ``kept`` counts the records read and replayed; ``records``, ``prepared`` and ``failed``
    are what a load of the salvaged journal returns (``failed``: transactions left out as
    incomplete). ``backup_dir`` holds the original files; ``written`` the new files' names.
    Immutable once returned; safe to share read-only.
    """

    directory: str
    prefix: str
    dropped: list[Dropped] = field(default_factory=list)
    kept: int = 0
    records: int = 0
    prepared: int = 0
    failed: list[int] = field(default_factory=list)
    backup_dir: str | None = None
    written: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when the journal was rewritten."""
        return self.backup_dir is not None

    @property
    def dropped_ids(self) -> list[int]:
        """Ids of the dropped records whose headers could still be read."""
        return [r.id for d in self.dropped for r in d.records]


def salvage(
    directory: str,
    *,
    prefix: str = "data",
    kind: int | None = None,
    file_size: int | None = None,
    fs: FileSystem | None = None,
    dry_run: bool = False,
) -> SalvageReport:
    """Salvage the journal ``prefix`` in ``directory`` (see the module docstring).

    ``file_size`` is the size of the new files (default: the largest file present).
    ``dry_run``: read and judge everything as a salvage would, write nothing and take no lock
    (``store data verify`` says so what a salvage would keep and drop; an interrupted
    compaction is judged as the files are, not finished). Returns the
    :class:`SalvageReport` (``changed`` False on a dry run). Raises ConfigError when
    ``directory`` holds no journal, StoreLockedError when a live process holds the journal
    (not on a dry run); CorruptionError for two files with one id or a file of the other
    ``kind``; ConfigError when a record does not fit ``file_size``; StoreIOError when the file
    system refuses.
    """
    fs = fs or OsFileSystem()
    require_journal(directory, prefix=prefix, fs=fs)  # before the lock, which creates a file
    if dry_run:
        return _salvage_locked(fs, directory, prefix, kind, file_size, dry_run=True)
    with held_while(directory, native=fs.native):
        return _salvage_locked(fs, directory, prefix, kind, file_size, dry_run=False)


def _salvage_locked(
    fs: FileSystem,
    directory: str,
    prefix: str,
    kind: int | None,
    file_size: int | None,
    *,
    dry_run: bool,
) -> SalvageReport:
    naming = SegmentNaming(directory, prefix)
    if not dry_run:
        compaction.finish_interrupted(fs, naming)
    js = scan_journal(directory, prefix=prefix, fs=fs, kind=kind)
    for problem in js.problems:
        if problem.kind in ("duplicate-id", "kind-mismatch"):
            raise problem.error
    if not js.problems:
        return SalvageReport(directory, prefix)
    dropped = _lost_files(js)
    replay = FileReplay()
    last = max((i for i, s in enumerate(js.scans) if s.count or s.tail.records), default=-1)
    prev_max = 0
    kept = 0
    for i, judged in enumerate(js.scans):
        data = read_bytes(fs, judged.file.path)
        s = scan_file(judged.file, data, keep_records=True)
        records, drops, top = _read_file(s, data, is_last=i == last, prev_max=prev_max)
        prev_max = max(prev_max, top)
        dropped += drops
        replay.feed(records, path=judged.file.path, file_id=judged.file.file_id or 0)
        kept += len(records)
    result = replay.result()
    size = file_size or max((f.size for f in js.listing.files if f.header), default=0)
    _check_fits(replay, size)  # before anything is written
    report = SalvageReport(
        directory, prefix, dropped, kept, len(result.records), len(result.prepared), result.failed
    )
    if dry_run:
        return report
    backup = _backup(fs, directory, [f.path for f in js.listing.files])
    written = _write(fs, naming, js, replay, size, kind)
    # The switch: committed by the control file, carried out as a compaction's recovery would
    # (a crash in between is finished by the next open); the new files list each other in
    # their own markers, so the control file may go once the switch is done.
    ctl = compaction.ControlFile([f.name for f in js.listing.files], written)
    compaction.write_control(fs, naming, ctl)
    compaction.apply_control(fs, naming, ctl)
    compaction.remove_control(fs, naming)
    return dataclasses.replace(
        report, backup_dir=backup, written=[n[: -len(".cmp")] for n in written]
    )


def _lost_files(js: JournalScan) -> list[Dropped]:
    """What the load's judgement says is gone (rules 3 and 4) and unreadable headers."""
    dropped = [
        Dropped(p.path, p.error.offset, 0, p.kind, p.lost, detail=p.error.reason)
        for p in js.problems
        if p.kind in integrity.LOST_KINDS
    ]
    dropped += [
        Dropped(f.path, 0, f.size, "bad-header", detail=f.header_error.reason)
        for f in js.listing.files
        if f.header_error is not None
    ]
    return dropped


def _read_file(
    s: FileScan, data: bytes, *, is_last: bool, prev_max: int
) -> tuple[list[RecordView], list[Dropped], int]:
    """The records of one file with damaged stretches skipped; returns (records, what was
    dropped, highest lsn read)."""
    file_id = s.file.file_id
    assert file_id is not None
    records: list[RecordView] = []
    dropped: list[Dropped] = []
    part = s
    last_lsn = 0
    while True:
        records += part.records
        if part.count:
            last_lsn = part.last_lsn
        tail = part.tail
        if not tail.records:
            break
        missing = last_lsn + 1 if last_lsn else prev_max + 1
        resync = tail.records[0]
        try:
            integrity.classify(s.file.path, tail, missing_lsn=missing, is_last=is_last)
        except ChecksumError:  # damage: drop it and read on after it
            dropped.append(_skipped(s.file.path, data, file_id, tail.end, resync, missing))
            part = _scan_from(s, data, resync.offset)
            continue
        dropped.append(_skipped(s.file.path, data, file_id, tail.end, None, missing, torn=tail))
        break
    return records, dropped, max(last_lsn, prev_max)


def _scan_from(s: FileScan, data: bytes, start: int) -> FileScan:
    """Scan ``data`` from ``start`` as :func:`scan_file` scans from the first record."""
    file_id = s.file.file_id
    assert file_id is not None
    part = FileScan(s.file)
    cursor = Cursor()
    for raw in scan(data, file_id, cursor, start):
        if marker_of(data, raw) is not None:
            continue  # the new journal writes its own markers
        part.records.append(RecordView._make(raw))
    part.end, part.last_lsn, part.count = cursor.end, cursor.last_lsn, cursor.count
    part.tail = Tail(cursor.end, find_after(data, file_id, cursor.end))
    return part


def _skipped(
    path: str,
    data: bytes,
    file_id: int,
    start: int,
    resync: fmt.Record | None,
    missing: int,
    *,
    torn: Tail | None = None,
) -> Dropped:
    """Describe the bytes from ``start`` to ``resync`` (or the torn tail's end)."""
    stop = resync.offset if resync is not None else (torn.extent if torn else start)
    heads: list[DroppedRecord] = []
    pos, lsn = start, missing
    while pos + fmt.RECORD_HEAD.size <= stop:
        head = fmt.decode_head(data, pos)
        if head.file_id != file_id or not fmt.MIN_TYPE <= head.type <= fmt.MAX_TYPE:
            break
        if head.lsn != lsn or head.length < fmt.OVERHEAD or pos + head.length > stop:
            break
        heads.append(DroppedRecord(lsn, RecordType(head.type).name, head.id, head.tx_id, pos))
        pos += head.length
        lsn += 1
    if resync is not None:
        lsns = (missing, resync.lsn - 1) if resync.lsn > missing else None
        what = "checksum"
        detail = (
            f"damaged bytes from offset {start} to {stop}; reading resumed at the next valid "
            f"record (lsn {resync.lsn})"
        )
    else:
        assert torn is not None
        lsns = (missing, torn.max_lsn) if torn.max_lsn >= missing else None
        what = "torn-tail"
        detail = "an unsynced tail of the last write (a load ignores it too)"
    # The first damaged record is dropped whether or not its header still reads; a header
    # damaged itself is not listed (its id cannot be trusted).
    return Dropped(path, start, stop - start, what, lsns, tuple(heads), detail)


def _check_fits(replay: FileReplay, size: int) -> None:
    """Raise ConfigError when a record to write does not fit a file of ``size`` bytes."""
    bodies = [info.data for info in replay.result().records]
    bodies += [op[3] for ops, _xid in replay.open_transactions().values() for op in ops]
    largest = max((len(b) for b in bodies), default=0)
    if size <= fmt.DATA_START or fmt.DATA_START + fmt.OVERHEAD + largest > size:
        raise ConfigError(
            f"a record of {largest} bytes does not fit new journal files of {size} bytes",
            key="journal-file-size",
            value=size,
            allowed="the size the journal was written with",
        )


def _backup(fs: FileSystem, directory: str, paths: list[str]) -> str:
    """Copy every original file, durably, into a new ``repair-<time>/`` folder."""
    base = os.path.join(directory, "repair-" + time.strftime("%Y%m%d%H%M%S", time.gmtime()))
    folder, n = base, 1
    while fs.exists(folder):
        folder, n = f"{base}-{n}", n + 1
    fs.makedirs(folder)
    for path in paths:
        copy_file(fs, path, os.path.join(folder, os.path.basename(path)))
    fs.fsync_dir(folder)
    fs.fsync_dir(directory)
    return folder


def _write(
    fs: FileSystem,
    naming: SegmentNaming,
    js: JournalScan,
    replay: FileReplay,
    size: int,
    kind: int | None,
) -> list[str]:
    """Write the replayed state into new ``.cmp`` files; returns their names."""
    ids = [f.file_id or 0 for f in js.listing.files] + [f.name_id or 0 for f in js.listing.files]
    kinds = [f.header.kind for f in js.listing.files if f.header is not None]
    journal_kind = kind if kind is not None else (kinds[0] if kinds else fmt.KIND_MESSAGES)
    segments = SegmentManager(
        fs, naming, kind=journal_kind, file_size=size, pool_files=0, max_attic_files=0
    )
    out = compaction.OutputWriter(segments, max(ids, default=0) + 1, 0, markers=True)
    for info in replay.result().records:
        rtype = UPDATE if info.is_update else ADD
        out.write(rtype, id=info.id, urt=info.user_record_type, body=info.data)
    for tx_id, (ops, xid) in replay.open_transactions().items():
        if xid is None:
            continue  # never prepared: it fails at the next load as it would have
        for op_kind, rid, urt, body in ops:
            out.write(_OP_TO_TYPE[op_kind], id=rid, tx_id=tx_id, urt=urt, body=body)
        out.write(PREPARE, tx_id=tx_id, body=xid)
    files = out.close()
    for seg in files:
        if seg.handle is not None:
            seg.handle.close()
            seg.handle = None
    return [os.path.basename(seg.path) for seg in files]
