"""Reading the persistence settings out of an Artemis ``broker.xml``.

Only these parts of the document are read; every other Artemis element (acceptors, security,
addresses, cluster connections, …) is ignored, as are elements in foreign namespaces:

- the direct children of ``<core>`` that are persistence keys (``journal-type``,
  ``journal-file-size``, ``paging-directory``, …) and the codec keys ``mask-password`` and
  ``password-codec``;
- journal retention, in either Artemis spelling::

      <journal-retention directory="history" period="7" unit="DAYS" storage-limit="10G"/>
      <journal-retention-directory period="7" unit="DAYS" storage-limit="10G">history</…>

- ``<store><database-store>…</database-store></store>`` with its
  ``<data-source-properties><data-source-property key=".." value=".."/>`` list
  (``<store><file-store/></store>`` means the file store);
- ``<address-settings><address-setting match="…">``: of each, only the keys
  :data:`store.config.addresses.ADDRESS_SETTING_KEYS` (``page-size-bytes``, ``max-size-bytes``,
  …). A real ``broker.xml`` gives many more (``dead-letter-address``, ``redelivery-delay``,
  ``auto-create-queues``, …), which are skipped (logged at DEBUG), as is an address setting
  that gives none of ours (its match is still kept and checked). A key that is not an Artemis
  address-setting element at all (:data:`store.config.artemis_elements.ADDRESS_SETTING_ELEMENTS`),
  most likely a misspelled one such as ``<max-size-byte>``, is skipped too but warned about,
  naming the match and the closest key, as for ``<core>`` below. A match given twice, or one
  key given twice in one address setting, is an error.

A child of ``<core>`` that is not an Artemis configuration element at all
(:data:`store.config.artemis_elements.CORE_ELEMENTS`), most likely a misspelled key such as
``<journal-file-sise>``, is ignored too, but logged as a warning that names the closest key
("did you mean ``<journal-file-size>``?"). A warning, not an error: a newer Artemis may have
elements that list does not know yet.

``<core>`` is the root, or a child of the root ``<configuration>``. Elements may be in the
``urn:activemq`` or ``urn:activemq:core`` namespace, or in none.

Hardening: the document is parsed with :mod:`defusedxml` and may not have a DTD at all
(``<!DOCTYPE …>``; Artemis configurations never need one), so entity declarations (the "billion
laughs"), external entities and external DTDs are refused with a
:class:`~store.errors.ConfigError` before anything is expanded or fetched. ``<xi:include>`` (which
Artemis honours) is followed for local files only, relative to the including file, parsed with
the same protections and at most 6 levels deep. Java system-property references (``${name}``) in
a value we read are an error: Artemis resolves them from the JVM, which this process does not
have, and reading them literally would put data in a folder named ``${name}``.

The result is the mapping :meth:`store.config.StoreConfig.from_mapping` takes; values stay texts
and are checked there.

Thread-safety: the functions are pure apart from reading included files; safe from any thread.
"""

from __future__ import annotations

import logging
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Collection
from pathlib import Path
from typing import Any, cast
from xml.etree import ElementInclude

import defusedxml
import defusedxml.ElementTree as SafeET

from store.config.addresses import ADDRESS_SETTING_KEYS
from store.config.artemis_elements import ADDRESS_SETTING_ELEMENTS, CORE_ELEMENTS
from store.config.values import closest_name, invalid
from store.errors import ConfigError

__all__ = ["NAMESPACES", "core_children", "local_name", "parse_broker_xml", "read_core"]

_log = logging.getLogger(__name__)

NAMESPACES = frozenset({"", "urn:activemq", "urn:activemq:core"})
_XINCLUDE = "{http://www.w3.org/2001/XInclude}include"
_MAX_INCLUDE_DEPTH = 6
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]+:")  # two letters or more: not a drive
_CODEC_KEYS = ("mask-password", "password-codec")
_RETENTION_ATTRIBUTES = ("directory", "period", "unit", "storage-limit")
_SECTION_KEYS = (
    "journal-retention",
    "journal-retention-directory",
    "store",
    "address-settings",
    "ha-policy",
)


def parse_broker_xml(
    data: bytes,
    *,
    source: str | os.PathLike[str],
    core_keys: Collection[str],
) -> dict[str, Any]:
    """Extract the persistence settings of a ``broker.xml`` as a configuration mapping.

    ``core_keys`` are the kebab-case keys read from ``<core>``'s direct children; ``source`` is
    the file the bytes came from (for messages and for resolving ``xi:include``).
    Returns the mapping (texts, nested dicts for ``database-store`` and ``journal-retention``).
    Raises :class:`ConfigError` when the document is not well-formed, declares entities or
    external references, has no ``<core>``, repeats a setting, or uses ``${…}`` in one.
    """
    path = Path(os.fspath(source))
    root = _parse(data, path)
    if any(True for _ in root.iter(_XINCLUDE)):
        _follow_includes(root, path)
    core = _find_core(root, path)
    mapping: dict[str, Any] = {}
    for child in _children(core):
        name = _local(child)
        if name in core_keys or name in _CODEC_KEYS:
            _put(mapping, name, _text(child, name))
        elif name in ("journal-retention", "journal-retention-directory"):
            _put(mapping, "journal-retention", _retention(child, name))
        elif name == "store":
            database = _database_store(child)
            if database is not None:
                _put(mapping, "database-store", database)
        elif name == "address-settings":
            _put(mapping, name, _address_settings(child, path))
        elif name == "ha-policy":
            role = _ha_role(child)
            if role is not None:
                _put(mapping, "ha-role", role)
        elif name in CORE_ELEMENTS:
            _log.debug("broker.xml: <%s> is not a persistence setting; ignored", name)
        else:
            _warn_unknown(name, path, (*core_keys, *_CODEC_KEYS, *_SECTION_KEYS))
    return mapping


def read_core(path: str | os.PathLike[str]) -> ET.Element:
    """The ``<core>`` element of the broker.xml at ``path``, parsed with the same checks as
    :func:`parse_broker_xml` (no DTD or entities; ``xi:include`` followed): what another
    layer reads its own elements from (the STOMP broker's security). Raises ConfigError
    naming the file when it cannot be read or is refused."""
    file = Path(os.fspath(path))
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the configuration file {str(file)!r}: {exc.strerror or exc}",
            key="config file", value=str(file), allowed="a readable file",
        ) from exc  # fmt: skip
    root = _parse(data, file)
    if any(True for _ in root.iter(_XINCLUDE)):
        _follow_includes(root, file)
    return _find_core(root, file)


def core_children(elem: ET.Element) -> list[ET.Element]:
    """The child elements of ``elem`` in Artemis's namespaces (comments and foreign
    namespaces left out)."""
    return _children(elem)


def local_name(elem: ET.Element) -> str:
    """``elem``'s tag without its namespace."""
    return _local(elem)


# Artemis's shared-store role elements, older names included.
_HA_ROLES = {"primary": "primary", "master": "primary", "backup": "backup", "slave": "backup"}


def _ha_role(elem: ET.Element) -> str | None:
    """The role of ``<ha-policy><shared-store><primary/>|<backup/>`` (or ``<master/>`` /
    ``<slave/>``); None for any other policy (replication, live-only), which is not ours."""
    for policy in _children(elem):
        if _local(policy) != "shared-store":
            _log.debug("broker.xml: <ha-policy><%s> is not a shared-store policy", _local(policy))
            continue
        roles = [_HA_ROLES[_local(c)] for c in _children(policy) if _local(c) in _HA_ROLES]
        if len(roles) > 1:
            raise invalid("ha-policy", ", ".join(roles), "one <primary/> or one <backup/>")
        return roles[0] if roles else None
    return None


def _warn_unknown(name: str, path: Path, ours: Collection[str]) -> None:
    close = closest_name(name, ours) or closest_name(name, CORE_ELEMENTS)
    _log.warning(
        "broker.xml %r: <%s> is not an Artemis <core> configuration element; ignored%s",
        str(path),
        name,
        f"; did you mean <{close}>?" if close else "",
    )


def _parse(data: bytes, path: Path) -> ET.Element:
    where = f"broker.xml {str(path)!r}"
    try:
        root: ET.Element = SafeET.fromstring(
            data, forbid_dtd=True, forbid_entities=True, forbid_external=True
        )
    except defusedxml.DefusedXmlException as exc:
        raise ConfigError(
            f"{where} was refused: {type(exc).__name__} (a DTD, entity declarations and external "
            "references are not read, to keep the parser safe)",
            key="config file",
            value=str(path),
            allowed="an XML document without a DTD, entity declarations or external references",
        ) from None
    except ET.ParseError as exc:
        raise ConfigError(
            f"{where} is not well-formed XML: {exc}",
            key="config file",
            value=str(path),
            allowed="a well-formed XML document",
        ) from None
    return root


def _follow_includes(root: ET.Element, path: Path) -> None:
    def loader(href: str, parse: str, encoding: str | None = None) -> ET.Element | str:
        if _URL_SCHEME.match(href):
            raise invalid("xi:include", href, "a local file (no URL schemes)")
        try:
            data = Path(href).read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"cannot read {href!r} included from {str(path)!r}: {exc.strerror or exc}",
                key="xi:include",
                value=href,
                allowed="a readable file",
            ) from exc
        if parse == "xml":
            return _parse(data, Path(href))
        return data.decode(encoding or "utf-8")

    try:
        # cast: typeshed wants an overloaded protocol; one function serves both parse modes.
        ElementInclude.include(
            root, loader=cast(Any, loader), base_url=str(path), max_depth=_MAX_INCLUDE_DEPTH
        )
    except ElementInclude.FatalIncludeError as exc:
        raise ConfigError(
            f"cannot follow an xi:include of {str(path)!r}: {exc}",
            key="xi:include",
            value=str(path),
            allowed=f"local files, at most {_MAX_INCLUDE_DEPTH} levels deep, without cycles",
        ) from None


def _namespace(elem: ET.Element) -> str:
    tag = elem.tag
    return tag[1 : tag.index("}")] if tag.startswith("{") else ""


def _local(elem: ET.Element) -> str:
    return elem.tag.rpartition("}")[2]


def _children(elem: ET.Element) -> list[ET.Element]:
    # Comments and processing instructions have non-str tags; foreign namespaces are not ours.
    return [c for c in elem if isinstance(c.tag, str) and _namespace(c) in NAMESPACES]


def _find_core(root: ET.Element, path: Path) -> ET.Element:
    allowed = "a <configuration> element holding a <core> element (namespace urn:activemq)"
    if _namespace(root) not in NAMESPACES:
        raise invalid("config file", str(path), allowed, hint=f"the root is {root.tag!r}")
    if _local(root) == "core":
        return root
    cores = (
        [c for c in _children(root) if _local(c) == "core"]
        if _local(root) == "configuration"
        else []
    )
    if len(cores) != 1:
        found = "several <core> elements" if cores else "no <core> element"
        raise invalid("config file", str(path), allowed, hint=f"found {found}")
    return cores[0]


def _put(mapping: dict[str, Any], key: str, value: Any) -> None:
    if key in mapping:
        raise _repeated(key)
    mapping[key] = value


def _repeated(key: str) -> ConfigError:
    # The value is not shown: either occurrence may be a secret.
    return ConfigError(
        f"{key} is given twice in broker.xml; allowed: one occurrence",
        key=key,
        value="<repeated>",
        allowed="one occurrence",
    )


def _checked(key: str, value: str, *, secret: bool = False) -> str:
    if "${" in value:
        raise invalid(
            key,
            value,
            "a literal value",
            secret=secret,
            hint="${...} names a Java system property, which only the Artemis JVM can resolve",
        )
    return value


def _text(elem: ET.Element, key: str) -> str:
    secret = key in ("jdbc-user", "jdbc-password", "jdbc-connection-url")
    return _checked(key, "".join(elem.itertext()).strip(), secret=secret)


def _attributes(elem: ET.Element, where: str) -> dict[str, str]:
    return {
        name: _checked(f"{where}.{name}", value.strip())
        for name, value in elem.attrib.items()
        if not name.startswith("{")  # xsi:… and other namespaced attributes
    }


def _retention(elem: ET.Element, name: str) -> dict[str, str]:
    where = "journal-retention"
    values = _attributes(elem, where)
    if name == "journal-retention-directory":
        if "directory" in values:
            raise invalid(
                f"{where}.directory",
                values["directory"],
                "the folder as the element's text, not as an attribute",
            )
        values["directory"] = _text(elem, f"{where}.directory")
    return values


def _database_store(store: ET.Element) -> dict[str, Any] | None:
    children = _children(store)
    kinds = [_local(c) for c in children]
    if kinds.count("database-store") + kinds.count("file-store") > 1:
        raise invalid("store", ", ".join(kinds), "one <database-store> or one <file-store>")
    database = next((c for c in children if _local(c) == "database-store"), None)
    if database is None:
        return None
    mapping: dict[str, Any] = {}
    for child in _children(database):
        name = _local(child)
        if name == "data-source-properties":
            _put(mapping, name, _properties(child))
        else:
            _put(mapping, name, _text(child, name))
    return mapping


def _properties(elem: ET.Element) -> dict[str, str]:
    where = "data-source-properties"
    result: dict[str, str] = {}
    for prop in _children(elem):
        if _local(prop) != "data-source-property":
            raise invalid(where, _local(prop), '<data-source-property key=".." value=".."/>')
        key, value = prop.get("key"), prop.get("value")
        if key is None or value is None:
            raise invalid(where, key, "a data-source-property with both key and value")
        if key in result:
            raise _repeated(f"{where}.{key}")
        result[key] = _checked(f"{where}.{key}", value, secret=True)
    return result


def _address_settings(elem: ET.Element, path: Path) -> dict[str, dict[str, str]]:
    result: dict[str, dict[str, str]] = {}
    for setting in _children(elem):
        if _local(setting) != "address-setting":
            _log.debug("broker.xml: <address-settings> holds <%s>; ignored", _local(setting))
            continue
        match = setting.get("match")
        if match is None:
            raise invalid("address-settings", None, '<address-setting match="...">')
        where = f'address-settings."{match}"'
        if match in result:
            raise _repeated(where)
        values: dict[str, str] = {}
        for child in _children(setting):
            key = _local(child)
            if key not in ADDRESS_SETTING_KEYS:
                _skip_address_setting(key, match, path)
                continue
            if key in values:
                raise _repeated(f"{where}.{key}")
            values[key] = _text(child, f"{where}.{key}")
        result[match] = values
    return result


def _skip_address_setting(key: str, match: str, path: Path) -> None:
    """An address-setting key we do not read: Artemis's own (dead-letter-address, …) at DEBUG,
    anything else (most likely a typo of one of ours) as a warning naming the closest key."""
    if key in ADDRESS_SETTING_ELEMENTS:
        _log.debug(
            'broker.xml: <%s> of address-setting "%s" is not read by this library', key, match
        )
        return
    close = closest_name(key, ADDRESS_SETTING_ELEMENTS)  # ours are among them
    _log.warning(
        'broker.xml %r: <%s> in <address-setting match="%s"> is not an Artemis address setting;'
        " ignored%s",
        str(path),
        key,
        match,
        f"; did you mean <{close}>?" if close else "",
    )
