"""``StorageManager.load()``: the journals' loads replayed (:mod:`store.messaging.recovery`) and
applied to a fresh manager, with the sweep of what nothing refers to.

Kept apart from :mod:`store.messaging.manager` to keep that module about the live operations;
it fills the manager's :class:`~store.messaging.state.ManagerState` through that state's
attributes and methods.

Thread-safety: called by ``StorageManager.load`` with the state's lock held.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import time
from collections import defaultdict
from collections.abc import Callable

from store.errors import CorruptionError
from store.messaging import recovery
from store.messaging.bodies import BODY_HINT, body_opener, lost_body
from store.messaging.message_records import PagedMessage
from store.messaging.policies import ORIG_ADDRESS
from store.messaging.queues import QueueEntry
from store.messaging.records import ADD_LARGE_MESSAGE
from store.messaging.recovery import (
    LoadedMessage,
    MessagesState,
    PreparedState,
    Progress,
    Recovery,
    replay_bindings,
    replay_messages,
)
from store.messaging.state import PREPARED, ManagerState, TransactionWork
from store.messaging.stored import StoredMessage
from store.messaging.transactions import Transaction
from store.messaging.values import Xid
from store.speedups import SPEEDUPS

__all__ = ["load_into"]

#: The compiled loop of :func:`_messages` (``store/_speedups_load.c``; ``keep`` the
#: reference), or None.
COMPILED_KEEP: Callable[..., None] | None = getattr(SPEEDUPS, "keep_run", None)

log = logging.getLogger(__name__)


def load_into(st: ManagerState, progress: Progress | None) -> Recovery:
    """Load both journals of ``st``'s store into ``st``; returns the Recovery. Raises
    CorruptionError for a record that does not decode, and what the journals raise.

    The cyclic garbage collector is paused meanwhile, as in the journals' own loads: a load
    creates a few long-lived objects per message and no cycles, and the collector would walk
    them all again and again (about a third of the time of a large load). When it resumes,
    what the load made goes straight to its oldest generation (:func:`_to_oldest`)."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load_into(st, progress)
    finally:
        if gc_was_enabled:
            _to_oldest()
            gc.enable()


def _to_oldest() -> None:
    """Move every object the collector tracks into its oldest generation, without walking
    them (``gc.freeze`` then ``gc.unfreeze``). Raises nothing.

    With the collector paused, a load's objects (five per message: the stored message, its
    queue entry, its refs dict, …) all stay in the youngest generation. The first
    allocation after the load then set off a collection of that generation, which walked
    them all: 1.0 s right after a load of 1,000,000 messages here (the first ``receive``
    took it), with a walk of the middle generation to follow. Objects that outlive a load
    are long-lived; this puts them where those collections would have moved them. Only a
    full collection walks them now, as it would have anyway. Skipped while the program has
    frozen objects of its own (``gc.freeze``): ``unfreeze`` would release them too."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


def _load_into(st: ManagerState, progress: Progress | None) -> Recovery:
    started = time.monotonic()
    store = st.store
    log.info("messaging load: started")
    bindings = replay_bindings(store.bindings.load(), progress, started=started)
    messages = replay_messages(store.messages.load(), progress, started=started)
    cleaned: defaultdict[str, int] = defaultdict(int)

    sweep = not st.read_only
    stale_counters = st.ids.recover(
        bindings.counters, max(bindings.highest_id, messages.highest_id), sweep=sweep
    )
    if stale_counters:
        cleaned["id_counters"] = stale_counters
    st.addresses.update(bindings.addresses)  # empty until now
    for info in bindings.queues.values():
        if info.address not in st.addresses:
            log.warning("queue %r is bound to a missing address %r", info.name, info.address)
        st.add_queue(info)

    _messages(st, messages, cleaned, progress, started)
    _duplicate_ids(st, messages, cleaned, sweep)
    held = [ack for state in messages.prepared for _, ack in state.cursor_acks]
    pending = {tx.tx_id for tx in messages.prepared if tx.page_tx_record is not None}
    paged, paging_cleaned = st.pager.load(
        messages.cursor_acks, messages.completes, held, messages.page_txs, pending, sweep=sweep
    )
    for key, count in paging_cleaned.items():
        cleaned[key] += count
    prepared: dict[Xid, Transaction] = {}
    for state in messages.prepared:
        prepared[state.xid] = _prepared(st, state)
    present = st.large.ids()
    _check_bodies(st, messages, present)
    _check_paged_bodies(st, present)
    swept = _large_bodies(st, messages, present) if sweep else 0
    if swept:
        cleaned["large_bodies"] = swept

    rec = Recovery(
        addresses={name: info for name, (_, info) in st.addresses.items()},
        queues={q.info.name: q.info for q in st.queues.values()},
        prepared=prepared,
        messages=len(st.messages) + paged,
        cleaned=dict(cleaned),
        dead_lettered=dict(st.policies.waiting_dead_lettered),
        expired=dict(st.policies.waiting_expired),
    )
    log.info(
        "messaging load: done elapsed=%.2fs addresses=%d queues=%d messages=%d in_memory=%d"
        " paged=%d prepared=%d cleaned=%s",
        time.monotonic() - started,
        len(rec.addresses),
        len(rec.queues),
        rec.messages,
        len(st.messages),
        paged,
        len(rec.prepared),
        rec.cleaned,
    )
    return rec


def _messages(
    st: ManagerState,
    state: MessagesState,
    cleaned: defaultdict[str, int],
    progress: Progress | None,
    started: float,
) -> None:
    """Keep the messages some existing queue holds, delete the others, and fill the queues,
    each in one go with its entries in the order the refs were written. Logs the queues'
    progress as the replay does (every ``_PROGRESS_EVERY`` entries and at the end, not once
    per queue: a store with thousands of queues would log thousands of lines)."""
    delete = st.journal.append_delete if not st.read_only else None
    queues_by_id = st.queues_by_id
    existing = queues_by_id.keys()
    kept = st.messages
    memory: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])  # address: size, count

    def keep(mid: int, loaded: LoadedMessage) -> None:
        refs = loaded.refs  # kept as the stored message's refs when all its queues exist
        live = refs if refs.keys() <= existing else {q: refs[q] for q in refs if q in existing}
        if not live:
            if delete is not None:
                delete(mid)
            cleaned["messages"] += 1
            return
        if len(live) == 1:  # held in two slots, under the queue's own id (one int for all)
            ((qid, entry),) = live.items()
            live = {queues_by_id[qid].info.id: entry}
        kept[mid] = _stored(st, loaded, live)
        held = memory[(loaded.header or loaded.message).address]  # type: ignore[union-attr]
        held[0] += loaded.size
        held[1] += 1

    if COMPILED_KEEP is not None:  # keep() for the common message, compiled; the rest to it
        types = (LoadedMessage, StoredMessage)
        COMPILED_KEEP(state.messages, queues_by_id, kept, memory, *types, keep)
    else:
        for mid, loaded in state.messages.items():
            keep(mid, loaded)
    for address, (size, count) in memory.items():
        st.pager.hold_memory_total(address, size, count)
    st.order = state.orders  # sends are numbered after every loaded ref
    now = st.clock()
    owners = state.messages
    total = sum(len(entries) for entries in state.queue_entries.values())
    done, every = 0, recovery.progress_every()
    for qid, entries in state.queue_entries.items():
        before, done = done, done + len(entries)
        queue = queues_by_id.get(qid)
        if queue is not None:
            if qid in state.stale:  # keep the entries their message's refs still name
                entries = [e for e in entries if owners[e.message_id].refs.get(qid) is e]
            queue.add_entries(entries, now)
        if done // every > before // every or done == total:
            log.info(
                "messaging load: phase=queues done=%d total=%d messages=%d elapsed=%.2fs",
                done,
                total,
                len(kept),
                time.monotonic() - started,
            )
        if progress is not None:
            progress("queues", done, total)


def _stored(st: ManagerState, loaded: LoadedMessage, refs: dict[int, QueueEntry]) -> StoredMessage:
    """The manager's record of a loaded message; a large one reads its body from the store,
    an undecoded one keeps its encoded body."""
    m = loaded.message
    if m is None:
        return StoredMessage(
            None, refs, loaded.size, encoded=loaded.encoded, message_id=loaded.message_id
        )
    if m.properties and ORIG_ADDRESS in m.properties:  # (a message without properties is
        st.policies.count_waiting(m)  # held encoded, above: none of those was moved)
    if loaded.large_size is not None:
        assert m.message_id is not None
        opener = body_opener(st.large, m.message_id, loaded.large_size)
        m = dataclasses.replace(m, _opener=opener)
    return StoredMessage(m, refs, loaded.size, large_size=loaded.large_size)


def _check_bodies(st: ManagerState, state: MessagesState, present: list[int]) -> None:
    """Every large message the message journal holds (queued, or sent by a prepared
    transaction) has its body, of the size its record says; checked, not read (a header read
    per body; one query on a database). Paged messages' bodies: :func:`_check_paged_bodies`.
    Raises LostDataError for a body that is gone, CorruptionError for one of another size
    (each naming the body and the message), and what the large-message store raises."""
    wanted = {mid: s.large_size for mid, s in st.messages.items() if s.large_size is not None}
    for tx in state.prepared:
        for loaded, _ in tx.sends:
            if loaded.large_size is not None:
                wanted[loaded.message_id] = loaded.large_size
    if not wanted:
        return
    have = set(present)
    skip = st.pager.skip_damaged
    damaged: dict[int, CorruptionError] = {}
    if not skip:
        sizes = st.large.sizes(mid for mid in wanted if mid in have)
    else:  # one at a time: a damaged header is that body's damage only
        sizes = {}
        for mid in wanted:
            try:
                sizes.update(st.large.sizes([mid]) if mid in have else {})
            except CorruptionError as exc:
                damaged[mid] = exc
    for mid, size in sorted(wanted.items()):
        found = sizes.get(mid)
        error: CorruptionError
        if mid in damaged:
            error = damaged[mid]
        elif found is None:
            error = lost_body(st.large, mid, f"its record says {size} bytes")
        elif found != size:
            reason = f"the body of large message {mid} holds {found} bytes, its record {size}"
            error = CorruptionError(st.large.path(mid), 0, reason, hint=BODY_HINT)
        else:
            continue
        if not skip:
            raise error
        _leave_out(st, mid)
        st.pager.skipped.append(f"{error} (message {mid} left out)")


def _check_paged_bodies(st: ManagerState, present: list[int]) -> None:
    """Every large paged message of a page no queue acknowledged anything of, each of whose
    records is still deliverable (``Pager.needed_large``, from the load's runs: no page is
    read for it), has its body. On the other pages a body may be gone by right (its message
    acknowledged by every queue, or rolled back: the load's sweep and a rollback delete such
    bodies while their page stays), so theirs are checked when opened
    (:func:`store.messaging.bodies.body_opener`). Its size is checked when it is opened too
    (the summary a load reads instead of the page does not hold it). Raises LostDataError
    naming the body, the message and its page; a skip-damaged load checks nothing here (a
    browse of the page meets it)."""
    needed = st.pager.needed_large
    if not needed or st.pager.skip_damaged:
        return
    have = set(present)
    for mid in sorted(needed):
        if mid not in have:
            address, page = needed[mid]
            raise lost_body(st.large, mid, f"a paged message of page {page} of {address!r}")


def _leave_out(st: ManagerState, mid: int) -> None:
    """A skip-damaged load's message ``mid`` (its body lost) taken off its queues and out of
    memory, as if it were not in the store. Raises nothing."""
    stored = st.messages.pop(mid, None)
    if stored is None:
        return  # sent by a prepared transaction: its body's read names it in the export
    for qid in list(stored.refs):
        queue = st.queues_by_id.get(qid)
        if queue is not None:
            queue.remove(mid)
    st.pager.hold_memory(stored.peek().address, stored.size, -1)


def _large_bodies(st: ManagerState, state: MessagesState, present: list[int]) -> int:
    """Delete the large bodies no message refers to (``present``: the store's body ids);
    returns how many.

    The windows that leave such a body (each found by the kill -9 rounds of
    ``tests/messaging/test_kill9.py``, which count them after every load):

    - a body completed before its message's record became durable (the body is written
      first, outside the lock), or whose transaction never committed: no record names it;
    - a crash between a message's durable delete and its body's delete (that order, so that
      no message is ever left without its body);
    - a paged message that can never be delivered again: acknowledged by every queue it was
      routed to, routed to no queue that still exists, or sent in a transaction that never
      committed (its page record stays, invisible). Its body was kept until its whole page
      goes (:mod:`store.messaging.pager_deletion` deletes the bodies of a page with it), so a
      page that some queue never finishes kept them for good: this was the leak the rounds saw
      (98 bodies for 96 large messages), and what a deleted page's sweep then finds already
      gone is not an error (the manager's delete of an absent body logs at debug level).
    """
    wanted = {mid for mid, s in st.messages.items() if s.large_size is not None}
    wanted |= {
        loaded.message_id
        for tx in state.prepared
        for loaded, _ in tx.sends
        if loaded.large_size is not None
    }
    bodies = [mid for mid in present if mid not in wanted]
    paged = st.pager.large_ids
    if any(mid in paged for mid in bodies):
        wanted |= _deliverable_paged(st, state)
    orphans = [mid for mid in bodies if mid not in wanted]
    st.delete_bodies(orphans, flush=True)
    return len(orphans)


def _deliverable_paged(st: ManagerState, state: MessagesState) -> set[int]:
    """Ids of the large paged messages some queue may still receive (or a prepared
    transaction may still commit). Reads every page again, one at a time, without caching
    it; done only when a body that only a page names exists. Raises what the page stores
    raise."""
    pager = st.pager
    committed = state.page_txs.keys()
    pending = {tx.tx_id for tx in state.prepared if tx.page_tx_record is not None}
    keep: set[int] = set()
    for address, paging in pager.address_states():
        if not paging.pages:
            continue  # no page store to open (opening one would create it)
        store = st.store.paging.store(address)
        for page_no, page in paging.pages.items():
            for index, raw in enumerate(store.read_page(page_no)):
                p = PagedMessage.decode(raw)
                if p.record_type != ADD_LARGE_MESSAGE:
                    continue
                if p.tx_id and p.tx_id in pending:
                    keep.add(p.message_id)
                    continue
                if p.tx_id and p.tx_id not in committed:
                    continue  # rolled back, or never committed
                if any(
                    st.queue_address(q) is not None
                    and q not in page.complete
                    and index not in page.acked.get(q, ())
                    for q in p.queue_ids
                ):
                    keep.add(p.message_id)
    return keep


def _duplicate_ids(
    st: ManagerState, state: MessagesState, cleaned: defaultdict[str, int], sweep: bool
) -> None:
    by_address: dict[str, list[tuple[bytes, int]]] = defaultdict(list)
    for rid, record in state.dups:
        by_address[record.address].append((record.dup_id, rid))
    for address, entries in by_address.items():
        for rid in st.dup_cache(address).load(entries):
            if sweep:
                st.journal.append_delete(rid)
            cleaned["duplicate_ids"] += 1


def _prepared(st: ManagerState, state: PreparedState) -> Transaction:
    work = TransactionWork(state.tx_id, state=PREPARED, xid=state.xid, wrote=True)
    for loaded, queue_ids in state.sends:
        work.sends.append((_stored(st, loaded, {}), queue_ids))
    for mid, qid in state.acks:
        queue = st.queues_by_id.get(qid)
        if queue is not None and mid in queue:
            queue.hold(mid, delivered_only=False)
            work.acks.append((qid, mid))
    work.paged_sends = st.pager.pending_sends.pop(state.tx_id, [])
    work.page_tx_record = state.page_tx_record
    for rid, ack in state.cursor_acks:
        address = st.queue_address(ack.queue_id)
        if address is not None:
            work.held_pages.append((address, ack.queue_id, ack.position, rid))
    for address, dup, rid in state.dups:
        st.dup_cache(address).reserve(dup)
        work.dups.append((address, dup, rid))
    if state.xid in st.prepared:
        log.warning("two prepared transactions have %r; the later one wins", state.xid)
    st.add_prepared(work)
    return Transaction(st, work)
