"""The configuration itself: :class:`StoreConfig`, every top-level key as a documented field.

The rules it checks are in :mod:`store.config`'s docstring (and docs/config.md). Its sections
are :mod:`store.config.sections`; :meth:`StoreConfig.from_mapping` reads keys with
:mod:`store.config.reader`.

Thread-safety: immutable; safe to share between threads.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from store.config.addresses import (
    AddressSettings,
    freeze_address_settings,
    read_address_settings,
    settings_for,
)
from store.config.fields import DERIVE, DERIVE_DIR, kebab, replace_checked, set_field
from store.config.reader import (
    CODEC_KEYS,
    codec_from,
    database_from,
    read_section,
    resolve_path,
    retention_from,
)
from store.config.sections import DatabaseStoreConfig, RetentionConfig
from store.config.values import (
    INT32_MAX,
    INT64_MAX,
    FrozenMap,
    check_bool,
    check_int,
    check_text,
    invalid,
)

__all__ = [
    "DEFAULT_GLOBAL_MAX_SIZE",
    "DIRECTORY_FIELDS",
    "HA_ROLES",
    "JOURNAL_TYPES",
    "StoreConfig",
]

JOURNAL_TYPES: Final = ("NIO", "ASYNCIO", "MAPPED")

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
    "message_expiry_scan_period": (1, INT64_MAX, "-1 (no scan) or a positive number of ms", (-1,)),
    "max_redelivery_records": (0, INT32_MAX, "-1 (no bound) or an integer of 0 or more", (-1,)),
    "journal_lock_acquisition_timeout": (
        1,
        INT64_MAX,
        "-1 (wait forever) or a positive number of milliseconds",
        (-1,),
    ),
}
DIRECTORY_FIELDS: Final = (
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
    node_manager_lock_directory: str = DERIVE_DIR
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
    journal_buffer_timeout: int = DERIVE
    #: Default 501760 bytes (490K). Write buffer: the most one batch holds; also bounds a record.
    journal_buffer_size: int = 501760
    #: Default 4096 for ASYNCIO, 1 for NIO/MAPPED. Writes in flight at once.
    journal_max_io: int = DERIVE
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
    page_sync_timeout: int = DERIVE
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
    #: overhead, :data:`store.messaging.pager.MEMORY_PER_MESSAGE`), every address applies its
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
    #: Default 30000 ms; -1 = no scan. How often the storage manager looks for expired
    #: messages on its own (an expired message is never delivered either way: a receive
    #: checks it too); the scan costs in proportion to what expired, not to queue depth.
    message_expiry_scan_period: int = 30000
    #: Default 10; -1 = no bound. A cancelled message's delivery count and redelivery time
    #: are written to the journal while its count is at most this; after that they are kept
    #: in memory only (a restart may deliver it sooner and count from the last one written),
    #: so a message redelivered for ever does not fill the journal (Artemis's
    #: ``max-redelivery-records``).
    max_redelivery_records: int = 10
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
        set_field(self, "journal_type", journal_type)
        derived: set[str] = set()
        if self.journal_buffer_timeout is DERIVE:
            derived.add("journal_buffer_timeout")
            set_field(
                self, "journal_buffer_timeout", 500000 if journal_type == "ASYNCIO" else 3333333
            )
        if self.journal_max_io is DERIVE:
            derived.add("journal_max_io")
            set_field(self, "journal_max_io", 4096 if journal_type == "ASYNCIO" else 1)
        if self.page_sync_timeout is DERIVE:
            derived.add("page_sync_timeout")
            set_field(self, "page_sync_timeout", self.journal_buffer_timeout)
        for name in DIRECTORY_FIELDS:
            value = getattr(self, name)
            if value is DERIVE_DIR:
                derived.add(name)
                value = self.journal_directory
            if isinstance(value, os.PathLike):
                value = os.fspath(value)
            check_text(kebab(name), value)
            set_field(self, name, str(value))
        set_field(self, "_derived", frozenset(derived))
        for name in _BOOL_FIELDS:
            check_bool(kebab(name), getattr(self, name))
        if self.ha_role is not None:
            role = self.ha_role.lower() if isinstance(self.ha_role, str) else self.ha_role
            if role not in HA_ROLES:
                raise invalid("ha-role", self.ha_role, "primary or backup")
            set_field(self, "ha_role", role)
        if type(self.global_max_size) is int and self.global_max_size == -1:
            set_field(self, "global_max_size", DEFAULT_GLOBAL_MAX_SIZE)  # Artemis: -1 = the default
        for name, (low, high, allowed, also) in _INT_RULES.items():
            check_int(kebab(name), getattr(self, name), low, high, allowed, also=also)
        if not isinstance(self.journal_retention, (RetentionConfig, type(None))):
            raise invalid("journal-retention", self.journal_retention, "a journal-retention table")
        if not isinstance(self.database_store, (DatabaseStoreConfig, type(None))):
            raise invalid("database-store", self.database_store, "a database-store table")
        set_field(self, "address_settings", freeze_address_settings(self.address_settings))
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
                        kebab(key),
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
        derived = {name: DERIVE_DIR if "directory" in name else DERIVE for name in self._derived}
        result: StoreConfig = replace_checked(self, {**derived, **changes})
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


def _from_mapping(mapping: Mapping[str, Any], *, base_dir: str | None) -> StoreConfig:
    sections = ("database-store", "journal-retention", "address-settings")
    table, kwargs = read_section(
        mapping, StoreConfig, "the configuration", extra=(*sections, *CODEC_KEYS)
    )
    codec = codec_from(table)
    if base_dir is not None:
        for name in DIRECTORY_FIELDS:
            value = kwargs.get(name, StoreConfig.__dataclass_fields__[name].default)
            if value is not DERIVE_DIR:
                kwargs[name] = resolve_path(base_dir, value)
    if table.get("journal-retention") is not None:
        kwargs["journal_retention"] = retention_from(table["journal-retention"], base_dir)
    if table.get("database-store") is not None:
        kwargs["database_store"] = database_from(table["database-store"], codec, base_dir)
    if table.get("address-settings") is not None:
        kwargs["address_settings"] = read_address_settings(table["address-settings"])
    return StoreConfig(**kwargs)
