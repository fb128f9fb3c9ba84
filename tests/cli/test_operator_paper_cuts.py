"""What operators hit on first contact (issue 25), each through the real entry point or the
library call it names: a mistyped JDBC scheme, ``db sql --dialect mariadb``, a report of
something that is not there, and the send timestamp."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from store import StoreConfig, open_store
from store.db.urls import resolve_target
from store.errors import ConfigError
from store.messaging import Message, StorageManager
from tests.support.cli import run_store


@pytest.mark.parametrize(
    ("url", "closest"),
    [
        ("jdbc:postgresq://127.0.0.1:5432/test", "postgresql"),
        ("jdbc:postgresql//127.0.0.1:5432/test", "postgresql"),
        ("jdbc:postgres//127.0.0.1:5432/test", "postgresql"),
        ("jdbc:mariadbb://127.0.0.1:3306/test", "mariadb"),
        ("jdbc:mysql//127.0.0.1:3306/test", "mysql"),
        ("jdbc:sqlit:/tmp/x.db", "sqlite"),
    ],
)
def test_a_mistyped_scheme_names_jdbc_connection_url_and_the_closest_scheme(
    url: str, closest: str
) -> None:
    config = StoreConfig.from_mapping({"database-store": {"jdbc-connection-url": url}})
    assert config.database_store is not None
    with pytest.raises(ConfigError) as info:
        resolve_target(config.database_store)
    assert info.value.key == "jdbc-connection-url"
    assert info.value.hint is not None and f"did you mean jdbc:{closest}:" in info.value.hint


def test_a_driver_of_its_own_with_a_driver_class_is_still_accepted() -> None:
    # jdbc:h2: is far from every known scheme, and a class given means the user chose it.
    config = StoreConfig.from_mapping(
        {
            "database-store": {
                "jdbc-connection-url": "jdbc:h2:mem:x",
                "jdbc-driver-class-name": "org.h2.Driver",
            }
        }
    )
    assert config.database_store is not None
    assert resolve_target(config.database_store).jdbc is not None


def test_db_sql_accepts_mariadb_as_mysql() -> None:
    mariadb = run_store("db", "sql", "--dialect", "mariadb")
    mysql = run_store("db", "sql", "--dialect", "mysql")
    assert mariadb.returncode == 0, mariadb.stderr
    assert mariadb.stdout == mysql.stdout and "CREATE TABLE" in mariadb.stdout


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["--journal", "/no/such/dir"], 2, "--journal: /no/such/dir does not exist"),
        (["--history", "/no/such/dir"], 2, "--history: /no/such/dir does not exist"),
        (
            ["--jdbc-url", "jdbc:postgresql://nohost.invalid:5432/x"],
            4,
            "cannot connect to jdbc:postgresql://nohost.invalid:5432/x",
        ),
        (
            ["--jdbc-url", "jdbc:postgresql://127.0.0.1:5432/no_such_database_here"],
            4,
            'database "no_such_database_here" does not exist',
        ),
        (
            ["--jdbc-url", "jdbc:mariadb://127.0.0.1:3306/no_such_database_here"],
            4,
            "Unknown database 'no_such_database_here'",
        ),
    ],
)
def test_report_of_something_unreachable_fails_in_one_line_before_spark(
    tmp_path: Path, argv: list[str], code: int, says: str
) -> None:
    started = time.monotonic()
    done = run_store("report", *argv, "--out", str(tmp_path / "r"))
    assert done.returncode == code, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("store: error: ") and says in line, line
    assert not (tmp_path / "r").exists()  # no empty report
    assert time.monotonic() - started < 30  # Spark never started (it takes longer alone)


def test_send_stamps_the_send_time_when_the_caller_gives_none(tmp_path: Path) -> None:
    config = StoreConfig.from_mapping(
        {"journal-directory": str(tmp_path / "j"), "bindings-directory": str(tmp_path / "b"),
         "large-messages-directory": str(tmp_path / "l"), "paging-directory": str(tmp_path / "p")}
    )  # fmt: skip
    clock = [1_700_000_000_123]
    with StorageManager(open_store(config), clock=lambda: clock[0]) as sm:
        sm.load()
        sm.create_address("a")
        sm.create_queue("a", address="a")
        plain = Message("a", b"x")
        sm.send(plain)
        given = Message("a", b"y", timestamp=42)
        sm.send(given)
        clock[0] += 1000
        tx = sm.begin()
        tx.send(Message("a", b"z"))
        tx.commit()
        assert plain.timestamp == 1_700_000_000_123 and given.timestamp == 42
    with StorageManager(open_store(config)) as sm:
        sm.load()
        stamps = {bytes(m.body): m.timestamp for m, _ in sm.browse()}  # type: ignore[arg-type]
    assert stamps == {b"x": 1_700_000_000_123, b"y": 42, b"z": 1_700_000_001_123}
