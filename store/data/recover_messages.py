"""Every message ever added, recovered from a file journal's retention history: the default of
``store data recover`` (Artemis's ``data recover``), :func:`recover_messages_from_history`.

It reads what :func:`store.file.history.replay_history` reads (every history copy plus the
current journal files, into a NEW directory), and is message-level, so it lives here, above
both the file journal and the messaging package: the file package knows records, and the
message records are decoded with the storage manager's own codecs
(:mod:`store.messaging.records`, :mod:`store.messaging.page_records`). The record-level
recovery (``store data recover --records``) is :func:`store.file.history.recover_from_history`.

As Artemis's recover does, every valid record of every source file is read, whatever its
transaction became (committed, rolled back, never completed), and the new journal holds

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

It returns a result dataclass and never prints (docs/conventions.md#10).

Thread-safety: each call works alone on its directories.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from store.file import format as fmt
from store.file.history import SourceFile, recovery_replay, source_files, target_journal
from store.file.journal import FileJournal
from store.file.survey import RecordView
from store.fs import FileSystem, OsFileSystem
from store.journal.api import ADD, ADD_TX, EVENT, UPDATE, UPDATE_TX
from store.messaging.page_records import PAGE_TRANSACTION
from store.messaging.records import ADD_LARGE_MESSAGE, ADD_MESSAGE_PROTOCOL, ADD_REF, RefRecord

__all__ = ["MessageRecoverReport", "recover_messages_from_history"]


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
            if urt == ADD_REF and rtype in (UPDATE, UPDATE_TX, EVENT):
                try:
                    queue_id = RefRecord.decode(body).queue_id
                except ValueError:  # left out and counted: the recovered journal must load
                    self.bad_refs += 1
                    continue
                if (rid, queue_id) not in refs:
                    refs[rid, queue_id] = bytes(body)
            elif rtype in (ADD, ADD_TX, EVENT):
                if urt in (ADD_MESSAGE_PROTOCOL, ADD_LARGE_MESSAGE):
                    if rid not in messages:
                        messages[rid] = (urt, bytes(body))
                elif urt == PAGE_TRANSACTION and rtype != EVENT and rid not in self.page_txs:
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
    :func:`store.file.history.recover_from_history`; ``large_messages`` is the large-message
    folder the recovered journal will be opened with (large messages whose ``<id>.msg`` is not
    there are left out). Returns the :class:`MessageRecoverReport`. Raises ConfigError when
    ``target`` is not empty, ``history`` does not exist or there is nothing to read,
    StoreLockedError when a live process holds ``journal`` (unless ``force``), StoreIOError on
    I/O failure.
    """
    fs = fs or OsFileSystem()
    found_records = _MessageCollector()
    found = recovery_replay(
        history,
        target,
        journal=journal,
        prefix=prefix,
        force=force,
        fs=fs,
        on_records=found_records,
    )
    missing = [
        mid
        for mid, (urt, _body) in found_records.messages.items()
        if urt == ADD_LARGE_MESSAGE
        and (large_messages is None or not fs.exists(os.path.join(large_messages, f"{mid}.msg")))
    ]
    gone = set(missing)
    messages = [(mid, v) for mid, v in found_records.messages.items() if mid not in gone]
    refs = [(k, b) for k, b in found_records.refs.items() if k[0] in found_records.messages]
    kept_refs = [(k, b) for k, b in refs if k[0] not in gone]
    out = target_journal(found, target, prefix=prefix, kind=kind, file_size=file_size, fs=fs)
    _write_messages(out, messages, found_records.page_txs, kept_refs)
    return MessageRecoverReport(
        target,
        source_files(found),
        messages=len(messages),
        large_messages=sum(1 for _mid, (urt, _b) in messages if urt == ADD_LARGE_MESSAGE),
        refs=len(kept_refs),
        page_transactions=len(found_records.page_txs),
        missing_bodies=missing,
        refs_left_out=len(refs) - len(kept_refs),
        bad_refs=found_records.bad_refs,
        generations=found.generations,
    )


def _write_messages(
    out: FileJournal,
    messages: list[tuple[int, tuple[int, bytes]]],
    page_txs: dict[int, bytes],
    refs: list[tuple[tuple[int, int], bytes]],
) -> None:
    """Write the messages, then the page transactions, then the refs into the fresh journal
    ``out`` (loaded here, closed at the end). Raises what the journal raises."""
    try:
        out.load()
        for mid, (urt, body) in messages:
            out.append_add(mid, urt, body)
        for rid, body in page_txs.items():
            out.append_add(rid, PAGE_TRANSACTION, body)
        for (mid, _qid), body in refs:
            out.append_update(mid, ADD_REF, body)
        out.flush()
    finally:
        out.close()
