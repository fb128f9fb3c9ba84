"""The journal contract every back-end keeps (docs/journal.md).

A journal is an id-keyed record store that a broker replays at start-up. The operations are
add / update / delete, their transactional forms, and XA prepare / commit / rollback. A load
returns the committed records in journal order, the prepared transactions, and the ids of the
transactions that never completed.

Rules every implementation follows (the contract tests check them):

1. ``load()`` is called exactly once, before any append; a second call or an append before it
   raises :class:`~store.errors.JournalStateError`.
2. ``sync=True`` returns only once that record and every record appended before it are durable.
   ``sync`` never changes *what* is written, only whether the caller waits.
3. A non-transactional update or delete of an id that is not live raises
   :class:`~store.errors.UnknownRecordError`. A live id is one added (non-transactionally or by a
   committed transaction) and not deleted since; ids that exist only inside an open transaction
   are not live.
4. ``commit`` / ``rollback`` of a transaction that is not open raise
   :class:`~store.errors.UnknownTransactionError`. ``prepare`` of a transaction with no records
   is allowed (an empty prepared transaction).
5. After ``close()`` every append raises :class:`~store.errors.JournalClosedError`; a clean close
   makes everything appended before it durable.
6. ``LoadResult.records`` lists each add and each update as its own entry, in journal order; a
   transaction's entries appear at the position of its commit, in the order written in it; a
   delete removes every entry of its id. Event records are never returned.

Thread-safety: every method of a :class:`Journal` may be called from any number of threads.
"""

from __future__ import annotations

import abc
import concurrent.futures
import contextlib
import enum
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Final, NamedTuple

__all__ = [
    "ADD",
    "ADD_TX",
    "COMMIT",
    "DELETE",
    "DELETE_TX",
    "EVENT",
    "MAX_ID",
    "MIN_ID",
    "PREPARE",
    "ROLLBACK",
    "UPDATE",
    "UPDATE_TX",
    "Journal",
    "JournalStats",
    "LoadResult",
    "PreparedTransaction",
    "RecordInfo",
    "RecordType",
]

MIN_ID = -(2**63)
MAX_ID = 2**63 - 1


class RecordType(enum.IntEnum):
    """Journal record kinds; the numbers are Artemis's, shared by the file format and the tables."""

    EVENT = 10
    ADD = 11
    UPDATE = 12
    ADD_TX = 13
    UPDATE_TX = 14
    DELETE_TX = 15
    DELETE = 16
    PREPARE = 17
    COMMIT = 18
    ROLLBACK = 19


# The same record types as plain ints, the one set every back-end compares against per record
# (a load, an append, a replay): an int compares faster than an IntEnum member. Defined from
# RecordType, so the two cannot disagree; import these rather than declaring aliases.
EVENT: Final[int] = RecordType.EVENT.value
ADD: Final[int] = RecordType.ADD.value
UPDATE: Final[int] = RecordType.UPDATE.value
ADD_TX: Final[int] = RecordType.ADD_TX.value
UPDATE_TX: Final[int] = RecordType.UPDATE_TX.value
DELETE_TX: Final[int] = RecordType.DELETE_TX.value
DELETE: Final[int] = RecordType.DELETE.value
PREPARE: Final[int] = RecordType.PREPARE.value
COMMIT: Final[int] = RecordType.COMMIT.value
ROLLBACK: Final[int] = RecordType.ROLLBACK.value


class RecordInfo(NamedTuple):
    """One committed entry of a load: an add, or one later update of the same id."""

    id: int
    user_record_type: int
    data: bytes
    is_update: bool


@dataclass(frozen=True, slots=True)
class PreparedTransaction:
    """A transaction that was prepared (XA) and neither committed nor rolled back."""

    tx_id: int
    xid: bytes
    records: list[RecordInfo]
    deleted_ids: list[int]


@dataclass(frozen=True, slots=True)
class LoadResult:
    """What a load hands back: committed records, prepared and failed transactions."""

    records: list[RecordInfo]
    prepared: list[PreparedTransaction] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class JournalStats:
    """Counts a user or a test can read.

    ``files`` is the number of journal files (file store) or rows (database store);
    ``bytes_live`` is what the live records occupy and ``bytes_total`` what the store occupies.
    ``extra`` carries back-end specific figures (free files, dead rows, open transactions).
    """

    records_live: int
    files: int
    bytes_live: int
    bytes_total: int
    extra: dict[str, int] = field(default_factory=dict)


class Journal(abc.ABC):
    """An id-keyed, append-only record store with transactions; see the module docstring."""

    @abc.abstractmethod
    def load(self) -> LoadResult:
        """Replay the journal; returns the committed records and prepared/failed transactions.

        Raises JournalStateError on a second call, CorruptionError on damaged data.
        """

    @abc.abstractmethod
    def append_add(
        self, id: int, user_record_type: int, data: bytes, *, sync: bool = False
    ) -> None:
        """Append an add of ``id``. Raises RecordTooLargeError, JournalClosedError."""

    @abc.abstractmethod
    def append_update(
        self, id: int, user_record_type: int, data: bytes, *, sync: bool = False
    ) -> None:
        """Append an update of a live ``id``. Raises UnknownRecordError if it is not live."""

    @abc.abstractmethod
    def append_delete(self, id: int, *, sync: bool = False) -> None:
        """Delete a live ``id`` and all its entries. Raises UnknownRecordError if it is not live."""

    @abc.abstractmethod
    def append_add_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        """Add ``id`` inside transaction ``tx_id`` (opened by its first record)."""

    @abc.abstractmethod
    def append_update_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        """Update ``id`` inside transaction ``tx_id``; the id need not exist yet."""

    @abc.abstractmethod
    def append_delete_tx(self, tx_id: int, id: int) -> None:
        """Delete ``id`` when transaction ``tx_id`` commits."""

    def append_deletes_tx(self, tx_id: int, ids: Sequence[int]) -> None:
        """:meth:`append_delete_tx` of each of ``ids``, in order (a page's completion deletes
        every cursor ack of its queue: tens of thousands). A journal may write them in fewer
        steps; what it writes and the errors are the same. Raises as ``append_delete_tx``
        (records before the failing one may be appended)."""
        for id in ids:
            self.append_delete_tx(tx_id, id)

    @abc.abstractmethod
    def append_prepare(self, tx_id: int, xid: bytes, *, sync: bool = True) -> None:
        """Prepare ``tx_id`` with the XA ``xid``; it survives restarts until commit/rollback."""

    @abc.abstractmethod
    def append_commit(self, tx_id: int, *, sync: bool = True) -> None:
        """Commit ``tx_id``. Raises UnknownTransactionError if it is not open."""

    @abc.abstractmethod
    def append_rollback(self, tx_id: int, *, sync: bool = True) -> None:
        """Roll back ``tx_id``. Raises UnknownTransactionError if it is not open."""

    def append_event(self, id: int, user_record_type: int, data: bytes) -> None:  # noqa: B027
        """Write a retention event: kept in history files, never returned by a load.

        Back-ends without retention (the database store, zero persistence) accept and drop it.
        """

    def group(self, admit: bool = False) -> AbstractContextManager[None]:
        """A context in which this thread's appends are admitted as one operation (a send's
        message, refs and duplicate id; a commit and the deletes that follow it): a journal
        that refuses appends for a while (a database journal during an outage,
        :mod:`store.db.writer`) refuses the first of them or none, so an operation that
        raises "nothing written" wrote nothing. With ``admit`` the refusal comes at the entry
        instead, for an operation that writes elsewhere first (a page, the other journal).
        Groups nest (the inner one joins). The default admits each append as it comes.
        Raises what an append raises, at the entry only with ``admit``."""
        return contextlib.nullcontext()

    @abc.abstractmethod
    def flush(self) -> None:
        """Return once everything appended so far is durable."""

    @abc.abstractmethod
    def sync_future(self) -> concurrent.futures.Future[None]:
        """A future that completes when everything appended so far is durable."""

    @abc.abstractmethod
    def compact(self) -> None:
        """Reclaim dead space now."""

    @abc.abstractmethod
    def stats(self) -> JournalStats:
        """Counts of live records, files or rows, live and total bytes."""

    @abc.abstractmethod
    def close(self) -> None:
        """Make everything appended durable, then release the journal. Idempotent."""

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
