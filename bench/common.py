"""Shared helpers of the benchmarks: timing, medians, the machine line, tables and JSON.

Benchmarks print figures; they never assert. Every figure is a rate (operations per second)
measured ``repeat`` times; the median is reported and the individual runs are kept for the JSON
output. Run a benchmark module from the repository root, e.g. ``python -m bench.ref_disk``.

Thread-safety: the helpers are called from one thread; :func:`run_threads` starts its own
workers and hands each a private counter, so nothing here is shared between threads.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = [
    "Result",
    "console",
    "add_common_arguments",
    "command_line",
    "configure",
    "machine_info",
    "markdown_table",
    "median_rate",
    "print_machine",
    "print_results",
    "rate_for",
    "reference_main",
    "results_markdown",
    "run_threads",
    "scratch_dir",
    "watchdog",
    "write_json",
    "write_markdown",
]

DEFAULT_DIR = Path("bench/out")
# A run that takes longer than this is taken to be hung: every thread's stack is dumped to stderr
# and the process exits, so a deadlock in the code under test shows where it is instead of
# stalling the benchmark. Set from --watchdog by configure().
_watchdog_seconds = 300.0
# How often the timed loops read the clock: often enough that a run overshoots its deadline by
# well under 1%, rarely enough that reading the clock does not show in the figure.
CLOCK_EVERY = 256


@dataclass(frozen=True, slots=True)
class Result:
    """One figure: the median of ``runs`` (each a rate in ``unit``) and what it measured."""

    name: str
    value: float
    unit: str
    runs: tuple[float, ...]
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def console() -> Console:
    """Return a console that keeps tables on one line per row when output is not a terminal."""
    return Console(width=shutil.get_terminal_size((200, 24)).columns)


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --dir, --seconds, --repeat and --json to ``parser``; returns nothing."""
    parser.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_DIR,
        help="where the data files go: the disk under test (default: %(default)s)",
    )
    parser.add_argument(
        "--seconds", type=float, default=3.0, help="length of one timed run (default: %(default)s)"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per figure; the median is shown (default: 3)"
    )
    parser.add_argument(
        "--watchdog",
        type=float,
        default=300.0,
        help="dump all stacks and exit if one run takes longer (seconds; 0: never)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument(
        "--markdown", type=Path, help="also write the tables as Markdown (for RESULTS.md)"
    )


def configure(args: argparse.Namespace) -> None:
    """Apply the parsed common arguments that are process-wide (the watchdog); returns nothing."""
    global _watchdog_seconds
    _watchdog_seconds = args.watchdog


@contextlib.contextmanager
def watchdog() -> Iterator[None]:
    """Dump every thread's stack and exit the process if the body outlasts ``--watchdog``."""
    if _watchdog_seconds <= 0:
        yield
        return
    faulthandler.dump_traceback_later(_watchdog_seconds, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def rate_for(seconds: float, step: Callable[[], None], *, max_ops: int | None = None) -> float:
    """Call ``step`` (one operation) for ``seconds`` or ``max_ops`` calls, whichever comes first.

    Returns operations per second over the time actually spent.
    """
    ops = 0
    limit = max_ops if max_ops is not None else sys.maxsize
    start = time.perf_counter()
    deadline = start + seconds
    while ops < limit:
        for _ in range(min(CLOCK_EVERY, limit - ops)):
            step()
        ops += min(CLOCK_EVERY, limit - ops)
        if time.perf_counter() >= deadline:
            break
    return ops / (time.perf_counter() - start)


def run_threads(threads: int, seconds: float, worker: Callable[[threading.Event], int]) -> float:
    """Run ``worker(stop)`` in ``threads`` threads until ``stop`` is set after ``seconds``.

    Each worker loops until ``stop`` is set and returns how many operations it completed. The
    clock runs from the moment all threads are released until the last one has returned, so an
    operation still in flight when the time is up is counted with the time it took. Returns the
    total operations per second. Re-raises the first exception a worker raised.
    """
    stop = threading.Event()
    barrier = threading.Barrier(threads + 1)
    counts = [0] * threads
    errors: list[BaseException] = []

    def body(index: int) -> None:
        barrier.wait()
        try:
            counts[index] = worker(stop)
        except BaseException as exc:  # handed to the caller below
            errors.append(exc)
            stop.set()

    pool = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(threads)]
    for t in pool:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    stop.wait(seconds)
    stop.set()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return sum(counts) / elapsed


def median_rate(
    name: str,
    measure: Callable[[], float],
    *,
    repeat: int,
    unit: str = "ops/s",
    note: str = "",
) -> Result:
    """Call ``measure`` (one run, returning a rate) ``repeat`` times.

    Returns a :class:`Result` holding the median and every run.
    """
    runs: list[float] = []
    for _ in range(max(1, repeat)):
        with watchdog():
            runs.append(measure())
    return Result(name=name, value=statistics.median(runs), unit=unit, runs=tuple(runs), note=note)


@contextlib.contextmanager
def scratch_dir(base: Path, prefix: str) -> Iterator[Path]:
    """Yield a fresh directory under ``base`` (created if needed), removed afterwards."""
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=prefix + "-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def machine_info(data_dir: Path) -> dict[str, str]:
    """Describe the machine and the disk under ``data_dir``.

    Returns a dict with date, cpus, kernel, python and the ``df`` line of the data directory.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        df = subprocess.run(
            ["df", "-h", "--output=source,fstype,size,avail", str(data_dir)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()[-1]
    except (OSError, subprocess.CalledProcessError):
        df = "unknown"
    return {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "cpus": str(os.cpu_count()),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "disk": " ".join(df.split()),
        "dir": str(data_dir.resolve()),
        # Others' work on a shared machine moves every figure: say how busy it was.
        "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def print_machine(info: dict[str, str], out: Console | None = None) -> None:
    """Print the machine line; returns nothing."""
    (out or console()).print(
        f"[bold]machine[/]: {info['cpus']} cpus, kernel {info['kernel']}, python "
        f"{info['python']}; disk of {info['dir']}: {info['disk']}; load average "
        f"{info['loadavg']}; {info['date']}"
    )


def _format_rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def print_results(title: str, results: Sequence[Result], out: Console | None = None) -> None:
    """Print ``results`` as a table (figure, median, unit, runs, note); returns nothing."""
    table = Table(title=title, title_justify="left")
    table.add_column("figure")
    table.add_column("median", justify="right")
    table.add_column("unit")
    table.add_column("runs", justify="right")
    table.add_column("note")
    for r in results:
        runs = " ".join(_format_rate(v) for v in r.runs)
        table.add_row(r.name, _format_rate(r.value), r.unit, runs, r.note)
    (out or console()).print(table)


def markdown_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()
) -> str:
    """Return ``rows`` under ``header`` as a Markdown table; columns ``right`` align right."""
    align = ["---:" if i in right else "---" for i in range(len(header))]
    lines = [header, align, *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines) + "\n"


def results_markdown(results: Sequence[Result]) -> str:
    """Return ``results`` as the Markdown table RESULTS.md uses (figure, median, unit, runs)."""
    rows = [
        (r.name, _format_rate(r.value), r.unit, " / ".join(_format_rate(v) for v in r.runs))
        for r in results
    ]
    return markdown_table(("figure", "median", "unit", "runs"), rows, right=(1, 3))


def command_line() -> str:
    """Return the command that is running, as a user would type it from the repository root."""
    return " ".join(["python -m bench." + Path(sys.argv[0]).stem, *sys.argv[1:]])


def write_markdown(path: Path, info: dict[str, str], tables: Sequence[tuple[str, str]]) -> None:
    """Write the command, the machine and each (title, Markdown table) to ``path``.

    Returns nothing; raises OSError.
    """
    parts = [
        f"Command: `{command_line()}`\n",
        f"Machine: {info['cpus']} CPUs, kernel {info['kernel']}, Python {info['python']}; "
        f"disk of `{info['dir']}`: {info['disk']} (df: source, type, size, free); load "
        f"average at start {info['loadavg']}; {info['date']}.\n",
    ]
    parts += [f"{title}\n\n{table}" for title, table in tables]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts), encoding="utf-8")


def reference_main(
    doc: str,
    title: str,
    key: str,
    measure: Callable[[Path, float, int, int], dict[str, Result]],
    *,
    size: int,
    size_help: str,
) -> None:
    """The command line of a reference module: parse, measure, print, write JSON / Markdown.

    ``measure(dir, seconds, repeat, size)`` returns the module's figures. Returns nothing.
    """
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument("--size", type=int, default=size, help=size_help)
    args = parser.parse_args()
    configure(args)
    info = machine_info(args.dir)
    print_machine(info)
    results = list(measure(args.dir, args.seconds, args.repeat, args.size).values())
    print_results(title, results)
    if args.json:
        write_json(args.json, info, {key: results})
    if args.markdown:
        write_markdown(args.markdown, info, [(title, results_markdown(results))])


def write_json(path: Path, info: dict[str, str], sections: dict[str, Any]) -> None:
    """Write the machine ``info``, the command line and ``sections`` to ``path`` as JSON.

    ``sections`` values may be lists of :class:`Result`. Returns nothing; raises OSError.
    """

    def encode(value: Any) -> Any:
        if isinstance(value, Result):
            return asdict(value)
        if isinstance(value, (list, tuple)):
            return [encode(v) for v in value]
        if isinstance(value, dict):
            return {k: encode(v) for k, v in value.items()}
        return value

    payload = {"machine": info, "command": command_line(), "sections": encode(sections)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
