"""Round after round of ``kill -9`` on one store, through the storage manager.

Each round starts a worker process (:mod:`store.perf.messaging_worker`: producers send with
``sync=True``, consumers receive and ack with ``sync=True``, some of both in transactions, a
share of large messages, one address that pages) on the same store, and kills it with SIGKILL
at a random moment. The worker reports over a pipe every send and ack once acknowledged, and
every receive before its ack is called. After each round the parent loads the store and checks
the crash invariant (docs/conventions.md#7) against everything reported in all rounds so far:

- every acknowledged send whose message was never received is on its queue, exactly once;
- no message is on a queue twice;
- no message whose ack was acknowledged is back;
- the large-message store holds exactly the bodies of the large messages still on a queue:
  none without its message (an orphan the load failed to sweep, docs/messaging.md), none missing.

A received message whose ack was not acknowledged may be back or not (the ack was in flight).
This check is written here, apart from ``store.perf.messaging_workload.check_recovered``, so
that a bug shared by the workload's own check cannot hide. The round's seed and kill moment are
in every assertion message.
"""

from __future__ import annotations

import collections
import random
from pathlib import Path

import pytest

from store import StoreConfig, open_store
from store.messaging import Message, StorageManager
from store.perf.messaging_worker import WorkerPlan, run_killed_worker
from store.perf.messaging_workload import Ledger, WorkloadSpec, perf_config, queue_names
from tests.messaging.killed import reopen
from tests.support import profile
from tests.support.backends import file_config_mapping, unique_prefix
from tests.support.db_backends import db_backend

# One message in ten large; producers ahead of consumers, so the paged address pages and
# acknowledges paged large messages while their pages still hold unacknowledged ones.
SPEC = WorkloadSpec(producers=4, consumers=2, queues=3, tx_ratio=0.3, large_ratio=0.1)


def _check_round(config: StoreConfig, ledger: Ledger, where: str) -> int:
    """Load the store and check it against ``ledger``; returns the messages on the queues."""
    found: dict[str, collections.Counter[int]] = {}
    large: set[int] = set()
    with StorageManager(reopen(config)) as sm:
        sm.load()
        for queue in queue_names(SPEC):
            ids: collections.Counter[int] = collections.Counter()
            while batch := sm.receive(queue, max_messages=500):
                ids.update(d.message.message_id or 0 for d in batch)
                large.update(d.message.message_id or 0 for d in batch if d.message.is_large)
            found[queue] = ids
        bodies = set(sm._store.large_messages.ids())
    orphans = sorted(bodies - large)
    assert not orphans, f"{where}: {len(orphans)} large bodies no message refers to: {orphans[:10]}"
    missing = sorted(large - bodies)
    assert not missing, f"{where}: large messages without their body: {missing[:10]}"
    for queue, ids in found.items():
        sent, acked = ledger.sent[queue], ledger.acked[queue]
        received = ledger.received[queue]
        twice = sorted(m for m, n in ids.items() if n > 1)
        assert not twice, f"{where}: {queue}: delivered more than once: {twice[:10]}"
        undone = sorted(acked & ids.keys())
        assert not undone, f"{where}: {queue}: acknowledged acks undone: {undone[:10]}"
        lost = sorted(sent - acked - received - ids.keys())
        assert not lost, f"{where}: {queue}: acknowledged sends lost: {lost[:10]}"
    return sum(sum(ids.values()) for ids in found.values())


def _rounds(config: StoreConfig, rounds: int, *, seed: int, longest: float) -> None:
    config = perf_config(config)
    rng = random.Random(seed)
    ledger = Ledger()
    for round in range(rounds):
        kill_after = rng.uniform(0.05, longest)
        where = f"seed {seed}, round {round}, killed after {kill_after:.3f} s"
        plan = WorkerPlan(config=config, spec=SPEC, seed=seed * 1000 + round)
        worker = run_killed_worker(plan, kill_after=kill_after, ledger=ledger)
        assert worker.killed, f"{where}: the worker ended before the kill"
        _check_round(config, ledger, where)
    # Enough work happened for the rounds to mean something.
    assert ledger.sends > rounds * 5 and ledger.acks > rounds * 5, (ledger.sends, ledger.acks)


def test_kill9_rounds_on_the_file_store_lose_nothing_acknowledged(tmp_path: Path):
    """10 rounds in CI (20 until issue 39), 100 in a soak (tests.support.profile)."""
    seed = random.SystemRandom().randrange(1 << 20)
    config = StoreConfig.from_mapping(file_config_mapping(tmp_path, "NIO"))
    _rounds(config, profile.rounds(10), seed=seed, longest=1.0)


@pytest.mark.parametrize(("name", "rounds"), [("postgresql", 5), ("mariadb", 3), ("sqlite", 3)])
def test_kill9_rounds_on_a_database_lose_nothing_acknowledged(
    tmp_path: Path, name: str, rounds: int
):
    seed = random.SystemRandom().randrange(1 << 20)
    spec = db_backend(name)
    config = spec.make_config(tmp_path, unique_prefix())
    try:
        _rounds(config, profile.rounds(rounds), seed=seed, longest=2.0)
    finally:
        spec.cleanup(config)


@pytest.mark.parametrize("lie", ["lost", "undone"])
def test_the_round_check_fails_when_the_ledger_disagrees(tmp_path: Path, lie: str):
    """The check above is not vacuous: a ledger that claims more than happened fails it."""
    config = perf_config(StoreConfig.from_mapping(file_config_mapping(tmp_path, "NIO")))
    ledger = Ledger()
    run_killed_worker(WorkerPlan(config=config, spec=SPEC, seed=1), kill_after=0.5, ledger=ledger)
    queue = queue_names(SPEC)[0]
    if lie == "lost":
        ledger.record("send", queue, 1 << 60)
    else:
        with StorageManager(open_store(config)) as sm:
            sm.load()
            back = [d.message.message_id for d in sm.receive(queue, max_messages=1)]
            if not back:  # rare: the consumers had taken everything; leave one to claim
                address = next(q.address for q in sm.queues() if q.name == queue)
                mid = sm.send(Message(address, b"left"), queues=[queue], sync=True)
                ledger.record("send", queue, mid or 0)
                back = [mid]
        ledger.record("ack", queue, back[0] or 0)
    with pytest.raises(AssertionError, match=lie if lie == "lost" else "undone"):
        _check_round(config, ledger, "lie")
