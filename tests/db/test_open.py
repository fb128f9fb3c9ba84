"""Opening a database store: schema checks, the store lock and who holds it, table names
from the configuration, the ordered streaming load, embedded databases' paths. (A new store's
schema: tests/db/test_new_store.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from store import StoreConfig, open_store
from store.db.migrate import drop_schema
from store.errors import RecordTooLargeError, SchemaError, StoreLockedError
from store.journal.api import RecordInfo
from tests.support.backends import unique_prefix
from tests.support.db_backends import db_backend, mysql_url, postgresql_url, store_mapping

REPO = Path(__file__).resolve().parents[2]


def test_schema_behind_the_code_names_the_upgrade(db) -> None:
    """A store whose version table holds an older revision: SchemaError naming the upgrade."""
    db.open().close()  # SQLite creates its schema on first open
    names = db.schema.names
    version = sa.table(names.version_table, sa.column("version_num"))
    db.execute(sa.update(version).values(version_num="0000"))
    with pytest.raises(SchemaError) as err:
        db.open()
    assert "0000" in str(err.value)
    assert "newer than this version" in str(err.value) or "store db upgrade" in (
        err.value.hint or ""
    )


_CHILD = """
import sys
from store import StoreConfig, open_store
config = StoreConfig.from_mapping(eval(sys.argv[1]))
with open_store(config) as s:
    s.messages.load()
    print("open", flush=True)
    sys.stdin.read()
"""


@pytest.mark.parametrize("which", ["postgresql", "mariadb", "sqlite"])
def test_lock_names_the_holding_process(which: str, tmp_path: Path) -> None:
    """While a child process holds the store, opening it raises StoreLockedError at once and
    says who holds it (PostgreSQL backend / MySQL connection / pid and host)."""
    prefix = unique_prefix()
    if which == "postgresql":
        url, user, pw = postgresql_url()
        mapping = store_mapping(url, prefix, user=user, password=pw)
        expect = "PostgreSQL backend"
    elif which == "mariadb":
        url, user, pw = mysql_url()
        mapping = store_mapping(url, prefix, user=user, password=pw)
        expect = "MySQL connection"
    else:
        mapping = store_mapping(f"jdbc:sqlite:{tmp_path / 'store.db'}", prefix)
        expect = "pid"
    config = db_backend(which).make_config(tmp_path, prefix)
    assert config == StoreConfig.from_mapping(mapping)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, repr(mapping)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "open"
        with pytest.raises(StoreLockedError) as err:
            open_store(config)
        assert expect in str(err.value)
        assert err.value.holder and expect in err.value.holder
    finally:
        child.communicate("", timeout=60)
        drop_schema(config)


def test_two_stores_share_a_database_by_their_table_names(db, tmp_path: Path) -> None:
    """Two stores in one database (different prefixes) open at the same time and keep their
    own records."""
    other = db_backend(db.name).make_config(tmp_path, unique_prefix())
    try:
        a = db.open()
        a.messages.load()
        with open_store(other) as b:
            b.bindings.load()
            b.messages.load()
            a.messages.append_add(1, 1, b"in a", sync=True)
            b.messages.append_add(1, 1, b"in b", sync=True)
        assert db.open().messages.load().records == [RecordInfo(1, 1, b"in a", False)]
    finally:
        db.close()
        db_backend(db.name).cleanup(other)


ODD_NAMES = {
    "reserved-words": ("select", "order", "table", "group", "where"),
    "dollar-mixed-case": ("Odd$Bind", "Odd$Msg", "Odd$Large", "Odd$Pg", "Odd$Node"),
}


@pytest.mark.parametrize("kind", list(ODD_NAMES))
def test_odd_but_legal_table_names_work(db_name: str, tmp_path: Path, kind: str) -> None:
    """Reserved words and `$` in configured names: migrations, appends and loads work (the
    names are quoted by the dialect, never formatted into SQL)."""
    prefix = unique_prefix() if kind != "reserved-words" else ""
    names = [prefix + n for n in ODD_NAMES[kind]]
    if db_name == "derby" and kind == "reserved-words":
        names = [f"{n}_{unique_prefix()[1:5]}" for n in names]  # shared Derby database
    base = db_backend(db_name).make_config(tmp_path, unique_prefix())
    assert base.database_store is not None
    db = base.database_store.replace(
        bindings_table_name=names[0],
        message_table_name=names[1],
        large_message_table_name=names[2],
        page_store_table_name=names[3],
        node_manager_store_table_name=names[4],
    )
    config = base.replace(database_store=db)
    db_backend(db_name).cleanup(base)
    if db_name != "sqlite":
        from store.db.migrate import upgrade

        drop_schema(config)
        upgrade(config)
    try:
        with open_store(config) as s:
            s.bindings.load()
            s.messages.load()
            s.messages.append_add(1, 1, b"odd", sync=True)
            s.messages.append_add_tx(2, 2, 1, b"tx")
            s.messages.append_commit(2)
            s.messages.append_delete(1, sync=True)
        with open_store(config) as s:
            s.bindings.load()
            assert s.messages.load().records == [RecordInfo(2, 1, b"tx", False)]
    finally:
        drop_schema(config)


def test_load_reads_in_seq_order_without_sorting(db) -> None:
    """`seq` is the primary key: the load query's plan has no sort step (EXPLAIN; on
    PostgreSQL of the cursor the load declares, which the planner optimises for a fast
    start)."""
    s = db.open()
    s.messages.load()
    for i in range(50):
        s.messages.append_add(i, 1, b"x")
    s.messages.flush()
    sql = s.messages._sql.load.sql  # the statement the load runs
    with db.engine.connect() as conn:
        if db.name == "postgresql":
            explain = "EXPLAIN DECLARE store_plan CURSOR FOR " + sql
            plan = " ".join(r[0] for r in conn.exec_driver_sql(explain))
            assert "Sort" not in plan, plan
        elif db.name == "mariadb":
            plan = " ".join(str(r) for r in conn.exec_driver_sql("EXPLAIN " + sql))
            assert "filesort" not in plan, plan
        elif db.name == "sqlite":
            plan = " ".join(str(r) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
            assert "TEMP B-TREE" not in plan, plan
        else:  # Derby has no EXPLAIN statement: check the key the plan would use instead
            pk = sa.inspect(conn).get_pk_constraint(db.schema.messages.name)
            assert pk["constrained_columns"] == ["seq"]


def test_postgresql_load_streams_through_a_server_side_cursor(tmp_path: Path) -> None:
    """The PostgreSQL load fetches with a named cursor, a chunk at a time: memory follows the
    chunk, not the table."""
    from tests.db.conftest import DbStore

    db = DbStore("postgresql", tmp_path)
    try:
        s = db.open()
        s.messages.load()
        for i in range(25):
            s.messages.append_add(i, 1, b"x")
        s.close()
        sql = db.open(load=False).messages._sql  # type: ignore[attr-defined]
        sql.fetch_size = 10
        raw = db.engine.raw_connection()
        try:
            chunks = sql.stream(raw.driver_connection)
            first = next(chunks)
            cursors = raw.driver_connection.execute("SELECT name FROM pg_cursors").fetchall()
            assert ("store_journal_scan",) in cursors
            sizes = [len(first)] + [len(c) for c in chunks]
            assert sizes == [10, 10, 5]
        finally:
            raw.close()
    finally:
        db.teardown()


def test_record_above_the_database_limit_is_refused(tmp_path: Path) -> None:
    """MariaDB takes at most half of max_allowed_packet per body: a bigger record raises
    RecordTooLargeError and nothing is written; one just below it is stored."""
    from tests.db.conftest import DbStore

    db = DbStore("mariadb", tmp_path)
    try:
        s = db.open()
        j = s.messages
        j.load()
        limit = j._options.max_record_size  # type: ignore[attr-defined]
        assert 1_000_000 < limit < 2**32
        with pytest.raises(RecordTooLargeError):
            j.append_add(1, 1, b"x" * (limit + 1), sync=True)
        j.append_add(2, 1, b"y" * limit, sync=True)
        assert [r[1] for r in db.rows()] == [2]
    finally:
        db.teardown()


def test_readme_sqlite_example_opens_from_the_project_folder_and_elsewhere(
    tmp_path: Path, monkeypatch
) -> None:
    """README's SQLite example, etc/store.toml with `jdbc:sqlite:../data/store.db`: the
    database is <project>/data/store.db (the path follows the configuration's folder), its
    missing folder is created, whether the process runs in the project folder or elsewhere."""
    from store import load_config

    project = tmp_path / "project"
    (project / "etc").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    prefix = unique_prefix()
    toml = project / "etc" / "store.toml"
    toml.write_text(
        '[database-store]\njdbc-connection-url = "jdbc:sqlite:../data/store.db"\n'
        f'bindings-table-name = "{prefix}B"\nmessage-table-name = "{prefix}M"\n'
    )
    for cwd, record_id in ((project, 1), (elsewhere, 2)):
        monkeypatch.chdir(cwd)
        with open_store(load_config("etc/store.toml" if cwd == project else toml)) as s:
            s.bindings.load()
            s.messages.load()
            s.messages.append_add(record_id, 1, b"x", sync=True)
    assert (project / "data" / "store.db").is_file()
    assert list(elsewhere.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "project"]
    with open_store(load_config(toml)) as s:
        s.bindings.load()
        assert [r.id for r in s.messages.load().records] == [1, 2]


def test_embedded_derby_of_a_broker_xml_lands_beside_the_configuration(
    tmp_path: Path, monkeypatch
) -> None:
    """A broker.xml with `jdbc:derby:../data/derby;create=true`, loaded from another working
    directory: the Derby database is created in <instance>/data/derby, not in the working
    directory."""
    from store import load_config
    from tests.support.db_backends import DERBY_CLASSPATH

    instance = tmp_path / "instance"
    (instance / "etc").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    prefix = unique_prefix()
    xml = instance / "etc" / "broker.xml"
    xml.write_text(
        '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core"><store>'
        "<database-store>"
        "<jdbc-connection-url>jdbc:derby:../data/derby;create=true</jdbc-connection-url>"
        f"<jdbc-driver-classpath>{DERBY_CLASSPATH}</jdbc-driver-classpath>"
        f"<bindings-table-name>{prefix}B</bindings-table-name>"
        f"<message-table-name>{prefix}M</message-table-name>"
        "</database-store></store></core></configuration>"
    )
    monkeypatch.chdir(elsewhere)
    config = load_config(xml)
    try:
        with open_store(config) as s:
            s.bindings.load()
            s.messages.load()
            s.messages.append_add(1, 1, b"x", sync=True)
        assert (instance / "data" / "derby" / "service.properties").is_file()
        assert list(elsewhere.iterdir()) == []
    finally:
        drop_schema(config)
