"""How a report writes each dataset, and reads back what its page and summary show.

A dataset whose rows are one per queue, address, record type, journal or page store
(:data:`COLLECTED`) is small whatever the store's depth: it is computed once, brought into
the driver as an Arrow table (``DataFrame.toArrow``) and written from there with pyarrow, and
its count, the page's rows and the summary's sums are read from that table. Each Spark action
on a small frame costs a job chain of its own (a fraction of a second in local mode: the
scheduler, adaptive execution's stages, a write's commit protocol), and a report of a small
store spent most of its time there: a write, a count, the page's rows and the sums each ran
the dataset's plan again, 74 jobs in all for a store of a few queues. The other datasets (a
row per large message, per audited message) can be as long as the store is deep: Spark writes
them, and the page's rows are the first :data:`PAGE_ROWS` in its order.

Either way a dataset is a folder ``out/<name>/`` of Parquet files with the columns of its
schema in :mod:`store.reporting.schemas` (a collected one holds one file, ``part-00000.parquet``).

Thread-safety: functions of one report's thread.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["COLLECTED", "PAGE_ORDER", "PAGE_ROWS", "Written", "write_dataset"]

#: The datasets with a row per queue, address, record type, journal or page store.
COLLECTED: Final = frozenset(
    {
        "queue_depths",
        "record_types",
        "message_ages",
        "message_age_histogram",
        "address_bytes",
        "dead_records",
        "page_stores",
    }
)

#: dataset -> the column its rows on the page (and its chart) are ordered by, largest first.
PAGE_ORDER: Final = {
    "queue_depths": "messages",
    "address_bytes": "bytes",
    "record_types": "records",
    "dead_records": "dead_bytes",
    "page_stores": "bytes",
    "large_messages": "stored_bytes",
}
#: The most rows of one dataset the page shows (a chart's bars are the largest of them all).
PAGE_ROWS: Final = 500


@dataclass(frozen=True)
class Written:
    """One dataset as the report wrote it: ``count`` rows; ``table`` is its Arrow table when
    collected, ``frame`` its (computed and stored) DataFrame otherwise. Immutable."""

    name: str
    count: int
    table: Any = None
    frame: DataFrame | None = None

    def first_rows(self) -> list[dict[str, Any]]:
        """The rows the page shows and charts: the largest first by :data:`PAGE_ORDER` (the
        age histogram's by queue, the fullest first, and bucket), at most :data:`PAGE_ROWS`
        (the histogram's: every bucket of :data:`PAGE_ROWS` queues)."""
        column = PAGE_ORDER.get(self.name)
        if self.table is not None:
            rows: list[dict[str, Any]] = self.table.to_pylist()
            if column is not None:
                rows.sort(key=lambda r: (r[column] is not None, r[column]), reverse=True)
            elif self.name == "message_age_histogram":  # the fullest queues first, whole
                held: dict[str, int] = {}
                for r in rows:
                    held[r["queue"]] = held.get(r["queue"], 0) + r["messages"]
                rows.sort(key=lambda r: (-held[r["queue"]], r["queue"], r["bucket_index"]))
                buckets = len({r["bucket_index"] for r in rows}) or 1
                return rows[: PAGE_ROWS * buckets]  # PAGE_ROWS queues
            return rows[:PAGE_ROWS]
        from pyspark.sql import functions as F

        assert self.frame is not None
        frame = self.frame
        if column is not None:
            frame = frame.orderBy(F.desc(column))
        elif self.name == "message_age_histogram":
            frame = frame.orderBy("queue", "bucket_index")
        return [row.asDict() for row in frame.limit(PAGE_ROWS).collect()]

    def sums(self, *columns: str) -> list[int]:
        """The sum of each of ``columns`` over every row (0 for no rows or only nulls)."""
        if self.table is not None:
            import pyarrow.compute as pc

            return [int(pc.sum(self.table.column(c)).as_py() or 0) for c in columns]
        from pyspark.sql import functions as F

        assert self.frame is not None
        row = self.frame.agg(*(F.sum(c).alias(c) for c in columns)).first()
        return [int(row[c] or 0) if row is not None else 0 for c in columns]

    def minimum(self, column: str) -> int | None:
        """The smallest non-null value of ``column``, None when there is none."""
        if self.table is not None:
            import pyarrow.compute as pc

            value = pc.min(self.table.column(column)).as_py()
            return None if value is None else int(value)
        from pyspark.sql import functions as F

        assert self.frame is not None
        first = self.frame.agg(F.min(column)).first()
        return None if first is None or first[0] is None else int(first[0])


def write_dataset(frame: DataFrame, out: str, name: str, *, collect: bool = False) -> Written:
    """Write ``frame`` as the dataset ``out/<name>/`` (replacing one there; module
    docstring), collected when ``name`` is in :data:`COLLECTED` or ``collect`` asks for it
    (a small store: :mod:`store.reporting.tuning`, whose large messages are few too).
    Returns what was written. Raises OSError when the folder cannot be written, and what
    Spark raises."""
    path = os.path.join(out, name)
    if name in COLLECTED or collect:
        import pyarrow.parquet as pq

        table = frame.toArrow()
        if os.path.isdir(path):
            shutil.rmtree(path)
        os.makedirs(path)
        pq.write_table(table, os.path.join(path, "part-00000.parquet"))
        return Written(name, table.num_rows, table=table)
    # computed once (its count, the page's rows and the sums read the stored rows, not the
    # dataset's plan: store.reporting.report._pinned)
    frame = frame.localCheckpoint(eager=True)
    frame.coalesce(1).write.mode("overwrite").parquet(path)
    return Written(name, int(frame.count()), frame=frame)
