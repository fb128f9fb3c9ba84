"""A private PostgreSQL cluster for the tests that stop, crash or restart their database.

The shared server on 5432 is never stopped or reconfigured (other runs use it); a test that
needs an outage starts its own cluster with :func:`private_cluster`: ``initdb`` into a
temporary folder, ``postgres`` on a free loopback port with trust authentication, removed
at the end. As root the server runs as the ``postgres`` user (PostgreSQL refuses root);
otherwise as the current user. The binaries are Debian's (``/usr/lib/postgresql/<v>/bin``,
the newest version there) or ``STORE_TEST_PG_BIN``.

A cluster takes about two seconds to create and start, so a test module shares one (a
module fixture) and each test uses its own table prefix in it, as on the shared server.

Thread-safety: a :class:`PgCluster` belongs to the test thread that made it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["PgCluster", "free_port", "pg_bin", "private_cluster"]


def pg_bin() -> Path:
    """The folder of PostgreSQL's server binaries. Raises FileNotFoundError when none."""
    given = os.environ.get("STORE_TEST_PG_BIN")
    if given:
        return Path(given)
    versions = sorted(
        (p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if not versions:
        raise FileNotFoundError("no PostgreSQL server binaries under /usr/lib/postgresql")
    return versions[-1]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PgCluster:
    """One private cluster: ``port``, ``url`` (the store's JDBC URL of database
    ``postgres``), and the server's life: :meth:`start`, :meth:`stop` (``fast`` or
    ``immediate``, a crash), :meth:`restart`."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.data = root / "data"
        self.port = port
        self.url = f"jdbc:postgresql://127.0.0.1:{port}/postgres"
        self._bin = pg_bin()

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self._bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=check, timeout=60)

    def init(self) -> None:
        """Create the cluster (trust authentication, no fsync: its durability is not tested)."""
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off -c max_connections=60"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.root / "log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` (a clean shutdown) or ``immediate`` (a crash)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def restart(self, mode: str = "fast") -> None:
        """Stop (``mode``) and start again."""
        self.stop(mode)
        self.start()

    def standby(self) -> PgCluster:
        """A streaming standby of this (running) cluster, made with ``pg_basebackup -R`` on a
        port of its own, started (asynchronous unless :meth:`synchronous` names it). Remove
        it with :meth:`remove`."""
        other = PgCluster(Path(tempfile.mkdtemp(prefix="store-pg-standby-")), free_port())
        if os.geteuid() == 0:
            shutil.chown(other.root, "postgres", "postgres")
        self._run(
            "pg_basebackup", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
            "-D", str(other.data), "-R", "-X", "stream", "--no-sync",
            "-d", f"application_name=standby{other.port}",
        )  # fmt: skip
        other.start()
        return other

    def synchronous(self, standby: PgCluster | None) -> None:
        """Make commits wait for ``standby`` to flush them (None: for no standby)."""
        names = "" if standby is None else f"standby{standby.port}"
        self.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
        self.execute("SELECT pg_reload_conf()")

    def promote(self) -> None:
        """Promote this standby to a primary; returns once it accepts writes."""
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "promote")

    def execute(self, statement: str) -> list[tuple[object, ...]]:
        """Run ``statement`` as postgres in database postgres (autocommit); its rows."""
        import psycopg

        dsn = f"host=127.0.0.1 port={self.port} dbname=postgres user=postgres"
        with psycopg.connect(dsn, autocommit=True) as conn:
            cursor = conn.execute(statement)
            return list(cursor.fetchall()) if cursor.description else []

    def terminate_clients(self) -> None:
        """Kill every client connection (``pg_terminate_backend``), as a DBA or a pooler
        restart does; the server stays up."""
        self.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        )

    def remove(self) -> None:
        """Stop the server if it runs and delete its folder."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def private_cluster() -> Iterator[PgCluster]:
    """A started private cluster, removed afterwards."""
    cluster = PgCluster(Path(tempfile.mkdtemp(prefix="store-pg-")), free_port())
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        cluster.remove()
