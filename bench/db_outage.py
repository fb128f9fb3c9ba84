"""Time from a PostgreSQL or MariaDB restart to the database store's first successful send
(issue 41, docs/db.md "Outages"), on a private server (:mod:`tests.support.pg_cluster`,
:mod:`tests.support.mariadb_server` with ``--mariadb``; the shared servers are never
restarted).

One storage manager on the private cluster, two producer threads sending durable messages
(``sync=True``) as fast as they can, a consumer acknowledging them. Each round restarts the
cluster (``pg_ctl restart -m fast``, or ``-m immediate`` with ``--crash``; MariaDB: SIGTERM, or
SIGKILL with ``--crash``); the clock starts when the server accepts connections again and stops
at the first send that returns after it. Then for ``--after`` seconds (default 10) it counts
sends per second and any send that fails (a second outage of the store's own would show there).
Reported: min / p50 / p99 / max of the time to the first send over ``--rounds`` restarts
(default 10), the sends per second before and after, and the sends refused (during the outages,
by design: StoreUnavailableError, nothing written) and in doubt (expected 0).

Reference, side by side: the same rounds' time for a plain driver connection loop (psycopg or
PyMySQL: connect and ``INSERT`` + commit, retried every 10 ms): how soon anything can write.

Run: ``python -m bench.db_outage [--rounds N] [--after S] [--crash] [--mariadb]``.

Thread-safety: the main thread restarts the cluster; producers and consumer record under a
lock.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from dataclasses import dataclass, field

import psycopg
import pymysql
from rich.console import Console
from rich.table import Table

from store import StoreConfig, open_store
from store.errors import StoreUnavailableError
from store.messaging import Message, StorageManager
from tests.support.backends import unique_prefix
from tests.support.db_backends import store_mapping
from tests.support.mariadb_server import MariaDbServer, private_mariadb
from tests.support.pg_cluster import PgCluster, private_cluster


@dataclass
class Counts:
    ok: list[float] = field(default_factory=list)  # when each send returned
    refused: int = 0
    in_doubt: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _produce(sm: StorageManager, counts: Counts, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            sm.send(Message("bench", b"x" * 100))
        except StoreUnavailableError as exc:
            with counts.lock:
                if exc.in_doubt:
                    counts.in_doubt += 1
                else:
                    counts.refused += 1
            time.sleep(0.002)
            continue
        with counts.lock:
            counts.ok.append(time.monotonic())


def _consume(sm: StorageManager, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            got = sm.receive("bench", 50)
            for d in got:
                sm.ack("bench", d.message.message_id or 0, sync=False)
        except StoreUnavailableError:
            got = []
        if not got:
            time.sleep(0.005)


def _psycopg_first(cluster: PgCluster, since: float) -> float:
    """Seconds from ``since`` to the first committed INSERT of a fresh psycopg connection."""
    while True:
        try:
            with psycopg.connect(
                f"host=127.0.0.1 port={cluster.port} dbname=postgres user=postgres",
                connect_timeout=2,
            ) as conn:
                conn.execute("CREATE TABLE IF NOT EXISTS bench_outage_ref (v int)")
                conn.execute("INSERT INTO bench_outage_ref VALUES (1)")
                conn.commit()
                return time.monotonic() - since
        except psycopg.OperationalError:
            time.sleep(0.01)


def _pymysql_first(server: MariaDbServer, since: float) -> float:
    """Seconds from ``since`` to the first committed INSERT of a fresh PyMySQL connection."""
    while True:
        try:
            conn = pymysql.connect(
                host="127.0.0.1", port=server.port, user="root", database="test", connect_timeout=2
            )
        except pymysql.err.OperationalError:
            time.sleep(0.01)
            continue
        try:
            with conn.cursor() as cursor:
                cursor.execute("CREATE TABLE IF NOT EXISTS bench_outage_ref (v int)")
                cursor.execute("INSERT INTO bench_outage_ref VALUES (1)")
            conn.commit()
            return time.monotonic() - since
        finally:
            conn.close()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[int(q) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--after", type=float, default=10.0)
    parser.add_argument("--crash", action="store_true", help="pg_ctl stop -m immediate / SIGKILL")
    parser.add_argument("--mariadb", action="store_true", help="a private MariaDB server")
    args = parser.parse_args()
    console = Console(stderr=True)
    firsts: list[float] = []
    refs: list[float] = []
    rates_after: list[float] = []
    failed_after = 0
    with private_mariadb() if args.mariadb else private_cluster() as cluster:
        user = "root" if args.mariadb else "postgres"
        config = StoreConfig.from_mapping(store_mapping(cluster.url, unique_prefix(), user=user))
        store = open_store(config)
        sm = StorageManager(store)
        sm.load()
        sm.create_address("bench")
        sm.create_queue("bench", address="bench")
        counts = Counts()
        stop = threading.Event()
        threads = [threading.Thread(target=_produce, args=(sm, counts, stop)) for _ in range(2)]
        threads.append(threading.Thread(target=_consume, args=(sm, stop)))
        for t in threads:
            t.start()
        time.sleep(2.0)
        with counts.lock:
            rate_before = len(counts.ok) / 2.0
        for n in range(args.rounds):
            if isinstance(cluster, MariaDbServer):
                cluster.restart(kill=args.crash)
                back = time.monotonic()
                refs.append(_pymysql_first(cluster, back))
            else:
                cluster.stop("immediate" if args.crash else "fast")
                cluster.start()
                back = time.monotonic()
                refs.append(_psycopg_first(cluster, back))
            deadline = back + 30
            first = None
            while first is None and time.monotonic() < deadline:
                with counts.lock:
                    first = next((t for t in reversed(counts.ok) if t > back), None)
                    if first is not None:
                        first = min(t for t in counts.ok if t > back)
                time.sleep(0.005)
            if first is None:
                console.print(f"round {n + 1}: no send within 30 s of the restart")
                continue
            firsts.append(first - back)
            with counts.lock:
                refused_before = counts.refused + counts.in_doubt
            time.sleep(args.after)
            with counts.lock:
                window = [t for t in counts.ok if first < t <= first + args.after]
                failed_after += counts.refused + counts.in_doubt - refused_before
            rates_after.append(len(window) / args.after)
            console.print(f"round {n + 1}: first send {1000 * (first - back):.0f} ms after")
        stop.set()
        for t in threads:
            t.join(30)
        sm.close()
        store.close()
        health = store.messages._started().health  # type: ignore[attr-defined]
    name = "MariaDB" if args.mariadb else "PostgreSQL"
    table = Table(title=f"{name} {'crash' if args.crash else 'restart'} x {args.rounds}")
    for column in ("", "min", "p50", "p99", "max"):
        table.add_column(column, justify="right")
    driver = "pymysql" if args.mariadb else "psycopg"
    for label, values in (("store: first send (ms)", firsts), (f"{driver}: first commit", refs)):
        if values:
            table.add_row(
                label,
                *(
                    f"{1000 * v:.0f}"
                    for v in (min(values), _pct(values, 50), _pct(values, 99), max(values))
                ),
            )
    Console().print(table)
    Console().print(
        f"sends/s before {rate_before:.0f}, in the {args.after:g} s after: median "
        f"{statistics.median(rates_after) if rates_after else 0:.0f}; sends refused in those "
        f"windows (a second outage): {failed_after}; refused during the outages "
        f"{counts.refused}, in doubt {counts.in_doubt}; outages seen by the journal "
        f"{health.outages}"
    )


if __name__ == "__main__":
    main()
