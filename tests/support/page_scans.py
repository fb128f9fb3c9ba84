"""What a page scan gives for some bytes, compiled or not, for the differential tests of
``store.paging.format`` (tests/paging/test_page_binding.py, tests/messaging/test_page_scan.py).

Thread-safety: none (it patches the module for the call).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from store.errors import CorruptionError
from store.paging import format as page_format

__all__ = ["scan_outcome"]


def scan_outcome(scan: Callable[..., Any], data: bytes, *, compiled: bool, **kwargs: Any) -> object:
    """``(records, end)`` of ``scan(data, path="p", **kwargs)``, or ``(path, offset, reason)``
    of the CorruptionError it raises; without ``compiled``, the Python loops alone."""
    with pytest.MonkeyPatch.context() as m:
        if not compiled:
            m.setattr(page_format, "_COMPILED_SCAN", None)
            m.setattr(page_format, "_COMPILED_BOUNDS", None)
        try:
            records, end = scan(data, path="p", **kwargs)
            return list(records), end
        except CorruptionError as exc:
            return (exc.path, exc.offset, exc.reason)
