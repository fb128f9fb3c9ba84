"""A new database store starts by itself (docs/db.md, issue 7): the first open creates the
schema when none of the store's tables exist, once, under the schema lock, also when several
sessions start together; a partial or old schema is refused, and a user who may not run DDL
is sent to ``store db sql``."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from store import StoreConfig, open_store
from store.cli.main import main
from store.db.engine import create_store_engine, dispose_store_engine
from store.db.migrate import check, current, drop_schema, ensure_schema, head_revision
from store.db.schema import StoreSchema, TableNames
from store.errors import SchemaError
from store.journal.api import RecordInfo
from tests.support.backends import unique_prefix
from tests.support.db_backends import mysql_url, new_store_mapping, postgresql_url, store_mapping

REPO = Path(__file__).resolve().parents[2]


def _toml(path: Path, mapping: dict[str, Any]) -> Path:
    lines = ["[database-store]"]
    for key, value in mapping["database-store"].items():
        lines.append(f'{key} = "{value}"' if isinstance(value, str) else f"{key} = {value}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _node_manager_rows(config: StoreConfig) -> list[int]:
    assert config.database_store is not None
    table = StoreSchema(TableNames.from_config(config.database_store)).node_manager
    engine = create_store_engine(config.database_store)[0]
    try:
        with engine.connect() as conn:
            return [r[0] for r in conn.execute(sa.select(table.c.id).order_by(table.c.id))]
    finally:
        dispose_store_engine(engine)


def test_first_open_of_a_new_store_creates_its_schema(db_name: str, tmp_path: Path, capsys) -> None:
    """None of the store's tables exist: open_store creates them (as Artemis does at start-up)
    and the store works; the version table says head, and `store db current` agrees."""
    mapping = new_store_mapping(tmp_path, unique_prefix(), db_name)
    config = StoreConfig.from_mapping(mapping)
    try:
        with open_store(config) as s:
            s.bindings.load()
            s.messages.load()
            s.messages.append_add(1, 1, b"first use creates the schema", sync=True)
        assert current(config).current == head_revision()
        assert check(config) == []
        assert _node_manager_rows(config) == [0, 1, 2, 3]
        capsys.readouterr()
        assert main(["db", "current", "--config", str(_toml(tmp_path / "s.toml", mapping))]) == 0
        assert "up to date" in capsys.readouterr().out
        with open_store(config) as s:
            s.bindings.load()
            assert s.messages.load().records == [
                RecordInfo(1, 1, b"first use creates the schema", False)
            ]
    finally:
        drop_schema(config)


def test_without_create_a_missing_schema_names_store_db_upgrade(tmp_path: Path) -> None:
    """ensure_schema without ``create`` (a check only) still names `store db upgrade`."""
    config = StoreConfig.from_mapping(new_store_mapping(tmp_path, unique_prefix(), "sqlite"))
    assert config.database_store is not None
    engine = create_store_engine(config.database_store)[0]
    try:
        with pytest.raises(SchemaError) as err:
            ensure_schema(engine, TableNames.from_config(config.database_store), config_hint="x")
        assert "store db upgrade --config x" in (err.value.hint or "")
    finally:
        dispose_store_engine(engine)


def test_sessions_creating_a_new_schema_together_create_it_once(
    db_name: str, tmp_path: Path
) -> None:
    """Four threads, each with its own engine, run the first-open schema step of one new store
    at the same moment: all succeed, exactly one creates the schema, and it is complete and at
    head. On the server databases and SQLite each thread stands for another process (its own
    `where`, so only the database's lock serialises them); embedded Derby has one process, so
    the threads share the process's lock there."""
    config = StoreConfig.from_mapping(new_store_mapping(tmp_path, unique_prefix(), db_name))
    db = config.database_store
    assert db is not None
    names = TableNames.from_config(db)
    engines = [create_store_engine(db) for _ in range(4)]
    barrier = threading.Barrier(len(engines))
    created: list[bool] = []
    errors: list[BaseException] = []

    def first_open(i: int) -> None:
        engine, target = engines[i]
        where = target.display if db_name == "derby" else f"{target.display}#process{i}"
        barrier.wait()
        try:
            created.append(ensure_schema(engine, names, create=True, where=where))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=first_open, args=(i,)) for i in range(len(engines))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=180)
        assert errors == []
        assert sorted(created) == [False, False, False, True]
        assert current(config).up_to_date
        assert check(config) == []
        assert _node_manager_rows(config) == [0, 1, 2, 3]  # the migration ran once
    finally:
        for engine, _ in engines:
            dispose_store_engine(engine)
        drop_schema(config)


def test_a_creation_committing_during_the_unlocked_look_is_not_a_partial_schema(
    db_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another session creates the whole schema and commits between the two reads of this
    session's look without the lock (the revision, the table list; whichever comes first):
    this session must not take them for a revision without its tables, a partial schema (it
    did on CI with Derby, four sessions at once); it finds the schema complete and creates
    nothing."""
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy.engine.reflection import Inspector

    config = StoreConfig.from_mapping(new_store_mapping(tmp_path, unique_prefix(), db_name))
    db = config.database_store
    assert db is not None
    names = TableNames.from_config(db)
    (engine, target), (other, other_target) = create_store_engine(db), create_store_engine(db)
    other_created: list[bool] = []

    def then_the_other_session_creates(read: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            result = read(*args, **kwargs)
            if not other_created:  # only after this session's first read
                other_created.append(False)
                where = f"{other_target.display}#other"
                other_created[0] = ensure_schema(other, names, create=True, where=where)
            return result

        return wrapped

    for cls, name in ((MigrationContext, "get_current_revision"), (Inspector, "get_table_names")):
        monkeypatch.setattr(cls, name, then_the_other_session_creates(getattr(cls, name)))
    try:
        assert ensure_schema(engine, names, create=True, where=target.display) is False
        assert other_created == [True]
        monkeypatch.undo()
        assert current(config).up_to_date
        assert _node_manager_rows(config) == [0, 1, 2, 3]
    finally:
        monkeypatch.undo()
        dispose_store_engine(engine)
        dispose_store_engine(other)
        drop_schema(config)


_OPENER = """
import logging, sys, time
from store import StoreConfig, open_store
from store.errors import StoreLockedError

created = []

class Created(logging.Handler):
    def emit(self, record):
        if record.getMessage().startswith("creating the schema of a new store"):
            created.append(record)

log = logging.getLogger("store.db.migrate")
log.setLevel(logging.INFO)
log.addHandler(Created())
config = StoreConfig.from_mapping(eval(sys.argv[1]))
print("ready", flush=True)
sys.stdin.readline()  # both processes start here together
deadline = time.monotonic() + 150
while True:
    try:
        store = open_store(config)
        break
    except StoreLockedError:  # one writer per store: the other process has it for a moment
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
with store:
    store.bindings.load()
    store.messages.load()
    store.messages.append_add(int(sys.argv[2]), 1, b"opened", sync=True)
print("created" if created else "found", flush=True)
"""


def test_two_processes_opening_a_new_store_at_once_both_succeed(
    db_name: str, tmp_path: Path
) -> None:
    """Two processes open the same new store at the same moment: both succeed (the one that
    finds the store held waits, as one writer per store requires), the schema is created
    once, and both records are there."""
    derby = f"jdbc:derby:{tmp_path / 'derby-new'};create=true"  # not booted by this process
    mapping = new_store_mapping(tmp_path, unique_prefix(), db_name, derby=derby)
    config = StoreConfig.from_mapping(mapping)
    if db_name == "derby":
        # The Derby database exists, the store's tables do not. (Two processes creating one
        # embedded Derby database at once is Derby's own race: the loser finds a half-made
        # folder, XBM0A. Embedded Derby is one process's database anyway.)
        assert config.database_store is not None
        engine = create_store_engine(config.database_store)[0]
        engine.connect().close()
        dispose_store_engine(engine)  # shuts the database down again
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _OPENER, repr(mapping), str(record_id)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for record_id in (1, 2)
    ]
    try:
        for child in children:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        results = [child.communicate(timeout=200) for child in children]
        for child, (_out, err) in zip(children, results, strict=True):
            assert child.returncode == 0, err
        assert sorted(out.strip() for out, _ in results) == ["created", "found"]
        assert current(config).up_to_date
        with open_store(config) as s:
            s.bindings.load()
            ids = sorted(r.id for r in s.messages.load().records)
        assert ids == [1, 2]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.communicate()
        drop_schema(config)


@pytest.mark.parametrize("drop", ["one-table", "version-table"])
def test_a_partial_schema_is_refused_and_never_created_over(db, drop: str) -> None:
    """Some of the store's tables exist, not all (a table lost, or tables without their
    version table): not a new store. Opening raises a SchemaError naming what exists and what
    is missing, and creates nothing."""
    db.open().close()
    names = db.schema.names
    gone = names.large_messages if drop == "one-table" else names.version_table
    db.execute(sa.schema.DropTable(sa.Table(gone, sa.MetaData())))
    with pytest.raises(SchemaError) as err:
        db.open()
    assert "incomplete" in str(err.value)
    assert f"{gone} missing" in str(err.value)
    assert names.messages in str(err.value)
    existing = {n.lower() for n in sa.inspect(db.engine).get_table_names()}
    assert gone not in existing and names.messages in existing


def _refused(config: StoreConfig, dialect: str) -> None:
    with pytest.raises(SchemaError) as err:
        open_store(config)
    assert f"store db sql --dialect {dialect} --config" in (err.value.hint or "")
    assert "refuses" in str(err.value)


def test_postgresql_user_without_create_privilege_is_sent_to_store_db_sql(tmp_path: Path) -> None:
    """On PostgreSQL, a role that may use a fresh schema but not CREATE in it: opening a new
    store there raises SchemaError naming `store db sql` (the DDL for a DBA), creating nothing."""
    prefix = unique_prefix()
    role, schema = f"{prefix}nocreate", f"{prefix}schema"
    url, user, password = postgresql_url()
    admin = StoreConfig.from_mapping(store_mapping(url, prefix, user=user, password=password))
    assert admin.database_store is not None
    engine = create_store_engine(admin.database_store)[0]
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'CREATE ROLE "{role}" LOGIN')
            conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
            conn.exec_driver_sql(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
        limited = store_mapping(f"{url}?currentSchema={schema}", prefix, user=role)
        _refused(StoreConfig.from_mapping(limited), "postgresql")
        assert sa.inspect(engine).get_table_names(schema=schema) == []
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.exec_driver_sql(f'DROP OWNED BY "{role}"')
            conn.exec_driver_sql(f'DROP ROLE IF EXISTS "{role}"')
        dispose_store_engine(engine)


@pytest.mark.parametrize(
    "grants",
    ["SELECT, INSERT, UPDATE, DELETE", "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP"],
    ids=["no-create", "create-but-no-index"],
)
def test_mariadb_user_without_create_privilege_is_sent_to_store_db_sql(
    tmp_path: Path, grants: str
) -> None:
    """On MariaDB, a user without CREATE (or with CREATE but not INDEX, so the creation is
    refused half-way, after tables that MariaDB committed at once): opening a new store raises
    SchemaError naming `store db sql`, and leaves none of the store's tables behind."""
    prefix = unique_prefix()
    url, user, password = mysql_url()
    admin = StoreConfig.from_mapping(store_mapping(url, prefix, user=user, password=password))
    assert admin.database_store is not None
    engine = create_store_engine(admin.database_store)[0]
    database = engine.url.database
    limited_user = f"{prefix}nocreate"
    hosts = ("127.0.0.1", "localhost")
    try:
        with engine.begin() as conn:
            for host in hosts:
                conn.exec_driver_sql(f"CREATE USER '{limited_user}'@'{host}'")
                conn.exec_driver_sql(
                    f"GRANT {grants} ON `{database}`.* TO '{limited_user}'@'{host}'"
                )
        limited = store_mapping(url, prefix, user=limited_user)
        _refused(StoreConfig.from_mapping(limited), "mysql")
        existing = {n.lower() for n in sa.inspect(engine).get_table_names()}
        assert not any(n.startswith(prefix) for n in existing)
    finally:
        with engine.begin() as conn:
            for host in hosts:
                conn.exec_driver_sql(f"DROP USER IF EXISTS '{limited_user}'@'{host}'")
        dispose_store_engine(engine)


def test_a_new_sqlite_store_waits_out_a_write_lock_longer_than_its_busy_timeout(
    tmp_path: Path,
) -> None:
    """Several nodes opening one new SQLite file at once: while another connection holds the
    file's write lock (creating the schema, switching to WAL) for longer than the busy timeout
    (``jdbc-network-timeout``), the first look at the schema waits, as the schema lock does,
    instead of failing with "database is locked"."""
    import sqlite3
    import time

    path = tmp_path / "store.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("create table someone_elses (x integer)")
    other.execute("begin exclusive")
    releaser = threading.Timer(1.0, lambda: other.execute("commit"))
    releaser.start()
    mapping = store_mapping(f"jdbc:sqlite:{path}", unique_prefix())
    mapping["database-store"]["jdbc-network-timeout"] = 200  # busy timeout 0.2 s
    started = time.monotonic()
    try:
        with open_store(StoreConfig.from_mapping(mapping)) as s:
            s.messages.load()
            s.messages.append_add(1, 1, b"one", sync=True)
        assert time.monotonic() - started >= 0.9  # it did wait for the lock
    finally:
        releaser.join()
        other.close()
