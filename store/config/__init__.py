"""The store's configuration: one immutable :class:`StoreConfig` (docs/config.md).

Build it from a file or a dict, never by hand-parsing::

    from store.config import StoreConfig, load_config

    cfg = load_config("etc/broker.xml")          # or a .toml file
    cfg = StoreConfig.from_mapping({"journal-type": "NIO", "journal-file-size": "10M"})
    cfg2 = cfg.replace(journal_min_files=4)      # a validated copy

Keys are Artemis's own kebab-case names with Artemis's defaults; each is a snake_case attribute
(``journal-file-size`` → ``journal_file_size``). Sizes are ints in bytes, periods in the unit
their key names. ``database_store`` is ``None`` for the file store. Selection (see
:attr:`StoreConfig.store_type`): ``persistence-enabled = false`` → no persistence; else a
``database-store`` section → the database store; else the file store.

Sources, all producing the same mapping (nested dicts for ``database-store``, its
``data-source-properties``, ``journal-retention`` and ``address-settings``):

- TOML (``.toml``): top-level keys, the tables ``[database-store]``,
  ``[database-store.data-source-properties]``, ``[journal-retention]`` and one
  ``[address-settings."<match>"]`` per match;
- Artemis ``broker.xml`` (``.xml``): see :mod:`store.config.broker_xml`;
- :meth:`StoreConfig.from_mapping`.

Rules that are ours, decided where Artemis has none or differs:

- Relative directories (and ``jdbc-driver-classpath`` entries, and the path of an embedded
  database in ``jdbc-connection-url``: ``jdbc:sqlite:``, ``sqlite:///``, ``jdbc:derby:``) in a
  file are resolved against **the folder of that file**, defaults included, so a store never
  lands wherever the process happened to start. (Artemis resolves against its instance folder,
  the parent of ``etc/``.) ``from_mapping`` does the same against ``base_dir`` when one is
  given, and leaves them relative to the working directory without one.
- ``jdbc-driver-class-name`` defaults to Derby's embedded driver, as in Artemis, but only an
  embedded ``jdbc:derby:`` URL may rely on that default: any other URL that goes through JDBC
  must name its driver (checked when the store is opened, :mod:`store.db.urls`).
- ``jdbc-lock-renew-period`` defaults to 2000 ms, as the Artemis docs say (its code says 4000).
- Table names are identifiers matching ``^[A-Za-z_][A-Za-z0-9_$]*$`` (an ASCII letter or ``_``,
  then letters, digits, ``_`` or ``$``) within the target database's identifier length
  (:data:`IDENTIFIER_MAX_LENGTH`, from the URL's scheme); ``page-store-table-name`` leaves room
  for the 20-digit suffix of per-address tables. They must be distinct (ignoring case).
- ``ENC(...)`` values of ``jdbc-user``, ``jdbc-password``, data-source properties and
  ``jdbc-connection-url`` are decoded (:mod:`store.config.masking`). The Artemis keys
  ``mask-password`` (bare user, password and non-``jdbc:`` URL are masked) and
  ``password-codec`` (only ``org.apache.activemq.artemis.utils.DefaultSensitiveStringCodec``
  with optional ``;key=…``) are read for that and not kept.
- ``data-source-class-name`` is accepted and ignored: the pool is SQLAlchemy's.

Every bad value raises :class:`~store.errors.ConfigError` naming key, value and what is allowed,
before anything touches disk or database. Secrets (user, password, the URL's credentials,
masked properties) never appear in ``repr``, ``str``, logs or errors.

Address settings (docs/config.md#address-settings: paging limits by match, merged per address by
:meth:`StoreConfig.address_settings_for`) are modelled, matched and merged in
:mod:`store.config.addresses`; an unknown key in one is an error here, skipped in ``broker.xml``.

Layout: single values (sizes, identifiers, URLs) are parsed and checked in
:mod:`store.config.values`, ``broker.xml`` is read in :mod:`store.config.broker_xml`. This module
stays past the usual ~600 lines because the three dataclasses and the reader that fills them
change together: the reader derives each key and its parser from the fields, so a key is added
by adding a documented field.

Thread-safety: the configuration classes are immutable and safe to share between threads; the
functions are pure apart from reading the given file.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from store.config import masking
from store.config.addresses import (
    AddressSettings,
    freeze_address_settings,
    read_address_settings,
    settings_for,
)
from store.config.broker_xml import parse_broker_xml
from store.config.values import (
    HIDDEN,
    IDENTIFIER_MAX_LENGTH,
    IDENTIFIER_PATTERN,
    INT32_MAX,
    INT64_MAX,
    PAGE_STORE_SUFFIX_DIGITS,
    FrozenMap,
    check_bool,
    check_int,
    check_text,
    db_dialect_of,
    identifier_max_length,
    invalid,
    parse_bool,
    parse_int,
    parse_size,
    parse_text,
    redact_url,
    resolve_embedded_url,
    unknown_key,
    validate_identifier,
)
from store.errors import ConfigError

__all__ = [
    "DatabaseStoreConfig",
    "IDENTIFIER_MAX_LENGTH",
    "IDENTIFIER_PATTERN",
    "JOURNAL_TYPES",
    "PAGE_STORE_SUFFIX_DIGITS",
    "RETENTION_UNITS",
    "RetentionConfig",
    "StoreConfig",
    "db_dialect_of",
    "identifier_max_length",
    "load_config",
    "redact_url",
    "validate_identifier",
]

_log = logging.getLogger(__name__)

JOURNAL_TYPES: Final = ("NIO", "ASYNCIO", "MAPPED")
RETENTION_UNITS: Final[Mapping[str, int]] = {
    "DAYS": 86400,
    "HOURS": 3600,
    "MINUTES": 60,
    "SECONDS": 1,
}
_CODEC_CLASS: Final = "org.apache.activemq.artemis.utils.DefaultSensitiveStringCodec"
_SQLALCHEMY_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://.*", re.DOTALL)
# Data-source property names whose values repr() hides even when they were not masked.
_SECRET_NAME = re.compile(r"(?i)pass|pwd|secret|token|credential|user")


# --------------------------------------------------------------------------- helpers


class _DerivedInt(int):
    """Marks an int field whose default is derived from another field (immutable; shareable)."""


class _DerivedStr(str):
    """Marks a str field whose default is derived from another field (immutable; shareable)."""


# Identity-compared sentinels: the default of a field that depends on journal-type or
# journal-directory. Resolved in __post_init__; never visible on a built object.
_DERIVE: Final = _DerivedInt(-1)
_DERIVE_DIR: Final = _DerivedStr("")


class _DefaultStr(str):
    """A str field's default that stays visible and marks "not given" (immutable; shareable)."""


# jdbc-driver-class-name when none was given: equal to Derby's class name (Artemis's default),
# but told apart from the same text written by the user (see jdbc_driver_class_name_given).
_DERBY_EMBEDDED_DRIVER: Final = _DefaultStr("org.apache.derby.jdbc.EmbeddedDriver")


def _kebab(name: str) -> str:
    return name.replace("_", "-")


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)  # frozen dataclasses normalise in __post_init__


def _replace_checked(obj: Any, changes: Mapping[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(obj) if f.init}
    for name in changes:
        if name not in names:
            raise unknown_key(name, names, type(obj).__name__)
    return dataclasses.replace(obj, **changes)


# --------------------------------------------------------------------------- dataclasses


@dataclass(frozen=True, kw_only=True)
class RetentionConfig:
    """Journal retention (history): every finished message-journal file is copied here.

    Thread-safety: immutable; safe to share.
    """

    #: Required. Folder the history copies go to; relative paths in a file are resolved
    #: against the file's folder. Keep it on another disk than the journal to survive its loss.
    directory: str
    #: Default ``None`` (no age limit). Copies older than ``period`` times ``unit`` are pruned; a
    #: longer period lets ``store data recover`` go further back at the cost of disk space.
    period: int | None = None
    #: Default ``"DAYS"``; one of DAYS, HOURS, MINUTES, SECONDS (any case in input).
    unit: str = "DAYS"
    #: Default ``None`` (unlimited), bytes. Oldest copies are pruned while the history holds
    #: more than ``storage_limit // journal_file_size`` files; bounds disk use, shortens history.
    storage_limit: int | None = None

    def __post_init__(self) -> None:
        _set(self, "directory", os.fspath(self.directory))
        check_text("journal-retention.directory", self.directory)
        if self.period is not None:
            check_int("journal-retention.period", self.period, 1, INT64_MAX, "a positive integer")
        unit = self.unit.upper() if isinstance(self.unit, str) else self.unit
        if unit not in RETENTION_UNITS:
            raise invalid("journal-retention.unit", self.unit, "DAYS, HOURS, MINUTES or SECONDS")
        _set(self, "unit", unit)
        if self.storage_limit is not None:
            check_int(
                "journal-retention.storage-limit",
                self.storage_limit,
                1,
                INT64_MAX,
                "a positive size in bytes (e.g. 10G)",
            )

    @property
    def period_seconds(self) -> float | None:
        """The retention period in seconds, or ``None`` when there is no age limit."""
        if self.period is None:
            return None
        return float(self.period * RETENTION_UNITS[self.unit])


@dataclass(frozen=True, kw_only=True, repr=False)
class DatabaseStoreConfig:
    """The ``database-store`` section: journals, large messages, paging and HA in a database.

    ``repr`` and ``str`` hide the user, the password, credentials inside the URL, and secret
    data-source properties (those in :attr:`masked_properties` or whose names mention a
    password, secret, token, credential or user).

    Thread-safety: immutable; safe to share.
    """

    #: Required. A JDBC URL (``jdbc:postgresql://…``, ``jdbc:mysql://…``, ``jdbc:mariadb://…``,
    #: ``jdbc:sqlite:…``, ``jdbc:derby:…``, ``jdbc:h2:…``) or a SQLAlchemy URL. ENC-decoded.
    jdbc_connection_url: str
    #: Default Derby's embedded driver, which only embedded ``jdbc:derby:`` URLs may rely on:
    #: every other URL that goes through JDBC (JayDeBeApi) must name its driver class.
    jdbc_driver_class_name: str = _DERBY_EMBEDDED_DRIVER
    #: Default ``None``: ``$CLASSPATH`` at connect time. Jar files / folders (``os.pathsep``
    #: separated) holding the JDBC driver; ours, Artemis loads drivers from its own lib/.
    jdbc_driver_classpath: str | None = None
    #: Default ``None`` (the URL's or the driver's default). ENC-decoded; never shown.
    jdbc_user: str | None = None
    #: Default ``None``. ENC-decoded; never shown.
    jdbc_password: str | None = None
    #: Default empty. Driver / pool properties; "true"/"false" texts become bools and integer
    #: texts ints, as Artemis does; ENC values decoded.
    data_source_properties: Mapping[str, str | int | bool] = field(default_factory=dict)
    #: Default empty. Names of data-source properties whose values are secrets (those that were
    #: ``ENC(...)``), hidden from ``repr`` like the password.
    masked_properties: frozenset[str] = frozenset()
    #: Default "BINDINGS". Table of the bindings journal.
    bindings_table_name: str = "BINDINGS"
    #: Default "MESSAGES". Table of the message journal.
    message_table_name: str = "MESSAGES"
    #: Default "LARGE_MESSAGES". Table of large-message bodies.
    large_message_table_name: str = "LARGE_MESSAGES"
    #: Default "PAGE_STORE". Page-store directory table and prefix of per-address page tables;
    #: must leave room for a 20-digit suffix within the database's identifier length.
    page_store_table_name: str = "PAGE_STORE"
    #: Default "NODE_MANAGER_STORE". HA lock table; one per primary/backup pair, never shared.
    node_manager_store_table_name: str = "NODE_MANAGER_STORE"
    #: Default 20000 ms; 0 = no timeout. Bounds every statement; a lower value notices a dead
    #: database sooner but fails slow statements. Keep it at most ``jdbc_lock_expiration``.
    jdbc_network_timeout: int = 20000
    #: Default 2000 ms. How often the live lock is renewed; shorter costs more queries, longer
    #: risks expiry under load. Must be less than ``jdbc_lock_expiration``.
    jdbc_lock_renew_period: int = 2000
    #: Default 20000 ms. A lock not renewed for this long may be taken by the backup: shorter
    #: fails over faster, longer tolerates pauses (GC, network) better.
    jdbc_lock_expiration: int = 20000
    #: Default 5 ms. Batch window of non-sync appends: longer batches more rows per commit,
    #: at the price of latency for callers that do not sync.
    jdbc_journal_sync_period: int = 5
    #: Default 250 ms. Local vs database clock difference above which a warning is logged.
    jdbc_allowed_time_diff: int = 250
    #: Default 102400 bytes (100K). Upper bound of a database page; larger pages mean fewer
    #: rows but bigger blobs to read per page.
    jdbc_max_page_size_bytes: int = 102400
    #: Default -1 ms (wait forever). How long to wait for the live lock; an Artemis code key.
    jdbc_lock_acquisition_timeout: int = -1

    def __post_init__(self) -> None:
        check_text("jdbc-connection-url", self.jdbc_connection_url, secret=True)
        url = self.jdbc_connection_url.strip()
        if not (url.lower().startswith("jdbc:") or _SQLALCHEMY_URL.fullmatch(url)):
            raise invalid(
                "jdbc-connection-url",
                redact_url(url),
                "a jdbc: URL (jdbc:postgresql://host/db, jdbc:sqlite:path, …) or a SQLAlchemy URL",
            )
        _set(self, "jdbc_connection_url", url)
        check_text("jdbc-driver-class-name", self.jdbc_driver_class_name)
        check_text("jdbc-driver-classpath", self.jdbc_driver_classpath, optional=True)
        for key, value in (("jdbc-user", self.jdbc_user), ("jdbc-password", self.jdbc_password)):
            if value is not None and not isinstance(value, str):
                raise invalid(key, value, "a text", secret=True)
        self._normalise_properties()
        self._check_tables()
        self._check_timing()

    def _normalise_properties(self) -> None:
        props = self.data_source_properties
        if not isinstance(props, Mapping):
            raise invalid("data-source-properties", props, "a table of name = value")
        for name, value in props.items():
            key = f"data-source-properties.{name}"
            if not isinstance(name, str) or not name.strip():
                raise invalid("data-source-properties", name, "property names that are text")
            if not isinstance(value, (str, int, bool)):
                raise invalid(key, value, "a text, an integer or true/false", secret=True)
        _set(self, "data_source_properties", FrozenMap(props))
        _set(self, "masked_properties", frozenset(self.masked_properties))

    def _check_tables(self) -> None:
        limit = identifier_max_length(db_dialect_of(self.jdbc_connection_url))
        names = {
            "bindings-table-name": self.bindings_table_name,
            "message-table-name": self.message_table_name,
            "large-message-table-name": self.large_message_table_name,
            "node-manager-store-table-name": self.node_manager_store_table_name,
        }
        for key, name in names.items():
            validate_identifier(name, key=key, max_length=limit)
        page = validate_identifier(
            self.page_store_table_name,
            key="page-store-table-name",
            max_length=limit - PAGE_STORE_SUFFIX_DIGITS,
        )
        seen: dict[str, str] = {page.upper(): "page-store-table-name"}
        for key, name in names.items():
            other = seen.get(name.upper())
            if other is None and re.fullmatch(re.escape(page) + "[0-9]+", name, re.IGNORECASE):
                other = "page-store-table-name"  # would collide with a per-address page table
            if other is not None:
                raise invalid(
                    key,
                    name,
                    f"a table name different from {other}",
                    hint="every journal, file and lock table needs its own name",
                )
            seen[name.upper()] = key

    def _check_timing(self) -> None:
        positive = "a positive number of milliseconds"
        check_int(
            "jdbc-network-timeout",
            self.jdbc_network_timeout,
            0,
            INT32_MAX,
            "0 (no timeout) or a positive number of milliseconds",
        )
        check_int("jdbc-lock-renew-period", self.jdbc_lock_renew_period, 1, INT64_MAX, positive)
        check_int("jdbc-lock-expiration", self.jdbc_lock_expiration, 1, INT64_MAX, positive)
        check_int("jdbc-journal-sync-period", self.jdbc_journal_sync_period, 1, INT64_MAX, positive)
        check_int(
            "jdbc-allowed-time-diff",
            self.jdbc_allowed_time_diff,
            0,
            INT64_MAX,
            "0 or a positive number of milliseconds",
        )
        check_int(
            "jdbc-max-page-size-bytes",
            self.jdbc_max_page_size_bytes,
            1,
            INT32_MAX,
            "a positive size in bytes (e.g. 100K)",
        )
        check_int(
            "jdbc-lock-acquisition-timeout",
            self.jdbc_lock_acquisition_timeout,
            1,
            INT64_MAX,
            "-1 (wait forever) or a positive number of milliseconds",
            also=(-1,),
        )
        if self.jdbc_lock_renew_period >= self.jdbc_lock_expiration:
            raise invalid(
                "jdbc-lock-renew-period",
                self.jdbc_lock_renew_period,
                f"less than jdbc-lock-expiration ({self.jdbc_lock_expiration} ms)",
                hint="the lock must be renewed before it expires",
            )
        if self.jdbc_network_timeout > self.jdbc_lock_expiration:
            _log.warning(
                "jdbc-network-timeout (%d ms) exceeds jdbc-lock-expiration (%d ms): a stalled "
                "statement may outlive the lock",
                self.jdbc_network_timeout,
                self.jdbc_lock_expiration,
            )

    def __repr__(self) -> str:
        props = {
            name: HIDDEN if name in self.masked_properties or _SECRET_NAME.search(name) else value
            for name, value in self.data_source_properties.items()
        }
        parts = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "jdbc_connection_url":
                value = redact_url(value)
            elif f.name in ("jdbc_user", "jdbc_password") and value is not None:
                value = HIDDEN
            elif f.name == "data_source_properties":
                value = props
            parts.append(f"{f.name}={value!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

    @property
    def dialect(self) -> str:
        """The database the URL points at (see :func:`db_dialect_of`)."""
        return db_dialect_of(self.jdbc_connection_url)

    @property
    def jdbc_driver_class_name_given(self) -> bool:
        """False when ``jdbc-driver-class-name`` was left at its default (Derby's embedded
        driver) and no ``driverClassName`` data-source property names one."""
        return "driverClassName" in self.data_source_properties or not isinstance(
            self.jdbc_driver_class_name, _DefaultStr
        )

    def replace(self, **changes: Any) -> DatabaseStoreConfig:
        """Copy with some fields changed (snake_case names), validated like a new one.

        Returns the new configuration. Raises :class:`ConfigError` for an unknown field or a
        bad value.
        """
        result: DatabaseStoreConfig = _replace_checked(self, changes)
        return result


#: ``global-max-size`` when not given (or -1): see :attr:`StoreConfig.global_max_size`.
DEFAULT_GLOBAL_MAX_SIZE: Final = 64 * 1024 * 1024

#: The roles of a shared-store HA pair (``StoreConfig.ha_role``).
HA_ROLES: Final = ("primary", "backup")
_POSITIVE = "a positive integer"
_INT_RULES: Final[Mapping[str, tuple[int, int, str, tuple[int, ...]]]] = {
    # field: (lowest, highest, allowed text, extra allowed values)
    "journal_file_size": (1024, INT32_MAX, "a size from 1024 bytes to 2G (e.g. 10M)", ()),
    "journal_min_files": (2, INT32_MAX, "an integer of at least 2", ()),
    "journal_pool_files": (1, INT32_MAX, "-1 (unbounded) or a positive integer", (-1,)),
    "journal_buffer_timeout": (0, INT32_MAX, "0 (no buffering) or a positive number of ns", ()),
    "journal_buffer_size": (1, INT32_MAX, "a positive size in bytes (e.g. 490K)", ()),
    "journal_max_io": (1, INT32_MAX, _POSITIVE, ()),
    "journal_compact_min_files": (0, INT32_MAX, "0 (no compaction) or a positive integer", ()),
    "journal_compact_percentage": (0, 100, "an integer from 0 to 100", ()),
    "journal_file_open_timeout": (1, INT32_MAX, "a positive number of seconds", ()),
    "journal_max_attic_files": (0, INT32_MAX, "0 or a positive integer", ()),
    "page_sync_timeout": (0, INT32_MAX, "0 (sync at once) or a positive number of ns", ()),
    "id_cache_size": (0, INT32_MAX, "0 or a positive integer", ()),
    "min_large_message_size": (1, INT32_MAX, "a positive size in bytes (e.g. 100K)", ()),
    "global_max_size": (0, INT64_MAX, "-1 (the default) or a size in bytes (e.g. 512M)", ()),
    "global_max_messages": (0, INT64_MAX, "-1 (no limit) or an integer of 0 or more", (-1,)),
    "journal_lock_acquisition_timeout": (
        1,
        INT64_MAX,
        "-1 (wait forever) or a positive number of milliseconds",
        (-1,),
    ),
}
_DIRECTORY_FIELDS: Final = (
    "bindings_directory",
    "journal_directory",
    "large_messages_directory",
    "paging_directory",
    "node_manager_lock_directory",
)
_BOOL_FIELDS: Final = (
    "persistence_enabled",
    "create_bindings_dir",
    "create_journal_dir",
    "journal_sync_transactional",
    "journal_sync_non_transactional",
    "journal_datasync",
    "persist_id_cache",
)


@dataclass(frozen=True, kw_only=True)
class StoreConfig:
    """Everything the store reads from its configuration (docs/config.md), immutable and validated.

    Build it with :meth:`from_mapping` or :func:`load_config`; the constructor takes the
    snake_case fields directly and validates them the same way. :meth:`replace` makes a
    validated copy.

    Thread-safety: immutable; safe to share between threads.
    """

    #: Default True. False = zero persistence: nothing written, loads return nothing; fastest,
    #: but every message is lost when the process stops.
    persistence_enabled: bool = True
    #: Default "data/bindings". Folder of the bindings journal (addresses, queues, id counter).
    bindings_directory: str = "data/bindings"
    #: Default "data/journal". Folder of the message journal; put it on the fastest disk.
    journal_directory: str = "data/journal"
    #: Default "data/largemessages". One file per large message body.
    large_messages_directory: str = "data/largemessages"
    #: Default "data/paging". One folder per paging address.
    paging_directory: str = "data/paging"
    #: Default: the journal_directory value. Lock files of the file node manager; two nodes
    #: sharing a store must see the same folder.
    node_manager_lock_directory: str = _DERIVE_DIR
    #: Default True. Create the bindings folder when missing (False makes a typo fail fast).
    create_bindings_dir: bool = True
    #: Default True. Create the journal folder when missing (False makes a typo fail fast).
    create_journal_dir: bool = True
    #: Default "ASYNCIO"; NIO, ASYNCIO or MAPPED (any case in input). ASYNCIO (Linux AIO,
    #: O_DIRECT) is fastest where it works; the journal falls back to NIO when it cannot.
    journal_type: str = "ASYNCIO"
    #: Default 10485760 bytes (10M), minimum 1024. Bigger files mean fewer rolls but coarser
    #: reclaim and a larger largest record.
    journal_file_size: int = 10485760
    #: Default 2 (at least 2). Files created up front and kept ready.
    journal_min_files: int = 2
    #: Default -1 (unbounded). Free files kept for reuse: more reuse, more disk held.
    journal_pool_files: int = -1
    #: Default 500000 ns for ASYNCIO, 3333333 ns for NIO/MAPPED; 0 = write at once. Longest wait
    #: to batch appends into one write + sync: higher batches more, adds latency to lone syncs.
    journal_buffer_timeout: int = _DERIVE
    #: Default 501760 bytes (490K). Write buffer: the most one batch holds; also bounds a record.
    journal_buffer_size: int = 501760
    #: Default 4096 for ASYNCIO, 1 for NIO/MAPPED. Writes in flight at once.
    journal_max_io: int = _DERIVE
    #: Default True. Commit/prepare/rollback wait until durable; False risks losing
    #: acknowledged transactions on a crash.
    journal_sync_transactional: bool = True
    #: Default True. Non-transactional sync appends wait until durable; False is faster and
    #: risks losing acknowledged messages on a crash.
    journal_sync_non_transactional: bool = True
    #: Default True. fdatasync/msync (and O_DIRECT for ASYNCIO); False survives a process
    #: crash but not a power loss.
    journal_datasync: bool = True
    #: Default 10; 0 disables compaction. Data files needed before compaction is considered.
    journal_compact_min_files: int = 10
    #: Default 30 (percent, 0..100). Compact when live data is below this share of the files:
    #: higher reclaims more space for more compaction work.
    journal_compact_percentage: int = 30
    #: Default 5 seconds. Wait for the pre-opened next file before opening one synchronously.
    journal_file_open_timeout: int = 5
    #: Default 10. Files of the wrong size kept aside (attic) for inspection instead of deleted.
    journal_max_attic_files: int = 10
    #: Default -1 ms (wait forever). How long to wait for the journal lock of the file store.
    journal_lock_acquisition_timeout: int = -1
    #: Default: the journal_buffer_timeout value (ns); 0 = sync at once. Longest wait to batch
    #: page writes into one sync: longer batches more, adds latency to paged sends.
    page_sync_timeout: int = _DERIVE
    #: Default 20000. Duplicate ids remembered per address for duplicate detection; 0 keeps
    #: none. Larger catches duplicates sent further apart, at the cost of memory and records.
    id_cache_size: int = 20000
    #: Default True. Keep the duplicate-id cache in the message journal, so duplicate detection
    #: survives a restart; False writes less.
    persist_id_cache: bool = True
    #: Default 102400 bytes (100K); Artemis's client-side name. Bodies larger than this go to
    #: the large-message store, streamed instead of held in the journal and in memory.
    min_large_message_size: int = 102400
    #: Default 67108864 bytes (64M; -1 means the default, as in Artemis). Artemis's
    #: ``global-max-size``: once the messages held in memory by all addresses together reach
    #: this estimate of their memory (their records' bytes plus a measured per-message
    #: overhead, :data:`store.messaging.paging.MEMORY_PER_MESSAGE`), every address applies its
    #: ``address-full-policy`` to new messages, whatever its own ``max-size-bytes``: by default
    #: it pages, and paged messages are not loaded at start-up, so this bounds the memory of a
    #: running store and of its restart. Artemis takes half the JVM's heap; a Python process has
    #: no heap ceiling to take a share of, so ours is a fixed size: the same depth starts paging
    #: on every machine, and a restart with any number of messages waiting stays within a few
    #: hundred MB. Raise it to hold more in memory (faster delivery, more memory).
    global_max_size: int = DEFAULT_GLOBAL_MAX_SIZE
    #: Default -1 (no limit). Artemis's ``global-max-messages``: the same as
    #: ``global_max_size``, counted in messages held in memory by all addresses together.
    global_max_messages: int = -1
    #: Default empty. Address settings by match (``"orders.#"``): a mapping of match to the
    #: snake_case fields of :class:`~store.config.addresses.AddressSettings` it gives; see
    #: :meth:`address_settings_for` for the merged settings of one address.
    address_settings: Mapping[str, Mapping[str, Any]] = FrozenMap({})
    #: Default None (no history). Copy every finished message-journal file for replay/recovery.
    journal_retention: RetentionConfig | None = None
    #: Default None (file store). A database-store section selects the database store.
    database_store: DatabaseStoreConfig | None = None
    #: Default None (no HA role). "primary" or "backup": this node's role in a shared-store
    #: HA pair (``store ha run``'s default role; docs/ha.md). From ``broker.xml``'s
    #: ``<ha-policy><shared-store><primary/>|<backup/>`` (or Artemis's older ``<master/>`` /
    #: ``<slave/>``).
    ha_role: str | None = None
    # Names of fields whose values were derived (not given); replace() derives them again.
    _derived: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        journal_type = self.journal_type
        if not isinstance(journal_type, str) or journal_type.upper() not in JOURNAL_TYPES:
            raise invalid("journal-type", journal_type, "NIO, ASYNCIO or MAPPED")
        journal_type = journal_type.upper()
        _set(self, "journal_type", journal_type)
        derived: set[str] = set()
        if self.journal_buffer_timeout is _DERIVE:
            derived.add("journal_buffer_timeout")
            _set(self, "journal_buffer_timeout", 500000 if journal_type == "ASYNCIO" else 3333333)
        if self.journal_max_io is _DERIVE:
            derived.add("journal_max_io")
            _set(self, "journal_max_io", 4096 if journal_type == "ASYNCIO" else 1)
        if self.page_sync_timeout is _DERIVE:
            derived.add("page_sync_timeout")
            _set(self, "page_sync_timeout", self.journal_buffer_timeout)
        for name in _DIRECTORY_FIELDS:
            value = getattr(self, name)
            if value is _DERIVE_DIR:
                derived.add(name)
                value = self.journal_directory
            if isinstance(value, os.PathLike):
                value = os.fspath(value)
            check_text(_kebab(name), value)
            _set(self, name, str(value))
        _set(self, "_derived", frozenset(derived))
        for name in _BOOL_FIELDS:
            check_bool(_kebab(name), getattr(self, name))
        if self.ha_role is not None:
            role = self.ha_role.lower() if isinstance(self.ha_role, str) else self.ha_role
            if role not in HA_ROLES:
                raise invalid("ha-role", self.ha_role, "primary or backup")
            _set(self, "ha_role", role)
        if type(self.global_max_size) is int and self.global_max_size == -1:
            _set(self, "global_max_size", DEFAULT_GLOBAL_MAX_SIZE)  # Artemis: -1 = the default
        for name, (low, high, allowed, also) in _INT_RULES.items():
            check_int(_kebab(name), getattr(self, name), low, high, allowed, also=also)
        if not isinstance(self.journal_retention, (RetentionConfig, type(None))):
            raise invalid("journal-retention", self.journal_retention, "a journal-retention table")
        if not isinstance(self.database_store, (DatabaseStoreConfig, type(None))):
            raise invalid("database-store", self.database_store, "a database-store table")
        _set(self, "address_settings", freeze_address_settings(self.address_settings))
        self._check_global_limits_admit()

    def _check_global_limits_admit(self) -> None:
        """A global limit of 0 is always reached, and under BLOCK no ack can ever make room
        (nothing is held in memory): refused as an address's own limit of 0 under BLOCK is
        (:mod:`store.config.addresses`). Raises ConfigError naming the key and the match."""
        for key in ("global_max_size", "global_max_messages"):
            if getattr(self, key) != 0:
                continue
            for match, settings in self.address_settings.items():
                if settings.get("address_full_policy") == "BLOCK":
                    raise invalid(
                        _kebab(key),
                        0,
                        "above 0 or -1 while an address setting has address-full-policy BLOCK",
                        hint=f'address-settings."{match}" gives BLOCK: no send could ever go'
                        " through",
                    )

    def address_settings_for(self, address: str) -> AddressSettings:
        """The settings of ``address``: its matches merged key by key, most specific first.

        The precedence and match syntax are Artemis's (see :mod:`store.config.addresses`);
        keys no match gives take Artemis's defaults. Returns the merged
        :class:`AddressSettings`. Raises :class:`TypeError` when ``address`` is not a text.
        """
        return settings_for(self.address_settings, address)

    def page_size_of(self, address: str) -> int:
        """The ``page-size-bytes`` of ``address`` (its merged settings'; the database store
        caps it at ``jdbc-max-page-size-bytes``). Raises TypeError as
        :meth:`address_settings_for`."""
        return self.address_settings_for(address).page_size_bytes

    @property
    def store_type(self) -> Literal["none", "file", "database"]:
        """Which store this configuration selects: zero persistence, file store or database."""
        if not self.persistence_enabled:
            return "none"
        return "database" if self.database_store is not None else "file"

    def replace(self, **changes: Any) -> StoreConfig:
        """Copy with some fields changed (snake_case names), validated like a new one.

        Fields whose defaults follow another field (buffer timeout and max-io follow
        journal_type; page_sync_timeout follows journal_buffer_timeout; the node-manager lock
        folder follows journal_directory) follow it again unless they were given explicitly.
        Relative directories are kept as given.
        Returns the new configuration. Raises :class:`ConfigError` for an unknown field or a
        bad value.
        """
        derived = {name: _DERIVE_DIR if "directory" in name else _DERIVE for name in self._derived}
        result: StoreConfig = _replace_checked(self, {**derived, **changes})
        return result

    @classmethod
    def from_mapping(
        cls, mapping: Mapping[str, Any], *, base_dir: str | os.PathLike[str] | None = None
    ) -> StoreConfig:
        """Build a configuration from Artemis's kebab-case keys in a dict.

        Nested dicts hold ``database-store`` (with ``data-source-properties``),
        ``journal-retention`` and ``address-settings`` (match → keys). Values may be typed
        (ints, bools) or Artemis texts ("10M", "true"). Relative directories are resolved
        against ``base_dir`` when it is given.
        Returns the validated configuration. Raises :class:`ConfigError` for an unknown key
        (suggesting the closest known one), a bad value, or a masked value that cannot be
        decoded.
        """
        return _from_mapping(mapping, base_dir=None if base_dir is None else os.fspath(base_dir))


# --------------------------------------------------------------------------- from_mapping

# Keys are the kebab-case names of the fields; how a value is read follows the field's type.
_SIZE_FIELDS: Final = frozenset(
    {
        "journal_file_size",
        "journal_buffer_size",
        "jdbc_max_page_size_bytes",
        "storage_limit",
        "min_large_message_size",
        "global_max_size",
    }
)
_SECRET_FIELDS: Final = frozenset({"jdbc_connection_url", "jdbc_user", "jdbc_password"})
_NOT_KEYS: Final = frozenset(
    {
        "journal_retention",
        "database_store",
        "data_source_properties",
        "masked_properties",
        "address_settings",
    }
)
_CODEC_KEYS: Final = ("mask-password", "password-codec")  # read for decoding, not kept
_IGNORED_DATABASE_KEYS: Final = ("data-source-class-name",)


def _keys_of(cls: type) -> dict[str, dataclasses.Field[Any]]:
    return {
        _kebab(f.name): f for f in dataclasses.fields(cls) if f.init and f.name not in _NOT_KEYS
    }


def _parse_field(f: dataclasses.Field[Any], value: object, key: str) -> Any:
    if f.name in _SIZE_FIELDS:
        return parse_size(value, key=key)
    base_type = str(f.type).split("|")[0].strip()
    if base_type == "bool":
        return parse_bool(value, key=key)
    if base_type == "int":
        return parse_int(value, key=key)
    return parse_text(value, key=key, secret=f.name in _SECRET_FIELDS)


def _read_section(
    table: object, cls: type, where: str, *, prefix: str = "", extra: tuple[str, ...] = ()
) -> tuple[Mapping[str, Any], dict[str, Any]]:
    """Check a section's keys; return it and its parsed field values (``None`` = absent)."""
    keys = _keys_of(cls)
    if not isinstance(table, Mapping):
        raise invalid(where, table, "a table (mapping) of keys")
    for key in table:
        if not isinstance(key, str) or (key not in keys and key not in extra):
            raise unknown_key(str(key), (*keys, *extra), where)
    values = {
        f.name: _parse_field(f, table[key], prefix + key)
        for key, f in keys.items()
        if table.get(key) is not None
    }
    return table, values


@dataclass(frozen=True)
class _Codec:
    """How the masked values of one configuration are decoded (Artemis's codec settings).

    Thread-safety: immutable; safe to share.
    """

    key: str | None = None
    mask_password: bool = False

    def decode(self, value: str, setting: str, *, bare_is_masked: bool = False) -> str:
        if masking.is_enc(value):
            return masking.unmask(masking.unwrap_enc(value), key=self.key, setting=setting)
        if bare_is_masked and self.mask_password:
            return masking.unmask(value, key=self.key, setting=setting)
        return value


def _codec_from(mapping: Mapping[str, Any]) -> _Codec:
    key: str | None = None
    codec = mapping.get("password-codec")
    if codec is not None:
        parts = [part.strip() for part in parse_text(codec, key="password-codec").split(";")]
        if parts[0] != _CODEC_CLASS:
            raise invalid("password-codec", parts[0], f"{_CODEC_CLASS}[;key=<codec key>]")
        for part in parts[1:]:
            name, _, value = part.partition("=")
            if name.strip() == "key":
                key = value
            elif name.strip() == "algorithm" and value.strip() != "two-way":
                # one-way is a hash: values masked with it cannot be decoded by anyone.
                raise invalid("password-codec", f"algorithm={value}", "algorithm=two-way")
    mask_password = mapping.get("mask-password")
    return _Codec(
        key=key,
        mask_password=mask_password is not None and parse_bool(mask_password, key="mask-password"),
    )


def _resolve(base_dir: str | None, path: str) -> str:
    if base_dir is None or os.path.isabs(path):
        return path
    return os.path.normpath(os.path.join(base_dir, path))


def _from_mapping(mapping: Mapping[str, Any], *, base_dir: str | None) -> StoreConfig:
    sections = ("database-store", "journal-retention", "address-settings")
    table, kwargs = _read_section(
        mapping, StoreConfig, "the configuration", extra=(*sections, *_CODEC_KEYS)
    )
    codec = _codec_from(table)
    if base_dir is not None:
        for name in _DIRECTORY_FIELDS:
            value = kwargs.get(name, StoreConfig.__dataclass_fields__[name].default)
            if value is not _DERIVE_DIR:
                kwargs[name] = _resolve(base_dir, value)
    if table.get("journal-retention") is not None:
        kwargs["journal_retention"] = _retention_from(table["journal-retention"], base_dir)
    if table.get("database-store") is not None:
        kwargs["database_store"] = _database_from(table["database-store"], codec, base_dir)
    if table.get("address-settings") is not None:
        kwargs["address_settings"] = read_address_settings(table["address-settings"])
    return StoreConfig(**kwargs)


def _retention_from(section: object, base_dir: str | None) -> RetentionConfig:
    where = "journal-retention"
    _, values = _read_section(section, RetentionConfig, where, prefix=f"{where}.")
    if "directory" not in values:
        raise invalid(f"{where}.directory", None, "the folder history copies go to (required)")
    values["directory"] = _resolve(base_dir, values["directory"])
    for name in ("period", "storage_limit"):
        if values.get(name) == -1:  # Artemis's spelling of "no limit"
            values[name] = None
    return RetentionConfig(**values)


def _database_from(section: object, codec: _Codec, base_dir: str | None) -> DatabaseStoreConfig:
    table, values = _read_section(
        section,
        DatabaseStoreConfig,
        "database-store",
        extra=("data-source-properties", *_IGNORED_DATABASE_KEYS),
    )
    if "jdbc_connection_url" not in values:
        raise invalid("jdbc-connection-url", None, "a jdbc: or SQLAlchemy URL (it is required)")
    if table.get("data-source-class-name") is not None:
        _log.info("data-source-class-name is ignored: connections are pooled by SQLAlchemy")
    url = values["jdbc_connection_url"].strip()
    if not url.lower().startswith("jdbc:"):
        # Under mask-password a bare URL is masked: hex, with no ':' unlike every real URL.
        url = codec.decode(url, "jdbc-connection-url", bare_is_masked=":" not in url).strip()
    # An embedded database's file or folder follows the file's folder, like the directories.
    values["jdbc_connection_url"] = url if base_dir is None else resolve_embedded_url(url, base_dir)
    for name in ("jdbc_user", "jdbc_password"):
        if name in values:
            values[name] = codec.decode(values[name], _kebab(name), bare_is_masked=True)
    classpath = values.get("jdbc_driver_classpath")
    if classpath is not None:
        entries = [_resolve(base_dir, entry) for entry in classpath.split(os.pathsep) if entry]
        values["jdbc_driver_classpath"] = os.pathsep.join(entries)
    props = table.get("data-source-properties")
    if props is not None:
        values["data_source_properties"], values["masked_properties"] = _properties_from(
            props, codec
        )
        override = values["data_source_properties"].get("url")
        if isinstance(override, str) and base_dir is not None:
            values["data_source_properties"]["url"] = resolve_embedded_url(override, base_dir)
    return DatabaseStoreConfig(**values)


_JAVA_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)


def _properties_from(
    section: object, codec: _Codec
) -> tuple[dict[str, str | int | bool], frozenset[str]]:
    where = "data-source-properties"
    if not isinstance(section, Mapping):
        raise invalid(where, section, "a table of name = value")
    result: dict[str, str | int | bool] = {}
    masked: set[str] = set()
    for name, value in section.items():
        if not isinstance(name, str) or not name.strip():
            raise invalid(where, name, "property names that are text")
        if isinstance(value, str):
            if masking.is_enc(value):
                masked.add(name)
                value = codec.decode(value, f"{where}.{name}")
            result[name] = _artemis_property(value)
        elif isinstance(value, (int, bool)):
            result[name] = value
        else:
            raise invalid(f"{where}.{name}", value, "a text, an integer or true/false", secret=True)
    return result, frozenset(masked)


def _artemis_property(value: str) -> str | int | bool:
    # As Artemis's addDataSourceProperty: booleans, then Java ints (32-bit), else the text.
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    if _JAVA_INT.fullmatch(value) and -(2**31) <= int(value) <= INT32_MAX:
        return int(value)
    return value


# --------------------------------------------------------------------------- files


def load_config(path: str | os.PathLike[str]) -> StoreConfig:
    """Read a configuration file: TOML (``.toml``) or an Artemis ``broker.xml`` (``.xml``).

    Relative directories in the file are resolved against the file's folder.
    Returns the validated configuration. Raises :class:`ConfigError` when the file cannot be
    read, has another suffix, is not well-formed, or holds a bad key or value.
    """
    file = Path(os.fspath(path))
    suffix = file.suffix.lower()
    if suffix not in (".toml", ".xml"):
        raise invalid("config file", str(file), "a .toml file or an Artemis broker.xml (.xml)")
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the configuration file {str(file)!r}: {exc.strerror or exc}",
            key="config file",
            value=str(file),
            allowed="a readable file",
        ) from exc
    if suffix == ".toml":
        mapping = _parse_toml(data, file)
    else:
        mapping = parse_broker_xml(data, source=file, core_keys=frozenset(_keys_of(StoreConfig)))
    return _from_mapping(mapping, base_dir=os.path.dirname(os.path.abspath(file)))


def _parse_toml(data: bytes, file: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        # tomllib's messages give line and column, never the offending text.
        raise ConfigError(
            f"{str(file)!r} is not valid TOML: {exc}",
            key="config file",
            value=str(file),
            allowed="a TOML document",
        ) from None
