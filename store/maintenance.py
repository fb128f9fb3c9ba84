"""Maintenance of a whole store, whichever back-end it uses: ``store data compact``.

:func:`compact_store` opens the store its configuration describes (file or database: the
configuration chooses, as :func:`store.open_store` does), loads both journals and runs each
journal's ``compact()``: the file store's compactor, or the database store's removal of dead
rows. It returns a result dataclass and never prints (docs/conventions.md#10).

It never creates a store: for the file store both journal directories must already hold a
journal (``store.file.survey.require_journal``), and the store is opened with directory
creation off; compacting a path that holds no journal is an error naming the path.

Thread-safety: one call works alone on its store; the store's lock keeps others out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from store.config import StoreConfig
from store.file import file_journal_options
from store.file.survey import require_journal
from store.journal.api import JournalStats

__all__ = ["CompactResult", "compact_store"]


@dataclass(frozen=True, slots=True)
class CompactResult:
    """One journal before and after :func:`compact_store`. Immutable; safe to share."""

    journal: str  # "bindings" or "messages"
    before: JournalStats
    after: JournalStats
    seconds: float


def compact_store(
    config: StoreConfig, *, on_step: Callable[[str], None] | None = None
) -> list[CompactResult]:
    """Open the store ``config`` describes, load both journals and compact each.

    ``on_step`` is called with a short description before each of the four steps (load and
    compact, per journal), for a progress display. Returns one :class:`CompactResult` per
    journal, bindings first. Raises ConfigError when a file-store directory holds no journal,
    StoreLockedError when the store is open elsewhere, CorruptionError when a journal cannot
    be loaded, StoreIOError on I/O failure.
    """
    from store.store import open_store

    if config.store_type == "file":
        bindings, messages = file_journal_options(config, lock=False)
        for opts in (messages, bindings):  # the message journal first: --journal names it
            require_journal(opts.directory, prefix=opts.prefix, fs=opts.fs)
        config = config.replace(create_journal_dir=False, create_bindings_dir=False)
    results = []
    with open_store(config) as store:
        for name, journal in (("bindings", store.bindings), ("messages", store.messages)):
            if on_step is not None:
                on_step(f"loading {name}")
            journal.load()
            before = journal.stats()
            if on_step is not None:
                on_step(f"compacting {name}")
            started = time.perf_counter()
            journal.compact()
            results.append(
                CompactResult(name, before, journal.stats(), time.perf_counter() - started)
            )
    return results
