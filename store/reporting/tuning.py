"""How a report runs its Spark plans, by the size of the store it reads.

A small store's report is dozens of Spark jobs over a few thousand rows, and on a fresh JVM
most of a job's time is making its code: Spark generates Java for every stage and every
projection (whole-stage code generation) and compiles it with Janino, which the JVM then
has to load and warm up. For rows counted in thousands, Spark's interpreted evaluation of
the same plans is cheaper than compiling them: :func:`interpreted` turns code generation off
for one report (``spark.sql.codegen.wholeStage=false``, ``spark.sql.codegen.factoryMode=
NO_CODEGEN``) and restores the session's settings after. On the 2-core machine of
bench/RESULTS.md it took the eight datasets of a 500-message store from 5.8 s to 3.8 s.

A store is small (:func:`small_files`, :func:`small_tables`) when its journal files and pages
hold at most :data:`SMALL_BYTES` (64 MiB: two or three journal files of the default size,
some 250,000 message records) or its tables at most :data:`SMALL_ROWS` rows, as measured
before any Spark job; a larger store keeps code generation, which pays for itself there.

Thread-safety: :func:`interpreted` changes the session's SQL settings; one report at a time
per session (as :func:`store.reporting.report.run_report`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SMALL_BYTES", "SMALL_ROWS", "interpreted", "small_files", "small_tables"]

#: The most bytes of journal and page files a small store holds.
SMALL_BYTES: Final = 64 * 1024 * 1024
#: The most rows of journal tables (by their ``seq`` bounds) a small store holds.
SMALL_ROWS: Final = 250_000

#: What :func:`interpreted` sets.
_INTERPRETED: Final = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def small_files(folders: Iterable[str]) -> bool:
    """Whether the files under ``folders`` (those that exist) hold at most
    :data:`SMALL_BYTES`. Raises nothing (a file that cannot be read counts for nothing:
    the report's own reading says what is wrong with it)."""
    total = 0
    for folder in folders:
        for here, _dirs, files in os.walk(folder):
            for name in files:
                try:
                    total += os.path.getsize(os.path.join(here, name))
                except OSError:
                    continue
                if total > SMALL_BYTES:
                    return False
    return True


def small_tables(bounds: Iterable[tuple[int, int] | None]) -> bool:
    """Whether tables of these ``seq`` bounds (None: empty) hold at most :data:`SMALL_ROWS`
    rows between them. Raises nothing."""
    return sum(high - low + 1 for low, high in (b for b in bounds if b is not None)) <= SMALL_ROWS


@contextmanager
def interpreted(spark: SparkSession, on: bool) -> Iterator[None]:
    """Within the block, ``spark`` evaluates plans without generated code when ``on`` (module
    docstring); the session's own settings are back after it, whatever happens."""
    if not on:
        yield
        return
    before = {key: spark.conf.get(key, None) for key in _INTERPRETED}
    for key, value in _INTERPRETED.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, was in before.items():
            if was is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, was)
