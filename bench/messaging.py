"""Messaging through the storage manager: durable send + ack, non-blocking sends, recovery.

Figures (1 KiB bodies everywhere):

- ``send+ack, 16+16 threads``: 16 producers ``send(sync=True)`` to 4 queues while 16 consumers
  ``receive`` and ``ack(sync=True)``; messages acknowledged per second. Beside it, on the same
  store type in the same run, the journal's durable append ceiling (16 threads of
  ``append_add(sync=True)``) and, on PostgreSQL, the raw COPY baseline of
  :mod:`bench.db_baselines`. A message costs three journal records (add, ref, and the
  delete that is its ack) of which two are waited for (the send's and the ack's).
- ``non-blocking send+ack``: one producer ``send(sync=False)`` keeping up to 1,000 messages in
  flight (a ``sync_future()`` per 1,000), one consumer acking likewise; messages/s made
  durable end to end.
- ``recovery``: a store holding ``--messages`` messages on 10 queues is reopened and
  ``load()`` timed: messages/s and the peak resident memory of the load (VmHWM, reset before it
  through ``/proc/self/clear_refs``).

Run: ``python -m bench.messaging [--backend file|postgresql ...] [--messages N]``.
Thread-safety: one run at a time; the figures' threads are its own.
"""

from __future__ import annotations

import argparse
import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.common import (
    Result,
    add_common_arguments,
    configure,
    console,
    machine_info,
    median_rate,
    print_machine,
    print_results,
    run_threads,
    scratch_dir,
)
from store import StoreConfig, open_store
from store.messaging import Message, StorageManager

BODY = b"x" * 1024
QUEUES = [f"bench.q{k}" for k in range(4)]


def _file_config(root: Path) -> StoreConfig:
    return StoreConfig.from_mapping(
        {
            "journal-directory": str(root / "journal"),
            "bindings-directory": str(root / "bindings"),
            "large-messages-directory": str(root / "large"),
            "paging-directory": str(root / "paging"),
        }
    )


@contextmanager
def _manager(config: StoreConfig, queues: list[str]) -> Iterator[StorageManager]:
    with StorageManager(open_store(config)) as sm:
        sm.load()
        have = {q.name for q in sm.queues()}
        for q in queues:
            if q not in have:
                sm.create_address(q)
                sm.create_queue(q, address=q)
        yield sm


def send_ack_rate(config: StoreConfig, threads: int, seconds: float) -> float:
    """Messages/s sent with sync and acked with sync by ``threads`` producers and as many
    consumers; counts acks."""
    with _manager(config, QUEUES) as sm:
        stop = threading.Event()

        def produce(k: int) -> None:
            for n in itertools.count():
                if stop.is_set():
                    return
                q = QUEUES[(k + n) % len(QUEUES)]
                sm.send(Message(q, BODY), queues=[q], sync=True)

        producers = [threading.Thread(target=produce, args=(k,)) for k in range(threads)]
        for t in producers:
            t.start()

        def consume(stop_c: threading.Event) -> int:
            n, k = 0, 0
            while not stop_c.is_set():
                k = (k + 1) % len(QUEUES)
                for d in sm.receive(QUEUES[k], max_messages=10):
                    sm.ack(QUEUES[k], d.message.message_id or 0, sync=True)
                    n += 1
            return n

        try:
            rate = run_threads(threads, seconds, consume)
        finally:
            stop.set()
            for t in producers:
                t.join()
        return rate


def non_blocking_rate(config: StoreConfig, seconds: float, window: int = 1000) -> float:
    """Messages/s sent (no sync) by one producer and acked (no sync) by one consumer, each
    waiting on ``sync_future()`` once per ``window`` messages; counts durable acks."""
    q = QUEUES[0]
    with _manager(config, [q]) as sm:
        stop = threading.Event()

        def produce() -> None:
            while not stop.is_set():
                for _ in range(window):
                    sm.send(Message(q, BODY), queues=[q], sync=False)
                sm.sync_future().result()
                while sm.depth(q) > 4 * window and not stop.is_set():
                    time.sleep(0.001)

        producer = threading.Thread(target=produce)
        producer.start()
        acked = 0
        start = time.perf_counter()
        deadline = start + seconds
        try:
            while time.perf_counter() < deadline:
                batch = 0
                while batch < window and time.perf_counter() < deadline:
                    ds = sm.receive(q, max_messages=100)
                    if not ds:
                        time.sleep(0.0005)
                    for d in ds:
                        sm.ack(q, d.message.message_id or 0, sync=False)
                    batch += len(ds)
                sm.sync_future().result()
                acked += batch
            return acked / (time.perf_counter() - start)
        finally:
            stop.set()
            producer.join()


def journal_ceiling(config: StoreConfig, threads: int, seconds: float) -> float:
    """Durable appends/s of ``threads`` threads of 1 KiB ``append_add(sync=True)``."""
    ids = itertools.count(1 << 40)
    with open_store(config) as store:
        store.bindings.load()
        store.messages.load()

        def worker(stop: threading.Event) -> int:
            n = 0
            while not stop.is_set():
                store.messages.append_add(next(ids), 45, BODY, sync=True)
                n += 1
            return n

        return run_threads(threads, seconds, worker)


def _peak_rss_reset() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _peak_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def recovery(config: StoreConfig, messages: int) -> tuple[float, float, float]:
    """Fill a store with ``messages`` on 10 queues, reopen it, time ``load()``. Returns
    (messages/s of the load, its seconds, peak RSS MB during it)."""
    queues = [f"bench.r{k}" for k in range(10)]
    with _manager(config, queues) as sm:
        for n in range(messages):
            q = queues[n % 10]
            sm.send(Message(q, BODY), queues=[q], sync=False)
        sm.flush()
    _peak_rss_reset()
    start = time.perf_counter()
    with StorageManager(open_store(config)) as sm:
        rec = sm.load()
        seconds = time.perf_counter() - start
        peak = _peak_rss_mb()
        assert rec.messages == messages, (rec.messages, messages)
    return messages / seconds, seconds, peak


def _pg_config(data_dir: Path) -> StoreConfig:
    from bench.db_bench import database_config

    return database_config("postgresql", data_dir)


def run(backend: str, args: argparse.Namespace) -> list[Result]:
    """Every figure of one back-end. Returns them."""
    from bench.db_bench import bench_store

    results: list[Result] = []
    with scratch_dir(args.dir, f"messaging-{backend}") as root:
        fresh = (
            (lambda: _file_config(root / str(time.monotonic_ns())))
            if backend == "file"
            else (lambda: _pg_config(root))
        )

        def figure(name: str, unit: str, fn) -> Result:  # type: ignore[no-untyped-def]
            def once() -> float:
                config = fresh()
                if backend == "file":
                    return float(fn(config))
                with bench_store(config) as (engine, names):
                    return float(fn(config, engine, names))

            return median_rate(name, once, repeat=args.repeat, unit=unit)

        s = args.seconds
        if backend == "file":
            results.append(
                figure(
                    "journal ceiling: append_add sync, 16 threads",
                    "records/s",
                    lambda c: journal_ceiling(c, 16, s),
                )
            )
            results.append(
                figure("send+ack sync, 16+16 threads", "msg/s", lambda c: send_ack_rate(c, 16, s))
            )
            results.append(
                figure(
                    "non-blocking send+ack, 1+1, 1000 in flight",
                    "msg/s",
                    lambda c: non_blocking_rate(c, s),
                )
            )
        else:
            from bench.db_baselines import copy_rate

            results.append(
                figure(
                    "raw COPY, batches of 1000",
                    "rows/s",
                    lambda c, e, n: copy_rate(e, n.messages, s, 1),
                )
            )
            results.append(
                figure(
                    "journal ceiling: append_add sync, 16 threads",
                    "records/s",
                    lambda c, e, n: journal_ceiling(c, 16, s),
                )
            )
            results.append(
                figure(
                    "send+ack sync, 16+16 threads", "msg/s", lambda c, e, n: send_ack_rate(c, 16, s)
                )
            )
            results.append(
                figure(
                    "non-blocking send+ack, 1+1, 1000 in flight",
                    "msg/s",
                    lambda c, e, n: non_blocking_rate(c, s),
                )
            )
        config = fresh()
        if backend == "file":
            rate, seconds, peak = recovery(config, args.messages)
        else:
            with bench_store(config):
                rate, seconds, peak = recovery(config, args.messages)
        results.append(
            Result(
                f"recovery: load() of {args.messages:,} messages on 10 queues",
                rate,
                "msg/s",
                (rate,),
                note=f"{seconds:.1f} s, peak RSS {peak:,.0f} MB",
            )
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument("--backend", action="append", choices=["file", "postgresql"])
    parser.add_argument("--messages", type=int, default=200_000)
    args = parser.parse_args()
    configure(args)
    out = console()
    print_machine(machine_info(args.dir), out)
    for backend in args.backend or ["file", "postgresql"]:
        print_results(f"messaging, {backend}", run(backend, args), out)


if __name__ == "__main__":
    main()
