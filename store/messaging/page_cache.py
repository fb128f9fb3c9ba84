"""What the pager keeps of a page a queue's cursor is reading (:class:`PageCache`).

A page is read whole when a cursor first reaches it (one read of the page store: the page's
bytes and where each record lies, no bytes object per record), but its records are decoded
into :class:`~store.messaging.message_records.PagedMessage` one at a time, when a cursor asks
for them: a receive of a deep queue decodes the one record it delivers, not the 50,000 of a
10 MiB page at once (issue 27: the cost of an operation must not depend on the depth; a page
decoded whole made every page boundary a pause and held every record twice). A decoded
record is not kept: a cursor asks for each record once as it passes (another queue's cursor
on the same page decodes it again, 0.3 µs in C), and keeping them held a page's worth of
objects that the garbage collector walked on every full collection. Records appended to the
page after it was read are kept as the send made them.

A record that does not decode raises ValueError when it is asked for, as the whole page's
decode did when it was read.

Thread-safety: none; the pager's (the storage manager's lock).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, Final

from store.messaging.codec import VERSION
from store.messaging.message_records import PagedMessage
from store.paging.api import PagePosition
from store.paging.format import PageRecords
from store.speedups import SPEEDUPS

#: The compiled walk of :meth:`PageCache.walk` (``store/_speedups_pages.c``), or None.
COMPILED_WALK: Final[Callable[..., tuple[int, int, int]] | None] = getattr(
    SPEEDUPS, "read_ahead_run", None
)

__all__ = ["PageCache"]


class PageCache:
    """The records of one page: ``raw`` as the page store read them, each decoded when asked
    for (not kept: see the module docstring), then those appended since."""

    __slots__ = ("_appended", "_count", "_data", "_pairs", "_raw", "size")

    def __init__(self, raw: Sequence[bytes]) -> None:
        self._raw = raw
        self._count = len(raw)
        #: How many records the page has here (``len``, without a call: a receive asks).
        self.size = self._count
        self._appended: list[PagedMessage] = []
        # A PageRecords is decoded in place: (offset, length) pairs into the page's bytes.
        self._data = raw.data if isinstance(raw, PageRecords) else b""
        self._pairs = memoryview(raw.bounds).cast("q") if isinstance(raw, PageRecords) else None

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> PagedMessage:
        """The record at ``index`` (0-based, not negative). Raises IndexError past the end,
        ValueError for a record that does not decode."""
        if index >= self._count:
            return self._appended[index - self._count]
        pairs = self._pairs
        if pairs is None:
            return PagedMessage.decode(bytes(self._raw[index]))
        start = pairs[2 * index]
        return PagedMessage.decode(self._data, start, start + pairs[2 * index + 1])

    def walk(
        self,
        index: int,
        qid: int,
        skip: tuple[dict[int, int], Collection[int], set[PagePosition], set[PagePosition]],
        page_no: int,
        counts: tuple[int, int, int],
        make_position: Callable[[tuple[int, int]], PagePosition],
        found: list[tuple[PagePosition, PagedMessage]],
    ) -> tuple[int, int, int] | None:
        """The compiled read-ahead walk (``read_ahead_run`` in ``store/_speedups_pages.c``,
        which says what it takes) over the records read with the page, from ``index``: ``skip`` is
        (visible transactions, acknowledged indexes, held and in-memory positions),
        ``counts`` (want, need, budget). Returns (index, budget, stop); None where it does
        not apply (not compiled, records appended since the read, or a page read in
        records). Raises nothing of its own."""
        pairs = self._pairs
        if COMPILED_WALK is None or pairs is None or index >= self._count:
            return None
        visible, acked, held, in_memory = skip
        want, need, budget = counts
        args: tuple[Any, ...] = (self._data, pairs, index, self._count, qid, visible, acked)
        return COMPILED_WALK(
            *args,
            held,
            in_memory,
            page_no,
            want,
            need,
            budget,
            VERSION,
            PagedMessage,
            make_position,
            found,
        )

    def append(self, paged: PagedMessage) -> None:
        """``paged`` was appended to the page after it was read. Returns None."""
        self._appended.append(paged)
        self.size += 1
