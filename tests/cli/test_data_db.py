"""`store data verify|repair|compact|recover` on the database store, through the real command
(``store.cli.main.main`` in this process; a subprocess where another process must hold the
store), on PostgreSQL, MariaDB and SQLite stores written by the real storage manager and
damaged by rows written directly with SQL into the test's own tables."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from store import StoreConfig, open_store
from store.db.engine import create_store_engine, dispose_store_engine
from store.db.migrate import drop_schema
from store.db.schema import StoreSchema, TableNames
from store.large.database import CHUNK_EXTENSION, chunk_name
from store.messaging import records as r
from store.messaging.manager import StorageManager
from store.messaging.values import Message
from tests.support.backends import unique_prefix
from tests.support.cli import run_store, run_store_here
from tests.support.db_backends import DERBY_CLASSPATH, mysql_url, new_store_mapping, postgresql_url

BACKENDS = ("postgresql", "mariadb", "sqlite")
#: Derby works too (embedded, through JDBC) but starts a JVM per command: only the lock test.
LOCK_BACKENDS = (*BACKENDS, "derby")


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """The command in this process: only its output, exit status and the tables matter."""
    return run_store_here(*argv)


def _cli_process(*argv: str) -> subprocess.CompletedProcess[str]:
    """The command as another process: the store lock this test's process holds refuses it."""
    return run_store(*argv, env={"CLASSPATH": DERBY_CLASSPATH}, timeout=120)


class DbStore:
    """One test's database store: its configuration, the options naming it, its tables."""

    def __init__(self, which: str, tmp_path: Path) -> None:
        self.which = which
        self.prefix = unique_prefix()
        mapping = new_store_mapping(tmp_path, self.prefix, which)
        self.config = StoreConfig.from_mapping(mapping)
        section = mapping["database-store"]
        self.options = [
            "--jdbc-connection-url",
            section["jdbc-connection-url"],
            "--jdbc-bindings-table-name",
            section["bindings-table-name"],
            "--jdbc-message-table-name",
            section["message-table-name"],
            "--jdbc-large-message-table-name",
            section["large-message-table-name"],
            "--jdbc-page-store-table-name",
            section["page-store-table-name"],
            "--jdbc-node-manager-table-name",
            section["node-manager-store-table-name"],
        ]
        if "jdbc-user" in section:
            self.options += ["--jdbc-user", section["jdbc-user"]]
        db = self.config.database_store
        assert db is not None
        self.schema = StoreSchema(TableNames.from_config(db))

    def fill(self) -> list[int]:
        """Send 10 messages through the storage manager, ack 4; returns the ids sent."""
        with StorageManager(open_store(self.config)) as sm:
            sm.load()
            sm.create_address("orders")
            sm.create_queue("orders", address="orders")
            ids = [
                sm.send(Message("orders", f"body-{i}".encode(), properties={"i": i}))
                for i in range(10)
            ]
            for d in sm.receive("orders", 4):
                sm.ack("orders", d.message.message_id or 0)
        return [i for i in ids if i is not None]

    def insert(self, table: sa.Table, **row: object) -> int:
        """Insert one row with SQL; a journal row gets the next seq, returned (a file table's
        row its generated id)."""
        db = self.config.database_store
        assert db is not None
        engine, _target = create_store_engine(db)
        try:
            with engine.begin() as conn:
                if "seq" in table.c:
                    top = conn.execute(sa.select(sa.func.max(table.c.seq))).scalar() or 0
                    row.setdefault("seq", top + 1)
                    record = row.get("record")
                    row.setdefault("variablesize", len(record) if isinstance(record, bytes) else 0)
                    conn.execute(table.insert().values(**row))
                    return int(row["seq"])  # type: ignore[call-overload]
                conn.execute(table.insert().values(**row))
                found = sa.select(sa.func.max(table.c.id)).where(
                    table.c.filename == row["filename"]
                )
                return int(conn.execute(found).scalar_one())
        finally:
            dispose_store_engine(engine)

    def count(self, table: sa.Table) -> int:
        db = self.config.database_store
        assert db is not None
        engine, _target = create_store_engine(db)
        try:
            with engine.connect() as conn:
                return int(
                    conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() or 0
                )
        finally:
            dispose_store_engine(engine)


@pytest.fixture(params=BACKENDS)
def db_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DbStore]:
    s = DbStore(request.param, tmp_path)
    try:
        yield s
    finally:
        drop_schema(s.config)


def _finding(out: str, kind: str, table: str, seq: int | str) -> bool:
    """True if the findings table of ``out`` has a row of ``kind`` in ``table`` at ``seq``."""
    pattern = rf"│ \w+\s*│ {re.escape(kind)}\s*│ {re.escape(table)}\s*│ {seq}\s*│"
    return re.search(pattern, out) is not None


def test_verify_and_repair_find_and_remove_every_kind_of_damage(db_store: DbStore) -> None:
    s = db_store
    s.fill()
    messages, large = s.schema.messages.name, s.schema.large_messages.name

    done = _cli("data", "verify", *s.options)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "database: ok: 4 tables, 0 errors, 0 warnings" in done.stdout

    # What a crash or a hand edit leaves and a load tolerates: exit 1.
    ref = r.RefRecord(1).encode()
    tx_add = s.insert(
        s.schema.messages, id=900001, recordtype=13, txid=4242, userrecordtype=32, record=ref
    )
    stray_commit = s.insert(
        s.schema.messages, id=-1, recordtype=18, txid=777, userrecordtype=-1, record=b""
    )
    orphan_ref = s.insert(
        s.schema.messages, id=900002, recordtype=12, txid=0, userrecordtype=32, record=ref
    )
    chunk = s.insert(
        s.schema.large_messages,
        filename=chunk_name(900003, 0),
        extension=CHUNK_EXTENSION,
        data=b"\0\0\0\0partial",
    )
    done = _cli("data", "verify", *s.options)
    assert done.returncode == 1, done.stdout + done.stderr
    assert _finding(done.stdout, "uncommitted-transaction", messages, tx_add)
    assert _finding(done.stdout, "dead-rows", messages, stray_commit)
    assert _finding(done.stdout, "update-without-add", messages, orphan_ref)
    assert _finding(done.stdout, "incomplete-body", large, chunk)
    assert "0 errors, 4 warnings" in done.stdout

    # A live record whose body does not decode: the storage manager's load refuses it (exit 5),
    # and so does repair without --force.
    garbled = s.insert(
        s.schema.messages,
        id=900004,
        recordtype=11,
        txid=0,
        userrecordtype=45,
        record=b"\x01not a message",
    )
    done = _cli("data", "verify", *s.options)
    assert done.returncode == 5, done.stdout + done.stderr
    assert _finding(done.stdout, "undecodable", messages, garbled)
    (hint,) = [line for line in done.stdout.splitlines() if line.startswith("hint: database:")]
    assert "`store data repair --force` deletes the 1 damaged row(s)" in hint
    assert f"(seq {garbled})" in hint and "nothing else" in hint
    rows_before = s.count(s.schema.messages)
    refused = _cli("data", "repair", *s.options)
    assert refused.returncode == 5, refused.stdout + refused.stderr
    assert f"{messages} at offset {garbled}" in refused.stderr or str(garbled) in refused.stderr
    assert "--force" in refused.stderr
    assert s.count(s.schema.messages) == rows_before  # refused: nothing changed

    repaired = _cli("data", "repair", "--force", *s.options)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    out = repaired.stdout
    assert re.search(rf"{messages}: uncommitted-transaction: deleted 1 row.*seq/id {tx_add}\)", out)
    assert re.search(rf"{messages}: dead-rows: deleted 1 row.*seq/id {stray_commit}\)", out)
    assert re.search(rf"{messages}: update-without-add: deleted 1 row.*seq/id {orphan_ref}\)", out)
    assert re.search(rf"{large}: incomplete-body: deleted 1 row.*seq/id {chunk}\)", out)
    assert re.search(rf"{messages}: undecodable: deleted 1 row.*seq/id {garbled}\)", out)
    assert "5 removal(s)" in out
    assert s.count(s.schema.messages) == rows_before - 4

    again = _cli("data", "verify", *s.options)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 errors, 0 warnings" in again.stdout
    assert "nothing to repair" in _cli("data", "repair", *s.options).stdout
    # The repaired store loads with the storage manager: 6 messages left on the queue.
    with StorageManager(open_store(s.config)) as sm:
        sm.load()
        assert sm.depth("orders") == 6


def test_a_row_of_an_unknown_record_type_is_an_error_until_forced(db_store: DbStore) -> None:
    s = db_store
    s.fill()
    bad = s.insert(s.schema.bindings, id=5, recordtype=99, txid=0, userrecordtype=21, record=b"x")
    done = _cli("data", "verify", *s.options)
    assert done.returncode == 5
    assert _finding(done.stdout, "bad-record-type", s.schema.bindings.name, bad)
    assert "record type 99" in done.stdout
    assert _cli("data", "repair", *s.options).returncode == 5
    forced = _cli("data", "repair", "--force", *s.options)
    assert forced.returncode == 0, forced.stderr
    assert "bad-record-type: deleted 1 row" in forced.stdout
    assert _cli("data", "verify", *s.options).returncode == 0


def test_a_large_body_missing_its_chunks_is_an_error_repair_will_not_hide(tmp_path: Path) -> None:
    s = DbStore("postgresql", tmp_path)
    try:
        with StorageManager(open_store(s.config.replace(min_large_message_size=1024))) as sm:
            sm.load()
            sm.create_address("big")
            sm.create_queue("big", address="big")
            mid = sm.send(Message("big", b"L" * 5000))
        db = s.config.database_store
        assert db is not None
        engine, _target = create_store_engine(db)
        lm = s.schema.large_messages
        try:
            with engine.begin() as conn:
                conn.execute(lm.delete().where(lm.c.extension == CHUNK_EXTENSION))
                desc = conn.execute(sa.select(lm.c.id).where(lm.c.extension == "msg")).scalar()
        finally:
            dispose_store_engine(engine)
        done = _cli("data", "verify", *s.options)
        assert done.returncode == 5, done.stdout + done.stderr
        assert _finding(done.stdout, "missing-chunks", lm.name, desc)
        assert f"message {mid}" in done.stdout
        refused = _cli("data", "repair", "--force", *s.options)
        assert refused.returncode == 5 and "repair refuses it" in refused.stderr
    finally:
        drop_schema(s.config)


@pytest.mark.parametrize("which", LOCK_BACKENDS)
def test_a_store_a_live_process_holds_is_refused_naming_the_holder(
    which: str, tmp_path: Path
) -> None:
    s = DbStore(which, tmp_path)
    try:
        _refused_while_held(s)
    finally:
        drop_schema(s.config)


def _refused_while_held(s: DbStore) -> None:
    s.fill()
    with open_store(s.config):
        for command in ("verify", "repair"):
            done = _cli_process("data", command, *s.options)
            assert done.returncode == 3, done.stdout + done.stderr
            # The holder: its pid (PostgreSQL, SQLite), its connection (MariaDB's GET_LOCK),
            # the embedded database's boot lock (Derby: the store lock is per process there).
            holder = {
                "mariadb": ("is held by MySQL connection",),
                "derby": ("is open in another process",),
            }.get(s.which, ("is held by", f"pid {os.getpid()}"))
            assert all(text in done.stderr for text in holder), done.stderr
        forced = _cli_process("data", "verify", "--force", *s.options)
        # --force reads without the store lock; Derby's boot lock cannot be read around.
        assert forced.returncode == (3 if s.which == "derby" else 0), forced.stdout + forced.stderr
    # Released: verify takes the lock and gives it back, so the store opens afterwards.
    assert _cli_process("data", "verify", *s.options).returncode == 0
    with open_store(s.config):
        pass


def test_missing_tables_are_a_schema_error(tmp_path: Path) -> None:
    s = DbStore("postgresql", tmp_path)  # no table of this prefix exists
    done = _cli("data", "verify", *s.options)
    assert done.returncode == 5, done.stdout + done.stderr
    assert _finding(done.stdout, "schema", s.schema.bindings.name, "-")
    repair = _cli("data", "repair", *s.options)
    assert repair.returncode == 6 and "repair refused" in repair.stderr


def test_file_only_options_are_refused_on_a_database_store(tmp_path: Path) -> None:
    s = DbStore("sqlite", tmp_path)
    done = _cli("data", "repair", "--skip-bindings", *s.options)
    assert done.returncode == 2
    assert "--skip-bindings" in done.stderr and "file store only" in done.stderr


def test_compact_a_postgresql_store_named_by_jdbc_options(tmp_path: Path) -> None:
    s = DbStore("postgresql", tmp_path)
    try:
        s.fill()
        dead = s.insert(
            s.schema.messages, id=-1, recordtype=18, txid=31337, userrecordtype=-1, record=b""
        )
        before = s.count(s.schema.messages)
        done = _cli("data", "compact", *s.options)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "messages" in done.stdout and "bindings" in done.stdout
        assert s.count(s.schema.messages) == before - 1  # the dead commit row is gone
        verify = _cli("data", "verify", *s.options)
        # the dead row's seq named nowhere (the random table prefix may hold its digits)
        shown = verify.stdout.split("seq")[-1].replace(s.prefix, "")
        assert verify.returncode == 0 and not re.search(rf"\b{dead}\b", shown), verify.stdout
    finally:
        drop_schema(s.config)


def test_recover_on_a_database_store_is_a_clear_configuration_error(tmp_path: Path) -> None:
    url, user, _password = postgresql_url()
    assert mysql_url()  # the servers' settings come from the same place
    done = _cli(
        "data",
        "recover",
        "--jdbc-connection-url",
        url,
        "--jdbc-user",
        user or "postgres",
        "--target",
        str(tmp_path / "out"),
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "keeps no retention history" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_store_an_ha_live_node_holds_is_refused_naming_the_holder(tmp_path: Path) -> None:
    from store.db.lease import PRIMARY_ROW, LeaseTable

    s = DbStore("postgresql", tmp_path)
    try:
        s.fill()
        db = s.config.database_store
        assert db is not None
        engine, _target = create_store_engine(db)
        try:
            table = LeaseTable(
                engine, s.schema.node_manager, expiration_ms=60_000, allowed_diff_ms=1_000
            )
            table.ensure_rows()
            assert table.try_acquire(PRIMARY_ROW, "live-node-7") is not None
            for command in ("verify", "repair"):
                done = _cli("data", command, *s.options)
                assert done.returncode == 3, done.stdout + done.stderr
                assert "live lock is held by live-node-7" in done.stderr
        finally:
            dispose_store_engine(engine)
    finally:
        drop_schema(s.config)


@pytest.mark.parametrize("command", ["verify", "repair", "compact", "recover"])
def test_every_store_command_takes_artemis_store_options(command: str) -> None:
    from store.cli.data.options import store_config
    from store.cli.main import build_parser

    extra = ["--target", "t"] if command == "recover" else []
    args = build_parser().parse_args(
        ["data", command, *extra,
         "--journal", "j", "--bindings", "b", "--paging", "p", "--large-messages", "l",
         "--jdbc-connection-url", "jdbc:postgresql://127.0.0.1:5432/test", "--jdbc-user", "u",
         "--jdbc-bindings-table-name", "xb", "--jdbc-message-table-name", "xm",
         "--jdbc-large-message-table-name", "xl", "--jdbc-page-store-table-name", "xp",
         "--jdbc-node-manager-table-name", "xn"]
    )  # fmt: skip
    config = store_config(args, command=f"store data {command}")
    db = config.database_store
    assert db is not None and db.jdbc_user == "u"
    assert (db.bindings_table_name, db.message_table_name) == ("xb", "xm")
    assert (db.large_message_table_name, db.page_store_table_name) == ("xl", "xp")
    assert db.node_manager_store_table_name == "xn"
    assert config.paging_directory == "p" and config.large_messages_directory == "l"


def test_page_tables_missing_from_or_unlisted_in_the_directory(tmp_path: Path) -> None:
    from store.paging.database import DIRECTORY_ROW, decode_directory, encode_directory

    s = DbStore("sqlite", tmp_path)
    try:
        s.fill()
        db = s.config.database_store
        assert db is not None
        engine, _target = create_store_engine(db)
        ps = s.schema.page_store
        try:
            with engine.begin() as conn:
                conn.execute(ps.delete().where(ps.c.filename == DIRECTORY_ROW))
                conn.execute(
                    ps.insert().values(
                        filename=DIRECTORY_ROW, extension="txt", data=encode_directory({78})
                    )
                )
                s.schema.page_table(77).create(conn)  # a crash between create and listing
            done = _cli("data", "verify", *s.options)
            assert done.returncode == 5, done.stdout + done.stderr  # pages listed are lost
            prefix = s.schema.names.page_store
            assert _finding(done.stdout, "missing-page-table", f"{prefix}78", "-")
            assert _finding(done.stdout, "unlisted-page-table", f"{prefix}77", "-")
            refused = _cli("data", "repair", *s.options)  # a loss needs the operator's word
            assert refused.returncode == 5, refused.stdout + refused.stderr
            assert "missing-page-table" in refused.stdout + refused.stderr
            unlisted = _cli("data", "repair", "--remove-pages", f"{prefix}78", *s.options)
            assert unlisted.returncode == 0, unlisted.stdout + unlisted.stderr
            assert f"removed table {prefix}78 from the page directory" in unlisted.stdout
            repaired = _cli("data", "repair", *s.options)
            assert repaired.returncode == 0, repaired.stdout + repaired.stderr
            assert f"{prefix}77: unlisted-page-table: dropped the table" in repaired.stdout
            with engine.connect() as conn:
                assert f"{prefix}77" not in sa.inspect(conn).get_table_names()
                data = conn.execute(
                    sa.select(ps.c.data).where(ps.c.filename == DIRECTORY_ROW)
                ).scalar_one()
                assert decode_directory(bytes(data)) == set()
            assert _cli("data", "verify", *s.options).returncode == 0
        finally:
            dispose_store_engine(engine)
    finally:
        drop_schema(s.config)
