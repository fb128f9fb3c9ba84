"""The options every ``store data`` command shares: which store it works on.

A command names its store the way Artemis's ``artemis data`` tools do (reference §6):

- ``--config FILE``: the store's configuration (TOML or broker.xml); without it, Artemis's
  defaults (the file store under ``data/``);
- the file store's folders, each overriding the configuration: ``--journal``, ``--bindings``,
  ``--paging``, ``--large-messages``;
- the database store: ``--jdbc-connection-url URL`` selects it (replacing a configuration's
  file store, or overriding its ``database-store`` URL); ``--jdbc`` alone says "the
  configuration's database store" and fails when it has none; ``--jdbc-driver-class-name``,
  ``--jdbc-user``, ``--jdbc-password`` and the table names ``--jdbc-bindings-table-name``,
  ``--jdbc-message-table-name``, ``--jdbc-large-message-table-name``,
  ``--jdbc-page-store-table-name``, ``--jdbc-node-manager-table-name`` override the
  configuration's values (an override for a store that is not a database store is an error
  naming the option).

:func:`store_config` turns the options into one validated :class:`~store.config.StoreConfig`;
a bad value fails as ConfigError naming the option, before any store is opened.

Thread-safety: functions of the command's one thread.
"""

from __future__ import annotations

import argparse
from typing import Final

from store.config import DatabaseStoreConfig, StoreConfig, load_config
from store.errors import ConfigError
from store.file import survey

__all__ = ["FORCE_READ", "JDBC_OPTIONS", "add_store_options", "store_config"]

FORCE_READ: Final = "read even while a broker holds the store (its tail may be in flight)"

#: ``--jdbc-…`` option -> the :class:`DatabaseStoreConfig` field it overrides.
JDBC_OPTIONS: Final = {
    "jdbc_driver_class_name": "jdbc_driver_class_name",
    "jdbc_user": "jdbc_user",
    "jdbc_password": "jdbc_password",
    "jdbc_bindings_table_name": "bindings_table_name",
    "jdbc_message_table_name": "message_table_name",
    "jdbc_large_message_table_name": "large_message_table_name",
    "jdbc_page_store_table_name": "page_store_table_name",
    "jdbc_node_manager_table_name": "node_manager_store_table_name",
}

_FOLDERS: Final = {
    "journal": ("journal_directory", "message journal folder"),
    "bindings": ("bindings_directory", "bindings journal folder"),
    "paging": ("paging_directory", "paging folder"),
    "large_messages": ("large_messages_directory", "large-message folder"),
}


def add_store_options(
    parser: argparse.ArgumentParser,
    *,
    folders: tuple[str, ...] = ("journal", "bindings", "paging", "large_messages"),
    jdbc: bool = True,
) -> None:
    """Add ``--config``, the folder options named in ``folders`` and (``jdbc``) the database
    options to ``parser``. Returns nothing."""
    group = parser.add_argument_group("the store (default: the file store under ./data)")
    group.add_argument("--config", metavar="PATH", help="store configuration (TOML or broker.xml)")
    for name in folders:
        _field, what = _FOLDERS[name]
        group.add_argument(f"--{name.replace('_', '-')}", metavar="DIR", help=what)
    if not jdbc:
        return
    group.add_argument(
        "--jdbc",
        action="store_true",
        help="the database store of --config (an error when it has none)",
    )
    group.add_argument(
        "--jdbc-connection-url", metavar="URL", help="a database store's JDBC or SQLAlchemy URL"
    )
    for option, field in JDBC_OPTIONS.items():
        what = field.replace("_", " ").replace("jdbc ", "")
        group.add_argument(
            "--" + option.replace("_", "-"), metavar="VALUE", help=f"override the {what}"
        )


def store_config(args: argparse.Namespace, *, command: str) -> StoreConfig:
    """The configuration the options in ``args`` describe (see the module docstring).

    ``command`` (``"store data print"``) is named in errors. Returns a validated StoreConfig.
    Raises ConfigError naming the option or key that is wrong.
    """
    config = load_config(args.config) if getattr(args, "config", None) else StoreConfig()
    changes: dict[str, object] = {}
    for name, (field, _what) in _FOLDERS.items():
        value = getattr(args, name, None)
        if value:
            changes[field] = value
    url = getattr(args, "jdbc_connection_url", None)
    overrides = {
        field: getattr(args, option)
        for option, field in JDBC_OPTIONS.items()
        if getattr(args, option, None) is not None
    }
    database = config.database_store
    if url:
        database = (
            DatabaseStoreConfig(jdbc_connection_url=url)
            if database is None
            else database.replace(jdbc_connection_url=url)
        )
    elif getattr(args, "jdbc", False) and database is None:
        raise ConfigError(
            f"{command} --jdbc: the configuration has no database-store",
            key="--jdbc",
            allowed="--jdbc-connection-url URL, or a --config whose store is a database store",
        )
    if overrides:
        if database is None:
            first = next(o for o, f in JDBC_OPTIONS.items() if f in overrides)
            raise ConfigError(
                f"{command} --{first.replace('_', '-')}: the store is not a database store",
                key="--" + first.replace("_", "-"),
                allowed="--jdbc-connection-url URL, or a --config whose store is a database store",
            )
        database = database.replace(**overrides)
    if database is not config.database_store:
        changes["database_store"] = database
    if database is None and not getattr(args, "config", None):
        # Without a configuration file, keep the file size the message journal already has.
        journal = str(changes.get("journal_directory", config.journal_directory))
        size = survey.detect_file_size(journal, prefix="data")
        if size is not None and size >= 1024:
            changes["journal_file_size"] = size
    return config.replace(**changes) if changes else config
