"""`store.data.verify_store`, `repair_store` and `recover_store` as library calls (no
subprocess): each chooses the back-end from the configuration and returns its parts; on the
file store (real journals written by the real store) and on SQLite and PostgreSQL stores (each
test its own table prefix, dropped at teardown) damaged by rows written directly with SQL."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from store import StoreConfig, open_store
from store.data import StoreRepairResult, recover_store, repair_store, verify_store
from store.data.checking import (
    DatabaseVerify,
    JournalRepair,
    JournalSalvage,
    JournalVerify,
    LargeMessagesVerify,
    PagesVerify,
    RepairPart,
    VerifyPart,
)
from store.data.db_check.repair import DatabaseRepairReport
from store.data.recover_messages import MessageRecoverReport
from store.db.engine import create_store_engine, dispose_store_engine
from store.db.migrate import drop_schema
from store.db.schema import StoreSchema, TableNames
from store.errors import ChecksumError, ConfigError, CorruptionError, StoreLockedError
from store.file import history, survey
from store.messaging import records as r
from store.messaging.manager import StorageManager
from store.messaging.values import Message
from tests.support.backends import unique_prefix
from tests.support.db_backends import new_store_mapping

SIZE = 4096


# -- the file store ----------------------------------------------------------------------------


def _file_config(tmp_path: Path) -> StoreConfig:
    return StoreConfig.from_mapping(
        {
            "journal-directory": str(tmp_path / "journal"),
            "bindings-directory": str(tmp_path / "bindings"),
            "paging-directory": str(tmp_path / "paging"),
            "large-messages-directory": str(tmp_path / "large"),
            "journal-file-size": SIZE,
            "journal-type": "NIO",
            "journal-compact-min-files": 0,
            "journal-retention": {"directory": str(tmp_path / "history")},
        }
    )


@pytest.fixture
def file_store(tmp_path: Path) -> StoreConfig:
    """A file store with bindings, messages across several files, deletes, a prepared tx."""
    config = _file_config(tmp_path)
    with open_store(config) as s:
        s.bindings.load()
        s.messages.load()
        s.bindings.append_add(1, 21, b"queue:orders")
        for i in range(80):
            s.messages.append_add(i, 45, f"message-{i}".encode() * 4, sync=True)
        for i in range(0, 80, 4):
            s.messages.append_delete(i)
        s.messages.append_add_tx(7, 500, 45, b"in a prepared tx")
        s.messages.append_prepare(7, b"xid-7")
    return config


def _data_scans(directory: str) -> list[survey.FileScan]:
    scan = survey.scan_journal(directory, keep_records=True)
    return [s for s in scan.scans if s.count]


def _flip(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_verify_store_of_a_clean_file_store_has_every_part_in_order(
    file_store: StoreConfig,
) -> None:
    steps: list[str] = []
    seen: list[VerifyPart] = []

    @contextlib.contextmanager
    def step(description: str) -> Iterator[None]:
        steps.append(description)
        yield

    result = verify_store(file_store, step=step, on_part=seen.append)
    assert result.store_type == "file" and result.ok
    assert (result.error_count, result.warning_count) == (0, 0)
    assert [type(p) for p in result.parts] == [
        JournalVerify,
        JournalVerify,
        LargeMessagesVerify,
        PagesVerify,
    ]
    assert list(result.parts) == seen  # each part handed over as it was done
    bindings, messages = result.parts[0], result.parts[1]
    assert isinstance(bindings, JournalVerify) and isinstance(messages, JournalVerify)
    assert (bindings.name, messages.name) == ("bindings", "messages")
    assert messages.report.directory == file_store.journal_directory
    assert steps == [
        "verifying the bindings journal",
        "verifying the messages journal",
        "verifying the large messages",
        "checking the page stores",
    ]


def test_a_torn_tail_is_a_warning_repair_store_zeroes_and_reports(tmp_path: Path) -> None:
    config = _file_config(tmp_path)
    with open_store(config) as s:
        s.messages.load()
        s.bindings.load()
        for i in range(10):
            s.messages.append_add(i, 45, b"synced", sync=True)
        for i in range(10, 14):
            s.messages.append_add(i, 45, b"batch")  # one write, at close
    last = _data_scans(config.journal_directory)[-1]
    batch = [rec for rec in last.records if rec.id >= 10]
    _flip(last.file.path, batch[0].offset + 60)

    result = verify_store(config)
    assert result.ok and (result.error_count, result.warning_count) == (0, 1)
    messages = result.parts[1]
    assert isinstance(messages, JournalVerify)
    assert [f.kind for f in messages.report.warnings] == ["torn-tail"]

    repaired = repair_store(config)
    assert repaired.store_type == "file" and repaired.changed and repaired.dropped == 0
    assert [type(p) for p in repaired.parts] == [JournalRepair, JournalRepair]
    fixed = repaired.parts[1]
    assert isinstance(fixed, JournalRepair) and fixed.name == "messages"
    assert [c.offset for c in fixed.report.cuts] == [batch[0].offset]
    assert verify_store(config).warning_count == 0
    assert not repair_store(config).changed


def test_a_checksum_failure_is_an_error_repair_refuses_after_reporting_the_bindings(
    file_store: StoreConfig,
) -> None:
    first = _data_scans(file_store.journal_directory)[0]  # not the last file: corruption
    _flip(first.file.path, first.records[1].offset + 60)
    result = verify_store(file_store)
    assert not result.ok and result.error_count >= 1

    seen: list[RepairPart] = []
    with pytest.raises(ChecksumError):
        repair_store(file_store, on_part=seen.append)
    # The bindings were repaired (nothing to do) and reported before the refusal.
    assert [(type(p), getattr(p, "name", None)) for p in seen] == [(JournalRepair, "bindings")]

    salvaged = repair_store(file_store, salvage_journals=True, bindings=False)
    assert [type(p) for p in salvaged.parts] == [JournalSalvage]
    assert salvaged.dropped >= 1 and salvaged.changed
    assert verify_store(file_store, bindings=False).ok


def test_a_journal_left_out_is_not_touched(file_store: StoreConfig) -> None:
    result = verify_store(file_store, messages=False)
    kinds = [(type(p), getattr(p, "name", None)) for p in result.parts]
    assert kinds[0] == (JournalVerify, "bindings") and (JournalVerify, "messages") not in kinds


def test_a_store_without_persistence_or_a_journal_is_a_configuration_error(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match="persistent store"):
        verify_store(StoreConfig.from_mapping({"persistence-enabled": False}))
    empty = _file_config(tmp_path)
    with pytest.raises(ConfigError):
        verify_store(empty)  # no journal in the directories: never created
    assert not Path(empty.journal_directory).exists()


def test_a_store_a_live_process_holds_is_refused_unless_forced(file_store: StoreConfig) -> None:
    with open_store(file_store):
        with pytest.raises(StoreLockedError):
            verify_store(file_store)
        with pytest.raises(StoreLockedError):
            repair_store(file_store)
        assert verify_store(file_store, force=True).ok


def test_recover_store_chooses_messages_or_records(file_store: StoreConfig, tmp_path: Path) -> None:
    every = recover_store(file_store, str(tmp_path / "messages"))
    assert isinstance(every.report, MessageRecoverReport)
    assert every.journal == file_store.journal_directory
    assert file_store.journal_retention is not None
    assert every.history == file_store.journal_retention.directory

    records = recover_store(file_store, str(tmp_path / "records"), undelete=True)
    assert isinstance(records.report, history.RecoverReport)
    assert (records.report.records, records.report.deleted) == (60, 20)
    assert records.report.prepared == 1


def test_recover_store_refuses_a_database_store_and_a_missing_history(tmp_path: Path) -> None:
    database = StoreConfig.from_mapping(
        {"database-store": {"jdbc-connection-url": f"jdbc:sqlite:{tmp_path / 'x.db'}"}}
    )
    with pytest.raises(ConfigError, match="retention history"):
        recover_store(database, str(tmp_path / "t"))
    plain = StoreConfig.from_mapping({"journal-directory": str(tmp_path / "j")})
    with pytest.raises(ConfigError, match="history folder"):
        recover_store(plain, str(tmp_path / "t"))


# -- the database store ------------------------------------------------------------------------


class DbStore:
    """One test's database store (its own table prefix), filled by the storage manager."""

    def __init__(self, which: str, tmp_path: Path) -> None:
        self.config = StoreConfig.from_mapping(new_store_mapping(tmp_path, unique_prefix(), which))
        db = self.config.database_store
        assert db is not None
        self.schema = StoreSchema(TableNames.from_config(db))

    def fill(self) -> None:
        """Send 10 messages, ack 4."""
        with StorageManager(open_store(self.config)) as sm:
            sm.load()
            sm.create_address("orders")
            sm.create_queue("orders", address="orders")
            for i in range(10):
                sm.send(Message("orders", f"body-{i}".encode()))
            for d in sm.receive("orders", 4):
                sm.ack("orders", d.message.message_id or 0)

    def insert(self, table: sa.Table, **row: object) -> int:
        """Insert one journal row with the next seq; returns the seq."""
        db = self.config.database_store
        assert db is not None
        engine, _target = create_store_engine(db)
        try:
            with engine.begin() as conn:
                top = conn.execute(sa.select(sa.func.max(table.c.seq))).scalar() or 0
                record = row.get("record")
                row.setdefault("variablesize", len(record) if isinstance(record, bytes) else 0)
                conn.execute(table.insert().values(seq=top + 1, **row))
                return int(top + 1)
        finally:
            dispose_store_engine(engine)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DbStore]:
    s = DbStore(request.param, tmp_path)
    try:
        yield s
    finally:
        drop_schema(s.config)


def test_verify_store_and_repair_store_on_a_database_store(db_store: DbStore) -> None:
    s = db_store
    s.fill()
    steps: list[str] = []

    def step(description: str) -> contextlib.AbstractContextManager[object]:
        steps.append(description)
        return contextlib.nullcontext()

    clean = verify_store(s.config, step=step)
    assert clean.store_type == "database" and clean.ok and clean.warning_count == 0
    assert [type(p) for p in clean.parts] == [DatabaseVerify, PagesVerify]
    assert steps == ["reading the store's tables", "checking the page stores"]

    ref = r.RefRecord(1).encode()
    tx_add = s.insert(
        s.schema.messages, id=900001, recordtype=13, txid=4242, userrecordtype=32, record=ref
    )
    found = verify_store(s.config)
    assert found.ok and (found.error_count, found.warning_count) == (0, 1)
    table = found.parts[0]
    assert isinstance(table, DatabaseVerify)
    assert [(f.kind, f.seq) for f in table.report.warnings] == [("uncommitted-transaction", tx_add)]

    repaired = repair_store(s.config)
    assert repaired.store_type == "database" and repaired.changed
    (report,) = repaired.parts
    assert isinstance(report, DatabaseRepairReport)
    assert [(m.kind, m.seqs) for m in report.removed] == [("uncommitted-transaction", (tx_add,))]
    assert verify_store(s.config).warning_count == 0
    assert repair_store(s.config) == StoreRepairResult(
        "database", (DatabaseRepairReport(report.where),)
    )


def test_repair_store_refuses_an_unknown_record_type_until_forced(db_store: DbStore) -> None:
    s = db_store
    s.fill()
    bad = s.insert(s.schema.bindings, id=5, recordtype=99, txid=0, userrecordtype=21, record=b"x")
    assert verify_store(s.config).error_count == 1
    with pytest.raises(CorruptionError):
        repair_store(s.config)
    forced = repair_store(s.config, force=True)
    (report,) = forced.parts
    assert isinstance(report, DatabaseRepairReport)
    assert [(m.kind, m.seqs) for m in report.removed] == [("bad-record-type", (bad,))]
    assert verify_store(s.config).ok


def test_a_database_store_without_tables_has_no_page_part(tmp_path: Path) -> None:
    s = DbStore("postgresql", tmp_path)  # no table of this prefix exists
    try:
        result = verify_store(s.config)
        assert [type(p) for p in result.parts] == [DatabaseVerify]  # no schema, no page tables
        assert not result.ok
    finally:
        drop_schema(s.config)


def test_file_store_choices_are_refused_on_a_database_store(tmp_path: Path) -> None:
    s = DbStore("sqlite", tmp_path)
    with pytest.raises(ConfigError, match="file store only"):
        verify_store(s.config, bindings=False)
    with pytest.raises(ConfigError, match="file store only"):
        repair_store(s.config, messages=False)
