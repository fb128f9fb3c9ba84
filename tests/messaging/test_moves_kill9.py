"""Kill -9 rounds in the middle of dead-letter and expiry moves: the worker
(:mod:`tests.messaging.moves_worker`) dead-letters every message it cancels, a share of what it
sends expires (moved by the store's expiry scan and by receives), one message in five is
large and the work queue pages past 20 messages; it is killed with SIGKILL at a random moment.

After each round the parent loads the store (its expiry scan off) and browses every queue,
then checks against everything the worker reported in every round so far (docs/conventions.md#7):

- each message (its ``seq`` property, which a move keeps) is on at most one queue, once;
- every send that returned is on one of the work, dead-letter and expiry queues, unless its
  ack on the dead-letter queue was begun (``R``);
- no message whose ack returned (``A``) is back;
- a large message's body is whole on whichever queue holds it.

Over the rounds both kinds of move must have happened (some messages on each target queue).
The seed and kill moment are in every assertion message.
"""

from __future__ import annotations

import collections
import random
from pathlib import Path

import pytest

from store import StoreConfig
from store.messaging import StorageManager
from tests.messaging.killed import reopen, run_killed
from tests.messaging.moves_worker import BIG, DEAD, EXPIRED, WORK
from tests.support.backends import file_config_mapping, unique_prefix
from tests.support.db_backends import db_backend
from tests.support.profile import rounds

SETTINGS = {
    "dead_letter_address": "DLA",
    "max_delivery_attempts": 1,
    "expiry_address": "EXP",
    "max_size_messages": 20,
    "address_full_policy": "PAGE",
}


def _check(config: StoreConfig, sent: set[int], begun: set[int], acked: set[int], where: str):
    """Browse every queue after a kill and check it (module docstring); returns the number
    of messages on each queue."""
    on: dict[int, list[str]] = collections.defaultdict(list)
    with StorageManager(reopen(config)) as sm:
        sm.load()
        for message, queues in sm.browse():
            seq = int(message.properties["seq"])  # type: ignore[arg-type]
            on[seq] += queues
            if message.is_large:
                with message.open_body() as body:
                    assert body.read() == BIG, f"{where}: the body of {seq} is not whole"
    twice = sorted((s, q) for s, q in on.items() if len(q) > 1)
    assert not twice, f"{where}: on more than one queue or twice: {twice[:5]}"
    back = sorted(acked & on.keys())
    assert not back, f"{where}: acknowledged acks undone: {back[:10]}"
    lost = sorted(sent - begun - on.keys())
    assert not lost, f"{where}: acknowledged sends on no queue: {lost[:10]}"
    return collections.Counter(q for queues in on.values() for q in queues)


def _rounds(config: StoreConfig, rounds: int, *, seed: int, longest: float) -> None:
    config = config.replace(
        min_large_message_size=4096,
        address_settings={WORK: SETTINGS},
        message_expiry_scan_period=-1,
    )
    worker = config.replace(message_expiry_scan_period=50)
    rng = random.Random(seed)
    sent: set[int] = set()
    begun: set[int] = set()
    acked: set[int] = set()
    seen: collections.Counter[str] = collections.Counter()
    for round_no in range(1, rounds + 1):
        kill_after = rng.uniform(0.2, longest)
        where = f"seed {seed}, round {round_no}, killed after {kill_after:.3f} s"
        payload = (worker, round_no, seed * 1000 + round_no)
        for line in run_killed("tests.messaging.moves_worker", payload, kill_after):
            kind, seq = line.split()
            {"S": sent, "R": begun, "A": acked}[kind].add(int(seq))
        seen.update(_check(config, sent, begun, acked, where))
    assert len(sent) > rounds * 10, len(sent)
    assert seen[DEAD] and seen[EXPIRED], f"seed {seed}: moves seen {dict(seen)}"


def test_kill9_rounds_of_moves_on_the_file_store(tmp_path: Path):
    seed = random.SystemRandom().randrange(1 << 20)
    config = StoreConfig.from_mapping(file_config_mapping(tmp_path, "NIO"))
    _rounds(config, rounds(6), seed=seed, longest=1.0)


@pytest.mark.parametrize("name", ["sqlite", "postgresql", "mariadb"])
def test_kill9_rounds_of_moves_on_a_database(tmp_path: Path, name: str):
    seed = random.SystemRandom().randrange(1 << 20)
    spec = db_backend(name)
    config = spec.make_config(tmp_path, unique_prefix())
    try:
        _rounds(config, rounds(3), seed=seed, longest=1.5)
    finally:
        spec.cleanup(config)
