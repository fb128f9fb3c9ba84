"""Crash-safe compaction of a file journal, and recovery of an interrupted one at start.

What compaction does: every finished data file is replaced by as few new files as possible
holding only what is still needed — the committed live records (written as plain adds and
updates, in journal order) and the records of transactions still open (written as transactional
records, with their prepare when prepared). Deletes, rolled-back and completed transaction
records, and events (already copied to retention) are dropped.

Steps (each crash point is recoverable; the control file is the commit point):

1. Pause appenders (they wait, nothing is lost) and flush. The finished files (every data file
   but the current one) are compacted; the current file stays as it is.
2. Replay the finished files with the shared replay rules and write the result into new files
   named ``<name>.cmp``, each synced. Their file ids are the newest finished file's id + 1, + 2,
   …: above every compacted file, below the current one, never reused.
3. Write the control file ``<prefix>.compact.ctl`` (via ``.tmp``, synced, renamed, directory
   synced). From here on the compaction is committed.
4. Rebuild the in-memory index by replaying the new files and the current file (the load's own
   code), switch to the new files, resume appenders.
5. Recycle the old files, rename every ``.cmp`` to its final name, sync the directory, append a
   ``CHANGE`` file-list marker (old files retired, new files added; ``store.file.integrity``)
   to the current file and flush it, delete the control file. Until the marker is durable the
   committed control file stands for it.

Recovery (:func:`finish_interrupted`, run before every load): with a valid control file,
delete the old files it lists that still exist and rename the listed ``.cmp`` files that still
exist; the
control file is **kept** and returned: the load treats its old files as retired, appends the
equivalent ``CHANGE`` marker, flushes it, and only then deletes the control file
(:func:`remove_control`), so a crash before step 5's marker was durable never reads as missing
files. A control file that does not verify (its checksum line) never committed and is deleted.
Leftover ``.cmp`` and ``.tmp`` files are then removed. Running it twice is harmless.

Why appenders pause instead of running alongside (as in Artemis): it keeps the reclaim counts
exact without replaying "compaction commands", and a compaction copies only live records, which
by its trigger are under ``journal-compact-percentage`` of the files it reads. The pause is
measured by ``bench/file_bench.py``; a concurrent compactor is a later improvement.

The journal is reached only through :class:`CompactionHost` (``FileJournal`` implements it):
public read accessors and the three calls that change its state (``copy_to_retention`` at
step 1, ``install_compaction`` at step 4, ``record_file_change`` at step 5). This module does
not import the journal, which imports it.

Thread-safety: :func:`compact` runs under the journal's maintenance lock.
"""

from __future__ import annotations

import logging
import os
import zlib
from dataclasses import dataclass
from typing import Protocol

from store.file import format as fmt
from store.file import integrity
from store.file.index import LiveIndex
from store.file.io import IOBackend
from store.file.options import FileJournalOptions
from store.file.reader import Cursor, FileReplay, Tail, find_after, replay_file, scan
from store.file.segments import Segment, SegmentManager, SegmentNaming, close
from store.file.writer import GroupCommitWriter
from store.fs import FileSystem
from store.journal.api import ADD, ADD_TX, DELETE_TX, EVENT, PREPARE, UPDATE, UPDATE_TX
from store.journal.replay import OP_ADD, OP_DELETE, OP_UPDATE, Replayer

__all__ = [
    "CompactionHost",
    "ControlFile",
    "OutputWriter",
    "apply_control",
    "compact",
    "read_control",
    "finish_interrupted",
    "remove_control",
    "write_control",
]

log = logging.getLogger(__name__)

_MAGIC = "SJNL-COMPACT 1"
_OP_TO_TYPE = {OP_ADD: ADD_TX, OP_UPDATE: UPDATE_TX, OP_DELETE: DELETE_TX}


class CompactionHost(Protocol):
    """What :func:`compact` needs of the journal it compacts (``FileJournal`` implements it).

    Everything here is read-only to the compactor: the journal's state changes only through
    the three methods, each of which takes the journal's own locks.
    """

    @property
    def options(self) -> FileJournalOptions: ...
    @property
    def naming(self) -> SegmentNaming: ...
    @property
    def writer(self) -> GroupCommitWriter | None: ...
    @property
    def segments(self) -> SegmentManager: ...
    @property
    def backend(self) -> IOBackend: ...
    @property
    def index(self) -> LiveIndex: ...
    @property
    def data_files(self) -> list[Segment]: ...

    def copy_to_retention(self) -> None:
        """Copy the finished files still waiting for their retention copy (no-op without)."""

    def install_compaction(self, index: LiveIndex, files: list[Segment]) -> None:
        """Make ``files`` the data files and ``index`` the live index (appenders paused)."""

    def record_file_change(
        self, retired: list[fmt.MarkerEntry], added: list[fmt.MarkerEntry]
    ) -> None:
        """Append the CHANGE markers for ``retired`` and ``added`` files and flush them."""


@dataclass(frozen=True, slots=True)
class ControlFile:
    """What a committed compaction replaces: old final names and new ``.cmp`` names."""

    old: list[str]
    new: list[str]

    def file_ids(self, naming: SegmentNaming) -> tuple[list[int], list[int]]:
        """The file ids in the old names and in the new names (``.cmp`` dropped)."""
        old = [naming.parse(n) for n in self.old]
        new = [naming.parse(n[: -len(".cmp")] if n.endswith(".cmp") else n) for n in self.new]
        return [i for i in old if i is not None], [i for i in new if i is not None]


def control_path(naming: SegmentNaming) -> str:
    return os.path.join(naming.directory, f"{naming.prefix}.compact.ctl")


def encode_control(ctl: ControlFile) -> bytes:
    lines = [_MAGIC, *(f"old {n}" for n in ctl.old), *(f"new {n}" for n in ctl.new)]
    body = ("\n".join(lines) + "\n").encode()
    return body + f"crc {zlib.crc32(body):08x}\n".encode()


def decode_control(raw: bytes) -> ControlFile | None:
    """The control file, or None if it is incomplete or damaged (never committed)."""
    cut = raw.rfind(b"crc ")
    if cut <= 0 or not raw.endswith(b"\n"):
        return None
    body, tail = raw[:cut], raw[cut:].strip()
    try:
        if int(tail[4:], 16) != zlib.crc32(body):
            return None
    except ValueError:
        return None
    lines = body.decode().splitlines()
    if not lines or lines[0] != _MAGIC:
        return None
    old = [line[4:] for line in lines[1:] if line.startswith("old ")]
    new = [line[4:] for line in lines[1:] if line.startswith("new ")]
    return ControlFile(old, new)


def write_control(fs: FileSystem, naming: SegmentNaming, ctl: ControlFile) -> None:
    """Write the control file durably (tmp, sync, rename, directory sync): the commit point."""
    path = control_path(naming)
    tmp = path + ".tmp"
    handle = fs.open(tmp, create=True)
    try:
        handle.truncate(0)
        handle.pwrite(encode_control(ctl), 0)
        handle.datasync()
    finally:
        handle.close()
    fs.rename(tmp, path)
    fs.fsync_dir(naming.directory)


def read_control(fs: FileSystem, naming: SegmentNaming) -> ControlFile | None:
    path = control_path(naming)
    if not fs.exists(path):
        return None
    handle = fs.open(path, read_only=True)
    try:
        return decode_control(handle.pread(handle.size(), 0))
    finally:
        handle.close()


def finish_interrupted(fs: FileSystem, naming: SegmentNaming) -> ControlFile | None:
    """Finish or discard an interrupted compaction, then remove leftovers (idempotent).

    Returns the committed control file, which is kept until the caller made the change durable
    in a marker (see the module docstring), or None. Raises StoreIOError on I/O failure.
    """
    directory = naming.directory
    path = control_path(naming)
    changed = False
    ctl = None
    if fs.exists(path):
        ctl = read_control(fs, naming)
        if ctl is not None:
            log.warning("finishing an interrupted compaction in %s", directory)
            apply_control(fs, naming, ctl)
        else:
            log.warning("discarding an uncommitted compaction in %s", directory)
            fs.fsync_dir(directory)
            fs.remove(path)
            changed = True
    for name in fs.listdir(directory):
        if name.startswith(naming.prefix) and (name.endswith(".cmp") or name.endswith(".tmp")):
            fs.remove(os.path.join(directory, name))
            changed = True
    if changed:
        fs.fsync_dir(directory)
    return ctl


def apply_control(fs: FileSystem, naming: SegmentNaming, ctl: ControlFile) -> None:
    """Carry out a committed control file: remove the old files that still exist, rename the
    ``.cmp`` files that still exist, sync the directory (idempotent). Raises StoreIOError."""
    directory = naming.directory
    for name in ctl.old:
        p = os.path.join(directory, name)
        if fs.exists(p):
            fs.remove(p)
    for name in ctl.new:
        p = os.path.join(directory, name)
        if fs.exists(p):
            fs.rename(p, p[: -len(".cmp")])
    fs.fsync_dir(directory)


def remove_control(fs: FileSystem, naming: SegmentNaming) -> None:
    """Delete the control file (durably) once its change is recorded; no-op when absent."""
    path = control_path(naming)
    if fs.exists(path):
        fs.remove(path)
        fs.fsync_dir(naming.directory)


class OutputWriter:
    """Writes records into new ``.cmp`` files with their own lsn run, rolling as they fill.

    Every record is written as the compactor writes it (``compact_count`` 1, ``SYNCED``: each
    file is synced before the control file names it). With ``markers``, every file after the
    first starts with a ``FILES`` marker listing the files written before it, so that the
    output alone says which files must exist (``store data repair --salvage`` writes a whole
    journal this way; a compaction does not need it: the current file's ``CHANGE`` marker
    covers its output). Thread-safety: one writer per compaction or salvage.
    """

    def __init__(
        self, segments: SegmentManager, first_id: int, lsn: int, *, markers: bool = False
    ) -> None:
        self.segments = segments
        self.next_id = first_id
        self.lsn = lsn
        self.markers = markers
        self.files: list[Segment] = []
        self.buf = bytearray()
        self.seg: Segment | None = None
        self.tx_counts: dict[int, int] = {}

    def _open(self, room: int) -> Segment:
        self._finish()
        seg = self.segments.for_compaction(self.next_id)
        self.next_id += 1
        previous = [fmt.MarkerEntry(f.file_id, f.first_lsn, f.last_lsn) for f in self.files]
        self.files.append(seg)
        self.seg = seg
        self.tx_counts = {}
        if self.markers and previous:
            marker = fmt.Marker(fmt.MARKER_FILES, tuple(previous))
            space = seg.size - fmt.DATA_START - room
            if fmt.marker_size(len(previous)) > min(space, seg.size // 4):
                marker = fmt.Marker(fmt.MARKER_FILES, known=False)
            if fmt.marker_size(len(marker.files)) <= space:
                self._put(seg, EVENT, fmt.encode_marker(marker), fmt.FLAG_MARKER)
        return seg

    def _finish(self) -> None:
        seg = self.seg
        if seg is not None and seg.handle is not None:
            seg.handle.pwrite(self.buf, fmt.DATA_START)
            seg.handle.datasync()
            seg.end = fmt.DATA_START + len(self.buf)
        self.buf = bytearray()

    def write(
        self, rtype: int, *, id: int = 0, tx_id: int = 0, urt: int = 0, body: bytes = b""
    ) -> None:
        """Append one record (a PREPARE gets the transaction's count in its file)."""
        n = fmt.OVERHEAD + len(body)
        seg = self.seg
        if seg is None or fmt.DATA_START + len(self.buf) + n > seg.size:
            seg = self._open(n)
        tx_count = self.tx_counts.get(tx_id, 0) if rtype == PREPARE else 0
        self._put(seg, rtype, body, 0, id=id, tx_id=tx_id, urt=urt, tx_count=tx_count)
        if rtype == ADD_TX or rtype == UPDATE_TX or rtype == DELETE_TX:
            self.tx_counts[tx_id] = self.tx_counts.get(tx_id, 0) + 1

    def _put(
        self,
        seg: Segment,
        rtype: int,
        body: bytes,
        flags: int,
        *,
        id: int = 0,
        tx_id: int = 0,
        urt: int = 0,
        tx_count: int = 0,
    ) -> None:
        self.lsn += 1
        seg.first_lsn = seg.first_lsn or self.lsn
        seg.last_lsn = self.lsn
        self.buf += fmt.encode_record(
            rtype,
            file_id=seg.file_id,
            lsn=self.lsn,
            durable_lsn=self.lsn,
            id=id,
            tx_id=tx_id,
            user_type=urt,
            tx_count=tx_count,
            body=body,
            compact_count=1,
            flags=fmt.FLAG_SYNCED | flags,
        )

    def close(self) -> list[Segment]:
        """Write and sync what is buffered; returns the files written, in order."""
        self._finish()
        return self.files


def _replay_files(journal: CompactionHost, files: list[Segment]) -> FileReplay:
    replay = FileReplay()
    fs = journal.options.fs
    for seg in files:
        handle = fs.open(seg.path, read_only=True)
        try:
            raw = handle.pread(seg.size, 0)
        finally:
            handle.close()
        cur = Cursor()
        records = scan(raw, seg.file_id, cur)
        # A finished file is never the last one written: valid data after its end of data
        # means damage, and compacting past it would drop records. Refuse instead.
        integrity.classify(
            seg.path,
            Tail(cur.end, find_after(raw, seg.file_id, cur.end)),
            missing_lsn=cur.last_lsn + 1,
            is_last=False,
        )
        replay.feed(records, path=seg.path, file_id=seg.file_id)
    return replay


def _index_of(journal: CompactionHost, files: list[Segment]) -> LiveIndex:
    """The index a load would build from ``files`` (the new files, then the current one)."""
    index = LiveIndex()
    replayer = Replayer()
    fs = journal.options.fs
    for seg in files:
        handle = fs.open(seg.path, read_only=True)
        try:
            raw = handle.pread(seg.size, 0)
        finally:
            handle.close()
        seg.pos = 0
        seg.neg = {}
        seg.live_bytes = 0
        replay_file(scan(raw, seg.file_id, Cursor()), seg, replayer, index)
    return index


def compact(journal: CompactionHost) -> bool:
    """Compact every finished file of ``journal`` (see module docstring); True if it ran.

    The current file is left as it is (it is not finished); the index is rebuilt by replaying
    the new files and the current one exactly as a load would.
    Raises StoreIOError when writing fails before the commit point (old files stay in use).
    """
    w = journal.writer
    assert w is not None
    naming = journal.naming
    fs = journal.options.fs
    w.pause()
    try:
        w.flush()
        with w.lock:
            old = list(journal.data_files)
            current = w.current
            live = journal.index.records  # stable: appenders are paused
        if not old:
            return False
        # Files waiting for their retention copy must be copied before they disappear.
        journal.copy_to_retention()
        replay = _replay_files(journal, old)
        open_txs = replay.open_transactions()
        result = replay.result()
        # Output records have their own lsn run (lsns only need to be consecutive within a
        # file) so the current file's sequence goes on untouched; SYNCED marks them durable.
        out = OutputWriter(journal.segments, max(f.file_id for f in old) + 1, 0)
        for info in result.records:
            if info.id not in live:
                # Deleted since, by a record in the current file (not compacted): its entries
                # are dead. Open transactions' records are copied whatever happened since,
                # because their commit may sit in the current file.
                continue
            rtype = UPDATE if info.is_update else ADD
            out.write(rtype, id=info.id, urt=info.user_record_type, body=info.data)
        for tx_id, (ops, xid) in open_txs.items():
            for kind, rid, urt, body in ops:
                out.write(_OP_TO_TYPE[kind], id=rid, tx_id=tx_id, urt=urt, body=body)
            if xid is not None:
                out.write(PREPARE, tx_id=tx_id, body=xid)
        new_files = out.close()
        write_control(
            fs,
            naming,
            ControlFile(
                [os.path.basename(f.path) for f in old],
                [os.path.basename(f.path) for f in new_files],
            ),
        )
        journal.install_compaction(_index_of(journal, [*new_files, current]), new_files)
    finally:
        w.resume()
    _finish(journal, old, new_files)
    return True


def _finish(journal: CompactionHost, old: list[Segment], new_files: list[Segment]) -> None:
    fs = journal.options.fs
    naming = journal.naming
    backend = journal.backend
    # Taken before recycling, which gives the old files fresh ids.
    retired = [fmt.MarkerEntry(f.file_id, f.first_lsn, f.last_lsn) for f in old]
    added = [fmt.MarkerEntry(f.file_id, f.first_lsn, f.last_lsn) for f in new_files]
    for seg in old:
        backend.close_segment(seg)
        journal.segments.recycle(seg)  # neutralised and pooled, or deleted past the pool size
    for seg in new_files:
        final = seg.path[: -len(".cmp")]
        fs.rename(seg.path, final)
        seg.path = final
        close(seg)
    fs.fsync_dir(naming.directory)
    # The marker takes over from the control file: durable first, then the control file goes.
    journal.record_file_change(retired, added)
    fs.remove(control_path(naming))
    fs.fsync_dir(naming.directory)
    log.info("compacted %d files into %d in %s", len(old), len(new_files), naming.directory)
