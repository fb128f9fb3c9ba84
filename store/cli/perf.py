"""``store perf`` (the main job) and ``store perf-journal`` (Artemis's sync-rate probe).

::

    store perf                                  # messaging, 10 s, file store under ./data
    store perf --seconds 3 --producers 8 --consumers 8 --size 4K --large-ratio 0.05
    store perf --journal --seconds 3 --threads 16 --sizes 100,1K,10K --tx-ratio 0.3
    store perf --journal --config etc/store.toml --records 100000 --json
    store perf-journal --journal-type NIO --writes 250 --tries 5

``store perf`` runs the messaging workload (:mod:`store.cli.perf_messaging`, over
:func:`store.perf.messaging_run.run_messaging_perf`); ``store perf --journal`` runs
:func:`store.perf.run_perf` and prints a results table (or JSON with ``--json``); while it
runs, a progress bar (or, when stderr is not a terminal, one line per phase) goes to stderr.
Exit code 0 when the reopened store held exactly what was acknowledged, 1 when anything was
missing, changed or came back; the usual codes of
:mod:`store.cli.main` for errors. ``--data-dir`` places the embedded default store; it cannot be
combined with ``--config``, whose own folders or tables are used.

``store perf-journal`` runs :func:`store.perf.run_perf_journal` and prints the durable writes
per millisecond and the ``journal-buffer-timeout`` they suggest. Its defaults (journal type,
datasync, max AIO, the folder of ``--file``) come from ``--config`` when given.

Thread-safety: a command runs once per process; nothing is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from store.cli.main import silence_stdout
from store.cli.output import StdoutConsole, progress_console
from store.cli.perf_messaging import MESSAGING_ONLY, messaging_command, only_options
from store.config import StoreConfig, load_config
from store.config.values import invalid, parse_size
from store.errors import ConfigError
from store.perf import (
    PerfJournalOptions,
    PerfJournalResult,
    PerfOptions,
    PerfProgress,
    PerfResult,
    default_config,
    remove_perf_records,
    run_perf,
    run_perf_journal,
)
from store.perf.messaging_workload import Ledger

__all__ = ["perf_command", "perf_journal_command", "register"]

_PHASES = {
    "load": "opening and loading the store",
    "write": "writing",
    "close": "closing (everything durable)",
    "between-runs": "between the runs",
    "reopen": "reopening and loading (recovery)",
    "verify": "verifying",
    "cleanup": "removing perf's records",
    "done": "done",
}


def _positive(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be above 0: {text!r}")
        return value

    return parse


def _size(text: str) -> int:
    try:
        return parse_size(text.strip(), key="--size")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _sizes(text: str) -> tuple[int, ...]:
    try:
        return tuple(parse_size(part.strip(), key="--sizes") for part in text.split(","))
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(subparsers: Any) -> None:
    """Add ``perf`` and ``perf-journal`` to the ``store`` parser. Returns nothing. Raises
    nothing."""
    p = subparsers.add_parser(
        "perf",
        help="the main job: a messaging workload on the configured store, verified after kill -9",
        description=(
            "Run producers and consumers on several queues through the storage manager "
            "(transactions, large messages, an address that pages), print messages/s and "
            "latency, then run the workload in a worker process, kill it with kill -9 at a "
            "random moment, recover and verify that every acknowledged send is delivered "
            "exactly once and every acknowledged ack stays acked. --journal runs the "
            "journal-level workload instead. Without --config: the file store under ./data."
        ),
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--config", help="a store configuration (.toml or broker.xml)")
    where.add_argument("--data-dir", help="folder of the embedded default store (default ./data)")
    p.add_argument(
        "--journal",
        action="store_true",
        help="the journal-level workload (records, not messages) with its own options below",
    )
    length = p.add_mutually_exclusive_group()
    length.add_argument(
        "--seconds", type=_positive(float), default=10.0, help="how long to run (default 10)"
    )
    length.add_argument(
        "--records", type=_positive(int), help="--journal: stop after about N journal records"
    )
    p.add_argument(
        "--tx-ratio", type=float, default=0.2, help="share of transactions, 0..1 (default 0.2)"
    )
    p.add_argument("--seed", type=int, help="fix the workload (default: random)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    m = p.add_argument_group("messaging workload (the default)")
    m.add_argument("--producers", type=_positive(int), help="producer threads (default 4)")
    m.add_argument("--consumers", type=_positive(int), help="consumer threads (default 4)")
    m.add_argument("--queues", type=_positive(int), help="queues, one pages (default 4)")
    m.add_argument("--size", type=_size, help="message body size (default 1K)")
    m.add_argument("--large-ratio", type=float, help="share of large messages, 0..1 (default 0.02)")
    m.add_argument(
        "--crash",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the kill -9 and recovery check after the measured run (default --crash)",
    )
    m.add_argument(
        "--crash-seconds",
        type=_positive(float),
        help="kill the worker within this many seconds (default min(--seconds, 5))",
    )
    jw = p.add_argument_group("journal workload (--journal)")
    jw.add_argument("--threads", type=_positive(int), help="writers (default 8)")
    jw.add_argument(
        "--sizes",
        type=_sizes,
        help="record sizes, mixed at random (default 100,1024,10240; 1K, 10K accepted)",
    )
    jw.add_argument(
        "--sync",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="appends wait until durable (default --sync)",
    )
    # store_true options default to None here, so that "not given" is told apart everywhere.
    jw.add_argument(
        "--keep", action="store_true", default=None, help="leave perf's records in the store"
    )
    jw.add_argument(
        "--clean",
        action="store_true",
        default=None,
        help="only remove the records earlier runs left (interrupted, or --keep), then exit",
    )
    p.set_defaults(func=perf_command)

    j = subparsers.add_parser(
        "perf-journal",
        help="raw journal throughput (Artemis's perf-journal)",
        description=(
            "Measure durable writes per millisecond on the journal's disk and print the "
            "journal-buffer-timeout they suggest (the fastest of --tries tries)."
        ),
    )
    j.add_argument("--config", help="take defaults from this configuration")
    j.add_argument(
        "--file", help="scratch file, deleted afterwards (default <journal-dir>/perf-journal.tmp)"
    )
    j.add_argument("--block-size", type=_positive(int), default=4096, help="default 4096")
    j.add_argument("--writes", type=_positive(int), default=250, help="per try (default 250)")
    j.add_argument("--tries", type=_positive(int), default=5, help="default 5")
    j.add_argument("--journal-type", help="NIO, MAPPED or ASYNCIO (default from the config)")
    j.add_argument(
        "--sync",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="make each write durable (default: journal-datasync)",
    )
    j.add_argument(
        "--sync-writes",
        action="store_true",
        help="ASYNCIO: wait for each write before the next (one producer's latency)",
    )
    j.add_argument("--max-aio", type=_positive(int), help="ASYNCIO writes in flight")
    j.add_argument("--json", action="store_true", help="print the result as JSON")
    j.set_defaults(func=perf_journal_command)


# --------------------------------------------------------------------------- store perf


@contextmanager
def _status(
    err: Console, *, unit: str = "records", phases: Mapping[str, str] = _PHASES
) -> Iterator[Callable[[PerfProgress], None]]:
    """A progress callback: a live bar on a terminal, one line per phase otherwise; ``unit``
    names what ``PerfProgress.records`` counts, ``phases`` describes each phase."""
    if not err.is_terminal:
        seen: set[str] = set()

        def line(p: PerfProgress) -> None:
            if p.phase not in seen:
                seen.add(p.phase)
                err.print(f"store perf: {phases.get(p.phase, p.phase)}", highlight=False)

        yield line
        return
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description:<34}"),
        BarColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        task: TaskID = bar.add_task("", total=None, status="")

        def update(p: PerfProgress) -> None:
            status = f"{p.records:,} {unit}"
            if p.phase in ("write", "run") and p.elapsed > 0:
                status += f"  {p.records / p.elapsed:,.0f}/s"
            total = None if p.fraction is None else 1.0
            bar.update(
                task,
                description=phases.get(p.phase, p.phase),
                total=total,
                completed=p.fraction or 0.0,
                status=status,
            )

        yield update


def perf_command(
    args: argparse.Namespace,
    *,
    between_runs: Callable[[StoreConfig], None] | None = None,
    before_check: Callable[[Ledger], None] | None = None,
) -> int:
    """Run ``store perf`` for parsed ``args``: the messaging workload
    (:func:`store.cli.perf_messaging.messaging_command`), or with ``--journal`` the journal
    workload; ``between_runs`` is passed to PerfOptions (tests damage the store with it),
    ``before_check`` to MessagingPerfOptions (tests feed the check a fake acknowledgement).

    Returns 0 when verified, 1 when the reopened store lacked or had extra records (or
    messages). Raises ConfigError for bad options (one of the other workload's included) or
    configuration, and any StoreError of the store.
    """
    config = load_config(args.config) if args.config else default_config(args.data_dir or "data")
    if not args.journal:
        return messaging_command(args, config, status=_status, before_check=before_check)
    only_options(args, MESSAGING_ONLY, "--journal")
    if args.clean:
        removed = remove_perf_records(config)
        print(f"store perf: removed {removed:,} records left by earlier runs")
        return 0
    options = PerfOptions(
        seconds=args.seconds,
        records=args.records,
        threads=8 if args.threads is None else args.threads,
        sizes=(100, 1024, 10240) if args.sizes is None else args.sizes,
        tx_ratio=args.tx_ratio,
        sync=True if args.sync is None else args.sync,
        keep=bool(args.keep),
        seed=args.seed,
        between_runs=between_runs,
    )
    try:
        with _status(progress_console(args)) as progress:
            result = run_perf(config, options, progress=progress)
    except KeyboardInterrupt:
        where = (
            "--config " + args.config if args.config else f"--data-dir {args.data_dir or 'data'}"
        )
        print(
            "store perf: interrupted; the records this run wrote are left in the store: "
            f"`store perf --clean {where}` removes them",
            file=sys.stderr,
        )
        return 130
    code = 0 if result.verified else 1
    try:
        if args.json:
            print(json.dumps(result.to_dict(), indent=2))
        else:
            _print_result(_stdout(), result)
    except BrokenPipeError:
        # `store perf | head`: the reader stopped listening; the run itself is done and its
        # verdict stays the exit status.
        silence_stdout()
    return code


def _stdout() -> Console:
    # Piped output keeps one line per table row instead of wrapping at rich's default 80.
    return StdoutConsole(width=shutil.get_terminal_size((120, 24)).columns)


def _ms(value: float) -> str:
    return f"{value:.3f}"


def _print_result(out: Console, r: PerfResult) -> None:
    kind = {"file": "file store", "database": "database store", "none": "zero persistence"}
    title = kind.get(r.store, r.store)
    if r.journal_type:
        title += f", journal-type {r.journal_type}"
    summary = Table(title=f"store perf: {title} ({r.location})", show_header=False, box=None)
    summary.add_column(style="bold")
    summary.add_column()
    sizes = "/".join(str(s) for s in r.sizes)
    sync = "sync" if r.sync else "no-sync"
    summary.add_row(
        "workload",
        f"{r.threads} writers, sizes {sizes} B, tx-ratio {r.tx_ratio:g}, {sync}, seed {r.seed}",
    )
    summary.add_row(
        "throughput",
        f"{r.records:,} records in {r.write_seconds:.2f} s: "
        f"{r.records_per_second:,.0f} records/s, {r.mb_per_second:,.1f} MB/s",
    )
    if not r.sync:
        summary.add_row(
            "appends only",
            f"{r.append_records_per_second:,.0f} records/s: the last append returned after "
            f"{r.append_seconds:.2f} s, everything was durable after "
            f"{r.write_seconds:.2f} s (the throughput above counts that)",
        )
    ops = r.operations
    summary.add_row(
        "operations",
        f"add {ops.get('add', 0):,}, update {ops.get('update', 0):,}, "
        f"delete {ops.get('delete', 0):,}; transactions committed "
        f"{ops.get('tx_committed', 0):,} ({ops.get('tx_prepared', 0):,} prepared first), "
        f"rolled back {ops.get('tx_rolled_back', 0):,}",
    )
    st = r.journal_stats
    summary.add_row(
        "journal",
        f"{st.records_live:,} live records, {st.files:,} files/rows, "
        f"{st.bytes_live / 1e6:,.1f} MB live of {st.bytes_total / 1e6:,.1f} MB",
    )
    summary.add_row(
        "times",
        f"load {r.load_seconds:.2f} s, close {r.close_seconds:.2f} s, reopen + load "
        f"{r.reopen_seconds:.2f} s, verify {r.verify_seconds:.2f} s, "
        f"cleanup {r.cleanup_seconds:.2f} s",
    )
    v = r.verification
    if not v.durable:
        check = "nothing kept (zero persistence) and nothing came back"
    else:
        check = (
            f"{v.checked:,} acknowledged records checked: missing {v.missing:,}, "
            f"mismatched {v.mismatched:,}, unexpected {v.unexpected:,}"
        )
    verdict = "[green]VERIFIED[/green]" if v.verified else "[red]FAILED[/red]"
    summary.add_row("recovery", f"{check}: {verdict}")
    kept = "kept (--keep)" if r.kept else f"{r.removed:,} removed"
    summary.add_row("perf's records", f"ids {r.first_id}..{r.last_id}, {kept}")
    out.print(summary)
    latency = Table(title="latency (ms)")
    latency.add_column("call")
    for name in ("count", "p50", "p90", "p99", "p99.9", "max"):
        latency.add_column(name, justify="right")
    for group, s in r.latency.items():
        latency.add_row(
            group, f"{s.count:,}", _ms(s.p50), _ms(s.p90), _ms(s.p99), _ms(s.p999), _ms(s.max)
        )
    out.print(latency)
    for problem in v.problems:
        out.print(f"[red]problem:[/red] {problem}", highlight=False)


# --------------------------------------------------------------------------- perf-journal


def perf_journal_command(args: argparse.Namespace) -> int:
    """Run ``store perf-journal`` for parsed ``args`` and print its figures.

    Returns 0. Raises ConfigError for bad options or configuration, StoreIOError when the
    scratch file cannot be written.
    """
    config = load_config(args.config) if args.config else StoreConfig()
    journal_type = (args.journal_type or config.journal_type).upper()
    if journal_type not in ("NIO", "MAPPED", "ASYNCIO"):
        raise invalid("--journal-type", args.journal_type, "NIO, ASYNCIO or MAPPED")
    if args.max_aio is not None:
        max_aio = args.max_aio
    else:
        max_aio = config.journal_max_io if config.journal_type == "ASYNCIO" else 4096
    directory = config.journal_directory if args.config else os.path.join("data", "journal")
    options = PerfJournalOptions(
        file=args.file or os.path.join(directory, "perf-journal.tmp"),
        block_size=args.block_size,
        writes=args.writes,
        tries=args.tries,
        journal_type=journal_type,
        datasync=config.journal_datasync if args.sync is None else args.sync,
        sync_writes=args.sync_writes,
        max_aio=max_aio,
    )
    err = progress_console(args)
    with Progress(console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("measuring durable writes", total=options.tries)
        result = run_perf_journal(
            options, progress=lambda done, _n: bar.update(task, completed=done)
        )
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        _print_journal(_stdout(), result)
    return 0


def _print_journal(out: Console, r: PerfJournalResult) -> None:
    kind = r.journal_type
    if r.journal_type != r.requested_type:
        kind = f"{r.requested_type} (fell back to {r.journal_type})"
    sync = "datasync" if r.datasync else "no datasync"
    out.print(
        f"store perf-journal: {kind}, {r.writes} writes of {r.block_size} B, {sync}, "
        f"{r.in_flight} in flight, {r.file}",
        highlight=False,
    )
    tries = ", ".join(f"{ms:.1f}" for ms in r.try_ms)
    out.print(f"tries (ms): {tries}", highlight=False)
    out.print(f"fastest: {r.best_ms:.1f} ms, {r.writes_per_ms:.2f} writes/ms", highlight=False)
    out.print(f"recommended journal-buffer-timeout: {r.buffer_timeout_ns} ns", highlight=False)
    if r.journal_type == "ASYNCIO" and r.in_flight > 1:
        out.print(
            "note: with several writes in flight this is the device's rate; the journal keeps "
            "one flush in flight, which --sync-writes measures",
            highlight=False,
        )
