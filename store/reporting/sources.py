"""Where a report's rows come from. Every journal source gives
:data:`~store.reporting.schemas.RECORDS` (decoded with the project's codecs,
:mod:`store.reporting.decode`), so the jobs never know which back-end they read:

- :func:`table_journal`: a database journal table over JDBC, partitioned on ``seq``
  (``numPartitions`` range reads, ``fetchsize`` rows per round trip) and **bounded by the
  largest ``seq`` read when the job starts**: rows a writer appends during the report are left
  out, so the report is a consistent cut of the table (a ``seq`` is assigned once, in append
  order, and a row is never rewritten in place);
- :func:`file_journal`: the files a load reads (an interrupted compaction is seen as the load
  sees it, :func:`store.file.survey.loaded_files`), read as binary files and decoded in
  parallel with ``mapInArrow``;
- :func:`history_journal`: the copies in a retention history folder, the same way;
- :func:`file_pages` / :func:`table_pages`: the paged message records of a file store's paging
  folder or of a database store's page tables (:func:`store.paging.format.decode_page`, then
  :func:`store.reporting.decode.paged_records`);
- :func:`file_large_bodies` / :func:`table_large_bodies`: the bodies of the large-message
  folder or table as :data:`~store.reporting.schemas.LARGE_BODIES` (:mod:`store.reporting
  .large`: real sizes, damaged and incomplete bodies).

The SQL text Spark sends is compiled by SQLAlchemy from the schema module's ``Table`` (names
validated and quoted there, docs/conventions.md#14), never formatted here; for Derby and H2
with the store's own dialects (:mod:`store.db.jdbc_dialect`), the ones that created the
tables. Both fold unquoted names to upper case, so the columns Spark reads come back as ``ID``,
``RECORD``, …: the frames are renamed to lower case before decoding.

Embedded Derby and H2 (issue 28): the database is opened by the JVM that reads it, and a
report's reads run in Spark's JVM, a process of its own, never in the store's JVM (JPype's,
inside the Python process of a JDBC store). Each engine refuses a database another process
has open, so:

- a report reads an embedded database only while no store or broker has it open, this
  Python process's own store included (:func:`jdbc_error` turns the refusal into a
  StoreLockedError; a database that does not exist is a StoreUnavailableError: a report never
  creates one, ``create=true`` is dropped from a Derby URL and ``IFEXISTS=TRUE`` added to an
  H2 one). The store lets go at close: its last engine shuts an embedded Derby database down
  (:func:`store.db.engine.dispose_store_engine`), and H2 closes one with its last connection;
- after the report, :func:`release_embedded` shuts the Derby database down in Spark's JVM
  (Derby keeps it booted, and locked, until then), so the store opens it again, in this
  process too; H2 needs nothing;
- only in local mode: a cluster's executors would open the folder on their own hosts
  (:func:`store.reporting.report.run_report` refuses another master).

Thread-safety: functions called from the driver's one thread.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite

from store.config import DatabaseStoreConfig, identifier_max_length
from store.db.schema import StoreSchema, TableNames, journal_table
from store.errors import CorruptionError, StoreLockedError, StoreUnavailableError
from store.file.retention import history_files
from store.file.segments import SegmentNaming
from store.file.survey import HEADER_BAD, list_directory, loaded_files
from store.fs import OsFileSystem
from store.paging.database import ADDRESS_ROW, DIRECTORY_ROW, decode_directory
from store.paging.format import decode_page, page_binding, page_file_name, page_number_of
from store.reporting import jvm, large, schemas
from store.reporting.decode import (
    decode_file_batches,
    decode_table_batches,
    page_error,
    paged_records,
)
from store.reporting.session import jdbc_driver_for

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "JOURNAL_PREFIXES",
    "JdbcRead",
    "embedded_database",
    "jdbc_error",
    "release_embedded",
    "file_journal",
    "file_large_bodies",
    "file_pages",
    "table_large_bodies",
    "table_pages",
    "history_journal",
    "table_bounds",
    "table_journal",
]

#: File-name prefix of each journal's files (``store.file.options``).
JOURNAL_PREFIXES: Final = {"bindings": "bindings", "messages": "data"}
_log = logging.getLogger(__name__)
_COLUMNS: Final = ("id", "recordtype", "txid", "userrecordtype", "record", "seq")
_ADDRESS_FILE: Final = "address.txt"


@dataclass(frozen=True, kw_only=True)
class JdbcRead:
    """How a journal table is read.

    ``partitions``: parallel range reads on ``seq`` (default 4; more only helps with as many
    cores on the database and the cluster). ``fetchsize``: rows per round trip (default 10,000;
    larger uses more memory per task for fewer round trips); with a ``snapshot`` every read
    has one, because Spark's PostgreSQL dialect turns autocommit off only then, and ``SET
    TRANSACTION SNAPSHOT`` needs the transaction block that opens.

    Thread-safety: immutable.
    """

    partitions: int = 4
    fetchsize: int = 10_000
    #: A PostgreSQL snapshot (``pg_export_snapshot()``, held open by the driver program,
    #: :mod:`store.reporting.snapshot`) that every read joins: each JDBC session starts with
    #: ``SET TRANSACTION SNAPSHOT`` (Spark's ``sessionInitStatement``), so every partition of
    #: every table sees the same instant. None: each read sees its own.
    snapshot: str | None = None


def _dialect(url: str) -> sa.engine.Dialect:
    low = url.lower()
    if low.startswith("jdbc:postgresql:"):
        return postgresql.dialect()  # type: ignore[no-untyped-call]
    if low.startswith(("jdbc:mysql:", "jdbc:mariadb:")):
        return mysql.dialect()  # type: ignore[no-untyped-call]
    if low.startswith(("jdbc:derby:", "jdbc:h2:")):
        # The store's own dialects (its tables were created with them): upper-case folding
        # of unquoted names, the same quoting, OFFSET/FETCH for LIMIT.
        from store.db.jdbc_dialect import DerbyDialect, H2Dialect

        return DerbyDialect() if low.startswith("jdbc:derby:") else H2Dialect()
    return sqlite.dialect()  # type: ignore[no-untyped-call]


def _sql(statement: Any, url: str) -> str:
    compiled = statement.compile(dialect=_dialect(url), compile_kwargs={"literal_binds": True})
    return str(compiled)


def _table(config: DatabaseStoreConfig, journal: str) -> sa.Table:
    names = TableNames.from_config(config)
    name = names.bindings if journal == "bindings" else names.messages
    return journal_table(sa.MetaData(), name, identifier_max_length(config.dialect))


_DERBY_CREATE: Final = re.compile(r";\s*create\s*=\s*true\s*(?=;|$)", re.IGNORECASE)
_H2_IFEXISTS: Final = re.compile(r";\s*ifexists\s*=", re.IGNORECASE)


def _spark_url(url: str) -> str:
    """``url`` as Spark should see it.

    - a MariaDB URL with the ``jdbc:mysql:`` scheme (and ``permitMysqlScheme``, which
      Connector/J 3 requires), so Spark applies its MySQL dialect (backtick quoting); under
      ``jdbc:mariadb:`` it would quote the partition column with double quotes, a string
      literal to MariaDB, and silently read the wrong rows;
    - Derby without ``create=true`` and H2 with ``IFEXISTS=TRUE``: a report never creates a
      database (one that is not there is an error, :func:`jdbc_error`).
    """
    low = url.lower()
    if low.startswith("jdbc:derby:"):
        return _DERBY_CREATE.sub("", url)
    if low.startswith("jdbc:h2:"):
        return url if _H2_IFEXISTS.search(url) else f"{url};IFEXISTS=TRUE"
    if not low.startswith("jdbc:mariadb:"):
        return url
    rest = url[len("jdbc:mariadb:") :]
    return f"jdbc:mysql:{rest}{'&' if '?' in rest else '?'}permitMysqlScheme"


def embedded_database(url: str) -> str | None:
    """The database of an embedded Derby or H2 URL (``jdbc:derby:<name>``, ``jdbc:h2:<path>``,
    without their attributes), or None for a server URL (``jdbc:derby://``,
    ``jdbc:h2:tcp:``/``ssl:``) and every other database. An embedded database is opened by
    the JVM that reads it: Spark's, for a report. Raises nothing."""
    low = url.lower()
    if low.startswith("jdbc:derby:") and not low.startswith("jdbc:derby://"):
        return url[len("jdbc:derby:") :].split(";", 1)[0]
    if low.startswith("jdbc:h2:") and not low.startswith(("jdbc:h2:tcp:", "jdbc:h2:ssl:")):
        return url[len("jdbc:h2:") :].split(";", 1)[0]
    return None


#: SQLStates of "another process has this embedded database open" (Derby, H2) and of "there
#: is no such database" (Derby without ``create=true``, H2 with ``IFEXISTS=TRUE``).
_IN_USE: Final = frozenset({"XSDB6", "90020"})
_MISSING: Final = frozenset({"XJ004", "90146"})


def _call(java: Any, method: str) -> Any:
    """``java.method()`` on a Py4J object, or None when the class has no such method."""
    try:
        return getattr(java, method)()
    except Exception:  # Py4JError: no such method (or the gateway is gone)
        return None


def _java_sqlstates(exc: BaseException) -> set[str]:
    """The SQLStates of the Java exceptions behind a Py4J / PySpark error (causes and
    ``getNextException`` chains), else the states its text names."""
    found: set[str] = set()
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    todo: list[Any] = [java]
    for _ in range(50):
        if not todo:
            break
        throwable = todo.pop()
        if throwable is None:
            continue
        # A Py4J object answers every attribute; a method the class lacks fails when called.
        state = _call(throwable, "getSQLState")
        if state is not None:
            found.add(str(state))
            todo.append(_call(throwable, "getNextException"))
        todo.append(_call(throwable, "getCause"))
    if not found:
        text = str(exc)
        found = {s for s in _IN_USE | _MISSING if s in text}
    return found


def jdbc_error(config: DatabaseStoreConfig, exc: BaseException) -> BaseException:
    """The store error a failed JDBC read of an embedded database means, else ``exc``:
    StoreLockedError when another process (a broker, a store left open, even this process's
    own JDBC store: its JVM is not Spark's) has the database open, StoreUnavailableError when
    the database does not exist. Raises nothing."""
    url = config.jdbc_connection_url
    database = embedded_database(url)
    if database is None:
        return exc
    states = _java_sqlstates(exc)
    if states & _IN_USE:
        return StoreLockedError(
            f"the embedded database {database} is open in another process: a report reads an "
            "embedded Derby or H2 database only while no store or broker has it open (close "
            "the store first, also one open in this process)",
            hint="stop the broker, or serve the database over the network (an H2 TCP server)",
        )
    if states & _MISSING:
        return StoreUnavailableError(f"the embedded database {database} does not exist")
    return exc


def release_embedded(spark: SparkSession, config: DatabaseStoreConfig) -> None:
    """Shut down the embedded Derby database of ``config`` in Spark's driver JVM, where a
    report in local mode booted it: Derby keeps a database booted, and locked against every
    other process, until the JVM that booted it shuts it down or exits; the store (its own
    JVM, JayDeBeApi's) can open it again afterwards, in this process too. Embedded H2
    closes a database with its last connection: nothing to do. Raises nothing (a failure is
    logged)."""
    url = config.jdbc_connection_url
    database = embedded_database(url)
    if database is None or not url.lower().startswith("jdbc:derby:"):
        return
    driver, _jar = jdbc_driver_for(url)
    try:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        # The driver instance Spark's JDBC source registered (an internal Spark object, but the
        # only handle on the Derby engine that booted the database: Spark's own Derby jar, for
        # its Hive metastore, comes first on the class path, before Debian's).
        registry = jvm.org.apache.spark.sql.execution.datasources.jdbc.DriverRegistry
        registry.register(driver.class_name)
        registry.get(driver.class_name).connect(
            f"jdbc:derby:{database};shutdown=true", jvm.java.util.Properties()
        )
    except Exception as exc:  # Derby reports a clean shutdown as an SQLException, 08006
        states = _java_sqlstates(exc)
        if "08006" not in states and "XJ004" not in states:  # shut down, or never booted
            _log.warning("shutting down the embedded Derby database %s failed: %s", database, exc)


_SNAPSHOT_ID: Final = re.compile(r"[0-9A-Fa-f]+(-[0-9A-Fa-f]+)+")


def _jdbc_options(config: DatabaseStoreConfig, read: JdbcRead | None = None) -> dict[str, str]:
    driver, _jar = jdbc_driver_for(config.jdbc_connection_url)
    url = _spark_url(config.jdbc_connection_url)
    options = {"url": url, "driver": driver.class_name}
    if read is not None and read.snapshot is not None:
        if not _SNAPSHOT_ID.fullmatch(read.snapshot):  # it is spliced into SQL: hex ids only
            raise ValueError(f"not a PostgreSQL snapshot id: {read.snapshot!r}")
        options["fetchsize"] = str(read.fetchsize)
        options["sessionInitStatement"] = (
            "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; "
            f"SET TRANSACTION SNAPSHOT '{read.snapshot}'"
        )
    if config.jdbc_user is not None:
        options["user"] = config.jdbc_user
    if config.jdbc_password is not None:
        options["password"] = config.jdbc_password
    return options


def table_bounds(
    spark: SparkSession, config: DatabaseStoreConfig, journal: str, *, read: JdbcRead | None = None
) -> tuple[int, int] | None:
    """The smallest and largest ``seq`` of ``journal``'s table now, or None when it is empty.
    Raises ReportError (no driver) and what Spark's JDBC read raises."""
    t = _table(config, journal)
    query = _sql(sa.select(sa.func.min(t.c.seq), sa.func.max(t.c.seq)), config.jdbc_connection_url)
    options = _jdbc_options(config, read)
    row = spark.read.format("jdbc").options(**options, query=query).load().first()
    if row is None or row[1] is None:
        return None
    return int(row[0]), int(row[1])


def table_journal(
    spark: SparkSession,
    config: DatabaseStoreConfig,
    journal: str,
    *,
    read: JdbcRead | None = None,
    bounds: tuple[int, int] | None = None,
) -> DataFrame:
    """``journal``'s table ("bindings" or "messages") as RECORDS rows, up to the largest
    ``seq`` at the call (or ``bounds``, from :func:`table_bounds`, when given). Returns a lazy
    DataFrame with ``read.partitions`` partitions. Raises ReportError (no driver) and what
    Spark's JDBC read raises."""
    read = read or JdbcRead()
    if bounds is None:
        bounds = table_bounds(spark, config, journal, read=read)
    if bounds is None:
        return schemas.empty(spark, schemas.RECORDS)
    low, high = bounds
    t = _table(config, journal)
    cut = sa.select(*(t.c[n] for n in _COLUMNS)).where(t.c.seq <= high)
    frame = _range_read(spark, config, read, cut, "seq", (low, high))
    if jvm.uses_jvm(spark):
        return jvm.table_rows(frame, journal)
    return frame.mapInArrow(decode_table_batches(journal), schemas.RECORDS)


def _range_read(
    spark: SparkSession,
    config: DatabaseStoreConfig,
    read: JdbcRead,
    select: sa.Select[Any],
    column: str,
    bounds: tuple[int, int],
    fetchsize: int | None = None,
) -> DataFrame:
    """``select``'s rows read in ``read.partitions`` range reads on ``column`` over
    ``bounds`` (its smallest and largest value), ``fetchsize`` rows a round trip (default
    ``read.fetchsize``), columns lower-cased. Returns a lazy DataFrame. Raises what Spark's
    JDBC read raises."""
    low, high = bounds
    frame = (
        spark.read.format("jdbc")
        .options(**_jdbc_options(config, read))
        # Spark wants a table expression: the compiled SELECT in parentheses, aliased.
        .option("dbtable", f"({_sql(select, config.jdbc_connection_url)}) AS cut")
        .option("partitionColumn", column)
        .option("lowerBound", str(low))
        .option("upperBound", str(high + 1))
        .option("numPartitions", str(read.partitions))
        .option("fetchsize", str(fetchsize or read.fetchsize))
        .load()
    )
    return _lower_case(frame)


def _binary_files(spark: SparkSession, paths: list[str], journal: str) -> DataFrame:
    if not paths:
        return schemas.empty(spark, schemas.RECORDS)
    files = spark.read.format("binaryFile").load(paths)
    if jvm.uses_jvm(spark):
        # The scan's own partitions (a file is never split; files are packed up to about
        # total / default parallelism); only the paths are read, the JVM decoder reads each
        # file itself.
        return jvm.file_rows(files.select("path"), journal)
    files = files.select("path", "content")
    # One file per partition: a journal file is decoded by one Python task, files in parallel.
    files = files.repartition(min(len(paths), 64))
    return files.mapInArrow(decode_file_batches(journal), schemas.RECORDS)


def file_journal(spark: SparkSession, directory: str, journal: str) -> DataFrame:
    """The journal files of ``journal`` in ``directory`` that a load reads, as RECORDS rows.
    Returns a lazy DataFrame. Raises ConfigError when the directory holds no journal,
    StoreIOError when a file cannot be read."""
    fs = OsFileSystem()
    listing = list_directory(directory, prefix=JOURNAL_PREFIXES[journal], fs=fs)
    files, _retired = loaded_files(fs, listing)
    paths = [os.path.abspath(f.path) for f in files if f.status != HEADER_BAD]
    return _binary_files(spark, paths, journal)


def history_journal(spark: SparkSession, directory: str) -> DataFrame:
    """Every message-journal copy in the retention history folder ``directory`` as RECORDS
    rows of journal "messages" (a file id may appear in several copies). Returns a lazy
    DataFrame. Raises StoreIOError when the folder cannot be listed."""
    naming = SegmentNaming(directory, JOURNAL_PREFIXES["messages"])
    found = history_files(OsFileSystem(), naming, directory)
    return _binary_files(spark, [os.path.abspath(p) for _fid, p in found], "messages")


def _page_rows(addresses: dict[str, str]) -> Any:
    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            paths = batch.column("path").to_pylist()
            contents = batch.column("content").to_pylist()
            for path, content in zip(paths, contents, strict=True):
                local = path.removeprefix("file:")
                folder, name = os.path.split(local)
                page = page_number_of(name)
                if page is None or folder not in addresses:
                    continue
                address = addresses[folder]
                bound = page_binding(address, page)
                try:
                    records = decode_page(content, path=local, torn_tail=True, binding=bound)
                except CorruptionError as exc:
                    yield page_error(addresses[folder], page, exc)
                    continue
                yield paged_records(addresses[folder], page, records)

    return decode


def file_pages(spark: SparkSession, directory: str) -> DataFrame:
    """Every paged message record under the paging folder ``directory`` as PAGED_MESSAGES
    rows. Returns a lazy DataFrame (empty when the folder does not exist). Raises OSError
    when an address file cannot be read. A page that does not decode is a row with ``error``
    (:func:`store.reporting.decode.page_error`)."""
    addresses: dict[str, str] = {}
    paths: list[str] = []
    if os.path.isdir(directory):
        for name in sorted(os.listdir(directory)):
            folder = os.path.abspath(os.path.join(directory, name))
            marker = os.path.join(folder, _ADDRESS_FILE)
            if not os.path.isfile(marker):
                continue
            with open(marker, "rb") as f:
                addresses[folder] = f.read().decode("utf-8", errors="replace").removesuffix("\n")
            paths += [
                os.path.join(folder, p) for p in os.listdir(folder) if page_number_of(p) is not None
            ]
    if not paths:
        return schemas.empty(spark, schemas.PAGED_MESSAGES)
    files = spark.read.format("binaryFile").load(paths).select("path", "content")
    return files.mapInArrow(_page_rows(addresses), schemas.PAGED_MESSAGES)


def _lower_case(frame: DataFrame) -> DataFrame:
    """``frame`` with its columns named in lower case, as the decoders look them up: Derby
    and H2 fold the unquoted column names of the compiled SELECT to upper case."""
    return frame.toDF(*(c.lower() for c in frame.columns))


def _rows_of(
    spark: SparkSession, config: DatabaseStoreConfig, statement: Any, read: JdbcRead | None
) -> list[Any]:
    query = _sql(statement, config.jdbc_connection_url)
    options = _jdbc_options(config, read)
    return spark.read.format("jdbc").options(**options, query=query).load().collect()


def _page_table_rows(address: str) -> Any:
    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        pages: dict[int, list[tuple[int, bytes]]] = {}
        for batch in batches:
            ids = batch.column("id").to_pylist()
            names = batch.column("filename").to_pylist()
            datas = batch.column("data").to_pylist()
            for rid, name, data in zip(ids, names, datas, strict=True):
                page = page_number_of(name or "")
                if page is not None:
                    pages.setdefault(page, []).append((rid, data or b""))
        for page, rows in sorted(pages.items()):
            # A page's rows in id order (as the page store reads them), each a whole number
            # of records (store.db.schema).
            data = b"".join(d for _id, d in sorted(rows))
            try:
                records = decode_page(
                    data,
                    path=f"{address}/{page_file_name(page)}",
                    torn_tail=False,
                    binding=page_binding(address, page),
                )
            except CorruptionError as exc:
                yield page_error(address, page, exc)
                continue
            yield paged_records(address, page, records)

    return decode


def table_pages(
    spark: SparkSession, config: DatabaseStoreConfig, *, read: JdbcRead | None = None
) -> DataFrame:
    """Every paged message record of a database store's page tables as PAGED_MESSAGES rows
    (a page's rows joined in id order). Returns a lazy DataFrame (empty when nothing is paged).
    Raises ReportError (no driver), ValueError for a damaged directory row, and what Spark's
    JDBC read raises. A page that does not decode is a row with ``error``."""
    schema = StoreSchema(TableNames.from_config(config))
    directory = schema.page_store
    found = _rows_of(
        spark,
        config,
        sa.select(directory.c.data).where(directory.c.filename == DIRECTORY_ROW),
        read,
    )
    frame = schemas.empty(spark, schemas.PAGED_MESSAGES)
    suffixes = sorted(decode_directory(bytes(found[0][0] or b""))) if found else []
    for suffix in suffixes:
        t = schema.page_table(suffix)
        named = _rows_of(
            spark, config, sa.select(t.c.data).where(t.c.filename == ADDRESS_ROW), read
        )
        if not named:
            continue
        address = bytes(named[0][0] or b"").decode("utf-8", errors="replace")
        pages = sa.select(t.c.id, t.c.filename, t.c.data).where(t.c.filename != ADDRESS_ROW)
        rows = _lower_case(
            spark.read.format("jdbc")
            .options(**_jdbc_options(config, read))
            .option("dbtable", f"({_sql(pages, config.jdbc_connection_url)}) AS pages")
            .load()
        ).repartition(1)  # every row of one page in one task: its rows are joined there
        frame = frame.unionByName(
            rows.mapInArrow(_page_table_rows(address), schemas.PAGED_MESSAGES)
        )
    return frame


def file_large_bodies(spark: SparkSession, directory: str) -> DataFrame:
    """Every body file (``<id>.msg``, ``<id>.tmp``) of the large-messages folder ``directory``
    as LARGE_BODIES rows, each file decoded in one task (:func:`store.reporting.large
    .file_body`). Returns a lazy DataFrame (empty when the folder does not exist). Raises
    OSError when the folder cannot be listed."""
    paths: list[str] = []
    if os.path.isdir(directory):
        folder = os.path.abspath(directory)
        paths = [
            os.path.join(folder, n)
            for n in sorted(os.listdir(folder))
            if n.endswith((".msg", ".tmp"))
        ]
    if not paths:
        return schemas.empty(spark, schemas.LARGE_BODIES)
    files = spark.read.format("binaryFile").load(paths).select("path", "content")
    return files.mapInArrow(large.decode_file_bodies, schemas.LARGE_BODIES)


#: Rows of the large-message table per round trip: each is a chunk of up to 1 MiB
#: (``store.large.chunks.CHUNK_SIZE``), so a journal read's 10,000 would hold gigabytes.
_BODY_ROWS_PER_FETCH: Final = 16


def table_large_bodies(
    spark: SparkSession, config: DatabaseStoreConfig, *, read: JdbcRead | None = None
) -> DataFrame:
    """The bodies of a database store's large-message table as LARGE_BODIES rows: its rows
    read in ``read.partitions`` range reads on ``id``, each decoded on its own, then put
    together per body (:func:`store.reporting.large.bodies_of_rows`). Returns a lazy
    DataFrame. Raises ReportError (no driver) and what Spark's JDBC read raises."""
    read = read or JdbcRead()
    t = StoreSchema(TableNames.from_config(config)).large_messages
    # Counted, and no NULL column: SQLite's driver gives a NULL min() no type, and Spark then
    # fails reading it ("column -1 out of bounds").
    bounds = sa.select(
        sa.func.count(),
        sa.func.coalesce(sa.func.min(t.c.id), 0),
        sa.func.coalesce(sa.func.max(t.c.id), 0),
    )
    found = _rows_of(spark, config, bounds, read)
    if not found or not found[0][0]:
        return schemas.empty(spark, schemas.LARGE_BODIES)
    low, high = int(found[0][1]), int(found[0][2])
    cut = sa.select(t.c.id, t.c.filename, t.c.extension, t.c.data).where(t.c.id <= high)
    rows = _range_read(spark, config, read, cut, "id", (low, high), _BODY_ROWS_PER_FETCH)
    decoded = rows.mapInArrow(large.table_body_rows(t.name), schemas.LARGE_BODY_ROWS)
    return large.bodies_of_rows(decoded, t.name)
