"""Reading a configuration mapping's sections into field values: each key and its parser are
derived from the dataclass fields, masked values (``ENC(...)``, ``mask-password``) are decoded
with Artemis's codec settings, and relative paths follow the configuration file's folder.

:meth:`store.config.StoreConfig.from_mapping` drives it; the rules are in :mod:`store.config`'s
docstring.

Thread-safety: pure functions over their arguments; :class:`Codec` is immutable.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from store.config import masking
from store.config.fields import kebab
from store.config.sections import DatabaseStoreConfig, RetentionConfig
from store.config.values import (
    INT32_MAX,
    invalid,
    parse_bool,
    parse_int,
    parse_size,
    parse_text,
    resolve_embedded_url,
    unknown_key,
)

__all__ = [
    "CODEC_KEYS",
    "Codec",
    "codec_from",
    "database_from",
    "keys_of",
    "read_section",
    "resolve_path",
    "retention_from",
]

_log = logging.getLogger("store.config")  # the logger this code always logged to

_CODEC_CLASS: Final = "org.apache.activemq.artemis.utils.DefaultSensitiveStringCodec"
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
CODEC_KEYS: Final = ("mask-password", "password-codec")  # read for decoding, not kept
_IGNORED_DATABASE_KEYS: Final = ("data-source-class-name",)


def keys_of(cls: type) -> dict[str, dataclasses.Field[Any]]:
    return {kebab(f.name): f for f in dataclasses.fields(cls) if f.init and f.name not in _NOT_KEYS}


def _parse_field(f: dataclasses.Field[Any], value: object, key: str) -> Any:
    if f.name in _SIZE_FIELDS:
        return parse_size(value, key=key)
    base_type = str(f.type).split("|")[0].strip()
    if base_type == "bool":
        return parse_bool(value, key=key)
    if base_type == "int":
        return parse_int(value, key=key)
    return parse_text(value, key=key, secret=f.name in _SECRET_FIELDS)


def read_section(
    table: object, cls: type, where: str, *, prefix: str = "", extra: tuple[str, ...] = ()
) -> tuple[Mapping[str, Any], dict[str, Any]]:
    """Check a section's keys; return it and its parsed field values (``None`` = absent)."""
    keys = keys_of(cls)
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
class Codec:
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


def codec_from(mapping: Mapping[str, Any]) -> Codec:
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
    return Codec(
        key=key,
        mask_password=mask_password is not None and parse_bool(mask_password, key="mask-password"),
    )


def resolve_path(base_dir: str | None, path: str) -> str:
    if base_dir is None or os.path.isabs(path):
        return path
    return os.path.normpath(os.path.join(base_dir, path))


def retention_from(section: object, base_dir: str | None) -> RetentionConfig:
    where = "journal-retention"
    _, values = read_section(section, RetentionConfig, where, prefix=f"{where}.")
    if "directory" not in values:
        raise invalid(f"{where}.directory", None, "the folder history copies go to (required)")
    values["directory"] = resolve_path(base_dir, values["directory"])
    for name in ("period", "storage_limit"):
        if values.get(name) == -1:  # Artemis's spelling of "no limit"
            values[name] = None
    return RetentionConfig(**values)


def database_from(section: object, codec: Codec, base_dir: str | None) -> DatabaseStoreConfig:
    table, values = read_section(
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
            values[name] = codec.decode(values[name], kebab(name), bare_is_masked=True)
    classpath = values.get("jdbc_driver_classpath")
    if classpath is not None:
        entries = [resolve_path(base_dir, entry) for entry in classpath.split(os.pathsep) if entry]
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
    section: object, codec: Codec
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
