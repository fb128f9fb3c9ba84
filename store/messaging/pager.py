"""Paging for the storage manager (docs/messaging.md, reference §3.5): address limits, the full
policies, paged messages in the address's page store, per-queue cursors, cursor acks in the
message journal, and page deletion, all behind one object, the :class:`Pager` that
:class:`~store.messaging.state.ManagerState` holds.

The pager is one class written in parts, one module each, every part holding its own section
of the behaviour in its docstring:

- :mod:`~store.messaging.pager_state` — what the pager knows: ``PageState`` per page,
  :class:`AddressPaging` per address, and ``PagerBase``, the state all parts share;
- :mod:`~store.messaging.pager_limits` — limits and admission: ``address-full-policy``,
  ``global-max-size`` / ``global-max-messages``, what each address holds in memory;
- :mod:`~store.messaging.pager_sends` — paged sends and the page transactions that make a
  transaction's paged sends visible at commit;
- :mod:`~store.messaging.pager_cursors` — each queue's ``Cursor``, depaging, the read-ahead,
  the page cache, the read-only browse;
- :mod:`~store.messaging.pager_deletion` — cursor acks, a page's completion, page deletion,
  a deleted queue's share of the pages;
- :mod:`~store.messaging.pager_load` — the load that rebuilds pages and cursors, its sweep,
  and the page summaries of a clean close.

Why parts of one class (mixins) rather than objects the pager delegates to: ``page``,
``depage``, ``acked`` and ``_check_page`` run once per message of a deep queue, and one
instance with one ``__dict__`` keeps each of their ``self.x`` lookups and calls what they were
in the single class this was (``bench/paged_cycle.py`` measures it); a delegating facade would
add a call per message. The parts build on one another in one direction (``PagerLimits`` and
``PagerCursors`` on ``PagerBase``, ``PagerDeletion`` on ``PagerCursors``, ``PagerSends`` and
``PagerLoad`` on ``PagerDeletion``), so each part's module imports only the parts it calls,
and :class:`Pager` joins the three at the top. The modules are named ``pager*`` (not
``paging``) so that nothing in :mod:`store.messaging` shares a name with the page stores'
package :mod:`store.paging`; they stay flat modules beside the rest of
:mod:`store.messaging`, as its other concerns are. Every part logs to
``store.messaging.paging``, the logger this code always logged to.

Callers import :class:`Pager` and the admission decisions (:data:`MEMORY`, :data:`PAGE`,
:data:`DROP`, :data:`BLOCK`) from here.

Thread-safety: none of its own; the storage manager's lock guards every call.
"""

from __future__ import annotations

from store.messaging.pager_limits import (
    BLOCK,
    DROP,
    MEMORY,
    MEMORY_PER_MESSAGE,
    PAGE,
    PagerLimits,
)
from store.messaging.pager_load import PagerLoad
from store.messaging.pager_sends import PagerSends
from store.messaging.pager_state import AddressPaging

__all__ = ["BLOCK", "DROP", "MEMORY", "MEMORY_PER_MESSAGE", "PAGE", "AddressPaging", "Pager"]


class Pager(PagerLimits, PagerSends, PagerLoad):
    """The paging state of every address of one storage manager (see the module docstring
    and each part's).

    ``Pager(config, journal, paging, next_id, queue_address)``: ``journal`` is the message
    journal, ``next_id`` the id generator, ``paging`` the store's page stores,
    ``queue_address`` the address of an existing queue id (None: no such queue). Built once
    by the storage manager's state; every method is called with the manager's lock held.

    What the other modules call, by part: :meth:`admit`, :meth:`refuse_block`,
    :meth:`hold_memory`, :meth:`hold_memory_total` (limits); :meth:`page`,
    :meth:`commit_paged`, :meth:`rollback_paged` (sends); :meth:`remaining`,
    :meth:`depage`, :meth:`unhold`, :meth:`browse_refs`, :meth:`page_records` (cursors);
    :meth:`ack`, :meth:`cursor_ack_tx`, :meth:`acked`, :meth:`drop_queue` (deletion);
    :meth:`load`, :meth:`write_summaries` (load); :meth:`address`, :meth:`address_states`,
    :attr:`doomed`, :meth:`take_doomed`, :attr:`pending_sends`, :attr:`large_ids` (state).
    """
