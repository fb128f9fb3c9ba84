"""Journal retention: a copy of every finished journal file in the history folder.

A file is finished when the journal rolls past it. The maintenance thread then copies it to
``<retention dir>/<prefix>-<yyyyMMddHHmmss>-<file_id:020d>.<ext>`` (UTC time of the copy), via a
``.tmp`` name, synced and renamed, so a copy that exists under its final name is complete. A
finished file cannot be reclaimed until its copy exists; at load every data file without a copy
is copied again, which makes an interrupted copy harmless (Artemis renames the live file to
``.bkp`` for the same purpose; here nothing in the journal directory changes name).

Pruning, oldest first by name: copies older than ``period`` are removed; then, if more than
``storage-limit / journal-file-size`` copies remain, the oldest go (the budget counts copies x
file size, as Artemis does, not bytes on disk).

``store data recover`` reads a history folder with :func:`history_files` and rebuilds a journal.

Thread-safety: called from the journal's maintenance thread only.
"""

from __future__ import annotations

import calendar
import logging
import os
import re
import time

from store.file.options import RetentionOptions
from store.file.segments import Segment, SegmentNaming
from store.fs import FileSystem, copy_file

__all__ = ["archive", "history_files", "history_name", "parse_history_name", "prune"]

log = logging.getLogger(__name__)


def history_name(naming: SegmentNaming, file_id: int, when: float) -> str:
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(when))
    return f"{naming.prefix}-{stamp}-{file_id:020d}.{naming.ext}"


def parse_history_name(naming: SegmentNaming, name: str) -> tuple[float, int] | None:
    """(copy time, file id) of a history file name of this journal, or None."""
    m = re.fullmatch(re.escape(naming.prefix) + r"-(\d{14})-(\d+)\." + re.escape(naming.ext), name)
    if m is None:
        return None
    when = calendar.timegm(time.strptime(m.group(1), "%Y%m%d%H%M%S"))
    return float(when), int(m.group(2))


def history_files(fs: FileSystem, naming: SegmentNaming, directory: str) -> list[tuple[int, str]]:
    """(file id, path) of every history copy in ``directory``, oldest file id first."""
    found = []
    for name in fs.listdir(directory):
        parsed = parse_history_name(naming, name)
        if parsed is not None:
            found.append((parsed[1], os.path.join(directory, name)))
    found.sort()
    return found


def archive(fs: FileSystem, naming: SegmentNaming, opts: RetentionOptions, seg: Segment) -> str:
    """Copy finished file ``seg`` to the history folder unless a copy exists; returns its path."""
    fs.makedirs(opts.directory)
    for fid, path in history_files(fs, naming, opts.directory):
        if fid == seg.file_id:
            return path
    final = os.path.join(opts.directory, history_name(naming, seg.file_id, time.time()))
    copy_file(fs, seg.path, final)
    return final


def prune(fs: FileSystem, naming: SegmentNaming, opts: RetentionOptions, file_size: int) -> int:
    """Remove copies past the period or over the storage limit; returns how many were removed."""
    entries = []
    for name in fs.listdir(opts.directory):
        if name.endswith(".tmp"):
            fs.remove(os.path.join(opts.directory, name))  # an interrupted copy
            continue
        parsed = parse_history_name(naming, name)
        if parsed is not None:
            entries.append((name, parsed[0]))
    entries.sort()
    removed = 0
    keep = []
    now = time.time()
    for name, when in entries:
        if opts.period_seconds is not None and when < now - opts.period_seconds:
            fs.remove(os.path.join(opts.directory, name))
            removed += 1
        else:
            keep.append(name)
    if opts.storage_limit is not None and file_size > 0:
        budget = opts.storage_limit // file_size
        excess = len(keep) - budget
        for name in keep[: max(0, excess)]:
            fs.remove(os.path.join(opts.directory, name))
            removed += 1
    if removed:
        fs.fsync_dir(opts.directory)
        log.info("retention removed %d history files from %s", removed, opts.directory)
    return removed
