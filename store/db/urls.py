"""From ``jdbc-connection-url`` to a driver: which database, which Python driver, which
SQLAlchemy URL and which connection arguments (docs/config.md, reference §4.1, §4.2).

========================================  ===============================================
configured URL                             driver
========================================  ===============================================
``jdbc:postgresql://host[:port]/db?…``     psycopg 3 (``postgresql+psycopg``)
``jdbc:mysql://…``, ``jdbc:mariadb://…``   PyMySQL (``mysql+pymysql``)
``jdbc:sqlite:path`` / ``:memory:``        sqlite3 (``sqlite+pysqlite``)
any other ``jdbc:`` URL (Derby, H2, …)     JayDeBeApi + JPype with ``jdbc-driver-class-name``
                                           (required, except for embedded ``jdbc:derby:``)
a SQLAlchemy URL                           ``postgresql://`` / ``postgres://`` → psycopg,
                                           ``mysql://`` / ``mariadb://`` → PyMySQL,
                                           ``sqlite:///path`` → sqlite3
========================================  ===============================================

A SQLAlchemy URL may name only those drivers (``postgresql+psycopg://`` …): the journal's
fast paths (COPY, server-side cursors) are written for them. ``postgres://`` is libpq's (and
Heroku's, Cloud Foundry's) spelling, which SQLAlchemy no longer knows; ``jdbc:postgres:`` is
refused with a hint, because PostgreSQL's JDBC driver (and so Artemis) refuses it too. Every
URL the store cannot use is a :class:`~store.errors.ConfigError` naming
``jdbc-connection-url`` and what is allowed, raised before anything connects.

JDBC parameters the Python drivers understand are translated (``user``, ``password``,
``ssl``/``sslmode``, ``ApplicationName``, ``connectTimeout``, ``currentSchema``,
``characterEncoding``, ``useSSL``/``sslMode``, ``localSocket``…); any other parameter is
ignored with a warning that names it (never its value). ``jdbc-user`` / ``jdbc-password``
(already ENC-decoded by the configuration) override credentials in the URL, and so do the
data-source properties ``username`` / ``password`` / ``url`` / ``driverClassName``, which
Artemis gives precedence (reference §4.2).

The remaining data-source properties configure the pool, with DBCP2's names
(:func:`pool_options`). ``jdbc-network-timeout`` is applied by :mod:`store.db.engine`.

Passwords never leave this module in text form except inside the ``URL`` object and the
connection arguments handed to the driver; :attr:`DatabaseTarget.display` is what logs and
errors show.

Thread-safety: pure functions and immutable results.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import parse_qsl, unquote, urlsplit

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from store.config import DatabaseStoreConfig, db_dialect_of, redact_url
from store.errors import ConfigError
from store.extras import require

__all__ = [
    "DatabaseTarget",
    "JdbcTarget",
    "pool_options",
    "resolve_target",
]

_log = logging.getLogger(__name__)

_KEY = "jdbc-connection-url"

# JDBC parameter -> libpq keyword, for the ones whose meaning is the same.
_PG_PARAMS: Final = {
    "sslmode": "sslmode",
    "sslcert": "sslcert",
    "sslkey": "sslkey",
    "sslrootcert": "sslrootcert",
    "sslpassword": "sslpassword",
    "applicationname": "application_name",
    "options": "options",
    "gssencmode": "gssencmode",
    "channelbinding": "channel_binding",
}
_PG_TARGET: Final = {
    "any": "any",
    "primary": "read-write",
    "master": "read-write",
    "secondary": "standby",
    "slave": "standby",
    "prefersecondary": "prefer-standby",
    "preferslave": "prefer-standby",
}
# Parameters the store sets itself from jdbc-network-timeout, or that only matter to Java.
_IGNORED_QUIETLY: Final = frozenset(
    {"sockettimeout", "logintimeout", "tcpkeepalive", "loggerlevel", "preparethreshold"}
)

#: data-source properties that are credentials or the URL, not pool settings.
_IDENTITY_PROPERTIES: Final = frozenset({"url", "username", "user", "password", "driverClassName"})


@dataclass(frozen=True, slots=True)
class JdbcTarget:
    """What a JDBC connection needs: the URL as the driver wants it, the driver class, the jars
    and the connection properties (credentials included; never logged).

    Thread-safety: immutable.
    """

    url: str
    driver_class: str
    classpath: tuple[str, ...]
    properties: Mapping[str, str] = field(repr=False)


@dataclass(frozen=True, slots=True)
class DatabaseTarget:
    """Where a store lives and how to reach it.

    ``dialect`` is one of "postgresql", "mysql", "sqlite", "derby", "h2", "other".
    ``url`` is the SQLAlchemy URL (password inside; render it with ``hide_password``),
    ``connect_args`` extra driver arguments, ``jdbc`` set for JDBC URLs, ``sqlite_path`` the
    database file of a file SQLite store (None in memory), ``display`` the URL with credentials
    hidden, for logs and errors.

    Thread-safety: immutable.
    """

    dialect: str
    url: URL = field(repr=False)
    connect_args: Mapping[str, Any] = field(repr=False)
    display: str
    jdbc: JdbcTarget | None = None
    sqlite_path: str | None = None
    #: MySQL/MariaDB with several hosts (``jdbc:mysql://h1,h2/db``, ``failover:`` …): each
    #: (host, port) in order; every connection goes to the first that accepts it and is
    #: writable (:func:`store.db.failover.connect_writable`). Empty: the URL's one host.
    hosts: tuple[tuple[str, int | None], ...] = ()


def _bad(value: str, allowed: str, *, hint: str | None = None) -> ConfigError:
    return ConfigError(
        f"{_KEY}: {redact_url(value)!r} is not allowed: expected {allowed}",
        key=_KEY,
        value=redact_url(value),
        allowed=allowed,
        hint=hint,
    )


def _credentials(config: DatabaseStoreConfig) -> tuple[str | None, str | None]:
    props = config.data_source_properties
    user = props.get("username", props.get("user", config.jdbc_user))
    password = props.get("password", config.jdbc_password)
    return (None if user is None else str(user), None if password is None else str(password))


def _warn_unused(params: Mapping[str, str], known: set[str]) -> None:
    for name in params:
        low = name.lower()
        if low not in known and low not in _IGNORED_QUIETLY:
            _log.warning("jdbc-connection-url parameter %r is not used by the Python driver", name)


def _split_jdbc(url: str, scheme: str) -> tuple[str, str, dict[str, str]]:
    """(netloc, database, params) of ``jdbc:<scheme>://netloc/db?params``."""
    parts = urlsplit(url[len("jdbc:") :])
    if parts.scheme.lower() != scheme or not url[len(f"jdbc:{scheme}:") :].startswith("//"):
        raise _bad(url, f"jdbc:{scheme}://host[:port]/database")
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    return parts.netloc, unquote(parts.path.lstrip("/")), params


def _postgresql(url: str, user: str | None, password: str | None) -> tuple[URL, dict[str, Any]]:
    body = url[len("jdbc:postgresql:") :]
    if not body.startswith("//"):
        # jdbc:postgresql:database or jdbc:postgresql:/ (local host, default port)
        body = "//localhost/" + body.lstrip("/")
    netloc, database, params = _split_jdbc("jdbc:postgresql:" + body, "postgresql")
    lower = {k.lower(): (k, v) for k, v in params.items()}
    query: dict[str, str] = {}
    args: dict[str, Any] = {}
    for low, (_name, value) in lower.items():
        if low in _PG_PARAMS:
            query[_PG_PARAMS[low]] = value
    if "ssl" in lower and "sslmode" not in lower and lower["ssl"][1].lower() in ("true", ""):
        query["sslmode"] = "require"
    if "connecttimeout" in lower:
        query["connect_timeout"] = lower["connecttimeout"][1]
    if "currentschema" in lower:
        search = lower["currentschema"][1]
        query["options"] = (query.get("options", "") + f" -c search_path={search}").strip()
    if "targetservertype" in lower:
        target = _PG_TARGET.get(lower["targetservertype"][1].lower())
        if target is not None:
            query["target_session_attrs"] = target
    user = user if user is not None else lower.get("user", (None, None))[1]
    password = password if password is not None else lower.get("password", (None, None))[1]
    known = set(_PG_PARAMS) | {"ssl", "connecttimeout", "currentschema", "targetservertype"}
    _warn_unused(params, known | {"user", "password"})
    hosts = [h for h in netloc.split(",") if h]
    host, port = _host_port(hosts[0]) if hosts else ("localhost", None)
    if len(hosts) > 1:
        # libpq takes comma-separated hosts and ports
        pairs = [_host_port(h) for h in hosts]
        query["host"] = ",".join(h or "localhost" for h, _ in pairs)
        query["port"] = ",".join(p or "5432" for _, p in pairs)
        host, port = None, None
    sa_url = URL.create(
        "postgresql+psycopg",
        username=user,
        password=password,
        host=host,
        port=int(port) if port else None,
        database=database or None,
        query=query,
    )
    return sa_url, args


def _host_port(entry: str) -> tuple[str | None, str | None]:
    """(host, port) of ``host``, ``host:port``, ``[v6]`` or ``[v6]:port``."""
    if entry.startswith("["):
        close = entry.find("]")
        return entry[1:close], entry[close + 2 :] or None
    if entry.count(":") == 1:
        host, port = entry.split(":")
        return host or None, port or None
    return entry or None, None


_MYSQL_CHARSETS: Final = {"utf-8": "utf8mb4", "utf8": "utf8mb4", "utf8mb4": "utf8mb4"}


def _mysql(url: str, user: str | None, password: str | None) -> tuple[URL, dict[str, Any]]:
    scheme = url[len("jdbc:") :].split(":", 1)[0].lower()
    body = url[len(f"jdbc:{scheme}:") :]
    for mode in ("loadbalance:", "replication:", "failover:", "sequential:", "aurora:"):
        if body.lower().startswith(mode):
            body = body[len(mode) :]
    netloc, database, params = _split_jdbc(f"jdbc:{scheme}:{body}", scheme)
    lower = {k.lower(): v for k, v in params.items()}
    args: dict[str, Any] = {}
    query: dict[str, str] = {}
    charset = lower.get("characterencoding") or lower.get("charset")
    query["charset"] = _MYSQL_CHARSETS.get((charset or "utf8mb4").lower(), charset or "utf8mb4")
    args.update(_mysql_tls(scheme, lower))
    if "connecttimeout" in lower:
        args["connect_timeout"] = max(1, int(lower["connecttimeout"]) // 1000)
    if "localsocket" in lower:
        args["unix_socket"] = lower["localsocket"]
    user = user if user is not None else lower.get("user")
    password = password if password is not None else lower.get("password")
    known = {"characterencoding", "charset", "usessl", "sslmode", "connecttimeout"}
    _warn_unused(params, known | {"localsocket", "user", "password"})
    entries = [h for h in netloc.split(",") if h] or ["localhost"]
    pairs = [_host_port(h) for h in entries]
    host, port = pairs[0]
    if len(pairs) > 1:
        args["hosts"] = tuple((h or "localhost", int(p) if p else None) for h, p in pairs)
    sa_url = URL.create(
        "mysql+pymysql",
        username=user,
        password=password,
        host=host or "localhost",
        port=int(port) if port else None,
        database=database or None,
        query=query,
    )
    return sa_url, args


def _mysql_tls(scheme: str, lower: dict[str, str]) -> dict[str, Any]:
    """PyMySQL's TLS arguments for a MySQL / MariaDB URL's parameters (lower-cased names), as
    the JDBC driver the URL names would connect. ``useSSL=true`` or ``sslMode`` ``trust``,
    ``required``, ``verify-ca``, ``verify-identity`` / ``verify-full``: TLS required (the
    host name checked for the last two); ``useSSL=false`` or ``sslMode`` ``disable(d)``: no
    TLS. Neither: MariaDB Connector/J (``jdbc:mariadb:``) does not use TLS unless asked, so
    neither does the store; MySQL Connector/J (``jdbc:mysql:``) prefers it, and so does
    PyMySQL (TLS when the server offers it). PyMySQL loads the system's CA certificates for
    every connection it may encrypt (about 25 ms of CPU each): a store that never asked for
    TLS does not pay that on each of its connections."""
    mode = lower.get("sslmode", "").lower().replace("-", "_")
    use = lower.get("usessl", "").lower()
    required = ("trust", "required", "verify_ca", "verify_identity", "verify_full")
    if use == "true" or mode in required:
        return {"ssl": {"check_hostname": mode in ("verify_identity", "verify_full")}}
    if use == "false" or mode in ("disable", "disabled") or (scheme == "mariadb" and not mode):
        return {"ssl_disabled": True}
    return {}


def _sqlite(url: str) -> tuple[URL, str | None]:
    body = url[len("jdbc:sqlite:") :]
    if body.startswith("file:"):
        body = body[len("file:") :]
    body = body.split("?", 1)[0]
    if body in ("", ":memory:"):
        return URL.create("sqlite+pysqlite", database=":memory:"), None
    path = os.path.abspath(os.path.expanduser(unquote(body)))
    return URL.create("sqlite+pysqlite", database=path), path


def _jdbc(config: DatabaseStoreConfig, url: str, dialect: str) -> DatabaseTarget:
    user, password = _credentials(config)
    props: dict[str, str] = {}
    for name, value in config.data_source_properties.items():
        if name in _IDENTITY_PROPERTIES or name in _POOL_PROPERTIES:
            continue
        props[name] = str(value).lower() if isinstance(value, bool) else str(value)
    if user is not None:
        props["user"] = user
    if password is not None:
        props["password"] = password
    raw_cp = config.jdbc_driver_classpath or os.environ.get("CLASSPATH", "")
    classpath = tuple(p for p in raw_cp.split(os.pathsep) if p)
    driver = str(
        config.data_source_properties.get("driverClassName", config.jdbc_driver_class_name)
    )
    if "driverClassName" not in config.data_source_properties:
        _require_driver_class(config, url)
    for module in ("jaydebeapi", "jpype"):  # JayDeBeApi over JPype: the jdbc extra
        require(module, f"jdbc-connection-url {redact_url(url)!r}", key=_KEY)
    name = dialect if dialect in ("derby", "h2") else "jdbc"
    return DatabaseTarget(
        dialect=dialect,
        url=URL.create(f"{name}+jaydebeapi"),
        connect_args={},
        display=redact_url(url),
        jdbc=JdbcTarget(url=url, driver_class=driver, classpath=classpath, properties=props),
    )


# Driver classes of common JDBC URLs, for the example in the error that asks for one.
_DRIVER_EXAMPLES: Final = {
    "oracle": "oracle.jdbc.OracleDriver",
    "h2": "org.h2.Driver",
    "derby": "org.apache.derby.jdbc.ClientDriver",  # a jdbc:derby:// server
    "sqlserver": "com.microsoft.sqlserver.jdbc.SQLServerDriver",
    "db2": "com.ibm.db2.jcc.DB2Driver",
    "hsqldb": "org.hsqldb.jdbc.JDBCDriver",
    "pgsql": "com.impossibl.postgres.jdbc.PGDriver",
}


def _require_driver_class(config: DatabaseStoreConfig, url: str) -> None:
    """Refuse a JDBC URL that relies on the default driver class unless it is embedded Derby
    (the only database that default, Derby's EmbeddedDriver, can open)."""
    body = url[len("jdbc:") :]
    scheme = body.split(":", 1)[0].lower()
    if config.jdbc_driver_class_name_given or (scheme == "derby" and not body[6:].startswith("//")):
        return
    example = _DRIVER_EXAMPLES.get(scheme, "com.example.jdbc.Driver")
    raise ConfigError(
        f"jdbc-driver-class-name is required for {redact_url(url)!r}: only an embedded "
        "jdbc:derby: database can use the default driver",
        key="jdbc-driver-class-name",
        value=None,
        allowed="the JDBC driver class of the jdbc-connection-url's database",
        hint=f'e.g. jdbc-driver-class-name = "{example}", with its jar on '
        "jdbc-driver-classpath (or $CLASSPATH)",
    )


#: The schemes of ``jdbc:`` URLs this module knows, with the form each takes: what a
#: mistyped scheme is compared with.
_KNOWN_SCHEMES: Final = {
    "postgresql": "jdbc:postgresql://host[:port]/database",
    "mysql": "jdbc:mysql://host[:port]/database",
    "mariadb": "jdbc:mariadb://host[:port]/database",
    "sqlite": "jdbc:sqlite:/path/store.db",
    "derby": "jdbc:derby:path;create=true",
}


def _check_scheme(config: DatabaseStoreConfig, url: str) -> None:
    """Refuse a ``jdbc:`` URL that falls through to the generic JDBC driver only because its
    scheme is mistyped: a known scheme without its ``:`` (``jdbc:postgresql//…``) always, and a
    scheme close to a known one (``jdbc:postgresq:``) unless a driver class is configured (a
    JDBC driver of that name may exist). Without this the error would ask for a
    ``jdbc-driver-class-name``, which is not what is wrong. Raises ConfigError naming
    ``jdbc-connection-url`` with the closest known scheme."""
    body = url[len("jdbc:") :]
    match = re.match(r"[A-Za-z0-9_-]*", body)
    scheme = match.group(0).lower() if match else ""
    separated = body[len(scheme) : len(scheme) + 1] == ":"
    if scheme in _KNOWN_SCHEMES and separated:
        return  # derby, the one known scheme the generic JDBC path serves
    driver_given = (
        config.jdbc_driver_class_name_given or "driverClassName" in config.data_source_properties
    )
    if scheme in _KNOWN_SCHEMES:
        closest = scheme
    else:
        close = difflib.get_close_matches(scheme, list(_KNOWN_SCHEMES), n=1, cutoff=0.75)
        if not close or driver_given:
            return
        closest = close[0]
    form = _KNOWN_SCHEMES[closest]
    raise _bad(
        url,
        f"a jdbc: URL of a database the store knows ({form}) or a driver's own scheme with "
        "jdbc-driver-class-name",
        hint=f"did you mean jdbc:{closest}: ? ({form})",
    )


def resolve_target(config: DatabaseStoreConfig) -> DatabaseTarget:
    """Work out database, driver, SQLAlchemy URL and connection arguments for ``config``.

    Returns the :class:`DatabaseTarget`. Raises ConfigError (naming ``jdbc-connection-url``,
    never its credentials) for a URL that cannot be parsed or whose driver cannot be loaded,
    and naming ``jdbc-driver-class-name`` for a JDBC URL that needs a driver class and has none.
    """
    url = str(config.data_source_properties.get("url", config.jdbc_connection_url)).strip()
    dialect = db_dialect_of(url)
    user, password = _credentials(config)
    low = url.lower()
    if not low.startswith("jdbc:") or dialect in ("postgresql", "mysql", "sqlite"):
        # Native drivers take no DataSource bean properties: only the pool settings apply.
        for name in config.data_source_properties:
            if name not in _POOL_PROPERTIES and name not in _IDENTITY_PROPERTIES:
                _log.warning("data-source property %r has no meaning for the Python driver", name)
    try:
        if low.startswith("jdbc:postgresql:"):
            sa_url, args = _postgresql(url, user, password)
            _load_driver(sa_url, url)
        elif low.startswith(("jdbc:mysql:", "jdbc:mariadb:")):
            sa_url, args = _mysql(url, user, password)
            _load_driver(sa_url, url)
        elif low.startswith("jdbc:postgres:"):
            raise _bad(
                url,
                "jdbc:postgresql://host[:port]/database",
                hint="PostgreSQL's JDBC URLs begin jdbc:postgresql: (jdbc:postgres: is refused "
                "by its driver and by Artemis); postgres://host/database is also accepted",
            )
        elif low.startswith("jdbc:sqlite:"):
            sa_url, path = _sqlite(url)
            return DatabaseTarget("sqlite", sa_url, {}, redact_url(url), sqlite_path=path)
        elif low.startswith("jdbc:"):
            _check_scheme(config, url)
            return _jdbc(config, url, dialect)
        else:
            sa_url, args = _sqlalchemy(url, user, password)
            if sa_url.get_backend_name() == "sqlite":
                db = sa_url.database
                path = None if db in (None, "", ":memory:") else os.path.abspath(db)
                return DatabaseTarget("sqlite", sa_url, {}, redact_url(url), sqlite_path=path)
    except (ValueError, ArgumentError) as exc:
        raise _bad(url, "a jdbc: URL or a SQLAlchemy URL") from exc
    hosts = args.pop("hosts", ())
    return DatabaseTarget(dialect, sa_url, args, redact_url(url), hosts=hosts)


#: The Python driver of each database a SQLAlchemy URL may name (the store's fast paths are
#: written for these), by SQLAlchemy backend name.
_DEFAULT_DRIVERS: Final = {
    "postgresql": "psycopg",
    "mysql": "pymysql",
    "mariadb": "pymysql",
    "sqlite": "pysqlite",
}
_SQLALCHEMY_ALLOWED: Final = (
    "a jdbc: URL, or a SQLAlchemy URL of PostgreSQL (postgresql:// or postgres://, driver "
    "psycopg), MySQL/MariaDB (mysql://, mariadb://, driver pymysql) or SQLite (sqlite:///path)"
)


def _sqlalchemy(url: str, user: str | None, password: str | None) -> tuple[URL, dict[str, Any]]:
    sa_url = make_url(url)
    backend, _, driver = sa_url.drivername.lower().partition("+")
    if backend == "postgres":  # libpq's alias, unknown to SQLAlchemy 1.4 and later
        backend = "postgresql"
    if backend not in _DEFAULT_DRIVERS:
        raise _bad(
            url,
            _SQLALCHEMY_ALLOWED,
            hint="other databases are reached through their JDBC driver: use a jdbc: URL",
        )
    wanted = _DEFAULT_DRIVERS[backend]
    if driver not in ("", wanted):
        raise _bad(
            url,
            _SQLALCHEMY_ALLOWED,
            hint=f"the store drives {backend} through {wanted}: write {backend}://… or "
            f"{backend}+{wanted}://…",
        )
    sa_url = sa_url.set(drivername=f"{backend}+{wanted}")
    _load_driver(sa_url, url)
    if user is not None:
        sa_url = sa_url.set(username=user)
    if password is not None:
        sa_url = sa_url.set(password=password)
    return sa_url, {}


#: The Python driver module of each SQLAlchemy backend the store drives (its extra is in
#: :data:`store.extras.EXTRA_OF_MODULE`).
_DRIVER_MODULES: Final = {"postgresql": "psycopg", "mysql": "pymysql", "mariadb": "pymysql"}


def _load_driver(sa_url: URL, url: str) -> None:
    """Load the SQLAlchemy dialect and Python driver module of ``sa_url`` now, so a missing
    one is a ConfigError here (one line naming the extra to install) rather than a traceback
    from create_engine."""
    module = _DRIVER_MODULES.get(sa_url.get_backend_name())
    if module is not None:
        require(module, f"jdbc-connection-url {redact_url(url)!r}", key=_KEY)
    try:
        sa_url.get_dialect().import_dbapi()
    except NoSuchModuleError as exc:
        raise _bad(url, _SQLALCHEMY_ALLOWED, hint=f"SQLAlchemy cannot load it: {exc}") from exc
    except ImportError as exc:
        raise _bad(
            url,
            _SQLALCHEMY_ALLOWED,
            hint=f"its Python driver is not installed ({exc}): pip install {exc.name or '…'}",
        ) from exc


# DBCP2 pool properties Artemis users set (reference §4.2) and what they become in SQLAlchemy.
_POOL_PROPERTIES: Final = frozenset(
    {
        "maxTotal",
        "maxIdle",
        "minIdle",
        "initialSize",
        "maxWaitMillis",
        "maxWait",
        "maxConnLifetimeMillis",
        "testOnBorrow",
        "testWhileIdle",
        "validationQuery",
        "poolPreparedStatements",
        "maxOpenPreparedStatements",
    }
)


def pool_options(properties: Mapping[str, str | int | bool]) -> dict[str, Any]:
    """SQLAlchemy ``create_engine`` pool options from DBCP2-style data-source properties.

    ``maxTotal`` (-1, Artemis's default, is unbounded) and ``maxIdle`` become ``pool_size`` and
    ``max_overflow``; ``maxWaitMillis``/``maxWait`` ``pool_timeout``; ``maxConnLifetimeMillis``
    ``pool_recycle``; ``testOnBorrow``/``testWhileIdle``/``validationQuery`` ``pool_pre_ping``.
    ``minIdle``, ``initialSize`` and the prepared-statement settings are accepted and have no
    effect (SQLAlchemy's pool opens connections on demand; psycopg prepares statements itself).
    Returns the options; raises ConfigError for a value of the wrong kind.
    """

    def number(name: str) -> int | None:
        value = properties.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(
                f"data-source-properties.{name}: {value!r} is not allowed: expected an integer",
                key=f"data-source-properties.{name}",
                value=value,
                allowed="an integer",
            )
        return value

    max_total = number("maxTotal")
    max_idle = number("maxIdle")
    options: dict[str, Any] = {}
    if max_total is None or max_total < 0:
        options["pool_size"] = max(1, max_idle) if max_idle is not None and max_idle > 0 else 8
        options["max_overflow"] = -1
    else:
        size = max(1, min(max_total, max_idle if max_idle is not None and max_idle > 0 else 8))
        options["pool_size"] = size
        options["max_overflow"] = max(0, max_total - size)
    wait = number("maxWaitMillis")
    wait = number("maxWait") if wait is None else wait
    if wait is not None:
        options["pool_timeout"] = wait / 1000 if wait >= 0 else 365 * 86400.0
    lifetime = number("maxConnLifetimeMillis")
    if lifetime is not None and lifetime > 0:
        options["pool_recycle"] = max(1, lifetime // 1000)
    if any(properties.get(k) is True for k in ("testOnBorrow", "testWhileIdle")) or (
        properties.get("validationQuery")
    ):
        options["pool_pre_ping"] = True
    return options
