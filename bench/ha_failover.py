"""Failover time of a shared-store pair (issue 10, DESIGN §8): ``kill -9`` of the live node
until the waiting backup is live, with real ``store ha run`` processes.

The nodes are those of the failover tests (:class:`tests.ha.nodes.Node`, configured by
:func:`tests.ha.conftest.ha_mapping`: ``jdbc-lock-renew-period`` 200 ms,
``jdbc-lock-expiration`` 1500 ms, ``jdbc-network-timeout`` 1500 ms). Each round, as in
``test_kill_9_of_the_live_node_fails_over_within_the_lease_and_loses_nothing``:

1. a backup is started and says it is waiting (then 0.5 s more, so it holds the backup lock);
2. the live node acknowledges 20 more durable writes;
3. after a random pause (uniform in 0 .. ``--jitter`` seconds, default 0.4: two renew
   periods, so the kill lands at a random phase of the dead node's renews and of the
   backup's polls, which the fixed sequence of the steps above otherwise pins), it gets
   SIGKILL; the clock starts just before the signal is sent;
4. the backup's "live as backup" line (read from its stderr by the bench) and its first
   acknowledged write (its stdout) stop two clocks.

The backup then is the live node of the next round (``--rounds``, default 20). Reported per
database: min / p50 / p99 / max of both clocks (p99 of 20 runs is the largest but one,
interpolated). Tables (own prefix) are dropped at the end.

Run: ``python -m bench.ha_failover [--backend postgresql mariadb] [--rounds N]
[--jitter S]``.

Thread-safety: the main thread drives everything; each node's reader threads only append.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from store import StoreConfig
from store.db.migrate import drop_schema
from tests.ha.conftest import EXPIRATION_MS, RENEW_MS, ha_mapping
from tests.ha.nodes import Node, write_toml
from tests.support.backends import unique_prefix


class TimedNode(Node):
    """A :class:`Node` that also notes when its first acknowledged write was read."""

    def __init__(self, config: Path, role: str) -> None:
        self.first_ack_at: float | None = None
        self._first_ack = threading.Event()
        super().__init__(config, role)

    def _read_acks(self, stream: IO[str]) -> None:
        for line in stream:
            if self.first_ack_at is None:
                self.first_ack_at = time.monotonic()
                self._first_ack.set()
            with self._guard:
                self.acks.append(int(line))

    def wait_waiting(self, timeout: float) -> None:
        """Wait until the node says it is waiting to go live."""
        deadline = time.monotonic() + timeout
        while not any(e.startswith("waiting to go live") for e in self.errors[:5]):
            assert time.monotonic() < deadline, f"{self.role} never waited: {self.stderr()}"
            assert self.proc.poll() is None, f"{self.role} exited: {self.stderr()}"
            time.sleep(0.01)

    def wait_first_ack(self, timeout: float) -> float:
        """Wait for the first acknowledged write; returns its moment (monotonic)."""
        assert self._first_ack.wait(timeout), f"{self.role} wrote nothing: {self.stderr()}"
        assert self.first_ack_at is not None
        return self.first_ack_at


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, linearly interpolated."""
    ordered = sorted(values)
    at = (len(ordered) - 1) * q
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def failovers(
    which: str, rounds: int, work: Path, jitter: float
) -> tuple[list[float], list[float]]:
    """``rounds`` kill -9 failovers on ``which``; returns (seconds to "live", seconds to the
    first acknowledged write), one per round."""
    mapping = ha_mapping(work, unique_prefix(), which)
    config = StoreConfig.from_mapping(mapping)
    path = write_toml(mapping, work / f"{which}.toml")
    nodes: list[TimedNode] = []
    to_live: list[float] = []
    to_write: list[float] = []
    try:
        live = TimedNode(path, "primary")
        nodes.append(live)
        live.wait_live(60)
        for _ in range(rounds):
            backup = TimedNode(path, "backup")
            nodes.append(backup)
            backup.wait_waiting(60)
            time.sleep(0.5)  # it takes the backup lock and polls the live one
            live.wait_acks(20, 30)
            time.sleep(random.uniform(0, jitter))
            killed_at = time.monotonic()
            live.signal(signal.SIGKILL)
            live.finish()
            to_live.append(backup.wait_live(30) - killed_at)
            to_write.append(backup.wait_first_ack(30) - killed_at)
            print(
                f"  {which} round {len(to_live)}: live {to_live[-1] * 1000:.0f} ms, "
                f"first write {to_write[-1] * 1000:.0f} ms",
                flush=True,
            )
            live = backup
        live.stop()
    finally:
        for node in nodes:
            node.kill()
        drop_schema(config)
    return to_live, to_write


def _row(which: str, what: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (
        f"| {which} | {what} | {len(ms)} | {min(ms):.0f} | {statistics.median(ms):.0f} | "
        f"{percentile(ms, 0.99):.0f} | {max(ms):.0f} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", nargs="+", default=["postgresql", "mariadb"])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--jitter", type=float, default=0.4)
    args = parser.parse_args()
    print(
        f"jdbc-lock-renew-period {RENEW_MS} ms, jdbc-lock-expiration {EXPIRATION_MS} ms "
        f"(bound tested: expiration + one renew period = {EXPIRATION_MS + RENEW_MS} ms); "
        f"kill after a random 0-{args.jitter * 1000:.0f} ms",
        flush=True,
    )
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ha_failover") as tmp:
        for which in args.backend:
            before = os.getloadavg()[0]
            to_live, to_write = failovers(which, args.rounds, Path(tmp), args.jitter)
            print(f"  {which}: load average {before:.2f} → {os.getloadavg()[0]:.2f}", flush=True)
            rows.append(_row(which, "SIGKILL → backup's live line", to_live))
            rows.append(_row(which, "SIGKILL → backup's first acked write", to_write))
    print("| database | from → to | runs | min ms | p50 ms | p99 ms | max ms |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
