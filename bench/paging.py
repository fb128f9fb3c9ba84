"""Page stores through the public API (``open_store(...).paging``), beside the same store's
messages journal measured in the same run with the same record sizes.

Figures (records per second), per back-end (``--backend file postgresql mariadb sqlite``) and
record size (``--size``, default 100 and 1024 bytes):

* ``paging durable append, T threads``: T threads (``--threads``, default 8), each appending
  to its own address with ``append(record, sync=True)`` in a loop (group-committed by the
  manager's flusher: ``page-sync-timeout`` = ``journal-buffer-timeout``);
* ``paging read back``: every page of those addresses read with ``read_page`` after the
  appends (records read / seconds);
* ``journal durable append, T threads``: the same threads calling
  ``messages.append_add(id, 45, record, sync=True)`` on the same store: the reference.

Page size is the default 10 MiB, capped by ``jdbc-max-page-size-bytes`` (100 KiB) on a
database. File stores live under ``--dir``; database stores use fresh tables (prefix
``bench<hex>_``, servers as in tests/support/db_backends.py), dropped at the end.

Run: ``python -m bench.paging [--backend file postgresql mariadb sqlite] [--size 100 1024]
[--threads 8] [--seconds S] [--repeat K] [--markdown FILE] [--json FILE]``.

Thread-safety: the store's paging manager and journal are shared by the worker threads, as
the contract allows; everything else runs on the main thread.
"""

from __future__ import annotations

import argparse
import itertools
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import (
    Result,
    add_common_arguments,
    configure,
    console,
    machine_info,
    median_rate,
    print_machine,
    print_results,
    results_markdown,
    run_threads,
    scratch_dir,
    write_json,
    write_markdown,
)
from bench.db_bench import database_config
from store import StoreConfig, open_store
from store.db.migrate import drop_schema, upgrade

__all__ = ["main", "run_backend"]


def _file_config(root: Path) -> StoreConfig:
    return StoreConfig.from_mapping(
        {
            "journal-directory": str(root / "journal"),
            "bindings-directory": str(root / "bindings"),
            "large-messages-directory": str(root / "large"),
            "paging-directory": str(root / "paging"),
        }
    )


def _paging_append(config: StoreConfig, size: int, threads: int, seconds: float) -> float:
    """Records/s of sync page appends; also reads everything back and returns that rate
    through ``_last_read``."""
    record = bytes(size)
    with open_store(config) as store:
        pm = store.paging
        counter = itertools.count()

        def worker(stop: threading.Event) -> int:
            ps = pm.store(f"bench-{next(counter)}")
            n = 0
            while not stop.is_set():
                ps.append(record, sync=True)
                n += 1
            return n

        rate = run_threads(threads, seconds, worker)
        started = time.perf_counter()
        read = 0
        for address in pm.addresses():
            ps = pm.store(address)
            for page in ps.pages():
                read += len(ps.read_page(page))
        _last_read.append(read / (time.perf_counter() - started))
        for address in pm.addresses():
            pm.remove(address)
    return rate


_last_read: list[float] = []


def _journal_append(config: StoreConfig, size: int, threads: int, seconds: float) -> float:
    record = bytes(size)
    with open_store(config) as store:
        store.bindings.load()
        journal = store.messages
        journal.load()
        ids = itertools.count(1)

        def worker(stop: threading.Event) -> int:
            n = 0
            while not stop.is_set():
                journal.append_add(next(ids), 45, record, sync=True)
                n += 1
            return n

        return run_threads(threads, seconds, worker)


def run_backend(which: str, args: argparse.Namespace, data_dir: Path) -> list[Result]:
    """Every figure of one back-end (module docstring). Returns them."""
    results: list[Result] = []
    for size in args.size:
        if which == "file":
            root = data_dir / f"file-{size}"
            config = _file_config(root)
        else:
            config = database_config(which, data_dir)
            upgrade(config)
        try:
            _last_read.clear()
            results.append(
                median_rate(
                    f"paging durable append {size} B, {args.threads} threads",
                    lambda c=config, n=size: _paging_append(c, n, args.threads, args.seconds),
                    repeat=args.repeat,
                    unit="records/s",
                )
            )
            runs = tuple(_last_read)
            results.append(
                Result(
                    name=f"paging read back {size} B",
                    value=sorted(runs)[len(runs) // 2],
                    unit="records/s",
                    runs=runs,
                )
            )
            results.append(
                median_rate(
                    f"journal durable append {size} B, {args.threads} threads",
                    lambda c=config, n=size: _journal_append(c, n, args.threads, args.seconds),
                    repeat=args.repeat,
                    unit="records/s",
                )
            )
        finally:
            if which != "file":
                drop_schema(config)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument(
        "--backend",
        nargs="+",
        default=["file", "postgresql", "mariadb", "sqlite"],
        choices=["file", "postgresql", "mariadb", "sqlite"],
    )
    parser.add_argument("--size", nargs="+", type=int, default=[100, 1024])
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    configure(args)
    out = console()
    info = machine_info(args.dir)
    print_machine(info, out)
    tables: list[tuple[str, str]] = []
    sections: dict[str, Any] = {}
    with scratch_dir(args.dir, "paging") as data_dir:
        for which in args.backend:
            results = run_backend(which, args, data_dir)
            print_results(f"{which}: page stores and the messages journal", results, out)
            tables.append(
                (f"{which}: page stores and the messages journal", results_markdown(results))
            )
            sections[which] = results
    if args.markdown:
        write_markdown(args.markdown, info, tables)
    if args.json:
        write_json(args.json, info, sections)


if __name__ == "__main__":
    main()
