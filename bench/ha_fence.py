"""The cost of HA fencing (DESIGN §8): the same store written with and without a node manager.

Each write batch of a store opened with ``open_store(config, node_manager=nm)`` first runs
the fence: one ``SELECT`` of the live-lock row (``FOR SHARE`` on PostgreSQL and MariaDB, with
the transaction's idle bound on PostgreSQL) in the batch's own transaction. Figures per
database (``--backend postgresql mariadb sqlite``):

* ``1 thread, sync, interleaved``: two stores open at once on their own tables, one plain and
  one fenced; one thread appends a 100-byte record with ``sync=True`` to each in turn, 2,000
  times, timing every append (each is one batch): the difference of the median latencies is
  the fence's cost per batch. Interleaving makes load drifts hit both alike, which separate
  runs on a shared machine do not;
* ``8 threads, sync``: eight threads doing the same (group commit shares batches, so the
  fence is paid once per batch, not per append);
* ``fence statement alone``: the fence called 2,000 times in one open transaction on a
  writer-like connection (µs per call): its own cost, without the commit's fsync that
  dominates (and blurs) the figures above;
* ``renew round trip``: the live node's renew (``DatabaseNodeManager._renew_live``: one
  transaction reading the database clock and extending the lease row), called 200 times
  back to back on a live node manager and timed one by one: p50 / p99 in µs (the node
  manager's own thread keeps renewing every renew period meanwhile, as in production).

``--threads`` picks the thread counts of the throughput figure (default 8; 64 for the
64-thread figure of issue 10) and ``--figures`` which figures to run (default all).

Plain and fenced runs alternate (``--repeat`` pairs) on fresh tables, so load drifts hit both
alike; medians are reported. Tables (prefix ``bench<hex>_``) are dropped at the end.

Run: ``python -m bench.ha_fence [--backend postgresql mariadb sqlite] [--seconds S]
[--repeat K] [--threads N …] [--figures interleaved threads alone renew]``.

Thread-safety: the store is shared by the worker threads; everything else runs on the main
thread.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import threading
import time
from pathlib import Path

from bench.db_bench import database_config
from store import StoreConfig, open_store
from store.db.migrate import drop_schema
from store.ha import open_node_manager

_ids = itertools.count(1)
_RECORD = b"r" * 100


def _run(config: StoreConfig, *, fenced: bool, threads: int, seconds: float) -> tuple[int, float]:
    """Append for ``seconds`` on ``threads`` threads; returns (appends, elapsed seconds)."""
    nm = open_node_manager(config) if fenced else None
    if nm is not None:
        nm.start_primary(timeout=30)
    try:
        with open_store(config, node_manager=nm) as store:
            store.bindings.load()
            store.messages.load()
            counts = [0] * threads
            stop = threading.Event()

            def worker(index: int) -> None:
                while not stop.is_set():
                    store.messages.append_add(next(_ids), 45, _RECORD, sync=True)
                    counts[index] += 1

            workers = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
            started = time.perf_counter()
            for w in workers:
                w.start()
            time.sleep(seconds)
            stop.set()
            for w in workers:
                w.join()
            return sum(counts), time.perf_counter() - started
    finally:
        if nm is not None:
            nm.close()


def _interleaved(which: str, data_dir: Path, appends: int = 2000) -> tuple[float, float]:
    """Median µs of a sync append on a plain and on a fenced store, appends interleaved."""
    plain_config = database_config(which, data_dir)
    fenced_config = database_config(which, data_dir)
    nm = open_node_manager(fenced_config)
    try:
        nm.start_primary(timeout=30)
        with (
            open_store(plain_config) as plain,
            open_store(fenced_config, node_manager=nm) as fenced,
        ):
            times: dict[int, list[float]] = {0: [], 1: []}
            for store in (plain, fenced):
                store.bindings.load()
                store.messages.load()
            for _ in range(appends):
                for side, store in enumerate((plain, fenced)):
                    started = time.perf_counter()
                    store.messages.append_add(next(_ids), 45, _RECORD, sync=True)
                    times[side].append((time.perf_counter() - started) * 1e6)
        return statistics.median(times[0]), statistics.median(times[1])
    finally:
        nm.close()
        drop_schema(plain_config)
        drop_schema(fenced_config)


def _fence_alone(config: StoreConfig, calls: int = 2000) -> float:
    """Mean µs of one fence call inside an open transaction."""
    from store.ha.database import DatabaseNodeManager

    nm = open_node_manager(config)
    assert isinstance(nm, DatabaseNodeManager)
    try:
        nm.start_primary(timeout=30)
        fence = nm.fence()
        raw = nm.engine.raw_connection()
        try:
            conn = raw.driver_connection
            fence(conn)  # first call prepares the session (MariaDB)
            started = time.perf_counter()
            for _ in range(calls):
                fence(conn)
            took = time.perf_counter() - started
            conn.rollback()
        finally:
            raw.close()
        return took / calls * 1e6
    finally:
        nm.close()


def _renew_times(config: StoreConfig, renews: int = 200) -> tuple[float, float]:
    """(p50, p99) µs of one renew of the live lock, ``renews`` renews timed one by one."""
    from store.ha.database import DatabaseNodeManager

    nm = open_node_manager(config)
    assert isinstance(nm, DatabaseNodeManager)
    try:
        nm.start_primary(timeout=30)
        nm._renew_live()  # first use of a pooled connection
        times: list[float] = []
        for _ in range(renews):
            started = time.perf_counter()
            nm._renew_live()
            times.append((time.perf_counter() - started) * 1e6)
        assert nm.is_live
        times.sort()
        p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
        return statistics.median(times), p99
    finally:
        nm.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", nargs="+", default=["postgresql", "mariadb", "sqlite"])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path("bench/out/ha"))
    parser.add_argument("--threads", type=int, nargs="+", default=[8])
    figures = ["interleaved", "threads", "alone", "renew"]
    parser.add_argument("--figures", nargs="+", choices=figures, default=figures)
    args = parser.parse_args()
    print("| database | figure | plain | fenced | fence cost |")
    print("| --- | --- | ---: | ---: | ---: |")
    for which in args.backend:
        config = database_config(which, args.dir)
        try:
            if "interleaved" in args.figures:
                plain_us, fenced_us = _interleaved(which, args.dir)
                print(
                    f"| {which} | 1 thread, sync, 100 B, interleaved | {plain_us:.0f} µs | "
                    f"{fenced_us:.0f} µs | {fenced_us - plain_us:+.0f} µs/batch |",
                    flush=True,
                )
            for threads in args.threads if "threads" in args.figures else ():
                rates: dict[bool, list[float]] = {False: [], True: []}
                for _ in range(args.repeat):
                    for fenced in (False, True):
                        n, took = _run(config, fenced=fenced, threads=threads, seconds=args.seconds)
                        rates[fenced].append(n / took)
                for fenced, label in ((False, "plain"), (True, "fenced")):
                    runs = ", ".join(f"{r:,.0f}" for r in rates[fenced])
                    print(f"<!-- {which} {threads} threads {label} runs/s: {runs} -->")
                plain, fenced_rate = (statistics.median(rates[f]) for f in (False, True))
                cost = f"{(fenced_rate / plain - 1) * 100:+.1f}% appends/s"
                print(
                    f"| {which} | {threads} threads, sync, 100 B "
                    f"| {plain:,.0f}/s | {fenced_rate:,.0f}/s | {cost} "
                    f"(load {os.getloadavg()[0]:.1f}) |",
                    flush=True,
                )
            if "alone" in args.figures:
                alone = statistics.median(_fence_alone(config) for _ in range(args.repeat))
                print(f"| {which} | fence statement alone | | | {alone:.0f} µs/call |", flush=True)
            if "renew" in args.figures:
                p50, p99 = _renew_times(config)
                print(
                    f"| {which} | renew round trip (200 renews) | | | "
                    f"p50 {p50:.0f} µs, p99 {p99:.0f} µs (load {os.getloadavg()[0]:.1f}) |",
                    flush=True,
                )
        finally:
            drop_schema(config)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
