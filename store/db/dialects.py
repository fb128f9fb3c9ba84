"""Per-database differences of the journal, in one place (docs/conventions.md#14).

Every statement is built from the ``Table`` objects of :mod:`store.db.schema` and compiled with
the engine's dialect; the SQL text below is only what SQLAlchemy cannot express (PostgreSQL's
``COPY``, whose identifiers come from the dialect's own quoting). What differs per database:

==============  ==========================  ====================  ==========================
database        insert a batch              delete many           stream a load
==============  ==========================  ====================  ==========================
PostgreSQL      binary ``COPY``, rows       ``executemany``       named (server-side) binary
                encoded by the appender     (psycopg pipelines)   cursor
MySQL/MariaDB   multi-row ``INSERT``        one ``DELETE`` per    unbuffered ``SSCursor``
                (PyMySQL ``executemany``)   chunk of ≤256 keys
SQLite          ``executemany``             ``executemany``       plain cursor (lazy)
JDBC            ``executeBatch``            ``executeBatch``      ``fetchmany`` with a fetch
                                                                  size
==============  ==========================  ====================  ==========================

The four delete statements of a batch (see :mod:`store.db.journal` for why each has seq bounds):

- ``delete_records(id, hi)``: non-transactional rows of ``id`` older than ``hi``;
- ``delete_tx_records(id, txid, lo, hi)``: rows of ``id`` added or updated by one committed
  transaction (whose rows lie in ``[lo, hi)``);
- ``delete_transactions(txid, lo, hi)``: every row of one transaction in ``[lo, hi]``;
- ``delete_rows(seq)``: one row by position (rows of kinds this store never writes).

Thread-safety: a :class:`JournalSQL` is immutable after construction; its methods run on the
DBAPI connection they are given, which belongs to one thread at a time.
"""

from __future__ import annotations

import queue
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, Final

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from store.journal.api import RecordType

__all__ = [
    "LOAD_COLUMNS",
    "Compiled",
    "JournalSQL",
    "journal_sql_for",
    "load_select",
]

_RECORD_ROWS: Final = (int(RecordType.ADD), int(RecordType.UPDATE))
_TX_RECORD_ROWS: Final = (int(RecordType.ADD_TX), int(RecordType.UPDATE_TX))
_TX_ROWS: Final = (
    int(RecordType.ADD_TX),
    int(RecordType.UPDATE_TX),
    int(RecordType.DELETE_TX),
    int(RecordType.PREPARE),
    int(RecordType.COMMIT),
    int(RecordType.ROLLBACK),
)
#: Columns an insert writes (compactcount, txchecknorecords default to 0 in the table).
INSERT_COLUMNS: Final = (
    "id",
    "recordtype",
    "txid",
    "userrecordtype",
    "variablesize",
    "record",
    "txdatasize",
    "txdata",
    "seq",
)
#: Columns a load reads, in this order.
LOAD_COLUMNS: Final = ("id", "recordtype", "txid", "userrecordtype", "record", "txdata", "seq")

# Statement texts SQLAlchemy has no construct for; every one of them lives here.
_BEGIN: Final = "BEGIN"
#: SQLite: write-ahead log, and a commit is durable when it returns.
SQLITE_FILE_PRAGMAS: Final = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL")
SQLITE_MEMORY_PRAGMAS: Final = ("PRAGMA synchronous=FULL",)
SQLITE_BEGIN: Final = "BEGIN"
#: SQLite: a transaction that takes the database's write lock at once (waiting busy_timeout).
SQLITE_BEGIN_WRITE: Final = "BEGIN IMMEDIATE"
#: Execution option of a SQLAlchemy connection whose transactions begin with
#: SQLITE_BEGIN_WRITE (the engine's begin hook reads it; schema changes use it).
SQLITE_WRITE_LOCK_OPTION: Final = "store_sqlite_write_lock"
#: MySQL: an idle session lives a year (the store lock's connection must not be dropped).
MYSQL_LONG_SESSION: Final = "SET SESSION wait_timeout = 31536000"
_COMMIT: Final = "COMMIT"
#: PostgreSQL: this transaction's commit does not wait for its WAL flush (large-message chunks,
#: made durable by the body's final, synchronous commit; see store.large.database).
PG_ASYNC_COMMIT: Final = "SET LOCAL synchronous_commit TO OFF"
_ROLLBACK: Final = "ROLLBACK"

# PostgreSQL binary COPY framing (https://www.postgresql.org/docs/current/sql-copy.html).
_PG_SIGNATURE: Final = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
_PG_TRAILER: Final = b"\xff\xff"
# 9 fields; id, recordtype, txid, userrecordtype, variablesize, then record's length.
_PG_HEAD: Final = struct.Struct("!hiqihiqihiii")
# txdatasize, NULL txdata, seq
_PG_TAIL_NO_TXDATA: Final = struct.Struct("!iiiiq")
# txdatasize, txdata's length (txdata follows)
_PG_TXDATA: Final = struct.Struct("!iii")
_PG_SEQ: Final = struct.Struct("!iq")


class Compiled:
    """A statement compiled for one dialect with positional parameters in a known order.

    ``sql`` is the text to hand the DBAPI cursor; ``order`` the names of its parameters in
    placement order. Thread-safety: immutable.
    """

    __slots__ = ("order", "sql")

    def __init__(self, stmt: sa.ClauseElement, dialect: Dialect, names: Sequence[str]) -> None:
        compiled = stmt.compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
        self.sql: str = compiled.string
        order = tuple(getattr(compiled, "positiontup", None) or ())
        if sorted(order) != sorted(names):
            raise AssertionError(f"statement parameters {order} are not {tuple(names)}")
        self.order: tuple[str, ...] = order


def load_select(table: sa.Table) -> sa.Select[Any]:
    """The load's query of a journal ``table``: every row, :data:`LOAD_COLUMNS`, in ``seq``
    order (``store data verify`` runs it through SQLAlchemy, the load through the driver)."""
    c = table.c
    return sa.select(*(c[n] for n in LOAD_COLUMNS)).order_by(c.seq)


def _const(name: str, values: Sequence[int]) -> sa.BindParameter[Any]:
    # Rendered into the SQL text at compile time: constants, never user data.
    return sa.bindparam(name, list(values), expanding=True, literal_execute=True)


def _zero() -> sa.BindParameter[Any]:
    return sa.bindparam("zero", 0, type_=sa.Integer, literal_execute=True)


def _var(name: str, type_: Any = sa.BigInteger) -> sa.BindParameter[Any]:
    return sa.bindparam(name, 0, type_=type_)


class JournalSQL:
    """The statements of one journal table for one database, and how to run them fast on the
    raw DBAPI connection (base class: plain DB-API ``executemany``).

    Thread-safety: immutable after construction; a method runs on the connection it is given,
    which one thread uses at a time.
    """

    #: Largest body the database stores in one row (bytes).
    max_blob_size: ClassVar[int] = 2**31 - 1
    #: Rows fetched per round trip during a load.
    fetch_size: ClassVar[int] = 10_000

    def __init__(self, table: sa.Table, dialect: Dialect) -> None:
        if not dialect.positional:
            # Rows are tuples in a known order: compile for the driver's positional style.
            dialect = type(dialect)(paramstyle="format")  # type: ignore[call-arg]
        self.table = table
        self.dialect = dialect
        c = table.c
        self.insert = Compiled(
            sa.insert(table).values({name: _var(name, c[name].type) for name in INSERT_COLUMNS}),
            dialect,
            INSERT_COLUMNS,
        )
        self.insert_order = tuple(INSERT_COLUMNS.index(n) for n in self.insert.order)
        self._compile_deletes(table, dialect)
        self.del_rows = Compiled(sa.delete(table).where(c.seq == _var("seq")), dialect, ("seq",))
        self.load = Compiled(load_select(table), dialect, ())
        self.max_seq = Compiled(sa.select(sa.func.max(c.seq)), dialect, ())
        # How many rows of a seq range exist: settles a batch whose commit's answer was lost.
        self.count_seqs = Compiled(
            sa.select(sa.func.count()).where(c.seq >= _var("lo"), c.seq <= _var("hi")),
            dialect,
            ("lo", "hi"),
        )
        # Compaction's scan: no bodies, no order needed.
        self.scan = Compiled(
            sa.select(c.seq, c.id, c.recordtype, c.txid).where(c.seq <= _var("upto")),
            dialect,
            ("upto",),
        )
        size = c.variablesize + c.txdatasize
        self.totals = Compiled(
            sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(size), _zero())), dialect, ()
        )
        self.record_bytes = Compiled(
            sa.select(sa.func.coalesce(sa.func.sum(c.variablesize), _zero())).where(
                c.recordtype.in_(_const("rt", (*_RECORD_ROWS, *_TX_RECORD_ROWS)))
            ),
            dialect,
            (),
        )

    def _compile_deletes(self, table: sa.Table, dialect: Dialect) -> None:
        c = table.c
        # ``seq + 0``: the bound is every row before the delete, so it must not be an index
        # condition. PostgreSQL, without statistics for a young table, ANDed a bitmap scan of
        # the primary key over all those rows with the scan of ``id``: 0.65 ms per deleted
        # message at 26,000 rows, where the scan of ``id`` alone takes 0.03 ms.
        self.del_records = Compiled(
            sa.delete(table).where(
                c.id == _var("id"),
                c.recordtype.in_(_const("rt", _RECORD_ROWS)),
                c.seq + sa.literal_column("0", sa.BigInteger) < _var("hi"),
            ),
            dialect,
            ("id", "hi"),
        )
        self.del_tx_records = Compiled(
            sa.delete(table).where(
                c.id == _var("id"),
                c.txid == _var("tx"),
                c.recordtype.in_(_const("rt", _TX_RECORD_ROWS)),
                c.seq >= _var("lo"),
                c.seq < _var("hi"),
            ),
            dialect,
            ("id", "tx", "lo", "hi"),
        )
        self.del_transactions = Compiled(
            sa.delete(table).where(
                c.txid == _var("tx"),
                c.recordtype.in_(_const("rt", _TX_ROWS)),
                c.seq >= _var("lo"),
                c.seq <= _var("hi"),
            ),
            dialect,
            ("tx", "lo", "hi"),
        )

    # -- rows ---------------------------------------------------------------------------------

    def encode_row(
        self,
        id: int,
        rtype: int,
        txid: int,
        urt: int,
        record: bytes,
        txdata: bytes | None,
        seq: int,
    ) -> Any:
        """One row as :meth:`insert_rows` takes it. Returns it; raises nothing.

        Called by appenders (outside the writer) so the writer's share of the work stays small.
        """
        row = (id, rtype, txid, urt, len(record), record, len(txdata or b""), txdata, seq)
        if self.insert_order == tuple(range(len(INSERT_COLUMNS))):
            return row
        return tuple(row[i] for i in self.insert_order)

    # -- one batch's transaction (see store.db.writer.commit_batch) ---------------------------

    def prepare_writer(self, conn: Any) -> None:
        """Set up the writer's own connection (kept for the journal's life) once."""

    def release_writer(self, conn: Any) -> None:
        """Undo :meth:`prepare_writer` before the connection goes back to the pool."""

    def insert_committed(
        self, cursor: Any, rows: list[Any], sent: Callable[[], None] | None = None
    ) -> bool:
        """Insert ``rows`` as one statement the database commits on its own (one round trip
        fewer than begin + insert + commit), calling ``sent`` once the rows are on their way.
        Returns False when this database cannot, and then nothing was done."""
        return False

    def begin(self, conn: Any) -> None:
        """Start the batch's transaction (DB-API connections begin implicitly)."""

    def insert_rows(self, cursor: Any, rows: list[Any]) -> None:
        """Insert encoded rows."""
        cursor.executemany(self.insert.sql, rows)

    def delete_records(self, cursor: Any, keys: list[tuple[int, int]]) -> None:
        """Delete non-transactional rows: (id, hi) pairs."""
        cursor.executemany(self.del_records.sql, keys)

    def delete_tx_records(self, cursor: Any, keys: list[tuple[int, int, int, int]]) -> None:
        """Delete rows of committed transactions: (id, txid, lo, hi)."""
        cursor.executemany(self.del_tx_records.sql, keys)

    def delete_transactions(self, cursor: Any, keys: list[tuple[int, int, int]]) -> None:
        """Delete transactions' rows: (txid, lo, hi)."""
        cursor.executemany(self.del_transactions.sql, keys)

    def delete_rows(self, cursor: Any, seqs: list[tuple[int]]) -> None:
        """Delete single rows by seq."""
        cursor.executemany(self.del_rows.sql, seqs)

    def commit(self, conn: Any) -> None:
        """Commit the batch's transaction."""
        conn.commit()

    def rollback(self, conn: Any) -> None:
        """Roll the batch's transaction back."""
        conn.rollback()

    # -- load ---------------------------------------------------------------------------------

    def stream(
        self, conn: Any, query: Compiled | None = None, params: Sequence[Any] = ()
    ) -> Iterator[Sequence[Sequence[Any]]]:
        """Yield the rows of ``query`` (default: the load, in ``seq`` order, as tuples of
        :data:`LOAD_COLUMNS`) ``fetch_size`` at a time; memory is bounded by one chunk, never
        the table."""
        cursor = conn.cursor()
        try:
            cursor.execute((query or self.load).sql, tuple(params))
            while rows := cursor.fetchmany(self.fetch_size):
                yield rows
        finally:
            cursor.close()

    def max_record_size(self, conn: Any) -> int:
        """Largest body this database takes in one row. Returns bytes; raises driver errors."""
        del conn
        return self.max_blob_size


class PostgreSQLJournalSQL(JournalSQL):
    """PostgreSQL through psycopg 3: binary COPY in, named binary cursor out.

    Thread-safety: as :class:`JournalSQL`; a load's prefetch thread is private to that load.
    """

    max_blob_size: ClassVar[int] = 2**30 - 1024 * 1024  # bytea stops at 1 GiB per value

    def __init__(self, table: sa.Table, dialect: Dialect) -> None:
        super().__init__(table, dialect)
        quote = self.dialect.identifier_preparer
        columns = ", ".join(quote.quote(name) for name in INSERT_COLUMNS)
        # The one statement SQLAlchemy has no construct for; identifiers quoted by the dialect.
        self.copy_sql = f"COPY {quote.format_table(table)} ({columns}) FROM STDIN (FORMAT BINARY)"

    def encode_row(
        self,
        id: int,
        rtype: int,
        txid: int,
        urt: int,
        record: bytes,
        txdata: bytes | None,
        seq: int,
    ) -> bytes:
        n = len(record)
        head = _PG_HEAD.pack(9, 8, id, 2, rtype, 8, txid, 2, urt, 4, n, n)
        if txdata is None:
            return head + record + _PG_TAIL_NO_TXDATA.pack(4, 0, -1, 8, seq)
        t = len(txdata)
        return head + record + _PG_TXDATA.pack(4, t, t) + txdata + _PG_SEQ.pack(8, seq)

    def prepare_writer(self, conn: Any) -> None:
        # Autocommit: an insert-only batch is one COPY that commits by itself, and the other
        # batches send their own BEGIN / COMMIT; psycopg's implicit BEGIN would cost a round
        # trip of its own on every batch.
        conn.autocommit = True

    def release_writer(self, conn: Any) -> None:
        conn.autocommit = False

    def insert_committed(
        self, cursor: Any, rows: list[Any], sent: Callable[[], None] | None = None
    ) -> bool:
        if not cursor.connection.autocommit:
            return False
        with cursor.copy(self.copy_sql) as copy:
            copy.write(b"".join((_PG_SIGNATURE, *rows, _PG_TRAILER)))
            if sent is not None:
                sent()
        return True

    def begin(self, conn: Any) -> None:
        if conn.autocommit:
            conn.execute(_BEGIN)

    def commit(self, conn: Any) -> None:
        if conn.autocommit:
            conn.execute(_COMMIT)
        else:
            conn.commit()

    def rollback(self, conn: Any) -> None:
        if conn.autocommit:
            conn.execute(_ROLLBACK)
        else:
            conn.rollback()

    def insert_rows(self, cursor: Any, rows: list[Any]) -> None:
        with cursor.copy(self.copy_sql) as copy:
            copy.write(b"".join((_PG_SIGNATURE, *rows, _PG_TRAILER)))

    def stream(
        self, conn: Any, query: Compiled | None = None, params: Sequence[Any] = ()
    ) -> Iterator[Sequence[Sequence[Any]]]:
        # A named cursor lives on the server: rows arrive fetch_size at a time, in binary. The
        # next chunk is fetched by a helper thread while the caller replays this one (the
        # server's share of a FETCH overlaps the replay; at most two chunks are in memory).
        cursor = conn.cursor(name="store_journal_scan", binary=True)
        cursor.itersize = self.fetch_size
        chunks: queue.Queue[Any] = queue.Queue(maxsize=1)
        stop = threading.Event()

        def produce() -> None:
            try:
                cursor.execute((query or self.load).sql, tuple(params))
                while not stop.is_set():
                    rows = cursor.fetchmany(self.fetch_size)
                    chunks.put(rows)
                    if not rows:
                        return
            except BaseException as exc:  # handed to the consumer
                chunks.put(exc)

        fetcher = threading.Thread(target=produce, name="store-db-load-fetch", daemon=True)
        fetcher.start()
        try:
            while True:
                item = chunks.get()
                if isinstance(item, BaseException):
                    raise item
                if not item:
                    return
                yield item
        finally:
            stop.set()
            while fetcher.is_alive():  # unblock a producer waiting to put
                try:
                    chunks.get(timeout=0.05)
                except queue.Empty:
                    pass
            cursor.close()


class MySQLJournalSQL(JournalSQL):
    """MySQL / MariaDB through PyMySQL: multi-row INSERT, chunked DELETEs, unbuffered reads.

    Thread-safety: as :class:`JournalSQL`.
    """

    max_blob_size: ClassVar[int] = 2**32 - 1
    _CHUNKS: ClassVar[tuple[int, ...]] = (1, 4, 16, 64, 256)

    def __init__(self, table: sa.Table, dialect: Dialect) -> None:
        super().__init__(table, dialect)
        c = table.c
        # PyMySQL decodes every column in Python: plain rows (most of a table) get NULL for
        # the columns only transaction rows need (txid, txdata, seq), which decode for free.
        tx_row = c.recordtype >= _const("tx", (int(RecordType.ADD_TX),))
        self.load = Compiled(
            sa.select(
                c.id,
                c.recordtype,
                sa.case((tx_row, c.txid)),
                c.userrecordtype,
                c.record,
                sa.case((c.recordtype == _const("prepare", (int(RecordType.PREPARE),)), c.txdata)),
                sa.case((tx_row, c.seq)),
            ).order_by(c.seq),
            self.dialect,
            (),
        )
        # PyMySQL's executemany sends one statement per row for DELETE: delete many keys at
        # once, in statements of _CHUNKS keys, each compiled when first needed (the largest
        # takes SQLAlchemy about 50 ms: every open of a store, most of which never delete 256
        # keys at once, paid for all five).
        self._del_records_n: dict[int, Compiled] = {}

    def _delete_records_of(self, n: int) -> Compiled:
        """The DELETE of ``n`` (id, seq bound) keys, compiled once. Two threads asking at once
        may both compile it; either result is the same statement."""
        stmt = self._del_records_n.get(n)
        if stmt is None:
            c = self.table.c
            stmt = self._del_records_n[n] = Compiled(
                sa.delete(self.table).where(
                    c.recordtype.in_(_const("rt", _RECORD_ROWS)),
                    sa.or_(
                        *(sa.and_(c.id == _var(f"i{k}"), c.seq < _var(f"h{k}")) for k in range(n))
                    ),
                ),
                self.dialect,
                [name for k in range(n) for name in (f"i{k}", f"h{k}")],
            )
        return stmt

    def delete_records(self, cursor: Any, keys: list[tuple[int, int]]) -> None:
        biggest = self._CHUNKS[-1]
        for start in range(0, len(keys), biggest):
            chunk = keys[start : start + biggest]
            size = next(n for n in self._CHUNKS if n >= len(chunk))
            # Pad with the last key: deleting the same rows twice in one statement is harmless.
            chunk = chunk + [chunk[-1]] * (size - len(chunk))
            stmt = self._delete_records_of(size)
            cursor.execute(stmt.sql, [v for key in chunk for v in key])

    def stream(
        self, conn: Any, query: Compiled | None = None, params: Sequence[Any] = ()
    ) -> Iterator[Sequence[Sequence[Any]]]:
        import pymysql.cursors  # type: ignore[import-untyped]

        cursor = conn.cursor(pymysql.cursors.SSCursor)
        try:
            cursor.execute((query or self.load).sql, tuple(params))
            while rows := cursor.fetchmany(self.fetch_size):
                yield rows
        finally:
            cursor.close()

    def max_record_size(self, conn: Any) -> int:
        cursor = conn.cursor()
        try:
            cursor.execute(_MYSQL_MAX_PACKET)
            (packet,) = cursor.fetchone()
        finally:
            cursor.close()
        # The whole INSERT must fit one packet; keep room for the row's other columns.
        return min(self.max_blob_size, int(packet) // 2 - 4096)


_MYSQL_MAX_PACKET: Final = "SELECT @@max_allowed_packet"


class SQLiteJournalSQL(JournalSQL):
    """SQLite through the standard library: explicit transactions, executemany.

    Thread-safety: as :class:`JournalSQL`.
    """

    max_blob_size: ClassVar[int] = 1_000_000_000  # SQLITE_MAX_LENGTH's default

    def begin(self, conn: Any) -> None:
        # The engine runs sqlite3 in autocommit mode (isolation_level=None), so that this
        # BEGIN is the only one: IMMEDIATE takes the write lock now rather than mid-batch.
        conn.execute(SQLITE_BEGIN_WRITE)

    def max_record_size(self, conn: Any) -> int:
        import sqlite3

        limit = conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
        return min(self.max_blob_size, int(limit) - 1024)


class JdbcJournalSQL(JournalSQL):
    """Any JDBC database through JayDeBeApi: JDBC batches, fetch-size reads.

    Thread-safety: as :class:`JournalSQL`.
    """

    fetch_size: ClassVar[int] = 2_000


#: Built statements kept per (dialect, table): compiling a journal's twenty statements takes
#: SQLAlchemy about 10 ms, and every open of a database store built both journals' again.
_BUILT: dict[tuple[Any, ...], JournalSQL] = {}
_BUILT_LOCK = threading.Lock()
_BUILT_MAX = 256


def journal_sql_for(table: sa.Table, dialect: Dialect) -> JournalSQL:
    """The :class:`JournalSQL` of ``table`` for the engine's ``dialect``, built once per
    process for each table name and dialect (the statements are text, the objects immutable;
    the oldest of :data:`_BUILT_MAX` is let go). Raises nothing. Thread-safe."""
    key = (
        type(dialect),
        dialect.name,
        dialect.driver,
        dialect.paramstyle,
        getattr(dialect, "server_version_info", None),
        getattr(dialect, "is_mariadb", None),
        table.name,
        tuple((c.name, repr(c.type)) for c in table.columns),
    )
    with _BUILT_LOCK:
        built = _BUILT.get(key)
    if built is not None:
        return built
    built = _build(table, dialect)
    with _BUILT_LOCK:
        if len(_BUILT) >= _BUILT_MAX:
            del _BUILT[next(iter(_BUILT))]
        return _BUILT.setdefault(key, built)


def _build(table: sa.Table, dialect: Dialect) -> JournalSQL:
    name = dialect.name
    if name == "postgresql":
        return PostgreSQLJournalSQL(table, dialect)
    if name in ("mysql", "mariadb"):
        return MySQLJournalSQL(table, dialect)
    if name == "sqlite":
        return SQLiteJournalSQL(table, dialect)
    return JdbcJournalSQL(table, dialect)
