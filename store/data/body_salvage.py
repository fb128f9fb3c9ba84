"""``store data repair --salvage`` on large-message bodies: every large message of the message
journal whose body is gone, of another size than its record says, or damaged (a chunk that
fails its checksum, a bad header or descriptor) is removed with its references, and only it;
every other message stays and is delivered as before (:func:`salvage_bodies`).

Chosen over keeping the message with its body marked lost: a message without its body can
never be delivered whole, and keeping it would block its queue at every receive (what a
consumer cannot read it cannot acknowledge). The report names each removed message id, its
body and why, so the operator knows exactly what the repair dropped.

What the salvage does, in this order (a crash anywhere leaves a store the next salvage
finishes; the load refuses nothing it did):

1. The store is opened (its lock taken) and the message journal loaded; each large message's
   body is read whole through the store's own reader (every chunk's checksum), offline.
2. Each damaged body is set aside: on the file store its file moves to ``attic/`` inside the
   large-messages directory (``attic/<id>.msg``, kept for a person to look at; a load never
   reads it); on a database store its rows are deleted (a table has no attic; the rows could
   not be read anyway).
3. Each such message's record is deleted from the message journal (its DELETE drops its
   references, acknowledgements and delivery counts with it), made durable before the call
   returns.

A large message sent by a prepared transaction keeps its record (the transaction's commit or
rollback decides it; `store data print` lists it): it is reported in ``left``. A paged large
message is not read here: its page is the record of it, and the page salvage replaces that
record when its body is gone and some queue may still receive it (:mod:`store.data.page_salvage`).

Thread-safety: each call works alone on its store, under the store lock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass

from store.config import StoreConfig
from store.errors import CorruptionError
from store.journal.api import RecordInfo
from store.large.api import LargeMessageStore, check_body
from store.large.files import FileLargeMessages
from store.messaging.message_records import decode_large_message
from store.messaging.records import ADD_LARGE_MESSAGE
from store.store import open_store

__all__ = ["BodySalvageReport", "LostBody", "salvage_bodies"]

#: Where a file store's damaged bodies go, inside the large-messages directory.
ATTIC = "attic"


@dataclass(frozen=True, slots=True)
class LostBody:
    """One large message whose body cannot be delivered: its id, its body's ``path`` (as
    errors name it), the size its record says, and why; ``moved_to`` the file it was moved
    to (file store), None when it was deleted or was gone. Immutable."""

    message_id: int
    path: str
    size: int
    reason: str
    moved_to: str | None = None


@dataclass(frozen=True, slots=True)
class BodySalvageReport:
    """What :func:`salvage_bodies` found and did: ``checked`` large messages read;
    ``removed`` those removed with their bodies (or, on a dry run, that would be); ``left``
    those of prepared transactions it left alone. Immutable."""

    where: str
    checked: int
    removed: tuple[LostBody, ...] = ()
    left: tuple[LostBody, ...] = ()
    dry_run: bool = False

    @property
    def changed(self) -> bool:
        """True when the salvage changed the store."""
        return bool(self.removed) and not self.dry_run


def salvage_bodies(config: StoreConfig, *, dry_run: bool = False) -> BodySalvageReport:
    """Remove every large message of ``config``'s store whose body cannot be read whole, with
    that body (module docstring); ``dry_run`` only reports. Returns the report. Raises
    StoreLockedError naming the holder, CorruptionError when the message journal itself
    cannot be loaded (salvage it first: ``repair --salvage`` runs the journals before the
    bodies), StoreIOError / StoreUnavailableError."""
    store = open_store(config)
    try:
        store.bindings.load()
        loaded = store.messages.load()
        large = store.large_messages
        present = set(large.ids())
        committed = _large_adds(loaded.records)
        prepared = _large_adds(rec for tx in loaded.prepared for rec in tx.records)
        checked = len(committed) + len(prepared)
        removed = [lost for rec in committed if (lost := _problem(large, present, rec))]
        left = [lost for rec in prepared if (lost := _problem(large, present, rec))]
        where = _where(large)
        if dry_run or not removed:
            return BodySalvageReport(where, checked, tuple(removed), tuple(left), dry_run)
        done = [_set_aside(large, lost, present) for lost in removed]
        for lost in done:
            store.messages.append_delete(lost.message_id)
        store.messages.flush()
        return BodySalvageReport(where, checked, tuple(done), tuple(left))
    finally:
        store.close()


def _large_adds(records: Iterable[RecordInfo]) -> list[RecordInfo]:
    """The large messages' add records of ``records``."""
    return [r for r in records if not r.is_update and r.user_record_type == ADD_LARGE_MESSAGE]


def _problem(large: LargeMessageStore, present: set[int], rec: RecordInfo) -> LostBody | None:
    """What is wrong with the body of the large message whose add record is ``rec``, None
    when it reads whole at the size its record says."""
    message_id = rec.id
    _message, size = decode_large_message(rec.data, message_id)
    path = large.path(message_id)
    if message_id not in present:
        return LostBody(message_id, path, size, "the body is gone")
    try:
        got = check_body(large, message_id)
    except CorruptionError as exc:
        return LostBody(message_id, path, size, f"{exc.reason} (body offset {exc.offset})")
    if got != size:
        return LostBody(message_id, path, size, f"the body holds {got} bytes, its record {size}")
    return None


def _set_aside(large: LargeMessageStore, lost: LostBody, present: set[int]) -> LostBody:
    """Move (file store) or delete (database) the body of ``lost``; returns it with
    ``moved_to``. Raises StoreIOError / StoreUnavailableError."""
    if lost.message_id not in present:
        return lost
    if isinstance(large, FileLargeMessages):
        attic = os.path.join(large.directory, ATTIC)
        large.fs.makedirs(attic)
        target = os.path.join(attic, os.path.basename(lost.path))
        if large.fs.exists(target):  # set aside before: keep both
            target = f"{target}.{time.strftime('%Y%m%d-%H%M%S')}"
        large.fs.rename(lost.path, target)
        large.fs.fsync_dir(attic)
        large.fs.fsync_dir(large.directory)
        return LostBody(lost.message_id, lost.path, lost.size, lost.reason, target)
    large.delete(lost.message_id)
    return lost


def _where(large: LargeMessageStore) -> str:
    if isinstance(large, FileLargeMessages):
        return large.directory
    table = getattr(large, "table", None)
    return f"table {table.name}" if table is not None else "the large-message store"
