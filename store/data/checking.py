"""Verifying and repairing a whole store offline, on either back-end: :func:`verify_store` and
:func:`repair_store`, the library behind ``store data verify`` / ``repair`` (docs/cli.md).

The configuration's store type chooses the work:

- the file store: each file journal (:mod:`store.file.verify`, :mod:`store.file.repair`, or
  :mod:`store.file.salvage` with ``salvage=True``), then, for a verify, the large-message
  bodies (:mod:`store.data.large_verify`) and the page stores (:mod:`store.paging.repair`);
- the database store: its tables (:mod:`store.data.db_check.verify`,
  :mod:`store.data.db_check.repair`), then, for a verify, the page stores (not when the schema
  itself is missing or unknown: there are no page tables to read then).

A verify or repair is a sequence of *parts* (one journal, the large messages, the page
stores, the database's tables); the result holds each part's report in order. Two optional
hooks let a caller show the work as it goes: ``step(description)``, a context manager entered
around each part (a progress display), and ``on_part(part)``, called with each part as soon as
it is done, before the next starts, so what a repair changed reaches the operator even when a
later part is refused. Neither function prints (docs/conventions.md#10).

Thread-safety: each call works alone on its store (the parts take the store's locks as their
modules say); the hooks run on the caller's thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Generic, TypeVar

from store.config import StoreConfig
from store.data import body_salvage, large_verify, page_salvage, summary_check
from store.data.db_check import repair as db_repair
from store.data.db_check import verify as db_verify
from store.errors import ConfigError, CorruptionError
from store.file import file_journal_options, repair, salvage, survey, verify
from store.file.options import FileJournalOptions
from store.paging import repair as page_repair

__all__ = [
    "BodySalvage",
    "DatabaseVerify",
    "JournalRepair",
    "JournalSalvage",
    "JournalVerify",
    "LargeMessagesVerify",
    "PageRepair",
    "PageSalvage",
    "PagesVerify",
    "RepairPart",
    "StoreRepairResult",
    "StoreVerifyResult",
    "VerifyPart",
    "file_journals",
    "repair_store",
    "verify_store",
]

_P = TypeVar("_P")

#: ``step(description)``: a context manager around one part of the work (e.g. a progress display).
Step = Callable[[str], AbstractContextManager[object]]


# -- the parts of a verify ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JournalVerify:
    """One file journal's verify: ``name`` is ``"bindings"`` or ``"messages"``; ``salvage``,
    when it has errors, what ``store data repair --salvage`` would keep and drop (a dry run;
    None when nothing is damaged or no salvage can read it). Immutable."""

    name: str
    report: verify.VerifyReport
    salvage: salvage.SalvageReport | None = None

    @property
    def error_count(self) -> int:
        """Findings that make a load refuse the journal."""
        return len(self.report.errors)

    @property
    def warning_count(self) -> int:
        """Findings a load tolerates or the next open cleans up."""
        return len(self.report.warnings)


@dataclass(frozen=True, slots=True)
class LargeMessagesVerify:
    """The file store's large-message bodies: ``bodies`` read whole from ``directory``, and
    the findings (:mod:`store.data.large_verify`; every one not an error is a warning).
    Immutable."""

    directory: str
    bodies: int
    findings: list[verify.Finding]

    @property
    def error_count(self) -> int:
        """Bodies that cannot be read, or are missing."""
        return sum(f.severity == verify.ERROR for f in self.findings)

    @property
    def warning_count(self) -> int:
        """The other findings (incomplete bodies the next open deletes)."""
        return len(self.findings) - self.error_count


@dataclass(frozen=True, slots=True)
class PagesVerify:
    """The page stores of either back-end (:func:`store.paging.repair.check_page_stores`;
    every finding not an error is a warning). Immutable."""

    findings: list[page_repair.PageFinding]

    @property
    def error_count(self) -> int:
        """Findings that make open refuse the store."""
        return sum(f.severity == page_repair.ERROR for f in self.findings)

    @property
    def warning_count(self) -> int:
        """Leftovers the next open removes."""
        return len(self.findings) - self.error_count


@dataclass(frozen=True, slots=True)
class DatabaseVerify:
    """The database store's tables (:func:`store.data.db_check.verify.verify_database`).
    Immutable."""

    report: db_verify.DatabaseVerifyReport

    @property
    def error_count(self) -> int:
        """Findings that make a load refuse the store."""
        return len(self.report.errors)

    @property
    def warning_count(self) -> int:
        """Findings a load tolerates or the next open cleans up."""
        return len(self.report.warnings)


VerifyPart = JournalVerify | LargeMessagesVerify | PagesVerify | DatabaseVerify


@dataclass(frozen=True, slots=True)
class StoreVerifyResult:
    """Every part of one store's verify, in the order they ran; ``store_type`` is ``"file"``
    or ``"database"``. Immutable."""

    store_type: str
    parts: tuple[VerifyPart, ...]

    @property
    def error_count(self) -> int:
        """All parts' errors: what makes a load (or open) refuse the store."""
        return sum(p.error_count for p in self.parts)

    @property
    def warning_count(self) -> int:
        """All parts' warnings: what a load tolerates or the next open cleans up."""
        return sum(p.warning_count for p in self.parts)

    @property
    def ok(self) -> bool:
        """True when nothing found stops the store from loading."""
        return self.error_count == 0


# -- the parts of a repair ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JournalRepair:
    """One file journal's repair (:func:`store.file.repair.repair`). Immutable."""

    name: str
    report: repair.RepairReport


@dataclass(frozen=True, slots=True)
class JournalSalvage:
    """One file journal's salvage (:func:`store.file.salvage.salvage`). Immutable."""

    name: str
    report: salvage.SalvageReport


@dataclass(frozen=True, slots=True)
class PageRepair:
    """One page-store repair the caller asked for: ``action`` (``"adopt"``, ``"remove"``,
    ``"accept-lost"``) and what :mod:`store.paging.repair` says it did. Immutable."""

    action: str
    done: str


@dataclass(frozen=True, slots=True)
class BodySalvage:
    """The large-message bodies' salvage (:func:`store.data.body_salvage.salvage_bodies`):
    the messages removed with their damaged or lost bodies. Immutable."""

    report: body_salvage.BodySalvageReport


@dataclass(frozen=True, slots=True)
class PageSalvage:
    """The page stores' salvage (:func:`store.data.page_salvage.salvage_pages`): the damaged
    page records replaced, each dropping its message. Immutable."""

    report: page_salvage.PageSalvageReport


RepairPart = (
    JournalRepair
    | JournalSalvage
    | BodySalvage
    | PageSalvage
    | db_repair.DatabaseRepairReport
    | PageRepair
)


@dataclass(frozen=True, slots=True)
class StoreRepairResult:
    """Every part of one store's repair, in the order they ran; ``store_type`` is ``"file"``
    or ``"database"``. Immutable."""

    store_type: str
    parts: tuple[RepairPart, ...]

    @property
    def changed(self) -> bool:
        """True when any part changed the store."""
        return any(_changed(p) for p in self.parts)

    @property
    def dropped(self) -> int:
        """Damaged ranges a salvage dropped and messages it removed with their bodies (their
        records are lost; each is reported)."""
        dropped = 0
        for p in self.parts:
            if isinstance(p, JournalSalvage):
                dropped += len(p.report.dropped)
            elif isinstance(p, BodySalvage):
                dropped += len(p.report.removed)
            elif isinstance(p, PageSalvage):
                dropped += p.report.dropped
        return dropped


# -- entry points ------------------------------------------------------------------------------


def file_journals(
    config: StoreConfig, *, bindings: bool = True, messages: bool = True
) -> list[tuple[str, FileJournalOptions]]:
    """The file journals of ``config`` a verify or repair works on (``"bindings"`` and/or
    ``"messages"``, in that order), each checked to hold a journal before any is touched (a
    command never acts on one journal and then fails on the other's path).

    Returns (name, options) pairs. Raises ConfigError when a directory holds no journal,
    StoreIOError when it cannot be read.
    """
    bindings_opts, messages_opts = file_journal_options(config, lock=False)
    chosen = []
    if bindings:
        chosen.append(("bindings", bindings_opts))
    if messages:
        chosen.append(("messages", messages_opts))
    for _name, opts in reversed(chosen):  # the message journal first, the one named most often
        survey.require_journal(opts.directory, prefix=opts.prefix, fs=opts.fs)
    return chosen


def verify_store(
    config: StoreConfig,
    *,
    bindings: bool = True,
    messages: bool = True,
    force: bool = False,
    step: Step | None = None,
    on_part: Callable[[VerifyPart], None] | None = None,
) -> StoreVerifyResult:
    """Check the store ``config`` describes and list every finding of every part (module
    docstring); changes nothing.

    ``bindings`` / ``messages`` (file store) leave a journal out; the large messages are then
    checked without the message journal's list. ``force`` reads a store a live process holds.
    ``step`` and ``on_part`` are the optional hooks of the module docstring. Returns the
    :class:`StoreVerifyResult`. Raises ConfigError for a store without persistence, for a
    journal left out of a database store, or a path that holds no journal; StoreLockedError
    naming the holder (without ``force``); StoreIOError / StoreUnavailableError when the
    store cannot be read.
    """
    run: _Parts[VerifyPart] = _Parts(step, on_part)
    store_type = _store_type(config, "verify", bindings=bindings, messages=messages)
    if store_type == "database":
        with run.step("reading the store's tables"):
            report = db_verify.verify_database(config, force=force)
        run.done(DatabaseVerify(report))
        # Without the store's schema there are no page tables to read either.
        if not any(f.kind == "schema" for f in report.errors):
            run.done(_verify_pages(config, run))
        return StoreVerifyResult(store_type, tuple(run.done_parts))
    journals = file_journals(config, bindings=bindings, messages=messages)
    for name, opts in journals:
        with run.step(f"verifying the {name} journal"):
            found = verify.verify(opts.directory, prefix=opts.prefix, kind=opts.kind, force=force)
            dry = _dry_salvage(opts) if found.errors else None
        run.done(JournalVerify(name, found, dry))
    with run.step("verifying the large messages"):
        bodies, findings = large_verify.verify_file_large_messages(
            config, dict(journals).get("messages")
        )
    run.done(LargeMessagesVerify(config.large_messages_directory, bodies, findings))
    run.done(_verify_pages(config, run))
    return StoreVerifyResult(store_type, tuple(run.done_parts))


def _dry_salvage(opts: FileJournalOptions) -> salvage.SalvageReport | None:
    """What a salvage of the journal ``opts`` names would keep and drop, None when no salvage
    can read it (files of another journal, two files with one id: CorruptionError)."""
    try:
        return salvage.salvage(opts.directory, prefix=opts.prefix, kind=opts.kind, dry_run=True)
    except (CorruptionError, ConfigError):
        return None


def repair_store(
    config: StoreConfig,
    *,
    bindings: bool = True,
    messages: bool = True,
    force: bool = False,
    salvage_journals: bool = False,
    adopt_pages: tuple[str, str] | None = None,
    remove_pages: str | None = None,
    accept_lost_pages: str | None = None,
    step: Step | None = None,
    on_part: Callable[[RepairPart], None] | None = None,
) -> StoreRepairResult:
    """Repair the store ``config`` describes (module docstring) and report each change.

    The file store: each journal is repaired (a torn tail zeroed, a ``.broken`` copy kept, an
    interrupted compaction finished; ``force`` also cuts at a checksum failure), or with
    ``salvage_journals`` rewritten keeping every valid record, then the large messages
    whose bodies are damaged or gone removed (:mod:`store.data.body_salvage`; the bodies move
    to ``attic/``) and the damaged page records replaced (:mod:`store.data.page_salvage`).
    The database store: with ``salvage_journals`` those large messages and page records first
    (their rows deleted); then what a load ignores is deleted in one transaction (``force``
    also deletes undecodable rows and rows of unknown record types). When a page-store repair
    is asked for — ``adopt_pages`` (target, address), ``remove_pages`` (target),
    ``accept_lost_pages`` (address), on either back-end — those run, in that order, and nothing
    else (whatever the store type: the page stores are the configuration's). ``step`` and
    ``on_part`` are the optional hooks of the module docstring.

    Returns the :class:`StoreRepairResult`. Raises ConfigError for a store without
    persistence (unless a page-store repair is asked for), for a salvage or a journal left
    out of a database store, or a path that holds no journal; ChecksumError /
    CorruptionError for damage it refuses (nothing of that journal changed; earlier parts'
    changes were reported through ``on_part``); StoreLockedError naming the holder;
    StoreIOError / StoreUnavailableError.
    """
    run: _Parts[RepairPart] = _Parts(step, on_part)
    if adopt_pages is not None or remove_pages is not None or accept_lost_pages is not None:
        # Page stores exist on either back-end (store.paging.repair chooses): no store type.
        if adopt_pages is not None:
            target, address = adopt_pages
            run.done(PageRepair("adopt", page_repair.adopt_page_store(config, target, address)))
        if remove_pages is not None:
            run.done(PageRepair("remove", page_repair.remove_page_store(config, remove_pages)))
        if accept_lost_pages is not None:
            done = page_repair.accept_lost_pages(config, accept_lost_pages)
            run.done(PageRepair("accept-lost", done))
        return StoreRepairResult(config.store_type, tuple(run.done_parts))
    store_type = _store_type(config, "repair", bindings=bindings, messages=messages)
    if store_type == "database":
        if salvage_journals:
            _salvage_bodies(config, run)
        with run.step("repairing the store's tables"):
            run.done(db_repair.repair_database(config, force=force))
    else:
        for name, opts in file_journals(config, bindings=bindings, messages=messages):
            run.done(_repair_journal(name, opts, run, force=force, salvage_it=salvage_journals))
        if salvage_journals and bindings and messages:
            _salvage_bodies(config, run)
    return StoreRepairResult(store_type, tuple(run.done_parts))


def _salvage_bodies(config: StoreConfig, run: _Parts[RepairPart]) -> None:
    """The large messages' salvage, then the page stores'."""
    with run.step("salvaging the large messages"):
        run.done(BodySalvage(body_salvage.salvage_bodies(config)))
    with run.step("salvaging the page stores"):
        run.done(PageSalvage(page_salvage.salvage_pages(config)))


# -- helpers -----------------------------------------------------------------------------------


class _Parts(Generic[_P]):
    """The parts done so far, and the caller's hooks. One call's; not shared."""

    def __init__(self, step: Step | None, on_part: Callable[[_P], None] | None) -> None:
        self._step = step
        self._on_part = on_part
        self.done_parts: list[_P] = []

    def step(self, description: str) -> AbstractContextManager[object]:
        """The caller's context manager for the part ``description`` names (or none)."""
        return self._step(description) if self._step is not None else contextlib.nullcontext()

    def done(self, part: _P) -> None:
        """Record ``part`` and hand it to the caller."""
        self.done_parts.append(part)
        if self._on_part is not None:
            self._on_part(part)


def _changed(part: RepairPart) -> bool:
    if isinstance(part, PageRepair):
        return True
    if isinstance(part, db_repair.DatabaseRepairReport):
        return part.changed
    return part.report.changed


def _repair_journal(
    name: str, opts: FileJournalOptions, run: _Parts[RepairPart], *, force: bool, salvage_it: bool
) -> JournalRepair | JournalSalvage:
    if salvage_it:
        with run.step(f"salvaging the {name} journal"):
            return JournalSalvage(
                name,
                salvage.salvage(
                    opts.directory, prefix=opts.prefix, kind=opts.kind, file_size=opts.file_size
                ),
            )
    with run.step(f"repairing the {name} journal"):
        return JournalRepair(
            name, repair.repair(opts.directory, prefix=opts.prefix, kind=opts.kind, force=force)
        )


def _verify_pages(config: StoreConfig, run: _Parts[VerifyPart]) -> PagesVerify:
    with run.step("checking the page stores"):
        return PagesVerify(
            page_repair.check_page_stores(config)
            + summary_check.check_summaries(config)
            + page_salvage.lost_paged_bodies(config)
        )


def _store_type(config: StoreConfig, what: str, *, bindings: bool, messages: bool) -> str:
    """``config``'s store type, ``"file"`` or ``"database"``; ConfigError for no persistence,
    or for a file-store-only choice on a database store."""
    if config.store_type == "database":
        if not (bindings and messages):
            raise ConfigError(
                f"{what} of a database store: leaving a journal out works on the file store only",
                key="database-store",
                allowed="the database store checked and repaired whole",
            )
        return "database"
    if config.store_type != "file":
        raise ConfigError(
            f"{what} works on a persistent store, and this configuration selects the "
            f"{config.store_type} store",
            key="persistence-enabled",
            allowed="a file-store or database-store configuration",
        )
    return "file"
