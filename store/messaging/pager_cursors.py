"""The pager's cursors and read-ahead (:mod:`store.messaging.pager`): each queue's reading of
its address's pages (:class:`Cursor`), depaging (:meth:`PagerCursors.depage`) through the
cursor's read-ahead and the address's page cache (:mod:`store.messaging.page_cache`), and
the read-only browse of what is still paged.

**Cursors.** Each queue reads the pages of its address from its cursor, taking the records
routed to it that it has not acknowledged, only when ``receive`` has nothing ready in memory
(*depaging*; pages are read on the caller's thread, never by a background reader). A cursor
reads ahead up to :data:`READ_AHEAD` of the queue's next paged messages (docs/paging.md), which
stay paged until taken; a record made deliverable behind the cursor (a transaction's commit, a
rolled-back prepared ack) sends the cursor back to it (:meth:`Cursor.go_back`). What the acks
of depaged messages then do is in :mod:`store.messaging.pager_deletion`.

Thread-safety: none of its own; the storage manager's lock guards every call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from store.errors import CorruptionError
from store.messaging.message_records import PagedMessage
from store.messaging.page_cache import PageCache
from store.messaging.page_scan import paged_runs, per_record
from store.messaging.pager_state import AddressPaging, PagerBase
from store.paging.api import PagePosition, PageStore, make_position

__all__ = ["READ_AHEAD", "READ_AHEAD_BYTES", "Cursor", "PagerCursors"]


#: How many paged messages a queue's cursor reads ahead at most (:meth:`Pager.depage`): a
#: receive of a deep queue then pops the next one instead of walking to it through the
#: page's records (issue 27: 57k of a paged send+receive+ack's 223k instructions were that
#: receive), and :data:`READ_AHEAD_BYTES` of their records at most (past the first ``n``
#: asked for), so that large inline bodies are not held by the dozen.
READ_AHEAD: Final = 64
READ_AHEAD_BYTES: Final = 256 * 1024


@dataclass(eq=False)
class Cursor:
    """One queue's reading of its address's pages."""

    position: PagePosition = field(default_factory=lambda: PagePosition(0, 0))
    remaining: int = 0  # paged refs neither in memory nor acknowledged nor held
    held: set[PagePosition] = field(default_factory=set)  # acked by a prepared transaction
    in_memory: set[PagePosition] = field(default_factory=set)  # read back, not acknowledged
    #: Read ahead (:meth:`Pager.depage`): the queue's next paged messages, found by the walk
    #: that moved ``position`` past them, the next one last; still paged (not in memory,
    #: counted in ``remaining``). A record made deliverable behind ``position`` (a
    #: transaction's commit, a rollback's unhold) forgets them (:meth:`go_back`).
    ahead: list[tuple[PagePosition, PagedMessage]] = field(default_factory=list)

    def go_back(self, position: PagePosition) -> None:
        """The record at ``position`` became deliverable: the walk goes back to it, or to the
        first message read ahead if that is earlier (the read-ahead is forgotten, so the walk
        takes its messages again in page order with the new one among them). Raises
        nothing."""
        if self.ahead:
            self.position = self.ahead[-1][0]
            self.ahead.clear()
        self.position = min(self.position, position)


_NO_CURSOR: Final = Cursor()  # read-only stand-in for a queue without a cursor


class PagerCursors(PagerBase):
    """The pager's reading of paged messages through the queues' cursors (see the module
    docstring)."""

    def _cursor(self, state: AddressPaging, qid: int) -> Cursor:
        cursor = state.cursors.get(qid)
        if cursor is None:
            first = min(state.pages, default=0)
            cursor = state.cursors[qid] = Cursor(PagePosition(first, 0))
        return cursor

    def unhold(self, address: str, qid: int, position: PagePosition) -> None:
        """A held paged message (a prepared transaction's ack, rolled back) is deliverable
        again: the queue's cursor goes back to it."""
        state = self.address(address)
        cursor = self._cursor(state, qid)
        if position in cursor.held:
            cursor.held.discard(position)
            cursor.remaining += 1
            cursor.go_back(position)

    def _visible(self, paged: PagedMessage) -> bool:
        return paged.tx_id == 0 or paged.tx_id in self._visible_txs

    # -- receiving --------------------------------------------------------------------------

    def remaining(self, address: str, qid: int) -> int:
        """Paged messages of queue ``qid`` not in memory, acknowledged or held."""
        state = self._addresses.get(address)
        cursor = None if state is None else state.cursors.get(qid)
        return 0 if cursor is None else cursor.remaining + len(cursor.held)

    def depage(self, address: str, qid: int, n: int) -> list[tuple[PagePosition, PagedMessage]]:
        """The next ``n`` (at most) paged messages of queue ``qid`` in page order, now counted
        as in memory: taken from the cursor's read-ahead (:class:`Cursor`), read ahead again
        when it runs out. Raises what the page store raises (CorruptionError for a damaged
        record), when the message it holds is the next one to deliver."""
        state = self._addresses.get(address)  # none yet: nothing was ever paged there
        cursor = None if state is None else state.cursors.get(qid)
        if state is None or cursor is None or cursor.remaining == 0:
            return []
        ahead, in_memory = cursor.ahead, cursor.in_memory
        if n == 1 and ahead:  # a receive of a deep queue: the next one read ahead
            item = ahead.pop()
            in_memory.add(item[0])
            cursor.remaining -= 1
            return [item]
        out: list[tuple[PagePosition, PagedMessage]] = []
        while True:
            while ahead and len(out) < n:
                item = ahead.pop()
                out.append(item)
                in_memory.add(item[0])
                cursor.remaining -= 1
            if len(out) == n or cursor.remaining == 0:
                return out
            self._read_ahead(state, cursor, qid, n - len(out))
            if not ahead:
                return out

    def _read_ahead(self, state: AddressPaging, cursor: Cursor, qid: int, n: int) -> None:
        """Fill the cursor's empty read-ahead from its position: at least ``n`` of the queue's
        next paged messages (fewer when there are no more), up to :data:`READ_AHEAD` or
        :data:`READ_AHEAD_BYTES`, one page's records at a time (no position object per
        record passed over). The cursor moves past every record looked at. A page that does
        not read or a record that does not decode ends the read-ahead before it when it found
        something (the receive that reaches it raises), and raises otherwise (the cursor stays
        at it: every later receive raises too)."""
        visible, held, in_memory = self._visible_txs, cursor.held, cursor.in_memory
        start = cursor.position
        found: list[tuple[PagePosition, PagedMessage]] = []
        want, budget = min(max(n, READ_AHEAD), cursor.remaining), READ_AHEAD_BYTES
        try:
            # ``state.pages`` is in ascending order (sorted at load; a page is added only past
            # every other, as the roller numbers them), and the pages below a queue's cursor
            # are usually deleted: no sort, and no walk over a deep queue's pages.
            for page_no in state.pages:
                if page_no < start.page:
                    continue
                page = state.pages[page_no]
                if qid in page.complete:  # nothing left on it for this queue: not read
                    cursor.position = make_position((page_no, page.size))
                    continue
                try:
                    records = self._records(state, page_no)
                except Exception:
                    if found:
                        return
                    raise
                acked = page.acked.get(qid, ())
                index = start.index if page_no == start.page else 0
                end = records.size
                try:
                    while index < end:
                        walked = records.walk(
                            index,
                            qid,
                            (visible, acked, held, in_memory),
                            page_no,
                            (want, n, budget),
                            make_position,
                            found,
                        )
                        if walked is not None:  # the loop below, compiled, up to ...
                            index, budget, stop = walked
                            if stop == 1:
                                return
                            if index == end:
                                break
                            # ... a record appended since the read, or one to decode below
                        try:
                            paged = records[index]
                        except ValueError:
                            if found:
                                return
                            raise
                        index += 1
                        if (
                            qid not in paged.queue_ids
                            or (paged.tx_id and paged.tx_id not in visible)
                            or index - 1 in acked
                        ):
                            continue
                        position = make_position((page_no, index - 1))
                        if position in held or position in in_memory:
                            continue
                        found.append((position, paged))
                        budget -= len(paged.record)
                        if len(found) == want or (budget <= 0 and len(found) >= n):
                            return
                finally:
                    cursor.position = make_position((page_no, index))
        finally:
            found.reverse()
            cursor.ahead[:] = found
            if cursor.position.page != start.page:
                self._evict(state)

    def _records(self, state: AddressPaging, page: int) -> PageCache:
        cached = state.cache.get(page)
        if cached is None or cached.size < state.pages[page].size:
            ((_, raw),) = self._store(state.address).read_pages([page])
            self.check_summary(state, page, raw)
            cached = state.cache[page] = PageCache(raw)
        return cached

    def check_summary(self, state: AddressPaging, page_no: int, records: Sequence[bytes]) -> None:
        """The first read of a page the load took from the page summary: what it holds must
        be what the summary said (as many records, routed to the same queues in the same
        transactions, the same large messages); a page written after its summary (a page file
        replaced, rows changed) would otherwise be trusted as the summary describes it, and
        its messages delivered to the wrong queues or dropped with it. Raises CorruptionError
        naming the page (the summary was deleted at open: the next load reads every page);
        returns None when they agree."""
        page = state.pages.get(page_no)
        if page is None or page.summary is None:
            return
        expected, page.summary = page.summary, None
        count, runs, large, current = expected
        # the page appends went to at load may have grown since: its first ``count`` records
        grown = current and len(records) > count
        held = list(records[:count]) if grown else records
        got_runs, got_large = paged_runs(held)
        if (
            len(held) == count
            and per_record(got_runs) == per_record(runs)
            and tuple(got_large) == tuple(large)
        ):
            return
        raise CorruptionError(
            self._store(state.address).page_path(page_no),
            0,
            f"page {page_no} of address {state.address!r} is not the page its summary "
            f"describes ({len(held)} records; the summary: {count}, routed and in "
            "transactions as listed there): it was changed or replaced after the last clean "
            "close",
            hint="restore the page from a backup of the same moment as the rest of the store; "
            "the next open reads every page instead of the summary",
        )

    def _evict(self, state: AddressPaging) -> None:
        lowest = min((c.position.page for c in state.cursors.values()), default=0)
        for page in [p for p in state.cache if p < lowest]:
            del state.cache[page]

    # -- browsing (read-only) ---------------------------------------------------------------

    def browse_refs(self) -> list[tuple[int, str, PagePosition, tuple[int, ...]]]:
        """Every visible paged message some live queue still has to acknowledge and has not
        read into memory yet: ``(message id, address, position, queue ids)``, in page
        order. Reads every page once (not through the page cache) and changes nothing: no
        cursor moves, no record is written. Raises what the page stores raise."""
        refs: list[tuple[int, str, PagePosition, tuple[int, ...]]] = []
        for address, state in sorted(self._addresses.items()):
            if not state.pages:
                continue  # no page store to open (opening one would create it)
            store = self._store(address)
            for page_no in sorted(state.pages):
                page = state.pages[page_no]
                records = self._browse_page(store, page_no, note=True)
                if None not in records:
                    self.check_summary(state, page_no, records)  # type: ignore[arg-type]
                for index, raw in enumerate(records):
                    if raw is None:
                        continue  # damaged, listed in ``skipped``
                    paged = PagedMessage.decode(raw)
                    if not self._visible(paged):
                        continue
                    position = PagePosition(page_no, index)
                    qids = tuple(
                        q
                        for q in paged.queue_ids
                        if self._live_queue(q)
                        and q not in page.complete
                        and index not in page.acked.get(q, ())
                        and position not in self._cursor_of(state, q).in_memory
                    )
                    if qids:
                        refs.append((paged.message_id, address, position, qids))
        return refs

    def _cursor_of(self, state: AddressPaging, qid: int) -> Cursor:
        return state.cursors.get(qid) or _NO_CURSOR

    def page_records(self, address: str, page: int) -> list[bytes | None]:
        """The records of page ``page`` of ``address`` as its page store holds them (read
        now, nothing cached, nothing changed; decode one with ``PagedMessage.decode``); a
        damaged one is None when the load was asked to skip damage. Raises what the page
        store raises."""
        return self._browse_page(self._store(address), page, note=False)

    def _browse_page(self, store: PageStore, page: int, *, note: bool) -> list[bytes | None]:
        """A page's records for a browse: read whole, or (``skip_damaged``) with its damaged
        records as None, each listed in ``skipped`` when ``note``."""
        if not self.skip_damaged:
            return list(store.read_page(page))
        records, damage = store.read_page_readable(page)
        if note:
            self.skipped.extend(damage)
        return records
