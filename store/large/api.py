"""The large-message contract every back-end keeps (docs/large.md).

Bodies too big for a journal record live outside the journals: one file per body in
``large-messages-directory`` (file store), rows of ``large-message-table-name`` (database
store), memory (zero persistence, where nothing survives the process).

Rules every implementation follows (the contract tests in ``tests/large/`` check them):

1. ``create(id)`` returns a :class:`LargeMessageWriter`; leaving its ``with`` block normally
   completes the body, which is durable when the block exits. Leaving it by an exception
   aborts: nothing of the body is left behind. ``create`` of an id that already has a body
   (complete, or being written) raises :class:`~store.errors.StoreError`.
2. A body whose writer never completed is never listed by ``ids()`` and never readable; one
   whose process died is removed when the store is next opened.
3. ``open``, ``size`` and ``delete`` of an id without a complete body raise
   :class:`~store.errors.UnknownRecordError`. ``delete`` leaves nothing behind (no file, no
   row, no large object), and is durable when it returns: a crash right after it never
   brings the body back (the file store syncs the directory, the database commits). Chosen
   over "the next load sweeps it": the sweep needs a messaging load, a store used without
   one (the contract tests, ``store data`` tools) would keep the body, and one directory
   sync per deleted body is small beside the body's own write and sync.
4. Memory is bounded by the chunk size whatever the body size: writers never hold a body,
   readers hold one chunk.
5. Every chunk is checksummed: a damaged chunk raises :class:`~store.errors.CorruptionError`
   naming the body (``path``: its file, or ``<table>/<id>.msg`` on a database) and the body
   offset of the damaged chunk; wrong bytes are never handed to a reader.
6. After ``close()`` every call raises :class:`~store.errors.JournalClosedError`.

Thread-safety: any number of bodies may be written and read at once from different threads;
one writer per id. A writer or a reader object belongs to one thread at a time.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from types import TracebackType
from typing import BinaryIO

from store.errors import UnknownRecordError

__all__ = ["LargeMessageStore", "LargeMessageWriter", "check_body"]


class LargeMessageWriter(abc.ABC):
    """Streams one body in; a context manager (see the module docstring, rule 1)."""

    #: The id of the message whose body this is (signed 64-bit).
    message_id: int

    @abc.abstractmethod
    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Append ``data`` to the body; returns ``len(data)``. Memory stays bounded by one chunk.

        Raises StoreError after ``complete``/``abort``, StoreIOError or StoreUnavailableError
        when the storage fails (the body is then aborted when the block exits).
        """

    @property
    @abc.abstractmethod
    def size(self) -> int:
        """Bytes written so far."""

    @abc.abstractmethod
    def complete(self) -> None:
        """Make the body durable and visible (``ids()``, ``open``). Called by a normal block
        exit; idempotent. Raises StoreIOError / StoreUnavailableError when it cannot."""

    @abc.abstractmethod
    def abort(self) -> None:
        """Remove everything written so far. Called by an exceptional block exit; idempotent,
        and a no-op after ``complete``. Raises nothing it can avoid raising."""

    def __enter__(self) -> LargeMessageWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            try:
                self.complete()
            except BaseException:
                self.abort()
                raise
        else:
            self.abort()


class LargeMessageStore(abc.ABC):
    """Bodies of large messages, by message id (see the module docstring)."""

    @abc.abstractmethod
    def create(self, message_id: int) -> LargeMessageWriter:
        """A writer for a new body. Raises StoreError when ``message_id`` already has a body,
        ValueError when it is not a signed 64-bit int."""

    @abc.abstractmethod
    def open(self, message_id: int) -> BinaryIO:
        """The complete body as a seekable binary file object (``read(n)``, ``readinto(b)``,
        ``seek()``, ``tell()``); close it (or use ``with``) when done. Raises
        UnknownRecordError; reads raise CorruptionError for a damaged chunk."""

    @abc.abstractmethod
    def size(self, message_id: int) -> int:
        """The body's size in bytes. Raises UnknownRecordError."""

    @abc.abstractmethod
    def delete(self, message_id: int) -> None:
        """Remove the body and every byte of storage it used. Raises UnknownRecordError."""

    @abc.abstractmethod
    def ids(self) -> list[int]:
        """Ids of complete bodies, ascending."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the store; idempotent. Writers still open are aborted."""

    def path(self, message_id: int) -> str:
        """How errors name the body of ``message_id``: its file, ``<table>/<id>.msg`` on a
        database. Raises nothing."""
        return f"large message {message_id}"

    def sizes(self, message_ids: Iterable[int]) -> dict[int, int]:
        """The body sizes of those of ``message_ids`` that have a complete body, by id (the
        messaging load checks every queued large message's body with it: a header read per
        body, one query on a database). Raises CorruptionError for a damaged header, and what
        the storage raises."""
        found: dict[int, int] = {}
        for message_id in message_ids:
            try:
                found[message_id] = self.size(message_id)
            except UnknownRecordError:
                continue
        return found


def check_body(store: LargeMessageStore, message_id: int) -> int:
    """Reads the body of ``message_id`` to its end through the store's own reader, so every
    chunk's checksum is checked; returns its size. The offline tools (``store data print``
    and ``verify``) call it for every body they list. Memory: one chunk. Raises
    UnknownRecordError, CorruptionError naming the body and the offset of the first damaged
    chunk, and what the storage raises."""
    with store.open(message_id) as body:
        while body.read(1 << 20):
            pass
        return body.tell()
