"""jdbc-connection-url → database, driver, SQLAlchemy URL and connection arguments
(store.db.urls), and data-source properties → pool settings."""

from __future__ import annotations

import logging
import os

import pytest

from store import StoreConfig
from store.db.urls import pool_options, resolve_target
from store.errors import ConfigError


def _target(url: str, **section: object):
    mapping = {"database-store": {"jdbc-connection-url": url, **section}}
    db = StoreConfig.from_mapping(mapping).database_store
    assert db is not None
    return resolve_target(db)


@pytest.mark.parametrize(
    ("url", "driver", "host", "port", "database"),
    [
        (
            "jdbc:postgresql://db.example:5433/broker",
            "postgresql+psycopg",
            "db.example",
            5433,
            "broker",
        ),
        ("jdbc:postgresql://db.example/broker", "postgresql+psycopg", "db.example", None, "broker"),
        ("jdbc:postgresql:broker", "postgresql+psycopg", "localhost", None, "broker"),
        ("jdbc:postgresql://[::1]:5432/broker", "postgresql+psycopg", "::1", 5432, "broker"),
        ("jdbc:mysql://db.example:3307/broker", "mysql+pymysql", "db.example", 3307, "broker"),
        ("jdbc:mariadb://db.example/broker", "mysql+pymysql", "db.example", None, "broker"),
        ("jdbc:mysql:loadbalance://a:3306,b:3306/broker", "mysql+pymysql", "a", 3306, "broker"),
        ("postgresql://u@db.example/broker", "postgresql+psycopg", "db.example", None, "broker"),
        ("mysql://u@db.example/broker", "mysql+pymysql", "db.example", None, "broker"),
        ("mariadb://u@db.example/broker", "mariadb+pymysql", "db.example", None, "broker"),
        (
            "postgresql+psycopg://u@db.example/broker",
            "postgresql+psycopg",
            "db.example",
            None,
            "broker",
        ),
    ],
    ids=[
        "pg-host-port",
        "pg-host",
        "pg-database-only",
        "pg-ipv6",
        "mysql",
        "mariadb",
        "mysql-loadbalance-first-host",
        "sqlalchemy-pg-gets-psycopg",
        "sqlalchemy-mysql-gets-pymysql",
        "sqlalchemy-mariadb-gets-pymysql",
        "sqlalchemy-explicit-driver-kept",
    ],
)
def test_native_urls_map_to_the_python_drivers(url, driver, host, port, database) -> None:
    """PostgreSQL goes to psycopg 3, MySQL/MariaDB to PyMySQL, with host, port and database."""
    target = _target(url)
    assert target.url.drivername == driver
    assert (target.url.host, target.url.port, target.url.database) == (host, port, database)
    assert target.jdbc is None


def test_postgresql_parameters_are_translated_to_libpq() -> None:
    """sslmode, ApplicationName, connectTimeout, currentSchema and targetServerType become
    their libpq equivalents; multiple hosts become libpq's host/port lists."""
    target = _target(
        "jdbc:postgresql://h1:5432,h2:5433/broker?sslmode=verify-full&ApplicationName=artemis"
        "&connectTimeout=7&currentSchema=mq&targetServerType=primary"
    )
    q = dict(target.url.query)
    assert q["sslmode"] == "verify-full"
    assert q["application_name"] == "artemis"
    assert q["connect_timeout"] == "7"
    assert q["options"] == "-c search_path=mq"
    assert q["target_session_attrs"] == "read-write"
    assert (q["host"], q["port"]) == ("h1,h2", "5432,5433")
    assert target.url.host is None


def test_jdbc_ssl_true_means_sslmode_require() -> None:
    """The PostgreSQL JDBC driver's ssl=true is libpq's sslmode=require."""
    assert dict(_target("jdbc:postgresql://h/db?ssl=true").url.query)["sslmode"] == "require"


def test_mysql_parameters_are_translated_to_pymysql() -> None:
    """characterEncoding=UTF-8 is utf8mb4; connectTimeout is in ms in JDBC, s in PyMySQL;
    useSSL asks for TLS."""
    target = _target("jdbc:mysql://h/db?characterEncoding=UTF-8&connectTimeout=5000&useSSL=true")
    assert dict(target.url.query)["charset"] == "utf8mb4"
    assert target.connect_args["connect_timeout"] == 5
    assert "ssl" in target.connect_args


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("jdbc:mariadb://h/db", {"ssl_disabled": True}),  # Connector/J: no TLS unless asked
        ("jdbc:mariadb://h/db?sslMode=trust", {"ssl": {"check_hostname": False}}),
        ("jdbc:mariadb://h/db?sslMode=verify-full", {"ssl": {"check_hostname": True}}),
        ("jdbc:mariadb://h/db?useSSL=true", {"ssl": {"check_hostname": False}}),
        ("jdbc:mysql://h/db", {}),  # Connector/J 8: PREFERRED, PyMySQL's default too
        ("jdbc:mysql://h/db?sslMode=DISABLED", {"ssl_disabled": True}),
        ("jdbc:mysql://h/db?useSSL=false", {"ssl_disabled": True}),
        ("jdbc:mysql://h/db?sslMode=VERIFY_IDENTITY", {"ssl": {"check_hostname": True}}),
    ],
)
def test_mysql_tls_follows_the_jdbc_driver_the_url_names(url: str, expected: dict) -> None:
    """TLS as MariaDB's and MySQL's Connector/J would use it for the same URL: a MariaDB URL
    that does not ask for TLS gets none (and no CA bundle loaded per connection)."""
    args = _target(url).connect_args
    assert {k: v for k, v in args.items() if k in ("ssl", "ssl_disabled")} == expected


def test_credentials_come_from_url_then_jdbc_user_then_data_source_properties() -> None:
    """jdbc-user/jdbc-password override the URL's; data-source properties username/password
    override both (Artemis gives the DataSource's own settings precedence)."""
    url = "jdbc:postgresql://h/db?user=url_user&password=url_pw"
    assert (_target(url).url.username, _target(url).url.password) == ("url_user", "url_pw")
    t = _target(url, **{"jdbc-user": "cfg_user", "jdbc-password": "cfg_pw"})
    assert (t.url.username, t.url.password) == ("cfg_user", "cfg_pw")
    t = _target(
        url,
        **{
            "jdbc-user": "cfg_user",
            "data-source-properties": {"username": "ds_user", "password": "ds_pw"},
        },
    )
    assert (t.url.username, t.url.password) == ("ds_user", "ds_pw")


def test_display_hides_every_credential() -> None:
    """What logs and errors show of a target never contains the password."""
    t = _target("jdbc:postgresql://h/db?user=u&password=s3cret", **{"jdbc-password": "s3cret2"})
    assert "s3cret" not in t.display
    assert "s3cret" not in repr(t)


def test_unused_jdbc_parameter_is_named_in_a_warning_without_its_value(caplog) -> None:
    """A JDBC-only parameter is ignored with a warning naming it, never its value."""
    with caplog.at_level(logging.WARNING, logger="store.db.urls"):
        _target("jdbc:postgresql://h/db?loggerFile=secretvalue&prepareThreshold=3")
    assert "loggerFile" in caplog.text
    assert "secretvalue" not in caplog.text
    assert "prepareThreshold" not in caplog.text  # known to be Java-only: dropped quietly


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("jdbc:sqlite:/var/lib/store/broker.db", "/var/lib/store/broker.db"),
        ("jdbc:sqlite:file:/var/lib/store/broker.db?mode=rwc", "/var/lib/store/broker.db"),
        ("jdbc:sqlite:relative.db", os.path.abspath("relative.db")),
        ("jdbc:sqlite::memory:", None),
        ("sqlite:////var/lib/store/broker.db", "/var/lib/store/broker.db"),
    ],
    ids=["absolute", "file-uri", "relative-to-cwd", "memory", "sqlalchemy-url"],
)
def test_sqlite_urls_resolve_to_a_file_or_memory(url, path) -> None:
    """jdbc:sqlite: paths become absolute sqlite3 paths; :memory: has no file."""
    target = _target(url)
    assert target.dialect == "sqlite"
    assert target.sqlite_path == path


def test_other_jdbc_urls_go_through_jaydebeapi_with_the_configured_driver(monkeypatch) -> None:
    """Derby, H2 and any other JDBC URL keep their URL for the JDBC driver, with the driver
    class, the jars of jdbc-driver-classpath (else $CLASSPATH), credentials and the non-pool
    data-source properties as JDBC connection properties."""
    monkeypatch.setenv("CLASSPATH", "/from/env.jar")
    t = _target(
        "jdbc:derby:/tmp/db;create=true",
        **{
            "jdbc-driver-classpath": f"/a.jar{os.pathsep}/b.jar",
            "jdbc-user": "app",
            "jdbc-password": "pw",
            "data-source-properties": {"maxTotal": 4, "territory": "en_GB"},
        },
    )
    assert t.dialect == "derby" and t.url.drivername == "derby+jaydebeapi"
    assert t.jdbc is not None
    assert t.jdbc.url == "jdbc:derby:/tmp/db;create=true"
    assert t.jdbc.driver_class == "org.apache.derby.jdbc.EmbeddedDriver"
    assert t.jdbc.classpath == ("/a.jar", "/b.jar")
    assert dict(t.jdbc.properties) == {"territory": "en_GB", "user": "app", "password": "pw"}
    h2 = _target("jdbc:h2:/tmp/h2db", **{"jdbc-driver-class-name": "org.h2.Driver"})
    assert h2.url.drivername == "h2+jaydebeapi"
    assert h2.jdbc is not None and h2.jdbc.classpath == ("/from/env.jar",)


@pytest.mark.parametrize(
    "url",
    ["jdbc:postgresql:/\x00", "jdbc:mysql:nohost", "oracle+cx://u@h/db"],
    ids=["garbage", "mysql-without-authority", "sqlalchemy-url-of-unsupported-database"],
)
def test_unusable_urls_are_config_errors(url) -> None:
    """A URL the store cannot use raises ConfigError naming jdbc-connection-url."""
    with pytest.raises(ConfigError) as err:
        _target(url)
    assert err.value.key == "jdbc-connection-url"


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({}, {"pool_size": 8, "max_overflow": -1}),
        ({"maxTotal": -1}, {"pool_size": 8, "max_overflow": -1}),
        ({"maxTotal": 20, "maxIdle": 5}, {"pool_size": 5, "max_overflow": 15}),
        ({"maxTotal": 3}, {"pool_size": 3, "max_overflow": 0}),
        ({"maxWaitMillis": 2500}, {"pool_size": 8, "max_overflow": -1, "pool_timeout": 2.5}),
        (
            {"maxConnLifetimeMillis": 60000, "testOnBorrow": True},
            {"pool_size": 8, "max_overflow": -1, "pool_recycle": 60, "pool_pre_ping": True},
        ),
        ({"poolPreparedStatements": True, "minIdle": 2}, {"pool_size": 8, "max_overflow": -1}),
    ],
    ids=[
        "artemis-default-unbounded",
        "maxTotal--1-unbounded",
        "maxTotal-and-maxIdle",
        "small-bounded",
        "maxWaitMillis",
        "lifetime-and-validation",
        "accepted-without-effect",
    ],
)
def test_dbcp2_properties_become_pool_settings(props, expected) -> None:
    """DBCP2-style data-source properties configure SQLAlchemy's pool."""
    assert pool_options(props) == expected


def test_pool_property_of_the_wrong_kind_is_a_config_error() -> None:
    """maxTotal must be an integer: the error names the property."""
    with pytest.raises(ConfigError) as err:
        pool_options({"maxTotal": "lots"})
    assert err.value.key == "data-source-properties.maxTotal"


def test_bean_properties_without_meaning_for_a_python_driver_are_named_in_a_warning(
    caplog,
) -> None:
    """A DataSource bean property (e.g. `cachePrepStmts`) is ignored for psycopg / PyMySQL /
    sqlite3 with a warning naming it; pool settings are silent."""
    with caplog.at_level(logging.WARNING, logger="store.db.urls"):
        _target(
            "jdbc:postgresql://h/db",
            **{"data-source-properties": {"cachePrepStmts": True, "maxTotal": 4}},
        )
    assert "cachePrepStmts" in caplog.text
    assert "maxTotal" not in caplog.text


@pytest.mark.parametrize(
    ("url", "driver", "host", "port", "database"),
    [
        ("postgres://u@db.example:5433/broker", "postgresql+psycopg", "db.example", 5433, "broker"),
        (
            "postgres+psycopg://u@db.example/broker",
            "postgresql+psycopg",
            "db.example",
            None,
            "broker",
        ),
        ("postgresql://db.example/broker", "postgresql+psycopg", "db.example", None, "broker"),
    ],
    ids=["postgres-libpq-spelling", "postgres-with-driver", "postgresql-without-driver"],
)
def test_postgres_scheme_is_postgresql_through_psycopg(url, driver, host, port, database) -> None:
    """`postgres://` (libpq's, Heroku's spelling, which SQLAlchemy no longer loads) is
    PostgreSQL through psycopg, like `postgresql://`."""
    target = _target(url)
    assert target.dialect == "postgresql"
    assert target.url.drivername == driver
    assert (target.url.host, target.url.port, target.url.database) == (host, port, database)


@pytest.mark.parametrize(
    ("url", "hint"),
    [
        ("postgresql+nosuchdriver://h/db", "psycopg"),
        ("postgresql+psycopg2://h/db", "psycopg"),
        ("postgresql+asyncpg://h/db", "psycopg"),
        ("mysql+mysqldb://h/db", "pymysql"),
        ("sqlite+pysqlcipher:///x.db", "pysqlite"),
        ("nosuchdb://h/db", "jdbc: URL"),
        ("jdbc:postgres://h:5432/db", "jdbc:postgresql:"),
    ],
    ids=[
        "unknown-driver",
        "driver-not-installed",
        "async-driver",
        "other-mysql-driver",
        "other-sqlite-driver",
        "unknown-database",
        "jdbc-postgres-typo",
    ],
)
def test_url_scheme_the_store_cannot_load_is_a_config_error(url, hint) -> None:
    """A scheme SQLAlchemy cannot load (or the store cannot drive) is a ConfigError naming
    jdbc-connection-url and what is allowed, with a hint; never NoSuchModuleError or
    ImportError from create_engine."""
    with pytest.raises(ConfigError) as err:
        _target(url)
    assert err.value.key == "jdbc-connection-url"
    assert "postgres://" in (err.value.allowed or "") or "jdbc:postgresql://" in (
        err.value.allowed or ""
    )
    assert hint in (err.value.hint or "")


@pytest.mark.parametrize(
    ("url", "example"),
    [
        ("jdbc:oracle:thin:@db.example:1521:XE", "oracle.jdbc.OracleDriver"),
        ("jdbc:h2:/tmp/h2db", "org.h2.Driver"),
        ("jdbc:derby://db.example:1527/store;create=true", "org.apache.derby.jdbc.ClientDriver"),
        ("jdbc:informix-sqli://h:9088/db", "com.example.jdbc.Driver"),
    ],
    ids=["oracle", "h2", "derby-network-server", "unknown-database"],
)
def test_jdbc_url_without_driver_class_names_the_missing_key(url, example) -> None:
    """A JDBC URL other than embedded Derby with no jdbc-driver-class-name: ConfigError naming
    jdbc-driver-class-name as required, with an example, never Derby's default class."""
    with pytest.raises(ConfigError) as err:
        _target(url)
    assert err.value.key == "jdbc-driver-class-name"
    assert "required" in str(err.value)
    assert "EmbeddedDriver" not in str(err.value) and "EmbeddedDriver" not in (err.value.hint or "")
    assert example in (err.value.hint or "")


def test_driver_class_given_in_the_key_or_the_data_source_properties_is_used() -> None:
    """jdbc-driver-class-name (any value, Derby's own included) or a driverClassName
    data-source property satisfies a JDBC URL; embedded Derby may rely on the default."""
    oracle = "jdbc:oracle:thin:@db.example:1521:XE"
    given = _target(oracle, **{"jdbc-driver-class-name": "oracle.jdbc.OracleDriver"})
    assert given.jdbc is not None and given.jdbc.driver_class == "oracle.jdbc.OracleDriver"
    prop = _target(oracle, **{"data-source-properties": {"driverClassName": "oracle.jdbc.X"}})
    assert prop.jdbc is not None and prop.jdbc.driver_class == "oracle.jdbc.X"
    derby = "org.apache.derby.jdbc.EmbeddedDriver"
    explicit = _target("jdbc:h2:/tmp/x", **{"jdbc-driver-class-name": derby})
    assert explicit.jdbc is not None and explicit.jdbc.driver_class == derby
    embedded = _target("jdbc:derby:/tmp/db;create=true")
    assert embedded.jdbc is not None and embedded.jdbc.driver_class == derby
