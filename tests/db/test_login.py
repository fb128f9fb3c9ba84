"""A database that refuses the configured login is a configuration error (``ConfigError`` naming
``jdbc-password``, ``store`` exit 2), not "unavailable" (exit 4, which a script retries: for
ever, here). Real refusals: MariaDB with a user of this test's own made with a password and
given the wrong one, PostgreSQL with a role that does not exist (the shared server trusts
loopback, so a role is what it can refuse)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from store import ConfigError, StoreConfig, open_store
from store.db.migrate import current
from store.reporting.report import ReportSource, check_source
from tests.support.backends import unique_prefix
from tests.support.cli import run_store_here
from tests.support.db_backends import mysql_url, postgresql_url, store_mapping


@pytest.fixture
def mariadb_user() -> Iterator[str]:
    """A MariaDB user of this test alone, password ``right``, dropped after."""
    name = f"t{uuid.uuid4().hex[:10]}"
    admin = pymysql.connect(host="127.0.0.1", port=3306, user="root", password="")
    try:
        with admin.cursor() as cur:
            cur.execute(f"CREATE USER '{name}'@'127.0.0.1' IDENTIFIED BY 'right'")
            cur.execute(f"GRANT ALL ON test.* TO '{name}'@'127.0.0.1'")
        yield name
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{name}'@'127.0.0.1'")
        admin.close()


def _refused(which: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    prefix = unique_prefix()
    if which == "mariadb":
        url, _user, _password = mysql_url()
        return store_mapping(url, prefix, user=request.getfixturevalue("mariadb_user"),
                             password="wrong")  # fmt: skip
    url, _user, _password = postgresql_url()
    return store_mapping(url, prefix, user=f"{prefix}nobody", password="x")


@pytest.mark.parametrize("which", ["mariadb", "postgresql"])
def test_a_refused_login_is_a_configuration_error_naming_the_password(
    which: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    config = StoreConfig.from_mapping(_refused(which, request))
    for attempt in (lambda: open_store(config), lambda: current(config)):
        with pytest.raises(ConfigError, match="refused the login") as caught:
            attempt()
        assert caught.value.key == "jdbc-password"
        assert caught.value.hint is not None and "jdbc-user" in caught.value.hint
    # the report's probe, before Spark starts, says the same
    with pytest.raises(ConfigError, match="refused the login"):
        check_source(ReportSource(config=config))


@pytest.mark.parametrize("which", ["mariadb", "postgresql"])
def test_store_exits_2_on_a_refused_login(
    which: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    section = _refused(which, request)["database-store"]
    path = tmp_path / "store.toml"
    lines = ["[database-store]"] + [
        f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v}" for k, v in section.items()
    ]
    path.write_text("\n".join(lines) + "\n")
    for argv in (
        ("data", "print", "--config", str(path)),
        ("db", "current", "--config", str(path)),
    ):
        done = run_store_here(*argv)
        assert done.returncode == 2, (argv, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert lines[0].startswith("store: error: ") and "refused the login" in lines[0]
        assert lines[1].startswith("store: hint: check jdbc-user and jdbc-password")
