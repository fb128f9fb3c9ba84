"""The optional compiled part of the package (the extension module ``store._speedups``, one C
file per format, ``store/_speedups_*.c``, built by ``setup.py`` where a compiler is present),
and the CRC-32 every checksum of the store goes through.

- :data:`SPEEDUPS` is the compiled module, or None where it was not built or
  ``STORE_NO_SPEEDUPS=1`` asks for pure Python. The file journal's record scan and encode use
  it (``store.file.reader``, ``store.file.journal``), and the messaging load its peek at
  message records and its replay loop (``store.messaging.message_records``,
  ``store.messaging.recovery``), and the decode of page records and of message bodies
  without properties (``PagedMessage.decode``, ``decode_message``: every paged message a
  receive reads back, every message a load kept encoded); their pure-Python code is the
  reference and the fallback.
- :func:`crc32` is ``zlib.crc32``'s function, bit for bit (same polynomial, same arguments,
  same answers): the compiled one, which folds with PCLMULQDQ on x86-64 CPUs that have it
  (about 14 GB/s against zlib's 4 here; 98 ns against 373 ns for 1 KiB), or ``zlib.crc32``
  itself. Journal records, large-message chunks and page records are checksummed with it.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from typing import Any

__all__ = ["SPEEDUPS", "crc32"]


def _load() -> Any:
    if os.environ.get("STORE_NO_SPEEDUPS") == "1":
        return None
    try:
        from store import _speedups  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _speedups


SPEEDUPS: Any = _load()

#: ``zlib.crc32(data, value=0)``, compiled and faster where :data:`SPEEDUPS` is built.
crc32: Callable[..., int] = SPEEDUPS.crc32 if SPEEDUPS is not None else zlib.crc32
