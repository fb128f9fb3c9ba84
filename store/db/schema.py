"""Every table of a database store, as SQLAlchemy Core ``Table`` objects built from the names
in the configuration (docs/db.md, reference §4.4, §4.8, §4.10).

The layout is Artemis's, so an Artemis DBA (and the queries of seed 004) recognise it:

Journal tables (``bindings-table-name``, ``message-table-name``), one row per journal record:

==================  ============  ===========================================================
column              type          meaning
==================  ============  ===========================================================
id                  BIGINT        record id; -1 on transaction bookkeeping rows
recordtype          SMALLINT      11 add, 12 update, 13 add-tx, 14 update-tx, 15 delete-tx,
                                  17 prepare, 18 commit (the file journal's numbers)
compactcount        SMALLINT      always 0 (server default)
txid                BIGINT        transaction id, 0 outside a transaction
userrecordtype      SMALLINT      0..255, -1 on bookkeeping rows
variablesize        INTEGER       length of ``record``
record              BLOB          the record's body
txdatasize          INTEGER       length of ``txdata`` (server default 0)
txdata              BLOB          the XID of a prepare row
txchecknorecords    INTEGER       always 0 (server default)
seq                 BIGINT        append order, **the primary key** (Artemis leaves it unindexed
                                  on PostgreSQL and MySQL, so every start sorts the table)
==================  ============  ===========================================================

plus ``<table>_idx`` on ``id`` and ``<table>_tx_idx`` on ``txid`` (ARTEMIS-2465). BLOB is
``BYTEA`` on PostgreSQL, ``LONGBLOB`` on MySQL/MariaDB and ``BLOB`` elsewhere.

File tables (``large-message-table-name``, ``page-store-table-name`` and the per-address page
tables ``<page-store-table-name><suffix>``): ``id`` (BIGINT, generated primary key),
``filename`` VARCHAR(255), ``extension`` VARCHAR(10), ``data`` BLOB, and ``<table>_idx`` on
``filename`` (ARTEMIS-3830). Unlike Artemis on PostgreSQL, ``data`` is ``BYTEA``, not a large
object ``OID``: a deleted row can never leave an orphaned large object behind.

table              filename          extension  data
=================  ================  =========  ===============================================
directory          ``directory.txt`` ``txt``    the suffixes of every address table, each in
                                                decimal ASCII followed by ``\n``, ascending
                                                (empty: no address has pages); one row
``<prefix><n>``    ``address.txt``   ``txt``    the address, UTF-8 (no newline); one row
                                                (renamed ``removed.txt`` in the transaction
                                                that unlists the table: a tombstone)
``<prefix><n>``    ``pages.txt``     ``txt``    the page manifest (:mod:`store.paging.manifest`):
                                                every page and its exact length, updated in
                                                each transaction that writes or deletes pages
``<prefix><n>``    ``NNNNNNNNN.page`` ``page``   one flushed batch of records of page
                                                ``NNNNNNNNN`` (9 digits, zero-padded), framed
                                                as :mod:`store.paging.format` says; a page is
                                                the ``data`` of its rows concatenated in ``id``
                                                order (one indexed select), so an append is
                                                an ``INSERT`` of its batch, never a rewrite
=================  ================  =========  ===============================================

Artemis keeps one growing blob per page instead; ours differs in that a page is several rows,
each a whole number of records. ``<n>`` is a positive integer, the next after the largest in
use, and ``<prefix><n>`` must fit the identifier limit.

Large-message rows (``large-message-table-name``; written and read by
:mod:`store.large.database`). A body is never one growing blob: it is cut into chunks
(:mod:`store.large.chunks`, 1 MiB by default, recorded per body) and each chunk is one row,
inserted once; a descriptor row, inserted last in the same transaction as the last chunk,
makes the body complete. Artemis's ``<id>.msg`` / ``msg`` name is the descriptor's, so
``select filename from large_messages where extension = 'msg'`` lists complete bodies:

=========================  =========  ========================================================
filename                   extension  data
=========================  =========  ========================================================
``<id>.<k:09d>.chunk``     ``chunk``  chunk ``k`` (0-based) as a frame: CRC-32 (zlib, 4 bytes
                                      little-endian), then the bytes; the CRC covers ``<id>``
                                      and ``k`` before the bytes (descriptor version 2,
                                      :mod:`store.large.chunks`), the bytes alone (version 1)
``<id>.msg``               ``msg``    the descriptor below; present if and only if the body is
                                      complete (chunk rows without it are a body whose writer
                                      died; they are removed when the store opens)
=========================  =========  ========================================================

``<id>`` is the message id in decimal (``-`` for negative ids). Reading chunk ``k`` is one
select by ``filename`` (indexed); deleting a body deletes its descriptor and its chunk rows,
by name, in one transaction.

Large-message descriptor (40 bytes, little-endian)
==================================================

======  ====  ==============  ==============================================================
Offset  Size  Field           Description
======  ====  ==============  ==============================================================
0       4     magic           ``b"SLMD"``
4       2     version         ``2`` (written), ``1`` (read): what chunk CRCs cover
6       2     reserved        zero
8       4     chunk_size      bytes per chunk (every chunk but the last is full)
12      8     body_size       the body's length in bytes
20      8     message_id      signed; the id in the row's filename
28      8     chunk_count     ``ceil(body_size / chunk_size)``: chunk rows ``0..count-1``
36      4     crc             CRC-32 (zlib) of bytes 0..35
======  ====  ==============  ==============================================================

Page tables (:mod:`store.paging.database`): the rows of ``page-store-table-name`` (the
directory) and of each address's ``<page-store-table-name><suffix>``:

=================  ================  =========  ========================================
Node-manager table (``node-manager-store-table-name``): ``id`` INT primary key, ``holder_id``
VARCHAR(128), ``holder_expiration_time`` BIGINT (epoch ms, database clock), ``node_id``
CHAR(36), ``state`` CHAR(1); rows 0 (state), 1 (primary lock), 2 (backup lock), 3 (node id).

Names are folded like Artemis does (``table-names-case``): every table, index and column name
is lower case, which SQLAlchemy renders unquoted unless it is a reserved word. PostgreSQL,
MySQL and SQLite therefore store them lower case, and Derby and H2 (which fold unquoted names
to upper case) upper case, so ``select length(data) from lm`` works everywhere. Every name is
validated (:func:`store.config.validate_identifier`) before it reaches a ``Table``; SQLAlchemy
quotes it where the dialect needs quotes. Nothing here formats SQL text.

Thread-safety: :class:`StoreSchema` and :class:`TableNames` are immutable once built; share
them freely.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from store.config import identifier_max_length, validate_identifier

if TYPE_CHECKING:
    from store.config import DatabaseStoreConfig

__all__ = [
    "BLOB",
    "JOURNAL_COLUMNS",
    "NODE_MANAGER_ROWS",
    "SEQ_TYPE",
    "StoreSchema",
    "TableNames",
    "file_table",
    "index_name",
    "journal_table",
    "node_manager_table",
]

#: The body type: BYTEA on PostgreSQL, LONGBLOB on MySQL/MariaDB (BLOB there stops at 64 KiB),
#: BLOB elsewhere.
BLOB: Final = sa.LargeBinary().with_variant(mysql.LONGBLOB(), "mysql", "mariadb")
#: BIGINT, but INTEGER on SQLite, where only ``INTEGER PRIMARY KEY`` makes the column the rowid,
#: so the table itself is stored in ``seq`` order (and ids stay 64-bit: SQLite integers are).
SEQ_TYPE: Final = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

#: Journal columns in table order (reference §4.4), lower case.
JOURNAL_COLUMNS: Final = (
    "id",
    "recordtype",
    "compactcount",
    "txid",
    "userrecordtype",
    "variablesize",
    "record",
    "txdatasize",
    "txdata",
    "txchecknorecords",
    "seq",
)

#: Row ids of the node-manager table and what each row holds (reference §4.10).
NODE_MANAGER_ROWS: Final = {0: "state", 1: "primary lock", 2: "backup lock", 3: "node id"}

_VERSION_SUFFIX: Final = "_version"


def index_name(table: str, suffix: str, max_length: int) -> str:
    """Name an index ``<table><suffix>`` within ``max_length`` characters.

    A name that would be too long keeps a prefix of the table name plus eight hex digits of its
    hash, so it stays unique and the same every time. Returns the name; raises nothing.
    """
    name = f"{table}{suffix}"
    if len(name) <= max_length:
        return name
    digest = hashlib.blake2b(table.encode(), digest_size=4).hexdigest()
    keep = max_length - len(suffix) - len(digest) - 1
    return f"{table[:keep]}_{digest}{suffix}"


@dataclass(frozen=True, slots=True)
class TableNames:
    """The configured table names of one store, folded to lower case (see module docstring).

    ``max_length`` is the identifier limit of the target database. Two stores in one database
    differ by these names; everything derived (indexes, the alembic version table, page tables)
    is derived from them.

    Thread-safety: immutable.
    """

    bindings: str = "bindings"
    messages: str = "messages"
    large_messages: str = "large_messages"
    page_store: str = "page_store"
    node_manager: str = "node_manager_store"
    max_length: int = 30

    def __post_init__(self) -> None:
        keys = {
            "bindings": "bindings-table-name",
            "messages": "message-table-name",
            "large_messages": "large-message-table-name",
            "page_store": "page-store-table-name",
            "node_manager": "node-manager-store-table-name",
        }
        for attr, key in keys.items():
            value = validate_identifier(getattr(self, attr), key=key, max_length=self.max_length)
            object.__setattr__(self, attr, value.lower())

    @classmethod
    def from_config(cls, config: DatabaseStoreConfig) -> TableNames:
        """Names of the store ``config`` describes. Returns them; raises ConfigError."""
        return cls(
            bindings=config.bindings_table_name,
            messages=config.message_table_name,
            large_messages=config.large_message_table_name,
            page_store=config.page_store_table_name,
            node_manager=config.node_manager_store_table_name,
            max_length=identifier_max_length(config.dialect),
        )

    @classmethod
    def defaults(cls, dialect: str) -> TableNames:
        """Artemis's default names for ``dialect``. Returns them; raises nothing."""
        return cls(max_length=identifier_max_length(dialect))

    @property
    def version_table(self) -> str:
        """The alembic version table of this store: ``<bindings>_version`` (one per store).

        Four characters shorter than the limit: alembic names its key ``<table>_pkc``.
        """
        return index_name(self.bindings, _VERSION_SUFFIX, self.max_length - 4)

    def all(self) -> tuple[str, ...]:
        """Every fixed table name (page tables of addresses excluded), version table last."""
        return (
            self.bindings,
            self.messages,
            self.large_messages,
            self.page_store,
            self.node_manager,
            self.version_table,
        )


def journal_table(metadata: sa.MetaData, name: str, max_length: int) -> sa.Table:
    """The journal table ``name`` (layout in the module docstring). Returns it; raises nothing."""
    zero = sa.text("0")
    return sa.Table(
        name,
        metadata,
        sa.Column("id", sa.BigInteger, nullable=False),
        sa.Column("recordtype", sa.SmallInteger, nullable=False),
        sa.Column("compactcount", sa.SmallInteger, nullable=False, server_default=zero),
        sa.Column("txid", sa.BigInteger, nullable=False),
        sa.Column("userrecordtype", sa.SmallInteger, nullable=False),
        sa.Column("variablesize", sa.Integer, nullable=False),
        sa.Column("record", BLOB, nullable=True),
        sa.Column("txdatasize", sa.Integer, nullable=False, server_default=zero),
        sa.Column("txdata", BLOB, nullable=True),
        sa.Column("txchecknorecords", sa.Integer, nullable=False, server_default=zero),
        sa.Column("seq", SEQ_TYPE, primary_key=True, autoincrement=False),
        sa.Index(index_name(name, "_idx", max_length), "id"),
        sa.Index(index_name(name, "_tx_idx", max_length), "txid"),
        mysql_engine="InnoDB",
    )


def file_table(metadata: sa.MetaData, name: str, max_length: int) -> sa.Table:
    """A file table (large messages, page store, per-address pages). Returns it; raises nothing."""
    return sa.Table(
        name,
        metadata,
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("filename", sa.String(255), nullable=True),
        sa.Column("extension", sa.String(10), nullable=True),
        sa.Column("data", BLOB, nullable=True),
        sa.Index(index_name(name, "_idx", max_length), "filename"),
        mysql_engine="InnoDB",
    )


def node_manager_table(metadata: sa.MetaData, name: str) -> sa.Table:
    """The node-manager (HA lock) table ``name``. Returns it; raises nothing."""
    return sa.Table(
        name,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("holder_id", sa.String(128), nullable=True),
        sa.Column("holder_expiration_time", sa.BigInteger, nullable=True),
        sa.Column("node_id", sa.CHAR(36), nullable=True),
        sa.Column("state", sa.CHAR(1), nullable=True),
        mysql_engine="InnoDB",
    )


class StoreSchema:
    """The tables of one store, built from its :class:`TableNames`.

    ``metadata`` holds the fixed tables (what migrations create and ``alembic check``
    compares); per-address page tables, created at run time as Artemis does, come from
    :meth:`page_table` in a separate ``MetaData``.

    Thread-safety: immutable after construction, except :meth:`page_table`, which may be
    called from any thread (it builds a new ``Table`` in a private ``MetaData`` each time).
    """

    def __init__(self, names: TableNames) -> None:
        self.names = names
        self.metadata = sa.MetaData()
        n = names.max_length
        self.bindings = journal_table(self.metadata, names.bindings, n)
        self.messages = journal_table(self.metadata, names.messages, n)
        self.large_messages = file_table(self.metadata, names.large_messages, n)
        self.page_store = file_table(self.metadata, names.page_store, n)
        self.node_manager = node_manager_table(self.metadata, names.node_manager)

    def page_table(self, suffix: int) -> sa.Table:
        """The page table of one address, ``<page-store-table-name><suffix>``.

        Returns a ``Table`` in its own ``MetaData`` (create it with ``checkfirst=True``).
        Raises ValueError for a negative suffix.
        """
        if suffix < 0:
            raise ValueError(f"page table suffix must be a non-negative id, not {suffix}")
        name = f"{self.names.page_store}{suffix}"
        validate_identifier(name, key="page-store-table-name", max_length=self.names.max_length)
        return file_table(sa.MetaData(), name, self.names.max_length)

    def journal(self, which: str) -> sa.Table:
        """The journal table ``which`` ("bindings" or "messages"). Raises KeyError otherwise."""
        return {"bindings": self.bindings, "messages": self.messages}[which]
