"""Message bodies: inline in the message record, or streamed to the large-message store
(docs/large.md, docs/messaging.md) when larger than ``min-large-message-size``.

A body given as bytes goes to the large-message store when ``len(body)`` is over the limit,
written in slices of :data:`SLICE` bytes; a body given as a binary stream is read up to the
limit plus one byte: if it ends by then it is stored inline, otherwise what was read and the
rest of the stream are streamed to the large-message store, :data:`SLICE` bytes at a time,
so memory stays bounded whatever the body's size. The journal then holds an
ADD_LARGE_MESSAGE (30) record with the headers and the body's size.

A large message whose body is gone (a file deleted from outside, rows deleted by hand) is
:class:`~store.errors.LostDataError` naming where the body was (:func:`lost_body`): at the
load for every message of the message journal (each body checked to exist with its size,
not read; :mod:`store.messaging.loader`), and at ``open_body()`` (:func:`body_opener`) for
every message, a paged one included (the load does not read pages to find them: a deep
queue's restart would read every page).

Thread-safety: pure functions over the given store (which is thread-safe).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import BinaryIO, Final

from store.errors import LostDataError, UnknownRecordError
from store.large.api import LargeMessageStore

__all__ = ["BODY_HINT", "SLICE", "body_opener", "lost_body", "read_limited", "store_body"]

#: Bytes read from a stream or written to the store at a time.
SLICE: Final = 1 << 20


def read_limited(stream: BinaryIO, limit: int) -> bytes:
    """Read from ``stream`` until it ends or ``limit`` bytes were read; returns them. Raises
    ValueError when the stream returns text, and what the stream raises."""
    parts: list[bytes] = []
    total = 0
    while total < limit:
        chunk = stream.read(min(SLICE, limit - total))
        if not chunk:
            break
        if not isinstance(chunk, bytes | bytearray):
            raise ValueError("a message body stream must be binary (read() returned text)")
        parts.append(bytes(chunk))
        total += len(chunk)
    return b"".join(parts)


def store_body(
    store: LargeMessageStore, message_id: int, body: bytes | BinaryIO, limit: int
) -> tuple[bytes | None, int]:
    """Keep ``body`` inline or stream it into ``store`` as ``message_id``'s body.

    Returns ``(bytes, size)`` for an inline body (at most ``limit`` bytes), ``(None, size)``
    for one now complete and durable in the store. Raises ValueError for a text stream, and
    what the stream and the store raise (nothing of the body is left behind then).
    """
    if isinstance(body, bytes):
        if len(body) <= limit:
            return body, len(body)
        view = memoryview(body)
        with store.create(message_id) as writer:
            for start in range(0, len(body), SLICE):
                writer.write(view[start : start + SLICE])
        return None, len(body)
    head = read_limited(body, limit + 1)
    if len(head) <= limit:
        return head, len(head)
    size = len(head)
    with store.create(message_id) as writer:
        writer.write(head)
        del head
        while True:
            chunk = body.read(SLICE)
            if not chunk:
                break
            if not isinstance(chunk, bytes | bytearray):
                raise ValueError("a message body stream must be binary (read() returned text)")
            writer.write(chunk)
            size += len(chunk)
    return None, size


#: What a lost or damaged body's error advises (docs/cli.md, ``store data repair``).
BODY_HINT: Final = (
    "run `store data verify` to list the damage; `store data repair --salvage` removes the"
    " messages whose bodies are lost and keeps every other message"
)


def lost_body(store: LargeMessageStore, message_id: int, detail: str) -> LostDataError:
    """The error of a large message whose body is gone: ``path`` where it was (the store's
    :meth:`~store.large.api.LargeMessageStore.path`), ``offset`` 0. Raises nothing."""
    reason = f"the body of large message {message_id} is gone ({detail})"
    return LostDataError(store.path(message_id), 0, reason, hint=BODY_HINT)


def body_opener(store: LargeMessageStore, message_id: int, size: int) -> Callable[[], BinaryIO]:
    """What a large message's ``open_body()`` calls: the body of ``message_id`` from
    ``store``; one that is gone raises :func:`lost_body`'s LostDataError instead of the
    store's UnknownRecordError. Raises nothing itself."""

    def open_large() -> BinaryIO:
        try:
            return store.open(message_id)
        except UnknownRecordError:
            raise lost_body(store, message_id, f"its record says {size} bytes") from None

    return open_large
