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

Layout of this package: :mod:`~store.config.store_config` (:class:`StoreConfig`),
:mod:`~store.config.sections` (:class:`RetentionConfig`, :class:`DatabaseStoreConfig`),
:mod:`~store.config.reader` (a mapping's keys into field values, the codec),
:mod:`~store.config.loading` (:func:`load_config`: TOML or ``broker.xml``),
:mod:`~store.config.fields` (what those share), :mod:`~store.config.values` (single values:
sizes, identifiers, URLs), :mod:`~store.config.broker_xml` and
:mod:`~store.config.artemis_elements` (``broker.xml``), :mod:`~store.config.addresses`
(address settings), :mod:`~store.config.masking` (``ENC(...)``). The reader derives each key
and its parser from the dataclass fields, so a key is added by adding a documented field.

Thread-safety: the configuration classes are immutable and safe to share between threads; the
functions are pure apart from reading the given file.
"""

from __future__ import annotations

from store.config.addresses import AddressSettings as AddressSettings
from store.config.loading import load_config
from store.config.sections import RETENTION_UNITS, DatabaseStoreConfig, RetentionConfig
from store.config.store_config import DEFAULT_GLOBAL_MAX_SIZE as DEFAULT_GLOBAL_MAX_SIZE
from store.config.store_config import HA_ROLES as HA_ROLES
from store.config.store_config import JOURNAL_TYPES, StoreConfig
from store.config.values import (
    IDENTIFIER_MAX_LENGTH,
    IDENTIFIER_PATTERN,
    PAGE_STORE_SUFFIX_DIGITS,
    db_dialect_of,
    identifier_max_length,
    redact_url,
    validate_identifier,
)

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
