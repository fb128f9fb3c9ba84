"""The initial schema: journals, large messages, page-store directory, node manager.

Revision ID: 0001
Revises:
Create Date: 2025-01-01

Layout as Artemis's (reference §4.4, §4.8, §4.10) with ``seq`` as the journal's primary key;
see store.db.schema for what each column means. This script spells the DDL out, frozen as it
was when written; ``alembic check`` (tests/db/test_migrations.py) proves that it and
store.db.schema agree. Per-address page tables are created at run time, not here.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from store.db.migrate import migration_names
from store.db.schema import BLOB, NODE_MANAGER_ROWS, SEQ_TYPE, index_name

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_ZERO = sa.text("0")


def _journal(name: str, limit: int) -> None:
    op.create_table(
        name,
        sa.Column("id", sa.BigInteger, nullable=False),
        sa.Column("recordtype", sa.SmallInteger, nullable=False),
        sa.Column("compactcount", sa.SmallInteger, nullable=False, server_default=_ZERO),
        sa.Column("txid", sa.BigInteger, nullable=False),
        sa.Column("userrecordtype", sa.SmallInteger, nullable=False),
        sa.Column("variablesize", sa.Integer, nullable=False),
        sa.Column("record", BLOB, nullable=True),
        sa.Column("txdatasize", sa.Integer, nullable=False, server_default=_ZERO),
        sa.Column("txdata", BLOB, nullable=True),
        sa.Column("txchecknorecords", sa.Integer, nullable=False, server_default=_ZERO),
        sa.Column("seq", SEQ_TYPE, primary_key=True, autoincrement=False),
        mysql_engine="InnoDB",
    )
    op.create_index(index_name(name, "_idx", limit), name, ["id"])
    op.create_index(index_name(name, "_tx_idx", limit), name, ["txid"])


def _files(name: str, limit: int) -> None:
    op.create_table(
        name,
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("filename", sa.String(255), nullable=True),
        sa.Column("extension", sa.String(10), nullable=True),
        sa.Column("data", BLOB, nullable=True),
        mysql_engine="InnoDB",
    )
    op.create_index(index_name(name, "_idx", limit), name, ["filename"])


def _node_manager(name: str) -> None:
    table = op.create_table(
        name,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("holder_id", sa.String(128), nullable=True),
        sa.Column("holder_expiration_time", sa.BigInteger, nullable=True),
        sa.Column("node_id", sa.CHAR(36), nullable=True),
        sa.Column("state", sa.CHAR(1), nullable=True),
        mysql_engine="InnoDB",
    )
    # Artemis creates the four rows with the table; NULL state reads as NOT_STARTED.
    op.bulk_insert(table, [{"id": row} for row in NODE_MANAGER_ROWS])


def upgrade() -> None:
    names = migration_names()
    limit = names.max_length
    _journal(names.bindings, limit)
    _journal(names.messages, limit)
    _files(names.large_messages, limit)
    _files(names.page_store, limit)
    _node_manager(names.node_manager)


def downgrade() -> None:
    names = migration_names()
    limit = names.max_length
    op.drop_table(names.node_manager)
    for name in (names.page_store, names.large_messages):
        op.drop_index(index_name(name, "_idx", limit), table_name=name)
        op.drop_table(name)
    for name in (names.messages, names.bindings):
        op.drop_index(index_name(name, "_tx_idx", limit), table_name=name)
        op.drop_index(index_name(name, "_idx", limit), table_name=name)
        op.drop_table(name)
