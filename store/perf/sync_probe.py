"""``store perf-journal``: Artemis's sync-rate probe, :func:`run_perf_journal`.

It writes through the journal's own NIO and MAPPED back-ends; for ASYNCIO it drives libaio
itself with up to ``max_aio`` writes in flight (one with ``sync_writes``), which the journal's
one-flush-at-a-time back-end cannot express. It shares nothing with the workloads of
``store perf``.

Library code never prints: progress reaches the caller through the ``progress`` callback,
called in the caller's thread.

Thread-safety: :func:`run_perf_journal` may run in any thread; each run owns its scratch file.
The option and result classes are immutable.
"""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from store.config.values import invalid
from store.errors import StoreIOError
from store.file.io import AsyncIOBackend, IOBackend, make_backend
from store.file.segments import Segment
from store.fs import OsFileSystem

__all__ = ["PerfJournalOptions", "PerfJournalResult", "run_perf_journal"]


@dataclass(frozen=True, kw_only=True)
class PerfJournalOptions:
    """What :func:`run_perf_journal` measures (Artemis's ``perf-journal`` options)."""

    #: Default "data/journal/perf-journal.tmp". The scratch file; deleted afterwards.
    file: str = os.path.join("data", "journal", "perf-journal.tmp")
    #: Default 4096. Bytes per write; ASYNCIO needs a multiple of 4096.
    block_size: int = 4096
    #: Default 250. Durable writes per try.
    writes: int = 250
    #: Default 5. Tries; the fastest counts (the others absorb warm-up and noise).
    tries: int = 5
    #: Default "NIO". NIO, MAPPED or ASYNCIO (which falls back to NIO where it cannot work).
    journal_type: str = "NIO"
    #: Default True. fdatasync / msync / O_DSYNC; False measures the page cache.
    datasync: bool = True
    #: Default False. ASYNCIO waits for each write before the next (one producer's latency)
    #: instead of keeping up to ``max_aio`` in flight; NIO and MAPPED always wait.
    sync_writes: bool = False
    #: Default 4096. ASYNCIO writes in flight at most.
    max_aio: int = 4096

    def __post_init__(self) -> None:
        for key, value in (("--block-size", self.block_size), ("--writes", self.writes)):
            if value < 1:
                raise invalid(key, value, "1 or more")
        if self.tries < 1:
            raise invalid("--tries", self.tries, "1 or more")
        if not 1 <= self.max_aio <= 4096:
            raise invalid("--max-aio", self.max_aio, "1 to 4096")
        if self.journal_type.upper() not in ("NIO", "MAPPED", "ASYNCIO"):
            raise invalid("--journal-type", self.journal_type, "NIO, ASYNCIO or MAPPED")


@dataclass(frozen=True, kw_only=True)
class PerfJournalResult:
    """The probe's figures: every try's milliseconds, the fastest, and what follows from it."""

    file: str
    requested_type: str
    journal_type: str  #: the type that ran (ASYNCIO may have fallen back to NIO)
    block_size: int
    writes: int
    datasync: bool
    in_flight: int  #: writes in flight at most (1 unless ASYNCIO without sync_writes)
    try_ms: tuple[float, ...]

    @property
    def best_ms(self) -> float:
        """Milliseconds of the fastest try."""
        return min(self.try_ms)

    @property
    def writes_per_ms(self) -> float:
        """Durable writes per millisecond in the fastest try."""
        return self.writes / self.best_ms if self.best_ms > 0 else float(self.writes)

    @property
    def buffer_timeout_ns(self) -> int:
        """Recommended journal-buffer-timeout: one durable write's mean time, in ns."""
        return max(1, round(1e6 / self.writes_per_ms))

    def to_dict(self) -> dict[str, Any]:
        """Returns the result as JSON-ready data, derived figures included. Raises nothing."""
        data = asdict(self)
        data.update(
            best_ms=self.best_ms,
            writes_per_ms=self.writes_per_ms,
            buffer_timeout_ns=self.buffer_timeout_ns,
        )
        return data


class _Fd:
    """What libaio wants as a target: an object with ``fileno``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


def _aio_tries(
    options: PerfJournalOptions, path: str, progress: Callable[[int, int], None]
) -> list[float]:
    import libaio  # optional and Linux only: make_backend checked it loads

    block, writes = options.block_size, options.writes
    depth = 1 if options.sync_writes else min(options.max_aio, writes)
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_DIRECT | (os.O_DSYNC if options.datasync else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise StoreIOError(f"cannot open {path} for O_DIRECT: {exc}", path=path) from exc
    buf = mmap.mmap(-1, block)  # page-aligned, as O_DIRECT needs
    buf.write(b"t" * block)
    view = memoryview(buf)
    ctx = libaio.AIOContext(depth)
    results: list[float] = []
    try:
        for n in range(options.tries):
            start = time.perf_counter()
            submitted = done = 0
            while done < writes:
                todo = [
                    libaio.AIOBlock(
                        libaio.AIOBLOCK_MODE_WRITE,
                        target_file=_Fd(fd),
                        buffer_list=[view],
                        offset=i * block,
                    )
                    for i in range(submitted, min(writes, done + depth))
                ]
                if todo:
                    submitted += ctx.submit(todo)
                for _block, res, _res2 in ctx.getEvents(min_nr=1):
                    if res != block:
                        raise StoreIOError(
                            f"AIO write to {path} returned {res} of {block}", path=path
                        )
                    done += 1
            results.append((time.perf_counter() - start) * 1e3)
            progress(n + 1, options.tries)
    except OSError as exc:
        raise StoreIOError(f"AIO write to {path} failed: {exc}", path=path) from exc
    finally:
        ctx.close()
        view.release()
        buf.close()
        os.close(fd)
    return results


def run_perf_journal(
    options: PerfJournalOptions | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> PerfJournalResult:
    """Measure durable writes per millisecond as Artemis's ``perf-journal`` does.

    Pre-fills ``file`` with ``block_size x writes`` zero bytes, then ``tries`` times writes
    ``writes`` blocks of ``t`` each made durable, and deletes the file. ``progress(done,
    tries)`` is called after each try, in this thread. Returns the :class:`PerfJournalResult`.
    Raises ConfigError for bad options (ASYNCIO with a block size that is not a multiple of
    4096), StoreIOError when the file cannot be written.
    """
    options = options or PerfJournalOptions()
    notify = progress or (lambda done, total: None)
    fs = OsFileSystem()
    path = os.path.abspath(options.file)
    fs.makedirs(os.path.dirname(path))
    size = options.block_size * options.writes
    requested = options.journal_type.upper()
    handle = fs.open(path, create=True)
    try:
        handle.truncate(0)
        zeros = bytes(min(size, 1 << 20))
        for offset in range(0, size, len(zeros)):
            handle.pwrite(zeros[: size - offset], offset)
        handle.datasync()
        backend = make_backend(
            requested, fs, os.path.dirname(path), datasync=options.datasync, max_io=options.max_aio
        )
        try:
            if isinstance(backend, AsyncIOBackend) and options.block_size % backend.alignment:
                raise invalid("--block-size", options.block_size, "a multiple of 4096 for ASYNCIO")
            if isinstance(backend, AsyncIOBackend):
                backend.close()
                tries = _aio_tries(options, path, notify)
                in_flight = 1 if options.sync_writes else min(options.max_aio, options.writes)
            else:
                tries = _sync_tries(options, backend, Segment(path, 0, size, handle), notify)
                in_flight = 1
        finally:
            if not isinstance(backend, AsyncIOBackend):
                backend.close()
    finally:
        handle.close()
        fs.remove(path)
    return PerfJournalResult(
        file=path,
        requested_type=requested,
        journal_type=backend.name,
        block_size=options.block_size,
        writes=options.writes,
        datasync=options.datasync,
        in_flight=in_flight,
        try_ms=tuple(tries),
    )


def _sync_tries(
    options: PerfJournalOptions,
    backend: IOBackend,
    seg: Segment,
    progress: Callable[[int, int], None],
) -> list[float]:
    """NIO / MAPPED: every write is followed by its sync, as the journal's flusher does."""
    block = b"t" * options.block_size
    results: list[float] = []
    for n in range(options.tries):
        start = time.perf_counter()
        for i in range(options.writes):
            backend.write(seg, i * options.block_size, block)
            backend.sync(seg)
        results.append((time.perf_counter() - start) * 1e3)
        progress(n + 1, options.tries)
    return results
