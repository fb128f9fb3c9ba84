"""The one place building the reports' :class:`~pyspark.sql.SparkSession` (docs/conventions.md#15).

- master ``local[*]`` by default; ``spark://host:7077`` runs on a cluster (the
  ``docker-compose.yml`` master and worker);
- the JDBC drivers are Debian's jars under ``/usr/share/java`` (``libpostgresql-jdbc-java``,
  ``libmariadb-java``, ``libxerial-sqlite-jdbc-java``, ``libderby-java``, ``libh2-java``),
  found by name pattern so a Debian upgrade of a driver needs no change here, and handed to
  Spark as ``spark.jars``. The databases a report reads are those: PostgreSQL, MariaDB/MySQL,
  SQLite, embedded Derby (``jdbc:derby:<folder>``: not a Derby network server, whose client
  driver is another package, ``libderbyclient-java``, that the set-up does not install) and H2
  (embedded or ``jdbc:h2:tcp:``); any other JDBC URL is a ReportError. PySpark's own jars
  include Derby (10.16, for its Hive metastore), which comes first on the class path: it is the
  copy that reads a Derby store (a soft upgrade: the store's Derby 10.14 still opens the
  database after it). An embedded database is opened by Spark's JVM, not the store's: see
  :mod:`store.reporting.sources`;
- the reports' data is small next to what Spark is tuned for: few shuffle partitions, adaptive
  execution on, sizing shuffle outputs (cached ones too) by their data rather than splitting
  them to the default parallelism, logging at WARN;
- the driver's JVM starts from a class-data-sharing archive of the classes a report loads,
  written by the first report's JVM into ``~/.cache/store`` (``STORE_REPORT_CLASS_ARCHIVE``;
  ``off`` turns it off): :mod:`store.reporting.class_archive`;
- in local mode, Python workers run this interpreter with the folder holding this ``store``
  package first on their ``PYTHONPATH`` (``spark.executorEnv.PYTHONPATH``), so a checkout that
  is not installed still decodes with its own codecs;
- on a cluster, the workers' Python is Spark's choice (``PYSPARK_PYTHON`` on the driver, as
  Spark documents; it needs ``pyarrow`` and ``pandas``), and this ``store`` package is shipped
  to them as a zip (``addPyFile``), so the executors decode with exactly the driver's codecs
  and a worker needs no copy of its own.

Errors: no Java or no PySpark is a :class:`~store.errors.ReportError` (the CLI prints it in one
line); a JDBC URL whose driver jar is missing is one too (:func:`jdbc_jar_for`).

Thread-safety: :func:`build_session` returns Spark's process-wide session (``getOrCreate``);
call it from one thread.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from store.errors import ReportError
from store.extras import install_hint

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "JAR_DIRECTORY",
    "JDBC_DRIVERS",
    "JdbcDriver",
    "build_session",
    "find_jdbc_jars",
    "jdbc_driver_for",
    "require_java",
]

#: Where Debian's Java library packages put their jars; ``STORE_REPORT_JAR_DIRECTORY``
#: overrides it (read at import).
JAR_DIRECTORY: Final = os.environ.get("STORE_REPORT_JAR_DIRECTORY") or "/usr/share/java"


@dataclass(frozen=True, slots=True)
class JdbcDriver:
    """A JDBC driver: the URL scheme it serves, its class, the names its jar has in
    :data:`JAR_DIRECTORY` (glob patterns, most specific first) and the Debian package that
    ships it."""

    scheme: str
    class_name: str
    jar_patterns: tuple[str, ...]
    package: str


# The jar names are what each Debian package really installs under /usr/share/java
# (``dpkg -L <package>``, Debian 12): a versioned jar and an unversioned link to it. The
# versioned name is looked for first (the newest wins when an upgrade left two); the link is
# the fallback, and the only name that is sure to survive a rename of the versioned jar (the
# SQLite package's is ``xerial-sqlite-jdbc-3.40.1.0.jar``, not ``sqlite-jdbc-*``).
_POSTGRESQL_JARS: Final = ("postgresql-[0-9]*.jar", "postgresql.jar")
_MARIADB_JARS: Final = ("mariadb-java-client-[0-9]*.jar", "mariadb-java-client.jar")
_SQLITE_JARS: Final = (
    "xerial-sqlite-jdbc-[0-9]*.jar",
    "sqlite-jdbc-[0-9]*.jar",
    "xerial-sqlite-jdbc.jar",
    "sqlite-jdbc.jar",
)
# libderby-java installs ``derby.jar`` as the file and ``derby-<ver>.jar`` as the link (the
# other way round from the others), beside ``derbyLocale_*``, ``derbynet*`` jars the patterns
# do not match. Only the embedded driver: the network client is another package
# (libderbyclient-java), which the set-up does not install (see jdbc_driver_for).
_DERBY_JARS: Final = ("derby-[0-9]*.jar", "derby.jar")
_H2_JARS: Final = ("h2-[0-9]*.jar", "h2.jar")

JDBC_DRIVERS: Final = (
    JdbcDriver(
        "jdbc:postgresql:", "org.postgresql.Driver", _POSTGRESQL_JARS, "libpostgresql-jdbc-java"
    ),
    JdbcDriver("jdbc:mariadb:", "org.mariadb.jdbc.Driver", _MARIADB_JARS, "libmariadb-java"),
    JdbcDriver("jdbc:mysql:", "org.mariadb.jdbc.Driver", _MARIADB_JARS, "libmariadb-java"),
    JdbcDriver("jdbc:sqlite:", "org.sqlite.JDBC", _SQLITE_JARS, "libxerial-sqlite-jdbc-java"),
    JdbcDriver("jdbc:derby:", "org.apache.derby.jdbc.EmbeddedDriver", _DERBY_JARS, "libderby-java"),
    JdbcDriver("jdbc:h2:", "org.h2.Driver", _H2_JARS, "libh2-java"),
)


def _newest(paths: Iterable[str]) -> str | None:
    def version(path: str) -> tuple[int, ...]:
        digits = os.path.basename(path).rsplit("-", 1)[-1].removesuffix(".jar")
        return tuple(int(p) for p in digits.split(".") if p.isdigit())

    found = sorted(paths, key=version)
    return found[-1] if found else None


def find_jdbc_jars(directory: str = JAR_DIRECTORY) -> dict[str, str]:
    """The jar of each known driver found in ``directory``: driver class -> path, by the
    driver's first name pattern that matches (the newest version of it). Returns an empty
    mapping when there is none. Raises nothing."""
    jars: dict[str, str] = {}
    for driver in JDBC_DRIVERS:
        for pattern in driver.jar_patterns:
            jar = _newest(glob.glob(os.path.join(directory, pattern)))
            if jar is not None:
                jars[driver.class_name] = jar
                break
    return jars


def jdbc_driver_for(url: str, directory: str = JAR_DIRECTORY) -> tuple[JdbcDriver, str]:
    """The driver serving the JDBC ``url`` and its jar. Raises ReportError when the URL's
    database is not one a report reads or its driver's jar is not installed (naming the
    names looked for and the Debian package)."""
    if url.lower().startswith("jdbc:derby://"):
        raise ReportError(
            "a report reads embedded Derby (jdbc:derby:<folder>), not a Derby network server: "
            "its client driver (libderbyclient-java) is not one a report uses"
        )
    for driver in JDBC_DRIVERS:
        if url.lower().startswith(driver.scheme):
            jar = find_jdbc_jars(directory).get(driver.class_name)
            if jar is None:
                raise ReportError(
                    f"no JDBC driver for {driver.scheme} in {directory} (looked for "
                    f"{', '.join(driver.jar_patterns)}): install the Debian package "
                    f"{driver.package}"
                )
            return driver, jar
    schemes = ", ".join(d.scheme for d in JDBC_DRIVERS)
    raise ReportError(f"a report reads {schemes} URLs, not {url.split('//')[0]}")


def require_java() -> str:
    """The ``java`` executable Spark will start. Raises ReportError when there is none."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if found is None:
        raise ReportError(
            "Java is not installed: Spark needs a JRE (Debian: openjdk-17-jre-headless)"
        )
    return found


def _python_path() -> str:
    """This process's PYTHONPATH with the folder holding this ``store`` package first."""
    import store

    root = os.path.dirname(os.path.dirname(os.path.abspath(store.__file__)))
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]
    return os.pathsep.join([root, *rest])


def build_session(
    *,
    master: str = "local[*]",
    app_name: str = "store report",
    shuffle_partitions: int = 4,
    jar_directory: str = JAR_DIRECTORY,
    decoder: str | None = None,
    small_store: bool = False,
) -> SparkSession:
    """Start (or return the running) SparkSession for reports.

    ``master``: ``local[*]`` (default) or a cluster URL; ``shuffle_partitions``: partitions of
    every shuffle (default 4: report data is small; raise it for stores of tens of millions
    of records); ``decoder``: where records are decoded, "auto", "jvm" or "python" (None:
    ``STORE_REPORT_DECODER``, else "auto"; :mod:`store.reporting.jvm`); ``small_store``: the
    session is for reports of small stores (:func:`store.reporting.report.small_source`):
    its JVM compiles with the quick compiler alone (``-XX:TieredStopAtLevel=1``), which
    took a 500-message store's report from 14.4-14.9 s to 10.7-11.6 s in one process on 2
    cores (the optimising compiler's threads competed with the report for the cores) and
    would make millions of rows slower. Returns the session.
    Raises ReportError when PySpark or Java is missing, for an unknown ``decoder``, and for
    "jvm" when the JVM decoder cannot be built.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise ReportError(f"PySpark is not installed: {install_hint('spark')}") from exc
    java = require_java()
    from store.reporting import jvm

    decoder_jar = jvm.choose(decoder or os.environ.get("STORE_REPORT_DECODER") or "auto")
    jars = sorted(find_jdbc_jars(jar_directory).values())
    if decoder_jar is not None:
        jars.append(decoder_jar)
    python_path = _python_path()
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(shuffle_partitions))
        .config("spark.sql.adaptive.enabled", "true")
        # Shuffle outputs sized by their data (64 MB each), not split to the default
        # parallelism, cached ones too (a report caches the replayed entries and scans them
        # in every job): a small store's stages are then one task each, not one per
        # partition of every source.
        .config("spark.sql.adaptive.coalescePartitions.parallelismFirst", "false")
        .config("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    local = master.startswith("local")
    if local:
        # A cluster's workers have their own Python and their own copy of this package (the
        # docker-compose worker: /opt/store on its PYTHONPATH); these paths are this host's.
        builder = builder.config("spark.pyspark.python", sys.executable)
        builder = builder.config("spark.executorEnv.PYTHONPATH", python_path)
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    # Workers are started by the JVM and inherit its environment: PYTHONPATH reaches them in
    # local mode through the driver's environment as well.
    if local:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ["PYTHONPATH"] = python_path
    session = _start(builder, java, ["-XX:TieredStopAtLevel=1"] if small_store else [])
    session.sparkContext.setLogLevel("WARN")
    jvm.register(session, decoder_jar)
    if local:
        _derby_log_away(session)
    if not local:
        session.sparkContext.addPyFile(_package_zip())
    return session


def _start(builder: SparkSession.Builder, java: str, options: list[str]) -> SparkSession:
    """``builder.getOrCreate()``; a new JVM starts with the Java ``options`` and from the
    class archive (:mod:`store.reporting.class_archive`), a running session is returned as
    it is. Raises ReportError when Spark does not start."""
    from pyspark import SparkContext

    from store.reporting import class_archive

    fresh = SparkContext._active_spark_context is None
    if "driver-java-options" in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        options = []  # the caller's Java options: ours would replace them
    archive = class_archive.prepare(java) if fresh else None
    plain = " ".join(options)
    if archive is not None:
        builder = builder.config(
            "spark.driver.extraJavaOptions", " ".join([archive.java_options(), *options])
        )
    elif fresh and options:
        builder = builder.config("spark.driver.extraJavaOptions", plain)
    try:
        try:
            session = builder.getOrCreate()
        except Exception:
            if archive is None:
                raise
            archive.discard()
            if archive.making:
                raise
            # a JVM that an archive stopped from starting: without it, once
            archive = None
            session = builder.config("spark.driver.extraJavaOptions", plain).getOrCreate()
    except Exception as exc:  # Py4J / JVM start-up failures have no common class
        raise ReportError(f"Spark did not start: {type(exc).__name__}: {exc}") from exc
    if archive is not None:
        class_archive.started(session, archive)
    return session


def _derby_log_away(session: SparkSession) -> None:
    """Embedded Derby writes ``derby.log`` into the working folder unless told otherwise: in
    Spark's JVM (where a report of a Derby store boots it) it goes to the temporary folder, as
    in the store's own JVM (:mod:`store.db.jvm`), unless that property is set already. Read
    when Derby's engine boots, at the first Derby read. Raises nothing."""
    import tempfile

    try:
        system = session.sparkContext._jvm.java.lang.System  # type: ignore[union-attr]
        if system.getProperty("derby.stream.error.file") is None:
            log = os.path.join(tempfile.gettempdir(), f"store-report-derby-{os.getuid()}.log")
            system.setProperty("derby.stream.error.file", log)
    except Exception:  # Py4J errors have no common class; a derby.log is no failure
        pass


def _package_zip() -> str:
    """A zip of this ``store`` package (no bytecode) in a temporary folder removed at exit.

    Returns its path. Raises OSError when the folder cannot be written.
    """
    import atexit
    import tempfile
    import zipfile

    import store

    package = os.path.dirname(os.path.abspath(store.__file__))
    folder = tempfile.mkdtemp(prefix="store-report-")
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, "store.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for here, dirs, files in os.walk(package):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                full = os.path.join(here, name)
                archive.write(full, os.path.relpath(full, os.path.dirname(package)))
    return path
