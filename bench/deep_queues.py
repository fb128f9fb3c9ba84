"""Deep queues (issue 27): what a restart costs with N messages waiting in one queue.

A store is built once with ``N`` 100-byte messages waiting in one queue (``sync=False``
sends, then ``flush``), then each figure is taken in a **fresh process** (``measure``), so
nothing the build left behind counts:

- ``first message``: seconds from ``open_store`` through ``load()`` to the first message
  received (the restart a broker's consumers wait for), and ``load()`` alone;
- the same after a clean stop (the default: the load reads the page summary of the last
  clean close, :mod:`store.messaging.page_summary`) and **after a crash** (the summaries
  deleted first, as a crash leaves them: every page is read);
- ``peak RSS``: ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of that process at the end
  (imports included: a bare interpreter with the package imported is about 30 MB here,
  ``baseline RSS``);
- ``bytes per waiting message``: after ``load()``, (RSS now - RSS before ``open_store``) / N,
  and, in a second fresh process run with ``tracemalloc`` (slower, so not timed),
  (traced bytes after ``load()`` - before) / N.

The store is built with the configuration's defaults (``global-max-size`` 64M: past about
65,000 such messages in memory the address pages, and paged messages are not loaded at
start-up) unless ``--global-max-size`` / ``--global-max-messages`` say otherwise (a size
larger than the store, such as ``100G``: every message in the journal and in memory after a
load, which measures the cost per message itself).

``process launch -> first message`` is the same restart timed from the parent's launching
the measuring process (interpreter start and imports included), the figure compared with
ActiveMQ's.

ActiveMQ (issue 27's "beside ours where the machine has it", issue 29's start-up with
1,000,000 messages): when Debian's ``activemq`` package and java are here
(``bench.activemq.missing``), ``bench.activemq_deep`` fills a fresh broker of its own (KahaDB
for ``--backend file``, its JDBC adapter on the same PostgreSQL for ``--backend postgresql``)
with the same N persistent 100-byte messages in one queue over STOMP (4 producers,
transactions of 1,000 SENDs each committed with a receipt), stops it with SIGTERM, starts it
again on the same data, and takes the seconds from launching the java process to the first
MESSAGE frame a STOMP consumer subscribed to that queue receives, and that process's peak RSS
(``VmHWM`` in ``/proc/<pid>/status``, read before it is stopped). Both are printed beside
ours with the ratio ours/ActiveMQ (below 1: ours is quicker or smaller). ActiveMQ's broker is
a JVM with a fixed 1 GiB heap (``bench.activemq.HEAP``), so its RSS is what the JVM touched,
not what the queue needs. Without ActiveMQ (or with ``--no-activemq``) the figures issue 27
recorded for ActiveMQ 5.17 at 1,000,000 waiting are quoted instead, with the reason. Nothing
is installed by this script.

Run::

    PYTHONPATH=. python -m bench.deep_queues --backend file --messages 200000
    PYTHONPATH=. python -m bench.deep_queues --backend file --messages 1000000
    PYTHONPATH=. python -m bench.deep_queues --backend postgresql --messages 200000
    PYTHONPATH=. python -m bench.deep_queues --backend file --messages 200000 --global-max-size 100G

(``build`` and ``measure`` are the two halves, run by the default ``all`` command.)

Thread-safety: one command per process.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from bench.activemq import missing, version
from bench.activemq_deep import DESTINATION, restart_figures
from bench.broker_deep import first_message
from bench.deep_drain import Expected, body, drain, in_memory, steady
from store import StoreConfig, open_store
from store.messaging import Delivery, Message, StorageManager

#: The queue, named as the STOMP destination our broker and ActiveMQ serve it under.
QUEUE = DESTINATION
#: ActiveMQ's messages (ours are numbered: ``bench.deep_drain.body``, also 100 bytes).
BODY = b"x" * 100
#: Seconds of each steady send+receive+ack phase of ``--drain``.
STEADY_SECONDS = 3.0
#: ActiveMQ 5.17 (KahaDB / JDBC on PostgreSQL) with 1,000,000 waiting, from issue 27.
ACTIVEMQ_ISSUE_27 = {"file": (2.13, 140), "postgresql": (4.18, 148)}
#: The ActiveMQ store each of our back-ends is compared with.
AMQ_STORE = {"file": "kahadb", "postgresql": "jdbc"}


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _config(args: argparse.Namespace) -> StoreConfig:
    return StoreConfig.from_mapping(_mapping(args))


def _mapping(args: argparse.Namespace) -> dict[str, Any]:
    limits: dict[str, Any] = {}
    if args.global_max_size is not None:
        limits["global-max-size"] = args.global_max_size
    if args.global_max_messages is not None:
        limits["global-max-messages"] = args.global_max_messages
    if args.backend == "postgresql":
        from tests.support.db_backends import postgresql_url, store_mapping

        url, user, password = postgresql_url()
        mapping = store_mapping(url, args.prefix, user=user, password=password)
    else:
        root = args.dir
        mapping = {
            "journal-directory": str(root / "journal"),
            "bindings-directory": str(root / "bindings"),
            "large-messages-directory": str(root / "large"),
            "paging-directory": str(root / "paging"),
        }
    return {**mapping, **limits}


def build(config: StoreConfig, messages: int) -> dict[str, Any]:
    """Fill a fresh store with ``messages`` messages in :data:`QUEUE`. Returns what the build
    took and how many messages it paged. Raises what the store raises."""
    started = time.perf_counter()
    with StorageManager(open_store(config)) as sm:
        sm.load()
        sm.create_address(QUEUE)
        sm.create_queue(QUEUE, address=QUEUE)
        for index in range(messages):
            sm.send(Message(QUEUE, body(index)), sync=False)
        sm.flush()
        paged = sm._pager.remaining(QUEUE, sm._state.queues[QUEUE].info.id)
    return {"build_seconds": time.perf_counter() - started, "paged": paged}


def measure(
    config: StoreConfig,
    messages: int,
    *,
    traced: bool,
    launched: float | None = None,
    drain: bool = False,
    after_crash: bool = False,
) -> dict[str, Any]:
    """Open, load and receive the first message, in this (fresh) process. Returns the
    figures (see the module docstring), with ``launch_to_first_seconds`` when ``launched``
    (the ``time.time()`` at which the parent started this process) is given, and with
    ``drain`` the figures of :func:`_drain_figures`. Raises AssertionError when the store
    does not hold ``messages`` messages, or the drain finds one out of order or missing.
    ``after_crash``: the page summaries are deleted first (not timed), as a crash leaves the
    store: the load reads every page."""
    if after_crash:
        _forget_page_summaries(config)
    if traced:
        tracemalloc.start()
    before_rss = _rss_mb()
    before_traced = tracemalloc.get_traced_memory()[0] if traced else 0
    started = time.perf_counter()
    sm = StorageManager(open_store(config))
    try:
        rec = sm.load()
        loaded = time.perf_counter()
        after_rss = _rss_mb()
        after_traced = tracemalloc.get_traced_memory()[0] if traced else 0
        (first,) = sm.receive(QUEUE, 1)
        first_at = time.perf_counter()
        first_wall = time.time()
        assert first.message.body == body(0)
        assert rec.messages == messages, (rec.messages, messages)
        assert sm.depth(QUEUE) == messages
        drained = _drain_figures(sm, first, messages) if drain else {}
    finally:
        sm.close()
    return {
        **drained,
        "load_seconds": loaded - started,
        "first_message_seconds": first_at - started,
        "peak_rss_mb": _maxrss_mb(),
        "baseline_rss_mb": before_rss,
        "rss_bytes_per_message": (after_rss - before_rss) * 2**20 / messages,
        "traced_bytes_per_message": (after_traced - before_traced) / messages,
        "launch_to_first_seconds": None if launched is None else first_wall - launched,
    }


def _forget_page_summaries(config: StoreConfig) -> None:
    store = open_store(config)
    try:
        for address in store.paging.addresses():
            store.paging.store(address).write_summary(None)
    finally:
        store.close()


def _drain_figures(sm: StorageManager, first: Delivery, messages: int) -> dict[str, Any]:
    """After the first message: ack it, then send+receive+ack at this depth
    (``bench.deep_drain.steady``) while receives take what the load kept in memory; then,
    once those are taken, the same cycles while every receive reads a page (the steady
    state of a queue that stays deep); drain everything in order, and the same cycles at
    depth 0. Returns ``steady_deep``, ``steady_paged`` (None when nothing was paged),
    ``drained``, ``drain_rate``, ``steady_empty``."""
    expected = Expected(1, messages)
    bodies = iter(expected)
    assert first.message.message_id is not None
    sm.ack(QUEUE, first.message.message_id, sync=False)
    deep, sent = steady(sm, QUEUE, STEADY_SECONDS, bodies, 0)
    qid = sm._state.queues[QUEUE].info.id
    paged: float | None = None
    if sm._pager.remaining(QUEUE, qid):
        drain(sm, QUEUE, bodies, in_memory(sm, QUEUE))
        paged, more = steady(sm, QUEUE, STEADY_SECONDS, bodies, sent)
        sent += more
    drained, rate = drain(sm, QUEUE, bodies)
    assert (expected.next_index, expected.tail) == (messages, sent), "drain incomplete"
    empty, _ = steady(sm, QUEUE, STEADY_SECONDS, iter(expected), sent)
    return {
        "steady_deep": deep, "steady_paged": paged, "drained": drained, "drain_rate": rate,
        "steady_empty": empty,
    }  # fmt: skip


def _run_child(
    args: argparse.Namespace, traced: bool, drain: bool = False, after_crash: bool = False
) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.deep_queues", "measure", *_common(args)]
    if after_crash:
        command.append("--after-crash")
    if traced:
        command.append("--traced")
    if drain:
        command.append("--drain")
    command += ["--launched", repr(time.time())]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def _common(args: argparse.Namespace) -> list[str]:
    out = ["--backend", args.backend, "--dir", str(args.dir), "--prefix", args.prefix]
    out += ["--messages", str(args.messages)]
    if args.global_max_size is not None:
        out += ["--global-max-size", str(args.global_max_size)]
    if args.global_max_messages is not None:
        out += ["--global-max-messages", str(args.global_max_messages)]
    return out


def _drop(args: argparse.Namespace, config: StoreConfig) -> None:
    if args.backend == "postgresql":
        from store.db.migrate import drop_schema

        drop_schema(config)
    else:
        shutil.rmtree(args.dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="?", default="all", choices=["all", "build", "measure"])
    parser.add_argument("--backend", choices=["file", "postgresql"], default="file")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/bench-deep"))
    parser.add_argument("--prefix", default="deepq_")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--global-max-size", help="e.g. 64M (default); 100G: no limit in effect")
    parser.add_argument("--global-max-messages", type=int)
    parser.add_argument("--traced", action="store_true", help="measure: with tracemalloc")
    parser.add_argument("--launched", type=float, help="measure: time.time() at launch")
    parser.add_argument(
        "--after-crash", action="store_true", help="measure: delete the page summaries first"
    )
    parser.add_argument("--no-activemq", action="store_true", help="all: skip ActiveMQ")
    parser.add_argument(
        "--drain",
        action="store_true",
        help="after the first message: steady send+receive+ack at this depth, drain all in"
        " order, the same at depth 0 (bench.deep_drain)",
    )
    parser.add_argument(
        "--no-broker", action="store_true", help="all: skip our STOMP broker's start-up"
    )
    parser.add_argument("--keep", action="store_true", help="all: keep the store afterwards")
    args = parser.parse_args()
    config = _config(args)
    if args.command == "measure":
        print(
            json.dumps(
                measure(
                    config,
                    args.messages,
                    traced=args.traced,
                    launched=args.launched,
                    drain=args.drain,
                    after_crash=args.after_crash,
                )
            )
        )
        return
    _drop(args, config)
    if args.backend == "postgresql":
        from store.db.migrate import upgrade

        upgrade(config)
    built = build(config, args.messages)
    if args.command == "build":
        print(json.dumps(built))
        return
    try:
        timed = _run_child(args, traced=False)
        crashed = _run_child(args, traced=False, after_crash=True)
        traced = _run_child(args, traced=True)
        broker = None if args.no_broker else first_message(_mapping(args), QUEUE)
        drained = _run_child(args, traced=False, drain=True) if args.drain else None
    finally:
        if not args.keep:
            _drop(args, config)
    _report(args, built, timed, traced, broker)
    print(
        f"  after a crash (no page summary: every page read): open -> first message"
        f" {crashed['first_message_seconds']:.2f} s, peak RSS {crashed['peak_rss_mb']:,.0f} MB"
    )
    if drained is not None:
        print(
            f"  drain after the restart: {drained['drained']:,} messages in order, each once,"
            f" {drained['drain_rate']:,.0f} msg/s (receive + ack, acks flushed at the end)"
        )
        deep, empty = drained["steady_deep"], drained["steady_empty"]
        print(
            f"  send + receive + ack cycles: {deep:,.0f}/s with {args.messages:,} waiting,"
            f" {empty:,.0f}/s at depth 0: {deep / empty:.2f}x"
        )
        if (paged := drained["steady_paged"]) is not None:
            print(
                f"  the same once every receive reads a page (what the load kept in memory"
                f" taken): {paged:,.0f}/s: {paged / empty:.2f}x of depth 0"
            )


def _report(
    args: argparse.Namespace,
    built: dict[str, Any],
    timed: dict[str, Any],
    traced: dict[str, Any],
    broker: dict[str, float] | None,
) -> None:
    n = args.messages
    print(f"{args.backend}, {n:,} x {len(BODY)}-byte messages waiting in one queue")
    print(f"  build: {built['build_seconds']:.1f} s, {built['paged']:,} of them paged")
    print(
        f"  open -> load() -> first message: {timed['first_message_seconds']:.2f} s"
        f" (load() {timed['load_seconds']:.2f} s)"
    )
    print(
        f"  peak RSS: {timed['peak_rss_mb']:,.0f} MB (baseline {timed['baseline_rss_mb']:.0f} MB)"
    )
    print(
        f"  bytes per waiting message after load(): RSS {timed['rss_bytes_per_message']:,.0f},"
        f" tracemalloc {traced['traced_bytes_per_message']:,.0f}"
    )
    if broker is not None:
        print(
            f"  our STOMP broker (store broker): launch -> port answered"
            f" {broker['port_seconds']:.2f} s, -> first MESSAGE"
            f" {broker['first_message_seconds']:.2f} s, peak RSS {broker['peak_rss_mb']:,.0f} MB"
        )
    store = AMQ_STORE[args.backend]
    absent = "--no-activemq given" if args.no_activemq else missing(store)
    if absent is not None:
        seconds, rss = ACTIVEMQ_ISSUE_27[args.backend]
        print(
            f"  ActiveMQ ({store}): not measured: {absent} (issue 27 recorded ActiveMQ 5.17"
            f" at 1,000,000 waiting: {seconds} s, {rss} MB)"
        )
        return
    amq = restart_figures(store, n, BODY)
    print(
        f"  ActiveMQ {version()} ({store}): filled over STOMP in {amq['fill_seconds']:.1f} s"
        f" ({n / amq['fill_seconds']:,.0f} msg/s), stopped (SIGTERM), restarted:"
        f" STOMP port answered at {amq['port_seconds']:.2f} s"
    )
    rows = [
        ("process launch -> first message, s", timed["launch_to_first_seconds"],
         amq["first_message_seconds"], ".2f"),
        ("peak RSS, MB", timed["peak_rss_mb"], amq["peak_rss_mb"], ",.0f"),
    ]  # fmt: skip
    if broker is not None:
        rows += [
            ("broker launch -> first MESSAGE, s", broker["first_message_seconds"],
             amq["first_message_seconds"], ".2f"),
            ("broker peak RSS, MB", broker["peak_rss_mb"], amq["peak_rss_mb"], ",.0f"),
        ]  # fmt: skip
    print(f"  {'figure':<36} {'ours':>9} {'ActiveMQ':>9} {'ours/ActiveMQ':>14}")
    for name, ours, theirs, fmt in rows:
        print(f"  {name:<36} {ours:>9{fmt}} {theirs:>9{fmt}} {ours / theirs:>13.2f}x")


if __name__ == "__main__":
    main()
