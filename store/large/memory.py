"""Large messages in memory, for zero persistence (``persistence-enabled = false``).

Nothing is written anywhere and nothing survives the process: bodies live in this object, so
unlike the persistent back-ends a body *is* held in memory (a broker without persistence keeps
its messages in memory anyway). Every other rule of :mod:`store.large.api` holds, so code runs
against it as it will against a real store.

Thread-safety: every method may be called from any thread (one lock guards the bodies).
"""

from __future__ import annotations

import io
import threading
from typing import BinaryIO

from store.errors import JournalClosedError, StoreError, UnknownRecordError
from store.journal.api import MAX_ID, MIN_ID
from store.large.api import LargeMessageStore, LargeMessageWriter

__all__ = ["MemoryLargeMessages", "check_message_id"]


def check_message_id(message_id: int) -> int:
    """Returns ``message_id`` when it is a signed 64-bit int. Raises ValueError otherwise."""
    if isinstance(message_id, bool) or not isinstance(message_id, int):
        raise ValueError(f"message id must be an int, not {message_id!r}")
    if not MIN_ID <= message_id <= MAX_ID:
        raise ValueError(f"message id {message_id} is outside the signed 64-bit range")
    return message_id


class _MemoryWriter(LargeMessageWriter):
    def __init__(self, owner: MemoryLargeMessages, message_id: int) -> None:
        self.message_id = message_id
        self._owner = owner
        self._buffer = bytearray()
        self._done = False

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self._done:
            raise StoreError(f"large message {self.message_id}: writer already finished")
        self._owner.check_open()
        self._buffer += data
        return len(memoryview(data).cast("B"))

    @property
    def size(self) -> int:
        return len(self._buffer)

    def complete(self) -> None:
        if self._done:
            return
        self._owner.finish(self.message_id, bytes(self._buffer))
        self._done = True

    def abort(self) -> None:
        if self._done:
            return
        self._done = True
        self._buffer = bytearray()
        self._owner.finish(self.message_id, None)


class MemoryLargeMessages(LargeMessageStore):
    """Bodies kept in a dict (see module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bodies: dict[int, bytes] = {}
        self._writing: set[int] = set()
        self._closed = False

    def check_open(self) -> None:
        """Raises JournalClosedError after close; returns None otherwise."""
        if self._closed:
            raise JournalClosedError("the large-message store is closed")

    def create(self, message_id: int) -> LargeMessageWriter:
        check_message_id(message_id)
        with self._lock:
            self.check_open()
            if message_id in self._bodies or message_id in self._writing:
                raise StoreError(f"large message {message_id} already has a body")
            self._writing.add(message_id)
        return _MemoryWriter(self, message_id)

    def finish(self, message_id: int, body: bytes | None) -> None:
        """Publish ``body`` (complete) or drop the id (``None``: abort). Raises
        JournalClosedError when completing after close."""
        with self._lock:
            self._writing.discard(message_id)
            if body is not None:
                self.check_open()
                self._bodies[message_id] = body

    def _body(self, message_id: int) -> bytes:
        with self._lock:
            self.check_open()
            body = self._bodies.get(message_id)
        if body is None:
            raise UnknownRecordError(f"large message {message_id} has no complete body")
        return body

    def open(self, message_id: int) -> BinaryIO:
        return io.BytesIO(self._body(message_id))

    def size(self, message_id: int) -> int:
        return len(self._body(message_id))

    def delete(self, message_id: int) -> None:
        with self._lock:
            self.check_open()
            if self._bodies.pop(message_id, None) is None:
                raise UnknownRecordError(f"large message {message_id} has no complete body")

    def ids(self) -> list[int]:
        with self._lock:
            self.check_open()
            return sorted(self._bodies)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._bodies.clear()
            self._writing.clear()
