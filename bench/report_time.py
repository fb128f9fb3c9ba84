"""``store report`` on a small store against a bare PySpark job, in the same run (issue 44).

The reference is the least a report can cost: a process that starts a local SparkSession and
runs one ``spark.range(1000).count()`` (the JVM start, Spark's start-up and one job). The
figure is ``store report --config F --out DIR -q`` on a file store of ``--messages`` messages
(default 500, two queues, 200-byte bodies), as an operator runs it: a fresh process each time,
after a first report that writes Spark's class archive if the machine has none yet (printed
on its own).
Each is run ``--repeat`` times (default 3), alternating, and the medians and their ratio are
printed (target: the report at most 1.5x the bare job); with ``--steps``, one more report run
in this process prints the time of each of its steps (the session, then each dataset).

    python -m bench.report_time --messages 500 --repeat 3

Benchmarks print figures; they never assert. Everything is written under a scratch folder
that is removed at the end.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import console

_BARE = (
    "from pyspark.sql import SparkSession\n"
    "s = SparkSession.builder.master('local[*]').getOrCreate()\n"
    "s.range(1000).count()\n"
    "s.stop()\n"
)


def _fill(folder: Path, messages: int) -> Path:
    """A file store of ``messages`` messages on two queues under ``folder``; returns the path
    of its TOML configuration."""
    from store import StoreConfig, open_store
    from store.messaging import Message, StorageManager

    dirs = {k: str(folder / "data" / k) for k in ("journal", "bindings", "large", "paging")}
    toml = folder / "store.toml"
    toml.write_text(
        f'journal-directory = "{dirs["journal"]}"\n'
        f'bindings-directory = "{dirs["bindings"]}"\n'
        f'large-messages-directory = "{dirs["large"]}"\n'
        f'paging-directory = "{dirs["paging"]}"\n'
    )
    config = StoreConfig.from_mapping(
        {
            "journal-directory": dirs["journal"],
            "bindings-directory": dirs["bindings"],
            "large-messages-directory": dirs["large"],
            "paging-directory": dirs["paging"],
        }
    )
    with StorageManager(open_store(config)) as sm:
        sm.load()
        for name in ("orders", "news"):
            sm.create_address(name, routing_types=("ANYCAST",))
            sm.create_queue(name, address=name, routing_type="ANYCAST")
        for i in range(messages):
            address = "orders" if i % 2 else "news"
            sm.send(Message(address=address, body=b"x" * 200, durable=True), sync=False)
        sm.flush()
    return toml


def _timed(command: list[str]) -> float:
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds


def _steps(toml: Path, out: Path) -> None:
    """One report in this process, printing when each step starts."""
    from store.config import load_config
    from store.reporting.report import ReportSource, run_report
    from store.reporting.session import build_session

    started = time.monotonic()
    spark = build_session()
    print(f"  {time.monotonic() - started:6.2f} s  session")
    last = time.monotonic()

    def progress(step: str, done: int, total: int) -> None:
        nonlocal last
        now = time.monotonic()
        print(f"  {now - started:6.2f} s  {step} (+{now - last:.2f} s)")
        last = now

    run_report(spark, ReportSource(config=load_config(toml)), str(out), progress=progress)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--steps", action="store_true", help="also time each step once")
    args = parser.parse_args()
    out = console()
    folder = Path(tempfile.mkdtemp(prefix="bench-report-"))
    try:
        toml = _fill(folder, args.messages)
        store = str(Path(sys.executable).with_name("store"))
        # The first report on this machine writes Spark's class archive
        # (store.reporting.class_archive) as its JVM ends; the runs after start from it.
        first = _timed(
            [store, "report", "--config", str(toml), "--out", str(folder / "report-first"), "-q"]
        )
        out.print(f"first report (writes the class archive if there is none yet): {first:.1f} s")
        bare_runs, report_runs = [], []
        for i in range(args.repeat):
            bare_runs.append(_timed([sys.executable, "-c", _BARE]))
            report_out = folder / f"report-{i}"
            report_runs.append(
                _timed([store, "report", "--config", str(toml), "--out", str(report_out), "-q"])
            )
            out.print(
                f"run {i + 1}: bare PySpark job {bare_runs[-1]:.1f} s, "
                f"store report {report_runs[-1]:.1f} s ({report_runs[-1] / bare_runs[-1]:.2f}x)"
            )
        bare, report = statistics.median(bare_runs), statistics.median(report_runs)
        out.print(
            f"[bold]{args.messages:,} messages: store report {report:.1f} s, bare PySpark job "
            f"{bare:.1f} s: {report / bare:.2f}x[/bold] (target: at most 1.5x; medians of "
            f"{args.repeat})"
        )
        if args.steps:
            _steps(toml, folder / "report-steps")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
