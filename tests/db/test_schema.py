"""Tables built from configured names (store.db.schema): Artemis's layout, lower-case names,
validated and quoted identifiers, index names within the database's limit."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.schema import CreateIndex, CreateTable

from store import StoreConfig
from store.db.jdbc_dialect import DerbyDialect
from store.db.schema import JOURNAL_COLUMNS, StoreSchema, TableNames, index_name
from store.errors import ConfigError

DIALECTS = {
    "postgresql": postgresql.psycopg.dialect(),
    "mysql": mysql.pymysql.dialect(),
    "sqlite": sqlite.pysqlite.dialect(),
    "derby": DerbyDialect(),
}


def test_journal_table_has_artemis_columns_in_order_with_seq_as_primary_key() -> None:
    """Reference §4.4: the eleven columns, seq the primary key, indexes on id and txid."""
    schema = StoreSchema(TableNames())
    table = schema.messages
    assert tuple(c.name for c in table.columns) == JOURNAL_COLUMNS
    assert [c.name for c in table.primary_key.columns] == ["seq"]
    assert {i.name: [c.name for c in i.columns] for i in table.indexes} == {
        "messages_idx": ["id"],
        "messages_tx_idx": ["txid"],
    }


def test_file_and_node_manager_tables_have_artemis_columns() -> None:
    """Reference §4.8 and §4.10."""
    schema = StoreSchema(TableNames())
    assert [c.name for c in schema.large_messages.columns] == [
        "id",
        "filename",
        "extension",
        "data",
    ]
    assert [c.name for c in schema.page_store.columns] == ["id", "filename", "extension", "data"]
    assert [c.name for c in schema.node_manager.columns] == [
        "id",
        "holder_id",
        "holder_expiration_time",
        "node_id",
        "state",
    ]


@pytest.mark.parametrize(
    ("dialect", "blob"),
    [("postgresql", "BYTEA"), ("mysql", "LONGBLOB"), ("sqlite", "BLOB"), ("derby", "BLOB")],
)
def test_body_column_type_per_database(dialect: str, blob: str) -> None:
    """BYTEA on PostgreSQL (no large objects to orphan), LONGBLOB on MySQL (BLOB stops at
    64 KiB), BLOB elsewhere."""
    ddl = str(CreateTable(StoreSchema(TableNames()).messages).compile(dialect=DIALECTS[dialect]))
    assert f"record {blob}" in ddl
    assert f"txdata {blob}" in ddl


def test_names_are_folded_to_lower_case_so_unquoted_queries_find_them() -> None:
    """Artemis's default upper-case names become lower case: PostgreSQL stores them lower,
    Derby (unquoted) upper, and `select length(data) from lm` works on both (seed 004)."""
    names = TableNames(bindings="B", messages="M", large_messages="LM", page_store="MP")
    schema = StoreSchema(names)
    for dialect in DIALECTS.values():
        ddl = str(CreateTable(schema.large_messages).compile(dialect=dialect))
        assert "CREATE TABLE lm (" in ddl


@pytest.mark.parametrize(
    "name",
    ["x; DROP TABLE y", "a b", "quote'd", 'dq"', "ünïcode", "1starts_with_digit", "", "a-b"],
    ids=["statement", "space", "single-quote", "double-quote", "unicode", "digit", "empty", "dash"],
)
def test_injection_attempts_in_table_names_are_config_errors(name: str) -> None:
    """A table name that is not a plain identifier never reaches SQL: ConfigError naming the
    key, from the configuration and again from TableNames."""
    with pytest.raises(ConfigError) as err:
        StoreConfig.from_mapping(
            {
                "database-store": {
                    "jdbc-connection-url": "jdbc:sqlite::memory:",
                    "message-table-name": name,
                }
            }
        )
    assert err.value.key == "message-table-name"
    with pytest.raises(ConfigError):
        TableNames(messages=name)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "select",
            {
                "postgresql": '"select"',
                "mysql": "`select`",
                "sqlite": '"select"',
                "derby": '"select"',
            },
        ),
        (
            "Odd$Name_1",
            {
                "postgresql": "odd$name_1",
                "mysql": "odd$name_1",
                "sqlite": "odd$name_1",
                "derby": '"odd$name_1"',
            },
        ),
        (
            "_under",
            {"postgresql": "_under", "mysql": "_under", "sqlite": "_under", "derby": "_under"},
        ),
    ],
    ids=["reserved-word", "dollar-and-mixed-case", "leading-underscore"],
)
def test_odd_but_legal_names_are_quoted_where_the_database_needs_it(name, expected) -> None:
    """Reserved words are quoted by the dialect; other legal names stay unquoted."""
    schema = StoreSchema(TableNames(messages=name, max_length=63))
    for dialect, rendered in expected.items():
        ddl = str(CreateTable(schema.messages).compile(dialect=DIALECTS[dialect]))
        assert ddl.lstrip().startswith(f"CREATE TABLE {rendered} (")


def test_long_names_get_index_names_within_the_limit_that_stay_distinct() -> None:
    """A 63-character table name on PostgreSQL: its index names are cut to 63 characters with
    a hash, deterministically, and the two indexes stay distinct."""
    long = "m" * 63
    a = index_name(long, "_idx", 63)
    b = index_name(long, "_tx_idx", 63)
    assert len(a) <= 63 and len(b) <= 63 and a != b
    assert a == index_name(long, "_idx", 63)
    assert index_name("m" * 62 + "n", "_idx", 63) != a
    schema = StoreSchema(TableNames(messages=long, max_length=63))
    for idx in schema.messages.indexes:
        str(CreateIndex(idx).compile(dialect=DIALECTS["postgresql"]))  # no IdentifierError
    assert len(TableNames(bindings="b" * 63, max_length=63).version_table) <= 59


def test_page_tables_are_the_prefix_plus_an_id() -> None:
    """Per-address page tables are <page-store-table-name><id>, each in its own MetaData."""
    schema = StoreSchema(TableNames(page_store="MP", max_length=30))
    table = schema.page_table(1234)
    assert table.name == "mp1234"
    assert table.metadata is not schema.metadata
    with pytest.raises(ValueError):
        schema.page_table(-1)


def test_statements_are_built_from_tables_not_formatted_strings() -> None:
    """Reserved-word table names survive into DML quoted (the store never formats names)."""
    from store.db.dialects import journal_sql_for

    schema = StoreSchema(TableNames(messages="order", max_length=63))
    sql = journal_sql_for(schema.messages, DIALECTS["postgresql"])
    assert 'COPY "order" (' in sql.copy_sql
    assert 'DELETE FROM "order" WHERE "order".id = ' in sql.del_records.sql
    assert (
        sa.select(schema.messages)
        .compile(dialect=DIALECTS["mysql"])
        .string.endswith("FROM `order`")
    )


def test_a_journal_s_statements_are_built_once_per_table_and_dialect() -> None:
    """A store opened again gets the statements built at the first open; another table or
    another database gets its own."""
    from store.db.dialects import journal_sql_for

    first = StoreSchema(TableNames(messages="t5a1c0e01_messages"))
    again = StoreSchema(TableNames(messages="t5a1c0e01_messages"))
    other = StoreSchema(TableNames(messages="t5a1c0e02_messages"))
    built = journal_sql_for(first.messages, DIALECTS["postgresql"])
    assert journal_sql_for(again.messages, postgresql.psycopg.dialect()) is built
    assert journal_sql_for(other.messages, DIALECTS["postgresql"]) is not built
    assert "t5a1c0e02_messages" in journal_sql_for(other.messages, DIALECTS["postgresql"]).load.sql
    for_mysql = journal_sql_for(first.messages, DIALECTS["mysql"])
    assert for_mysql is not built
    assert type(for_mysql).__name__ == "MySQLJournalSQL"
