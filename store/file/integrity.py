"""What makes a journal directory unloadable, decided in one place for the load and the tools.

:meth:`store.file.journal.FileJournal.load` raises the first :class:`Problem` these functions
return; ``store data verify`` lists every one and ``store data print`` reports them
(``store.file.survey``), so the three cannot disagree. The rules, in the order problems are
reported:

1. **Headers** (:func:`header_problems`): a damaged header or one of an unknown version, a file
   of the other journal kind, two files carrying one file id.
2. **Tails** (:func:`tail_problems`), per file in file-id order
   (:func:`classify`): only the last file holding data may end in a torn tail;
   valid records after the end of data of an earlier file, or records proving by their
   ``durable_lsn`` that the missing one had been durable, are a checksum failure.
3. **Sizes**: a file shorter than the ``file_size`` its header states has been truncated.
4. **The file list**: the file-list markers (``store.file.format``, "File-list markers") of
   the newest file holding records say which other data files must exist and which lsns each
   holds (its markers in sequence, then those among valid records after its end of data: a
   torn tail's markers never retired anything yet, and after damage they still tell what
   happened). A listed file that is missing, or whose records in sequence end before its
   listed last lsn, lost those lsns. A file whose data ends early because of a checksum failure
   (rule 2) or a truncation (rule 3) is reported once, by that rule, with the lost lsns.

Why markers (the design decision)
=================================

Lsn gaps between files are legitimate: reclaim removes files whose records are all dead, and
compaction replaces files by output with its own lsn run. Neither a gap nor a ``durable_lsn``
tells a deleted file from a reclaimed one, so the journal leaves a durable trace of which files
must exist: a ``FILES`` marker as the first record of every file the writer rolls into (when
other data files exist), and a ``CHANGE`` marker after every change of the set of data files.
The writer (``store.file.journal``) keeps them true at every crash point:

- a roll: the ``FILES`` marker lists every data file with the lsns it holds; they were all
  synced before the first write to the new file (``store.file.writer``), so if the marker is
  durable, so is everything it lists;
- reclaim: the ``CHANGE`` marker retiring the files is appended and flushed before any of them
  is reused or removed (reclaim flushed before recycling already);
- compaction: its committed control file stands for the change until the ``CHANGE`` marker
  (old files retired, output files added) is durable: the compactor recycles the old files,
  renames its output, appends the marker, flushes it, and only then deletes the control file.
  A crash anywhere in between leaves the control file;
  ``store.file.compact.finish_interrupted`` then finishes the compaction at the next open but
  keeps the control file, the load treats the files it names as retired, appends the
  equivalent marker, flushes it, and only then deletes the control file. Offline tools read
  the control file the same way. (A control file that never committed means no marker was
  written either: the marker always comes after it.)
  No crash point leaves a listed file missing without a durable marker or a committed control
  file saying why;
- repair cutting a file at a checksum failure restates the files left in a ``FILES`` marker at
  the cut (``store.file.repair``); salvage writes a new journal with its own markers.

Markers in a torn tail were never durable, and nothing acted on them before they were. A
journal written before markers existed has none: rule 4 is skipped until the writer rolls into
a new file (the ``v1`` golden journal loads exactly as before). A ``FILES`` marker whose list was
left out (too long: more than a quarter of a file) suspends rule 4 until the next one.

``durable_lsn`` across files: a record in sequence always has ``durable_lsn <= lsn``, so the
highest ``durable_lsn`` in sequence can never exceed the highest lsn present; "data that later
records prove durable but that is gone" is therefore decided by the torn-tail rule (valid
records after the end of data whose ``durable_lsn`` covers the missing lsn, rule 2) and by the
markers (the listed lsns of earlier files, rule 4), not by a separate scan of ``durable_lsn``.

Cost: every rule is per file (sizes, the last lsn of each file, one pass over the records of
the newest file to find its markers); the load stays one pass over the records.

Thread-safety: pure functions over their arguments.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from store.errors import ChecksumError, CorruptionError, LostDataError
from store.file import format as fmt
from store.file.reader import Tail, marker_of
from store.file.segments import SegmentNaming
from store.journal.api import EVENT

__all__ = [
    "LOST_KINDS",
    "FileFacts",
    "HeaderFacts",
    "Problem",
    "classify",
    "expected_files",
    "header_problems",
    "judge",
    "read_markers",
    "tail_problems",
]

#: Problem kinds that mean records are gone (rules 3 and 4); a plain repair cannot fix them.
LOST_KINDS = frozenset({"truncated", "missing-file", "lost-records"})

_SALVAGE_HINT = (
    "put the file back if it was moved away; otherwise `store data repair --salvage` rewrites "
    "the journal from what is left and reports what is lost (the original files are kept)"
)


@dataclass(frozen=True, slots=True)
class HeaderFacts:
    """One journal file's header as found: ``header`` None with ``error`` for a damaged one,
    both None for a zero header (a file never finished, moved to ``attic/`` by a load)."""

    path: str
    header: fmt.FileHeader | None
    error: CorruptionError | None = None


@dataclass(slots=True)
class FileFacts:
    """What a scan of one file found, as the cross-file rules need it.

    ``header_size`` is the header's ``file_size`` (0: unknown); ``markers`` the file-list
    markers among its records in sequence (None: not read; only the newest file's are used).
    Thread-safety: none; built and read by one caller.
    """

    path: str
    file_id: int
    size: int
    header_size: int
    count: int
    first_lsn: int
    last_lsn: int
    tail: Tail
    markers: list[fmt.Marker] | None = None


@dataclass(frozen=True, slots=True)
class Problem:
    """One reason a load refuses the journal; ``error`` is what the load raises.

    ``kind`` is a stable key: ``bad-header``, ``kind-mismatch``, ``duplicate-id``,
    ``checksum``, ``truncated``, ``missing-file`` or ``lost-records``. ``index`` is the
    position of the file in the facts judged (None for a missing file or a header problem);
    ``lost`` the lsns known lost, first and last. Immutable; safe to share.
    """

    kind: str
    error: CorruptionError
    file_id: int | None = None
    index: int | None = None
    lost: tuple[int, int] | None = None

    @property
    def path(self) -> str:
        return self.error.path


def header_problems(files: Sequence[HeaderFacts], kind: int | None) -> list[Problem]:
    """Rule 1 for ``files`` (any order); ``kind`` None skips the kind check.

    Returns the problems, damaged headers first, then other kinds, then duplicate ids.
    """
    problems = [
        Problem(
            "bad-header",
            _with_hint(
                f.error, "`store data repair --force` moves the file aside into repair-<time>/"
            ),
        )
        for f in files
        if f.error is not None
    ]
    good = sorted(
        ((f.header.file_id, f) for f in files if f.header is not None), key=lambda x: x[0]
    )
    for fid, f in good:
        assert f.header is not None
        if kind is not None and f.header.kind != kind:
            problems.append(
                Problem(
                    "kind-mismatch",
                    CorruptionError(
                        f.path,
                        0,
                        f"a file of journal kind {f.header.kind} in a journal of kind {kind}",
                        hint="check --journal / --bindings (or the configuration): the directories "
                        "look swapped",
                    ),
                    fid,
                )
            )
    for (a, fa), (b, fb) in itertools.pairwise(good):
        if a == b:
            problems.append(
                Problem(
                    "duplicate-id",
                    CorruptionError(
                        fb.path,
                        0,
                        f"file id {b} is also carried by {os.path.basename(fa.path)}",
                        hint="move the file that does not belong here out of the directory by hand",
                    ),
                    b,
                )
            )
    return problems


def _with_hint(err: CorruptionError, hint: str) -> CorruptionError:
    return CorruptionError(err.path, err.offset, err.reason, hint=err.hint or hint)


def read_markers(data: bytes | memoryview, records: Iterable[Sequence[Any]]) -> list[fmt.Marker]:
    """The file-list markers among ``records`` (scanned from ``data``, in sequence).

    A record is read as ``(offset, length, type, …, body)`` (``store.file.reader.RawRecord``
    or ``store.file.survey.RecordView``). Returns them in order; bodies that are not a marker
    this version understands are skipped, as any event.
    """
    found = []
    for rec in records:
        marker = marker_of(data, rec)
        if marker is not None:
            found.append(marker)
    return found


#: The advice of a checksum failure: the repair that drops only the damaged records.
_SALVAGE_HINT = (
    "`store data repair --salvage` drops only the damaged records (the original files are "
    "copied aside first); `--force` cuts here and sets everything after aside; `store data "
    "verify` says what each would drop"
)


def classify(path: str, tail: Tail, *, missing_lsn: int, is_last: bool) -> None:
    """Raise ChecksumError if the records after the end of data prove it had been durable.

    ``missing_lsn`` is the lsn the record at the end of data would have had (a lower bound when
    the file has no record in sequence). ``is_last`` says whether this is the last file written.
    Returns quietly for a clean end or a torn tail.
    """
    if not tail.records:
        return
    first = tail.records[0]
    if not is_last:
        raise ChecksumError(
            path,
            tail.end,
            f"no valid record at this offset, but {len(tail.records)} valid record(s) follow "
            f"(first at offset {first.offset}, lsn {first.lsn}) and later files were written "
            "after this one was synced",
            hint=_SALVAGE_HINT,
        )
    proof = next(
        (r for r in tail.records if r.durable_lsn >= missing_lsn or r.flags & fmt.FLAG_SYNCED),
        None,
    )
    if proof is not None:
        raise ChecksumError(
            path,
            tail.end,
            f"no valid record at this offset (lsn {missing_lsn} expected), but the record at "
            f"offset {proof.offset} (lsn {proof.lsn}) was written after lsn {proof.durable_lsn} "
            "was durable",
            hint=_SALVAGE_HINT,
        )


def tail_problems(files: Sequence[FileFacts]) -> list[Problem]:
    """Rule 2 over ``files`` in file-id order: the tails that prove corruption.

    The walk of the load: only the last file holding data may end in a torn tail, and the lsn
    missing at a file's end of data is its last lsn + 1 (or the highest lsn before it + 1 when
    it has no record in sequence). Returns one ``checksum`` problem per damaged file.
    """
    with_data = [i for i, f in enumerate(files) if f.count or f.tail.records]
    last = with_data[-1] if with_data else -1
    problems = []
    prev_max = 0
    running = 0
    for i, f in enumerate(files):
        running = max(running, f.last_lsn)  # a torn tail's lsns do not count
        missing = f.last_lsn + 1 if f.count else prev_max + 1
        try:
            classify(f.path, f.tail, missing_lsn=missing, is_last=i == last)
        except ChecksumError as exc:
            problems.append(Problem("checksum", exc, f.file_id, i))
        prev_max = running
    return problems


def expected_files(
    files: Sequence[FileFacts], *, retired: Collection[int] = ()
) -> tuple[dict[int, fmt.MarkerEntry] | None, int | None]:
    """Which data files must exist (rule 4): file id -> listed entry, and the index of the
    newest file holding records (in sequence or after its end of data), whose markers say so:
    those in sequence, then those among the valid records after its end of data.

    ``retired`` are file ids a committed compaction control file retires (treated as if its
    marker had been read). Returns ``(None, index)`` when the newest file has no usable
    ``FILES`` marker (a journal written before markers, a list left out, a damaged one), and
    ``(None, None)`` when no file holds records.
    """
    newest = max((i for i, f in enumerate(files) if f.count or f.tail.records), default=None)
    if newest is None:
        return None, None
    state: dict[int, fmt.MarkerEntry] | None = None
    for marker in [*(files[newest].markers or ()), *_tail_markers(files[newest].tail)]:
        if marker.kind == fmt.MARKER_FILES:
            state = {e.file_id: e for e in marker.files} if marker.known else None
        elif state is not None:
            for e in marker.retired:
                state.pop(e.file_id, None)
            for e in marker.files:
                state[e.file_id] = e
    if state is not None:
        for fid in retired:
            state.pop(fid, None)
        state.pop(files[newest].file_id, None)
    return state, newest


def _tail_markers(tail: Tail) -> list[fmt.Marker]:
    """Markers among the valid records after the end of data (damage or a torn tail).

    They only ever retire files or add files that exist: a marker in a torn tail was never
    durable, so nothing it retired was reused yet; after damage, the markers that followed
    still say what happened. Reading them keeps damage in the newest file from also reading
    as files gone missing."""
    found = []
    for rec in tail.records:
        if rec.type == EVENT and rec.flags & fmt.FLAG_MARKER:
            marker = fmt.decode_marker(rec.body)
            if marker is not None:
                found.append(marker)
    return found


def judge(
    files: Sequence[FileFacts],
    *,
    naming: SegmentNaming,
    retired: Collection[int] = (),
) -> list[Problem]:
    """Rules 2 to 4 over ``files`` (every file with a usable header, in file-id order).

    ``retired``: file ids retired by a committed compaction control file. Returns every
    problem, checksum failures first, then truncations, then missing files and lost records,
    each in file-id order. Raises nothing.
    """
    problems = tail_problems(files)
    damaged = {p.index for p in problems}
    listed, newest = expected_files(files, retired=retired)
    listed = listed or {}
    source = os.path.basename(files[newest].path) if newest is not None else ""
    by_id = {f.file_id: i for i, f in enumerate(files)}
    for i, f in enumerate(files):
        if f.header_size and f.size < f.header_size:
            problems.append(_truncated(f, i, listed.get(f.file_id), source))
            damaged.add(i)
    for fid, entry in sorted(listed.items()):
        index = by_id.get(fid)
        if index is None:
            problems.append(_missing(naming, entry, source))
        elif index not in damaged:
            f = files[index]
            if not f.count or f.last_lsn < entry.last_lsn:
                problems.append(_lost(f, index, entry, source))
    return problems


def _lost_range(f: FileFacts, entry: fmt.MarkerEntry | None) -> tuple[int, int] | None:
    if entry is None or (f.count and f.last_lsn >= entry.last_lsn):
        return None
    first = max(entry.first_lsn, f.last_lsn + 1) if f.count else entry.first_lsn
    return first, entry.last_lsn


def _truncated(f: FileFacts, index: int, entry: fmt.MarkerEntry | None, source: str) -> Problem:
    lost = _lost_range(f, entry)
    ends = f"its records end at lsn {f.last_lsn}" if f.count else "it holds no record"
    if lost is not None:
        what = (
            f"the file list in {source} says it holds lsns {entry.first_lsn}..{entry.last_lsn} "  # type: ignore[union-attr]
            f"and {ends}: lsns {lost[0]}..{lost[1]} are lost"
        )
    elif entry is not None:
        what = f"{ends}; every lsn the file list in {source} names is still there"
    else:
        what = f"{ends} (offset {f.tail.end}); whatever followed is lost, how much is unknown"
    reason = (
        f"the file is {f.size} bytes but its header says {f.header_size}: it was truncated; " + what
    )
    return Problem(
        "truncated",
        LostDataError(f.path, f.size, reason, hint=_SALVAGE_HINT),
        f.file_id,
        index,
        lost,
    )


def _missing(naming: SegmentNaming, entry: fmt.MarkerEntry, source: str) -> Problem:
    path = naming.path(entry.file_id)
    reason = (
        f"journal file {os.path.basename(path)} (file id {entry.file_id}) is missing: the file "
        f"list in {source} says it holds lsns {entry.first_lsn}..{entry.last_lsn}, which are lost"
    )
    return Problem(
        "missing-file",
        LostDataError(path, 0, reason, hint=_SALVAGE_HINT),
        entry.file_id,
        None,
        (entry.first_lsn, entry.last_lsn),
    )


def _lost(f: FileFacts, index: int, entry: fmt.MarkerEntry, source: str) -> Problem:
    lost = _lost_range(f, entry)
    assert lost is not None
    ends = f"its records end at lsn {f.last_lsn}" if f.count else "it holds no record"
    reason = (
        f"the file list in {source} says this file holds lsns {entry.first_lsn}.."
        f"{entry.last_lsn}, but {ends}: lsns {lost[0]}..{lost[1]} are lost"
    )
    return Problem(
        "lost-records",
        LostDataError(f.path, f.tail.end, reason, hint=_SALVAGE_HINT),
        f.file_id,
        index,
        lost,
    )
