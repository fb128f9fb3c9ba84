"""The reports' record decoder inside Spark's JVM (issue 28): the Java sources beside this
module (``store/reporting/jvm/*.java``, package ``store.reporting.jvm``) compiled once into a
jar, handed to Spark with the JDBC drivers, and registered as two SQL functions:

- :data:`TABLE_UDF` ``(journal, recordtype, userrecordtype, record)``: the decoded columns
  of one journal-table row (:data:`DECODED`), what :func:`store.reporting.decode.decode_body`
  gives;
- :data:`FILE_UDF` ``(journal, path, content)``: every record of one journal file, what
  :func:`store.reporting.decode.file_records` gives (without ``journal``); ``(journal, path)``
  reads the file in the JVM: Spark's ``binaryFile`` content column copies each file twice
  more (into its row buffer, then into the call's argument), and those copies of 10 MiB
  arrays kept the JVM's collector busy enough to cost the decode about a third of its time.

Why: decoding in Python workers (``mapInArrow``) sends every row to a Python process and back,
3-6x the time of Spark's plain read of the same rows; in the JVM the decode costs little more
than the read (``bench/RESULTS.md``). The two functions are Catalyst expressions
(``StaticInvoke`` of static Java methods, ``Functions.java``), not Java UDFs: a UDF's
``Row`` result is converted field by field into Spark's internal row, which cost about as
much as the decode itself; the expressions build internal rows directly. They are
registered in the session's function registry (an internal Spark API, compiled against the
Spark in use: the jar is rebuilt when Spark changes).
The Python decode stays the reference: the Java one is tested against it row by row, on valid
and damaged records alike, and it is what a report uses where the JVM decoder cannot be built.

The jar is built with ``javac`` (a JDK; Spark itself needs only a JRE) against the jars of the
Spark in use, into a cache folder (``STORE_REPORT_JVM_CACHE``, else ``$XDG_CACHE_HOME/store``,
else ``~/.cache/store``), named by a hash of the sources and that Spark: built once per
change (about 3 s), then reused; written to a temporary name and renamed, so processes that
build it at once do not see a half-written jar.

Which decoder a session uses: ``STORE_REPORT_DECODER`` (``build_session``'s ``decoder``):
``auto`` (default: the JVM's when the jar can be built, else Python's, logged at WARNING),
``jvm`` (a ReportError when the jar cannot be built) or ``python``. The choice is the session's
conf :data:`DECODER_CONF` (``jvm`` or ``python``), which :mod:`store.reporting.sources` reads
at each read; setting it to ``python`` on a JVM session switches back (the benchmark does).

A record whose body does not decode gets, from the JVM, an ``error`` that carries the body
(:data:`store.reporting.decode.JVM_ERROR` + base64); :func:`store.reporting.decode.exact_error`
turns it into the Python decode's own words where an error is shown, so a report names a
damaged record as ``store data verify`` does, whichever decoder read it.

Thread-safety: :func:`decoder_jar` may run in several processes at once; the rest is called
from the thread that builds the session.
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import zipfile
from typing import TYPE_CHECKING, Final

from store.errors import ReportError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "DECODED",
    "DECODER_CONF",
    "DECODERS",
    "FILE_UDF",
    "SOURCES",
    "TABLE_UDF",
    "choose",
    "decoder_jar",
    "file_rows",
    "register",
    "table_rows",
    "uses_jvm",
]

_log = logging.getLogger(__name__)

#: The folder of the Java sources.
SOURCES: Final = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jvm")
TABLE_UDF: Final = "store_decode_record"
FILE_UDF: Final = "store_decode_file"
#: The session conf naming the decoder in use.
DECODER_CONF: Final = "spark.store.reporting.decoder"
DECODERS: Final = ("auto", "jvm", "python")
#: The columns filled from bodies, in RECORDS order (``decode._DECODED``).
DECODED: Final = (
    "address", "name", "queue_id", "timestamp", "priority", "body_size", "large", "error",
    "page", "page_index", "page_tx_id", "orig_address", "expiry_move",
)  # fmt: skip
_COMPILE_SECONDS: Final = 300


def _cache_folder() -> str:
    folder = os.environ.get("STORE_REPORT_JVM_CACHE")
    if folder:
        return folder
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "store")


def _spark_jars() -> str | None:
    """The folder of the jars of the Spark PySpark runs (``SPARK_HOME``'s, else its own)."""
    home = os.environ.get("SPARK_HOME")
    if home and os.path.isdir(os.path.join(home, "jars")):
        return os.path.join(home, "jars")
    try:
        import pyspark
    except ImportError:
        return None
    jars = os.path.join(os.path.dirname(os.path.abspath(pyspark.__file__)), "jars")
    return jars if os.path.isdir(jars) else None


def _javac() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.isfile(os.path.join(home, "bin", "javac")):
        return os.path.join(home, "bin", "javac")
    return shutil.which("javac")


def _sources() -> list[str]:
    return sorted(glob.glob(os.path.join(SOURCES, "*.java")))


def _fingerprint(sources: list[str], jars: str, javac: str) -> str:
    digest = hashlib.sha256()
    for path in sources:
        digest.update(os.path.basename(path).encode())
        with open(path, "rb") as f:
            digest.update(f.read())
    # the Spark compiled against (its jars' names carry the version) and the compiler
    digest.update("\n".join(sorted(os.listdir(jars))).encode())
    digest.update(os.path.realpath(javac).encode())
    return digest.hexdigest()[:16]


def decoder_jar() -> tuple[str | None, str | None]:
    """The decoder's jar, built if not cached. Returns (its path, None), or (None, why it
    cannot be built: no javac, no Spark jars, a compile error). Raises nothing."""
    sources, jars, javac = _sources(), _spark_jars(), _javac()
    if not sources:
        return None, f"no Java sources in {SOURCES}"
    if jars is None:
        return None, "PySpark's jars were not found (is PySpark installed?)"
    if javac is None:
        return None, "no javac (a JDK: apt-get install openjdk-17-jdk-headless)"
    folder = _cache_folder()
    jar = os.path.join(folder, f"store-decoder-{_fingerprint(sources, jars, javac)}.jar")
    if os.path.isfile(jar):
        return jar, None
    try:
        os.makedirs(folder, exist_ok=True)
        _build(javac, jars, sources, jar)
    except (OSError, subprocess.SubprocessError, ReportError) as exc:
        return None, f"the JVM decoder did not build: {exc}"
    return jar, None


def _build(javac: str, jars: str, sources: list[str], jar: str) -> None:
    """Compile ``sources`` against ``jars`` into ``jar`` (written whole, then renamed).
    Raises ReportError with javac's output when it fails, OSError, SubprocessError."""
    with tempfile.TemporaryDirectory(prefix="store-decoder-") as work:
        classes = os.path.join(work, "classes")
        command = [javac, "-nowarn", "-encoding", "UTF-8", "-cp", os.path.join(jars, "*"),
                   "-d", classes, *sources]  # fmt: skip
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=_COMPILE_SECONDS, check=False
        )
        if done.returncode != 0:
            raise ReportError(f"javac exited {done.returncode}: {done.stderr.strip()[-2000:]}")
        partial = os.path.join(os.path.dirname(jar), f".{os.path.basename(jar)}.{os.getpid()}")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for here, _dirs, files in os.walk(classes):
                for name in sorted(files):
                    full = os.path.join(here, name)
                    archive.write(full, os.path.relpath(full, classes))
        os.replace(partial, jar)
    _log.info("built the JVM record decoder: %s", jar)


def choose(decoder: str) -> str | None:
    """The jar to add to a new session for ``decoder`` (one of :data:`DECODERS`), or None for
    the Python decode. Raises ReportError for an unknown name, and for ``jvm`` when the jar
    cannot be built (saying why)."""
    if decoder not in DECODERS:
        raise ReportError(f"STORE_REPORT_DECODER is one of {', '.join(DECODERS)}, not {decoder!r}")
    if decoder == "python":
        return None
    jar, why = decoder_jar()
    if jar is None:
        if decoder == "jvm":
            raise ReportError(f"the JVM record decoder is not available: {why}")
        _log.warning("reports decode records in Python workers (slower): %s", why)
    return jar


def register(session: SparkSession, jar: str | None) -> str:
    """Register the decoder's two functions on ``session`` (started with ``jar`` among its
    ``spark.jars``) and set :data:`DECODER_CONF`. Returns the decoder in use ("jvm", or
    "python" when ``jar`` is None or the classes do not load, logged). Raises nothing."""
    from pyspark.sql.types import ArrayType, StructType

    from store.reporting import schemas

    used = "python"
    if jar is not None:
        try:
            files = StructType(schemas.RECORDS.fields[1:])  # every column but ``journal``
            jvm = session.sparkContext._jvm
            assert jvm is not None
            jvm.store.reporting.jvm.Functions.register(
                session._jsparkSession, TABLE_UDF, _decoded_type().json(),
                FILE_UDF, ArrayType(files, False).json(),
            )  # fmt: skip
            used = "jvm"
        except Exception as exc:  # Py4J errors have no common class
            _log.warning("reports decode records in Python workers: the JVM decoder: %s", exc)
    session.conf.set(DECODER_CONF, used)
    return used


def _decoded_type() -> StructType:
    from pyspark.sql.types import StructType

    from store.reporting import schemas

    return StructType([schemas.RECORDS[name] for name in DECODED])


def uses_jvm(spark: SparkSession) -> bool:
    """True when ``spark``'s reads decode in the JVM (:data:`DECODER_CONF`). Raises
    nothing."""
    return spark.conf.get(DECODER_CONF, "python") == "jvm"


def table_rows(frame: DataFrame, journal: str) -> DataFrame:
    """RECORDS rows of a journal table's rows (id, recordtype, txid, userrecordtype, record,
    seq; lower-case), decoded by :data:`TABLE_UDF`: what ``decode.table_batch`` gives.
    Returns a lazy DataFrame. Raises nothing (Spark raises when it runs)."""
    from pyspark.sql import functions as F

    from store.reporting import schemas

    urt = F.coalesce(F.col("userrecordtype").cast("int"), F.lit(-1))
    decoded = F.expr(f"{TABLE_UDF}('{journal}', recordtype, userrecordtype, record)")
    fixed = {
        "journal": F.lit(journal), "seq": F.col("seq"), "pos": F.lit(0),
        "kind": F.col("recordtype"), "id": F.col("id"), "tx_id": F.col("txid"),
        "user_record_type": urt, "size": F.coalesce(F.length("record"), F.lit(0)),
    }  # fmt: skip
    columns = [fixed[f.name].cast(f.dataType).alias(f.name) for f in schemas.RECORDS.fields[:8]]
    out = frame.select(*columns, decoded.alias("_decoded"))
    rest = [F.col(f"_decoded.{name}").alias(name) for name in DECODED]
    nulls = [F.lit(None).cast(f.dataType).alias(f.name) for f in schemas.RECORDS.fields[-2:]]
    return out.select(*(f.name for f in schemas.RECORDS.fields[:8]), *rest, *nulls)


def file_rows(files: DataFrame, journal: str) -> DataFrame:
    """RECORDS rows of ``journal``'s files, one per ``path`` of ``files`` (``binaryFile``
    rows: only their path is read, the JVM reads each file), decoded by :data:`FILE_UDF`:
    what ``decode.file_records`` gives for each file. Returns a lazy DataFrame. Raises nothing
    (Spark raises when it runs: a damaged header or an unreadable file names the file)."""
    from pyspark.sql import functions as F

    from store.reporting import schemas

    records = F.expr(f"explode({FILE_UDF}('{journal}', path))")
    rows = files.select(records.alias("_r"))
    columns = [F.col(f"_r.{f.name}") for f in schemas.RECORDS.fields[1:]]
    return rows.select(F.lit(journal).alias("journal"), *columns)
