"""Repairing a file journal offline: torn tails zeroed, a checksum failure cut only on demand.

``store data repair`` calls :func:`repair`, which follows etcd's rule: a torn tail is repaired,
a checksum failure is not, unless the operator insists. For a torn tail it keeps a synced
``<name>.broken`` copy of the file (``<name>.broken.1``, … when one exists), zeroes the bytes
from the end of data to the end of the last valid record after it, and syncs. With
``force=True`` a checksum failure is cut the same way at the first bad offset, and every later
file holding records is moved into ``<directory>/repair-<yyyyMMddHHmmss>/`` first, because its
records may depend on what was cut (files with a damaged header go there too). It first
finishes or discards an interrupted compaction exactly as an open would
(``store.file.compact.finish_interrupted``). It always takes the directory lock: nothing here
ever writes under a live writer. A second run finds nothing to do. Records already lost (a
missing or truncated file, lsns the file list names that are gone: ``store.file.integrity``)
are refused even with ``force``: a cut cannot bring them back and must not hide that they are
gone. Keeping every valid record around damage is ``store.file.salvage``
(``store data repair --salvage``), which rewrites the journal and keeps the original files.

It returns a result dataclass and never prints (docs/conventions.md#5, #10).

Thread-safety: run one repair at a time per journal; it takes the directory lock.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from store.errors import CorruptionError
from store.file import compact as compaction
from store.file import format as fmt
from store.file import integrity
from store.file.lock import held_while
from store.file.segments import SegmentNaming
from store.file.survey import FileScan, JournalFile, require_journal, scan_journal
from store.fs import FileHandle, FileSystem, OsFileSystem, copy_file
from store.journal.api import EVENT

__all__ = ["Cut", "MovedFile", "RepairReport", "repair"]

_CHUNK = 1 << 20


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

    Returns the :class:`RepairReport`. Raises ConfigError when ``directory`` holds no
    journal; StoreLockedError when a live process holds the journal; ChecksumError for a
    checksum failure and CorruptionError for a damaged header (unless ``force``), for two files
    with one id, or for a file of the other journal ``kind``; StoreIOError when the file system
    refuses.
    """
    fs = fs or OsFileSystem()
    require_journal(directory, prefix=prefix, fs=fs)  # before the lock, which creates a file
    with held_while(directory, native=fs.native):
        return _repair_locked(fs, directory, prefix, kind, force)


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
        EVENT,
        file_id=s.file.file_id,
        lsn=lsn,
        durable_lsn=lsn - 1,
        body=fmt.encode_marker(marker),
        flags=fmt.FLAG_MARKER,
    )
    handle.pwrite(raw, s.tail.end)
    return s.tail.end
