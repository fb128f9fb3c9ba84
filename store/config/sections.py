"""The configuration's two sections: journal retention (:class:`RetentionConfig`) and the
database store (:class:`DatabaseStoreConfig`), each immutable and validated when built.

The rules they check are in :mod:`store.config`'s docstring (and docs/config.md); their keys
are read by :mod:`store.config.reader`.

Thread-safety: immutable; safe to share between threads.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from store.config.fields import replace_checked, set_field
from store.config.values import (
    HIDDEN,
    INT32_MAX,
    INT64_MAX,
    PAGE_STORE_SUFFIX_DIGITS,
    FrozenMap,
    check_int,
    check_text,
    db_dialect_of,
    identifier_max_length,
    invalid,
    redact_url,
    validate_identifier,
)

__all__ = ["RETENTION_UNITS", "DatabaseStoreConfig", "RetentionConfig"]

_log = logging.getLogger("store.config")  # the logger this code always logged to

RETENTION_UNITS: Final[Mapping[str, int]] = {
    "DAYS": 86400,
    "HOURS": 3600,
    "MINUTES": 60,
    "SECONDS": 1,
}
_SQLALCHEMY_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://.*", re.DOTALL)
# Data-source property names whose values repr() hides even when they were not masked.
_SECRET_NAME = re.compile(r"(?i)pass|pwd|secret|token|credential|user")


class _DefaultStr(str):
    """A str field's default that stays visible and marks "not given" (immutable; shareable)."""


# jdbc-driver-class-name when none was given: equal to Derby's class name (Artemis's default),
# but told apart from the same text written by the user (see jdbc_driver_class_name_given).
_DERBY_EMBEDDED_DRIVER: Final = _DefaultStr("org.apache.derby.jdbc.EmbeddedDriver")


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
        set_field(self, "directory", os.fspath(self.directory))
        check_text("journal-retention.directory", self.directory)
        if self.period is not None:
            check_int("journal-retention.period", self.period, 1, INT64_MAX, "a positive integer")
        unit = self.unit.upper() if isinstance(self.unit, str) else self.unit
        if unit not in RETENTION_UNITS:
            raise invalid("journal-retention.unit", self.unit, "DAYS, HOURS, MINUTES or SECONDS")
        set_field(self, "unit", unit)
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
        set_field(self, "jdbc_connection_url", url)
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
        set_field(self, "data_source_properties", FrozenMap(props))
        set_field(self, "masked_properties", frozenset(self.masked_properties))

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
        result: DatabaseStoreConfig = replace_checked(self, changes)
        return result
