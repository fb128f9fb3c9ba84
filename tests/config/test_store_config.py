"""Configuration (store.config): Artemis keys and defaults, dict and TOML sources, validation.

broker.xml is covered in test_broker_xml.py, single values in test_values.py.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

import pytest

from store.config import (
    DatabaseStoreConfig,
    RetentionConfig,
    StoreConfig,
    load_config,
    masking,
)
from store.config.addresses import AddressSettings
from store.errors import ConfigError

TESTDATA = Path(__file__).parent.parent / "testdata" / "config"
PG = "jdbc:postgresql://127.0.0.1:5432/test"


def db(**keys: object) -> dict[str, object]:
    """A mapping with a database-store section holding ``keys`` (plus a URL unless given)."""
    return {"database-store": {"jdbc-connection-url": PG, **keys}}


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def raises_config(key: str, mapping: dict[str, object], **kwargs: object) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        StoreConfig.from_mapping(mapping, **kwargs)  # type: ignore[arg-type]
    err = info.value
    assert err.key == key, str(err)
    assert key in str(err)
    assert err.allowed
    return err


# --------------------------------------------------------------------------- defaults

STORE_DEFAULTS: list[tuple[str, object]] = [
    ("persistence_enabled", True),
    ("bindings_directory", "data/bindings"),
    ("journal_directory", "data/journal"),
    ("large_messages_directory", "data/largemessages"),
    ("paging_directory", "data/paging"),
    ("node_manager_lock_directory", "data/journal"),
    ("create_bindings_dir", True),
    ("create_journal_dir", True),
    ("journal_type", "ASYNCIO"),
    ("journal_file_size", 10485760),
    ("journal_min_files", 2),
    ("journal_pool_files", -1),
    ("journal_buffer_timeout", 500000),
    ("journal_buffer_size", 501760),
    ("journal_max_io", 4096),
    ("journal_sync_transactional", True),
    ("journal_sync_non_transactional", True),
    ("journal_datasync", True),
    ("journal_compact_min_files", 10),
    ("journal_compact_percentage", 30),
    ("journal_file_open_timeout", 5),
    ("journal_max_attic_files", 10),
    ("journal_lock_acquisition_timeout", -1),
    ("page_sync_timeout", 500000),
    ("id_cache_size", 20000),
    ("persist_id_cache", True),
    ("min_large_message_size", 102400),
    ("address_settings", {}),
    ("journal_retention", None),
    ("database_store", None),
]
DATABASE_DEFAULTS: list[tuple[str, object]] = [
    ("jdbc_driver_class_name", "org.apache.derby.jdbc.EmbeddedDriver"),
    ("jdbc_driver_classpath", None),
    ("jdbc_user", None),
    ("jdbc_password", None),
    ("data_source_properties", {}),
    ("bindings_table_name", "BINDINGS"),
    ("message_table_name", "MESSAGES"),
    ("large_message_table_name", "LARGE_MESSAGES"),
    ("page_store_table_name", "PAGE_STORE"),
    ("node_manager_store_table_name", "NODE_MANAGER_STORE"),
    ("jdbc_network_timeout", 20000),
    ("jdbc_lock_renew_period", 2000),
    ("jdbc_lock_expiration", 20000),
    ("jdbc_journal_sync_period", 5),
    ("jdbc_allowed_time_diff", 250),
    ("jdbc_max_page_size_bytes", 102400),
    ("jdbc_lock_acquisition_timeout", -1),
]


@pytest.mark.parametrize(("attr", "expected"), STORE_DEFAULTS, ids=[a for a, _ in STORE_DEFAULTS])
def test_store_default_is_artemis_default(attr, expected):
    assert getattr(StoreConfig(), attr) == expected
    assert getattr(StoreConfig.from_mapping({}), attr) == expected


@pytest.mark.parametrize(
    ("attr", "expected"), DATABASE_DEFAULTS, ids=[a for a, _ in DATABASE_DEFAULTS]
)
def test_database_default_is_artemis_default(attr, expected):
    assert getattr(DatabaseStoreConfig(jdbc_connection_url=PG), attr) == expected
    section = StoreConfig.from_mapping(db()).database_store
    assert section is not None
    assert getattr(section, attr) == expected


@pytest.mark.parametrize(
    ("journal_type", "timeout", "max_io"),
    [
        ("ASYNCIO", 500000, 4096),
        ("NIO", 3333333, 1),
        ("MAPPED", 3333333, 1),
        ("nio", 3333333, 1),
        ("Mapped", 3333333, 1),
    ],
)
def test_buffer_timeout_and_max_io_follow_the_journal_type(journal_type, timeout, max_io):
    cfg = StoreConfig.from_mapping({"journal-type": journal_type})
    assert cfg.journal_type == journal_type.upper()
    assert (cfg.journal_buffer_timeout, cfg.journal_max_io) == (timeout, max_io)


def test_explicit_buffer_timeout_and_max_io_are_kept_for_any_type():
    given = {"journal-type": "NIO", "journal-buffer-timeout": 0, "journal-max-io": 64}
    cfg = StoreConfig.from_mapping(given)
    assert (cfg.journal_buffer_timeout, cfg.journal_max_io) == (0, 64)
    moved = cfg.replace(journal_type="ASYNCIO")
    assert (moved.journal_buffer_timeout, moved.journal_max_io) == (0, 64)


def test_replace_derives_type_dependent_defaults_again():
    cfg = StoreConfig().replace(journal_type="NIO")
    assert (cfg.journal_buffer_timeout, cfg.journal_max_io) == (3333333, 1)
    back = cfg.replace(journal_type="ASYNCIO")
    assert (back.journal_buffer_timeout, back.journal_max_io) == (500000, 4096)


def test_page_sync_timeout_follows_the_journal_buffer_timeout_unless_given():
    assert StoreConfig.from_mapping({"journal-type": "NIO"}).page_sync_timeout == 3333333
    cfg = StoreConfig.from_mapping({"journal-buffer-timeout": 12000})
    assert cfg.page_sync_timeout == 12000
    assert cfg.replace(journal_buffer_timeout=8000).page_sync_timeout == 8000
    derived = StoreConfig()
    assert derived.replace(journal_type="NIO").page_sync_timeout == 3333333
    pinned = StoreConfig.from_mapping({"page-sync-timeout": 1000})
    assert pinned.journal_buffer_timeout == 500000
    assert pinned.replace(journal_buffer_timeout=8000).page_sync_timeout == 1000
    assert pinned.replace(journal_type="NIO").page_sync_timeout == 1000


def test_node_manager_lock_directory_follows_the_journal_directory():
    cfg = StoreConfig.from_mapping({"journal-directory": "/srv/j"})
    assert cfg.node_manager_lock_directory == "/srv/j"
    assert cfg.replace(journal_directory="/srv/k").node_manager_lock_directory == "/srv/k"
    pinned = cfg.replace(node_manager_lock_directory="/shared/lock")
    assert pinned.replace(journal_directory="/x").node_manager_lock_directory == "/shared/lock"


# --------------------------------------------------------------------------- every key

STORE_KEYS = [
    ("persistence-enabled", "false", "persistence_enabled", False),
    ("bindings-directory", "b", "bindings_directory", "b"),
    ("journal-directory", "j", "journal_directory", "j"),
    ("large-messages-directory", "l", "large_messages_directory", "l"),
    ("paging-directory", "p", "paging_directory", "p"),
    ("node-manager-lock-directory", "n", "node_manager_lock_directory", "n"),
    ("create-bindings-dir", "FALSE", "create_bindings_dir", False),
    ("create-journal-dir", False, "create_journal_dir", False),
    ("journal-type", "mapped", "journal_type", "MAPPED"),
    ("journal-file-size", "2M", "journal_file_size", 2 * 1024 * 1024),
    ("journal-min-files", "5", "journal_min_files", 5),
    ("journal-pool-files", 12, "journal_pool_files", 12),
    ("journal-buffer-timeout", "0", "journal_buffer_timeout", 0),
    ("journal-buffer-size", "100K", "journal_buffer_size", 102400),
    ("journal-max-io", 8, "journal_max_io", 8),
    ("journal-sync-transactional", "false", "journal_sync_transactional", False),
    ("journal-sync-non-transactional", "False", "journal_sync_non_transactional", False),
    ("journal-datasync", "false", "journal_datasync", False),
    ("journal-compact-min-files", "0", "journal_compact_min_files", 0),
    ("journal-compact-percentage", "100", "journal_compact_percentage", 100),
    ("journal-file-open-timeout", "1", "journal_file_open_timeout", 1),
    ("journal-max-attic-files", "0", "journal_max_attic_files", 0),
    ("journal-lock-acquisition-timeout", "500", "journal_lock_acquisition_timeout", 500),
    ("page-sync-timeout", "40000", "page_sync_timeout", 40000),
    ("page-sync-timeout", 0, "page_sync_timeout", 0),
    ("id-cache-size", "5000", "id_cache_size", 5000),
    ("id-cache-size", 0, "id_cache_size", 0),
    ("persist-id-cache", "false", "persist_id_cache", False),
    ("min-large-message-size", "50K", "min_large_message_size", 51200),
    ("min-large-message-size", 1, "min_large_message_size", 1),
]


@pytest.mark.parametrize(
    ("key", "given", "attr", "expected"), STORE_KEYS, ids=[f"{k[0]}={k[1]!r}" for k in STORE_KEYS]
)
def test_store_key_is_read(key, given, attr, expected):
    assert getattr(StoreConfig.from_mapping({key: given}), attr) == expected


DATABASE_KEYS = [
    ("jdbc-connection-url", "jdbc:mariadb://h/db", "jdbc_connection_url", "jdbc:mariadb://h/db"),
    ("jdbc-driver-class-name", "org.h2.Driver", "jdbc_driver_class_name", "org.h2.Driver"),
    (
        "jdbc-driver-classpath",
        "/usr/share/java/h2.jar",
        "jdbc_driver_classpath",
        "/usr/share/java/h2.jar",
    ),
    ("jdbc-user", "artemis", "jdbc_user", "artemis"),
    ("jdbc-password", "pw", "jdbc_password", "pw"),
    ("bindings-table-name", "T_B", "bindings_table_name", "T_B"),
    ("message-table-name", "T_M", "message_table_name", "T_M"),
    ("large-message-table-name", "T_L", "large_message_table_name", "T_L"),
    ("page-store-table-name", "T_P", "page_store_table_name", "T_P"),
    ("node-manager-store-table-name", "T_N", "node_manager_store_table_name", "T_N"),
    ("jdbc-network-timeout", "1000", "jdbc_network_timeout", 1000),
    ("jdbc-lock-renew-period", "1500", "jdbc_lock_renew_period", 1500),
    ("jdbc-lock-expiration", "60000", "jdbc_lock_expiration", 60000),
    ("jdbc-journal-sync-period", "10", "jdbc_journal_sync_period", 10),
    ("jdbc-allowed-time-diff", "0", "jdbc_allowed_time_diff", 0),
    ("jdbc-max-page-size-bytes", "1M", "jdbc_max_page_size_bytes", 1048576),
    ("jdbc-lock-acquisition-timeout", "30000", "jdbc_lock_acquisition_timeout", 30000),
    ("data-source-properties", {"a": "1"}, "data_source_properties", {"a": 1}),
]


@pytest.mark.parametrize(
    ("key", "given", "attr", "expected"), DATABASE_KEYS, ids=[k[0] for k in DATABASE_KEYS]
)
def test_database_key_is_read(key, given, attr, expected):
    section = StoreConfig.from_mapping(db(**{key: given})).database_store
    assert section is not None
    assert getattr(section, attr) == expected


RETENTION_KEYS = [
    ("period", "3", "period", 3),
    ("unit", "hours", "unit", "HOURS"),
    ("storage-limit", "10G", "storage_limit", 10 * 1024**3),
    ("period", "-1", "period", None),
    ("storage-limit", "-1", "storage_limit", None),
]


@pytest.mark.parametrize(
    ("key", "given", "attr", "expected"),
    RETENTION_KEYS,
    ids=[f"{k[0]}={k[1]}" for k in RETENTION_KEYS],
)
def test_retention_key_is_read(key, given, attr, expected):
    cfg = StoreConfig.from_mapping({"journal-retention": {"directory": "/h", key: given}})
    assert cfg.journal_retention is not None
    assert getattr(cfg.journal_retention, attr) == expected


@pytest.mark.parametrize(
    ("period", "unit", "seconds"),
    [
        (2, "DAYS", 172800.0),
        (3, "HOURS", 10800.0),
        (5, "MINUTES", 300.0),
        (7, "SECONDS", 7.0),
        (None, "DAYS", None),
    ],
)
def test_retention_period_in_seconds(period, unit, seconds):
    assert RetentionConfig(directory="/h", period=period, unit=unit).period_seconds == seconds


@pytest.mark.parametrize(
    ("mapping", "kind"),
    [
        ({}, "file"),
        (db(), "database"),
        ({"persistence-enabled": False}, "none"),
        ({"persistence-enabled": "false", **db()}, "none"),
    ],
    ids=["default", "database-store", "disabled", "disabled-wins-over-database"],
)
def test_store_type_is_selected_as_design_says(mapping, kind):
    assert StoreConfig.from_mapping(mapping).store_type == kind


# --------------------------------------------------------------------------- bad values

BAD_VALUES = [
    ({"journal-type": "AIO"}, "journal-type", "AIO"),
    ({"journal-file-size": 1023}, "journal-file-size", 1023),
    ({"journal-file-size": "3G"}, "journal-file-size", 3 * 1024**3),
    ({"journal-min-files": 1}, "journal-min-files", 1),
    ({"journal-min-files": "two"}, "journal-min-files", "two"),
    ({"journal-pool-files": 0}, "journal-pool-files", 0),
    ({"journal-pool-files": -2}, "journal-pool-files", -2),
    ({"journal-buffer-timeout": -1}, "journal-buffer-timeout", -1),
    ({"journal-buffer-size": 0}, "journal-buffer-size", 0),
    ({"journal-max-io": 0}, "journal-max-io", 0),
    ({"journal-compact-min-files": -1}, "journal-compact-min-files", -1),
    ({"journal-compact-percentage": 101}, "journal-compact-percentage", 101),
    ({"journal-compact-percentage": -1}, "journal-compact-percentage", -1),
    ({"journal-file-open-timeout": 0}, "journal-file-open-timeout", 0),
    ({"journal-max-attic-files": -1}, "journal-max-attic-files", -1),
    ({"journal-lock-acquisition-timeout": 0}, "journal-lock-acquisition-timeout", 0),
    ({"journal-datasync": "yes"}, "journal-datasync", "yes"),
    ({"journal-directory": ""}, "journal-directory", ""),
    ({"journal-directory": 5}, "journal-directory", 5),
    ({"page-sync-timeout": -1}, "page-sync-timeout", -1),
    ({"id-cache-size": -1}, "id-cache-size", -1),
    ({"persist-id-cache": "yes"}, "persist-id-cache", "yes"),
    ({"min-large-message-size": 0}, "min-large-message-size", 0),
    ({"min-large-message-size": "1.5M"}, "min-large-message-size", "1.5M"),
    (db(**{"jdbc-network-timeout": -1}), "jdbc-network-timeout", -1),
    (db(**{"jdbc-lock-renew-period": 0}), "jdbc-lock-renew-period", 0),
    (db(**{"jdbc-lock-expiration": 0}), "jdbc-lock-expiration", 0),
    (db(**{"jdbc-journal-sync-period": 0}), "jdbc-journal-sync-period", 0),
    (db(**{"jdbc-allowed-time-diff": -1}), "jdbc-allowed-time-diff", -1),
    (db(**{"jdbc-max-page-size-bytes": "0K"}), "jdbc-max-page-size-bytes", 0),
    (db(**{"jdbc-lock-acquisition-timeout": -5}), "jdbc-lock-acquisition-timeout", -5),
    (db(**{"jdbc-driver-class-name": " "}), "jdbc-driver-class-name", " "),
    ({"journal-retention": {"directory": "h", "period": 0}}, "journal-retention.period", 0),
    ({"journal-retention": {"directory": "h", "unit": "WEEKS"}}, "journal-retention.unit", "WEEKS"),
    (
        {"journal-retention": {"directory": "h", "storage-limit": "0"}},
        "journal-retention.storage-limit",
        0,
    ),
    ({"journal-retention": {"period": 1}}, "journal-retention.directory", None),
]


@pytest.mark.parametrize(
    ("mapping", "key", "value"), BAD_VALUES, ids=[f"{k}={v!r}" for _, k, v in BAD_VALUES]
)
def test_bad_value_is_config_error_naming_key_value_and_allowed(mapping, key, value):
    err = raises_config(key, mapping)
    assert err.value == value
    assert repr(value) in str(err)
    assert f"allowed: {err.allowed}" in str(err)


@pytest.mark.parametrize(
    "mapping",
    [
        {"journal-file-size": 1024},
        {"journal-min-files": 2},
        {"journal-pool-files": -1},
        {"journal-compact-percentage": 0},
        {"journal-lock-acquisition-timeout": -1},
        db(**{"jdbc-network-timeout": 0, "jdbc-lock-renew-period": 1, "jdbc-lock-expiration": 2}),
    ],
    ids=[
        "file-size-1024",
        "min-files-2",
        "pool-unbounded",
        "percentage-0",
        "lock-forever",
        "smallest-lease",
    ],
)
def test_boundary_values_are_accepted(mapping):
    StoreConfig.from_mapping(mapping)


@pytest.mark.parametrize("renew", [20000, 30000])
def test_renew_period_must_be_below_expiration_naming_both(renew):
    err = raises_config(
        "jdbc-lock-renew-period",
        db(**{"jdbc-lock-renew-period": renew, "jdbc-lock-expiration": 20000}),
    )
    assert "jdbc-lock-expiration" in str(err)


def test_network_timeout_above_lock_expiration_is_warned(caplog):
    with caplog.at_level(logging.WARNING, logger="store.config"):
        StoreConfig.from_mapping(db(**{"jdbc-network-timeout": 30000}))
    assert "jdbc-network-timeout" in caplog.text


@pytest.mark.parametrize(
    "section",
    [{}, {"jdbc-user": "u"}],
    ids=["empty", "without-url"],
)
def test_database_store_without_url_is_config_error(section):
    raises_config("jdbc-connection-url", {"database-store": section})


def test_url_that_is_no_url_is_rejected_without_showing_its_password():
    err = raises_config("jdbc-connection-url", db(**{"jdbc-connection-url": "admin:topsecret@db"}))
    assert "topsecret" not in str(err)


# --------------------------------------------------------------------------- unknown keys

UNKNOWN = [
    ({"journal-file-sise": 1}, "journal-file-sise", "journal-file-size"),
    ({"journal_file_size": 1}, "journal_file_size", "journal-file-size"),
    ({"jornal-type": "NIO"}, "jornal-type", "journal-type"),
    (db(**{"jdbc-pasword": "hunter2"}), "jdbc-pasword", "jdbc-password"),
    (db(**{"bindings-table": "B"}), "bindings-table", "bindings-table-name"),
    ({"journal-retention": {"directory": "h", "perod": 1}}, "perod", "period"),
    ({"database-stores": {}}, "database-stores", "database-store"),
]


@pytest.mark.parametrize(("mapping", "key", "suggestion"), UNKNOWN, ids=[k for _, k, _ in UNKNOWN])
def test_unknown_key_is_named_with_the_closest_known_one(mapping, key, suggestion):
    err = raises_config(key, mapping)
    assert f"did you mean {suggestion!r}" in str(err)
    assert "hunter2" not in str(err)


def test_unknown_key_without_a_close_match_lists_what_is_allowed():
    err = raises_config("zzz", {"zzz": 1})
    assert err.hint is None
    assert "journal-file-size" in str(err.allowed)


def test_replace_with_an_unknown_field_suggests_the_field():
    with pytest.raises(ConfigError) as info:
        StoreConfig().replace(journal_file_sise=1)
    assert "journal_file_size" in str(info.value)


def test_replace_validates_the_copy_and_leaves_the_original():
    cfg = StoreConfig()
    with pytest.raises(ConfigError):
        cfg.replace(journal_min_files=1)
    assert cfg.replace(journal_min_files=3).journal_min_files == 3
    assert cfg.journal_min_files == 2


# --------------------------------------------------------------------------- table names

TABLE_KEYS = [
    "bindings-table-name",
    "message-table-name",
    "large-message-table-name",
    "page-store-table-name",
    "node-manager-store-table-name",
]
BAD_NAMES = [
    "x; DROP TABLE y",
    "MESSAGES'--",
    'A"B',
    "two words",
    "tablé",
    "\uff2dessages",  # fullwidth M
    "1ABC",
    "",
    "a.b",
    "a-b",
    "x\n",
    "`x`",
]


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
@pytest.mark.parametrize("key", TABLE_KEYS)
def test_table_name_that_is_not_an_identifier_is_refused(key, name):
    err = raises_config(key, db(**{key: name}))
    assert err.value == name


@pytest.mark.parametrize("name", ["_x", "A$B", "a1_", "ORDER", "mixedCase"])
def test_odd_but_legal_table_names_are_kept(name):
    section = StoreConfig.from_mapping(db(**{"message-table-name": name})).database_store
    assert section is not None and section.message_table_name == name


LIMITS = [
    ("jdbc:postgresql://h/db", 63),
    ("postgresql+psycopg://h/db", 63),
    ("jdbc:mysql://h/db", 64),
    ("jdbc:mariadb://h/db", 64),
    ("mysql+pymysql://h/db", 64),
    ("jdbc:sqlite:/tmp/x.db", 128),
    ("sqlite:///x.db", 128),
    ("jdbc:derby:memory:x;create=true", 128),
    ("jdbc:h2:mem:x", 256),
    ("jdbc:oracle:thin:@h:1521:x", 30),
]


@pytest.mark.parametrize(("url", "limit"), LIMITS, ids=[u for u, _ in LIMITS])
def test_table_names_fit_the_target_databases_identifier_length(url, limit):
    longest = {"jdbc-connection-url": url, "message-table-name": "M" * limit}
    StoreConfig.from_mapping(db(**longest))
    raises_config("message-table-name", db(**{**longest, "message-table-name": "M" * (limit + 1)}))


@pytest.mark.parametrize(("url", "limit"), LIMITS, ids=[u for u, _ in LIMITS])
def test_page_store_name_leaves_room_for_a_20_digit_suffix(url, limit):
    room = {"jdbc-connection-url": url, "page-store-table-name": "P" * (limit - 20)}
    StoreConfig.from_mapping(db(**room))
    raises_config(
        "page-store-table-name", db(**{**room, "page-store-table-name": "P" * (limit - 19)})
    )


@pytest.mark.parametrize(
    ("names", "key"),
    [
        ({"bindings-table-name": "T", "message-table-name": "t"}, "message-table-name"),
        ({"large-message-table-name": "PAGE_STORE"}, "large-message-table-name"),
        ({"message-table-name": "page_store42"}, "message-table-name"),
    ],
    ids=["same-ignoring-case", "same-as-page-store", "collides-with-a-page-table"],
)
def test_tables_need_distinct_names(names, key):
    raises_config(key, db(**names))


# --------------------------------------------------------------------------- masked values


def enc(plain: str, key: str | None = None) -> str:
    return masking.wrap_enc(masking.mask(plain, key=key))


@pytest.mark.parametrize(
    ("keys", "attr", "plain"),
    [
        ({"jdbc-user": enc("db-user")}, "jdbc_user", "db-user"),
        ({"jdbc-password": enc("db-pass")}, "jdbc_password", "db-pass"),
        (
            {"jdbc-connection-url": enc("postgresql+psycopg://u:p@h/db")},
            "jdbc_connection_url",
            "postgresql+psycopg://u:p@h/db",
        ),
        (
            {"jdbc-connection-url": enc("jdbc:postgresql://h/db")},
            "jdbc_connection_url",
            "jdbc:postgresql://h/db",
        ),
        ({"jdbc-password": "ENC(-41e444c3ed07d6dd)"}, "jdbc_password", "secret"),
    ],
    ids=["user", "password", "sqlalchemy-url", "jdbc-url", "literal-enc"],
)
def test_enc_values_are_decoded(keys, attr, plain):
    section = StoreConfig.from_mapping(db(**keys)).database_store
    assert section is not None and getattr(section, attr) == plain


def test_enc_data_source_property_is_decoded_and_remembered_as_secret():
    props = {"password": enc("pool-pass"), "appName": "app"}
    section = StoreConfig.from_mapping(db(**{"data-source-properties": props})).database_store
    assert section is not None
    assert section.data_source_properties == {"password": "pool-pass", "appName": "app"}
    assert section.masked_properties == frozenset({"password"})


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("true", True),
        ("FALSE", False),
        ("42", 42),
        ("-7", -7),
        ("2147483648", "2147483648"),
        ("4.5", "4.5"),
        ("abc", "abc"),
        (8, 8),
        (True, True),
        (enc("123"), 123),
    ],
    ids=repr,
)
def test_data_source_property_values_are_typed_as_artemis_types_them(given, expected):
    section = StoreConfig.from_mapping(db(**{"data-source-properties": {"p": given}}))
    assert section.database_store is not None
    value = section.database_store.data_source_properties["p"]
    assert value == expected and type(value) is type(expected)


def test_data_source_property_of_another_type_is_refused():
    raises_config("data-source-properties.p", db(**{"data-source-properties": {"p": 1.5}}))


def test_bare_values_stay_plain_without_mask_password():
    section = StoreConfig.from_mapping(db(**{"jdbc-password": masking.mask("x")})).database_store
    assert section is not None and section.jdbc_password == masking.mask("x")


def test_mask_password_decodes_bare_user_password_and_url():
    mapping = {
        "mask-password": "true",
        "database-store": {
            "jdbc-connection-url": masking.mask("sqlite:///x.db"),
            "jdbc-user": masking.mask("u"),
            "jdbc-password": masking.mask("p"),
        },
    }
    section = StoreConfig.from_mapping(mapping).database_store
    assert section is not None
    assert (section.jdbc_connection_url, section.jdbc_user, section.jdbc_password) == (
        "sqlite:///x.db",
        "u",
        "p",
    )


@pytest.mark.parametrize("url", ["jdbc:postgresql://h/db", "postgresql://h/db"])
def test_mask_password_leaves_a_real_url_alone(url):
    mapping = {"mask-password": True, **db(**{"jdbc-connection-url": url})}
    section = StoreConfig.from_mapping(mapping).database_store
    assert section is not None and section.jdbc_connection_url == url


def test_password_codec_key_decodes_values_masked_with_it():
    codec = "org.apache.activemq.artemis.utils.DefaultSensitiveStringCodec;key=helloworld"
    mapping = {"password-codec": codec, **db(**{"jdbc-password": enc("p", key="helloworld")})}
    section = StoreConfig.from_mapping(mapping).database_store
    assert section is not None and section.jdbc_password == "p"


@pytest.mark.parametrize(
    "codec",
    [
        "com.example.MyCodec",
        "org.apache.activemq.artemis.utils.DefaultSensitiveStringCodec;algorithm=one-way",
    ],
    ids=["other-class", "one-way"],
)
def test_password_codec_that_cannot_decode_is_refused(codec):
    raises_config("password-codec", {"password-codec": codec})


@pytest.mark.parametrize(
    ("keys", "key"),
    [
        ({"jdbc-password": "ENC(-0123456789abcdef01)"}, "jdbc-password"),
        ({"jdbc-user": "ENC(not-hex)"}, "jdbc-user"),
        ({"jdbc-connection-url": "ENC(abcdef0123456789)"}, "jdbc-connection-url"),
        ({"data-source-properties": {"pw": "ENC(abcdef0123456789)"}}, "data-source-properties.pw"),
    ],
    ids=["password", "user", "url", "property"],
)
def test_undecodable_enc_names_the_key_but_never_the_value(keys, key):
    err = raises_config(key, db(**keys))
    assert err.value == "<hidden>"
    assert "0123456789abcdef" not in str(err) and "not-hex" not in str(err)


def test_enc_with_the_wrong_key_is_config_error(monkeypatch):
    monkeypatch.setenv(masking.KEY_ENV_VAR, "some-other-key")
    raises_config("jdbc-password", db(**{"jdbc-password": "ENC(-41e444c3ed07d6dd)"}))


SECRETS = ("dbadmin-user", "url-pass", "q-pass", "hunter2-pw", "prop-pass", "tok-val", "mask-plain")


def secret_config() -> StoreConfig:
    return StoreConfig.from_mapping(
        db(
            **{
                "jdbc-connection-url": "jdbc:postgresql://dbadmin-user:url-pass@h/db?password=q-pass&ssl=on",
                "jdbc-user": "dbadmin-user",
                "jdbc-password": "hunter2-pw",
                "data-source-properties": {
                    "password": "prop-pass",
                    "apiToken": "tok-val",
                    "x": enc("mask-plain"),
                    "appName": "visible-app",
                },
            }
        )
    )


@pytest.mark.parametrize("render", [repr, str], ids=["repr", "str"])
def test_secrets_never_appear_in_repr_or_str(render):
    cfg = secret_config()
    for text in (render(cfg), render(cfg.database_store)):
        for secret in SECRETS:
            assert secret not in text
        assert "visible-app" in text and "<hidden>" in text and "ssl=on" in text


def test_secrets_never_appear_in_logs_or_errors(caplog):
    with caplog.at_level(logging.DEBUG):
        cfg = secret_config()
        assert cfg.database_store is not None
        with pytest.raises(ConfigError) as info:
            cfg.database_store.replace(jdbc_lock_renew_period=10**6)
    for secret in SECRETS:
        assert secret not in caplog.text and secret not in str(info.value)


# --------------------------------------------------------------------------- TOML and files


def test_toml_with_sub_tables_is_read():
    cfg = load_config(TESTDATA / "store.toml")
    base = str(TESTDATA)
    assert cfg == StoreConfig(
        journal_type="NIO",
        journal_directory=f"{base}/data/journal",
        bindings_directory=f"{base}/data/bindings",
        large_messages_directory=f"{base}/data/large",
        paging_directory=f"{base}/data/paging",
        journal_file_size=20 * 1024**2,
        journal_min_files=3,
        journal_buffer_timeout=100000,
        page_sync_timeout=200000,
        id_cache_size=5000,
        persist_id_cache=False,
        min_large_message_size=50 * 1024,
        address_settings={
            "#": {"page_size_bytes": 1024**2},
            "orders.#": {"max_size_bytes": 10 * 1024**2, "address_full_policy": "BLOCK"},
        },
        journal_retention=RetentionConfig(
            directory=f"{base}/history", period=12, unit="HOURS", storage_limit=5 * 1024**3
        ),
        database_store=DatabaseStoreConfig(
            jdbc_connection_url="postgresql+psycopg://127.0.0.1:5432/test",
            jdbc_user="postgres",
            jdbc_password="s3cr3t!pass",
            jdbc_driver_classpath=f"{base}/jars/postgresql.jar",
            bindings_table_name="S_BINDINGS",
            message_table_name="S_MESSAGES",
            large_message_table_name="S_LARGE",
            page_store_table_name="S_PAGE",
            node_manager_store_table_name="S_NODE",
            jdbc_lock_renew_period=1000,
            jdbc_lock_expiration=10000,
            jdbc_network_timeout=5000,
            jdbc_journal_sync_period=2,
            jdbc_max_page_size_bytes=200 * 1024,
            data_source_properties={
                "pool_size": 8,
                "pool_pre_ping": True,
                "application_name": "store-tests",
            },
        ),
    )


def test_relative_directories_resolve_against_the_files_folder(tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    toml = (
        'journal-directory = "j"\npaging-directory = "/abs/p"\n'
        '[journal-retention]\ndirectory = "../history"\n'
        f'[database-store]\njdbc-connection-url = "{PG}"\n'
        f'jdbc-driver-classpath = "a.jar{os.pathsep}/b.jar"\n'
    )
    cfg = load_config(write(etc, "store.toml", toml))
    assert cfg.journal_directory == str(etc / "j")
    assert cfg.node_manager_lock_directory == str(etc / "j")
    assert cfg.paging_directory == "/abs/p"
    assert cfg.bindings_directory == str(etc / "data" / "bindings")
    assert cfg.journal_retention is not None
    assert cfg.journal_retention.directory == str(tmp_path / "history")
    assert cfg.database_store is not None
    assert cfg.database_store.jdbc_driver_classpath == f"{etc / 'a.jar'}{os.pathsep}/b.jar"


def test_from_mapping_keeps_relative_directories_without_base_dir(tmp_path):
    assert StoreConfig.from_mapping({"journal-directory": "j"}).journal_directory == "j"
    based = StoreConfig.from_mapping({"journal-directory": "j"}, base_dir=tmp_path)
    assert based.journal_directory == str(tmp_path / "j")


_EMBEDDED_URLS = [
    # (as written in etc/store.toml, as resolved; {etc} is the file's folder)
    ("jdbc:sqlite:../data/store.db", "jdbc:sqlite:{root}/data/store.db"),
    ("jdbc:sqlite:store.db", "jdbc:sqlite:{etc}/store.db"),
    ("jdbc:sqlite:file:db/store.db?mode=rwc", "jdbc:sqlite:file:{etc}/db/store.db?mode=rwc"),
    ("sqlite:///../data/store.db", "sqlite:///{root}/data/store.db"),
    ("sqlite+pysqlite:///store.db?timeout=5", "sqlite+pysqlite:///{etc}/store.db?timeout=5"),
    ("jdbc:derby:../data/derby;create=true", "jdbc:derby:{root}/data/derby;create=true"),
    ("jdbc:derby:directory:store", "jdbc:derby:directory:{etc}/store"),
    # left as they are: absolute, in memory, a server, other JDBC URLs
    ("jdbc:sqlite:/var/lib/store.db", "jdbc:sqlite:/var/lib/store.db"),
    ("jdbc:sqlite::memory:", "jdbc:sqlite::memory:"),
    ("jdbc:sqlite:~/store.db", "jdbc:sqlite:~/store.db"),
    ("sqlite://", "sqlite://"),
    ("sqlite:////var/lib/store.db", "sqlite:////var/lib/store.db"),
    ("jdbc:derby:memory:store;create=true", "jdbc:derby:memory:store;create=true"),
    ("jdbc:derby://db.example:1527/store", "jdbc:derby://db.example:1527/store"),
    ("jdbc:derby:/var/lib/derby;create=true", "jdbc:derby:/var/lib/derby;create=true"),
    (PG, PG),
    ("jdbc:h2:./h2db", "jdbc:h2:./h2db"),
]


@pytest.mark.parametrize(("given", "expected"), _EMBEDDED_URLS, ids=[u for u, _ in _EMBEDDED_URLS])
def test_embedded_database_paths_resolve_against_the_files_folder(
    tmp_path, monkeypatch, given, expected
):
    """A relative SQLite file or embedded Derby folder in jdbc-connection-url follows the
    configuration file's folder, like the directories, wherever the process runs."""
    etc = tmp_path / "etc"
    etc.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    toml = f'[database-store]\njdbc-connection-url = "{given}"\n'
    cfg = load_config(write(etc, "store.toml", toml))
    assert cfg.database_store is not None
    url = expected.format(etc=etc, root=tmp_path)
    assert cfg.database_store.jdbc_connection_url == url
    assert list(elsewhere.iterdir()) == [] and sorted(p.name for p in etc.iterdir()) == [
        "store.toml"
    ]


def test_embedded_database_path_follows_base_dir_of_from_mapping_only(tmp_path):
    """from_mapping resolves against base_dir when given, else keeps the path relative (to
    the working directory); a data-source property url is resolved like the key."""
    section = {
        "jdbc-connection-url": "jdbc:sqlite:store.db",
        "data-source-properties": {"url": "jdbc:derby:db;create=true"},
    }
    plain = StoreConfig.from_mapping({"database-store": section}).database_store
    assert plain is not None and plain.jdbc_connection_url == "jdbc:sqlite:store.db"
    based = StoreConfig.from_mapping({"database-store": section}, base_dir=tmp_path).database_store
    assert based is not None
    assert based.jdbc_connection_url == f"jdbc:sqlite:{tmp_path}/store.db"
    assert based.data_source_properties["url"] == f"jdbc:derby:{tmp_path}/db;create=true"


def test_default_driver_class_is_told_apart_from_a_given_one():
    """jdbc-driver-class-name defaults to Derby's embedded driver (Artemis's default) but the
    configuration knows it was not given (store.db.urls then asks for it where Derby's
    driver cannot serve); the same text written out, or a driverClassName property, is given."""
    derby = "org.apache.derby.jdbc.EmbeddedDriver"
    default = StoreConfig.from_mapping(db()).database_store
    assert default is not None
    assert default.jdbc_driver_class_name == derby and not default.jdbc_driver_class_name_given
    assert not default.replace(jdbc_user="u").jdbc_driver_class_name_given
    given = StoreConfig.from_mapping(db(**{"jdbc-driver-class-name": derby})).database_store
    assert given is not None and given.jdbc_driver_class_name_given
    assert given == default  # the same value: only where it came from differs
    prop = db(**{"data-source-properties": {"driverClassName": "org.h2.Driver"}})
    from_prop = StoreConfig.from_mapping(prop).database_store
    assert from_prop is not None and from_prop.jdbc_driver_class_name_given


def test_path_objects_are_accepted_as_directories(tmp_path):
    cfg = StoreConfig.from_mapping({"journal-directory": tmp_path / "j"})
    assert cfg.journal_directory == str(tmp_path / "j")


def test_loading_a_config_touches_no_directory(tmp_path):
    write(tmp_path, "store.toml", 'journal-directory = "j"\n[journal-retention]\ndirectory = "h"\n')
    load_config(tmp_path / "store.toml")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.toml"]


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("missing.toml", None),
        ("store.yaml", "journal-type: NIO"),
        ("bad.toml", "journal-type = NIO"),
        ("latin1.toml", b"journal-directory = '\xe9'"),
    ],
    ids=["missing", "other-suffix", "bad-toml", "not-utf8"],
)
def test_unreadable_config_file_is_config_error(tmp_path, name, text):
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(str(path))
    assert info.value.key == "config file"


# --------------------------------------------------------------------------- immutability


def test_configuration_is_immutable_and_hashable():
    cfg = StoreConfig.from_mapping(db(**{"data-source-properties": {"a": "1"}}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.journal_type = "NIO"  # type: ignore[misc]
    assert cfg.database_store is not None
    with pytest.raises(TypeError):
        cfg.database_store.data_source_properties["a"] = 2  # type: ignore[index]
    same = StoreConfig.from_mapping(db(**{"data-source-properties": {"a": 1}}))
    assert cfg == same and hash(cfg) == hash(same)
    assert {cfg: "x"}[same] == "x"


def test_fields_are_keyword_only():
    with pytest.raises(TypeError):
        StoreConfig(True)  # type: ignore[misc]


def test_direct_construction_validates_like_from_mapping():
    with pytest.raises(ConfigError) as info:
        StoreConfig(journal_min_files=1)
    assert info.value.key == "journal-min-files"
    with pytest.raises(ConfigError):
        StoreConfig(journal_datasync="true")  # type: ignore[arg-type]


def test_database_replace_gives_a_validated_copy():
    section = DatabaseStoreConfig(jdbc_connection_url=PG)
    prefixed = section.replace(bindings_table_name="T1_BINDINGS", message_table_name="T1_MESSAGES")
    assert (prefixed.bindings_table_name, section.bindings_table_name) == (
        "T1_BINDINGS",
        "BINDINGS",
    )
    with pytest.raises(ConfigError):
        section.replace(message_table_name="x y")


# --------------------------------------------------------------------------- address settings

MiB = 1024**2
DEFAULT_SETTINGS = AddressSettings(
    max_size_bytes=-1,
    max_size_messages=-1,
    page_size_bytes=10 * MiB,
    address_full_policy="PAGE",
    max_read_page_bytes=20 * MiB,
)


def with_settings(settings: dict[str, dict[str, object]]) -> StoreConfig:
    return StoreConfig.from_mapping({"address-settings": settings})


def test_address_settings_default_to_artemis_defaults():
    assert AddressSettings() == DEFAULT_SETTINGS
    assert StoreConfig().address_settings_for("orders") == DEFAULT_SETTINGS
    assert with_settings({}).address_settings_for("") == DEFAULT_SETTINGS


# Each match gives max-size-messages = its position in the list, so the merged value names
# the match that won.
PRECEDENCE = [
    (["#", "orders.#", "orders"], "orders", "orders"),
    (["orders", "orders.#", "#"], "orders", "orders"),
    (["#", "orders.#"], "orders", "orders.#"),
    (["orders.#", "#"], "ordersx", "#"),
    (["#"], "a.b.c", "#"),
    (["orders.eu", "orders.*", "*.eu", "orders.#"], "orders.eu", "orders.eu"),
    (["orders.#", "orders.*", "#"], "orders.eu", "orders.*"),
    (["*.eu", "orders.*"], "orders.eu", "orders.*"),
    (["orders.*", "*.eu"], "orders.eu", "orders.*"),
    (["orders.*", "#"], "orders", "#"),
    (["orders.*", "#"], "orders.eu.de", "#"),
    (["#", "orders.#", "orders.eu.#"], "orders.eu.de", "orders.eu.#"),
    (["*.#", "orders.#"], "orders.x", "orders.#"),
    (["orders.*.#", "*.*.*"], "orders.a.b", "*.*.*"),
    (["*.b.#", "a.*.#"], "a.b", "a.*.#"),
    (["a.*.#", "*.b.#"], "a.b", "a.*.#"),
    (["activemq.management#", "#"], "activemq.management.x", "activemq.management#"),
    (["activemq.management#", "#"], "activemq.management", "activemq.management#"),
    (["activemq.management#", "#"], "activemq.managementx", "#"),
    (["ord*", "#"], "orders", "ord*"),
    (["orders.#"], "other", None),
]


@pytest.mark.parametrize(
    ("matches", "address", "winner"),
    PRECEDENCE,
    ids=[f"{address}:{'|'.join(matches)}" for matches, address, _ in PRECEDENCE],
)
def test_the_most_specific_match_wins(matches, address, winner):
    cfg = with_settings({match: {"max-size-messages": i} for i, match in enumerate(matches)})
    got = cfg.address_settings_for(address).max_size_messages
    assert got == (-1 if winner is None else matches.index(winner))


MERGE = [
    # (matches, address, expected fields that differ from the defaults)
    (
        {
            "#": {"page-size-bytes": "1M", "max-size-bytes": "100M", "address-full-policy": "drop"},
            "orders.#": {"max-size-bytes": "10Mb"},
            "orders": {"address-full-policy": "Block"},
        },
        "orders",
        {
            "page_size_bytes": MiB,
            "max_size_bytes": 10 * MiB,
            "address_full_policy": "BLOCK",
            "max_read_page_bytes": 2 * MiB,
        },
    ),
    (
        {
            "#": {"page-size-bytes": "1M", "max-size-bytes": "100M", "address-full-policy": "drop"},
            "orders.#": {"max-size-bytes": "10Mb"},
            "orders": {"address-full-policy": "Block"},
        },
        "other",
        {
            "page_size_bytes": MiB,
            "max_size_bytes": 100 * MiB,
            "address_full_policy": "DROP",
            "max_read_page_bytes": 2 * MiB,
        },
    ),
    (
        {"#": {"page-size-bytes": "1M"}, "orders": {"page-size-bytes": "3M"}},
        "orders",
        {"page_size_bytes": 3 * MiB, "max_read_page_bytes": 6 * MiB},
    ),
    (
        {"#": {"max-read-page-bytes": "8M"}, "orders": {"page-size-bytes": "3M"}},
        "orders",
        {"page_size_bytes": 3 * MiB, "max_read_page_bytes": 8 * MiB},
    ),
    (
        {"#": {"max-read-page-bytes": -1, "max-size-messages": "1000"}},
        "orders",
        {"max_read_page_bytes": -1, "max_size_messages": 1000},
    ),
]


@pytest.mark.parametrize(
    ("matches", "address", "expected"),
    MERGE,
    ids=["literal-then-hash", "hash-only", "derived-read-bytes", "given-read-bytes", "no-limit"],
)
def test_settings_merge_key_by_key(matches, address, expected):
    merged = with_settings(matches).address_settings_for(address)
    assert merged == dataclasses.replace(DEFAULT_SETTINGS, **expected)


def test_address_settings_from_toml(tmp_path):
    path = write(
        tmp_path,
        "store.toml",
        '[address-settings."#"]\npage-size-bytes = "2M"\nmax-size-messages = 500\n'
        '[address-settings."orders.#"]\nmax-size-bytes = "10Mb"\naddress-full-policy = "fail"\n',
    )
    cfg = load_config(path)
    assert cfg.address_settings == {
        "#": {"page_size_bytes": 2 * MiB, "max_size_messages": 500},
        "orders.#": {"max_size_bytes": 10 * MiB, "address_full_policy": "FAIL"},
    }
    assert cfg.address_settings_for("orders") == AddressSettings(
        max_size_bytes=10 * MiB,
        max_size_messages=500,
        page_size_bytes=2 * MiB,
        address_full_policy="FAIL",
        max_read_page_bytes=4 * MiB,
    )


def test_address_settings_of_the_toml_test_file():
    cfg = load_config(TESTDATA / "store.toml")
    assert cfg.address_settings_for("orders.eu") == dataclasses.replace(
        DEFAULT_SETTINGS,
        page_size_bytes=MiB,
        max_read_page_bytes=2 * MiB,
        max_size_bytes=10 * MiB,
        address_full_policy="BLOCK",
    )


BAD_ADDRESS_VALUES = [
    # (key, given, the value the error reports: sizes as parsed)
    ("page-size-bytes", 0, 0),
    ("page-size-bytes", "2G", 2 * 1024**3),
    ("page-size-bytes", "ten", "ten"),
    ("max-size-bytes", -2, -2),
    ("max-size-bytes", "1.5M", "1.5M"),
    ("max-size-messages", -5, -5),
    ("max-size-messages", "many", "many"),
    ("address-full-policy", "SPILL", "SPILL"),
    ("address-full-policy", 1, 1),
    ("max-read-page-bytes", 0, 0),
    ("max-read-page-bytes", "3G", 3 * 1024**3),
]


@pytest.mark.parametrize(
    ("key", "given", "reported"),
    BAD_ADDRESS_VALUES,
    ids=[f"{k}={v!r}" for k, v, _ in BAD_ADDRESS_VALUES],
)
def test_bad_address_setting_value_names_the_key_and_match(key, given, reported):
    err = raises_config(
        f'address-settings."orders.#".{key}', {"address-settings": {"orders.#": {key: given}}}
    )
    assert err.value == reported


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        ("page-size-byte", "page-size-bytes"),
        ("max_size_bytes", "max-size-bytes"),
        ("address-full-policies", "address-full-policy"),
        ("max-size-byte", "max-size-bytes"),
        ("adress-full-policy", "address-full-policy"),
        ("dead-letter-adress", "dead-letter-address"),
        ("auto-create-queues", None),
    ],
)
def test_unknown_address_setting_key_is_an_error_naming_key_and_match(key, suggestion):
    err = raises_config(key, {"address-settings": {"orders.#": {key: "1"}}})
    assert "orders.#" in str(err)
    if suggestion is not None:
        assert f"did you mean {suggestion!r}" in str(err)


def test_unknown_address_setting_key_in_toml_is_an_error(tmp_path):
    path = write(tmp_path, "s.toml", '[address-settings."#"]\nauto-create-queues = true\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.key == "auto-create-queues"
    assert '"#"' in str(info.value)


@pytest.mark.parametrize(
    "settings",
    [{"#.orders": {}}, {"orders.#.eu": {}}, {"": {}}, {" ": {}}],
    ids=["hash-first", "hash-inside", "empty", "blank"],
)
def test_match_artemis_refuses_is_an_error(settings):
    raises_config("address-settings", {"address-settings": settings})


@pytest.mark.parametrize(
    ("mapping", "key"),
    [
        ({"address-settings": "#"}, "address-settings"),
        ({"address-settings": {"#": 5}}, 'address-settings."#"'),
        ({"address-setting": {}}, "address-setting"),
    ],
    ids=["not-a-table", "setting-not-a-table", "misspelled-section"],
)
def test_address_settings_that_are_no_tables_are_errors(mapping, key):
    raises_config(key, mapping)


def test_address_settings_are_immutable_and_compare_by_value():
    given = {"orders.#": {"page-size-bytes": "1M"}, "#": {"address-full-policy": "drop"}}
    cfg = with_settings(given)
    same = with_settings(dict(reversed(given.items())))
    assert cfg == same and hash(cfg) == hash(same)
    assert cfg != with_settings({"orders.#": {"page-size-bytes": "2M"}})
    with pytest.raises(TypeError):
        cfg.address_settings["x"] = {}  # type: ignore[index]
    with pytest.raises(TypeError):
        cfg.address_settings["#"]["page_size_bytes"] = 1  # type: ignore[index]


def test_address_settings_are_given_to_the_constructor_and_replace_by_field_name():
    cfg = StoreConfig(address_settings={"orders.#": {"page_size_bytes": MiB}})
    assert cfg.address_settings_for("orders.eu").page_size_bytes == MiB
    changed = cfg.replace(address_settings={"#": {"address_full_policy": "fail"}})
    assert changed.address_settings == {"#": {"address_full_policy": "FAIL"}}
    assert changed.address_settings_for("orders.eu").page_size_bytes == 10 * MiB
    assert cfg.replace(journal_type="NIO").address_settings == cfg.address_settings
    with pytest.raises(ConfigError) as info:
        StoreConfig(address_settings={"#": {"page-size-bytes": MiB}})
    assert "page_size_bytes" in str(info.value)
    with pytest.raises(ConfigError) as info:
        cfg.replace(address_settings={"#": {"page_size_bytes": "1M"}})  # typed values only
    assert info.value.key == 'address-settings."#".page-size-bytes'


@pytest.mark.parametrize(
    ("settings", "key", "policy_from"),
    [
        (
            {"orders": {"max-size-bytes": 0, "address-full-policy": "BLOCK"}},
            'address-settings."orders".max-size-bytes',
            '"orders"',
        ),
        (
            {"orders.#": {"max-size-messages": "0", "address-full-policy": "block"}},
            'address-settings."orders.#".max-size-messages',
            '"orders.#"',
        ),
        (
            {"#": {"address-full-policy": "BLOCK"}, "orders": {"max-size-bytes": "0K"}},
            'address-settings."orders".max-size-bytes',
            '"#"',
        ),
        (
            {"#": {"max-size-messages": 0}, "orders.*": {"address-full-policy": "BLOCK"}},
            'address-settings."#".max-size-messages',
            '"orders.*"',
        ),
    ],
    ids=["one-match", "one-wildcard-match", "block-from-hash", "zero-from-hash"],
)
def test_a_zero_limit_under_block_is_refused_naming_the_key_and_matches(settings, key, policy_from):
    """A limit of 0 makes the address full before its first message: under BLOCK the first
    send would wait forever, so the configuration refuses it."""
    err = raises_config(key, {"address-settings": settings})
    assert "BLOCK" in str(err) and f"from match {policy_from}" in str(err)
    assert err.value == 0


@pytest.mark.parametrize("policy", ["PAGE", "DROP", "FAIL"])
def test_a_zero_limit_under_the_other_policies_is_accepted(policy):
    cfg = with_settings({"orders": {"max-size-bytes": 0, "address-full-policy": policy}})
    assert cfg.address_settings_for("orders").max_size_bytes == 0


def test_a_zero_limit_meeting_block_only_on_some_addresses_is_refused_when_merged():
    """Two wildcard matches that meet on no match text (``orders.*`` and ``*.eu``) are
    accepted, and the address where they meet is refused when its settings are merged."""
    cfg = with_settings(
        {"orders.*": {"max-size-bytes": 0}, "*.eu": {"address-full-policy": "BLOCK"}}
    )
    assert cfg.address_settings_for("orders.us").max_size_bytes == 0
    with pytest.raises(ConfigError) as info:
        cfg.address_settings_for("orders.eu")
    assert info.value.key == 'address-settings."orders.*".max-size-bytes'
    assert "'orders.eu'" in str(info.value) and 'from match "*.eu"' in str(info.value)


def test_address_settings_for_needs_a_text():
    with pytest.raises(TypeError):
        StoreConfig().address_settings_for(None)  # type: ignore[arg-type]


def test_address_settings_object_validates_and_derives():
    assert AddressSettings(page_size_bytes=MiB).max_read_page_bytes == 2 * MiB
    assert AddressSettings(page_size_bytes=MiB, max_read_page_bytes=-1).max_read_page_bytes == -1
    assert AddressSettings(address_full_policy="block").address_full_policy == "BLOCK"
    with pytest.raises(ConfigError) as info:
        AddressSettings(page_size_bytes=0)
    assert info.value.key == "page-size-bytes"
    with pytest.raises(ConfigError) as info:
        AddressSettings(max_read_page_bytes=3 * 1024**3)
    assert info.value.key == "max-read-page-bytes"
    with pytest.raises(dataclasses.FrozenInstanceError):
        AddressSettings().page_size_bytes = 1  # type: ignore[misc]


def test_address_settings_is_exported_from_the_package():
    import store

    assert store.AddressSettings is AddressSettings
    assert "AddressSettings" in store.__all__
