"""The pager's paged sends (:mod:`store.messaging.pager`): a message appended to its address's
pages (:meth:`PagerSends.page`), counted for its queues' cursors when visible, and the page
transactions that make a transaction's paged sends visible at commit.

**Paged transactional sends.** A transaction's paged sends are written to the pages at
``tx.send`` with its transaction id, invisible; at prepare or commit the pages are flushed and
a PAGE_TRANSACTION record (35) joins the journal transaction, so the records are visible
exactly when it commits (at load: a record whose transaction has a committed 35 record is
visible, one of a prepared transaction is pending, any other is never visible). Queues' cursors
go back to a record made visible behind them. A page is kept while it holds records of an
undecided transaction; the 35 record is deleted with the last page holding its records
(:mod:`store.messaging.pager_deletion`). A prepared transaction's cursor acks hold their
messages across restarts.

Each page keeps its records as runs for the page summary of a clean close
(:mod:`store.messaging.page_summary`), noted as they are appended here.

Thread-safety: none of its own; the storage manager's lock guards every call.
"""

from __future__ import annotations

from store.messaging.message_records import PagedMessage
from store.messaging.pager_deletion import PagerDeletion
from store.messaging.pager_state import MAX_RUNS, AddressPaging, PageState
from store.paging.api import PagePosition

__all__ = ["PagerSends"]


def _note_run(page: PageState, index: int, paged: PagedMessage) -> None:
    """Add the record ``paged`` appended at ``index`` to ``page``'s runs (O(1)); the runs
    become None (not known) when the page has more than
    :data:`~store.messaging.pager_state.MAX_RUNS` or the record does not follow the last one
    known."""
    runs = page.runs
    if runs is None:
        return
    if paged.record_type == 30:
        page.large.append(paged.message_id)
    if runs:
        start, count, tx_id, queue_ids = runs[-1]
        if start + count != index:
            page.runs = None
            return
        if tx_id == paged.tx_id and queue_ids == paged.queue_ids:
            runs[-1] = (start, count + 1, tx_id, queue_ids)
            return
    elif index:
        page.runs = None
        return
    if len(runs) >= MAX_RUNS:
        page.runs = None
        return
    runs.append((index, 1, paged.tx_id, paged.queue_ids))


class PagerSends(PagerDeletion):
    """The pager's paged sends and page transactions (see the module docstring)."""

    def page(self, address: str, paged: PagedMessage, *, sync: bool) -> PagePosition:
        """Append ``paged`` to the address's pages; returns its position. Raises what the page
        store raises."""
        # (every paged send comes here: the lookups of address() and _store() inlined)
        state = self._addresses.get(address) or self.address(address)
        store = self._stores.get(address) or self._store(address)
        position = store.append(paged.encode(), sync=sync)
        page_no, index = position
        page = state.pages.get(page_no)
        if page is None:  # (not setdefault: a PageState made per send costs more than it)
            page = state.pages[page_no] = PageState()
        if index >= page.size:
            page.size = index + 1
        runs = page.runs
        if not runs:
            _note_run(page, index, paged)
        else:  # the record continues the last run: _note_run's commonest case, inlined
            start, count, tx_id, queue_ids = runs[-1]
            if (
                start + count == index
                and tx_id == paged.tx_id
                and queue_ids == paged.queue_ids
                and paged.record_type != 30
            ):
                runs[-1] = (start, count + 1, tx_id, queue_ids)
            else:
                _note_run(page, index, paged)
        if paged.tx_id:  # invisible until its transaction commits
            page.tx_ids.add(paged.tx_id)
            page.pending += 1
        else:
            self._count_visible(state, page, position, paged)
        if page_no != state.last_page:
            closed, state.last_page = state.last_page, page_no
            if closed in state.pages:
                self.tidy(state, closed)
        cached = state.cache.get(page_no)
        if cached is not None and cached.size == index:
            cached.append(paged)
        return position

    def _count_visible(
        self, state: AddressPaging, page: PageState, position: PagePosition, paged: PagedMessage
    ) -> None:
        queue_address, routed, cursors = self._queue_address, page.routed, state.cursors
        for qid in paged.queue_ids:
            if queue_address(qid) is None:  # not a live queue
                continue
            routed[qid] += 1
            cursor = cursors.get(qid) or self._cursor(state, qid)
            cursor.remaining += 1
            if position < cursor.position:
                cursor.go_back(position)
            state.live += 1

    # -- page transactions ------------------------------------------------------------------

    def commit_paged(
        self, tx_id: int, record_id: int, sends: list[tuple[str, PagePosition, PagedMessage]]
    ) -> None:
        """Transaction ``tx_id`` (its PAGE_TRANSACTION record ``record_id``) committed: its
        paged ``sends`` become deliverable, in order."""
        self._visible_txs[tx_id] = record_id
        for address, position, paged in sends:
            state = self.address(address)
            page = state.pages.get(position.page)
            if page is not None:
                page.pending -= 1
                self._count_visible(state, page, position, paged)

    def rollback_paged(self, sends: list[tuple[str, PagePosition, PagedMessage]]) -> None:
        """A transaction's paged ``sends`` will never be visible: their pages may go."""
        for address, position, _ in sends:
            state = self.address(address)
            page = state.pages.get(position.page)
            if page is not None:
                page.pending -= 1
                self.tidy(state, position.page)
