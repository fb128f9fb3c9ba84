"""Fixtures of the reporting tests: one SparkSession for the whole session (starting Spark
takes seconds), and stores filled through the storage manager on every back-end a report
reads: the file store, PostgreSQL, MariaDB and SQLite (``tests/support`` back-ends: unique
table prefix per test, dropped after).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.backends import StoreFactory, backend_by_name, unique_prefix

REPORT_BACKENDS = ("file-nio", "postgresql", "mariadb", "sqlite")


class _Sessions:
    """The worker's one SparkSession, built when first asked for and again if its JVM died."""

    def __init__(self) -> None:
        self.session: Any = None
        self.files: dict[int, tuple[Any, int]] = {}

    def get(self) -> Any:
        from store.reporting.session import build_session

        if self.session is not None and _jvm_exit(self.session) is not None:
            _forget(self.session)
            self.session = None
            self.files = {}
        if self.session is None:
            # the tests' stores are small: the JVM a report of one starts (the quick compiler)
            self.session = build_session(master="local[2]", shuffle_partitions=2, small_store=True)
        self.check_files()
        return self.session

    def check_files(self) -> None:
        """Fail if a file descriptor of the link to Spark's JVM (the pipe its life hangs on,
        the Py4J socket of this thread) now names another file: something closed a number it
        did not own, and the kernel gave it out again. Then remember the current ones."""
        sc = self.session.sparkContext
        connection = sc._gateway._gateway_client.get_thread_connection()
        current = {
            "the JVM's stdin pipe": sc._gateway.proc.stdin,
            "the Py4J socket": None if connection is None else connection.socket,
        }
        for what, owner in current.items():
            if owner is None:
                continue
            fd = owner.fileno()
            if fd < 0:  # closed by its owner
                continue
            inode = os.fstat(fd).st_ino
            was = self.files.get(fd)
            if was is not None and was[0] is owner and was[1] != inode:
                pytest.fail(f"fd {fd}, {what}, was closed by something else and reused")
            self.files[fd] = (owner, inode)

    def stop(self) -> None:
        if self.session is not None and _jvm_exit(self.session) is None:
            self.session.stop()
        self.session = None


def _jvm_exit(session: Any) -> int | None:
    """The exit status of the session's JVM (Spark's driver), None while it runs."""
    proc = getattr(session.sparkContext._gateway, "proc", None)
    return None if proc is None else proc.poll()


def _forget(session: Any) -> None:
    """Drop PySpark's references to a session whose JVM is gone, so the next build starts a
    new JVM (``getOrCreate`` would hand back the dead one)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    SparkContext._active_spark_context = None
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None


@pytest.fixture(scope="session")
def _spark_sessions() -> Iterator[_Sessions]:
    sessions = _Sessions()
    yield sessions
    sessions.stop()


@pytest.fixture
def spark(_spark_sessions: _Sessions) -> Iterator[Any]:
    """The reports' SparkSession (local mode, built by store.reporting.session), shared by the
    tests of this worker. After each test its cached frames are dropped, so no test runs
    short of heap for what earlier ones cached; a test after which the JVM is gone fails at
    teardown with the JVM's exit status (52: a java.lang.OutOfMemoryError), and the next test
    gets a new JVM instead of every later one failing on the dead one."""
    session = _spark_sessions.get()
    yield session
    status = _jvm_exit(session)
    if status is not None:
        pytest.fail(f"Spark's JVM exited with status {status} during this test", pytrace=False)
    _spark_sessions.check_files()
    session.catalog.clearCache()


@pytest.fixture(params=REPORT_BACKENDS)
def report_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A StoreFactory on each report back-end; cleans up at teardown."""
    factory = StoreFactory(backend_by_name(request.param), tmp_path, unique_prefix())
    try:
        yield factory
    finally:
        factory.teardown()
