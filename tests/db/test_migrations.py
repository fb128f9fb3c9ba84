"""Schema management: upgrade from empty, `alembic check` clean against store.db.schema,
offline SQL for every dialect (valid on the real databases, and equal to the committed
sql/<dialect>/schema.sql), and the `store db` commands."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from store import StoreConfig
from store.cli.main import main
from store.db.engine import create_store_engine, dispose_store_engine
from store.db.migrate import (
    DIALECTS,
    alembic_config,
    check,
    current,
    drop_schema,
    head_revision,
    render_sql,
    upgrade,
)
from store.db.schema import StoreSchema, TableNames
from tests.support.backends import unique_prefix
from tests.support.db_backends import db_backend, store_mapping

REPO = Path(__file__).resolve().parents[2]


def test_upgrade_from_empty_creates_every_table_and_checks_clean(db_name, tmp_path) -> None:
    """From an empty database: upgrade creates the journals, file tables, node manager (with
    Artemis's four rows) and the version table; `alembic check` finds no difference between
    the database and store.db.schema; a second upgrade changes nothing."""
    prefix = unique_prefix()
    spec = db_backend(db_name)
    config = spec.make_config(tmp_path, prefix)  # runs the upgrade (SQLite: at first open)
    try:
        status = upgrade(config)
        assert status.current == status.head == head_revision()
        assert check(config) == []
        engine = create_store_engine(config.database_store)[0]
        try:  # the real `alembic check`, through migrations/env.py
            with engine.connect() as conn:
                command.check(alembic_config(config, connection=conn))
        finally:
            dispose_store_engine(engine)
        names = TableNames.from_config(config.database_store)
        engine = create_store_engine(config.database_store)[0]
        try:
            existing = {n.lower() for n in sa.inspect(engine).get_table_names()}
            assert set(names.all()) <= existing
            node = StoreSchema(names).node_manager
            with engine.connect() as conn:
                ids = [r[0] for r in conn.execute(sa.select(node.c.id).order_by(node.c.id))]
            assert ids == [0, 1, 2, 3]
        finally:
            dispose_store_engine(engine)
        assert upgrade(config) == status
    finally:
        drop_schema(config)


def test_check_reports_a_table_that_differs(tmp_path) -> None:
    """`alembic check` is not vacuous: an index dropped behind alembic's back is reported."""
    config = db_backend("sqlite").make_config(tmp_path, unique_prefix())
    upgrade(config)
    names = TableNames.from_config(config.database_store)
    engine = create_store_engine(config.database_store)[0]
    with engine.begin() as conn:
        conn.execute(sa.schema.DropIndex(sa.Index(f"{names.messages}_tx_idx")))
    dispose_store_engine(engine)
    diffs = check(config)
    assert any("remove_index" not in str(d) and "tx_idx" in str(d) for d in diffs), diffs


@pytest.mark.parametrize("dialect", DIALECTS)
def test_committed_sql_equals_what_store_db_sql_renders(dialect: str, capsys) -> None:
    """sql/<dialect>/schema.sql is exactly `store db sql --dialect <dialect>` (no drift)."""
    assert main(["db", "sql", "--dialect", dialect]) == 0
    rendered = capsys.readouterr().out
    assert rendered == render_sql(dialect)
    committed = (REPO / "sql" / dialect / "schema.sql").read_text()
    assert committed == rendered, (
        f"regenerate: store db sql --dialect {dialect} > sql/{dialect}/schema.sql"
    )
    for table in TableNames.defaults(dialect).all():
        assert re.search(rf"CREATE TABLE {table} \(", rendered)


def _statements(script: str) -> list[str]:
    body = "\n".join(line for line in script.splitlines() if not line.startswith("--"))
    return [
        s.strip() for s in body.split(";") if s.strip() and s.strip() not in ("BEGIN", "COMMIT")
    ]


@pytest.mark.parametrize("which", ["postgresql", "mariadb", "sqlite", "derby", "h2"])
def test_offline_sql_runs_on_the_database_and_matches_the_code(which: str, tmp_path) -> None:
    """The DDL a DBA gets from `store db sql` (with this test's table names) runs on the real
    database, and the result checks clean against store.db.schema: the offline path and the
    online path build the same schema. H2 runs embedded (Debian's libh2-java)."""
    prefix = unique_prefix()
    if which == "h2":
        config = StoreConfig.from_mapping(
            store_mapping(
                f"jdbc:h2:{tmp_path / 'h2db'}",
                prefix,
                **{
                    "jdbc-driver-class-name": "org.h2.Driver",
                    "jdbc-driver-classpath": "/usr/share/java/h2.jar",
                },
            )
        )
        dialect = "h2"
    else:
        config = db_backend(which).make_config(tmp_path, prefix)
        drop_schema(config)  # make_config ran the online upgrade: start from nothing
        dialect = {"mariadb": "mysql"}.get(which, which)
    db = config.database_store
    names = dataclasses.replace(
        TableNames.from_config(db), max_length=TableNames.defaults(dialect).max_length
    )
    engine = create_store_engine(db)[0]
    try:
        with engine.begin() as conn:
            for statement in _statements(render_sql(dialect, names)):
                conn.exec_driver_sql(statement)
        assert current(config, engine=engine).up_to_date
        assert check(config, engine=engine) == []
    finally:
        drop_schema(config, engine=engine)
        dispose_store_engine(engine)


def _toml(tmp_path: Path, mapping: dict) -> Path:
    section = mapping["database-store"]
    lines = ["[database-store]"] + [
        f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v}" for k, v in section.items()
    ]
    path = tmp_path / "store.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_store_db_commands_upgrade_report_and_render_with_configured_names(
    tmp_path, capsys
) -> None:
    """`store db current` exits 1 on an empty store and 0 after `store db upgrade`; `store db
    sql --config` renders the configured names."""
    prefix = unique_prefix()
    path = _toml(tmp_path, store_mapping(f"jdbc:sqlite:{tmp_path / 'cli.db'}", prefix))
    assert main(["db", "current", "--config", str(path)]) == 1
    assert "(none)" in capsys.readouterr().out
    assert main(["db", "upgrade", "--config", str(path)]) == 0
    assert f"revision {head_revision()}" in capsys.readouterr().out
    assert main(["db", "current", "--config", str(path)]) == 0
    assert "up to date" in capsys.readouterr().out
    assert main(["db", "check", "--config", str(path)]) == 0
    assert main(["db", "sql", "--dialect", "derby", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"CREATE TABLE {prefix}messages (" in out
    assert "BEGIN;" not in out  # Derby's ij has no BEGIN


def test_store_db_sql_refuses_an_unknown_dialect(capsys) -> None:
    """--dialect is one of the five; anything else is a usage error (exit 2)."""
    with pytest.raises(SystemExit) as exit_:
        main(["db", "sql", "--dialect", "oracle"])
    assert exit_.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
