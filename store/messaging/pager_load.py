"""The pager's load and page summaries (:mod:`store.messaging.pager`): the pages and cursors
rebuilt at the storage manager's load, the sweep of what is stale, and the page summaries a
clean close writes.

**Load.** Every page of every address is read once (the counters are rebuilt, as Artemis's
``rebuildCounters``), except the pages the page summary of the last clean close covers
(:mod:`store.messaging.page_summary`: what a load needs of each page, written by
:meth:`PagerLoad.write_summaries` at close, deleted at open, checked against the pages'
lengths), a run of records with the same transaction and queues at a time
(:mod:`store.messaging.page_scan`, compiled where the C part is built: a deep queue is almost
all paged, and this is what its restart costs), the pages of an address through
``PageStore.read_pages`` (several per query on a database); cursor records of pages or queues
that are gone are deleted and counted in ``cleaned["page_cursors"]``; pages no existing queue
still needs are deleted (``cleaned["pages"]``, :mod:`store.messaging.pager_deletion`).

Thread-safety: none of its own; the storage manager's lock guards every call.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence

from store.messaging.message_records import PagedMessage
from store.messaging.page_records import CursorAck, PageComplete
from store.messaging.page_scan import PagedRun, paged_runs
from store.messaging.page_summary import PageSummary, decode_summary, encode_summary
from store.messaging.pager_deletion import PagerDeletion
from store.messaging.pager_state import MAX_RUNS, PageState
from store.paging.api import PagePosition, PageStore

__all__ = ["PagerLoad"]

log = logging.getLogger("store.messaging.paging")  # the logger this code always logged to

#: A run of a page's records as the load accounted it: (start, count, the live queues its
#: records count for).
_LoadedRun = tuple[int, int, tuple[int, ...]]


def _within(indexes: set[int], start: int, end: int) -> int:
    """How many of ``indexes`` lie in ``start`` .. ``end - 1``, in whichever is shorter."""
    if len(indexes) <= end - start:
        return sum(1 for i in indexes if start <= i < end)
    return sum(1 for i in range(start, end) if i in indexes)


def _keep(record_id: int) -> None:
    """What a read-only load does instead of deleting a stale record: nothing."""


class PagerLoad(PagerDeletion):
    """The pager's load and page summaries (see the module docstring)."""

    def load(
        self,
        acks: list[tuple[int, CursorAck]],
        completes: list[tuple[int, PageComplete]],
        held: list[CursorAck],
        page_txs: dict[int, int],
        pending_txs: set[int],
        *,
        sweep: bool = True,
    ) -> tuple[int, dict[str, int]]:
        """Rebuild every address's pages and cursors from its page store and the journal's
        cursor records (``held``: cursor acks of prepared transactions); delete what is stale.
        A paged record of a transaction is visible when ``page_txs`` (committed page
        transactions: id -> PAGE_TRANSACTION record id) has it, pending (``pending_sends``)
        when ``pending_txs`` (prepared ones) has it, and never otherwise. Returns (paged
        messages still to be acknowledged, cleaned counts). Raises what the page stores and
        the journal raise.

        ``sweep=False`` (a read-only load): what is stale is counted and left where it is, and
        pages every queue has finished stay (they hold nothing to deliver)."""
        delete = self._journal.append_delete if sweep else _keep
        cleaned: dict[str, int] = defaultdict(int)
        routes, large, whole = self._read_pages(page_txs, pending_txs, sweep=sweep)
        self._visible_txs = {
            tx: rid
            for tx, rid in page_txs.items()
            if any(tx in p.tx_ids for a in self._addresses.values() for p in a.pages.values())
        }
        for tx, rid in page_txs.items():
            if tx not in self._visible_txs:
                delete(rid)
                cleaned["page_transactions"] += 1
        self._attach_cursor_records(acks, completes, delete, cleaned)
        messages = self._rebuild_cursors(routes, held)
        for state in self._addresses.values() if sweep else ():
            for page_no in sorted(state.pages):
                self._check_page(state, page_no)
                if page_no not in state.pages:
                    cleaned["pages"] += 1
        self.large_ids = {
            mid
            for (address, page_no), ids in large.items()
            if page_no in self._addresses[address].pages
            for mid in ids
        }
        self.needed_large = {
            mid: key
            for key, ids in large.items()
            if key in whole
            and (page := self._addresses[key[0]].pages.get(key[1])) is not None
            and not page.complete
            and not any(page.acked.values())
            for mid in ids
        }
        return messages, dict(cleaned)

    def _read_pages(
        self, page_txs: dict[int, int], pending_txs: set[int], *, sweep: bool
    ) -> tuple[
        dict[tuple[str, int], list[_LoadedRun]],
        dict[tuple[str, int], list[int]],
        set[tuple[str, int]],
    ]:
        """Make the state of every page of every address (``page_txs``, ``pending_txs`` and
        ``sweep`` as :meth:`load`); returns each page's runs as accounted
        (:meth:`_load_run`) and its large message ids, by (address, page), and the pages each
        of whose records some queue or a prepared transaction may still deliver (so every large
        body they name must exist while no queue acknowledged anything of them). Raises what
        the page stores raise."""
        routes: dict[tuple[str, int], list[_LoadedRun]] = {}
        large: dict[tuple[str, int], list[int]] = {}
        whole: set[tuple[str, int]] = set()
        for address in self._paging.addresses():
            state = self.address(address)
            store = self._store(address)
            for page_no, size, runs, large_ids, records in self._page_runs(store, sweep=sweep):
                known = runs if len(runs) <= MAX_RUNS else None
                page = state.pages[page_no] = PageState(size=size, runs=known, large=large_ids)
                if records is None:  # from the summary: checked when the page is first read
                    current = page_no == store.current_page
                    page.summary = (size, tuple(runs), tuple(large_ids), current)
                large[address, page_no] = large_ids
                routes[address, page_no] = [
                    self._load_run(address, page, page_no, run, records, page_txs, pending_txs)
                    for run in runs
                ]
                if large_ids and all(
                    r[2] in pending_txs or loaded[2]
                    for r, loaded in zip(runs, routes[address, page_no], strict=True)
                ):
                    whole.add((address, page_no))
            state.pages = dict(sorted(state.pages.items()))
            state.last_page = store.current_page
        return routes, large, whole

    def _attach_cursor_records(
        self,
        acks: list[tuple[int, CursorAck]],
        completes: list[tuple[int, PageComplete]],
        delete: Callable[[int], None],
        cleaned: dict[str, int],
    ) -> None:
        """Give the pages read their PAGE_CURSOR_COMPLETE and cursor-ack records; ``delete``
        those of pages or queues that are gone (counted in ``cleaned``). Raises what
        ``delete`` raises."""
        for rid, complete in completes:
            target = self._page_of(complete.queue_id, complete.page)
            if target is None or complete.queue_id not in target.routed:
                delete(rid)
                cleaned["page_cursors"] += 1
            else:
                target.complete[complete.queue_id] = rid
        for rid, ack in acks:
            target = self._page_of(ack.queue_id, ack.page)
            if target is None or ack.queue_id in target.complete or ack.index >= target.size:
                delete(rid)
                cleaned["page_cursors"] += 1
            else:
                target.acked[ack.queue_id].add(ack.index)
                target.ack_records[ack.queue_id].append(rid)

    def _load_run(
        self,
        address: str,
        page: PageState,
        page_no: int,
        run: PagedRun,
        records: Sequence[bytes] | None,
        page_txs: dict[int, int],
        pending_txs: set[int],
    ) -> _LoadedRun:
        """Account one run of records found at load (module ``page_scan``; ``records``: the
        page's, None when its summary was read instead); returns it with the live queues its
        records count for (none for a transaction not committed)."""
        start, count, tx_id, queue_ids = run
        if tx_id:
            page.tx_ids.add(tx_id)
            if tx_id in pending_txs:
                page.pending += count
                if records is None:  # a summary leaves such pages out; read it all the same
                    records = self._store(address).read_page(page_no)
                sends = self.pending_sends.setdefault(tx_id, [])
                for index in range(start, start + count):
                    paged = PagedMessage.decode(records[index])
                    light = PagedMessage(paged.message_id, tx_id, paged.record_type, b"", queue_ids)
                    sends.append((address, PagePosition(page_no, index), light))  # no body held
                return start, count, ()
            if tx_id not in page_txs:
                return start, count, ()  # rolled back, or never committed
        live = tuple(q for q in queue_ids if self._live_queue(q))
        for qid in live:
            page.routed[qid] += count
        return start, count, live

    def _page_runs(
        self, store: PageStore, *, sweep: bool
    ) -> Iterator[tuple[int, int, list[PagedRun], list[int], Sequence[bytes] | None]]:
        """(page, records, runs, large message ids, the records or None) of every page of
        ``store``: from the page summary where it can be trusted, else read (``sweep``: as
        :meth:`load`). Raises what the page store raises."""
        pages = store.pages()
        summary = self._summary(store.address, store, pages, sweep=sweep)
        for page_no in pages:
            if page_no in summary:
                known = summary[page_no]
                yield page_no, known.records, list(known.runs), list(known.large), None
        for page_no, records in store.read_pages([p for p in pages if p not in summary]):
            runs, large_ids = paged_runs(records)
            yield page_no, len(records), runs, large_ids, records

    def _summary(
        self, address: str, store: PageStore, pages: list[int], *, sweep: bool
    ) -> dict[int, PageSummary]:
        """The pages of the address's page summary that can be trusted (module
        ``page_summary``): {} when it has none, or when it is damaged or stale (logged). An
        open for writing (``sweep``) deletes it first, so a crash from here on leaves none."""
        data = store.read_summary()
        if data is None:
            return {}
        if sweep:
            store.write_summary(None)
        where = f"the page summary of address {address!r}"
        try:
            summary = decode_summary(data)
        except ValueError as exc:
            log.warning("%s is ignored, every page is read: %s", where, exc)
            return {}
        lengths = store.page_lengths()
        present = set(pages)
        for page_no, known in summary.items():
            have = lengths.get(page_no) if page_no in present else None
            if have != known.length:
                log.warning(
                    "%s is stale (page %d is %s, it lists %d bytes); every page is read",
                    where,
                    page_no,
                    "gone" if have is None else f"{have} bytes",
                    known.length,
                )
                return {}
        return summary

    def write_summaries(self) -> None:
        """Write every address's page summary (module ``page_summary``): what a clean close
        does, so the next load need not read the pages it covers. A page not known whole
        (``PageState.runs`` None) or holding records of an undecided transaction is left out.
        Raises what the page stores raise (StoreIOError / StoreUnavailableError)."""
        present = set(self._paging.addresses())
        for address, state in self._addresses.items():
            if address not in present or not state.pages:
                continue
            store = self._store(address)
            lengths = store.page_lengths()
            known = {
                page_no: PageSummary(lengths[page_no], page.size, tuple(runs), tuple(page.large))
                for page_no, page in state.pages.items()
                if (runs := page.runs) is not None
                and not page.pending
                and page_no in lengths
                and sum(run[1] for run in runs) == page.size
            }
            if known:
                store.write_summary(encode_summary(known))

    def _page_of(self, qid: int, page_no: int) -> PageState | None:
        address = self._queue_address(qid)
        state = None if address is None else self._addresses.get(address)
        return None if state is None else state.pages.get(page_no)

    def _rebuild_cursors(
        self, routes: dict[tuple[str, int], list[_LoadedRun]], held: list[CursorAck]
    ) -> int:
        messages = 0
        for (address, page_no), runs in routes.items():
            state = self._addresses[address]
            page = state.pages[page_no]
            for qid, routed in page.routed.items():
                cursor = self._cursor(state, qid)
                if qid not in page.complete:
                    unacked = routed - len(page.acked[qid])
                    cursor.remaining += unacked
                    state.live += unacked
            for start, count, qids in runs:
                # A record still waits unless every queue it counts for that has not
                # completed the page acknowledged it.
                waiting = [page.acked.get(q, set()) for q in qids if q not in page.complete]
                if waiting:
                    done = set.intersection(*waiting) if len(waiting) > 1 else waiting[0]
                    messages += count - _within(done, start, start + count)
        for ack in held:
            target = self._page_of(ack.queue_id, ack.page)
            owner = self._queue_address(ack.queue_id)
            if target is None or owner is None or ack.index in target.acked[ack.queue_id]:
                continue
            cursor = self._cursor(self._addresses[owner], ack.queue_id)
            cursor.held.add(ack.position)
            cursor.remaining -= 1
        return messages
