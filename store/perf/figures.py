"""What both workloads of ``store perf`` report: progress, latency summaries, the store's kind.

:class:`PerfProgress` reaches the caller's ``progress`` callback; :class:`LatencySummary` is
the nearest-rank percentiles of one kind of call; :func:`describe_store` names the journal type
and location a result reports.

Thread-safety: the classes are immutable; the function reads an open store's configuration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from store.file.journal import FileJournal
from store.store import Store

__all__ = ["LatencySummary", "PerfProgress", "describe_store"]


@dataclass(frozen=True, slots=True)
class PerfProgress:
    """One progress report: the phase, seconds since it began, records written so far, and
    the share done (None when the phase cannot tell)."""

    phase: str
    elapsed: float
    records: int
    fraction: float | None


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Latency of one kind of call, in milliseconds (nearest-rank percentiles)."""

    count: int
    p50: float
    p90: float
    p99: float
    p999: float
    max: float

    @staticmethod
    def of(samples_ns: list[int]) -> LatencySummary:
        """Summarise raw samples in nanoseconds. Returns the summary. Raises nothing."""
        data = sorted(samples_ns)
        n = len(data)

        def rank(p: float) -> float:
            return data[max(0, math.ceil(n * p / 100) - 1)] / 1e6 if n else 0.0

        return LatencySummary(
            count=n, p50=rank(50), p90=rank(90), p99=rank(99), p999=rank(99.9), max=rank(100)
        )


def describe_store(store: Store) -> tuple[str | None, str]:
    """The journal type (file store; None otherwise) and the location a result reports: the
    journal folder, the database kind, or "zero persistence". Raises nothing."""
    config = store.config
    if store.kind == "file":
        backend = store.messages.backend if isinstance(store.messages, FileJournal) else None
        return (backend.name if backend else config.journal_type), config.journal_directory
    if store.kind == "database" and config.database_store is not None:
        return None, config.database_store.dialect
    return None, "zero persistence"
