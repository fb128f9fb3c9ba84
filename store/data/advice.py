"""What ``store data verify`` advises after it found damage: for each damaged part, the repair
that drops the least and what it drops (:func:`repair_advice`).

- A file journal: ``store data repair --salvage`` whenever a salvage can read the journal
  (it keeps every record a reader can still prove valid; :mod:`store.file.salvage`, run dry by
  :func:`store.data.checking.verify_store`), with the records it would keep and drop (count,
  lsns, the ids the damaged headers still show) and the transactions it would leave out;
  ``--force`` (a cut at the first damage, every later record set aside) is named only as what
  not to start with. Where no salvage can read it (two files with one id, a file of the other
  journal), what is wrong is a mix-up of files, and the advice says to sort them out.
- Large-message bodies damaged or gone (either back-end): ``store data repair --salvage``,
  which removes those messages (and only them) with their bodies
  (:mod:`store.data.body_salvage`), naming their ids.
- The database store: ``store data repair --force`` when its only other errors are rows it
  can delete one by one (undecodable, unknown record type), naming how many; rows that are
  gone cannot be repaired, only restored.
- Page stores: the repairs of :mod:`store.paging.repair` by finding; a damaged page record:
  ``store data repair --salvage`` (:mod:`store.data.page_salvage`), which drops only its
  message, rather than the removal of the whole address.

Thread-safety: pure functions of immutable results.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from store.data.db_check.report import ids_text

if TYPE_CHECKING:
    from store.data.checking import StoreVerifyResult
    from store.file.salvage import SalvageReport

__all__ = ["repair_advice"]

#: Database findings ``store data repair --force`` deletes row by row.
_DB_FORCED = frozenset(("undecodable", "bad-record-type"))
#: Findings of a body ``store data repair --salvage`` removes with its message.
_BODIES = frozenset(("damaged-body", "large-body-missing", "missing-chunks"))


def repair_advice(result: StoreVerifyResult) -> list[str]:
    """One line per damaged part of ``result``: the least destructive repair and what it
    drops (module docstring); empty when nothing is damaged. Raises nothing."""
    from store.data.checking import DatabaseVerify, JournalVerify, PagesVerify

    lines: list[str] = []
    for part in result.parts:
        if not part.error_count:
            continue
        if isinstance(part, JournalVerify):
            lines.append(_journal(part.name, part.salvage))
        elif isinstance(part, DatabaseVerify):
            errors = part.report.errors
            bodies = [f for f in errors if f.kind in _BODIES]
            if bodies:
                lines.append(_bodies(sorted({i for f in bodies for i in f.ids})))
            rows = [(f.kind, f.seqs or _one(f.seq)) for f in errors if f.kind not in _BODIES]
            if rows:
                lines.append(_database(rows))
        elif isinstance(part, PagesVerify):
            lines.append(_pages([f.message for f in part.findings if f.severity == "error"]))
        else:
            names = [os.path.basename(f.path) for f in part.findings if f.kind in _BODIES]
            ids = sorted(int(n[:-4]) for n in names if n.endswith(".msg") and n[:-4].isdigit())
            lines.append(_bodies(ids))
    return lines


def _bodies(ids: list[int]) -> str:
    which = f" ({ids_text(ids)})" if ids else ""
    return (
        f"large messages: `store data repair --salvage` removes the {len(ids) or 'damaged'} "
        f"large message(s){which} whose bodies are damaged or gone, and only them, with "
        "their bodies (a file store moves them to attic/); every other message is kept. A "
        "body cannot be rebuilt: restore it from a backup instead to keep its message"
    )


def _journal(name: str, report: SalvageReport | None) -> str:
    if report is None:
        return (
            f"{name}: no repair can read this journal as it is (the findings say why: "
            "files of another journal or two files with one id); put the files right first"
        )
    dropped = sum(_lsn_count(d.lsns) for d in report.dropped if d.reason != "torn-tail")
    ids = sorted({r.id for d in report.dropped if d.reason != "torn-tail" for r in d.records})
    lsns = ", ".join(
        f"{lo}" if lo == hi else f"{lo}-{hi}"
        for d in report.dropped
        if d.reason != "torn-tail" and d.lsns is not None
        for lo, hi in [d.lsns]
    )
    what = f"drops {dropped} damaged record(s)" if dropped else "drops the damaged bytes"
    if lsns:
        what += f" (lsn {lsns}"
        what += f"; ids {ids_text(ids)})" if ids else ")"
    failed = (
        f", and leaves out {len(report.failed)} transaction(s) that lost a record "
        f"({ids_text(sorted(report.failed))})"
        if report.failed
        else ""
    )
    return (
        f"{name}: `store data repair --salvage` is the repair that drops least: it "
        f"keeps {report.kept} valid record(s) and {what}{failed}; the original files are "
        "copied into repair-<time>/ first. (`--force` would instead cut the journal at the "
        "first damage and set everything after it aside.)"
    )


def _one(seq: int | None) -> tuple[int, ...]:
    return () if seq is None else (seq,)


def _lsn_count(lsns: tuple[int, int] | None) -> int:
    return 0 if lsns is None else lsns[1] - lsns[0] + 1


def _database(errors: list[tuple[str, tuple[int, ...]]]) -> str:
    if all(kind in _DB_FORCED for kind, _seqs in errors):
        seqs = sorted({s for _kind, found in errors for s in found})
        return (
            f"database: `store data repair --force` deletes the {len(seqs)} damaged row(s) "
            f"found (seq {ids_text(seqs)}) and nothing else; each one's record is "
            "lost (`store data print` shows them first)"
        )
    return (
        "database: rows the load needs are missing or inconsistent (the errors found); no "
        "repair brings them back: restore the tables from a backup"
    )


def _pages(messages: list[str]) -> str:
    if any("is not the page its summary describes" in m for m in messages):
        return (
            "pages: a page is not what the page summary of the last clean close describes "
            "(a page file or its rows replaced or changed since): restore the pages from one "
            "backup of the same moment as the journals; if these pages are the right ones, "
            "an open deletes the summary, and the open after it reads the pages as they are"
        )
    lost = sum(m.endswith(" is gone") and "large message" in m for m in messages)
    messages = [m for m in messages if not (m.endswith(" is gone") and "large message" in m)]
    if lost and not messages:
        return (
            f"pages: `store data repair --salvage` replaces the page record of each of the "
            f"{lost} paged large message(s) whose body is gone (each finding names one) with "
            "a record no queue receives: those messages are dropped, every other one is "
            "delivered in order; or restore the bodies from a backup of the same moment"
        )
    records = sum("damaged page record" in m for m in messages)
    others = [m for m in messages if "damaged page record" not in m and "undecodable" not in m]
    if records and others:
        return (
            "pages: first settle the findings that are not damaged records with `store "
            "data repair --adopt-pages FOLDER=ADDRESS`, `--accept-lost-pages ADDRESS` or "
            "`--remove-pages FOLDER`, as each names; then `store data repair --salvage` "
            f"replaces the {records} damaged page record(s) with records no queue receives, "
            "dropping only the message each held"
        )
    if records:
        return (
            f"pages: `store data repair --salvage` replaces the {records} damaged page "
            "record(s) found with records no queue receives, and drops only the "
            "message each held (it reports the ids their headers still read; a file store "
            "keeps the damaged bytes in attic/), or mends a record whose start byte or length "
            "alone is damaged and keeps its message; every other message of the address is "
            "delivered in order. (`--remove-pages FOLDER` would drop every message of that "
            "address's pages.)"
        )
    if any("undecodable" in m for m in messages):
        return (
            "pages: an undecodable page record has no repair that keeps it: restore the page "
            "file (or rows) from a backup; `store data repair --remove-pages FOLDER` would "
            "drop every message of that address's pages"
        )
    return (
        "pages: `store data repair --adopt-pages FOLDER=ADDRESS`, `--accept-lost-pages "
        "ADDRESS` or `--remove-pages FOLDER` settles each finding, as it names"
    )
