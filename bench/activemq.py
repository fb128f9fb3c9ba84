"""Apache ActiveMQ 5 as a child process of a benchmark: Debian's ``activemq`` package, one
broker with a STOMP connector on a loopback port and KahaDB or its JDBC adapter on PostgreSQL.

Debian lays the broker out as ``/usr/share/activemq/bin/activemq.jar`` (the console launcher,
``org.apache.activemq.console.Main``), ``lib/`` and ``lib/optional/`` (links into
``/usr/share/java``: Spring, xbean, commons-dbcp 1.4), and an instance under ``/etc/activemq``.
This module uses none of ``/etc``: :func:`activemq` writes its own ``activemq.xml`` into a
folder the caller owns and starts ``java -jar activemq.jar start xbean:file:…`` with
``activemq.base``, ``activemq.conf`` and ``activemq.data`` pointed there, which is what Debian's
``bin/activemq`` script does without its pid files and user switch. The JDBC store gets
Debian's PostgreSQL driver (``/usr/share/java/postgresql.jar``, package
``libpostgresql-jdbc-java``) on ``activemq.classpath`` and a table prefix of its own; its three
tables are dropped when the broker has stopped.

:func:`activemq` is one broker for one run. :func:`configure`, :func:`launch`,
:func:`wait_answers`, :func:`stop` and :func:`remove` are its parts, for a benchmark that
restarts a broker on the data it left (``bench.activemq_deep``).

Nothing here installs anything: :func:`missing` says what is absent, and the benchmarks print
that instead of a figure.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "HOME", "PG_JAR", "STORES", "Setup", "activemq", "configure", "launch", "missing", "remove",
    "stop", "version", "wait_answers",
]  # fmt: skip

HOME = Path("/usr/share/activemq")
PG_JAR = Path("/usr/share/java/postgresql.jar")
STORES = ("kahadb", "jdbc")
#: The PostgreSQL the benchmarks share (trust authentication on loopback).
PG_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test"
#: The broker's heap: Debian's default is 512 MiB; the memory limit below needs headroom.
HEAP = "1G"
START_SECONDS = 90.0
STOP_SECONDS = 30.0

_PERSISTENCE = {
    "kahadb": '<kahaDB directory="{data}/kahadb"/>',
    "jdbc": """<jdbcPersistenceAdapter dataSource="#postgres" createTablesOnStartup="true">
        <statements><statements tablePrefix="{prefix}"/></statements>
      </jdbcPersistenceAdapter>""",
}

_DATASOURCE = """  <bean id="postgres" class="org.apache.commons.dbcp.BasicDataSource"
        destroy-method="close">
    <property name="driverClassName" value="org.postgresql.Driver"/>
    <property name="url" value="{url}"/>
    <property name="username" value="postgres"/>
    <property name="password" value=""/>
    <property name="maxActive" value="64"/>
    <property name="poolPreparedStatements" value="true"/>
  </bean>
"""

_XML = """<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans
    http://www.springframework.org/schema/beans/spring-beans.xsd
    http://activemq.apache.org/schema/core
    http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="bench" useJmx="false"
          persistent="true" schedulerSupport="false" advisorySupport="false"
          dataDirectory="{data}">
    <persistenceAdapter>
      {persistence}
    </persistenceAdapter>
    <systemUsage><systemUsage>
      <memoryUsage><memoryUsage limit="512 mb"/></memoryUsage>
      <storeUsage><storeUsage limit="16 gb"/></storeUsage>
      <tempUsage><tempUsage limit="4 gb"/></tempUsage>
    </systemUsage></systemUsage>
{ssl}    <transportConnectors>
      <transportConnector name="stomp" uri="{scheme}://127.0.0.1:{port}"/>
    </transportConnectors>
  </broker>
{datasource}</beans>
"""

# log4j 1.2 is what Debian's broker logs through (slf4j-log4j12); conf/ is on its classpath.
_LOG4J = """log4j.rootLogger=WARN, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=%d %-5p %c{1} | %m%n
"""


def missing(store: str) -> str | None:
    """What keeps a broker on ``store`` (``kahadb`` or ``jdbc``) from running here, or None."""
    if not (HOME / "bin" / "activemq.jar").is_file():
        return "ActiveMQ not installed here (Debian package activemq)"
    if shutil.which("java") is None:
        return "no java on the PATH"
    if store == "jdbc" and not PG_JAR.is_file():
        return f"no {PG_JAR} (Debian package libpostgresql-jdbc-java)"
    return None


def version() -> str:
    """The installed ``activemq`` package's version (``dpkg-query``), or ``5`` when dpkg
    cannot say."""
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", "activemq"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "5"
    return out.split("+")[0] or "5"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


def _command(base: Path, conf: Path, data: Path) -> list[str]:
    return [
        "java", f"-Xms{HEAP}", f"-Xmx{HEAP}",
        "-Dorg.apache.activemq.UseDedicatedTaskRunner=true",
        f"-Dactivemq.classpath={PG_JAR}",
        f"-Dactivemq.home={HOME}", f"-Dactivemq.base={base}",
        f"-Dactivemq.conf={conf}", f"-Dactivemq.data={data}",
        "-jar", str(HOME / "bin" / "activemq.jar"),
        "start", f"xbean:file:{conf / 'activemq.xml'}",
    ]  # fmt: skip


def stop_process(process: subprocess.Popen[bytes], seconds: float = STOP_SECONDS) -> None:
    """SIGTERM (ActiveMQ's shutdown hook closes its store; coilmq's script its server and
    store), SIGKILL after ``seconds``."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _drop_tables(prefix: str, dsn: str = PG_DSN) -> None:
    import psycopg

    tables = ", ".join(f"{prefix}activemq_{t}" for t in ("msgs", "acks", "lock"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {tables}")  # type: ignore[arg-type]


@dataclass(frozen=True)
class Setup:
    """One broker's generated configuration: ``store``, its folder ``base``, STOMP ``port``
    and (JDBC) table ``prefix``. Start it with :func:`launch` as often as needed (every
    start reuses the same data), remove its data with :func:`remove`."""

    store: str
    base: Path
    port: int
    prefix: str
    dsn: str = PG_DSN


def configure(
    store: str,
    base: Path,
    *,
    pg_port: int = 5432,
    database: str = "test",
    key_store: tuple[Path, str] | None = None,
) -> Setup:
    """Write a broker's ``activemq.xml`` for ``store`` under ``base`` (which must be empty or
    absent); the JDBC store uses PostgreSQL on ``pg_port`` (default the shared server), user
    postgres, ``database``. With ``key_store`` (a PKCS#12 file, its password) the STOMP
    connector speaks TLS (``stomp+ssl``). Raises ValueError for an unknown store."""
    if store not in STORES:
        raise ValueError(f"store must be one of {STORES}, not {store!r}")
    conf, data = base / "conf", base / "data"
    conf.mkdir(parents=True)
    data.mkdir()
    port = _free_port()
    prefix = f"amqbench_{os.getpid()}_{secrets.token_hex(3)}_"
    persistence = _PERSISTENCE[store].format(data=data, prefix=prefix)
    url = f"jdbc:postgresql://127.0.0.1:{pg_port}/{database}"
    datasource = _DATASOURCE.format(url=url) if store == "jdbc" else ""
    ssl, scheme = "", "stomp"
    if key_store is not None:
        path, password = key_store
        ssl = (f'    <sslContext><sslContext keyStore="file:{path}" keyStorePassword="{password}"'
               ' keyStoreType="PKCS12"/></sslContext>\n')  # fmt: skip
        scheme = "stomp+ssl"
    xml = _XML.format(
        data=data, persistence=persistence, port=port, datasource=datasource, ssl=ssl,
        scheme=scheme,
    )  # fmt: skip
    (conf / "activemq.xml").write_text(xml)
    (conf / "log4j.properties").write_text(_LOG4J)
    dsn = f"host=127.0.0.1 port={pg_port} user=postgres dbname={database}"
    return Setup(store, base, port, prefix, dsn)


def launch(setup: Setup) -> subprocess.Popen[bytes]:
    """Start the broker of ``setup`` (the java process itself, its log appended to
    ``base/broker.log``) without waiting for it; see :func:`wait_answers` and :func:`stop`."""
    with (setup.base / "broker.log").open("ab") as log:
        return subprocess.Popen(
            _command(setup.base, setup.base / "conf", setup.base / "data"),
            stdout=log, stderr=subprocess.STDOUT, cwd=setup.base,
        )  # fmt: skip


def wait_answers(setup: Setup, process: subprocess.Popen[bytes]) -> None:
    """Return once the broker's STOMP port accepts connections. Raises RuntimeError when the
    broker exits or does not answer within START_SECONDS (the message ends with its log)."""
    deadline = time.monotonic() + START_SECONDS
    while not _answers(setup.port):
        if process.poll() is not None or time.monotonic() > deadline:
            tail = (setup.base / "broker.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"ActiveMQ ({setup.store}) did not start:\n{tail}")
        time.sleep(0.1)


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (ActiveMQ's shutdown hook closes the store), SIGKILL after STOP_SECONDS."""
    stop_process(process)


def remove(setup: Setup) -> None:
    """Drop the broker's data (its folder, and its tables for JDBC); the broker must be
    stopped."""
    if setup.store == "jdbc":
        _drop_tables(setup.prefix, setup.dsn)
    shutil.rmtree(setup.base / "data", ignore_errors=True)


@contextlib.contextmanager
def activemq(store: str, base: Path, key_store: tuple[Path, str] | None = None) -> Iterator[int]:
    """Run one broker on ``store`` with its files under ``base`` (which must be empty or
    absent), its STOMP connector speaking TLS with ``key_store`` (:func:`configure`); yield
    its STOMP port once it answers; stop it and remove its data afterwards.

    Raises RuntimeError when the broker exits, or does not answer within START_SECONDS (the
    message ends with its log). :func:`missing` must have returned None for ``store``.
    """
    setup = configure(store, base, key_store=key_store)
    try:
        process = launch(setup)
        try:
            wait_answers(setup, process)
            yield setup.port
        finally:
            stop_process(process)
    finally:
        remove(setup)
