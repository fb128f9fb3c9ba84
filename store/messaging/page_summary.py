"""The page summary: what a clean close knew of each page, so the next open need not read it.

A load rebuilds every address's counters from its pages (:meth:`Pager.load`), and what it
needs of a page is small: how many records it holds, its runs (:mod:`store.messaging.page_scan`)
and the ids of its large messages. Reading every page to get them is what a restart with
millions of paged messages costs (a database sends every page's rows over the wire). So at a
clean close (:meth:`StorageManager.close`) the pager writes, for each address, a summary of
every page it knows whole, into the address's page store (``summary.bin``: a file in its
folder, a row in its table); the next load reads the pages the summary does not cover, and
none of the others.

**When a summary is trusted.** Only when it is exactly what the last clean close wrote:

- an open for writing deletes it (durably) before anything is written, so after a crash, a
  ``kill -9`` or a lost lock there is no summary and the load reads every page, as before;
- it ends in a CRC-32 of all its bytes and must decode exactly (a truncated or damaged summary
  is ignored, with a warning, and every page of the address is read);
- every page it lists must still exist at exactly the length it lists (pages are only ever
  appended to, cut back by a repair, or deleted), and it must list every page present except
  ones it says nothing of; a page listed at another length, or listed and gone, means the
  summary is stale (the pages were changed after it was written, say restored from a backup
  or repaired): it is ignored as a whole, with a warning.

What a summary cannot see is a page damaged or changed in place without a change of length
after the clean close: that page is not read at open. Its damage is found when a queue
reaches it (``depage`` raises :class:`~store.errors.CorruptionError` naming the page and
offset), as Artemis finds it (its page counters are not rebuilt from the pages); and the
first read of a page taken from the summary (by a queue, a browse, or the deletion of a page
the summary says no queue needs) checks that it holds what the summary said: as many
records, routed to the same queues in the same transactions, the same large messages
(``PagerCursors.check_summary``). A difference is a CorruptionError naming the page, before
anything is delivered from it or it is deleted; the summary was deleted at open, so the next
load reads every page. ``store data verify`` reads every page.

Format (little-endian; the blob is opaque to the page store)::

    b"STPGSUM\\x01"                        magic and version
    u32 pages
    per page: u64 page, u64 length, u32 records, u32 runs, u32 large
              runs:  u32 start, u32 count, i64 tx_id, u16 queues, i64 queue id * queues
              large: i64 message id * large
    u32 CRC-32 of every byte before it

Thread-safety: pure functions and immutable values.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from store.messaging.page_scan import PagedRun
from store.speedups import crc32

__all__ = ["PageSummary", "decode_summary", "encode_summary"]

_MAGIC: Final = b"STPGSUM\x01"
_COUNT = struct.Struct("<I")
_PAGE = struct.Struct("<QQIII")
_RUN = struct.Struct("<IIqH")
_ID = struct.Struct("<q")


@dataclass(frozen=True)
class PageSummary:
    """One page as a clean close knew it: its ``length`` in bytes as stored, how many
    ``records`` it holds, their ``runs`` and the ids of its ``large`` messages (page order)."""

    length: int
    records: int
    runs: tuple[PagedRun, ...]
    large: tuple[int, ...]


def encode_summary(pages: Mapping[int, PageSummary]) -> bytes:
    """The summary of ``pages`` (page number -> what is known of it), in the module's format.
    Raises struct.error for a value out of its field's range."""
    out = bytearray(_MAGIC)
    out += _COUNT.pack(len(pages))
    for page, known in sorted(pages.items()):
        out += _PAGE.pack(page, known.length, known.records, len(known.runs), len(known.large))
        for start, count, tx_id, queue_ids in known.runs:
            out += _RUN.pack(start, count, tx_id, len(queue_ids))
            out += struct.pack(f"<{len(queue_ids)}q", *queue_ids)
        out += struct.pack(f"<{len(known.large)}q", *known.large)
    out += _COUNT.pack(crc32(bytes(out)))
    return bytes(out)


def decode_summary(data: bytes) -> dict[int, PageSummary]:
    """The pages of a summary made by :func:`encode_summary`. Raises ValueError (saying what
    is wrong) for anything else: a wrong magic, a CRC that does not match (a truncated or
    damaged summary), bytes left over, runs that do not cover the page's records."""
    if len(data) < len(_MAGIC) + 2 * _COUNT.size or not data.startswith(_MAGIC):
        raise ValueError("not a page summary (wrong magic or too short)")
    body, (crc,) = data[: -_COUNT.size], _COUNT.unpack_from(data, len(data) - _COUNT.size)
    if crc32(body) != crc:
        raise ValueError("its CRC does not match (truncated or damaged)")
    try:
        return _decode_pages(body)
    except struct.error as exc:
        raise ValueError(f"it does not decode: {exc}") from None


def _decode_pages(body: bytes) -> dict[int, PageSummary]:
    at = len(_MAGIC)
    (count,) = _COUNT.unpack_from(body, at)
    at += _COUNT.size
    pages: dict[int, PageSummary] = {}
    for _ in range(count):
        page, length, records, n_runs, n_large = _PAGE.unpack_from(body, at)
        at += _PAGE.size
        runs: list[PagedRun] = []
        for _ in range(n_runs):
            start, run_count, tx_id, n_queues = _RUN.unpack_from(body, at)
            at += _RUN.size
            queue_ids = struct.unpack_from(f"<{n_queues}q", body, at)
            at += n_queues * _ID.size
            runs.append((start, run_count, tx_id, queue_ids))
        large = struct.unpack_from(f"<{n_large}q", body, at)
        at += n_large * _ID.size
        if not _covers(runs, records):
            raise ValueError(f"the runs of page {page} do not cover its {records} records")
        pages[page] = PageSummary(length, records, tuple(runs), large)
    if at != len(body):
        raise ValueError(f"{len(body) - at} bytes left over after {count} pages")
    return pages


def _covers(runs: list[PagedRun], records: int) -> bool:
    """Whether ``runs`` are consecutive from record 0 and end at ``records``."""
    at = 0
    for start, count, _, _ in runs:
        if start != at or count < 1:
            return False
        at += count
    return at == records
