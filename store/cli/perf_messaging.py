"""``store perf`` without ``--journal``: the messaging workload, its results table and verdict.

Runs :func:`store.perf.messaging_run.run_messaging_perf` and prints the figures (messages/s, and
p50/p99/max latency of sends, acks and commits) and both checks (the clean restart and the
recovery after ``kill -9``), or JSON with ``--json``. Exit code 0 when both checks held, 1
with the problems listed when one did not. Progress goes to stderr through the caller's
status bar (:func:`store.cli.perf._status`, passed in to keep the import one-way).

Thread-safety: a command runs once per process; nothing is shared.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager

from rich.console import Console
from rich.table import Table

from store.cli.main import silence_stdout
from store.cli.output import StdoutConsole, progress_console
from store.config import StoreConfig
from store.errors import ConfigError
from store.perf import PerfProgress
from store.perf.messaging_run import MessagingPerfOptions, MessagingPerfResult, run_messaging_perf
from store.perf.messaging_workload import Ledger, RecoveryCheck

__all__ = ["JOURNAL_ONLY", "MESSAGING_ONLY", "messaging_command", "only_options"]

#: Options (argparse destinations) of the messaging workload only.
MESSAGING_ONLY = (
    "producers",
    "consumers",
    "queues",
    "size",
    "large_ratio",
    "crash",
    "crash_seconds",
)
#: Options of the journal workload (``--journal``) only.
JOURNAL_ONLY = ("records", "threads", "sizes", "sync", "keep", "clean")

PHASES = {
    "load": "opening and loading the store",
    "run": "sending and acknowledging",
    "drain": "acknowledging what is left",
    "close": "closing",
    "reopen": "reopening and checking (clean restart)",
    "crash": "worker running until kill -9",
    "recover": "recovering after kill -9 and checking",
    "cleanup": "removing perf's queues",
    "done": "done",
}

Status = Callable[..., AbstractContextManager[Callable[[PerfProgress], None]]]


def only_options(args: argparse.Namespace, names: tuple[str, ...], where: str) -> None:
    """Check that none of the options ``names`` was given (they belong to the other
    workload). Returns None. Raises ConfigError naming the first one given."""
    for name in names:
        if getattr(args, name, None) is not None:
            option = "--" + name.replace("_", "-")
            raise ConfigError(
                f"{option} is not an option of store perf {where}",
                key=option,
                hint="the messaging workload takes --producers, --consumers, --queues, --size, "
                "--large-ratio, --crash, --crash-seconds; the journal workload (--journal) "
                "takes --records, --threads, --sizes, --sync, --keep, --clean",
            )


def messaging_command(
    args: argparse.Namespace,
    config: StoreConfig,
    *,
    status: Status,
    before_check: Callable[[Ledger], None] | None = None,
) -> int:
    """Run the messaging workload for parsed ``args`` on ``config`` and print its result;
    ``status(console, unit=, phases=)`` gives the progress callback; ``before_check`` is
    passed to the options (tests feed the check a fake acknowledgement with it).

    Returns 0 when verified, 1 when a check failed, 130 when interrupted. Raises ConfigError
    for options of the journal workload or bad values, and any StoreError of the store.
    """
    only_options(args, JOURNAL_ONLY, "without --journal")
    given = {
        name: getattr(args, name)
        for name in MESSAGING_ONLY
        if getattr(args, name, None) is not None
    }
    options = MessagingPerfOptions(
        seconds=args.seconds,
        tx_ratio=args.tx_ratio,
        seed=args.seed,
        before_check=before_check,
        **given,
    )
    try:
        with status(progress_console(args), unit="messages", phases=PHASES) as progress:
            result = run_messaging_perf(config, options, progress=progress)
    except KeyboardInterrupt:
        print(
            "store perf: interrupted; the next store perf on this store removes the queues "
            "this run left (store-perf.*)",
            file=sys.stderr,
        )
        return 130
    try:
        if args.json:
            print(json.dumps(result.to_dict(), indent=2))
        else:
            print_result(_stdout(), result)
    except BrokenPipeError:
        silence_stdout()  # the reader stopped listening; the verdict stays the exit status
    return 0 if result.verified else 1


def _stdout() -> Console:
    return StdoutConsole(width=shutil.get_terminal_size((120, 24)).columns)


def _check_text(c: RecoveryCheck) -> str:
    verdict = "[green]VERIFIED[/green]" if c.verified else "[red]FAILED[/red]"
    return (
        f"{c.sends:,} acknowledged sends, {c.acks:,} acknowledged acks, {c.recovered:,} "
        f"messages back on the queues checked ({c.in_doubt:,} acks in flight): lost "
        f"{c.lost:,}, duplicated {c.duplicated:,}, acks undone {c.undone:,}: {verdict}"
    )


#: What each latency row times (its count is the number of such calls).
_CALLS = {
    "send": "single sends",
    "ack": "single acks",
    "commit": "transactions, of sends or of acks",
}


def print_result(out: Console, r: MessagingPerfResult) -> None:
    """Print the results table, the latency table and any problem. Returns None. Raises
    nothing of its own."""
    kind = {"file": "file store", "database": "database store", "none": "zero persistence"}
    title = kind.get(r.store, r.store)
    if r.journal_type:
        title += f", journal-type {r.journal_type}"
    summary = Table(title=f"store perf: {title} ({r.location})", show_header=False, box=None)
    summary.add_column(style="bold")
    summary.add_column()
    summary.add_row(
        "workload",
        f"{r.producers} producers, {r.consumers} consumers, {len(r.queues)} queues (one "
        f"paging), bodies {r.size:,} B; large messages {r.large_ratio:.0%} of sends, "
        f"{r.large_size:,} B each (1 KiB over min-large-message-size); transactions "
        f"{r.tx_ratio:.0%} of sends and of ack batches; seed {r.seed}",
    )
    # Every count below adds up: the run's figures (the rates) are what was acknowledged
    # while producers ran; the totals add the sends that were finishing when they stopped and
    # the acks of the drain, and split into single calls and calls in transactions.
    ops = r.operations
    sends = ops.get("send", 0) + ops.get("tx_send", 0)
    acks = ops.get("ack", 0) + ops.get("tx_ack", 0)
    summary.add_row(
        "throughput",
        f"in the {r.run_seconds:.2f} s run: {r.sends:,} sends ({r.sends_per_second:,.0f} "
        f"messages/s sent), {r.acks:,} acks ({r.acks_per_second:,.0f} messages/s acked)",
    )
    summary.add_row(
        "sends",
        f"{sends:,} = {ops.get('send', 0):,} single + {ops.get('tx_send', 0):,} in "
        f"transactions; {r.sends:,} in the run + {sends - r.sends:,} finishing as it ended",
    )
    summary.add_row(
        "acks",
        f"{acks:,} = {ops.get('ack', 0):,} single + {ops.get('tx_ack', 0):,} in transactions; "
        f"{r.acks:,} in the run + {acks - r.acks:,} after it (finishing, and the drain)",
    )
    summary.add_row(
        "times",
        f"load {r.load_seconds:.2f} s, drain {r.drain_seconds:.2f} s, close + reopen "
        f"{r.reopen_seconds:.2f} s, cleanup {r.cleanup_seconds:.2f} s",
    )
    if r.reopen is None:
        summary.add_row("recovery", "zero persistence: nothing kept, nothing to check")
    else:
        summary.add_row("clean restart", _check_text(r.reopen))
    if r.crash is not None:
        c = r.crash
        how = "killed with kill -9" if c.killed else "ended by itself (not killed)"
        summary.add_row(
            "kill -9",
            f"worker {how} after {c.killed_after:.2f} s; recovery (load) {c.recovery_seconds:.2f}"
            f" s, {c.recovered_messages:,} messages in the store (every queue: the check"
            " below counts the queues whose sends and acks it follows)",
        )
        summary.add_row("after kill -9", _check_text(c.check))
    out.print(summary)
    latency = Table(title="latency (ms)")
    latency.add_column("call")
    for name in ("count", "p50", "p99", "max"):
        latency.add_column(name, justify="right")
    for group, s in r.latency.items():
        label = f"{group} ({_CALLS.get(group, group)})"
        latency.add_row(label, f"{s.count:,}", f"{s.p50:.3f}", f"{s.p99:.3f}", f"{s.max:.3f}")
    out.print(latency)
    for check in (r.reopen, r.crash.check if r.crash else None):
        for problem in check.problems if check is not None else ():
            out.print(f"[red]problem:[/red] {problem}", highlight=False)
