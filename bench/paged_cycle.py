"""CPU per send+receive+ack cycle on a deep queue whose receives read pages, beside the same
cycles at depth 0 in the same process (issue 27: "send/receive/ack rates with N waiting
within 20 % of those at depth 0").

``bench.deep_queues --drain`` measures the same regime in wall-clock seconds, which move by
up to 2x between runs on a shared machine; this script takes ``time.process_time()`` (every
thread of the process) instead, the figure the RESULTS tables give, and alternates the two
regimes so that a slow minute of the machine falls on both:

- a copy of ``--store`` (built by ``python -m bench.deep_queues build``) is opened and
  loaded, and what the load kept in memory is drained (``bench.deep_drain.drain``): from
  then on every receive of it reads a page; beside it, a new empty store with the same
  queue (depth 0: every message sent stays in memory until it is received);
- ``--rounds`` times: a block of ``--cycles`` cycles of one send (``sync=False``), one
  receive and one ack (``sync=False``), then the flush, as ``bench.deep_drain.steady`` does
  them, on the deep store, then a block on the empty one. The medians are printed, and the
  median of the rounds' ratios (depth 0 / paged), with its range, and the ratio of all
  rounds' CPU together (the rate: a round in which a page completes, when its cursor acks
  are deleted, costs the paged side a few more µs a cycle, which the median leaves out);
- then, on each, the same operations split (every send, then every receive, then every
  ack), which shows what each costs.

Every body received is checked against the one expected (order and exactly-once).

Run::

    PYTHONPATH=. python -m bench.deep_queues build --backend file --messages 200000 \
        --dir /tmp/deep/p2
    PYTHONPATH=. python -m bench.paged_cycle --store /tmp/deep/p2 --cycles 5000 --rounds 7

Thread-safety: one run per process.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from bench.deep_drain import Expected, drain, in_memory, tail_body
from bench.deep_queues import QUEUE
from bench.messaging import _file_config
from store import open_store
from store.messaging import Delivery, Message, StorageManager


class _Cycles:
    """Cycles on one queue of ``sm``; bodies checked against ``expected``."""

    def __init__(self, sm: StorageManager, expected: Iterator[bytes]) -> None:
        self.sm = sm
        self.expected = expected
        self.sent = 0

    def _send(self) -> None:
        self.sm.send(Message(QUEUE, tail_body(self.sent)), sync=False)
        self.sent += 1

    def _ack(self, delivery: Delivery) -> None:
        assert delivery.message.body == next(self.expected), "out of order"
        assert delivery.message.message_id is not None
        self.sm.ack(QUEUE, delivery.message.message_id, sync=False)

    def interleaved(self, n: int) -> float:
        """CPU µs per cycle of ``n`` send+receive+ack cycles, the flush included."""
        started = time.process_time()
        for _ in range(n):
            self._send()
            (delivery,) = self.sm.receive(QUEUE, 1)
            self._ack(delivery)
        self.sm.flush()
        return (time.process_time() - started) / n * 1e6

    def split(self, n: int) -> tuple[float, float, float]:
        """CPU µs per operation of ``n`` sends, then ``n`` receives, then ``n`` acks."""
        t0 = time.process_time()
        for _ in range(n):
            self._send()
        t1 = time.process_time()
        got = [self.sm.receive(QUEUE, 1)[0] for _ in range(n)]
        t2 = time.process_time()
        for delivery in got:
            self._ack(delivery)
        self.sm.flush()
        t3 = time.process_time()
        return ((t1 - t0) / n * 1e6, (t2 - t1) / n * 1e6, (t3 - t2) / n * 1e6)


def run(store: Path, cycles: int, rounds: int) -> dict[str, object]:
    """The figures of one run on a copy of ``store`` and a new empty store (module
    docstring). Raises AssertionError when a body comes back out of order or too few
    messages are paged."""
    with tempfile.TemporaryDirectory(prefix="paged-cycle-") as scratch:
        root = Path(scratch) / "store"
        shutil.copytree(store, root)
        deep = StorageManager(open_store(_file_config(root)))
        empty = StorageManager(open_store(_file_config(Path(scratch) / "empty")))
        try:
            deep.load()
            empty.load()
            empty.create_address(QUEUE)
            empty.create_queue(QUEUE, address=QUEUE)
            qid = deep._state.queues[QUEUE].info.id
            expected = iter(Expected(0, deep.depth(QUEUE)))
            drain(deep, QUEUE, expected, in_memory(deep, QUEUE))
            need = (rounds + 1) * cycles
            assert deep._pager.remaining(QUEUE, qid) > need, "too few paged messages"
            paged, zero = _Cycles(deep, expected), _Cycles(empty, iter(Expected(0, 0)))
            blocks = [(paged.interleaved(cycles), zero.interleaved(cycles)) for _ in range(rounds)]
            paged_split, zero_split = paged.split(cycles), zero.split(cycles)
        finally:
            deep.close()
            empty.close()
    ratios = [z / p for p, z in blocks]
    return {
        "paged_us": statistics.median([p for p, _ in blocks]), "paged_split_us": paged_split,
        "depth0_us": statistics.median([z for _, z in blocks]), "depth0_split_us": zero_split,
        "ratio": statistics.median(ratios), "ratio_range": (min(ratios), max(ratios)),
        "ratio_of_sums": sum(z for _, z in blocks) / sum(p for p, _ in blocks),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", type=Path, required=True, help="a bench.deep_queues build")
    parser.add_argument("--cycles", type=int, default=5_000, help="cycles per block")
    parser.add_argument("--rounds", type=int, default=7, help="blocks on each store")
    args = parser.parse_args()
    f = run(args.store, args.cycles, args.rounds)
    split = "send %.1f, receive %.1f, ack %.1f"
    print(f"paged   {f['paged_us']:6.1f} µs per cycle; split: " + split % f["paged_split_us"])
    print(f"depth 0 {f['depth0_us']:6.1f} µs per cycle; split: " + split % f["depth0_split_us"])
    low, high = f["ratio_range"]  # type: ignore[misc]
    print(
        f"depth 0 / paged: {f['ratio']:.2f}x, the median of {args.rounds} rounds "
        f"({low:.2f}-{high:.2f}x; issue 27: rates within 20 % of depth 0, at least 0.80x; "
        "0.83x read strictly)"
    )
    print(
        f"depth 0 / paged over all {args.rounds} rounds' CPU: {f['ratio_of_sums']:.2f}x "
        "(the rate: a page's completion, deleting its cursor acks, falls in one round)"
    )


if __name__ == "__main__":
    main()
