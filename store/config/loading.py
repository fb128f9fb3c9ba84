"""Reading a configuration file: :func:`load_config` for TOML (``.toml``) or an Artemis
``broker.xml`` (``.xml``, :mod:`store.config.broker_xml`).

Thread-safety: reads the given file; otherwise pure.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from store.config.broker_xml import parse_broker_xml
from store.config.reader import keys_of
from store.config.store_config import StoreConfig
from store.config.values import invalid
from store.errors import ConfigError

__all__ = ["load_config"]


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
        mapping.pop("broker", None)  # the STOMP broker's section (store.stomp.security)
    else:
        mapping = parse_broker_xml(data, source=file, core_keys=frozenset(keys_of(StoreConfig)))
    return StoreConfig.from_mapping(mapping, base_dir=os.path.dirname(os.path.abspath(file)))


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
