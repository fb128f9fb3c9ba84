"""Kill -9 rounds with paging set off by the global limit alone (issue 27): the address has no
limit of its own, ``global-max-messages`` is 30, and the worker
(:mod:`tests.messaging.global_limit_worker`) sends faster than it consumes, so most of what
waits is paged, and pages are completed and deleted while it runs.

After each round the parent loads the store and reads the whole queue (without acking) and
checks, against everything the worker reported in every round so far (docs/conventions.md#7):

- the messages come back in send order (their ``seq`` rises strictly), each exactly once;
- every send that returned is there unless its ack was begun (``R``);
- no message whose ack returned (``A``) is back.

The seed and kill moment are in every assertion message.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

from store import StoreConfig
from store.messaging import StorageManager
from tests.messaging.global_limit_worker import QUEUE
from tests.messaging.killed import reopen, run_killed
from tests.support.backends import file_config_mapping, unique_prefix
from tests.support.db_backends import db_backend
from tests.support.profile import rounds


def _check(
    config: StoreConfig, sent: set[int], begun: set[int], acked: set[int], where: str
) -> int:
    """Read the queue after a kill and check it (module docstring); returns how many wait."""
    with StorageManager(reopen(config)) as sm:
        sm.load()
        found: list[int] = []
        while batch := sm.receive(QUEUE, max_messages=500):
            found += [int(d.message.properties["seq"]) for d in batch]  # type: ignore[arg-type]
        paged = sm._pager.remaining(QUEUE, sm._state.queues[QUEUE].info.id) > 0 or any(
            sm._store.paging.store(a).pages() for a in sm._store.paging.addresses()
        )
    bad = [(a, b) for a, b in itertools.pairwise(found) if a >= b]
    assert not bad, f"{where}: out of send order or twice (seq, next seq): {bad[:5]}"
    back = sorted(acked & set(found))
    assert not back, f"{where}: acknowledged acks undone: {back[:10]}"
    lost = sorted(sent - begun - set(found))
    assert not lost, f"{where}: acknowledged sends lost: {lost[:10]}"
    return int(paged)


def _rounds(config: StoreConfig, rounds: int, *, seed: int, longest: float) -> None:
    config = config.replace(global_max_messages=30, address_settings={})
    rng = random.Random(seed)
    sent: set[int] = set()
    begun: set[int] = set()
    acked: set[int] = set()
    paged_rounds = 0
    for round_no in range(1, rounds + 1):
        kill_after = rng.uniform(0.1, longest)
        where = f"seed {seed}, round {round_no}, killed after {kill_after:.3f} s"
        for line in run_killed(
            "tests.messaging.global_limit_worker", (config, round_no), kill_after
        ):
            kind, seq = line.split()
            {"S": sent, "R": begun, "A": acked}[kind].add(int(seq))
        paged_rounds += _check(config, sent, begun, acked, where)
    assert len(sent) > rounds * 20 and len(acked) > rounds * 5, (len(sent), len(acked))
    assert paged_rounds > 0, f"seed {seed}: the global limit never made the address page"


def test_kill9_rounds_paging_by_the_global_limit_on_the_file_store(tmp_path: Path):
    seed = random.SystemRandom().randrange(1 << 20)
    config = StoreConfig.from_mapping(file_config_mapping(tmp_path, "NIO"))
    _rounds(config, rounds(8), seed=seed, longest=1.0)


@pytest.mark.parametrize("name", ["postgresql"])
def test_kill9_rounds_paging_by_the_global_limit_on_a_database(tmp_path: Path, name: str):
    seed = random.SystemRandom().randrange(1 << 20)
    spec = db_backend(name)
    config = spec.make_config(tmp_path, unique_prefix())
    try:
        _rounds(config, rounds(4), seed=seed, longest=2.0)
    finally:
        spec.cleanup(config)
