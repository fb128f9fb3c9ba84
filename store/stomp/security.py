"""Who may connect and what each may do: the broker's security, as Artemis's.

Configured where the rest of the broker is:

- broker.xml: ``<security-enabled>`` in ``<core>`` (default true), and
  ``<security-settings><security-setting match="orders.#"><permission type="send"
  roles="producer,admin"/>…``; the users and roles are Artemis's files beside it,
  ``artemis-users.properties`` and ``artemis-roles.properties`` (:mod:`store.stomp.users`);
- TOML: the ``[broker]`` section, ``security-enabled``, ``users-file`` and ``roles-file``
  (default: the two Artemis names beside the file) and ``[broker.security-settings."orders.#"]``
  with ``send = ["producer"]`` per permission (a list, or a comma-separated text).

With security enabled (the default), a CONNECT must name a user of the users file with its
password, and each command needs its permission on the destination's address (Artemis's
``CheckType``s):

=======================================  ===============================================
command                                  permissions
=======================================  ===============================================
SEND                                     ``send``; for a queue that does not exist yet
                                         also ``createAddress`` and ``createDurableQueue``
SUBSCRIBE to a queue                     ``consume`` (and the two above for a new one)
SUBSCRIBE to a topic                     ``consume`` and ``createNonDurableQueue``;
                                         durable: ``createDurableQueue`` instead
UNSUBSCRIBE of a durable subscription    ``deleteDurableQueue``
=======================================  ===============================================

The address a permission is checked on is the destination without its ``/queue/`` or
``/topic/`` prefix (``/queue/orders.eu`` is checked on ``orders.eu``), what Artemis sees with
``anycastPrefix=/queue/;multicastPrefix=/topic/`` on its STOMP acceptor; any other
destination (``DLQ./queue/orders``) as it is. Matches are Artemis's (``#`` any number of
words, ``*`` one word, ``.`` between words); the most specific match that applies decides
alone, its roles are not merged with those of wider matches (Artemis's security repository).
An address no setting matches allows nothing. A user has a permission when one of its roles
is listed for it.

Refusals are ERROR frames naming the user, the permission and the destination, and close the
connection (STOMP 1.2); a refused SEND stores nothing. A refused login says only that the
login or passcode is wrong. ``browse`` and the other permissions are read and kept, but no
STOMP command this broker serves needs them yet (a ``browser:true`` subscription is not
served).

Thread-safety: :class:`BrokerSecurity` is immutable and shared by every connection.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from store.config.addresses import match_precedence, matches
from store.config.broker_xml import core_children, local_name, read_core
from store.config.values import invalid, unknown_key
from store.errors import ConfigError
from store.stomp.users import ROLES_FILE, USERS_FILE, Users, read_users

__all__ = [
    "PERMISSIONS",
    "BrokerSecurity",
    "broker_section",
    "load_security",
    "security_address",
]

#: Artemis's permission types (``CheckType``), as broker.xml spells them.
PERMISSIONS: Final = (
    "send",
    "consume",
    "createAddress",
    "deleteAddress",
    "createDurableQueue",
    "deleteDurableQueue",
    "createNonDurableQueue",
    "deleteNonDurableQueue",
    "manage",
    "browse",
    "view",
    "edit",
)
_BROKER_KEYS: Final = (
    "security-enabled",
    "users-file",
    "roles-file",
    "security-settings",
    "acceptors",
)
_PREFIXES: Final = ("/queue/", "/topic/")

Settings = Mapping[str, Mapping[str, frozenset[str]]]


def security_address(destination: str) -> str:
    """The address a permission on ``destination`` is checked on (the module docstring)."""
    for prefix in _PREFIXES:
        if destination.startswith(prefix):
            return destination[len(prefix) :]
    return destination


@dataclass(frozen=True)
class BrokerSecurity:
    """The users, their roles and the security settings (match -> permission -> roles)."""

    users: Users
    settings: Settings

    def authenticate(self, login: str | None, passcode: str | None) -> bool:
        """Whether ``login`` / ``passcode`` is a user's login. Raises nothing."""
        return self.users.authenticate(login, passcode)

    def allows(self, user: str, permission: str, destination: str) -> bool:
        """Whether ``user`` has ``permission`` on ``destination``'s address (the module
        docstring). Raises nothing."""
        address = security_address(destination)
        found = sorted((m for m in self.settings if matches(m, address)), key=match_precedence)
        if not found:
            return False
        allowed = self.settings[found[0]].get(permission, frozenset())
        return not allowed.isdisjoint(self.users.roles_of(user))

    def why_not(self, user: str, permission: str, destination: str) -> str:
        """The ERROR text of a refusal."""
        address = security_address(destination)
        if not any(matches(m, address) for m in self.settings):
            return (
                f"user {user!r} may not {permission} on {destination!r}: no security-setting "
                f"matches address {address!r}"
            )
        return (
            f"user {user!r} may not {permission} on {destination!r}: none of its roles has "
            f"permission {permission!r} on address {address!r}"
        )


def _roles(value: object, key: str) -> frozenset[str]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list | tuple) or not all(isinstance(r, str) for r in value):
        raise invalid(key, value, "a list of role names, or one text of names and commas")
    return frozenset(r.strip() for r in value if r.strip())


def _check_match(match: str, where: str) -> str:
    if not match.strip() or "#" in match[:-1]:
        raise invalid(
            f"{where} match", match, "words separated by '.', '*' for one word, '#' at the end"
        )
    return match


def _check_permission(kind: object, where: str) -> str:
    if kind not in PERMISSIONS:
        raise unknown_key(str(kind), PERMISSIONS, where)
    return str(kind)


def _xml_settings(core: Any, path: str) -> tuple[bool, dict[str, dict[str, frozenset[str]]]]:
    enabled = True
    settings: dict[str, dict[str, frozenset[str]]] = {}
    for child in core_children(core):
        name = local_name(child)
        if name == "security-enabled":
            text = (child.text or "").strip().lower()
            if text not in ("true", "false"):
                raise invalid("security-enabled", text, "true or false")
            enabled = text == "true"
        elif name == "security-settings":
            for setting in core_children(child):
                if local_name(setting) != "security-setting":
                    continue  # <role-mapping>, plug-ins: not served (see docs/stomp.md)
                match = _check_match(setting.get("match", ""), "security-setting")
                where = f'<security-setting match="{match}"> of {path}'
                permissions: dict[str, frozenset[str]] = {}
                for permission in core_children(setting):
                    if local_name(permission) != "permission":
                        continue
                    kind = _check_permission(permission.get("type"), where)
                    permissions[kind] = _roles(permission.get("roles", ""), f"{where} {kind}")
                settings[match] = permissions
    return enabled, settings


def broker_section(path: str) -> dict[str, Any]:
    """The ``[broker]`` section of a TOML configuration (empty when it has none), its keys
    checked. Raises ConfigError for an unreadable file or an unknown key."""
    try:
        with open(path, "rb") as f:
            section = tomllib.load(f).get("broker", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(
            f"cannot read {path!r}: {exc}", key="config file", value=path,
            allowed="a readable TOML file",
        ) from None  # fmt: skip
    if not isinstance(section, dict):
        raise invalid("broker", section, "a table")
    for key in section:
        if key not in _BROKER_KEYS:
            raise unknown_key(key, _BROKER_KEYS, f"[broker] of {path}")
    return section


def _toml_settings(section: Mapping[str, Any], path: str) -> dict[str, dict[str, frozenset[str]]]:
    table = section.get("security-settings", {})
    if not isinstance(table, dict):
        raise invalid("broker.security-settings", table, "a table of matches")
    settings: dict[str, dict[str, frozenset[str]]] = {}
    for match, permissions in table.items():
        where = f'[broker.security-settings."{match}"] of {path}'
        if not isinstance(permissions, dict):
            raise invalid(where, permissions, "a table of permission = roles")
        settings[_check_match(match, "broker.security-settings")] = {
            _check_permission(kind, where): _roles(roles, f"{where} {kind}")
            for kind, roles in permissions.items()
        }
    return settings


def load_security(path: str | os.PathLike[str]) -> BrokerSecurity | None:
    """The security the configuration file at ``path`` describes (the module docstring), or
    None when it sets ``security-enabled`` false. Raises ConfigError naming the file or key
    that is wrong: a users or roles file that is missing (with the hint of
    ``--no-security``), a bad match, an unknown permission."""
    file = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(file)
    users_file = os.path.join(folder, USERS_FILE)
    roles_file = os.path.join(folder, ROLES_FILE)
    if file.lower().endswith(".toml"):
        section = broker_section(file)
        enabled = section.get("security-enabled", True)
        if not isinstance(enabled, bool):
            raise invalid("broker.security-enabled", enabled, "true or false")
        users_file = os.path.join(folder, str(section.get("users-file", USERS_FILE)))
        roles_file = os.path.join(folder, str(section.get("roles-file", ROLES_FILE)))
        settings = _toml_settings(section, file)
    else:
        enabled, settings = _xml_settings(read_core(file), file)
    if not enabled:
        return None
    for needed in (users_file, roles_file):
        if not os.path.exists(needed):
            raise ConfigError(
                f"security is enabled (the default) and {needed!r} does not exist: the broker "
                "has no users to check logins against",
                key="security-enabled",
                value=needed,
                hint="write the users and roles files (docs/stomp.md, Security), set "
                "security-enabled to false, or run with --no-security for a trial",
            )
    return BrokerSecurity(read_users(users_file, roles_file), settings)
