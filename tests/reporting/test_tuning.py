"""How a report runs by the size of its store (store.reporting.tuning): a small store's
report evaluates its plans without generated code and collects every dataset, a large one's
keeps Spark's generated code and writes its long datasets with Spark, and both give the same
datasets; the session's own settings are back after a report; a store is judged small from
its files or tables before Spark starts; an empty source is local data."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from store import open_store
from store.messaging import StorageManager
from store.reporting import schemas, tuning
from store.reporting.report import ReportSource, run_report, small_source
from tests.reporting.support import fill_paging, filled_store, paging_store_config
from tests.support.backends import StoreFactory, backend_by_name, unique_prefix

_CODEGEN = ("spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode")


def _rows(out: Path, name: str) -> list[tuple[Any, ...]]:
    table = pq.read_table(out / name)
    return sorted(tuple(r.values()) for r in table.to_pylist())


def test_a_small_and_a_large_store_s_report_give_the_same_datasets(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paged and large messages included: ``large_messages`` is collected for the small
    store and written by Spark for the large one, every dataset holds the same rows."""
    config = paging_store_config(tmp_path, "file-nio")
    sm = StorageManager(open_store(config))
    sm.load()
    fill_paging(sm)
    sm.close()
    source = ReportSource(config=config)
    seen: list[dict[str, Any]] = []
    from store.reporting import report

    write = report.write_dataset

    def watched(frame: Any, out: str, name: str, *, collect: bool = False) -> Any:
        seen.append({"name": name, "collect": collect, **{k: spark.conf.get(k, None) for k in
                     _CODEGEN}})  # fmt: skip
        return write(frame, out, name, collect=collect)

    monkeypatch.setattr(report, "write_dataset", watched)
    small = run_report(spark, source, str(tmp_path / "small"), now_ms=10**13)
    assert small.datasets["large_messages"] > 0 and small.datasets["page_stores"] > 0
    assert all(s["collect"] and s["spark.sql.codegen.factoryMode"] == "NO_CODEGEN" for s in seen)
    assert (tmp_path / "small" / "large_messages" / "part-00000.parquet").is_file()
    seen.clear()
    monkeypatch.setattr(tuning, "SMALL_BYTES", 0)  # the same store, judged large
    large = run_report(spark, source, str(tmp_path / "large"), now_ms=10**13)
    assert seen and not any(s["collect"] or s["spark.sql.codegen.factoryMode"] for s in seen)
    assert not (tmp_path / "large" / "large_messages" / "part-00000.parquet").exists()
    assert small.datasets == large.datasets and small.totals == large.totals
    for name in small.datasets:
        assert _rows(tmp_path / "small", name) == _rows(tmp_path / "large", name), name
    assert [spark.conf.get(k, None) for k in _CODEGEN] == [None, None]


def test_interpreted_puts_the_session_s_own_settings_back(spark: Any) -> None:
    spark.conf.set("spark.sql.codegen.wholeStage", "true")
    try:
        with pytest.raises(RuntimeError), tuning.interpreted(spark, True):
            assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"
            assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
            raise RuntimeError("a report that fails")
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
        assert spark.conf.get("spark.sql.codegen.factoryMode", None) is None
        with tuning.interpreted(spark, False):
            assert spark.conf.get("spark.sql.codegen.factoryMode", None) is None
    finally:
        spark.conf.unset("spark.sql.codegen.wholeStage")


def test_a_store_is_small_by_its_files_or_tables_before_spark_starts(tmp_path: Path) -> None:
    files = StoreFactory(backend_by_name("file-nio"), tmp_path / "file", unique_prefix())
    filled_store(files)
    assert small_source(ReportSource(config=files.config))
    extra = Path(files.config.paging_directory) / "big.bin"
    extra.parent.mkdir(parents=True, exist_ok=True)
    with open(extra, "wb") as f:
        os.truncate(f.fileno(), tuning.SMALL_BYTES + 1)  # sparse: its size is what counts
    assert not small_source(ReportSource(config=files.config))
    tables = StoreFactory(backend_by_name("sqlite"), tmp_path / "sqlite", unique_prefix())
    try:
        filled_store(tables)
        assert small_source(ReportSource(config=tables.config))
        assert tuning.small_tables([(1, tuning.SMALL_ROWS), None])
        assert not tuning.small_tables([(1, tuning.SMALL_ROWS), (5, 5)])
    finally:
        tables.teardown()


def test_an_empty_source_is_local_data_of_its_schema(spark: Any) -> None:
    for schema in (schemas.RECORDS, schemas.PAGED_MESSAGES, schemas.LARGE_BODIES):
        frame = schemas.empty(spark, schema)
        assert frame.isLocal() and frame.schema == schema and frame.count() == 0
