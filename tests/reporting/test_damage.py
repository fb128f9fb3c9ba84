"""A report of damaged data fails as ``store data verify`` does (issue 24): a file journal with
one flipped byte (``load()`` raises ChecksumError, verify exits 5) was reported as 1 message of
200 with exit 0, and an undecodable message row was counted under the address ``None``. Now
both are exit 5 / CorruptionError with verify's text before a report is written, and
``--salvage`` reports what is readable, saying so at the top of the page and in the summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa

from store import StoreConfig, open_store
from store.data.db_check import verify as db_verify
from store.db.engine import create_store_engine, dispose_store_engine
from store.db.schema import TableNames
from store.errors import ChecksumError, CorruptionError
from store.file import survey
from store.messaging import Message, StorageManager
from store.reporting.report import SALVAGED, ReportSource, run_report
from tests.support.backends import StoreFactory, backend_by_name, file_config_mapping, unique_prefix
from tests.support.cli import run_store, run_store_here

MESSAGES = 200


def _send(sm: StorageManager, n: int) -> None:
    sm.create_address("a", routing_types=("ANYCAST",))
    sm.create_queue("q", address="a", routing_type="ANYCAST", filter=None)
    for i in range(n):
        sm.send(Message(address="a", body=b"x" * 600, timestamp=1_000 + i), queues=["q"])


def _flipped_journal(tmp_path: Path) -> tuple[StoreConfig, ChecksumError]:
    """200 messages over three 64 KiB files, one byte flipped in a record of the first:
    returns the configuration and what ``load()`` raises."""
    config = StoreConfig.from_mapping(file_config_mapping(tmp_path, "NIO"))
    sm = StorageManager(open_store(config))
    sm.load()
    _send(sm, MESSAGES)
    sm.close()
    scans = survey.scan_journal(config.journal_directory, keep_records=True).scans
    first = next(s for s in scans if s.count)
    offset = first.records[3].offset + 60
    with open(first.file.path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))
    with open_store(config) as s, pytest.raises(ChecksumError) as refused:
        s.messages.load()
    return config, refused.value


def test_report_of_a_journal_with_a_flipped_byte_is_verify_s_error_exit_5(
    tmp_path: Path,
) -> None:
    """Refused before Spark starts: no report folder, one line, the load's error."""
    config, refused = _flipped_journal(tmp_path)
    journal = config.journal_directory
    verify = run_store("data", "verify", "--journal", journal, "--bindings",
                       config.bindings_directory, timeout=120)  # fmt: skip
    assert verify.returncode == 5
    assert "checksum" in verify.stdout and f"│ {refused.offset} " in verify.stdout
    out = tmp_path / "report"
    done = run_store("report", "--journal", journal, "--out", str(out), timeout=240)
    assert done.returncode == 5, done.stdout + done.stderr[-2000:]
    error, *hints = done.stderr.strip().splitlines()
    assert error == f"store: error: {refused}"  # the one line a load and verify give
    assert all(line.startswith("store: hint: ") for line in hints), done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()  # nothing written, not even the folder


@pytest.mark.slow  # a whole report
def test_salvage_reports_what_is_readable_and_says_so(spark: Any, tmp_path: Path) -> None:
    """The command's own output and files, through ``store.cli.main.main`` in this process on
    the worker's SparkSession (the refusal above and test_cli.py run it as a subprocess)."""
    config, refused = _flipped_journal(tmp_path)
    out = tmp_path / "report"
    done = run_store_here(
        "report", "--journal", config.journal_directory, "--out", str(out), "--salvage",
        "--master", "local[2]",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    first = done.stdout.splitlines()[0]
    assert first.startswith(SALVAGED) and "(1 damaged place left out):" in first
    assert f"left out: {refused}" in done.stdout
    depth = pq.read_table(out / "queue_depths").to_pylist()
    assert depth[0]["queue"] == "q" and 0 < depth[0]["messages"] < MESSAGES
    page = (out / "index.html").read_text()
    header = page[: page.index("<h2")]  # before the first section: the top of the page
    assert SALVAGED in header and str(refused) in header


@pytest.fixture
def garbage_row(tmp_path: Path) -> Any:
    """A PostgreSQL store of 5 messages whose first message row's record is garbage: yields
    (factory, table, seq, the row's reason as verify words it)."""
    factory = StoreFactory(backend_by_name("postgresql"), tmp_path, unique_prefix())
    try:
        sm = StorageManager(factory.open())
        sm.load()
        _send(sm, 5)
        sm.close()
        factory.close()
        db = factory.config.database_store
        assert db is not None
        table = TableNames.from_config(db).messages
        engine, _target = create_store_engine(db)
        try:
            t = sa.table(table, sa.column("seq"), sa.column("userrecordtype"),
                         sa.column("record"))  # fmt: skip
            with engine.begin() as conn:
                seq = conn.execute(
                    sa.select(sa.func.min(t.c.seq)).where(t.c.userrecordtype == 45)
                ).scalar_one()
                conn.execute(t.update().where(t.c.seq == seq).values(record=b"\x01garbage!"))
        finally:
            dispose_store_engine(engine)
        found = db_verify.verify_database(factory.config, force=True)
        [finding] = [f for f in found.errors if f.kind == "undecodable"]
        assert (finding.table, finding.seq) == (table, seq)
        yield factory, table, seq, finding.message
    finally:
        factory.teardown()


def test_an_undecodable_message_row_fails_the_report_naming_table_and_row(
    spark: Any, garbage_row: Any, tmp_path: Path
) -> None:
    factory, table, seq, reason = garbage_row
    out = tmp_path / "report"
    with pytest.raises(CorruptionError) as refused:
        run_report(spark, ReportSource(config=factory.config), str(out))
    assert (refused.value.path, refused.value.offset, refused.value.reason) == (table, seq, reason)
    assert not out.exists()


def test_salvage_leaves_the_undecodable_row_out_instead_of_under_address_none(
    spark: Any, garbage_row: Any, tmp_path: Path
) -> None:
    factory, table, seq, reason = garbage_row
    out = tmp_path / "report"
    summary = run_report(spark, ReportSource(config=factory.config), str(out), salvage=True)
    assert summary.salvaged and summary.warnings[0].startswith(SALVAGED)
    assert summary.warnings[1] == f"{table} at offset {seq}: {reason}"
    addresses = pq.read_table(out / "address_bytes").to_pylist()
    assert [(r["address"], r["messages"]) for r in addresses] == [("a", 4)]
    assert summary.messages == 4
    assert SALVAGED in (out / "index.html").read_text()
