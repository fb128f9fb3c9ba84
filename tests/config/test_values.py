"""Single configuration values (store.config.values): sizes, booleans, integers, identifiers,
URLs."""

from __future__ import annotations

import pytest

from store.config.values import (
    db_dialect_of,
    parse_bool,
    parse_int,
    parse_size,
    redact_url,
    validate_identifier,
)
from store.errors import ConfigError

SIZES = [
    ("512", 512),
    ("512B", 512),
    ("512b", 512),
    ("100K", 102400),
    ("100k", 102400),
    ("100KB", 102400),
    ("100KiB", 102400),
    ("100kib", 102400),
    ("10M", 10485760),
    ("10MB", 10485760),
    ("10MiB", 10485760),
    ("10Mb", 10485760),  # broker.xml spelling: Artemis reads b as bytes, M as MiB
    ("1G", 1073741824),
    ("1GB", 1073741824),
    ("1GiB", 1073741824),
    (" 10 M ", 10485760),
    ("10 MiB", 10485760),
    ("-1", -1),
    ("+5", 5),
    (7, 7),
]


@pytest.mark.parametrize(("text", "expected"), SIZES, ids=[repr(t) for t, _ in SIZES])
def test_size_notation_is_artemis_byteutil(text, expected):
    """K/M/G are powers of 1024 with or without 'i' or 'B', as Artemis's ByteUtil reads them."""
    assert parse_size(text) == expected


ARABIC_INDIC_TEN = "\u0661\u0660"  # digits Python's int() takes and Java's \\d does not
BAD_SIZES = [
    "1.5M",
    "10T",
    "10 K B",
    "M",
    "",
    "ten",
    "10MiBs",
    "10Mi B",
    ARABIC_INDIC_TEN,
    True,
    None,
    1.5,
]


@pytest.mark.parametrize("text", BAD_SIZES, ids=[repr(t) for t in BAD_SIZES])
def test_bad_size_names_key_value_and_what_is_allowed(text):
    with pytest.raises(ConfigError) as info:
        parse_size(text, key="journal-file-size")
    err = info.value
    assert (err.key, err.value) == ("journal-file-size", text)
    assert "journal-file-size" in str(err) and repr(text) in str(err)
    assert "K, M or G" in str(err.allowed)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("True", True),
        (" false ", False),
        (True, True),
        (False, False),
    ],
)
def test_booleans_accept_true_and_false_in_any_case(text, expected):
    assert parse_bool(text) is expected


@pytest.mark.parametrize("text", ["yes", "1", "on", "", 1, 0, None], ids=repr)
def test_other_boolean_spellings_are_errors(text):
    with pytest.raises(ConfigError) as info:
        parse_bool(text, key="journal-datasync")
    assert info.value.allowed == "true or false"


@pytest.mark.parametrize("text", ["2.0", "two", "", True, 2.5, None], ids=repr)
def test_integers_reject_non_integers(text):
    with pytest.raises(ConfigError):
        parse_int(text, key="journal-min-files")


def test_validate_identifier_is_usable_by_other_modules():
    assert validate_identifier("PAGE_STORE12", key="page table", max_length=63) == "PAGE_STORE12"
    with pytest.raises(ConfigError) as info:
        validate_identifier("x;y", key="page table", max_length=63)
    assert info.value.key == "page table"


@pytest.mark.parametrize(
    ("url", "dialect"),
    [
        ("jdbc:postgresql://h:5432/db", "postgresql"),
        ("postgresql+psycopg://u:p@h/db", "postgresql"),
        ("postgresql://h/db", "postgresql"),
        ("jdbc:mysql://h/db", "mysql"),
        ("jdbc:mariadb://h/db", "mysql"),
        ("mariadb+pymysql://h/db", "mysql"),
        ("MYSQL+PYMYSQL://h/db", "mysql"),
        ("jdbc:sqlite:x.db", "sqlite"),
        ("sqlite:///x.db", "sqlite"),
        ("jdbc:derby:memory:db;create=true", "derby"),
        ("jdbc:h2:mem:x", "h2"),
        ("jdbc:oracle:thin:@h:1521:x", "other"),
        ("mssql+pyodbc://h/db", "other"),
        ("", "other"),
    ],
)
def test_db_dialect_of_names_the_database(url, dialect):
    assert db_dialect_of(url) == dialect


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("jdbc:postgresql://u:pw@h/db", "jdbc:postgresql://***@h/db"),
        ("postgresql+psycopg://u:p@ss@h/db", "postgresql+psycopg://***@h/db"),
        (
            "jdbc:mysql://h/db?user=u&password=pw&ssl=1",
            "jdbc:mysql://h/db?user=***&password=***&ssl=1",
        ),
        ("jdbc:derby:db;user=u;password=pw", "jdbc:derby:db;user=***;password=***"),
        ("jdbc:oracle:thin:scott/tiger@h:1521:x", "jdbc:oracle:thin:***@h:1521:x"),
        ("jdbc:h2:mem:x", "jdbc:h2:mem:x"),
        ("admin:topsecret@db", "***@db"),
    ],
)
def test_redact_url_hides_credentials(url, expected):
    assert redact_url(url) == expected
