"""Our file journal, through the public API, side by side with its references in the same run.

Every figure drives ``store.open_store(config).messages`` the way a user would, on the disk of
``--dir``; the references (:mod:`bench.ref_python`'s pure-Python ceilings, :mod:`bench.ref_disk`,
:mod:`bench.ref_sqlite`, :mod:`bench.ref_persistqueue`) are measured in the same process, on the
same directory, just before. Figures (records per second):

* ``non-durable append 100 B`` / ``1 KiB``: one thread, ``append_add(..., sync=False)``; the
  clock stops after the closing ``flush()``, so records still buffered are paid for.
* ``durable append, 1 thread``: ``append_add(..., sync=True)`` in a loop.
* ``durable append, 64 threads``: 64 threads doing the same (the journal's group commit).
* ``non-blocking durable``: one producer, ``append_add(sync=False)`` then ``sync_future()``,
  keeping up to 1,000 futures unfinished; counts records whose future completed.
* ``load 1,000,000 records``: a journal of that many adds is written, closed, and opened again;
  the clock covers ``open_store`` plus ``load()``.

The comparison table gives each figure, its reference, the ratio and the target from the issue,
with "meets" or "misses". The benchmark reports; it never fails on a missed target.

Run: ``python -m bench.file_bench [--journal-type NIO|MAPPED|ASYNCIO ...] [--dir DIR]
[--seconds S] [--repeat K] [--durable-size B] [--load-records N] [--option KEY=VALUE ...]
[--json FILE]``.

Thread-safety: the store's journals are shared by the worker threads, as the contract allows;
everything else runs on the main thread.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import functools
import itertools
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import JustifyMethod
from rich.table import Table

from bench import ref_disk, ref_persistqueue, ref_python, ref_sqlite
from bench.common import (
    Result,
    add_common_arguments,
    configure,
    console,
    machine_info,
    markdown_table,
    median_rate,
    print_machine,
    print_results,
    results_markdown,
    run_threads,
    scratch_dir,
    watchdog,
    write_json,
    write_markdown,
)
from store import StoreConfig, open_store
from store.journal.api import Journal

__all__ = [
    "Target",
    "compare",
    "comparison_markdown",
    "measure_ours",
    "measure_references",
    "store_config",
]

THREADS = 64
IN_FLIGHT = 1000
LOAD_RECORDS = 1_000_000
LOAD_SIZE = 100
USER_RECORD_TYPE = 45  # Artemis's ADD_MESSAGE_PROTOCOL; any 0..255 would do


def store_config(directory: Path, journal_type: str, options: dict[str, str]) -> StoreConfig:
    """The file store under ``directory`` with ``journal_type`` and any extra Artemis keys.

    Returns the configuration; raises ConfigError on a bad key or value.
    """
    mapping: dict[str, Any] = {
        "journal-directory": str(directory / "journal"),
        "bindings-directory": str(directory / "bindings"),
        "large-messages-directory": str(directory / "large"),
        "paging-directory": str(directory / "paging"),
        "journal-type": journal_type,
    }
    mapping.update(options)
    return StoreConfig.from_mapping(mapping)


@contextlib.contextmanager
def _messages(config: StoreConfig) -> Iterator[Journal]:
    """Open the store, load its messages journal, yield it; closing makes it durable."""
    with open_store(config) as store:
        store.messages.load()
        yield store.messages


def non_durable(config: StoreConfig, size: int, seconds: float) -> float:
    """One thread of ``sync=False`` adds, timed up to and including the final ``flush()``.

    Bounded to the byte count of the raw-pwrite reference. Returns records per second.
    """
    record = b"n" * size
    limit = ref_disk.MAX_APPEND_BYTES // size
    with _messages(config) as journal:
        n = 0
        start = time.perf_counter()
        deadline = start + seconds
        while n < limit and time.perf_counter() < deadline:
            for i in range(n, min(n + 256, limit)):
                journal.append_add(i, USER_RECORD_TYPE, record)
            n = min(n + 256, limit)
        journal.flush()
        return n / (time.perf_counter() - start)


def durable_threads(config: StoreConfig, size: int, seconds: float, threads: int) -> float:
    """``threads`` threads of ``sync=True`` adds. Returns durable records per second."""
    records = ref_disk.durable_records(size)
    ids = itertools.count()  # next() on it is atomic under the GIL: ids stay unique
    with _messages(config) as journal:

        def worker(stop: threading.Event) -> int:
            n = 0
            while not stop.is_set():
                i = next(ids)
                journal.append_add(i, USER_RECORD_TYPE, records[i % len(records)], sync=True)
                n += 1
            return n

        return run_threads(threads, seconds, worker)


def non_blocking(config: StoreConfig, size: int, seconds: float, in_flight: int) -> float:
    """One producer: ``sync=False`` add, then ``sync_future()``, up to ``in_flight`` pending.

    Returns records per second whose future completed, waiting for the last ones at the end.
    """
    records = ref_disk.durable_records(size)
    pending: collections.deque[concurrent.futures.Future[None]] = collections.deque()
    with _messages(config) as journal:
        n = 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            for _ in range(64):
                if len(pending) >= in_flight:
                    pending.popleft().result()
                journal.append_add(n, USER_RECORD_TYPE, records[n % len(records)])
                pending.append(journal.sync_future())
                n += 1
        while pending:
            pending.popleft().result()
        return n / (time.perf_counter() - start)


def write_load_journal(config: StoreConfig, records: int, size: int) -> None:
    """Write ``records`` adds of ``size`` bytes and close cleanly; returns nothing."""
    record = b"l" * size
    with _messages(config) as journal:
        for i in range(records):
            journal.append_add(i, USER_RECORD_TYPE, record)


def timed_load(config: StoreConfig, expected: int) -> tuple[float, float]:
    """Open the store and load it.

    Returns records per second over ``load()`` alone and over ``open_store`` + ``load()``.
    Raises RuntimeError if the load does not return ``expected`` records.
    """
    start = time.perf_counter()
    with open_store(config) as store:
        opened = time.perf_counter()
        loaded = store.messages.load()
        end = time.perf_counter()
    if len(loaded.records) != expected:
        raise RuntimeError(f"load returned {len(loaded.records)} records, expected {expected}")
    return expected / (end - opened), expected / (end - start)


def measure_ours(args: argparse.Namespace, journal_type: str) -> dict[str, Result]:
    """Our figures for ``journal_type``, each the median of ``args.repeat`` runs.

    Each run gets a new store directory. Returns the results keyed like the comparison rows.
    """
    options = dict(option.split("=", 1) for option in args.option)
    size = args.durable_size

    def fresh(run: Callable[[StoreConfig], float]) -> Callable[[], float]:
        """One run of ``run`` on a store in a new directory, removed afterwards."""

        def one() -> float:
            with scratch_dir(args.dir, f"file-{journal_type.lower()}") as d:
                return run(store_config(d, journal_type, options))

        return one

    s, k = args.seconds, args.repeat
    out: dict[str, Result] = {}
    for nd_size in (100, 1024):
        out[f"non_durable_{nd_size}"] = median_rate(
            f"non-durable append {nd_size} B",
            fresh(functools.partial(non_durable, size=nd_size, seconds=s)),
            repeat=k,
            unit="records/s",
        )
    out["durable_1"] = median_rate(
        f"durable append {size} B, 1 thread",
        fresh(lambda c: durable_threads(c, size, s, 1)),
        repeat=k,
        unit="records/s",
    )
    out["durable_64"] = median_rate(
        f"durable append {size} B, {THREADS} threads",
        fresh(lambda c: durable_threads(c, size, s, THREADS)),
        repeat=k,
        unit="records/s",
    )
    out["non_blocking"] = median_rate(
        f"non-blocking durable {size} B, {IN_FLIGHT:,} futures in flight",
        fresh(lambda c: non_blocking(c, size, s, IN_FLIGHT)),
        repeat=k,
        unit="records/s",
    )
    with scratch_dir(args.dir, f"file-load-{journal_type.lower()}") as d:
        config = store_config(d, journal_type, options)
        with watchdog():
            write_load_journal(config, args.load_records, LOAD_SIZE)
        loads: list[tuple[float, float]] = []
        for _ in range(max(1, k)):
            with watchdog():
                loads.append(timed_load(config, args.load_records))
    name = f"load {args.load_records:,} records of {LOAD_SIZE} B"
    for key, label, index in (("load", "load()", 0), ("open_load", "open_store + load()", 1)):
        runs = tuple(run[index] for run in loads)
        out[key] = Result(f"{name}, {label}", statistics.median(runs), "records/s", runs)
    return out


def measure_references(args: argparse.Namespace) -> dict[str, Result]:
    """Every reference figure, keyed ``disk.*``, ``sqlite.*``, ``pq.*``."""
    refs: dict[str, Result] = {}
    size = args.durable_size
    modules = (
        ("python", ref_python),
        ("disk", ref_disk),
        ("sqlite", ref_sqlite),
        ("pq", ref_persistqueue),
    )
    for prefix, module in modules:
        for key, result in module.measure(args.dir, args.seconds, args.repeat, size).items():
            refs[f"{prefix}.{key}"] = result
    return refs


@dataclass(frozen=True, slots=True)
class Target:
    """One row of the comparison: our figure, its reference, and the issue's target."""

    ours: str
    reference: str | None
    text: str
    min_rate: float | None = None
    min_ratio: float | None = None

    def verdict(self, value: float, ratio: float | None) -> str:
        """Return "meets" or "misses" for ``value`` (and ``ratio`` to the reference)."""
        ok = self.min_rate is None or value >= self.min_rate
        if self.min_ratio is not None:
            ok = ok and ratio is not None and ratio >= self.min_ratio
        return "meets" if ok else "misses"


TARGETS = (
    Target("non_durable_100", "disk.pwrite_100", ">= 400,000/s", min_rate=400_000),
    Target("non_durable_1024", "disk.pwrite_1024", ">= 250,000/s", min_rate=250_000),
    Target("durable_1", "disk.sync_preallocated", ">= 80% of reference", min_ratio=0.8),
    Target(
        "durable_64",
        "disk.group_threads",
        ">= 100,000/s and >= 2x reference",
        min_rate=100_000,
        min_ratio=2.0,
    ),
    Target("durable_64", "sqlite.threads", ">= 10x reference", min_ratio=10.0),
    Target("durable_64", "pq.threads", ">= 10x reference", min_ratio=10.0),
    Target("non_blocking", "disk.group_in_flight", ">= 250,000/s", min_rate=250_000),
    Target("load", None, ">= 500,000/s", min_rate=500_000),
    # The speed issue's ratios to same-run ceilings (bench.ref_python, bench.ref_disk).
    Target("non_durable_100", "python.encode_100", ">= 0.6x encode ceiling", min_ratio=0.6),
    Target("non_durable_1024", "python.encode_1024", ">= 0.6x encode ceiling", min_ratio=0.6),
    Target("load", "python.decode", ">= 0.6x decode ceiling", min_ratio=0.6),
    Target("durable_1", "disk.sync_preallocated", ">= 0.9x reference", min_ratio=0.9),
    Target("durable_64", "disk.group_threads", ">= 1.5x reference", min_ratio=1.5),
    Target("non_blocking", "disk.group_in_flight", ">= 1.5x reference", min_ratio=1.5),
)


def compare(ours: dict[str, Result], refs: dict[str, Result]) -> list[dict[str, Any]]:
    """One row per :data:`TARGETS` entry: figure, value, reference, ratio, target, verdict."""
    rows: list[dict[str, Any]] = []
    for target in TARGETS:
        mine = ours[target.ours]
        ref = refs[target.reference] if target.reference else None
        ratio = mine.value / ref.value if ref and ref.value else None
        rows.append(
            {
                "figure": mine.name,
                "value": mine.value,
                "reference": ref.name if ref else "-",
                "reference_value": ref.value if ref else None,
                "ratio": ratio,
                "target": target.text,
                "verdict": target.verdict(mine.value, ratio),
            }
        )
    return rows


def _comparison_cells(row: dict[str, Any]) -> tuple[str, ...]:
    ref_value = row["reference_value"]
    ratio = row["ratio"]
    return (
        row["figure"],
        f"{row['value']:,.0f}",
        row["reference"],
        "-" if ref_value is None else f"{ref_value:,.0f}",
        "-" if ratio is None else f"{ratio:.2f}x",
        row["target"],
        row["verdict"],
    )


_COMPARISON_HEADER = ("figure", "ours /s", "reference", "ref /s", "ratio", "target", "")


def comparison_markdown(rows: list[dict[str, Any]]) -> str:
    """Return the comparison rows as a Markdown table."""
    cells = [_comparison_cells(row) for row in rows]
    return markdown_table(_COMPARISON_HEADER, cells, right=(1, 3, 4))


def print_comparison(title: str, rows: list[dict[str, Any]]) -> None:
    """Print the comparison rows as a table; returns nothing."""
    table = Table(title=title, title_justify="left")
    for name in _COMPARISON_HEADER:
        justify: JustifyMethod = "right" if name in ("ours /s", "ref /s", "ratio") else "left"
        table.add_column(name, justify=justify)
    for row in rows:
        table.add_row(*_comparison_cells(row))
    console().print(table)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument(
        "--journal-type",
        action="append",
        choices=("NIO", "MAPPED", "ASYNCIO"),
        help="journal type(s) to measure; repeat the option for several (default: NIO)",
    )
    parser.add_argument(
        "--durable-size",
        type=int,
        default=ref_disk.DURABLE_SIZE,
        help="record size of every durable figure, ours and the references' (default: 100)",
    )
    parser.add_argument(
        "--load-records", type=int, default=LOAD_RECORDS, help="records in the load figure"
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra store configuration key (Artemis name), e.g. journal-buffer-timeout=0",
    )
    args = parser.parse_args()
    configure(args)
    return args


def main() -> None:
    args = parse_args()
    info = machine_info(args.dir)
    print_machine(info)
    refs = measure_references(args)
    title = "References (same run, same disk)"
    print_results(title, list(refs.values()))
    tables = [(title, results_markdown(list(refs.values())))]
    sections: dict[str, Any] = {"references": refs}
    for journal_type in args.journal_type or ["NIO"]:
        ours = measure_ours(args, journal_type)
        title = f"Our file journal, journal-type {journal_type}"
        print_results(title, list(ours.values()))
        rows = compare(ours, refs)
        versus = f"journal-type {journal_type} against the issue's targets"
        print_comparison(versus, rows)
        tables.append((title, results_markdown(list(ours.values()))))
        tables.append((versus, comparison_markdown(rows)))
        sections[journal_type] = {"figures": ours, "comparison": rows}
    if args.json:
        write_json(args.json, info, sections)
    if args.markdown:
        write_markdown(args.markdown, info, tables)


if __name__ == "__main__":
    main()
