"""The one exception tree of ``store``.

Every error the library raises on purpose derives from :class:`StoreError`::

    StoreError
    ├── ConfigError                 bad configuration (names key, value, what is allowed)
    ├── JournalStateError           load twice, append before load
    │   └── UnknownTransactionError commit/rollback of a transaction that is not open
    ├── JournalClosedError          append after close
    ├── UnknownRecordError          non-tx update/delete of an id that is not live
    ├── RecordTooLargeError         record does not fit a journal file / blob
    ├── CorruptionError             damaged data: .path, .offset, .reason, .hint
    │   ├── TornTailError           an incomplete last write (repairable)
    │   ├── ChecksumError           a checksum failure before the tail (never auto-repaired)
    │   └── LostDataError           a journal file deleted or truncated: lsns known lost
    ├── StoreIOError                the operating system refused an I/O call
    ├── StoreUnavailableError       the database cannot be reached or went away
    ├── StoreLockedError            another process holds this store
    ├── LockLostError               this process no longer holds the live lock
    ├── SchemaError                 database schema behind, partial or not creatable (names the fix)
    ├── DuplicateIdError            a send's duplicate id is in its address's cache (nothing stored)
    ├── AddressFullError            an address with the FAIL policy is full (nothing stored)
    ├── UnknownQueueError           a storage-manager call names a queue that does not exist
    ├── UnknownMessageError         ack/cancel of a message not delivered on that queue
    └── ReportError                 a Spark report cannot run (no Java, PySpark or JDBC driver)

Database errors are wrapped with the statement that failed (parameters redacted) and the
original exception chained (``raise ... from exc``).
"""

from __future__ import annotations

__all__ = [
    "ChecksumError",
    "AddressFullError",
    "ConfigError",
    "CorruptionError",
    "DuplicateIdError",
    "JournalClosedError",
    "JournalStateError",
    "LockLostError",
    "LostDataError",
    "RecordTooLargeError",
    "ReportError",
    "SchemaError",
    "StoreError",
    "StoreIOError",
    "StoreLockedError",
    "StoreUnavailableError",
    "TornTailError",
    "UnknownMessageError",
    "UnknownQueueError",
    "UnknownRecordError",
    "UnknownTransactionError",
]


class StoreError(Exception):
    """Raised for every failure the store reports on purpose; the root of the tree."""

    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint


class ConfigError(StoreError):
    """Raised when a configuration key has a value that is not allowed."""

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        value: object = None,
        allowed: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.key = key
        self.value = value
        self.allowed = allowed


class JournalStateError(StoreError):
    """Raised when a journal call comes in the wrong state (load twice, append before load)."""


class UnknownTransactionError(JournalStateError):
    """Raised when a commit or rollback names a transaction that is not open."""


class JournalClosedError(StoreError):
    """Raised when a journal is used after it was closed or failed."""


class UnknownRecordError(StoreError):
    """Raised when a non-transactional update or delete names an id that is not live."""


class RecordTooLargeError(StoreError):
    """Raised when a record is larger than a journal file or the largest allowed blob."""


class CorruptionError(StoreError):
    """Raised when stored data is damaged; ``path`` and ``offset`` say where."""

    def __init__(self, path: str, offset: int, reason: str, *, hint: str | None = None) -> None:
        super().__init__(f"{path} at offset {offset}: {reason}", hint=hint)
        self.path = path
        self.offset = offset
        self.reason = reason

    def __reduce__(self) -> tuple[object, ...]:
        # copy and pickle rebuild it from its own arguments (the writer hands each waiter of
        # a failed batch a copy), not from the message alone
        return (type(self), (self.path, self.offset, self.reason), self.__dict__)


class TornTailError(CorruptionError):
    """Raised when a file ends in an incomplete write that ``repair`` may truncate."""


class ChecksumError(CorruptionError):
    """Raised when a record before the tail fails its checksum; never repaired automatically."""


class LostDataError(CorruptionError):
    """Raised when a journal file is missing or shorter than written, so records are gone."""


class StoreIOError(StoreError):
    """Raised when the operating system refuses a read, write, sync, rename or allocation."""

    def __init__(self, message: str, *, path: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.path = path


class StoreUnavailableError(StoreError):
    """Raised when the database cannot be reached, timed out, or dropped the connection.

    ``in_doubt`` is False when the failed operation applied nothing. True only when the
    database stayed away longer than ``jdbc-network-timeout`` while the operation waited for
    its commit: the operation is still queued and is applied once the database is back (a
    retried send with the same duplicate id is then refused as a duplicate, never stored
    twice; docs/db.md "Outages")."""

    in_doubt: bool = False

    def __init__(self, message: str, *, hint: str | None = None, in_doubt: bool = False) -> None:
        super().__init__(message, hint=hint)
        self.in_doubt = in_doubt


class StoreLockedError(StoreError):
    """Raised when another process holds this store open for writing."""

    def __init__(self, message: str, *, holder: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.holder = holder


class LockLostError(StoreError):
    """Raised when this process no longer holds the live lock and must stop writing."""


class SchemaError(StoreError):
    """Raised when the database schema is older than this version of store, incomplete, or
    missing and not creatable by the configured user."""


class DuplicateIdError(StoreError):
    """Raised when a send's duplicate id is already in its address's duplicate-id cache."""


class AddressFullError(StoreError):
    """Raised when a send to an address whose full policy is FAIL finds it full."""


class UnknownQueueError(StoreError):
    """Raised when a storage-manager call names a queue that does not exist."""


class UnknownMessageError(StoreError):
    """Raised when an ack or cancel names a message that is not delivered on that queue."""


class ReportError(StoreError):
    """Raised when a Spark report cannot run: Java, PySpark or the JDBC driver is missing."""
