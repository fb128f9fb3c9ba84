"""``store db``: the database store's schema (alembic migrations with the configured names).

::

    store db upgrade --config etc/broker.xml       # create or upgrade the store's tables
    store db current --config etc/store.toml       # the store's revision vs this code's
    store db check   --config etc/store.toml       # differences between tables and code
    store db sql --dialect postgresql              # the DDL for a DBA (Artemis's names)
    store db sql --dialect mysql --config etc/broker.xml   # ... with the configured names

Each subcommand is one call of :mod:`store.db.migrate`. ``current`` and ``check`` exit with 1
when the schema is behind or differs, so scripts can test them. ``sql`` needs no database;
``sql/<dialect>/schema.sql`` in the repository is its output with the default names.

Thread-safety: a command runs once per process; nothing is shared.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from store.config import load_config

__all__ = ["register"]

_DIALECTS = ("postgresql", "mysql", "mariadb", "sqlite", "derby", "h2")
#: Names a DBA may give for a dialect the store renders under another: MariaDB's DDL is MySQL's.
_DIALECT_ALIASES = {"mariadb": "mysql"}


def register(subparsers: Any) -> None:
    """Add ``db upgrade|current|check|sql`` to the ``store`` parser. Returns nothing."""
    parser = subparsers.add_parser(
        "db",
        help="database store schema: upgrade, current, check, sql",
        description="Manage the database store's tables (alembic migrations, configured names).",
    )
    sub = parser.add_subparsers(dest="db_command", metavar="SUBCOMMAND", required=True)

    upgrade = sub.add_parser("upgrade", help="create or upgrade the store's tables")
    _config_arg(upgrade, required=True)
    upgrade.add_argument("--revision", default="head", help="target revision (default: head)")
    upgrade.set_defaults(func=run_upgrade)

    current = sub.add_parser("current", help="show the store's schema revision")
    _config_arg(current, required=True)
    current.set_defaults(func=run_current)

    check = sub.add_parser("check", help="compare the store's tables with this code")
    _config_arg(check, required=True)
    check.set_defaults(func=run_check)

    sql = sub.add_parser("sql", help="print the DDL that creates the schema (offline)")
    sql.add_argument("--dialect", required=True, choices=_DIALECTS, help="target database")
    _config_arg(sql, required=False)
    sql.set_defaults(func=run_sql)


def _config_arg(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument(
        "--config",
        required=required,
        metavar="PATH",
        help="store configuration: a .toml file or an Artemis broker.xml",
    )


def run_upgrade(args: argparse.Namespace) -> int:
    """Upgrade the configured store's schema and print where it stands. Returns 0.

    Raises ConfigError, StoreUnavailableError (mapped to exit codes by ``store``).
    """
    from store.db.migrate import upgrade

    config = load_config(args.config)
    status = upgrade(config, revision=args.revision)
    print(f"schema at revision {status.current} (head {status.head})")
    return 0


def run_current(args: argparse.Namespace) -> int:
    """Print the configured store's revision and the head. Returns 0 when up to date, 1 when
    not (or when there is no schema). Raises as :func:`run_upgrade`."""
    from store.db.migrate import current

    status = current(load_config(args.config))
    state = "up to date" if status.up_to_date else "behind: run store db upgrade"
    print(f"current {status.current or '(none)'}  head {status.head}  {state}")
    return 0 if status.up_to_date else 1


def run_check(args: argparse.Namespace) -> int:
    """Print the differences between the store's tables and the code. Returns 0 when there
    are none, 1 otherwise. Raises as :func:`run_upgrade`."""
    from store.db.migrate import check

    diffs = check(load_config(args.config))
    for diff in diffs:
        print(diff)
    if not diffs:
        print("no differences")
    return 1 if diffs else 0


def run_sql(args: argparse.Namespace) -> int:
    """Print the DDL for ``--dialect``, with the configured names if ``--config`` is given.

    Returns 0. Raises ConfigError for a configuration without a database store.
    """
    from store.db.migrate import render_sql
    from store.db.schema import TableNames

    dialect = _DIALECT_ALIASES.get(args.dialect, args.dialect)
    names = None
    if args.config:
        config = load_config(args.config)
        if config.database_store is None:
            from store.errors import ConfigError

            raise ConfigError(
                f"{args.config} has no database-store section",
                key="database-store",
                value=None,
                allowed="a database-store section",
            )
        # The configured names, within the target database's identifier limit.
        limit = TableNames.defaults(dialect).max_length
        names = dataclasses.replace(TableNames.from_config(config.database_store), max_length=limit)
    print(render_sql(dialect, names), end="")
    return 0
