"""Writes the golden page of format version 1 into ``tests/testdata/paging/``.

REGENERATE ONLY ON PURPOSE. The bytes of ``page-v1.page`` are the promise that a page written
by this version of :mod:`store.paging.format` stays readable; ``tests/paging/test_golden.py``
checks that today's encoder still produces exactly them and that they decode to
:data:`RECORDS`. If a change to the format makes that fail, the change alters the format: keep
the old reader and add a ``page-v2`` golden page beside this one instead of regenerating it.
Run it with ``python -m tests.paging.make_golden``.

The page holds records of a few sizes: empty, one byte, ASCII text, non-ASCII UTF-8, every
byte value, and bytes that look like the framing (``{`` and ``}``).
"""

from __future__ import annotations

import os
import sys

from store.paging.format import encode_record

GOLDEN_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "testdata", "paging")
PAGE_FILE = "page-v1.page"

#: The records of the golden page, in order (written out by hand, not computed).
RECORDS: tuple[bytes, ...] = (
    b"",
    b"\x00",
    b"hello, page",
    "ordres d'été — 日本語".encode(),
    bytes(range(256)),
    b"{}" * 8 + b"}{",
)


def build() -> bytes:
    """The golden page's bytes. Raises nothing."""
    return b"".join(encode_record(r) for r in RECORDS)


def write(directory: str = GOLDEN_DIR) -> str:
    """Write the golden page into ``directory``; returns its path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, PAGE_FILE)
    with open(path, "wb") as f:
        f.write(build())
    return path


if __name__ == "__main__":
    sys.stdout.write(write() + "\n")
