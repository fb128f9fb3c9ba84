"""Message bodies: inline in the message record, or streamed to the large-message store
(docs/large.md, docs/messaging.md) when larger than ``min-large-message-size``.

A body given as bytes goes to the large-message store when ``len(body)`` is over the limit,
written in slices of :data:`SLICE` bytes; a body given as a binary stream is read up to the
limit plus one byte: if it ends by then it is stored inline, otherwise what was read and the
rest of the stream are streamed to the large-message store, :data:`SLICE` bytes at a time,
so memory stays bounded whatever the body's size. The journal then holds an
ADD_LARGE_MESSAGE (30) record with the headers and the body's size.

Thread-safety: pure functions over the given store (which is thread-safe).
"""

from __future__ import annotations

from typing import BinaryIO, Final

from store.large.api import LargeMessageStore

__all__ = ["SLICE", "read_limited", "store_body"]

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
