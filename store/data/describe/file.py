"""The file store's side of :func:`store.data.describe.describe_store`: the node id from
``server.lock``, the journals file by file (:mod:`store.file.survey`: the load's own rules),
then the paging folder and the large-message folder (:mod:`store.data.describe.parts`).

Thread-safety: one generator belongs to one thread.
"""

from __future__ import annotations

import collections
import os
import re
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

from store.data.describe import parts
from store.data.describe.model import (
    DescribeOptions,
    Entry,
    Journal,
    JournalFile,
    Marker,
    NodeId,
    Record,
    Summary,
)
from store.data.describe.records import decode_user_record, user_type_name
from store.errors import StoreLockedError
from store.file import compact as compaction
from store.file import file_journal_options, integrity, survey
from store.file import format as fmt
from store.file.options import FileJournalOptions
from store.file.reader import FileReplay
from store.file.segments import SegmentNaming
from store.ha.files import SERVER_LOCK, live_holder
from store.journal.api import RecordType
from store.messaging.records import ADD_LARGE_MESSAGE

if TYPE_CHECKING:
    from store.config import StoreConfig

__all__ = ["file_entries", "live_large_ids", "read_node_id"]

_NONZERO = re.compile(rb"[^\x00]")
_NO_USER = frozenset(
    {RecordType.DELETE, RecordType.DELETE_TX, RecordType.COMMIT, RecordType.ROLLBACK}
)


def read_node_id(directory: str) -> str | None:
    """The node id in ``directory``'s ``server.lock`` (bytes 3-18, a UUID, as
    :mod:`store.ha.files` writes it), or None when there is no such file or it is too short.
    Opens it read-only, takes no lock. Raises nothing."""
    try:
        with open(os.path.join(directory, SERVER_LOCK), "rb") as f:
            data = f.read(19)
    except OSError:
        return None
    if len(data) < 19:
        return None
    return str(uuid.UUID(bytes=data[3:19]))


def file_entries(config: StoreConfig, options: DescribeOptions) -> Iterator[Entry]:
    """The entries of a file store (see :func:`store.data.describe.describe_store`)."""
    bindings, messages = file_journal_options(config, lock=False)
    chosen: list[tuple[str, FileJournalOptions]] = []
    if options.bindings:
        chosen.append(("bindings", bindings))
    if options.messages:
        chosen.append(("messages", messages))
    for _name, o in reversed(chosen):  # the message journal first: --journal names it
        survey.require_journal(o.directory, prefix=o.prefix, fs=o.fs)
    if not options.force:
        for _name, o in chosen:
            survey.ensure_unlocked(o.directory)
        holder = live_holder(config.node_manager_lock_directory)
        if holder is not None:
            raise StoreLockedError(
                f"the store is live in an HA pair: the live lock in "
                f"{config.node_manager_lock_directory} is held by {holder}",
                holder=holder,
                hint="stop that node, or pass --force to read it anyway",
            )
    lock_dir = config.node_manager_lock_directory
    yield NodeId(node_id=read_node_id(lock_dir), source=os.path.join(lock_dir, SERVER_LOCK))
    for name, o in chosen:
        yield from _journal(name, o, options)
    if options.paging:
        yield from parts.file_paging(config.paging_directory, options)
    if options.large_messages:
        yield from parts.file_large_messages(config.large_messages_directory)


def live_large_ids(o: FileJournalOptions) -> set[int]:
    """Ids of the large messages (ADD_LARGE_MESSAGE records) a load of the message journal
    ``o`` returns: each needs its body. Read-only, takes no lock. Raises ConfigError when
    there is no journal, StoreIOError when a file cannot be read."""
    listing = survey.require_journal(o.directory, prefix=o.prefix, fs=o.fs)
    files, _retired = survey.loaded_files(o.fs, listing)
    _scans, replay, _problems = _judge(o, files)
    return {
        rec.id
        for rec in replay.result().records
        if rec.user_record_type == ADD_LARGE_MESSAGE and not rec.is_update
    }


def _judge(
    o: FileJournalOptions, files: list[survey.JournalFile]
) -> tuple[list[survey.FileScan], FileReplay, list[integrity.Problem]]:
    """First pass: every file scanned and replayed (bodies dropped but a prepare's XID), and
    the load's verdict."""
    replay = FileReplay()
    scans = []
    for f in files:
        if f.file_id is None:
            continue
        s = survey.scan_file(f, survey.read_bytes(o.fs, f.path), keep_records=True)
        light = [r if r.type == RecordType.PREPARE else r._replace(body=b"") for r in s.records]
        replay.feed(light, path=f.path, file_id=f.file_id)
        s.records = []
        scans.append(s)
    naming = SegmentNaming(o.directory, o.prefix)
    ctl = compaction.read_control(o.fs, naming)
    problems = integrity.header_problems(
        [integrity.HeaderFacts(f.path, f.header, f.header_error) for f in files], o.kind
    ) + integrity.judge(
        [survey.facts_of(s) for s in scans],
        naming=naming,
        retired=ctl.file_ids(naming)[0] if ctl is not None else (),
    )
    survey.set_verdicts(scans, problems)
    return scans, replay, problems


def _journal(name: str, o: FileJournalOptions, options: DescribeOptions) -> Iterator[Entry]:
    listing = survey.require_journal(o.directory, prefix=o.prefix, fs=o.fs)
    files, retired = survey.loaded_files(o.fs, listing)
    scans, replay, problems = _judge(o, files)
    by_path = {s.file.path: s for s in scans}
    yield Journal(journal=name, store="file", where=o.directory, prefix=o.prefix)
    budget = options.max_records
    shown = reclaimed = 0
    by_user: collections.Counter[str] = collections.Counter()
    for f in files:
        s = by_path.get(f.path)
        yield _file_entry(name, f, s)
        if s is None:
            continue
        data = survey.read_bytes(o.fs, f.path)
        again = survey.scan_file(f, data, keep_records=True)
        for m in again.markers:
            yield Marker(journal=name, offset=m.offset, lsn=m.lsn, text=marker_text(m.marker))
        for rec in again.records:
            if rec.type not in _NO_USER and rec.type != RecordType.PREPARE:
                by_user[user_type_name(rec.user_type)] += 1
            if budget is None or budget > 0:
                yield _record(name, f.name, rec, options.safe, None)
                shown += 1
                if budget is not None:
                    budget -= 1
        if not options.reclaimed:
            reclaimed += len(again.tail.records)  # what lies further costs a search
            continue
        for left, why in _leftover_records(f, data, again, corrupt=s.verdict is not None):
            reclaimed += 1
            yield _record(name, f.name, left, options.safe, why)
    for f in retired:
        if options.reclaimed and f.file_id is not None:
            data = survey.read_bytes(o.fs, f.path)
            old = survey.scan_file(f, data, keep_records=True)
            yield _file_entry(name, f, old, retired=True)
            for rec in old.records:
                reclaimed += 1
                why = "in a file an interrupted compaction retires"
                yield _record(name, f.name, rec, options.safe, why)
    notes = [f"file {f.name} retired by an interrupted compaction" for f in retired]
    notes += [f"{item.kind}: {item.name}" for item in listing.leftovers]
    yield Summary(
        journal=name,
        records=sum(s.user_count for s in scans),
        shown=shown,
        files=len(scans),
        by_op={RecordType(t).name: n for t, n in sorted(replay.counts.items())},
        by_user_type=dict(sorted(by_user.items())),
        reclaimed=reclaimed,
        problems=[f"{p.kind}: {p.error}" for p in problems],
        load=None if problems else _load_counts(replay),
        notes=notes,
    )


def _load_counts(replay: FileReplay) -> dict[str, int]:
    loaded = replay.result()
    return {
        "records": len(loaded.records),
        "prepared": len(loaded.prepared),
        "failed": len(loaded.failed),
    }


def _file_entry(
    name: str, f: survey.JournalFile, s: survey.FileScan | None, *, retired: bool = False
) -> JournalFile:
    error = f.header_error.reason if f.header_error is not None else None
    if s is None:
        return JournalFile(
            journal=name, name=f.name, file_id=f.file_id, size=f.size, header=f.status,
            header_error=error, retired=retired,
        )  # fmt: skip
    tail = "clean"
    if s.tail.records:
        tail = "corrupt" if s.verdict is not None else "torn"
    return JournalFile(
        journal=name, name=f.name, file_id=f.file_id, size=f.size, header=f.status,
        header_error=error, records=s.count, end=s.end, tail=tail,
        tail_records=len(s.tail.records), stale_bytes=s.stale_bytes, retired=retired,
    )  # fmt: skip


def marker_text(m: fmt.Marker) -> str:
    """What a file-list marker says, in one line. Raises nothing."""
    if m.kind == fmt.MARKER_FILES and not m.known:
        return "FILES list left out"
    files = ", ".join(f"{e.file_id} lsns {e.first_lsn}..{e.last_lsn}" for e in m.files)
    if m.kind == fmt.MARKER_FILES:
        return f"FILES [{files}]"
    return f"CHANGE retired [{', '.join(str(e.file_id) for e in m.retired)}] added [{files}]"


def _record(
    journal: str,
    file: str,
    rec: survey.RecordView | fmt.Record,
    safe: bool,
    reclaimed: str | None,
) -> Record:
    op = rec.type
    has_user = op not in _NO_USER and op != RecordType.PREPARE  # events have one too
    body = rec.body
    return Record(
        journal=journal,
        op=RecordType(op).name,
        id=rec.id,
        tx_id=rec.tx_id,
        user_type=rec.user_type if has_user else None,
        user_type_name=user_type_name(rec.user_type) if has_user else None,
        size=rec.length,
        body_size=len(body),
        body=b"" if safe and op != RecordType.PREPARE else body,
        decoded=decode_user_record(op, rec.user_type, body, rec.id, safe=safe),
        file=file,
        offset=rec.offset,
        lsn=rec.lsn,
        tx_count=rec.tx_count if op in (RecordType.PREPARE, RecordType.COMMIT) else None,
        compact_count=rec.compact_count,
        reclaimed=reclaimed,
    )


def _leftover_records(
    f: survey.JournalFile, data: bytes, s: survey.FileScan, *, corrupt: bool
) -> Iterator[tuple[fmt.Record, str]]:
    """Valid records a load does not read: after the end of data (of this file id), then
    records of other file ids (an earlier use of the file) after those. ``corrupt``: the end
    of data is a damaged record (the load refuses the journal there)."""
    why = "after a damaged record" if corrupt else "after the end of data (a torn tail)"
    for rec in s.tail.records:
        yield rec, why
    pos = s.tail.extent
    size = len(data)
    while True:
        match = _NONZERO.search(data, pos)
        if match is None:
            return
        pos = match.start()
        if pos + fmt.OVERHEAD > size:
            return
        file_id = int.from_bytes(data[pos + 8 : pos + 16], "little")
        old = fmt.decode_record(data, pos, file_id) if file_id != f.file_id else None
        if old is None:
            pos += 1
            continue
        yield old, f"left over from an earlier use of the file (file id {file_id})"
        pos += old.length
