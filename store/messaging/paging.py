"""Paging for the storage manager (docs/messaging.md, reference §3.5): address limits, the full
policies, paged messages in the address's page store, per-queue cursors, cursor acks in the
message journal, and page deletion.

**Limits.** Every address counts the messages it holds in memory and their encoded bytes
(counted once per message, whatever its queues; a message stops counting when no queue holds
it any more). The address is *full* when ``max-size-bytes`` (≥ 0) is reached or
``max-size-messages`` (≥ 0) messages are held. Then a send, by ``address-full-policy``:

- ``PAGE``: a durable message goes to the address's page store (:class:`PagedMessage`) and
  stays out of memory; the address keeps paging until every paged message is acknowledged, so
  paged messages are delivered after those in memory, in page order;
- ``DROP``: nothing is stored, ``send`` returns None;
- ``FAIL``: :class:`~store.errors.AddressFullError`, nothing stored;
- ``BLOCK``: the sender waits until an ack (from any thread) makes room. A limit of 0 under
  BLOCK can never make room: the configuration refuses it (``ConfigError``, see
  :mod:`store.config.addresses`).

**Cursors.** Each queue reads the pages of its address from its cursor, taking the records
routed to it that it has not acknowledged, only when ``receive`` has nothing ready in memory
(*depaging*; pages are read on the caller's thread, never by a background reader). The ack of a
paged message is an ACKNOWLEDGE_CURSOR record (39, new id). When a queue has acknowledged every
message of a page routed to it, and the page is no longer written to, one journal
transaction adds PAGE_CURSOR_COMPLETE (42) and deletes that page's cursor acks of the queue.
When every queue the page routes to has completed it, the page is deleted, then its 42 records.

**Load.** Every page of every address is read once (the counters are rebuilt, as Artemis's
``rebuildCounters``), except the pages the page summary of the last clean close covers
(:mod:`store.messaging.page_summary`: what a load needs of each page, written by
:meth:`Pager.write_summaries` at close, deleted at open, checked against the pages' lengths),
a run of records with the same transaction and queues at a time
(:mod:`store.messaging.page_scan`, compiled where the C part is built: a deep queue is almost
all paged, and this is what its restart costs), the pages of an address through
``PageStore.read_pages`` (several per query on a database); cursor records of pages or queues
that are gone are deleted and counted in ``cleaned["page_cursors"]``; pages no existing queue
still needs are deleted (``cleaned["pages"]``).

**Transactions obey the limits at ``tx.send``** (docs/messaging.md). A transaction's in-memory sends
are counted against their address from ``tx.send`` (not from commit), so the address is full
when what queues hold plus what open transactions hold reaches the limit, and the policy
applies to the transaction's next send as to any other: PAGE pages it (below), DROP drops it,
FAIL raises ``AddressFullError`` (the transaction stays usable; nothing of that message is
stored). Rollback uncounts them; commit hands them to their queues, which count them from then.
What one transaction holds in memory is therefore bounded by its addresses' limits (plus one
message, as for any sender; non-durable messages under PAGE excepted, below), and once it has
paged to an address its later durable sends there are paged too, so they still become
deliverable in send order.

``BLOCK`` in a transaction: a ``tx.send`` waits for room as a plain send does only while its
transaction holds nothing (no in-memory send to any address, no acknowledged message). A
transaction that holds something fails fast with ``AddressFullError`` instead: the room it
would wait for may be its own (only its commit or rollback frees what it holds, and its caller
is the one waiting), or held by another transaction waiting on it; refusing to wait while
holding is what keeps BLOCK free of such deadlocks. The transaction stays usable: commit or
roll back, then send again.

**Paged transactional sends.** A transaction's paged sends are written to the pages at
``tx.send`` with its transaction id, invisible; at prepare or commit the pages are flushed and
a PAGE_TRANSACTION record (35) joins the journal transaction, so the records are visible
exactly when it commits (at load: a record whose transaction has a committed 35 record is
visible, one of a prepared transaction is pending, any other is never visible). Queues' cursors
go back to a record made visible behind them. A page is kept while it holds records of an
undecided transaction; the 35 record is deleted with the last page holding its records. A
prepared transaction's cursor acks hold their messages across restarts.

**Global limits** (Artemis's ``global-max-size`` / ``global-max-messages``, see
:class:`~store.config.StoreConfig`): the manager also counts what all addresses hold in memory
together. Once that reaches a global limit, every address is full, whatever its own limits
(an address without any is full too), and its own ``address-full-policy`` applies: PAGE pages,
DROP drops, FAIL fails, BLOCK waits for an ack anywhere. ``global-max-size`` is an estimate of
memory, not of record bytes: each message counts its record's bytes plus
:data:`MEMORY_PER_MESSAGE` (what a waiting message costs in memory beyond its record, measured
by ``bench/deep_queues.py`` and held to by ``tests/messaging/test_deep_memory.py``), as
Artemis counts a message's memory estimate. An address's own ``max-size-bytes`` still counts
record bytes (its meaning before the global limits existed). Because paged messages are not
loaded at start-up, the global limit bounds what a restart holds too; an address paging
because of it keeps paging until its paged messages are acknowledged, as for its own limit,
so delivery stays in send order.

Non-durable messages are never paged (they are never written): they stay in memory, past the
limit.

Thread-safety: none of its own; the storage manager's lock guards every call.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from store.errors import AddressFullError
from store.journal.api import Journal
from store.messaging.message_records import PagedMessage
from store.messaging.page_cache import PageCache
from store.messaging.page_records import (
    ACKNOWLEDGE_CURSOR,
    PAGE_CURSOR_COMPLETE,
    CursorAck,
    PageComplete,
)
from store.messaging.page_scan import PagedRun, paged_runs
from store.messaging.page_summary import PageSummary, decode_summary, encode_summary
from store.paging.api import PagePosition, PageStore, PagingManager, make_position

if TYPE_CHECKING:
    from store.config import StoreConfig

__all__ = ["BLOCK", "DROP", "MEMORY", "MEMORY_PER_MESSAGE", "PAGE", "AddressPaging", "Pager"]

log = logging.getLogger(__name__)

MEMORY: Final = "MEMORY"
PAGE: Final = "PAGE"
DROP: Final = "DROP"
BLOCK: Final = "BLOCK"
#: What ``global-max-size`` counts for a message held in memory beyond its record's bytes:
#: its StoredMessage, queue entry, heap item and dict slots (``bench/deep_queues.py`` measures
#: the whole; ``tests/messaging/test_deep_memory.py`` checks a load stays within it).
MEMORY_PER_MESSAGE: Final = 900


#: How many paged messages a queue's cursor reads ahead at most (:meth:`Pager.depage`): a
#: receive of a deep queue then pops the next one instead of walking to it through the
#: page's records (issue 27: 57k of a paged send+receive+ack's 223k instructions were that
#: receive), and :data:`READ_AHEAD_BYTES` of their records at most (past the first ``n``
#: asked for), so that large inline bodies are not held by the dozen.
READ_AHEAD: Final = 64
READ_AHEAD_BYTES: Final = 256 * 1024


@dataclass(eq=False)
class PageState:
    """What the manager knows of one page: per queue id, how many of its records are routed
    there, which indexes are acknowledged (and by which cursor-ack records), and the
    PAGE_CURSOR_COMPLETE record of queues that completed it."""

    size: int = 0
    routed: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    acked: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    ack_records: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    complete: dict[int, int] = field(default_factory=dict)
    #: Page transactions with records on this page, and how many of its records belong to a
    #: transaction not decided yet (the page is kept while any does).
    tx_ids: set[int] = field(default_factory=set)
    pending: int = 0
    #: The page's records as runs (``page_scan``: what a load needs of them) and the ids of
    #: its large messages, kept as records are read or appended for the page summary a clean
    #: close writes (``page_summary``); None when not known whole (then the next load reads
    #: the page).
    runs: list[PagedRun] | None = field(default_factory=list)
    large: list[int] = field(default_factory=list)


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


#: A page with more runs than this is left out of the page summary (read at the next load):
#: what the pager holds per page stays small whatever the senders interleave.
_MAX_RUNS: Final = 1024

#: A run of a page's records as the load accounted it: (start, count, the live queues its
#: records count for).
_LoadedRun = tuple[int, int, tuple[int, ...]]


def _within(indexes: set[int], start: int, end: int) -> int:
    """How many of ``indexes`` lie in ``start`` .. ``end - 1``, in whichever is shorter."""
    if len(indexes) <= end - start:
        return sum(1 for i in indexes if start <= i < end)
    return sum(1 for i in range(start, end) if i in indexes)


def _note_run(page: PageState, index: int, paged: PagedMessage) -> None:
    """Add the record ``paged`` appended at ``index`` to ``page``'s runs (O(1)); the runs
    become None (not known) when the page has more than :data:`_MAX_RUNS` or the record does
    not follow the last one known."""
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
    if len(runs) >= _MAX_RUNS:
        page.runs = None
        return
    runs.append((index, 1, paged.tx_id, paged.queue_ids))


def _keep(record_id: int) -> None:
    """What a read-only load does instead of deleting a stale record: nothing."""


@dataclass(eq=False)
class AddressPaging:
    """One address: its limits, what it holds in memory, its pages and its queues' cursors."""

    address: str
    policy: str
    max_bytes: int
    max_messages: int
    memory_bytes: int = 0
    memory_messages: int = 0
    pages: dict[int, PageState] = field(default_factory=dict)
    cursors: dict[int, Cursor] = field(default_factory=dict)
    live: int = 0  # paged refs not yet acknowledged (depaged and held ones included)
    cache: dict[int, PageCache] = field(default_factory=dict)
    last_page: int = 0

    def full(self) -> bool:
        """True when the address's memory limit is reached. Raises nothing."""
        return (0 <= self.max_bytes <= self.memory_bytes) or (
            0 <= self.max_messages <= self.memory_messages
        )


class Pager:
    """The paging state of every address of one storage manager (see the module docstring).

    ``journal`` is the message journal, ``next_id`` the id generator, ``paging`` the store's
    page stores, ``queue_address`` the address of an existing queue id (None: no such queue).
    """

    def __init__(
        self,
        config: StoreConfig,
        journal: Journal,
        paging: PagingManager,
        next_id: Callable[[], int],
        queue_address: Callable[[int], str | None],
    ) -> None:
        self._config = config
        self._journal = journal
        self._paging = paging
        self._next_id = next_id
        self._queue_address = queue_address
        self._addresses: dict[str, AddressPaging] = {}
        self._stores: dict[str, PageStore] = {}
        #: What every address holds in memory together (record bytes, messages), against the
        #: global limits (module docstring); -1: no limit.
        self._total_bytes = 0
        self._total_messages = 0
        self._global_max_size = config.global_max_size
        self._global_max_messages = config.global_max_messages
        self._doomed: list[int] = []  # large bodies of deleted pages, for the manager to delete
        #: Committed page transactions: transaction id -> its PAGE_TRANSACTION record id.
        self._visible_txs: dict[int, int] = {}
        #: Paged sends of prepared transactions found at load, by transaction id.
        self.pending_sends: dict[int, list[tuple[str, PagePosition, PagedMessage]]] = {}
        #: Ids of the large bodies the pages kept at the last load refer to.
        self.large_ids: set[int] = set()

    @property
    def doomed(self) -> bool:
        """True when :meth:`take_doomed` has ids to hand out (a hint: read without a lock)."""
        return bool(self._doomed)

    def take_doomed(self) -> list[int]:
        """The ids of large bodies whose pages were deleted since the last call (cleared)."""
        doomed, self._doomed = self._doomed, []
        return doomed

    def _live_queue(self, qid: int) -> bool:
        return self._queue_address(qid) is not None

    def address_states(self) -> list[tuple[str, AddressPaging]]:
        """Every address's paging state made so far, with its name (a copy of the list: the
        caller may go on using the pager). Raises nothing."""
        return list(self._addresses.items())

    def address(self, name: str) -> AddressPaging:
        """The paging state of ``name``, made from its address settings on first use.
        Raises ConfigError when its merged settings can never admit a message (a limit of 0
        under BLOCK from two matches the configuration could not check together)."""
        state = self._addresses.get(name)
        if state is None:
            s = self._config.address_settings_for(name)
            state = AddressPaging(
                name, s.address_full_policy.upper(), s.max_size_bytes, s.max_size_messages
            )
            self._addresses[name] = state
        return state

    def _store(self, address: str) -> PageStore:
        """The address's page store, kept once made (the storage manager never removes one:
        a send pages without the paging manager's lookup)."""
        store = self._stores.get(address)
        if store is None:
            store = self._stores[address] = self._paging.store(address)
        return store

    # -- sends ------------------------------------------------------------------------------

    def admit(self, address: str, *, durable: bool, transactional: bool) -> str:
        """Where a new message of ``address`` goes: MEMORY, PAGE, DROP or BLOCK (wait and ask
        again). ``transactional`` sends are judged the same way (they page invisibly until
        commit): the transaction counts its in-memory sends with :meth:`hold_memory` at
        ``tx.send``, so they weigh on the limit as the queues' messages do. Raises
        AddressFullError under the FAIL policy, ConfigError for settings that can never
        admit a message (see :meth:`address`)."""
        state = self.address(address)
        if state.policy == PAGE:
            if durable and (state.live > 0 or state.full() or self.global_full()):
                # A transaction's paged sends count in ``live`` only at commit: logged there
                # once per send, the line would repeat for every send of a large transaction.
                if state.live == 0 and not transactional:
                    log.info("address %r starts paging: %s", address, self._fullness(state))
                return PAGE
            return MEMORY
        if not state.full() and not self.global_full():
            return MEMORY
        if state.policy == "FAIL":
            raise AddressFullError(
                f"address {address!r} is full ({self._fullness(state)}) and its"
                " address-full-policy is FAIL"
            )
        return DROP if state.policy == DROP else BLOCK

    def global_full(self) -> bool:
        """True when what all addresses hold in memory reaches ``global-max-size`` (as an
        estimate: record bytes plus :data:`MEMORY_PER_MESSAGE` each) or
        ``global-max-messages``. Raises nothing."""
        messages = self._total_messages
        return (
            0 <= self._global_max_size <= self._total_bytes + messages * MEMORY_PER_MESSAGE
        ) or (0 <= self._global_max_messages <= messages)

    def _fullness(self, state: AddressPaging) -> str:
        """Why ``state`` is full, for a message: its own counts, and the global ones when
        those are reached."""
        own = f"{state.memory_messages} messages, {state.memory_bytes} bytes"
        if not self.global_full():
            return own
        estimate = self._total_bytes + self._total_messages * MEMORY_PER_MESSAGE
        return (
            f"{own}; all addresses hold {self._total_messages} messages, about {estimate}"
            f" bytes of memory: global-max-size {self._global_max_size},"
            f" global-max-messages {self._global_max_messages}"
        )

    def refuse_block(self, address: str) -> AddressFullError:
        """The error for a ``tx.send`` to ``address``, full under BLOCK, by a transaction that
        holds memory and so may not wait (module docstring). Returns it. Raises nothing."""
        state = self.address(address)
        return AddressFullError(
            f"address {address!r} is full ({self._fullness(state)}) and its"
            " address-full-policy is BLOCK; a transaction"
            " that holds messages (sent or acknowledged) does not wait, since the room it"
            " would wait for may be its own: commit or roll back, then send again"
        )

    def hold_memory(self, address: str, size: int, delta: int) -> None:
        """Count (``delta`` 1) or uncount (-1) a message of ``size`` bytes in memory."""
        state = self.address(address)
        state.memory_bytes += size * delta
        state.memory_messages += delta
        self._total_bytes += size * delta
        self._total_messages += delta

    def hold_memory_total(self, address: str, size: int, count: int) -> None:
        """Count ``count`` messages of ``size`` bytes in all in memory (a load's messages of
        one address at once). Returns None. Raises nothing."""
        state = self.address(address)
        state.memory_bytes += size
        state.memory_messages += count
        self._total_bytes += size
        self._total_messages += count

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
                self._check_page(state, closed)
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

    def _visible(self, paged: PagedMessage) -> bool:
        return paged.tx_id == 0 or paged.tx_id in self._visible_txs

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
                self._check_page(state, position.page)

    def _cursor(self, state: AddressPaging, qid: int) -> Cursor:
        cursor = state.cursors.get(qid)
        if cursor is None:
            first = min(state.pages, default=0)
            cursor = state.cursors[qid] = Cursor(PagePosition(first, 0))
        return cursor

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
            cached = state.cache[page] = PageCache(raw)
        return cached

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
                for index, raw in enumerate(store.read_page(page_no)):
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

    def page_records(self, address: str, page: int) -> list[bytes]:
        """The records of page ``page`` of ``address`` as its page store holds them (read
        now, nothing cached, nothing changed; decode one with ``PagedMessage.decode``).
        Raises what the page store raises."""
        return self._store(address).read_page(page)

    # -- acknowledgements -------------------------------------------------------------------

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
        self._check_page(state, page_no)

    def unhold(self, address: str, qid: int, position: PagePosition) -> None:
        """A held paged message (a prepared transaction's ack, rolled back) is deliverable
        again: the queue's cursor goes back to it."""
        state = self.address(address)
        cursor = self._cursor(state, qid)
        if position in cursor.held:
            cursor.held.discard(position)
            cursor.remaining += 1
            cursor.go_back(position)

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
        self._journal.append_add_tx(tx, rid, PAGE_CURSOR_COMPLETE, body)
        self._journal.append_deletes_tx(tx, page.ack_records.pop(qid, []))
        self._journal.append_commit(tx, sync=False)
        page.complete[qid] = rid

    def _delete_page(self, state: AddressPaging, page_no: int) -> None:
        page = state.pages[page_no]
        if page.runs is not None:  # known whole (``_note_run``): its large ids too
            self._doomed.extend(page.large)
        else:
            records = self._records(state, page_no)
            self._doomed.extend(
                records[i].message_id for i in range(len(records)) if records[i].record_type == 30
            )
        del state.pages[page_no]
        state.cache.pop(page_no, None)
        self._store(state.address).delete_page(page_no)
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
            self._check_page(state, page_no)

    # -- load -------------------------------------------------------------------------------

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
        routes: dict[tuple[str, int], list[_LoadedRun]] = {}
        large: dict[tuple[str, int], list[int]] = {}
        for address in self._paging.addresses():
            state = self.address(address)
            store = self._store(address)
            for page_no, size, runs, large_ids, records in self._page_runs(store, sweep=sweep):
                known = runs if len(runs) <= _MAX_RUNS else None
                page = state.pages[page_no] = PageState(size=size, runs=known, large=large_ids)
                large[address, page_no] = large_ids
                routes[address, page_no] = [
                    self._load_run(address, page, page_no, run, records, page_txs, pending_txs)
                    for run in runs
                ]
            state.pages = dict(sorted(state.pages.items()))
            state.last_page = store.current_page
        self._visible_txs = {
            tx: rid
            for tx, rid in page_txs.items()
            if any(tx in p.tx_ids for a in self._addresses.values() for p in a.pages.values())
        }
        for tx, rid in page_txs.items():
            if tx not in self._visible_txs:
                delete(rid)
                cleaned["page_transactions"] += 1
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
        return messages, dict(cleaned)

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
