"""A private MariaDB server for the tests that stop, restart or reconfigure their database.

The shared server on 3306 is never stopped or reconfigured (other runs use it); a test that
needs to do that starts its own with :func:`private_mariadb`: ``mariadb-install-db`` into a
temporary folder, ``mariadbd`` on a free loopback port (root from 127.0.0.1 without a
password, database ``test``), killed and removed at the end. About two seconds to start.

Thread-safety: a :class:`MariaDbServer` belongs to the test thread that made it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pymysql

from tests.support.pg_cluster import free_port

__all__ = ["MariaDbServer", "private_mariadb"]


class MariaDbServer:
    """One private server: ``port``, ``url`` (the store's JDBC URL of database ``test``),
    :meth:`start`, :meth:`stop` (``kill``: SIGKILL, a crash; else a clean shutdown),
    :meth:`restart` and :meth:`execute` (as root)."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.port = port
        self.url = f"jdbc:mariadb://127.0.0.1:{port}/test"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = (self.root / "server.log").open("ab")
        argv = [
            "/usr/sbin/mariadbd", "--no-defaults", f"--datadir={self.root / 'data'}",
            f"--port={self.port}", "--bind-address=127.0.0.1",
            f"--socket={self.root / 'sock'}", f"--pid-file={self.root / 'pid'}",
            "--skip-log-bin", "--innodb-buffer-pool-size=16M", "--skip-name-resolve",
        ]  # fmt: skip
        if os.geteuid() == 0:
            argv.append("--user=mysql")
        self._proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                pymysql.connect(host="127.0.0.1", port=self.port, user="root").close()
                return
            except pymysql.err.OperationalError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        (self.root / "server.log").read_text(errors="replace")[-2000:]
                    ) from None
                time.sleep(0.1)

    def stop(self, *, kill: bool = False) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if kill:
            proc.kill()
        else:
            proc.terminate()
        proc.wait(timeout=60)

    def restart(self, *, kill: bool = False) -> None:
        self.stop(kill=kill)
        self.start()

    def execute(self, statement: str) -> None:
        conn = pymysql.connect(host="127.0.0.1", port=self.port, user="root", autocommit=True)
        try:
            with conn.cursor() as cursor:
                cursor.execute(statement)
        finally:
            conn.close()


@contextmanager
def private_mariadb() -> Iterator[MariaDbServer]:
    """A running private server, removed afterwards. Raises RuntimeError when it cannot
    start (its log's end in the message)."""
    root = Path(tempfile.mkdtemp(prefix="store-mariadb-"))
    try:
        if os.geteuid() == 0:
            shutil.chown(root, "mysql", "mysql")
        install = [
            "mariadb-install-db", "--no-defaults", f"--datadir={root / 'data'}",
            "--auth-root-authentication-method=normal", "--skip-test-db",
        ]  # fmt: skip
        if os.geteuid() == 0:
            install.append("--user=mysql")
        done = subprocess.run(install, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {done.stdout}{done.stderr}")
        server = MariaDbServer(root, free_port())
        server.start()
        try:
            server.execute("CREATE DATABASE IF NOT EXISTS test")
            yield server
        finally:
            server.stop(kill=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
