"""The primitive field encodings every messaging record body is built from.

All integers are big-endian and signed unless the table says ``u``. Variable-length fields:

==========  ===============================================================================
field       bytes
==========  ===============================================================================
``str``     ``u32`` byte length, then that many bytes of UTF-8
``str?``    ``i32`` byte length, ``-1`` for None (then nothing), else UTF-8 as ``str``
``bytes``   ``u32`` length, then the bytes
==========  ===============================================================================

:class:`Reader` reads them back and raises ``ValueError`` (naming the record) when the body
ends early, a length is negative or text is not UTF-8; :meth:`Reader.done` refuses trailing
bytes, so a body decodes only when its length is exactly right.

Thread-safety: a :class:`Writer` or :class:`Reader` belongs to one thread; the functions are
pure.
"""

from __future__ import annotations

import struct
from typing import Final

__all__ = ["VERSION", "Reader", "Writer"]

#: The body version every messaging record of this package starts with.
VERSION: Final = 1

_U8 = struct.Struct(">B")
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_F32 = struct.Struct(">f")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")


class Writer:
    """Builds one record body; the version byte (``version``, :data:`VERSION` unless a record
    has a later layout of its own) is written first."""

    def __init__(self, what: str, version: int = VERSION) -> None:
        self._what = what
        self._parts: list[bytes] = [_U8.pack(version)]

    def _pack(self, layout: struct.Struct, value: object, field: str) -> None:
        try:
            self._parts.append(layout.pack(value))
        except struct.error as exc:
            raise ValueError(f"{self._what}: {field} {value!r} does not fit: {exc}") from exc

    def u8(self, value: int, field: str) -> Writer:
        """Append an unsigned byte; returns self. Raises ValueError when it does not fit."""
        self._pack(_U8, value, field)
        return self

    def i8(self, value: int, field: str) -> Writer:
        """Append a signed byte; returns self. Raises ValueError when it does not fit."""
        self._pack(_I8, value, field)
        return self

    def i16(self, value: int, field: str) -> Writer:
        """Append a signed 16-bit int; returns self. Raises ValueError when it does not fit."""
        self._pack(_I16, value, field)
        return self

    def i32(self, value: int, field: str) -> Writer:
        """Append a signed 32-bit int; returns self. Raises ValueError when it does not fit."""
        self._pack(_I32, value, field)
        return self

    def i64(self, value: int, field: str) -> Writer:
        """Append a signed 64-bit int; returns self. Raises ValueError when it does not fit."""
        self._pack(_I64, value, field)
        return self

    def f64(self, value: float, field: str) -> Writer:
        """Append an IEEE 754 double; returns self. Raises nothing."""
        self._parts.append(_F64.pack(value))
        return self

    def f32(self, value: float, field: str) -> Writer:
        """Append an IEEE 754 single (``value`` rounded to it); returns self. Raises
        ValueError when it is beyond the single range."""
        try:
            self._parts.append(_F32.pack(value))
        except OverflowError as exc:
            raise ValueError(f"{self._what}: {field} {value!r} does not fit: {exc}") from exc
        return self

    def raw(self, value: bytes, field: str) -> Writer:
        """Append ``u32`` length + bytes; returns self. Raises ValueError past 4 GiB."""
        self._pack(_U32, len(value), field)
        self._parts.append(bytes(value))
        return self

    def text(self, value: str, field: str) -> Writer:
        """Append ``u32`` length + UTF-8; returns self. Raises ValueError for an unencodable
        string (lone surrogates)."""
        try:
            encoded = value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"{self._what}: {field} is not encodable as UTF-8: {exc}") from exc
        return self.raw(encoded, field)

    def optional_text(self, value: str | None, field: str) -> Writer:
        """Append ``i32`` length (-1: None) + UTF-8; returns self. Raises ValueError as text."""
        if value is None:
            return self.i32(-1, field)
        try:
            encoded = value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"{self._what}: {field} is not encodable as UTF-8: {exc}") from exc
        self.i32(len(encoded), field)
        self._parts.append(encoded)
        return self

    def body(self) -> bytes:
        """The finished body. Raises nothing."""
        return b"".join(self._parts)


class Reader:
    """Reads one record body; checks the version byte on construction (one of ``versions``,
    :data:`VERSION` alone unless a record reads later layouts of its own; :attr:`version` is
    the one read).

    Raises ValueError (naming ``what``) for an empty body or a version not in ``versions``.
    """

    def __init__(self, body: bytes, what: str, versions: tuple[int, ...] = (VERSION,)) -> None:
        self._body = memoryview(body)
        self._what = what
        self._pos = 0
        if not body:
            raise ValueError(f"{what}: empty body")
        version = self.u8("version")
        if version not in versions:
            expected = " or ".join(map(str, versions))
            raise ValueError(f"{what}: body has version {version}, not {expected}")
        #: The body's version byte.
        self.version = version

    def _take(self, n: int, field: str) -> memoryview:
        end = self._pos + n
        if n < 0 or end > len(self._body):
            raise ValueError(
                f"{self._what}: body ends in {field} (needs {n} bytes at offset {self._pos},"
                f" body is {len(self._body)} bytes)"
            )
        view = self._body[self._pos : end]
        self._pos = end
        return view

    def _unpack(self, layout: struct.Struct, field: str) -> int:
        value: int = layout.unpack(self._take(layout.size, field))[0]
        return value

    def u8(self, field: str) -> int:
        """Read an unsigned byte. Raises ValueError when the body ends."""
        return self._unpack(_U8, field)

    def i8(self, field: str) -> int:
        """Read a signed byte. Raises ValueError when the body ends."""
        return self._unpack(_I8, field)

    def i16(self, field: str) -> int:
        """Read a signed 16-bit int. Raises ValueError when the body ends."""
        return self._unpack(_I16, field)

    def i32(self, field: str) -> int:
        """Read a signed 32-bit int. Raises ValueError when the body ends."""
        return self._unpack(_I32, field)

    def i64(self, field: str) -> int:
        """Read a signed 64-bit int. Raises ValueError when the body ends."""
        return self._unpack(_I64, field)

    def f64(self, field: str) -> float:
        """Read a double. Raises ValueError when the body ends."""
        value: float = _F64.unpack(self._take(_F64.size, field))[0]
        return value

    def f32(self, field: str) -> float:
        """Read an IEEE 754 single, as a float. Raises ValueError when the body ends."""
        value: float = _F32.unpack(self._take(_F32.size, field))[0]
        return value

    def raw(self, field: str) -> bytes:
        """Read ``u32`` length + bytes. Raises ValueError when the body ends."""
        return bytes(self._take(self._unpack(_U32, field), field))

    def _decode(self, data: bytes, field: str) -> str:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{self._what}: {field} is not UTF-8: {exc}") from exc

    def text(self, field: str) -> str:
        """Read ``u32`` length + UTF-8. Raises ValueError when the body ends or is not UTF-8."""
        return self._decode(self.raw(field), field)

    def optional_text(self, field: str) -> str | None:
        """Read ``i32`` length (-1: None) + UTF-8. Raises ValueError as text, and for a
        negative length other than -1."""
        length = self.i32(field)
        if length == -1:
            return None
        if length < 0:
            raise ValueError(f"{self._what}: {field} has length {length}")
        return self._decode(bytes(self._take(length, field)), field)

    def done(self) -> None:
        """Check that the whole body was read. Raises ValueError for trailing bytes."""
        extra = len(self._body) - self._pos
        if extra:
            raise ValueError(f"{self._what}: {extra} unexpected bytes after offset {self._pos}")
