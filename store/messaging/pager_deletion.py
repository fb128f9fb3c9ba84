"""The pager's acknowledgements and deletion (:mod:`store.messaging.pager`): the cursor acks of
paged messages, a page's completion by each queue, the deletion of pages no queue needs any
more (with their large bodies and journal records), and a deleted queue's share of them.

The ack of a paged message is an ACKNOWLEDGE_CURSOR record (39, new id). When a queue has
acknowledged every message of a page routed to it, and the page is no longer written to, one
journal transaction adds PAGE_CURSOR_COMPLETE (42) and deletes that page's cursor acks of the
queue. When every queue the page routes to has completed it, the page is deleted, then its 42
records. A page is kept while it holds records of an undecided transaction; the
PAGE_TRANSACTION record (35) is deleted with the last page holding its records
(:mod:`store.messaging.pager_sends`).

A page's completion and deletion are the pager's own tidying after an operation that is
applied already: the ack's cursor-ack record, a rollback, the send that rolled to a new page,
a queue deleted. A database outage or a failing page store may refuse them; the operation
then still returns as applied (it is: its record is queued, and raising would tell its caller
nothing was written, so a consumer told its ack failed would expect the message again), and
the page is logged and tidied at the next chance (the next such operation, else the next load,
which completes and deletes whatever is left: a crash between the steps leaves the same).
Each step is written to be run again: nothing in memory says a page is gone before its store
deleted it.

Thread-safety: none of its own; the storage manager's lock guards every call.
"""

from __future__ import annotations

import logging
import time

from store.errors import StoreError
from store.messaging.page_records import (
    ACKNOWLEDGE_CURSOR,
    PAGE_CURSOR_COMPLETE,
    CursorAck,
    PageComplete,
)
from store.messaging.pager_cursors import PagerCursors
from store.messaging.pager_state import AddressPaging, PageState
from store.paging.api import PagePosition

__all__ = ["PagerDeletion"]

log = logging.getLogger("store.messaging.paging")  # the logger this code always logged to

#: Pages left untidy are tried again at most this often (seconds): a page that fails each
#: time (damaged) must not cost a page read per ack.
_TIDY_AGAIN = 1.0


class PagerDeletion(PagerCursors):
    """The pager's acks, page completions and page deletions (see the module docstring); it
    reads a page being deleted through the page cache of :class:`PagerCursors`."""

    def ack(self, address: str, qid: int, position: PagePosition) -> None:
        """Queue ``qid`` acknowledged the paged message at ``position``: a cursor-ack record,
        then the page's completion and deletion when due. Raises what the journal raises."""
        rid = self._next_id()
        self._journal.append_add(rid, ACKNOWLEDGE_CURSOR, CursorAck.body_of(qid, position))
        self.acked(address, qid, position, rid)

    def cursor_ack_tx(self, tx_id: int, qid: int, position: PagePosition) -> int:
        """Write the cursor ack of a transaction; returns its record id (for ``acked``)."""
        rid = self._next_id()
        body = CursorAck.body_of(qid, position)
        self._journal.append_add_tx(tx_id, rid, ACKNOWLEDGE_CURSOR, body)
        return rid

    def acked(self, address: str, qid: int, position: PagePosition, rid: int) -> None:
        """Record that cursor-ack record ``rid`` acknowledged ``position`` for ``qid``."""
        state = self._addresses.get(address) or self.address(address)
        page_no, index = position
        page = state.pages.get(page_no)
        if page is None:
            return
        page.acked[qid].add(index)
        page.ack_records[qid].append(rid)
        cursor = state.cursors.get(qid)
        if cursor is not None:
            cursor.held.discard(position)
            cursor.in_memory.discard(position)
        state.live -= 1
        self.tidy(state, page_no)

    def tidy(self, state: AddressPaging, page_no: int) -> None:
        """:meth:`_check_page` after an operation that is applied already (module docstring):
        a StoreError is logged and the page tried again later, never raised. Pages left from
        earlier failures are tried first. Raises nothing of the store's."""
        if self._untidy and time.monotonic() >= self._tidy_at:
            self._tidy_left()
        try:
            self._check_page(state, page_no)
        except StoreError as exc:
            if (state.address, page_no) not in self._untidy:
                log.warning(
                    "page %d of %r: completing or deleting it failed (tried again later; "
                    "nothing acknowledged is affected): %s",
                    page_no,
                    state.address,
                    exc,
                )
            if not self._untidy:
                self._tidy_at = time.monotonic() + _TIDY_AGAIN
            self._untidy.add((state.address, page_no))

    def _tidy_left(self) -> None:
        """Try the pages an earlier :meth:`tidy` could not finish; stop at the first that
        fails again (the store is still refusing)."""
        self._tidy_at = time.monotonic() + _TIDY_AGAIN
        for address, page_no in sorted(self._untidy):
            state = self._addresses.get(address)
            if state is None or page_no not in state.pages:
                self._untidy.discard((address, page_no))
                continue
            try:
                self._check_page(state, page_no)
            except StoreError:
                return
            self._untidy.discard((address, page_no))

    def _check_page(self, state: AddressPaging, page_no: int) -> None:
        page = state.pages[page_no]
        if page.pending or (page_no == state.last_page and state.live):
            return  # undecided records, or the current page while anything paged is live
        acked, complete, queue_address = page.acked, page.complete, self._queue_address
        for qid, routed in page.routed.items():
            # (every paged ack comes here: the live-queue test inlined)
            if qid in complete or queue_address(qid) is None:
                continue
            if len(acked[qid]) < routed:
                return
            self._complete(page, page_no, qid, routed)
        self._delete_page(state, page_no)

    def _complete(self, page: PageState, page_no: int, qid: int, routed: int) -> None:
        tx, rid = self._next_id(), self._next_id()
        body = PageComplete(qid, page_no, routed).encode()
        # (a refused append leaves an uncommitted transaction, dropped at load; run again, this
        # writes a new one: the ack records are forgotten only once it is queued whole)
        self._journal.append_add_tx(tx, rid, PAGE_CURSOR_COMPLETE, body)
        self._journal.append_deletes_tx(tx, page.ack_records.get(qid, []))
        self._journal.append_commit(tx, sync=False)
        page.ack_records.pop(qid, None)
        page.complete[qid] = rid

    def _delete_page(self, state: AddressPaging, page_no: int) -> None:
        page = state.pages[page_no]
        if page.summary is not None:  # never read since the load took it from the summary
            self.check_summary(state, page_no, self._store(state.address).read_page(page_no))
        if page.runs is not None:  # known whole (``_note_run``): its large ids too
            large = list(page.large)
        else:
            records = self._records(state, page_no)
            large = [
                records[i].message_id for i in range(len(records)) if records[i].record_type == 30
            ]
        self._store(state.address).delete_page(page_no)  # (raises: the page stays, as it was)
        del state.pages[page_no]
        state.cache.pop(page_no, None)
        self._doomed.extend(large)
        # After the page: a crash in between leaves records of a missing page, swept at load.
        for rid in [*page.complete.values(), *(r for rs in page.ack_records.values() for r in rs)]:
            self._journal.append_delete(rid)
        for tx_id in page.tx_ids:  # a page transaction whose last page went
            if tx_id in self._visible_txs and not any(
                tx_id in p.tx_ids for a in self._addresses.values() for p in a.pages.values()
            ):
                self._journal.append_delete(self._visible_txs.pop(tx_id))
        log.debug("page %d of %r deleted", page_no, state.address)

    def drop_queue(self, address: str, qid: int) -> None:
        """Queue ``qid`` was deleted: its paged refs no longer count; pages only it needed go."""
        state = self._addresses.get(address)
        if state is None:
            return
        for page_no in sorted(state.pages):
            page = state.pages[page_no]
            if qid in page.routed and qid not in page.complete:
                state.live -= page.routed[qid] - len(page.acked[qid])
            for rid in page.ack_records.pop(qid, []):
                self._journal.append_delete(rid)
            page.acked.pop(qid, None)
            if qid in page.complete:
                self._journal.append_delete(page.complete.pop(qid))
            page.routed.pop(qid, None)
        state.cursors.pop(qid, None)
        for page_no in sorted(state.pages):
            self.tidy(state, page_no)
