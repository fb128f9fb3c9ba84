"""What ``store data verify`` reports about a database store: the finding, table summary and
report dataclasses of :mod:`store.data.db_check.verify` (whose docstring lists every finding's
``kind`` and severity), shared by its scans (:mod:`store.data.db_check.verify_journal`,
:mod:`store.data.db_check.verify_files`) and by :mod:`store.data.db_check.repair`.

Thread-safety: the dataclasses are immutable once returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "ERROR",
    "INFO",
    "WARNING",
    "DatabaseVerifyReport",
    "DbFinding",
    "TableSummary",
    "ids_text",
]

ERROR: Final = "error"
WARNING: Final = "warning"
INFO: Final = "info"


@dataclass(frozen=True, slots=True)
class DbFinding:
    """One thing ``verify_database`` found; ``kind`` is a stable key (the findings table of
    :mod:`store.data.db_check.verify`).

    ``table`` and ``seq`` say where (``seq`` is the first row concerned: a journal row's
    ``seq``, a file table's row ``id``, None for a whole table); ``seqs`` every row concerned
    and ``ids`` the record or message ids, where they mean something. Immutable.
    """

    severity: str
    kind: str
    table: str
    seq: int | None
    message: str
    seqs: tuple[int, ...] = ()
    ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TableSummary:
    """One table as ``verify_database`` read it: its rows and those a load needs.

    Immutable.
    """

    table: str
    what: str  # "bindings", "messages", "large messages", "page store", "pages <address>"
    rows: int
    needed: int | None = None  # journal tables: rows a load needs
    records: int | None = None  # journal tables: records a load returns


@dataclass(frozen=True, slots=True)
class DatabaseVerifyReport:
    """Every finding of one database store; ``ok`` is False when any is an error.

    ``where`` names the database (password hidden). Immutable once returned.
    """

    where: str
    tables: list[TableSummary]
    findings: list[DbFinding]

    @property
    def errors(self) -> list[DbFinding]:
        """The findings that make a load refuse the store."""
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def warnings(self) -> list[DbFinding]:
        """What a load tolerates or the next open cleans up."""
        return [f for f in self.findings if f.severity == WARNING]

    @property
    def ok(self) -> bool:
        """True when nothing found stops the store from loading."""
        return not self.errors


def ids_text(values: list[int], limit: int = 10) -> str:
    """``values`` for a message: the first ``limit`` of them, then how many more."""
    shown = ", ".join(map(str, values[:limit]))
    return shown + (f", … ({len(values) - limit} more)" if len(values) > limit else "")
