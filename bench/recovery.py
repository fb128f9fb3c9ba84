"""Recovery (``StorageManager.load()``) measured on a store built once and loaded many times.

``bench/messaging.py`` fills a store and loads it in the same process, so its peak memory
includes what the fill left behind; here the store is built by one process (``build``, the
same setup: 1 KiB bodies sent with ``sync=False`` round-robin to 10 queues, then ``flush``)
and each ``load`` runs in a fresh process on a copy (file store) or on the same tables
(PostgreSQL; a load only adds an id-counter record). A load prints its CPU seconds (less
sensitive than the wall clock to other processes on a busy machine), its wall seconds and
the peak resident memory (VmHWM) of the process.

Run::

    python -m bench.recovery build --backend file --dir /tmp/rec1m --messages 1000000
    python -m bench.recovery load --backend file --dir /tmp/rec1m --messages 1000000
    python -m bench.recovery build --backend postgresql --prefix rec1m_ --messages 1000000
    python -m bench.recovery load --backend postgresql --prefix rec1m_ --messages 1000000
    python -m bench.recovery drop --backend postgresql --prefix rec1m_

Thread-safety: one command per process.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from bench.messaging import BODY, _file_config, _manager, _peak_rss_mb, _peak_rss_reset
from store import StoreConfig, open_store
from store.messaging import Message, StorageManager

QUEUES = [f"bench.r{k}" for k in range(10)]


def _pg_config(prefix: str) -> StoreConfig:
    from tests.support.db_backends import postgresql_url, store_mapping

    url, user, password = postgresql_url()
    return StoreConfig.from_mapping(store_mapping(url, prefix, user=user, password=password))


def build(config: StoreConfig, messages: int) -> None:
    """Fill the store with ``messages`` messages on 10 queues. Returns None. Raises what the
    store raises."""
    with _manager(config, QUEUES) as sm:
        for n in range(messages):
            q = QUEUES[n % len(QUEUES)]
            sm.send(Message(q, BODY), queues=[q], sync=False)
        sm.flush()


def load(config: StoreConfig, messages: int) -> tuple[float, float, float]:
    """Open the store and time ``load()``; returns (CPU seconds, wall seconds, peak RSS MB).
    Raises AssertionError when the load does not recover ``messages`` messages."""
    _peak_rss_reset()
    wall, cpu = time.perf_counter(), time.process_time()
    with StorageManager(open_store(config)) as sm:
        rec = sm.load()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        peak = _peak_rss_mb()
        assert rec.messages == messages, (rec.messages, messages)
        (first,) = sm.receive(QUEUES[0], 1)
        assert first.message.body == BODY
    return cpu, wall, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["build", "load", "drop"])
    parser.add_argument("--backend", choices=["file", "postgresql"], default="file")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/bench-recovery"))
    parser.add_argument("--prefix", default="benchrec_")
    parser.add_argument("--messages", type=int, default=200_000)
    args = parser.parse_args()
    if args.backend == "postgresql":
        from store.db.migrate import drop_schema, upgrade

        config = _pg_config(args.prefix)
        if args.command == "drop":
            drop_schema(config)
            return
        if args.command == "build":
            upgrade(config)
    elif args.command == "drop":
        shutil.rmtree(args.dir, ignore_errors=True)
        return
    if args.command == "build":
        config = config if args.backend == "postgresql" else _file_config(args.dir)
        build(config, args.messages)
        return
    work = Path(f"{args.dir}.load")
    if args.backend == "file":
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(args.dir, work)
        config = _file_config(work)
    try:
        cpu, wall, peak = load(config, args.messages)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = args.messages
    print(
        f"{args.backend}: load() of {n:,} messages: cpu {cpu:.2f} s ({n / cpu:,.0f} msg/s),"
        f" wall {wall:.2f} s ({n / wall:,.0f} msg/s), peak RSS {peak:,.0f} MB"
    )


if __name__ == "__main__":
    main()
