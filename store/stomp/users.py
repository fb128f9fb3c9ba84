"""Artemis's users and roles files: ``artemis-users.properties`` and
``artemis-roles.properties``, read as Artemis's ``PropertiesLoginModule`` reads them.

- Both are Java properties files (:func:`read_properties`: ``key=value``, ``key: value`` or
  ``key value``; ``#`` and ``!`` comments; a trailing ``\\`` continues a line; ``\\t``,
  ``\\n``, ``\\uXXXX`` and ``\\x`` escapes).
- users: ``user = password``; the password is plain, or ``ENC(...)``: the one-way form
  ``artemis user add`` writes, ``ENC(<iterations>:<salt hex>:<hash hex>)`` (PBKDF2 with
  HMAC-SHA1, the hash's own length, Artemis's ``DefaultSensitiveStringCodec`` in ``ONE_WAY``
  mode; :func:`hash_password` writes it), or a two-way masked value (``store mask``'s,
  :mod:`store.config.masking`) compared once decoded. Artemis itself reads every ``ENC()`` in
  this file as the one-way form; the two-way one is accepted here too so that a password
  masked for broker.xml works in both places.
- roles: ``role = user1, user2``: each user in the list has the role.

Passwords are compared in constant time; no error or log line holds a password or a hash.

Thread-safety: pure functions over files read once; :class:`Users` is immutable.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from store.config.masking import is_enc, unmask, unwrap_enc
from store.errors import ConfigError

__all__ = ["USERS_FILE", "ROLES_FILE", "Users", "hash_password", "read_properties", "read_users"]

#: The file names Artemis's ``etc/`` holds beside broker.xml.
USERS_FILE: Final = "artemis-users.properties"
ROLES_FILE: Final = "artemis-roles.properties"
#: Artemis's one-way codec: ``iterations:salt:hash`` in hexadecimal (upper case written).
_HASHED = re.compile(r"(\d+):([0-9A-Fa-f]+):([0-9A-Fa-f]+)")
_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", text[i + 2 : i + 6]):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:  # an odd number of backslashes: the line goes on
            pending += line[:-1]
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def read_properties(path: str) -> dict[str, str]:
    """The ``key -> value`` pairs of a Java properties file (the module docstring); a key
    given twice keeps its last value, as ``java.util.Properties``. Raises ConfigError naming
    the file when it cannot be read or is not UTF-8 (Artemis reads these files as UTF-8)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(
            f"cannot read {path!r}: {why}", key="security", value=path,
            allowed="a readable UTF-8 properties file",
        ) from None  # fmt: skip
    pairs: dict[str, str] = {}
    for line in _logical_lines(text):
        match = re.match(r"((?:\\.|[^\\=:\s])*)\s*[=:]?\s*(.*)$", line, re.DOTALL)
        assert match is not None  # the pattern matches any text
        pairs[_unescape(match.group(1))] = _unescape(match.group(2))
    return pairs


def hash_password(plain: str, *, iterations: int = 1024, salt: bytes | None = None) -> str:
    """``ENC(iterations:SALT:HASH)``: the one-way form Artemis's ``artemis user add`` writes
    (PBKDF2-HMAC-SHA1, a 32-byte random salt, a 64-byte hash, upper-case hexadecimal).
    Raises nothing."""
    salt = os.urandom(32) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha1", plain.encode("utf-8"), salt, iterations, 64)
    return f"ENC({iterations}:{salt.hex().upper()}:{digest.hex().upper()})"


def _matches(stored: str, given: str, user: str) -> bool:
    if not is_enc(stored):
        return hmac.compare_digest(stored.encode("utf-8"), given.encode("utf-8"))
    inner = unwrap_enc(stored)
    hashed = _HASHED.fullmatch(inner)
    if hashed is not None:
        iterations, salt, digest = int(hashed[1]), bytes.fromhex(hashed[2]), hashed[3]
        expected = bytes.fromhex(digest)
        if not expected or iterations < 1:
            return False
        got = hashlib.pbkdf2_hmac("sha1", given.encode("utf-8"), salt, iterations, len(expected))
        return hmac.compare_digest(got, expected)
    try:
        plain = unmask(inner, setting=f"the password of user {user!r} in {USERS_FILE}")
    except ConfigError:
        return False  # neither form: no passcode opens it
    return hmac.compare_digest(plain.encode("utf-8"), given.encode("utf-8"))


@dataclass(frozen=True)
class Users:
    """Who may log in (user -> stored password) and the roles each user has."""

    passwords: Mapping[str, str]
    roles: Mapping[str, frozenset[str]]

    def authenticate(self, login: str | None, passcode: str | None) -> bool:
        """Whether ``login`` is a user and ``passcode`` its password (the module docstring's
        forms). A missing passcode is the empty one, as in Artemis. Raises nothing."""
        if login is None or login not in self.passwords:
            return False
        return _matches(self.passwords[login], passcode or "", login)

    def roles_of(self, user: str) -> frozenset[str]:
        """The roles of ``user`` (none for a user the roles file does not name)."""
        return self.roles.get(user, frozenset())


def read_users(users_file: str, roles_file: str) -> Users:
    """The users and roles of the two files. Raises ConfigError naming a file that is
    missing or unreadable."""
    passwords = read_properties(users_file)
    roles: dict[str, set[str]] = {}
    for role, members in read_properties(roles_file).items():
        for user in (m.strip() for m in members.split(",")):
            if user:
                roles.setdefault(user, set()).add(role)
    return Users(passwords, {u: frozenset(r) for u, r in roles.items()})
