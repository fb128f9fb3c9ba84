"""Damage a report refuses to absorb (issue 24): what ``store data verify`` calls an error is
an error of the report too, with the same text, before anything is written.

A report used to read around damage: a journal file whose records end at a flipped byte gave
the records before it (1 message of 200 reported, exit 0), and a message row that does not
decode was counted under the address ``None``. A report is read by people who act on it, so
numbers of a damaged store are refused, not shown:

- **Before Spark** (:func:`journal_damage`, :func:`page_damage`): the file journals are judged
  as the load and ``verify`` judge them (:func:`store.file.survey.scan_journal`, whose problems
  are :mod:`store.file.integrity`'s: checksum failures, truncated, missing or damaged files),
  and the page stores as ``verify`` checks them (:func:`store.paging.repair.check_page_stores`:
  lost or shortened pages, damaged records). This reads every journal file once more in
  Python (the load's own scan, at the speed of the compiled loop): the price of giving
  exactly the load's verdict rather than a second opinion of it.
- **In Spark** (:func:`row_damage`): what only decoding shows: a live record (one a load
  returns) whose body does not decode with the storage manager's codecs, a table row whose
  record type is not 10..19, a paged record or page that does not decode. Dead records that
  do not decode are left alone, as the load leaves them (it never reads them).

Each finding is a :class:`~store.errors.CorruptionError` naming the file (and offset) or the
table (and ``seq``), worded as ``verify`` words it. With ``--salvage`` the report goes on
with what is readable and says what it left out (:func:`describe`).

Thread-safety: functions called from the driver's one thread.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

from store.config import StoreConfig
from store.errors import CorruptionError
from store.file.segments import SegmentNaming
from store.file.survey import scan_journal
from store.reporting.decode import exact_error

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["MAX_FINDINGS", "describe", "journal_damage", "page_damage", "row_damage"]

#: Findings kept from one check: the first is what a report fails with; a salvage page lists
#: up to this many and counts the rest.
MAX_FINDINGS: Final = 20

#: The journal-kind byte of each journal's file headers (``store.file.options``).
_KINDS: Final = {"messages": 0, "bindings": 1}
_PREFIXES: Final = {"messages": "data", "bindings": "bindings"}
_LOAD_REFUSES: Final = " (the storage manager's load refuses it)"


def journal_damage(directory: str, journal: str) -> list[CorruptionError]:
    """Why a load refuses the file journal ``journal`` ("messages" or "bindings") in
    ``directory``: the errors ``store data verify`` lists, in the load's order (the first is
    what ``load()`` raises). Returns [] for a sound journal. Raises ConfigError when the
    directory holds no journal, StoreIOError when a file cannot be read."""
    scan = scan_journal(directory, prefix=_PREFIXES[journal], kind=_KINDS[journal])
    return [p.error for p in scan.problems]


def page_damage(config: StoreConfig) -> list[CorruptionError]:
    """The errors ``store data verify`` finds in the page stores of ``config`` (file or
    database): lost or shortened pages, damaged records, stores open refuses. Warnings
    (leftovers the next open removes) are not damage. Returns them in verify's order. Raises
    StoreIOError / StoreUnavailableError."""
    from store.paging.repair import ERROR, check_page_stores

    if config.database_store is None and not os.path.isdir(config.paging_directory):
        return []
    return [
        CorruptionError(f.where, f.offset, f.message)
        for f in check_page_stores(config)
        if f.severity == ERROR
    ]


def row_damage(
    records: DataFrame,
    live: DataFrame,
    paged: DataFrame,
    *,
    tables: dict[str, str] | None = None,
    folders: dict[str, str] | None = None,
) -> list[CorruptionError]:
    """What decoding found in ``records`` (RECORDS), the replayed ``live`` entries and the
    ``paged`` records (PAGED_MESSAGES): rows of an unknown record type, live records that do
    not decode, paged records that do not decode; at most :data:`MAX_FINDINGS` of each.

    ``tables`` (journal -> table name) for a database store: a finding names the table and
    the row's ``seq``; ``folders`` (journal -> folder) for file journals: it names the file and
    the record's offset. Returns the findings (one Spark job per kind). Raises what Spark
    raises."""
    from pyspark.sql import functions as F

    found: list[CorruptionError] = []
    folders = folders or {}

    def place(journal: str, seq: int, pos: int) -> tuple[str, int]:
        if tables is not None:
            return tables[journal], seq
        naming = SegmentNaming(folders.get(journal, journal), _PREFIXES[journal])
        return naming.path(seq), pos

    bad_kind = records.filter(~F.col("kind").between(10, 19))
    for row in bad_kind.select("journal", "seq", "pos", "kind").limit(MAX_FINDINGS).collect():
        path, offset = place(row["journal"], row["seq"], row["pos"])
        found.append(
            CorruptionError(path, offset, f"row has record type {row['kind']}, not one of 10..19")
        )
    undecodable = live.filter(F.col("error").isNotNull()).orderBy("journal", "seq", "pos")
    shown = undecodable.select("journal", "seq", "pos", "kind", "user_record_type", "id", "error")
    for row in shown.limit(MAX_FINDINGS).collect():
        path, offset = place(row["journal"], row["seq"], row["pos"])
        reason = exact_error(
            row["journal"], row["kind"], row["user_record_type"], row["id"], row["error"]
        )
        found.append(CorruptionError(path, offset, reason + _LOAD_REFUSES))
    bad_pages = paged.filter(F.col("error").isNotNull()).orderBy("address", "page", "page_index")
    for row in bad_pages.select("address", "page", "error").limit(MAX_FINDINGS).collect():
        where = f"paged messages of address {row['address']!r}, page"
        found.append(CorruptionError(where, row["page"], row["error"]))
    return found


def describe(findings: list[CorruptionError]) -> list[str]:
    """One line per finding for a salvaged report's page and summary (the first
    :data:`MAX_FINDINGS`, then how many more). Returns the lines. Raises nothing."""
    lines = [str(f) for f in findings[:MAX_FINDINGS]]
    if len(findings) > MAX_FINDINGS:
        lines.append(f"... and {len(findings) - MAX_FINDINGS} more")
    return lines
