"""Reading a journal directory offline: its files, their records with positions, and what lies
after the end of data — for ``store data print``, ``verify``, ``repair``, salvage and
``recover``.

Nothing here writes. The functions apply the rules of ``store.file.format`` and
``store.file.reader`` exactly as :meth:`store.file.journal.FileJournal.load` does, without
its side effects (a load finishes interrupted compactions, moves header-less files to
``attic/``, zeroes torn tails and starts writing):

- :func:`list_directory` names the journal files of one prefix (with their decoded headers)
  and every leftover an operator should know about (compaction control file, ``.cmp`` /
  ``.tmp`` files, ``.broken`` backups, ``repair-*`` folders, ``attic/``);
- :func:`scan_file` reads one file: its records in sequence (file-list markers apart), the end
  of data, the valid records after it (:class:`~store.file.reader.Tail`) and the stale bytes
  beyond those;
- :func:`loaded_files` says which files a load reads (an interrupted compaction is seen as
  the load sees it after finishing it);
- :func:`scan_journal` scans those files, lists every problem that makes a load refuse the
  directory (``JournalScan.problems``: the load's own judgement, ``store.file.integrity``,
  applied to the same facts) and, when asked, replays them through the load's own dispatch
  (:class:`~store.file.reader.FileReplay`), so ``print``, ``verify`` and the load agree.

The one thing read outside the file-system seam is the directory lock file, probed with a
shared ``flock`` (:func:`lock_holder`), which never modifies it. The probe holds the shared
lock for the duration of two system calls; a writer starting in exactly that window gets
:class:`~store.errors.StoreLockedError` and can simply be started again.

Thread-safety: functions are pure over their arguments.
"""

from __future__ import annotations

import collections
import fcntl
import os
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from store.errors import (
    ChecksumError,
    ConfigError,
    CorruptionError,
    StoreIOError,
    StoreLockedError,
)
from store.file import compact as compaction
from store.file import format as fmt
from store.file import integrity
from store.file.lock import LOCK_NAME
from store.file.reader import Cursor, FileReplay, Tail, find_after, marker_of, scan
from store.file.segments import SegmentNaming
from store.fs import FileSystem, OsFileSystem

__all__ = [
    "HEADER_BAD",
    "HEADER_OK",
    "HEADER_ZERO",
    "DirectoryListing",
    "FileScan",
    "JournalFile",
    "JournalScan",
    "Leftover",
    "MarkerView",
    "RecordView",
    "detect_file_size",
    "ensure_unlocked",
    "facts_of",
    "loaded_files",
    "list_directory",
    "lock_holder",
    "open_journal_file",
    "read_bytes",
    "require_journal",
    "scan_file",
    "scan_journal",
    "set_verdicts",
]

_NONZERO = re.compile(rb"[^\x00]")

# JournalFile.status values.
HEADER_OK = "ok"
HEADER_ZERO = "zero"  # all zeros: a file never finished
HEADER_BAD = "bad"  # damaged, foreign, or of an unknown format version


@dataclass(frozen=True, slots=True)
class JournalFile:
    """One journal file as found on disk, with its decoded header.

    ``header`` is None for a zero header (a file never finished) and for a damaged one; the
    latter also has ``header_error``. ``name_id`` is the id in the file name (None for a name
    that carries none, e.g. a history copy read by path). Immutable; safe to share.
    """

    path: str
    name: str
    name_id: int | None
    size: int
    header: fmt.FileHeader | None
    header_error: CorruptionError | None = None

    @property
    def file_id(self) -> int | None:
        """The header's file id, or None when the header is zero or damaged."""
        return None if self.header is None else self.header.file_id

    @property
    def status(self) -> str:
        """``"ok"``, ``"zero"`` (never finished) or ``"bad"`` (damaged or foreign header)."""
        if self.header is not None:
            return HEADER_OK
        return HEADER_BAD if self.header_error is not None else HEADER_ZERO


@dataclass(frozen=True, slots=True)
class Leftover:
    """Something in a journal directory that is not a journal file but matters to an operator.

    ``kind`` is one of ``control`` (a compaction control file), ``compacting`` (a ``.cmp``
    file), ``temporary`` (a ``.tmp`` file), ``backup`` (a ``.broken`` copy kept by repair),
    ``repair`` (a ``repair-*`` folder of files set aside) or ``attic`` (the attic folder).
    Immutable; safe to share.
    """

    path: str
    name: str
    kind: str


@dataclass(frozen=True, slots=True)
class DirectoryListing:
    """The journal files of one prefix (in file-id order) and the leftovers beside them.

    Thread-safety: not changed after it is built; share it read-only.
    """

    directory: str
    prefix: str
    files: list[JournalFile]
    leftovers: list[Leftover]


class RecordView(NamedTuple):
    """One record read in sequence: where it is and what it says (see ``store.file.format``).

    Immutable (a tuple); safe to share.
    """

    offset: int
    length: int
    type: int
    user_type: int
    compact_count: int
    lsn: int
    id: int
    tx_id: int
    tx_count: int
    body: bytes


class MarkerView(NamedTuple):
    """A file-list marker read in sequence (``store.file.format``): where, its lsn, what it
    says. Immutable (a tuple); safe to share."""

    offset: int
    lsn: int
    marker: fmt.Marker


@dataclass(slots=True)
class FileScan:
    """What one file holds: records in sequence, end of data, the tail and stale bytes.

    ``records`` is empty unless the scan was asked to keep them (``count`` is always set, and
    counts every record in sequence; ``user_count`` leaves out the journal's own file-list
    ``markers``, which are always kept and never in ``records``).
    ``stale_bytes`` counts non-zero bytes after the tail (from an earlier use of the file, or
    a partial write): the format ignores them. ``verdict`` is set (:func:`set_verdicts`) when
    the tail proves corruption. Thread-safety: none; one caller builds and reads it.
    """

    file: JournalFile
    end: int = fmt.DATA_START
    last_lsn: int = 0
    count: int = 0
    tail: Tail = field(default_factory=lambda: Tail(fmt.DATA_START))
    records: list[RecordView] = field(default_factory=list)
    stale_bytes: int = 0
    stale_offset: int | None = None
    compacted: bool = False
    first_lsn: int = 0
    verdict: ChecksumError | None = None
    markers: list[MarkerView] = field(default_factory=list)

    @property
    def user_count(self) -> int:
        """Records in sequence other than file-list markers."""
        return self.count - len(self.markers)

    @property
    def torn(self) -> bool:
        """True when valid records follow the end of data and they are not corruption."""
        return bool(self.tail.records) and self.verdict is None


# -- files -----------------------------------------------------------------------------------


def read_bytes(fs: FileSystem, path: str) -> bytes:
    """All bytes of the file at ``path``. Raises StoreIOError when it cannot be read."""
    handle = fs.open(path, read_only=True)
    try:
        return handle.pread(handle.size(), 0)
    finally:
        handle.close()


def open_journal_file(fs: FileSystem, path: str, *, name_id: int | None = None) -> JournalFile:
    """Describe the journal file at ``path`` from its size and header.

    Returns a :class:`JournalFile` (a damaged header is recorded, not raised). Raises
    StoreIOError when the file cannot be opened or read.
    """
    handle = fs.open(path, read_only=True)
    try:
        size = handle.size()
        head = handle.pread(fmt.HEADER_SIZE, 0)
    finally:
        handle.close()
    name = os.path.basename(path)
    try:
        header = fmt.decode_header(head, path)
    except CorruptionError as exc:
        return JournalFile(path, name, name_id, size, None, exc)
    return JournalFile(path, name, name_id, size, header)


def _leftover_kind(name: str, prefix: str) -> str | None:
    if name == "attic":
        return "attic"
    if name.startswith("repair-"):
        return "repair"
    if not name.startswith(prefix):
        return None
    if name == f"{prefix}.compact.ctl":
        return "control"
    for suffix, kind in ((".cmp", "compacting"), (".tmp", "temporary"), (".broken", "backup")):
        if name.endswith(suffix) or f"{suffix}." in name:
            return kind
    return None


def list_directory(
    directory: str, *, prefix: str = "data", fs: FileSystem | None = None
) -> DirectoryListing:
    """The journal files named ``<prefix>-<id>.jrn`` in ``directory`` and its leftovers.

    Files are ordered by header file id (files without a usable header last, by name). A
    missing directory lists nothing. Raises StoreIOError when a file cannot be read.
    """
    fs = fs or OsFileSystem()
    naming = SegmentNaming(directory, prefix)
    files: list[JournalFile] = []
    leftovers: list[Leftover] = []
    for name in fs.listdir(directory):
        path = os.path.join(directory, name)
        name_id = naming.parse(name)
        if name_id is not None:
            files.append(open_journal_file(fs, path, name_id=name_id))
            continue
        kind = _leftover_kind(name, prefix)
        if kind is not None:
            leftovers.append(Leftover(path, name, kind))
    files.sort(key=_file_order)
    return DirectoryListing(directory, prefix, files, leftovers)


def require_journal(
    directory: str, *, prefix: str = "data", fs: FileSystem | None = None
) -> DirectoryListing:
    """The listing of ``directory``, which must hold a journal of ``prefix``: at least one
    ``<prefix>-<id>.jrn`` file (whatever its header says) or an interrupted compaction's
    control file. The offline tools call this first: they never create a journal, and a
    path that holds none is a mistake to report, not an empty journal to act on.

    Returns the :class:`DirectoryListing`. Raises ConfigError naming the directory when it
    does not exist or holds no journal, StoreIOError when it cannot be read.
    """
    fs = fs or OsFileSystem()
    key = "bindings-directory" if prefix == "bindings" else "journal-directory"
    if not fs.exists(directory):
        raise ConfigError(
            f"no journal in {directory}: the directory does not exist",
            key=key,
            value=directory,
            allowed="a directory holding a journal",
        )
    listing = list_directory(directory, prefix=prefix, fs=fs)
    if not listing.files and not any(item.kind == "control" for item in listing.leftovers):
        raise ConfigError(
            f"no journal in {directory}: it holds no {prefix}-*.jrn files",
            key=key,
            value=directory,
            allowed="a directory holding a journal",
        )
    return listing


# -- scanning ----------------------------------------------------------------------------------


def scan_file(file: JournalFile, data: bytes, *, keep_records: bool = False) -> FileScan:
    """Read ``data`` (the bytes of ``file``, whose header must be ok) as the load does.

    Returns the :class:`FileScan`; the tail verdict is ``store.file.integrity``'s (see
    :func:`set_verdicts`). Raises nothing.
    """
    result = FileScan(file)
    file_id = file.file_id
    if file_id is None:
        return result
    cursor = Cursor()
    compacted = True
    for raw in scan(data, file_id, cursor):
        if not result.count:
            result.first_lsn = raw[5]
        result.count += 1  # cursor.count is only set once the scan ends
        marker = marker_of(data, raw)
        if marker is not None:
            result.markers.append(MarkerView(raw[0], raw[5], marker))
            continue
        view = RecordView._make(raw)
        compacted = compacted and view.compact_count > 0
        if keep_records:
            result.records.append(view)
    result.end = cursor.end
    result.last_lsn = cursor.last_lsn
    result.count = cursor.count
    result.compacted = compacted and result.user_count > 0
    result.tail = Tail(cursor.end, find_after(data, file_id, cursor.end))
    stop = result.tail.extent
    match = _NONZERO.search(data, stop)
    if match is not None:
        result.stale_offset = match.start()
        rest = len(data) - stop
        result.stale_bytes = rest - data.count(0, stop)
    return result


def facts_of(s: FileScan) -> integrity.FileFacts:
    """The facts of ``s`` the load's cross-file rules read (``store.file.integrity``)."""
    header = s.file.header
    return integrity.FileFacts(
        s.file.path,
        s.file.file_id or 0,
        s.file.size,
        header.file_size if header else 0,
        s.count,
        s.first_lsn,
        s.last_lsn,
        s.tail,
        [m.marker for m in s.markers],
    )


def set_verdicts(scans: list[FileScan], problems: list[integrity.Problem]) -> None:
    """Put each ``checksum`` problem of ``problems`` (judged by ``store.file.integrity`` over
    ``scans``, in their order) on its scan as ``verdict``. Returns nothing; raises nothing."""
    for problem in problems:
        if problem.kind == "checksum" and problem.index is not None:
            assert isinstance(problem.error, ChecksumError)
            scans[problem.index].verdict = problem.error


def loaded_files(
    fs: FileSystem, listing: DirectoryListing
) -> tuple[list[JournalFile], list[JournalFile]]:
    """The journal files of ``listing`` a load reads, in file-id order, and those it retires.

    A load first finishes an interrupted compaction (``store.file.compact.finish_interrupted``):
    with a committed control file, the old files it names are removed and its ``.cmp`` files
    renamed to their final names. This applies the same to the listing without touching the
    directory: the old files come back as retired, the ``.cmp`` files take the place of their
    final names. Returns ``(files, retired)``. Raises StoreIOError when a file cannot be read.
    """
    naming = SegmentNaming(listing.directory, listing.prefix)
    ctl = compaction.read_control(fs, naming)
    if ctl is None:
        return list(listing.files), []
    old = set(ctl.old)
    retired = [f for f in listing.files if f.name in old]
    files = [f for f in listing.files if f.name not in old]
    for name in ctl.new:
        path = os.path.join(listing.directory, name)
        if not name.endswith(".cmp") or not fs.exists(path):
            continue
        final = name[: -len(".cmp")]
        files = [f for f in files if f.name != final]
        files.append(open_journal_file(fs, path, name_id=naming.parse(final)))
    files.sort(key=_file_order)
    return files, retired


def _file_order(f: JournalFile) -> tuple[bool, int, str]:
    return (f.file_id is None, f.file_id or 0, f.name)


@dataclass(slots=True)
class JournalScan:
    """Every file of one journal directory a load reads, scanned and judged; ``replay`` when
    asked for.

    Thread-safety: none; one caller builds and reads it.
    """

    listing: DirectoryListing
    scans: list[FileScan]
    replay: FileReplay | None = None
    #: The files a load reads, in file-id order (``listing.files`` but for an interrupted
    #: compaction: see :func:`loaded_files`), and the old files it retires.
    files: list[JournalFile] = field(default_factory=list)
    retired: list[JournalFile] = field(default_factory=list)
    records_kept: int = 0
    records_total: int = 0
    #: Why a load refuses this directory, in the load's order (the first is what it raises).
    problems: list[integrity.Problem] = field(default_factory=list)


def scan_journal(
    directory: str,
    *,
    prefix: str = "data",
    fs: FileSystem | None = None,
    keep_records: bool = False,
    max_records: int | None = None,
    replay: bool = False,
    kind: int | None = None,
) -> JournalScan:
    """List, scan and judge the journal ``prefix`` in ``directory`` (read-only).

    With ``keep_records`` the records are kept (at most ``max_records`` over all files); with
    ``replay`` every record is also fed to a :class:`~store.file.reader.FileReplay` (the load's
    own dispatch), whose result is what a load returns unless ``problems`` is not empty (the
    load then refuses the directory). ``kind`` (messages 0, bindings 1), when given, makes
    files of the other journal problems. An interrupted compaction is seen as the load sees it
    once it finished it (:func:`loaded_files`).
    Raises ConfigError when ``directory`` holds no journal (:func:`require_journal`).
    Returns the :class:`JournalScan`. Raises StoreIOError when a file cannot be read.
    """
    fs = fs or OsFileSystem()
    listing = require_journal(directory, prefix=prefix, fs=fs)
    files, retired = loaded_files(fs, listing)
    result = JournalScan(listing, [], FileReplay() if replay else None, files, retired)
    budget = max_records
    for file in files:
        if file.file_id is None:
            continue
        keep = keep_records and (budget is None or budget > 0)
        data = read_bytes(fs, file.path)
        s = scan_file(file, data, keep_records=keep or replay)
        if result.replay is not None:
            result.replay.feed(s.records, path=file.path, file_id=file.file_id)
        if budget is not None and len(s.records) > budget:
            del s.records[budget:]
        if not keep:
            s.records = []
        if budget is not None:
            budget -= len(s.records)
        result.records_kept += len(s.records)
        result.records_total += s.user_count
        result.scans.append(s)
    naming = SegmentNaming(directory, prefix)
    ctl = compaction.read_control(fs, naming)
    result.problems = integrity.header_problems(
        [integrity.HeaderFacts(f.path, f.header, f.header_error) for f in files], kind
    ) + integrity.judge(
        [facts_of(s) for s in result.scans],
        naming=naming,
        retired=ctl.file_ids(naming)[0] if ctl is not None else (),
    )
    set_verdicts(result.scans, result.problems)
    return result


# -- the directory lock ------------------------------------------------------------------------


def lock_holder(directory: str) -> str | None:
    """Who holds ``directory``'s journal lock for writing, or None when nobody does.

    Returns the holder line the writer left (``pid=… host=… since=…``), or ``"another
    process"`` when it left none. Never creates or changes the lock file. Raises StoreIOError
    when the lock file exists but cannot be opened.
    """
    path = os.path.join(directory, LOCK_NAME)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreIOError(f"cannot open lock file {path}: {exc.strerror}", path=path) from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
            return text or "another process"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def ensure_unlocked(directory: str, *, force: bool = False) -> None:
    """Refuse to read a journal a live process has open for writing (unless ``force``).

    Returns nothing. Raises StoreLockedError naming the holder.
    """
    if force:
        return
    holder = lock_holder(directory)
    if holder is not None:
        raise StoreLockedError(
            f"journal {directory} is open for writing by another process ({holder})",
            holder=holder,
            hint="stop the broker first, or pass --force to read it anyway (the tail may be "
            "in flight)",
        )


# -- configuration of the offline tools ------------------------------------------------------


def detect_file_size(
    directory: str, *, prefix: str = "data", fs: FileSystem | None = None
) -> int | None:
    """The most common size of the journal files in ``directory``, or None when there are none.

    Returns an int in bytes. Raises StoreIOError when a file cannot be read.
    """
    sizes = collections.Counter(
        f.size for f in list_directory(directory, prefix=prefix, fs=fs).files if f.header
    )
    return sizes.most_common(1)[0][0] if sizes else None
