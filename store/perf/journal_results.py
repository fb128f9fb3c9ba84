"""What :func:`~store.perf.journal_run.run_perf` (``store perf --journal``) takes and returns:
:class:`PerfOptions` in, :class:`PerfResult` (with its :class:`Verification`) out.

Thread-safety: immutable; safe to share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from store.config import StoreConfig
from store.config.values import invalid
from store.journal.api import JournalStats
from store.perf.figures import LatencySummary

__all__ = ["PerfOptions", "PerfResult", "Verification"]


@dataclass(frozen=True, kw_only=True)
class PerfOptions:
    """What :func:`run_perf` does. Each field gives its default and its trade-off."""

    #: Default 10. How long writers run; ignored when ``records`` is set.
    seconds: float = 10.0
    #: Default None. Stop after about this many journal records instead of after ``seconds``
    #: (every add, update, delete, transactional record and prepare / commit / rollback counts).
    records: int | None = None
    #: Default 8. Concurrent writers: more share each sync (group commit) but contend more.
    threads: int = 8
    #: Default 100, 1024 and 10240 bytes. Record sizes, each record picks one at random.
    sizes: tuple[int, ...] = (100, 1024, 10240)
    #: Default 0.2. Share of operations that are transactions (0 to 1).
    tx_ratio: float = 0.2
    #: Default True. Appends wait until durable; False measures appends that never wait.
    sync: bool = True
    #: Default False. Leave perf's records in the store instead of deleting them at the end.
    keep: bool = False
    #: Default None (a random seed, reported in the result). Fixes operations and payloads.
    seed: int | None = None
    #: Default 2000. Live records per writer before it deletes its oldest: more keeps more
    #: data on disk to verify, fewer makes the journal reclaim files sooner.
    window: int = 2000
    #: Default None. Called with the configuration after the store is closed and before it is
    #: reopened for verification; tests use it to damage the store for real.
    between_runs: Callable[[StoreConfig], None] | None = None

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise invalid("--seconds", self.seconds, "a number of seconds above 0")
        if self.records is not None and self.records < 1:
            raise invalid("--records", self.records, "a count of 1 or more")
        if not 1 <= self.threads <= 1024:
            raise invalid("--threads", self.threads, "1 to 1024 writers")
        if not self.sizes:
            raise invalid("--sizes", "", "one or more sizes from 0 bytes to 1G")
        for size in self.sizes:
            if not 0 <= size <= 1 << 30:
                raise invalid("--sizes", f"{size} bytes", "one or more sizes from 0 bytes to 1G")
        if not 0.0 <= self.tx_ratio <= 1.0:
            raise invalid("--tx-ratio", self.tx_ratio, "a share from 0 to 1")
        if self.window < 1:
            raise invalid("window", self.window, "1 or more live records per writer")


@dataclass(frozen=True, kw_only=True)
class Verification:
    """What the reopened store held of perf's records.

    ``checked`` ids were acknowledged live; ``missing`` of them did not come back,
    ``mismatched`` came back with other bytes, types or history; ``unexpected`` ids (or
    prepared transactions) in perf's range came back although deleted, rolled back or never
    acknowledged. ``durable`` is False for zero persistence, where nothing is expected back.
    """

    durable: bool
    checked: int
    missing: int
    mismatched: int
    unexpected: int
    problems: tuple[str, ...] = ()

    @property
    def verified(self) -> bool:
        """True when nothing is missing, mismatched or unexpected."""
        return self.missing == 0 and self.mismatched == 0 and self.unexpected == 0


@dataclass(frozen=True, kw_only=True)
class PerfResult:
    """The figures of one :func:`run_perf` (times in seconds, latencies in milliseconds)."""

    store: str  #: "file", "database" or "none"
    journal_type: str | None  #: the message journal's effective type (file store)
    location: str  #: journal folder, or the database kind
    threads: int
    sizes: tuple[int, ...]
    tx_ratio: float
    sync: bool
    seed: int
    records_before: int  #: records the message journal held before the run
    first_id: int  #: perf's ids are first_id .. last_id
    last_id: int
    #: the write phase: from the first append until everything appended was durable (the
    #: final flush returned); the throughput figures count this time
    write_seconds: float
    #: from the first append until the last append returned (the drain not included)
    append_seconds: float
    records: int  #: journal records appended
    payload_bytes: int  #: bytes of record data appended
    operations: dict[str, int]
    latency: dict[str, LatencySummary]
    load_seconds: float
    close_seconds: float
    reopen_seconds: float  #: open and load of the reopened store (recovery time)
    verify_seconds: float
    cleanup_seconds: float
    kept: bool  #: perf's records were left in the store (the ``keep`` option)
    removed: int  #: perf's records deleted at the end (0 when kept)
    journal_stats: JournalStats  #: the message journal at the end of the write phase
    verification: Verification

    @property
    def verified(self) -> bool:
        """True when the reopened store held exactly what was acknowledged."""
        return self.verification.verified

    @property
    def records_per_second(self) -> float:
        """Journal records appended per second of the write phase (until durable)."""
        return self.records / self.write_seconds if self.write_seconds > 0 else 0.0

    @property
    def append_records_per_second(self) -> float:
        """Journal records appended per second until the last append returned (without
        ``sync``, not yet durable then: the drain is left out)."""
        return self.records / self.append_seconds if self.append_seconds > 0 else 0.0

    @property
    def mb_per_second(self) -> float:
        """Record data appended, in MB (10^6 bytes) per second of the write phase."""
        return self.payload_bytes / 1e6 / self.write_seconds if self.write_seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Returns the result as JSON-ready data, derived figures included. Raises nothing."""
        data = asdict(self)
        data["records_per_second"] = self.records_per_second
        data["append_records_per_second"] = self.append_records_per_second
        data["mb_per_second"] = self.mb_per_second
        data["verified"] = self.verified
        return data
