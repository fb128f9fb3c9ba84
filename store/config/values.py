"""Single configuration values: Artemis's size notation, booleans, integers, identifiers, URLs.

Every configuration source (TOML, ``broker.xml``, a dict) hands its values to these functions,
so ``"10M"`` means the same wherever it comes from, and other modules (the database store) use
the same identifier and URL rules as the configuration.

Sizes follow Artemis's ``ByteUtil.convertTextBytes`` exactly:

- an unsigned decimal integer, optionally followed by a unit ``K``, ``M`` or ``G``, optionally
  followed by ``i``, optionally followed by ``B``; case-insensitive, blanks allowed around the
  number and the unit: ``512``, ``512B``, ``100K``, ``100KB``, ``100KiB``, ``10m``, ``1 GiB``;
- every unit is a power of **1024**, with or without ``i``: Artemis reads ``10MB`` as
  10 * 1024**2, not 10 * 1000**2, and so do we (a ``broker.xml`` must mean the same here);
- there is no ``T`` unit, no fraction (``1.5M``) and no exponent, as in Artemis;
- a plain integer may carry a sign (``-1``): Artemis falls back to ``Long.parseLong`` for those;
  whether a negative value is allowed is for the key's own range check to say.

Booleans accept ``true`` / ``false`` in any case (and Python ``bool``); anything else is an error,
where Java's ``Boolean.parseBoolean`` would silently read it as ``false``. Integers accept
``int`` (never ``bool``) and decimal texts with an optional sign.

Every source's tables end up in a :class:`FrozenMap`, an immutable and hashable mapping, so
configurations that hold tables (data-source properties, address settings) stay hashable.

Identifiers (table names) match ``^[A-Za-z_][A-Za-z0-9_$]*$``: an ASCII letter or ``_``, then
ASCII letters, digits, ``_`` or ``$``. That is a name every supported database accepts unquoted,
so it can never carry SQL (no blanks, quotes, ``;``, dots or non-ASCII look-alikes); it must also
fit the target database's identifier length (:data:`IDENTIFIER_MAX_LENGTH`).

Every bad value raises :class:`~store.errors.ConfigError` carrying ``key``, ``value`` and
``allowed`` (``value`` is ``"<hidden>"`` for secrets), built by :func:`invalid`.

Thread-safety: every function here is pure and may be called from any thread.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from store.errors import ConfigError

__all__ = [
    "FrozenMap",
    "HIDDEN",
    "IDENTIFIER_MAX_LENGTH",
    "IDENTIFIER_PATTERN",
    "INT32_MAX",
    "INT64_MAX",
    "PAGE_STORE_SUFFIX_DIGITS",
    "SIZE_ALLOWED",
    "check_bool",
    "check_int",
    "check_text",
    "closest_name",
    "db_dialect_of",
    "identifier_max_length",
    "invalid",
    "parse_bool",
    "parse_int",
    "parse_size",
    "parse_text",
    "resolve_embedded_url",
    "redact_url",
    "unknown_key",
    "validate_identifier",
]

INT32_MAX: Final = 2**31 - 1
INT64_MAX: Final = 2**63 - 1

# Shown in place of a secret in messages and in ConfigError.value.
HIDDEN: Final = "<hidden>"

SIZE_ALLOWED: Final = (
    "a size in bytes: an integer, optionally followed by K, M or G (powers of 1024; "
    "KB/KiB/MB/MiB/GB/GiB mean the same), e.g. 10M"
)

IDENTIFIER_PATTERN: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*", re.ASCII)
IDENTIFIER_MAX_LENGTH: Final[Mapping[str, int]] = {
    "postgresql": 63,
    "mysql": 64,
    "sqlite": 128,
    "derby": 128,
    "h2": 256,
    "other": 30,  # Oracle's limit: the smallest a JDBC database is likely to have
}
PAGE_STORE_SUFFIX_DIGITS: Final = 20  # per-address page tables append a decimal id (Artemis)

# re.ASCII: Java's \d and \s are ASCII-only; Python's would also accept e.g. Arabic-Indic digits.
_SIZE = re.compile(r"\s*([0-9]+)\s*(?:([kmg])i?)?b?\s*", re.IGNORECASE | re.ASCII)
_SIGNED_INT = re.compile(r"\s*([+-]?[0-9]+)\s*", re.ASCII)
_UNIT = {None: 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_DIALECTS: Final = {
    "postgresql": "postgresql",
    "postgres": "postgresql",
    "pgsql": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
    "sqlite": "sqlite",
    "sqlite3": "sqlite",
    "derby": "derby",
    "h2": "h2",
}
_JDBC_PREFIX = re.compile(r"jdbc:[a-z0-9]+:(?:(?:thin|oci8?|kprb):)?", re.IGNORECASE | re.ASCII)
_SECRET_PARAM = re.compile(
    r"(?i)([?&;]\s*(?:user|username|user-name|password|passwd|pwd|secret|token|credentials?)"
    r"\s*=)([^&;]*)"
)


class FrozenMap(Mapping[str, Any]):
    """An immutable, hashable mapping (so configurations can be dict keys).

    Thread-safety: immutable; safe to share.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = dict(data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._data) == dict(other)

    def __repr__(self) -> str:
        return repr(self._data)


def invalid(
    key: str, value: object, allowed: str, *, hint: str | None = None, secret: bool = False
) -> ConfigError:
    """Build the ConfigError for one bad value.

    Returns a :class:`ConfigError` whose message names the key, the value (or ``<hidden>`` when
    ``secret``) and what is allowed; the caller raises it. Raises nothing.
    """
    shown: object = HIDDEN if secret else value
    return ConfigError(
        f"invalid {key}: {shown!r}; allowed: {allowed}",
        key=key,
        value=shown,
        allowed=allowed,
        hint=hint,
    )


def unknown_key(key: str, known: Iterable[str], where: str) -> ConfigError:
    """Build the ConfigError for a key that does not exist, suggesting the closest known one.

    Returns the error (``value`` is the key itself, never its value, which may be a secret).
    Raises nothing.
    """
    names = sorted(known)
    close = closest_name(key, names)
    suggestion = f"did you mean {close!r}?" if close else None
    allowed = "one of " + ", ".join(names)
    return ConfigError(
        f"unknown key {key!r} in {where}"
        + (f"; {suggestion}" if suggestion else "")
        + f" (allowed: {allowed})",
        key=key,
        value=key,
        allowed=allowed,
        hint=suggestion,
    )


def closest_name(key: str, known: Iterable[str]) -> str | None:
    """Find the known name a misspelled ``key`` most likely meant.

    Compares the kebab-case, lower-case form of ``key`` first, then ``key`` as given (snake_case
    field names compare better that way). Returns the closest name, or ``None`` when none is
    close enough. Raises nothing.
    """
    names = sorted(known)
    close = difflib.get_close_matches(key.replace("_", "-").lower(), names, n=1, cutoff=0.6)
    if not close:
        close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    return close[0] if close else None


def parse_size(value: object, *, key: str = "size") -> int:
    """Parse a size in Artemis notation (see the module docstring).

    Returns the number of bytes (negative only for a signed plain integer such as ``-1``).
    Raises :class:`ConfigError` naming ``key`` when the value is not a size.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        match = _SIZE.fullmatch(value)
        if match is not None:
            unit = match.group(2)
            return int(match.group(1)) * _UNIT[unit.lower() if unit else None]
        signed = _SIGNED_INT.fullmatch(value)
        if signed is not None:
            return int(signed.group(1))
    raise invalid(key, value, SIZE_ALLOWED)


def parse_bool(value: object, *, key: str = "value") -> bool:
    """Parse a boolean: ``True``/``False`` or the text ``true``/``false`` in any case.

    Returns the boolean. Raises :class:`ConfigError` naming ``key`` for anything else.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "false"):
            return text == "true"
    raise invalid(key, value, "true or false")


def parse_int(value: object, *, key: str = "value") -> int:
    """Parse an integer: an ``int`` (not a ``bool``) or a decimal text with an optional sign.

    Returns the integer. Raises :class:`ConfigError` naming ``key`` for anything else.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        match = _SIGNED_INT.fullmatch(value)
        if match is not None:
            return int(match.group(1))
    raise invalid(key, value, "an integer")


def parse_text(value: object, *, key: str = "value", secret: bool = False) -> str:
    """Accept a text (a path-like object becomes its path text).

    Returns the text. Raises :class:`ConfigError` naming ``key`` (hiding the value when
    ``secret``) for anything else.
    """
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise invalid(key, value, "a text", secret=secret)
    return value


def check_int(
    key: str, value: object, low: int, high: int, allowed: str, *, also: Iterable[int] = ()
) -> None:
    """Check that ``value`` is an ``int`` in ``low..high`` or one of ``also``.

    Returns nothing. Raises :class:`ConfigError` naming ``key`` otherwise.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(key, value, allowed)
    if not (low <= value <= high or value in tuple(also)):
        raise invalid(key, value, allowed)


def check_bool(key: str, value: object) -> None:
    """Check that ``value`` is a ``bool``. Returns nothing. Raises :class:`ConfigError`."""
    if not isinstance(value, bool):
        raise invalid(key, value, "true or false")


def check_text(key: str, value: object, *, secret: bool = False, optional: bool = False) -> None:
    """Check that ``value`` is a non-blank text without NUL (or ``None`` when ``optional``).

    Returns nothing. Raises :class:`ConfigError` naming ``key`` otherwise.
    """
    if value is None and optional:
        return
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise invalid(key, value, "a non-empty text", secret=secret)


def redact_url(url: str) -> str:
    """Hide the credentials a database URL may embed (user info, user/password parameters).

    Returns the URL with ``user:password@`` replaced by ``***@`` and the values of parameters
    such as ``password=`` or ``user=`` replaced by ``***``. Raises nothing.
    """
    text = str(url)
    authority = text.find("//")
    at = text.rfind("@")  # the last '@': a password may contain '@' itself
    if authority >= 0 and at > authority:
        text = text[: authority + 2] + "***" + text[at:]
    elif at >= 0:
        # jdbc:oracle:thin:user/password@host, or no URL at all: keep only the driver prefix.
        head = _JDBC_PREFIX.match(text)
        text = (head.group(0) if head else "") + "***" + text[at:]
    return _SECRET_PARAM.sub(r"\1***", text)


def db_dialect_of(url: str) -> str:
    """Name the database a ``jdbc:`` or SQLAlchemy URL points at.

    Returns one of ``"postgresql"``, ``"mysql"`` (MariaDB included), ``"sqlite"``, ``"derby"``,
    ``"h2"`` or ``"other"``. Raises nothing.
    """
    text = str(url).strip().lower()
    if text.startswith("jdbc:"):
        scheme = text[5:].split(":", 1)[0]
    else:
        scheme = text.split(":", 1)[0].split("+", 1)[0]
    return _DIALECTS.get(scheme, "other")


# jdbc:sqlite:[file:]<path>[?params]; jdbc:derby:[directory:]<name>[;attributes];
# sqlite[+driver]:///<path>[?query]. The path is group 2, what follows it group 3.
_EMBEDDED_URL: Final = (
    re.compile(r"(jdbc:sqlite:(?:file:)?)([^?]*)(.*)", re.IGNORECASE | re.DOTALL),
    re.compile(r"(jdbc:derby:(?:directory:)?)([^;]*)(.*)", re.IGNORECASE | re.DOTALL),
    re.compile(r"(sqlite(?:\+\w+)?:///)([^?]*)(.*)", re.IGNORECASE | re.DOTALL),
)
# Names that are not a path on disk: a server, memory, the class path, a jar, a file: URI.
_NOT_A_PATH: Final = re.compile(r"//|(?:memory|classpath|jar|file):|:", re.IGNORECASE)


def resolve_embedded_url(url: str, base_dir: str) -> str:
    """Join the relative database path of an embedded database URL to ``base_dir``.

    Embedded databases are files and folders like the store's directories, so a relative path
    follows the configuration file's folder as they do: ``jdbc:sqlite:[file:]path``,
    ``sqlite:///path`` (SQLAlchemy) and ``jdbc:derby:[directory:]name``. Everything else is
    returned as it is: absolute and ``~`` paths, in-memory databases (``:memory:``,
    ``jdbc:derby:memory:``), Derby's ``classpath:`` / ``jar:`` databases, servers
    (``jdbc:derby://``) and every other URL. ``%`` and ``?`` in ``base_dir`` are
    percent-encoded in SQLite URLs (their paths are URL-decoded).
    Returns the URL. Raises nothing.
    """
    for pattern in _EMBEDDED_URL:
        match = pattern.fullmatch(url)
        if match is None:
            continue
        prefix, path, rest = match.groups()
        if not path or path.startswith(("/", "~")) or _NOT_A_PATH.match(path):
            return url
        if not prefix.lower().startswith("jdbc:derby:"):
            base_dir = base_dir.replace("%", "%25").replace("?", "%3F")
        return prefix + os.path.normpath(os.path.join(base_dir, path)) + rest
    return url


def identifier_max_length(dialect: str) -> int:
    """Give the longest identifier the database of ``dialect`` (see :func:`db_dialect_of`) takes.

    Returns the length in characters (30 for an unknown database). Raises nothing.
    """
    return IDENTIFIER_MAX_LENGTH.get(dialect, IDENTIFIER_MAX_LENGTH["other"])


def validate_identifier(name: object, *, key: str, max_length: int) -> str:
    """Check that ``name`` is a safe SQL identifier (see the module docstring).

    Returns ``name``. Raises :class:`ConfigError` naming ``key`` when it is not a string, does
    not match :data:`IDENTIFIER_PATTERN` (blanks, quotes, ``;``, non-ASCII letters…) or is longer
    than ``max_length``.
    """
    allowed = (
        f"an identifier of 1 to {max_length} characters: an ASCII letter or '_', then "
        "ASCII letters, digits, '_' or '$'"
    )
    if not isinstance(name, str) or not IDENTIFIER_PATTERN.fullmatch(name):
        raise invalid(key, name, allowed)
    if len(name) > max_length:
        raise invalid(key, name, allowed, hint=f"it has {len(name)} characters")
    return name
