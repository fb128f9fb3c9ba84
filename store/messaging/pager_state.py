"""What the pager knows (:mod:`store.messaging.pager`): of each page (:class:`PageState`), of
each address (:class:`AddressPaging`), and :class:`PagerBase`, the state every part of the
:class:`~store.messaging.pager.Pager` shares (its ``__init__``) with the lookups they all
use (an address's paging state, its page store, whether a queue still exists).

A queue's cursor (:class:`~store.messaging.pager_cursors.Cursor`) is in
:mod:`store.messaging.pager_cursors`, with what reads through it.

Thread-safety: none of its own; the storage manager's lock guards every call.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from store.journal.api import Journal
from store.messaging.message_records import PagedMessage
from store.messaging.page_cache import PageCache
from store.messaging.page_scan import PagedRun
from store.paging.api import PagePosition, PageStore, PagingManager

if TYPE_CHECKING:
    from store.config import StoreConfig
    from store.messaging.pager_cursors import Cursor

__all__ = ["MAX_RUNS", "AddressPaging", "PageState", "PagerBase"]

#: A page with more runs than this is left out of the page summary (read at the next load):
#: what the pager holds per page stays small whatever the senders interleave.
MAX_RUNS: Final = 1024


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
    #: What the page summary said of the page when the load took it from there (records,
    #: runs, large ids, whether it was the page appends went to: sends may have added to it
    #: since) instead of reading it: checked against the page when it is first read
    #: (``PagerCursors.check_summary``), then None.
    summary: tuple[int, tuple[PagedRun, ...], tuple[int, ...], bool] | None = None


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


class PagerBase:
    """The paging state of every address of one storage manager, which the parts of
    :class:`~store.messaging.pager.Pager` share (see :mod:`store.messaging.pager`).

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
        #: global limits (:mod:`store.messaging.pager_limits`); -1: no limit.
        self._total_bytes = 0
        self._total_messages = 0
        self._global_max_size = config.global_max_size
        self._global_max_messages = config.global_max_messages
        self._doomed: list[int] = []  # large bodies of deleted pages, for the manager to delete
        #: Pages whose completion or deletion failed after the ack, rollback or send that made
        #: them due had been applied (:meth:`PagerDeletion.tidy`): (address, page), tried again.
        self._untidy: set[tuple[str, int]] = set()
        self._tidy_at = 0.0  # (monotonic) not before then
        #: Committed page transactions: transaction id -> its PAGE_TRANSACTION record id.
        self._visible_txs: dict[int, int] = {}
        #: Paged sends of prepared transactions found at load, by transaction id.
        self.pending_sends: dict[int, list[tuple[str, PagePosition, PagedMessage]]] = {}
        #: Ids of the large bodies the pages kept at the last load refer to.
        self.large_ids: set[int] = set()
        #: large paged messages whose bodies the load knows must exist: on a page no queue
        #: acknowledged anything of, every run deliverable (id -> (address, page); pager_load)
        self.needed_large: dict[int, tuple[str, int]] = {}
        #: A read-only tool's load that reads around damage (``StorageManager.load(
        #: skip_damaged=True)``): a browse reads a page's damaged records as holes and lists
        #: them in ``skipped`` (with what the load left out) instead of raising.
        self.skip_damaged = False
        self.skipped: list[str] = []

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
