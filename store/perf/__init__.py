"""``store perf`` and ``store perf-journal`` as library calls: workloads on a store, measured
and verified after a reopen (or a ``kill -9``), and Artemis's sync-rate probe.

::

    from store.perf import PerfOptions, default_config, run_perf

    result = run_perf(default_config("data"), PerfOptions(seconds=10, threads=8))
    assert result.verified

Modules:

- :mod:`~store.perf.messaging_run` (``store perf``, the main job): a messaging workload through
  the StorageManager, measured, then crashed with ``kill -9`` and checked after recovery
  (:func:`~store.perf.messaging_run.run_messaging_perf`); its producers, consumers, ledger and
  recovery check are in :mod:`~store.perf.messaging_workload`, the worker process killed with
  ``kill -9`` in :mod:`~store.perf.messaging_worker` (``python -m store.perf.messaging_worker``);
- :mod:`~store.perf.journal_run` (``store perf --journal``): :func:`run_perf`, a journal-level
  workload on any store, reopened and verified; its writer threads are in
  :mod:`~store.perf.journal_writers`, what it takes and returns in
  :mod:`~store.perf.journal_results`;
- :mod:`~store.perf.sync_probe` (``store perf-journal``): :func:`run_perf_journal`, durable
  writes per millisecond as Artemis's ``perf-journal`` measures them;
- :mod:`~store.perf.figures`: progress reports and latency summaries both workloads give.

This package exports the journal workload and the probe (the names below); the messaging
workload is imported from :mod:`store.perf.messaging_run`.
"""

from __future__ import annotations

from store.perf.figures import LatencySummary, PerfProgress
from store.perf.journal_results import PerfOptions, PerfResult, Verification
from store.perf.journal_run import default_config, remove_perf_records, run_perf
from store.perf.journal_writers import PERF_ADD_TYPE, PERF_UPDATE_TYPE
from store.perf.sync_probe import PerfJournalOptions, PerfJournalResult, run_perf_journal

__all__ = [
    "PERF_ADD_TYPE",
    "PERF_UPDATE_TYPE",
    "LatencySummary",
    "PerfJournalOptions",
    "PerfJournalResult",
    "PerfOptions",
    "PerfProgress",
    "PerfResult",
    "Verification",
    "default_config",
    "remove_perf_records",
    "run_perf",
    "run_perf_journal",
]
