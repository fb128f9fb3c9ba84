"""Reading STOMP frames from a byte stream that arrives in pieces.

coilmq 1.1.0's ``FrameBuffer`` parses each received chunk with ``readline`` and breaks when a
chunk ends inside a header line (``ValueError`` from ``parse_headers``), when a header value
holds a colon, or on pipelined frames split across reads (issue 29: 55-83 receipts of 200
pipelined SENDs). :class:`FrameReader` replaces it, with the same ``append`` / iterate
interface the request handler uses, so a frame may be split at any byte and any number may
arrive in one read.

A frame (STOMP 1.0-1.2)::

    COMMAND EOL
    (name ":" value EOL)*
    EOL
    body (content-length octets, or up to the first NUL without it)
    NUL
    (EOL)*            heart-beats between frames, skipped

EOL is ``\\n`` or ``\\r\\n``. A header line is split at its first colon (a value may hold
more); a repeated header keeps its first value, as STOMP 1.2 says. Header names and values
are kept as sent, escapes included (``\\c``, ``\\n``): coilmq writes them back unescaped, so a
header goes back out byte for byte. The body is bytes.

Limits, each a :class:`FrameError` (the handler answers with an ERROR frame and drops the
connection, the rest of the broker carries on): a header block over ``max_header_size``, a
body over ``max_frame_size`` (declared by content-length or found while waiting for its NUL),
a content-length that is not a non-negative integer, a body with content-length whose next
octet is not NUL, a command or header that is not UTF-8, a header line without a colon, a NUL
before the end of the headers (``garbage\0``: STOMP 1.2 says the server answers with ERROR and
closes the connection).

Thread-safety: none; one reader belongs to one connection's thread.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from coilmq.exception import ProtocolError  # type: ignore[import-untyped]
from coilmq.util.frames import Frame  # type: ignore[import-untyped]

__all__ = ["DEFAULT_MAX_FRAME_SIZE", "DEFAULT_MAX_HEADER_SIZE", "FrameError", "FrameReader"]

#: The largest body a frame may carry by default (bytes); the broker's ``--max-frame-size``.
DEFAULT_MAX_FRAME_SIZE: Final = 64 * 1024 * 1024
#: The largest command plus headers block by default (bytes).
DEFAULT_MAX_HEADER_SIZE: Final = 64 * 1024

_END_OF_HEADERS = re.compile(rb"\r?\n\r?\n")
_EOLS = b"\r\n"


class FrameError(ProtocolError):  # type: ignore[misc]
    """Raised when the bytes a client sent are not a STOMP frame this broker accepts."""


class FrameReader:
    """Collects received bytes and yields each complete frame once (see module docstring).

    ``append(data)`` adds bytes; iterating yields the complete frames buffered so far, in
    order, and stops at the first incomplete one (its bytes are kept for the next append).
    Iteration raises :class:`FrameError` for bytes that cannot become a frame; the reader is
    of no further use after that.
    """

    def __init__(
        self,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_header_size: int = DEFAULT_MAX_HEADER_SIZE,
    ) -> None:
        self.max_frame_size = max_frame_size
        self.max_header_size = max_header_size
        self._buffer = bytearray()
        self._pos = 0  # bytes before it are consumed; dropped once per iteration

    def append(self, data: bytes) -> None:
        """Add received bytes. Returns None; raises nothing."""
        self._buffer += data

    def buffered(self) -> int:
        """Bytes received and not yet returned as a frame."""
        return len(self._buffer) - self._pos

    def __iter__(self) -> Iterator[Frame]:
        try:
            while True:
                frame = self._next()
                if frame is None:
                    return
                yield frame
        finally:
            del self._buffer[: self._pos]
            self._pos = 0

    def _next(self) -> Frame | None:
        buf, pos = self._buffer, self._pos
        while pos < len(buf) and buf[pos] in _EOLS:  # heart-beats
            pos += 1
        self._pos = pos
        if pos == len(buf):
            return None
        end = _END_OF_HEADERS.search(buf, pos)
        nul = buf.find(0, pos, len(buf) if end is None else end.start())
        if nul >= 0:
            raise FrameError(
                f"not a STOMP frame: a NUL after {nul - pos} bytes, before the end of its headers"
            )
        if end is None:
            if len(buf) - pos > self.max_header_size:
                raise FrameError(f"frame headers longer than {self.max_header_size} bytes")
            return None
        if end.start() - pos > self.max_header_size:
            raise FrameError(f"frame headers longer than {self.max_header_size} bytes")
        command, headers = _parse_head(bytes(buf[pos : end.start()]))
        start = end.end()
        length = _content_length(headers)
        if length is not None:
            if length > self.max_frame_size:
                raise FrameError(
                    f"frame body of {length} bytes is over the limit of {self.max_frame_size}"
                )
            if len(buf) < start + length + 1:
                return None
            if buf[start + length] != 0:
                raise FrameError(f"the body of {length} bytes is not followed by NUL")
            stop = start + length
        else:
            nul = buf.find(0, start)
            if nul < 0:
                if len(buf) - start > self.max_frame_size:
                    raise FrameError(
                        f"frame body over the limit of {self.max_frame_size} bytes without NUL"
                    )
                return None
            if nul - start > self.max_frame_size:
                raise FrameError(f"frame body over the limit of {self.max_frame_size} bytes")
            stop = nul
        self._pos = stop + 1
        return Frame(command, headers=headers, body=bytes(buf[start:stop]))


def _parse_head(head: bytes) -> tuple[str, dict[str, str]]:
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FrameError(f"frame command or headers are not UTF-8 ({exc.reason})") from exc
    lines = text.split("\n")
    command = lines[0].removesuffix("\r")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.removesuffix("\r").partition(":")
        if not colon:
            raise FrameError(f"header line without a colon: {line[:80]!r}")
        headers.setdefault(name, value)
    return command, headers


def _content_length(headers: dict[str, str]) -> int | None:
    raw = headers.get("content-length")
    if raw is None:
        return None
    text = raw.strip()
    if not text.isdigit() or not text.isascii():
        raise FrameError(f"content-length is not a non-negative integer: {raw[:40]!r}")
    return int(text)
