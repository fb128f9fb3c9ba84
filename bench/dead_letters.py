"""What a dead-letter move costs beside an acknowledgement (issue 42: "a dead-letter move
costs at most 2x an ack"), on the file store, in one run.

Two regimes alternate ``--rounds`` times on one store (``max-delivery-attempts`` 3 and a
dead-letter address with one queue):

- **ack**: ``--cycles`` times send (sync), receive, ack (sync): the time of each ack;
- **dead letter**: ``--cycles`` times send (sync), then receive and cancel three times: the
  third cancel is the move (a copy sent to the dead-letter queue and the original
  acknowledged, one committed journal transaction); the time of each move.

Both wait for one sync of the journal, so the ratio of their medians is what the move adds
(the copy's records, the transaction's commit). Printed beside them: the disk's own
fdatasync time in the same folder (the reference both are bound by). The dead-letter queue is
drained (acks not synced) between rounds, outside the timings.

Run::

    PYTHONPATH=. .venv/bin/python -m bench.dead_letters --dir /tmp/dlbench --cycles 500 --rounds 5

Thread-safety: one run per process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import console, scratch_dir
from bench.messaging import _file_config
from store import open_store
from store.messaging import Message, StorageManager

QUEUE = "orders"
DEAD = "dead"


def _fdatasync_us(folder: Path, n: int) -> float:
    """Median µs of a 100-byte write + fdatasync in ``folder``."""
    fd, name = tempfile.mkstemp(dir=folder)
    times = []
    try:
        for _ in range(n):
            started = time.perf_counter()
            os.write(fd, b"x" * 100)
            os.fdatasync(fd)
            times.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        os.unlink(name)
    return statistics.median(times) * 1e6


def _acks(sm: StorageManager, n: int) -> list[float]:
    times = []
    for i in range(n):
        sm.send(Message(QUEUE, b"a%06d" % i))
        (d,) = sm.receive(QUEUE)
        assert d.message.message_id is not None
        started = time.perf_counter()
        sm.ack(QUEUE, d.message.message_id, sync=True)
        times.append(time.perf_counter() - started)
    return times


def _moves(sm: StorageManager, n: int) -> list[float]:
    times = []
    for i in range(n):
        mid = sm.send(Message(QUEUE, b"d%06d" % i))
        assert mid is not None
        for attempt in range(3):
            (d,) = sm.receive(QUEUE)
            assert d.message.message_id == mid
            started = time.perf_counter()
            sm.cancel(QUEUE, mid)
            if attempt == 2:
                times.append(time.perf_counter() - started)
    assert sm.depth(QUEUE) == 0 and sm.depth(DEAD) >= n
    return times


def _drain_dead(sm: StorageManager) -> None:
    while ds := sm.receive(DEAD, 100):
        for d in ds:
            assert d.message.message_id is not None
            sm.ack(DEAD, d.message.message_id, sync=False)
    sm.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/store-bench"))
    parser.add_argument("--cycles", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    out = console()
    args.dir.mkdir(parents=True, exist_ok=True)
    with scratch_dir(args.dir, "dead-letters") as root:
        config = _file_config(root).replace(
            journal_type="NIO",
            address_settings={QUEUE: {"max_delivery_attempts": 3, "dead_letter_address": "DLA"}},
        )
        with StorageManager(open_store(config)) as sm:
            sm.load()
            sm.create_address(QUEUE)
            sm.create_queue(QUEUE, address=QUEUE)
            sm.create_address("DLA", routing_types=("MULTICAST",))
            sm.create_queue(DEAD, address="DLA", routing_type="MULTICAST")
            acks: list[float] = []
            moves: list[float] = []
            ratios = []
            for _ in range(args.rounds):
                a = _acks(sm, args.cycles)
                m = _moves(sm, args.cycles)
                _drain_dead(sm)
                acks += a
                moves += m
                ratios.append(statistics.median(m) / statistics.median(a))
        sync = _fdatasync_us(root, 200)
    ack_us, move_us = statistics.median(acks) * 1e6, statistics.median(moves) * 1e6
    out.print(f"disk fdatasync (reference)     {sync:9.0f} µs median")
    out.print(f"ack (sync)                     {ack_us:9.0f} µs median  ({len(acks)} acks)")
    out.print(f"dead-letter move (sync commit) {move_us:9.0f} µs median  ({len(moves)} moves)")
    out.print(
        f"move / ack                     {move_us / ack_us:9.2f}x  (rounds: "
        f"{min(ratios):.2f}-{max(ratios):.2f}x; target at most 2x)"
    )


if __name__ == "__main__":
    main()
