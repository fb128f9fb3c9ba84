"""What a messaging load reads of a page: runs of paged messages instead of one object each.

A load reads every page of every address once (``Pager.load``: the per-queue counters are
rebuilt from the records, as Artemis's ``rebuildCounters``). With the global limit, a deep
queue is almost all paged, so this is the part of a restart that grows with what is waiting.
What the load needs of a record is only its transaction id, its queues and, for a large
message (type 30), its id; consecutive records of a page almost always share the first two
(one producer's sends to one address), so :func:`paged_runs` gives the page as *runs*:

    (start, count, tx_id, queue_ids)   records start .. start + count - 1, all with this
                                       transaction id (0: none) and these queue ids

and the ids of the page's large messages, in page order. The load then accounts a run at a
time (counts multiplied), never building a :class:`PagedMessage` per record.

Where the compiled module is built (:data:`~store.speedups.SPEEDUPS`), its ``paged_runs``
(a list of records) and ``paged_runs_in`` (a :class:`~store.paging.format.PageRecords`, the
page's bytes and where each record is: what ``PageStore.read_pages`` gives, with no bytes
object per record) do this in C for pages whose records are all in the plain layout
(:meth:`PagedMessage.decode`'s two-struct path); for any other page it answers None and
:func:`python_paged_runs` (the reference and the fallback) decodes each record, so a bad
record raises the same ValueError either way. tests/messaging/test_page_scan.py compares the
two.

Thread-safety: pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

from store.messaging.codec import VERSION
from store.messaging.message_records import PagedMessage
from store.paging.format import PageRecords
from store.speedups import SPEEDUPS

__all__ = ["PagedRun", "paged_runs", "per_record", "python_paged_runs"]

_COMPILED_RUNS = getattr(SPEEDUPS, "paged_runs", None)
_COMPILED_RUNS_IN = getattr(SPEEDUPS, "paged_runs_in", None)

#: (start, count, tx_id, queue_ids): ``count`` consecutive records from index ``start`` with
#: the same transaction id and queue ids.
PagedRun: TypeAlias = tuple[int, int, int, tuple[int, ...]]


def paged_runs(records: Sequence[bytes]) -> tuple[list[PagedRun], list[int]]:
    """The runs of a page's records (module docstring) and the message ids of its large
    messages (type 30), in page order. Raises ValueError for a record that is not a paged
    message, as :meth:`PagedMessage.decode` does."""
    got: tuple[list[PagedRun], list[int]] | None = None
    if _COMPILED_RUNS_IN is not None and isinstance(records, PageRecords):
        got = _COMPILED_RUNS_IN(records.data, records.bounds, VERSION)
    elif _COMPILED_RUNS is not None and type(records) is list:
        got = _COMPILED_RUNS(records, VERSION)
    if got is not None:
        return got
    return python_paged_runs(records)


def python_paged_runs(records: Sequence[bytes]) -> tuple[list[PagedRun], list[int]]:
    """:func:`paged_runs` in Python: the reference the compiled one is tested against, and
    the fallback. Same argument, result and errors."""
    runs: list[PagedRun] = []
    large: list[int] = []
    start, tx_id = 0, 0
    queue_ids: tuple[int, ...] = ()
    for index, data in enumerate(records):
        paged = PagedMessage.decode(data)
        if paged.record_type == 30:
            large.append(paged.message_id)
        if index and paged.tx_id == tx_id and paged.queue_ids == queue_ids:
            continue
        if index:
            runs.append((start, index - start, tx_id, queue_ids))
        start, tx_id, queue_ids = index, paged.tx_id, paged.queue_ids
    if records:
        runs.append((start, len(records) - start, tx_id, queue_ids))
    return runs, large


def per_record(runs: Sequence[PagedRun]) -> list[tuple[int, tuple[int, ...]]]:
    """(transaction, queue ids) of each record ``runs`` cover, in index order: two ways of
    cutting the same records into runs compare equal (what a page is checked against its
    summary with). Raises nothing."""
    out: list[tuple[int, tuple[int, ...]]] = []
    for _start, count, tx_id, queue_ids in sorted(runs):
        out.extend([(tx_id, tuple(queue_ids))] * count)
    return out
