"""The main job, ``store perf``: a messaging workload through the StorageManager, measured,
then crashed with ``kill -9`` and verified after recovery::

    from store.perf import default_config
    from store.perf.messaging_run import MessagingPerfOptions, run_messaging_perf

    result = run_messaging_perf(default_config("data"), MessagingPerfOptions(seconds=10))
    assert result.verified

Phases (each reported to ``progress``, each logged at INFO as ``perf phase=<name>
seconds=<s>``):

1. ``load``: open the store (with :func:`store.perf.messaging_workload.perf_config`: the paged
   address gets a small ``max-size-bytes``), ``load()``, delete what an interrupted earlier run
   left (every ``store-perf.*`` queue and address), create the destinations;
2. ``run``: producers and consumers for ``seconds``
   (:class:`store.perf.messaging_workload.Workload`), timing every sync send, sync ack and
   commit; then ``drain``: consumers go on until every message is acknowledged;
3. ``reopen``: close, reopen, ``load()``, and check the clean restart against the run's ledger;
4. ``crash``: the same workload in a worker process (:mod:`store.perf.messaging_worker`) that
   reports every acknowledged send and ack over a pipe and is killed with SIGKILL at a random
   moment; ``recover``: reopen, ``load()`` (timed: the recovery), and check that every
   acknowledged send is there exactly once and every acknowledged ack stays acked;
5. ``cleanup``: delete perf's queues and addresses (their messages go with them).

Decisions:

- The measured run is in this process (a worker's figures would have to cross the pipe); the
  crash run is a second run of the same workload, so the figures are never those of a run cut
  short.
- Messages/s counts acknowledged sends (and acks) over the ``run`` phase; the drain is not in it
  (no new sends then).
- Zero persistence keeps nothing: the reopen and crash phases are skipped (``reopen`` and
  ``crash`` are None) and the run counts as verified.
- A failed check is a result (``verified`` False, with the problems), not an exception.

Library code never prints. Thread-safety: :func:`run_messaging_perf` may run in any thread;
each run owns its store, threads and worker.
"""

from __future__ import annotations

import collections
import logging
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from store.config import StoreConfig
from store.config.values import invalid
from store.messaging import StorageManager
from store.perf.figures import LatencySummary, PerfProgress, describe_store
from store.perf.messaging_worker import WorkerPlan, run_killed_worker
from store.perf.messaging_workload import (
    Ledger,
    RecoveryCheck,
    Workload,
    WorkloadSpec,
    check_recovered,
    drop_destinations,
    ensure_destinations,
    perf_config,
    queue_names,
)
from store.store import open_store

__all__ = [
    "CrashReport",
    "MessagingPerfOptions",
    "MessagingPerfResult",
    "run_messaging_perf",
]

log = logging.getLogger(__name__)

_TICK = 0.2  # seconds between progress reports
_DRAIN_SECONDS = 60.0  # the longest the drain may take before the run goes on regardless


@dataclass(frozen=True, kw_only=True)
class MessagingPerfOptions:
    """What :func:`run_messaging_perf` does. Each field gives its default and its trade-off."""

    #: Default 10. How long producers send in the measured run.
    seconds: float = 10.0
    #: Default 4. Producer threads: more share each sync (group commit) but contend more.
    producers: int = 4
    #: Default 4. Consumer threads (each receives up to 10 messages and acks them).
    consumers: int = 4
    #: Default 4. Queues, each on its own address; one of them is the address that pages.
    queues: int = 4
    #: Default 1024. Body bytes of a regular message.
    size: int = 1024
    #: Default 0.2. Share of sends and of ack batches done in transactions (0 to 1).
    tx_ratio: float = 0.2
    #: Default 0.02. Share of messages whose body is over ``min-large-message-size``.
    large_ratio: float = 0.02
    #: Default True. Run the crash phase (worker, ``kill -9``, recovery, check).
    crash: bool = True
    #: Default None: ``min(seconds, 5)``. The worker is killed at a random moment within this
    #: many seconds after it is ready (at least a quarter of it).
    crash_seconds: float | None = None
    #: Default None (random, reported in the result). Fixes the workload and the kill moment.
    seed: int | None = None
    #: Default None. Called with the crash run's ledger before the recovered store is checked;
    #: tests use it to feed the check a fake acknowledgement.
    before_check: Callable[[Ledger], None] | None = None

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise invalid("--seconds", self.seconds, "a number of seconds above 0")
        for key, value in (
            ("--producers", self.producers),
            ("--consumers", self.consumers),
            ("--queues", self.queues),
        ):
            if not 1 <= value <= 1024:
                raise invalid(key, value, "1 to 1024")
        if not 0 <= self.size <= 1 << 30:
            raise invalid("--size", self.size, "a size from 0 bytes to 1G")
        for key, share in (("--tx-ratio", self.tx_ratio), ("--large-ratio", self.large_ratio)):
            if not 0.0 <= share <= 1.0:
                raise invalid(key, share, "a share from 0 to 1")
        if self.crash_seconds is not None and not self.crash_seconds > 0:
            raise invalid("--crash-seconds", self.crash_seconds, "a number of seconds above 0")


@dataclass(frozen=True, kw_only=True)
class CrashReport:
    """The crash phase: how long the worker ran before the kill, what it acknowledged, the
    recovery (``load()`` of the killed store) and its check."""

    killed_after: float
    killed: bool  #: False when the worker ended by itself before the kill (not expected)
    worker_load_seconds: float  #: the worker's start: process, imports, open and load
    recovery_seconds: float  #: open + ``load()`` of the store the worker left
    recovered_messages: int  #: ``Recovery.messages``: every message of the store
    check: RecoveryCheck


@dataclass(frozen=True, kw_only=True)
class MessagingPerfResult:
    """The figures of one :func:`run_messaging_perf` (times in s, latencies in ms)."""

    store: str  #: "file", "database" or "none"
    journal_type: str | None  #: the message journal's effective type (file store)
    location: str  #: journal folder, or the database kind
    producers: int
    consumers: int
    queues: tuple[str, ...]
    size: int
    large_size: int
    tx_ratio: float
    large_ratio: float
    seed: int
    run_seconds: float  #: the measured run (producers sending)
    drain_seconds: float
    sends: int  #: acknowledged sends in the measured run
    acks: int  #: acknowledged acks in the measured run (until producers stopped)
    body_bytes: int
    operations: dict[str, int]
    latency: dict[str, LatencySummary]  #: "send", "ack", "commit"
    load_seconds: float
    reopen_seconds: float  #: close + reopen + ``load()`` after the measured run
    reopen: RecoveryCheck | None  #: the clean restart's check (None: zero persistence)
    crash: CrashReport | None  #: None when skipped (``crash`` False, or zero persistence)
    cleanup_seconds: float

    @property
    def sends_per_second(self) -> float:
        """Acknowledged sends per second of the measured run."""
        return self.sends / self.run_seconds if self.run_seconds > 0 else 0.0

    @property
    def acks_per_second(self) -> float:
        """Acknowledged acks per second of the measured run."""
        return self.acks / self.run_seconds if self.run_seconds > 0 else 0.0

    @property
    def verified(self) -> bool:
        """True when every check that ran held."""
        checks = [self.reopen, self.crash.check if self.crash else None]
        return all(c.verified for c in checks if c is not None)

    def to_dict(self) -> dict[str, Any]:
        """Returns the result as JSON-ready data, derived figures included. Raises nothing."""
        data = asdict(self)
        data["sends_per_second"] = self.sends_per_second
        data["acks_per_second"] = self.acks_per_second
        data["verified"] = self.verified
        return data


class _Run:
    """One run: its phases and their times. Thread-safety: the caller's thread drives it."""

    def __init__(
        self,
        options: MessagingPerfOptions,
        progress: Callable[[PerfProgress], None] | None,
        min_large: int,
    ) -> None:
        self.options = options
        self.seed = (
            options.seed if options.seed is not None else random.SystemRandom().getrandbits(32)
        )
        self.rng = random.Random(self.seed)
        self.spec = WorkloadSpec(
            producers=options.producers,
            consumers=options.consumers,
            queues=options.queues,
            size=options.size,
            tx_ratio=options.tx_ratio,
            large_ratio=options.large_ratio,
            large_size=min_large + 1024,
        )
        self.progress = progress
        self.times: dict[str, float] = {}
        self.ledger = Ledger()
        self.in_run = (0, 0)  # acknowledged (sends, acks) when producers stopped
        self._phase = ""
        self._since = time.monotonic()

    def phase(self, name: str, fraction: float | None = None) -> None:
        """End the current phase (recording its time) and report the start of ``name``."""
        now = time.monotonic()
        if self._phase:
            self.times[self._phase] = self.times.get(self._phase, 0.0) + now - self._since
            log.info("perf phase=%s seconds=%.3f", self._phase, now - self._since)
        self._phase, self._since = name, now
        self.report(fraction)

    def report(self, fraction: float | None, count: int | None = None) -> None:
        if self.progress is not None:
            done = self.ledger.sends + self.ledger.acks if count is None else count
            elapsed = time.monotonic() - self._since
            self.progress(PerfProgress(self._phase, elapsed, done, fraction))

    def measured(self, sm: StorageManager) -> Workload:
        """The run and drain phases on a loaded manager; returns the finished workload."""
        work = Workload(sm, self.spec, seed=self.seed, report=self.ledger.record)
        self.phase("run", 0.0)
        work.start()
        try:
            deadline = self._since + self.options.seconds
            while time.monotonic() < deadline and not work.errors:
                time.sleep(min(_TICK, max(0.0, deadline - time.monotonic())))
                self.report(min(1.0, (time.monotonic() - self._since) / self.options.seconds))
            work.stop_producers()
            self.in_run = (self.ledger.sends, self.ledger.acks)
            self.phase("drain")
            give_up = time.monotonic() + _DRAIN_SECONDS
            while not work.errors and time.monotonic() < give_up and work.depth() > 0:
                time.sleep(_TICK / 4)
                self.report(None)
        finally:
            work.stop()
            work.join()
        return work

    def crash(self, config: StoreConfig) -> CrashReport:
        """The crash and recover phases; returns their report."""
        o = self.options
        window = o.crash_seconds if o.crash_seconds is not None else min(o.seconds, 5.0)
        kill_after = self.rng.uniform(window / 4, window)
        ledger = Ledger()
        self.phase("crash")
        plan = WorkerPlan(config=config, spec=self.spec, seed=self.seed + 1)
        worker = run_killed_worker(plan, kill_after=kill_after, ledger=ledger)
        self.phase("recover")
        started = time.monotonic()
        with StorageManager(open_store(config)) as sm:
            recovery = sm.load()
            recovery_seconds = time.monotonic() - started
            if o.before_check is not None:
                o.before_check(ledger)
            check, _ = check_recovered(sm, ledger, queue_names(self.spec))
            self.phase("cleanup")
            drop_destinations(sm)
        return CrashReport(
            killed_after=worker.ran_seconds,
            killed=worker.killed,
            worker_load_seconds=worker.load_seconds,
            recovery_seconds=recovery_seconds,
            recovered_messages=recovery.messages,
            check=check,
        )


def _figures(work: Workload) -> tuple[dict[str, int], dict[str, LatencySummary], int]:
    ops: collections.Counter[str] = collections.Counter()
    samples: dict[str, list[int]] = {}
    for c in work.counters:
        ops.update(c.ops)
        for group, values in c.latency.items():
            samples.setdefault(group, []).extend(values)
    groups: tuple[str, ...] = ("send", "ack", "commit")
    latency = {g: LatencySummary.of(samples[g]) for g in groups if g in samples}
    return dict(sorted(ops.items())), latency, sum(c.body_bytes for c in work.counters)


def run_messaging_perf(
    config: StoreConfig,
    options: MessagingPerfOptions | None = None,
    *,
    progress: Callable[[PerfProgress], None] | None = None,
) -> MessagingPerfResult:
    """Run the messaging workload on the store ``config`` selects, restart it cleanly and
    after a ``kill -9``, and check both recoveries (see the module docstring).

    ``progress`` is called in this thread at each phase and about five times a second during
    the run. Returns the :class:`MessagingPerfResult` (a failed check is in ``verified``, not
    an exception). Raises ConfigError for bad options, StoreLockedError when another process
    holds the store, StoreError when the worker fails before the kill, and any StoreError the
    store raises; the store is closed in every case.
    """
    config = perf_config(config)
    run = _Run(options or MessagingPerfOptions(), progress, config.min_large_message_size)
    run.phase("load")
    store = open_store(config)
    with StorageManager(store) as sm:
        sm.load()
        kind = store.kind
        journal_type, location = describe_store(store)
        drop_destinations(sm)
        ensure_destinations(sm, run.spec)
        work = run.measured(sm)
        run.phase("close")
    operations, latency, body_bytes = _figures(work)
    sends, acks = run.in_run
    reopen: RecoveryCheck | None = None
    crash: CrashReport | None = None
    if kind != "none":
        run.phase("reopen")
        with StorageManager(open_store(config)) as sm:
            sm.load()
            reopen, found = check_recovered(sm, run.ledger, queue_names(run.spec))
            for queue, ids in found.items():  # the crash run starts from empty queues
                for mid in ids:
                    sm.ack(queue, mid, sync=False)
            if not run.options.crash:
                run.phase("cleanup")
                drop_destinations(sm)
        if run.options.crash:
            crash = run.crash(config)
    run.phase("done", 1.0)
    t = run.times
    return MessagingPerfResult(
        store=kind,
        journal_type=journal_type,
        location=location,
        producers=run.spec.producers,
        consumers=run.spec.consumers,
        queues=tuple(queue_names(run.spec)),
        size=run.spec.size,
        large_size=run.spec.large_size,
        tx_ratio=run.spec.tx_ratio,
        large_ratio=run.spec.large_ratio,
        seed=run.seed,
        run_seconds=t["run"],
        drain_seconds=t.get("drain", 0.0),
        sends=sends,
        acks=acks,
        body_bytes=body_bytes,
        operations=operations,
        latency=latency,
        load_seconds=t["load"],
        reopen_seconds=t.get("close", 0.0) + t.get("reopen", 0.0),
        reopen=reopen,
        crash=crash,
        cleanup_seconds=t.get("cleanup", 0.0),
    )
