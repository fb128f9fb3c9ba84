"""Verifying a file journal offline: every finding, not just the first; nothing changes.

``store data verify`` calls :func:`verify`, which reads every file and lists **every**
finding. Severities: ``error`` for what makes a load fail (a damaged header, a checksum failure,
two files with one id, a file of the other journal), ``warning`` for what the next open cleans
up by itself (a torn tail, a header-less file, an interrupted compaction, ``.cmp`` / ``.tmp``
leftovers) or that looks wrong without breaking a load (a file name that disagrees with its
header), ``info`` for the rest (stale bytes after the end of data from an
earlier use of a reused file, ``.broken`` backups and ``repair-*`` folders, the attic).

It returns a result dataclass and never prints (docs/conventions.md#5, #10).

Thread-safety: each call works alone on its directory.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.file import compact as compaction
from store.file import integrity
from store.file.segments import SegmentNaming
from store.file.survey import (
    HEADER_ZERO,
    DirectoryListing,
    FileScan,
    JournalFile,
    ensure_unlocked,
    require_journal,
    scan_journal,
)
from store.fs import FileSystem, OsFileSystem

__all__ = ["FileReport", "Finding", "VerifyReport", "verify"]

ERROR = "error"
WARNING = "warning"
INFO = "info"


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
    Returns the :class:`VerifyReport`. Raises ConfigError when ``directory`` holds no journal,
    StoreLockedError when a live process holds the journal open for writing (unless
    ``force``), StoreIOError when a file cannot be read.
    """
    fs = fs or OsFileSystem()
    require_journal(directory, prefix=prefix, fs=fs)
    ensure_unlocked(directory, force=force)
    js = scan_journal(directory, prefix=prefix, fs=fs, kind=kind)
    findings: list[Finding] = []
    scans = {id(s.file): s for s in js.scans}
    reports = [_file_report(f, scans.get(id(f))) for f in js.files]
    # Errors are exactly the problems a load refuses (store.file.integrity), in its order.
    findings.extend(_problem_finding(p, js.scans) for p in js.problems)
    for f in js.files:
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
        f.path,
        f.name,
        f.file_id,
        f.size,
        f.status,
        s.user_count,
        s.end,
        s.last_lsn,
        torn,
        bad,
        s.stale_bytes,
        len(s.markers),
    )


def _header_findings(f: JournalFile) -> list[Finding]:
    """The header warnings (the errors are load problems, see _problem_finding)."""
    if f.status == HEADER_ZERO:
        return [
            Finding(
                WARNING,
                "zero-header",
                f.path,
                0,
                "no header: a file never finished; the next open moves it to attic/",
            )
        ]
    if f.header is None:
        return []
    found = []
    if f.name_id is not None and f.name_id != f.header.file_id:
        found.append(
            Finding(
                WARNING,
                "name-mismatch",
                f.path,
                0,
                f"the name says file id {f.name_id}, the header {f.header.file_id} "
                "(the journal goes by the header)",
            )
        )
    return found


def _data_findings(s: FileScan) -> list[Finding]:
    path = s.file.path
    tail = s.tail
    found = []
    if s.verdict is None and tail.records:
        found.append(
            Finding(
                WARNING,
                "torn-tail",
                path,
                tail.end,
                f"torn tail: {len(tail.records)} unsynced record(s) after the end of data "
                "(ignored by a load, zeroed by the next open or by repair)",
                tail.extent - tail.end,
            )
        )
    if s.stale_bytes:
        found.append(
            Finding(
                INFO,
                "stale-bytes",
                path,
                s.stale_offset,
                f"{s.stale_bytes} non-zero bytes after the end of data (an earlier use of "
                "the file, or a partial write; ignored)",
                s.stale_bytes,
            )
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
                Finding(
                    WARNING,
                    "leftover",
                    item.path,
                    None,
                    f"{item.kind} file left by an interruption; the next open removes it",
                )
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
