"""``store perf --journal``: :func:`run_perf` runs a journal-level workload on any store (file,
database, zero persistence) and checks that it recovers::

    from store.perf import PerfOptions, default_config, run_perf

    result = run_perf(default_config("data"), PerfOptions(seconds=10, threads=8))
    assert result.verified

Phases: open the store and load both journals; pick a fresh id range above every id (record
and transaction) the loads returned, so perf's records can never clash with a user's data in
the same store; let ``threads`` writers (:mod:`store.perf.journal_writers`) append to the
message journal at once (adds, updates, deletes, and transactions of adds and ``update_tx``
that are committed, rolled back, or prepared and then committed), timing every sync append and
every prepare / commit / rollback; flush the message journal (the write phase ends when
everything appended is durable); close the store, reopen it and load it; verify that every
record acknowledged as durable is back with its exact bytes, and that nothing in perf's id
range that was deleted or rolled back came back; finally delete perf's records (unless
``keep``) and close.

Decisions:

- "Acknowledged as durable" is every append that returned: with ``sync`` at its return, without
  it at the final ``flush()`` that ends the write phase.
- The throughput figure (``records_per_second``) counts the write phase until that flush
  returned: without ``sync``, a store that queues appends faster than it makes them durable
  is measured at the rate it makes them durable, drain included, not at the rate it queues
  them. The appends-only figure (``append_records_per_second``, until the last append
  returned) is kept beside it, labelled as such. Zero persistence keeps nothing, so there the
  check is that nothing comes back.
- Payloads, record types and each writer's ids: see :mod:`store.perf.journal_writers`.

Library code never prints: each phase's end is logged at INFO (``perf phase=<name>
seconds=<s>``), and progress reaches the caller through the ``progress`` callback, which is
called in the caller's thread.

Thread-safety: :func:`run_perf` may run in any thread; each run owns its store and threads.
"""

from __future__ import annotations

import collections
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from store.config import StoreConfig
from store.errors import StoreError
from store.journal.api import MAX_ID, MIN_ID, Journal, LoadResult
from store.perf.figures import LatencySummary, PerfProgress, describe_store
from store.perf.journal_results import PerfOptions, PerfResult, Verification
from store.perf.journal_writers import (
    ID_SPAN,
    PERF_ADD_TYPE,
    PERF_UPDATE_TYPE,
    SharedState,
    Writer,
    payload,
)
from store.store import Store, open_store

__all__ = ["default_config", "remove_perf_records", "run_perf"]

log = logging.getLogger(__name__)

_MAX_PROBLEMS = 20  # findings described one by one; the counts are always complete
_TICK = 0.2  # seconds between progress reports while writers run


def default_config(data_dir: str | os.PathLike[str] = "data") -> StoreConfig:
    """The embedded default store: the file store with every folder under ``data_dir``.

    ``journal-type`` keeps its default (ASYNCIO, falling back to NIO by itself). Returns the
    configuration, folders made absolute against the current directory. Raises ConfigError.
    """
    base = os.path.abspath(os.fspath(data_dir))
    return StoreConfig.from_mapping(
        {
            "bindings-directory": os.path.join(base, "bindings"),
            "journal-directory": os.path.join(base, "journal"),
            "large-messages-directory": os.path.join(base, "largemessages"),
            "paging-directory": os.path.join(base, "paging"),
        }
    )


def _fresh_first_id(loads: Sequence[LoadResult]) -> int:
    """The first id of a range of ID_SPAN ids that no loaded record or transaction uses."""
    seen: list[int] = []
    for load in loads:
        seen.extend(r.id for r in load.records)
        seen.extend(load.failed)
        for p in load.prepared:
            seen.append(p.tx_id)
            seen.extend(r.id for r in p.records)
            seen.extend(p.deleted_ids)
    high, low = max(seen, default=0), min(seen, default=0)
    if high <= MAX_ID - ID_SPAN:
        return max(high + 1, 1)
    if low >= MIN_ID + ID_SPAN:
        return low - ID_SPAN
    raise StoreError(
        "the store's ids leave no free range for perf's records",
        hint="run perf on an empty store (--data-dir, or a --config naming other folders/tables)",
    )


def _verify(
    loaded: LoadResult,
    expected: dict[int, list[int]],
    ids: range,
    salt: bytes,
    *,
    durable: bool,
) -> Verification:
    """Compare the reopened store's records in ``ids`` with what was acknowledged."""
    found: dict[int, list[tuple[int, bytes, bool]]] = {}
    for rec in loaded.records:
        if rec.id in ids:
            found.setdefault(rec.id, []).append((rec.user_record_type, rec.data, rec.is_update))
    problems: list[str] = []

    def note(text: str) -> None:
        if len(problems) < _MAX_PROBLEMS:
            problems.append(text)

    missing = mismatched = unexpected = 0
    for id, sizes in (expected if durable else {}).items():
        got = found.pop(id, None)
        if got is None:
            missing += 1
            note(f"id {id}: missing ({len(sizes)} acknowledged entries)")
            continue
        want = [
            (PERF_UPDATE_TYPE if v else PERF_ADD_TYPE, payload(salt, id, v, size), v > 0)
            for v, size in enumerate(sizes)
        ]
        if got != want:
            mismatched += 1
            note(f"id {id}: {len(got)} entries differ from the {len(want)} acknowledged")
    for id in sorted(found):
        unexpected += 1
        note(f"id {id}: came back although it was deleted, rolled back or never acknowledged")
    for prepared in loaded.prepared:
        if prepared.tx_id in ids:
            unexpected += 1
            note(f"transaction {prepared.tx_id}: still prepared although it was committed")
    return Verification(
        durable=durable,
        checked=len(expected) if durable else 0,
        missing=missing,
        mismatched=mismatched,
        unexpected=unexpected,
        problems=tuple(problems),
    )


def _cleanup(journal: Journal, loaded: LoadResult, ids: range) -> int:
    """Delete every live record and roll back every prepared transaction in ``ids``."""
    live = {r.id for r in loaded.records if r.id in ids}
    for id in sorted(live):
        journal.append_delete(id)
    for prepared in loaded.prepared:
        if prepared.tx_id in ids:
            journal.append_rollback(prepared.tx_id, sync=False)
    journal.flush()
    return len(live)


class _Run:
    """One run of the workload: its phases, their times, and the figures they produce.

    Thread-safety: driven by the caller's thread; writers only touch ``shared``.
    """

    def __init__(self, options: PerfOptions, progress: Callable[[PerfProgress], None] | None):
        self.options = options
        self.seed = (
            options.seed if options.seed is not None else random.SystemRandom().getrandbits(32)
        )
        self.salt = random.Random(self.seed).randbytes(16)
        self.progress = progress
        self.times: dict[str, float] = {}
        self.shared: SharedState | None = None
        self.writers: list[Writer] = []
        self._phase = ""
        self._since = time.monotonic()

    def phase(self, name: str, fraction: float | None = None) -> None:
        """End the current phase (recording its time) and report the start of ``name``."""
        now = time.monotonic()
        if self._phase:
            self.times[self._phase] = now - self._since
            log.info("perf phase=%s seconds=%.3f", self._phase, now - self._since)
        self._phase, self._since = name, now
        self.report(fraction)

    def report(self, fraction: float | None) -> None:
        if self.progress is not None:
            records = self.shared.records if self.shared is not None else 0
            elapsed = time.monotonic() - self._since
            self.progress(PerfProgress(self._phase, elapsed, records, fraction))

    def first_pass(self, store: Store) -> dict[str, Any]:
        """Load, write, and take the figures that need the open store; returns them."""
        bindings_load = store.bindings.load()
        loaded = store.messages.load()
        self.shared = shared = SharedState(_fresh_first_id([bindings_load, loaded]), self.options)
        journal_type, location = describe_store(store)
        self.phase("write", 0.0)
        self.writers = [
            Writer(store.messages, shared, self.options, self.seed * 1_000_003 + k, self.salt)
            for k in range(self.options.threads)
        ]
        threads = [
            threading.Thread(target=w.run, name=f"store-perf-{k}", daemon=True)
            for k, w in enumerate(self.writers)
        ]
        try:
            for t in threads:
                t.start()
            # Writers set ``stop`` at the deadline, at the record target, or on an error.
            while not shared.stop.wait(_TICK):
                if self.options.records is not None:
                    self.report(min(1.0, shared.records / self.options.records))
                else:
                    self.report(min(1.0, (time.monotonic() - self._since) / self.options.seconds))
        finally:
            shared.stop.set()
            for t in threads:
                t.join()
        for w in self.writers:
            if w.error is not None:
                raise w.error
        self.times["append"] = time.monotonic() - self._since
        # The drain belongs to the write phase: without sync, appends may have returned long
        # before the store made them durable.
        store.messages.flush()
        self.phase("close")
        stats = store.messages.stats()
        return dict(
            store=store.kind,
            journal_type=journal_type,
            location=location,
            records_before=len(loaded.records),
            journal_stats=stats,
        )

    def second_pass(self, store: Store) -> dict[str, Any]:
        """Load the reopened store, verify, clean up; returns the figures."""
        assert self.shared is not None
        store.bindings.load()
        reloaded = store.messages.load()
        self.phase("verify")
        ids = range(self.shared.first_id, self.shared.next_id)
        expected: dict[int, list[int]] = {}
        for w in self.writers:
            expected.update(w.expected)
        durable = store.kind != "none"
        verification = _verify(reloaded, expected, ids, self.salt, durable=durable)
        removed = 0
        if not self.options.keep:
            self.phase("cleanup")
            removed = _cleanup(store.messages, reloaded, ids)
        return dict(verification=verification, removed=removed, first_id=ids.start)

    def result(self, figures: dict[str, Any]) -> PerfResult:
        """Returns the PerfResult of the finished run."""
        assert self.shared is not None
        operations: collections.Counter[str] = collections.Counter()
        latency: dict[str, list[int]] = {}
        for w in self.writers:
            operations.update(w.ops)
            for group, samples in w.latency.items():
                latency.setdefault(group, []).extend(samples)
        o, t = self.options, self.times
        return PerfResult(
            threads=o.threads,
            sizes=o.sizes,
            tx_ratio=o.tx_ratio,
            sync=o.sync,
            kept=o.keep,
            seed=self.seed,
            last_id=self.shared.next_id - 1,
            write_seconds=t["write"],
            append_seconds=t["append"],
            records=self.shared.records,
            payload_bytes=sum(w.payload_bytes for w in self.writers),
            operations=dict(sorted(operations.items())),
            latency={g: LatencySummary.of(s) for g, s in latency.items() if s},
            load_seconds=t["load"],
            close_seconds=t["close"],
            reopen_seconds=t["reopen"],
            verify_seconds=t["verify"],
            cleanup_seconds=t.get("cleanup", 0.0),
            **figures,
        )


def run_perf(
    config: StoreConfig,
    options: PerfOptions | None = None,
    *,
    progress: Callable[[PerfProgress], None] | None = None,
) -> PerfResult:
    """Run the workload on the store ``config`` selects, reopen it and verify it.

    ``progress`` is called in this thread at each phase and about five times a second while
    writers run. Returns the :class:`PerfResult` (``verified`` says whether recovery held
    exactly what was acknowledged; a failed verification is a result, not an exception).
    Raises ConfigError for bad options, StoreLockedError when another process holds the store,
    StoreUnavailableError, StoreIOError, CorruptionError or any other StoreError the store
    raises while the workload runs; the store is closed in every case.
    """
    run = _Run(options or PerfOptions(), progress)
    run.phase("load")
    with open_store(config) as store:
        figures = run.first_pass(store)
    if run.options.between_runs is not None:
        run.phase("between-runs")
        run.options.between_runs(config)
    run.phase("reopen")
    with open_store(config) as store:
        figures.update(run.second_pass(store))
    run.phase("done", 1.0)
    return run.result(figures)


def remove_perf_records(config: StoreConfig) -> int:
    """Remove every record ``store perf`` left in the store ``config`` selects (an interrupted
    run, or ``keep``): live records of perf's user record types, and prepared transactions
    holding only such records (rolled back). Returns how many records were removed. Raises
    what :func:`~store.open_store` and the journals raise."""
    perf_types = (PERF_ADD_TYPE, PERF_UPDATE_TYPE)
    with open_store(config) as store:
        store.bindings.load()
        journal = store.messages
        loaded = journal.load()
        live: dict[int, bool] = {}  # id -> every entry of it is perf's
        for r in loaded.records:
            live[r.id] = live.get(r.id, True) and r.user_record_type in perf_types
        removed = [id for id, ours in live.items() if ours]
        for id in removed:
            journal.append_delete(id)
        for prepared in loaded.prepared:
            if prepared.records and all(r.user_record_type in perf_types for r in prepared.records):
                journal.append_rollback(prepared.tx_id, sync=False)
        journal.flush()
    return len(removed)
