"""The messaging workload of ``store perf``: producers and consumers on a StorageManager, the
ledger of what was acknowledged, and the check of a recovered store against that ledger.

Used in two places: in the ``store perf`` process for the measured run
(:mod:`store.perf.messaging_run`), and in the worker process that is killed with ``kill -9``
(:mod:`store.perf.messaging_worker`). The two differ only in where acknowledgements go: a
:class:`Ledger` in memory, or lines on a pipe to the parent (which builds the same ledger).

Destinations: :data:`PAGED_ADDRESS` and ``store-perf.1`` .. ``store-perf.<n-1>``, each an
ANYCAST address with one queue of the same name. :func:`perf_config` gives the paged address a
small ``max-size-bytes`` in the run's store, so it pages as soon as its consumers fall behind.

What counts as acknowledged (the invariant :func:`check_recovered` checks):

- a send is acknowledged when ``send(sync=True)`` returned, or when the ``commit()`` of its
  transaction returned; it must then be on its queue exactly once after any crash, unless its
  ack was acknowledged too;
- an ack is acknowledged when ``ack(sync=True)`` or its transaction's ``commit()`` returned;
  the message must then never come back on that queue.
- a receive is reported before its ack is called: a message whose send was acknowledged and
  that was received, but whose ack was not acknowledged, may be gone (the ack was in flight:
  durable, but killed before its report).

Messages whose send or ack was in flight at the crash may come back or not; nothing else may.

Thread-safety: a :class:`Workload` runs its own threads over one StorageManager (which may be
shared between threads); :class:`Ledger` may be fed from any thread.
"""

from __future__ import annotations

import collections
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from store.config import StoreConfig
from store.messaging import Message, StorageManager

__all__ = [
    "PAGED_ADDRESS",
    "PREFIX",
    "Ledger",
    "RecoveryCheck",
    "Workload",
    "WorkloadSpec",
    "check_recovered",
    "drop_destinations",
    "ensure_destinations",
    "perf_config",
    "queue_names",
]

#: Every address and queue of ``store perf`` starts with this (so leftovers are easy to find).
PREFIX = "store-perf."
#: The address that pages: ``max-size-bytes`` :data:`PAGED_MAX_BYTES` in the run's store.
PAGED_ADDRESS = PREFIX + "paged"
#: The paged address's ``max-size-bytes``: small, so it pages within the first second.
PAGED_MAX_BYTES = 64 * 1024
_PAGE_SIZE = 32 * 1024
_MAX_PROBLEMS = 20
_IDLE_SLEEP = 0.001  # a consumer that found nothing anywhere waits this long

#: Report callback: (kind, queue, message id) with kind "send" or "ack", called once the call
#: is acknowledged (durable), or "receive", called before the message's ack is.
Report = Callable[[str, str, int], None]


@dataclass(frozen=True, kw_only=True)
class WorkloadSpec:
    """The shape of the workload (every field is validated by the options that build it)."""

    producers: int = 4
    consumers: int = 4
    queues: int = 4  #: the paged one included
    size: int = 1024  #: body bytes of a regular message
    tx_ratio: float = 0.2  #: share of sends and of ack batches done in transactions
    large_ratio: float = 0.02  #: share of messages over min-large-message-size
    large_size: int = 102400 + 1024  #: body bytes of a large message
    receive_batch: int = 10


def queue_names(spec: WorkloadSpec) -> list[str]:
    """Returns the queue names of the workload (each the name of its address). Raises
    nothing."""
    return [PAGED_ADDRESS, *(f"{PREFIX}{k}" for k in range(1, spec.queues))]


def perf_config(config: StoreConfig) -> StoreConfig:
    """``config`` with address settings that make :data:`PAGED_ADDRESS` page (a literal
    match, which wins over the configuration's own wildcards). Returns the new configuration.
    Raises ConfigError (not expected: the settings are valid)."""
    settings = dict(config.address_settings)
    settings[PAGED_ADDRESS] = {
        "max_size_bytes": PAGED_MAX_BYTES,
        "page_size_bytes": _PAGE_SIZE,
        "address_full_policy": "PAGE",
    }
    return config.replace(address_settings=settings)


def ensure_destinations(sm: StorageManager, spec: WorkloadSpec) -> None:
    """Create the workload's addresses and queues that do not exist yet (durable on return).
    Returns None. Raises what ``create_address`` / ``create_queue`` raise."""
    addresses = {a.name for a in sm.addresses()}
    queues = {q.name for q in sm.queues()}
    for name in queue_names(spec):
        if name not in addresses:
            sm.create_address(name, routing_types=("ANYCAST",))
        if name not in queues:
            sm.create_queue(name, address=name, routing_type="ANYCAST")


def drop_destinations(sm: StorageManager) -> int:
    """Delete every queue and address whose name starts with :data:`PREFIX` (their messages
    go with them). Returns how many queues were deleted. Raises what ``delete_queue`` /
    ``delete_address`` raise."""
    queues = [q.name for q in sm.queues() if q.name.startswith(PREFIX)]
    for name in queues:
        sm.delete_queue(name)
    for address in sm.addresses():
        if address.name.startswith(PREFIX):
            sm.delete_address(address.name)
    return len(queues)


class Ledger:
    """The acknowledged sends and acks of a run, per queue (see the module docstring).

    Thread-safety: :meth:`record` may be called from any thread (one lock).
    """

    def __init__(self) -> None:
        self.sent: dict[str, set[int]] = collections.defaultdict(set)
        self.received: dict[str, set[int]] = collections.defaultdict(set)
        self.acked: dict[str, set[int]] = collections.defaultdict(set)
        self._lock = threading.Lock()
        self._sets = {"send": self.sent, "receive": self.received, "ack": self.acked}

    def record(self, kind: str, queue: str, message_id: int) -> None:
        """Note an acknowledged ``"send"`` or ``"ack"``, or a ``"receive"`` (an ack may
        follow). Returns None. Raises ValueError for another kind."""
        entries = self._sets.get(kind)
        if entries is None:
            raise ValueError(f"a ledger entry is a send, receive or ack, not {kind!r}")
        with self._lock:
            entries[queue].add(message_id)

    @property
    def sends(self) -> int:
        """Acknowledged sends recorded."""
        return sum(len(s) for s in self.sent.values())

    @property
    def acks(self) -> int:
        """Acknowledged acks recorded."""
        return sum(len(s) for s in self.acked.values())


@dataclass(frozen=True, kw_only=True)
class RecoveryCheck:
    """What a recovered store held against a :class:`Ledger`.

    ``lost``: acknowledged sends that did not come back although no ack of theirs can have
    happened (never received, see the module docstring); ``in_doubt``: received messages whose
    ack was in flight (back or not, both are right);
    ``duplicated``: messages that came back more than once on a queue; ``undone``: acknowledged
    acks whose message came back. ``recovered`` counts the messages found on the queues.
    """

    sends: int
    acks: int
    recovered: int
    in_doubt: int = 0
    lost: int = 0
    duplicated: int = 0
    undone: int = 0
    problems: tuple[str, ...] = ()

    @property
    def verified(self) -> bool:
        """True when nothing was lost, duplicated or undone."""
        return self.lost == 0 and self.duplicated == 0 and self.undone == 0


def drain(sm: StorageManager, queue: str) -> list[int]:
    """Receive everything ready on ``queue`` (nothing is acknowledged). Returns the message
    ids in delivery order. Raises UnknownQueueError."""
    ids: list[int] = []
    while batch := sm.receive(queue, max_messages=1000):
        ids.extend(d.message.message_id or 0 for d in batch)
    return ids


def check_recovered(
    sm: StorageManager, ledger: Ledger, queues: Iterable[str]
) -> tuple[RecoveryCheck, dict[str, list[int]]]:
    """Drain ``queues`` of a freshly loaded ``sm`` and compare with ``ledger``. Returns the
    check and the ids found per queue (delivered, not acknowledged). Raises
    UnknownQueueError when a queue is gone."""
    problems: list[str] = []
    lost = duplicated = undone = recovered = in_doubt = 0

    def note(text: str) -> None:
        if len(problems) < _MAX_PROBLEMS:
            problems.append(text)

    found: dict[str, list[int]] = {}
    for queue in queues:
        ids = found[queue] = drain(sm, queue)
        recovered += len(ids)
        counts = collections.Counter(ids)
        sent, acked = ledger.sent.get(queue, set()), ledger.acked.get(queue, set())
        received = ledger.received.get(queue, set())
        for mid, n in sorted(counts.items()):
            if n > 1:
                duplicated += 1
                note(f"{queue}: message {mid} delivered {n} times")
            if mid in acked:
                undone += 1
                note(f"{queue}: message {mid} came back although its ack was acknowledged")
        for mid in sorted(sent - acked):
            if mid in received:
                in_doubt += 1
            elif mid not in counts:
                lost += 1
                note(f"{queue}: message {mid} lost although its send was acknowledged")
    check = RecoveryCheck(
        sends=ledger.sends,
        acks=ledger.acks,
        recovered=recovered,
        in_doubt=in_doubt,
        lost=lost,
        duplicated=duplicated,
        undone=undone,
        problems=tuple(problems),
    )
    return check, found


@dataclass
class _Counters:
    """One thread's figures: operations and latency samples (ns) per kind of call."""

    ops: collections.Counter[str] = field(default_factory=collections.Counter)
    latency: dict[str, list[int]] = field(default_factory=lambda: collections.defaultdict(list))
    body_bytes: int = 0


class Workload:
    """Producers and consumers on a loaded StorageManager until :meth:`stop`.

    ``report`` is called (in the producer's or consumer's thread) for every acknowledged send
    and ack. Errors of a thread stop the workload and are raised by :meth:`join`.

    Thread-safety: start, stop and join from one thread; the workload's own threads share
    only the manager, ``report`` and the stop events.
    """

    def __init__(
        self,
        sm: StorageManager,
        spec: WorkloadSpec,
        *,
        seed: int,
        report: Report,
    ) -> None:
        self.sm = sm
        self.spec = spec
        self.report = report
        self.queues = queue_names(spec)
        self.producing = threading.Event()
        self.consuming = threading.Event()
        self.counters: list[_Counters] = []
        self.errors: list[BaseException] = []
        self._seed = seed
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start every producer and consumer thread. Returns None. Raises nothing."""
        self.producing.set()
        self.consuming.set()
        for k in range(self.spec.producers):
            self._spawn(f"store-perf-producer-{k}", self._produce, k)
        for k in range(self.spec.consumers):
            self._spawn(f"store-perf-consumer-{k}", self._consume, 1000 + k)

    def _spawn(self, name: str, body: Callable[[random.Random, _Counters], None], k: int) -> None:
        counters = _Counters()
        self.counters.append(counters)
        rng = random.Random(self._seed * 1_000_003 + k)

        def run() -> None:
            try:
                body(rng, counters)
            except BaseException as exc:  # raised by join, after every thread stopped
                self.errors.append(exc)
                self.producing.clear()
                self.consuming.clear()

        thread = threading.Thread(target=run, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def stop_producers(self) -> None:
        """Producers finish the call they are in and stop. Returns None. Raises nothing."""
        self.producing.clear()

    def stop(self) -> None:
        """Every thread finishes the call it is in and stops. Returns None. Raises nothing."""
        self.producing.clear()
        self.consuming.clear()

    def join(self) -> None:
        """Wait for every thread (after :meth:`stop`). Returns None. Raises the first error
        a thread met."""
        for thread in self._threads:
            thread.join()
        if self.errors:
            raise self.errors[0]

    def depth(self) -> int:
        """Messages not yet acknowledged on the workload's queues. Raises UnknownQueueError."""
        return sum(self.sm.depth(q) for q in self.queues)

    def _message(self, rng: random.Random, counters: _Counters, queue: str) -> Message:
        spec = self.spec
        size = spec.large_size if rng.random() < spec.large_ratio else spec.size
        counters.body_bytes += size
        return Message(address=queue, body=rng.randbytes(16) * (size // 16) + b"x" * (size % 16))

    def _produce(self, rng: random.Random, c: _Counters) -> None:
        sm, spec = self.sm, self.spec
        while self.producing.is_set():
            if rng.random() < spec.tx_ratio:
                tx = sm.begin()
                sent = []
                for _ in range(rng.randint(1, 4)):
                    queue = rng.choice(self.queues)
                    mid = tx.send(self._message(rng, c, queue), queues=[queue])
                    assert mid is not None
                    sent.append((queue, mid))
                start = time.perf_counter_ns()
                tx.commit()
                c.latency["commit"].append(time.perf_counter_ns() - start)
                c.ops["tx_send"] += len(sent)
                for queue, mid in sent:
                    self.report("send", queue, mid)
                continue
            queue = rng.choice(self.queues)
            message = self._message(rng, c, queue)
            start = time.perf_counter_ns()
            mid = sm.send(message, queues=[queue], sync=True)
            c.latency["send"].append(time.perf_counter_ns() - start)
            assert mid is not None  # routed to its queue, never dropped (PAGE policy)
            c.ops["send"] += 1
            self.report("send", queue, mid)

    def _consume(self, rng: random.Random, c: _Counters) -> None:
        sm, spec = self.sm, self.spec
        k = rng.randrange(len(self.queues))
        while self.consuming.is_set():
            for i in range(len(self.queues)):
                queue = self.queues[(k + i) % len(self.queues)]
                deliveries = sm.receive(queue, max_messages=spec.receive_batch)
                if deliveries:
                    k = (k + i + 1) % len(self.queues)
                    break
            else:
                time.sleep(_IDLE_SLEEP)
                continue
            ids = [d.message.message_id for d in deliveries]
            for mid in ids:
                self.report("receive", queue, mid)  # type: ignore[arg-type]
            if rng.random() < spec.tx_ratio:
                tx = sm.begin()
                for mid in ids:
                    assert mid is not None
                    tx.ack(queue, mid)
                start = time.perf_counter_ns()
                tx.commit()
                c.latency["commit"].append(time.perf_counter_ns() - start)
                c.ops["tx_ack"] += len(ids)
                for mid in ids:
                    self.report("ack", queue, mid)  # type: ignore[arg-type]
                continue
            for mid in ids:
                assert mid is not None
                start = time.perf_counter_ns()
                sm.ack(queue, mid, sync=True)
                c.latency["ack"].append(time.perf_counter_ns() - start)
                c.ops["ack"] += 1
                self.report("ack", queue, mid)
