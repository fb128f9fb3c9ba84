"""Shared fixtures: every back-end for the contract tests, and a store factory per test.

- ``backend``: parametrised over :data:`tests.support.backends.ALL_BACKENDS` (ids are the back-end
  names); ``persistent_backend``: the same without zero persistence.
- ``store_factory``: a :class:`tests.support.backends.StoreFactory` for whichever of the two
  the test asked for, with a unique name prefix; it closes every store and runs the back-end's
  cleanup at teardown.
- ``--backends=file-nio,sqlite`` (or the environment variable ``STORE_TEST_BACKENDS``) runs a
  subset; the default is every back-end.
- ``STORE_TEST_PROFILE=ci|soak`` (:mod:`tests.support.profile`): the Hypothesis profile of the
  same name, and the round counts of the crash and volume tests; ``ci`` is the default.
- ``STORE_JVM_OPTIONS`` (:mod:`store.db.jvm`) defaults to ``-XX:TieredStopAtLevel=1
  -XX:+UseSerialGC`` for the suite and the processes it starts: the embedded Derby and H2 tests
  run for seconds, where the JIT's optimising compiler and parallel GC threads cost more CPU
  than they save (measured: the Derby journal contract's CPU time 46 -> 27 s, a 256 MiB body
  on Derby and H2 29 -> 20 s; Spark's JVMs do not read it).
- A test's database schema on PostgreSQL, MariaDB and Derby is emptied at teardown and reused
  by the next test of the same worker (:mod:`tests.support.schema_pool`); the session's end
  drops what is kept.
- At the end of every run: the time spent per test folder and every test that took over
  :data:`LONG_TEST_SECONDS` (setup, call and teardown together), so a slow test is seen the
  day it lands.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.support import profile
from tests.support.backends import BackendSpec, StoreFactory, unique_prefix

os.environ.setdefault("STORE_JVM_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

#: A test over this many seconds (its setup, call and teardown) is listed at the end of a run.
LONG_TEST_SECONDS = 60.0

# No deadline in either profile: a 2-core machine running two workers, JVMs and database
# servers makes an example's time meaningless, and a missed deadline is a flaky failure.
settings.register_profile(
    "ci", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile(
    "soak",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
    max_examples=100 * profile.SOAK_EXAMPLES_FACTOR,
)
settings.load_profile(profile.PROFILE)

_BACKEND_FIXTURES = {"backend": False, "persistent_backend": True}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backends",
        default=os.environ.get("STORE_TEST_BACKENDS", "all"),
        help="comma-separated back-ends for the contract tests (default: all), e.g. file-nio,zero",
    )


def selected_backends(config: pytest.Config) -> list[BackendSpec]:
    """Returns the back-ends chosen with --backends. Raises pytest.UsageError for unknown names."""
    from tests.support.backends import ALL_BACKENDS

    raw = str(config.getoption("--backends")).strip()
    if raw in ("", "all"):
        return list(ALL_BACKENDS)
    by_name = {spec.name: spec for spec in ALL_BACKENDS}
    names = [n.strip() for n in raw.split(",") if n.strip()]
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise pytest.UsageError(
            f"--backends: unknown {', '.join(unknown)}; known: {', '.join(by_name)}"
        )
    return [by_name[n] for n in names]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for fixture, persistent_only in _BACKEND_FIXTURES.items():
        if fixture in metafunc.fixturenames:
            specs = [
                s for s in selected_backends(metafunc.config) if s.persistent or not persistent_only
            ]
            metafunc.parametrize(fixture, specs, ids=[s.name for s in specs], indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> BackendSpec:
    """The back-end under test (every one selected)."""
    spec: BackendSpec = request.param
    return spec


@pytest.fixture
def persistent_backend(request: pytest.FixtureRequest) -> BackendSpec:
    """The back-end under test, zero persistence excluded."""
    spec: BackendSpec = request.param
    return spec


@pytest.fixture
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A StoreFactory for the test's back-end (``backend`` or ``persistent_backend``)."""
    names = [name for name in _BACKEND_FIXTURES if name in request.fixturenames]
    assert len(names) == 1, "store_factory needs exactly one of backend / persistent_backend"
    spec: BackendSpec = request.getfixturevalue(names[0])
    factory = StoreFactory(spec, tmp_path, unique_prefix())
    try:
        yield factory
    finally:
        factory.teardown()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the files holding a test marked ``slow`` first, then the others by their number of
    tests (most first), each file's tests in their own order.

    Under ``--dist loadfile`` a file goes to one worker whole, in this order when xdist's own
    reordering is off (``scripts/test`` passes ``--no-loadscope-reorder``). xdist's default
    order (most tests first) put the slow files, which hold few tests each (a Spark report, a
    cluster, a browser: a minute or two apiece), last, where the one still running was the
    run's tail while the other worker idled."""
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def key(tests: list[pytest.Item]) -> tuple[bool, int]:
        return (not any(t.get_closest_marker("slow") for t in tests), -len(tests))

    items[:] = [item for tests in sorted(by_file.values(), key=key) for item in tests]


#: Folders whose files all go to one worker under ``--dist loadfile`` (one scope): the
#: reporting tests then start one Spark JVM in the whole run, not one per worker (18 s each
#: on a busy machine, and a second JVM's heap).
ONE_WORKER = ("tests/reporting/",)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (what ``scripts/test`` runs) with the files of :data:`ONE_WORKER`
    as one scope; None (xdist's own) for any other mode."""
    if config.getoption("dist", "no") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FilesAndFolders(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return next((folder for folder in ONE_WORKER if path.startswith(folder)), path)

    return FilesAndFolders(config, log)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Drops the database schemas this process kept for reuse (tests/support/schema_pool.py)."""
    del session
    pool = sys.modules.get("tests.support.schema_pool")
    if pool is not None:
        pool.drain()


_durations: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Adds up each test's setup, call and teardown (on the xdist controller too)."""
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration


def _backend_of(nodeid: str) -> str:
    """The back-end a test ran on: the first part of its parameter id that names one, or
    "-" (not parametrised by back-end)."""
    if not nodeid.endswith("]"):
        return "-"
    parts = nodeid[nodeid.rindex("[") + 1 : -1].split("-")
    for i, part in enumerate(parts):
        name = f"file-{parts[i + 1]}" if part == "file" and i + 1 < len(parts) else part
        if name in _BACKEND_NAMES:
            return name
    return "-"


_BACKEND_NAMES = frozenset(
    ("file-nio", "file-mapped", "file-asyncio", "zero", "postgresql", "mariadb", "sqlite", "derby")
)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Time per test folder and per back-end (summed over the workers) and the tests over
    LONG_TEST_SECONDS; with ``STORE_TEST_DURATIONS=FILE``, every test's time as JSON there."""
    if not _durations or terminalreporter.config.option.collectonly:
        return
    by_folder: dict[str, float] = {}
    by_backend: dict[str, float] = {}
    for nodeid, seconds in _durations.items():
        folder = nodeid.split("::", 1)[0].rsplit("/", 1)[0]
        by_folder[folder] = by_folder.get(folder, 0.0) + seconds
        backend = _backend_of(nodeid)
        by_backend[backend] = by_backend.get(backend, 0.0) + seconds
    write = terminalreporter.write_line
    terminalreporter.section("time per test folder (seconds, summed over the workers)")
    for folder, seconds in sorted(by_folder.items(), key=lambda kv: -kv[1]):
        write(f"{seconds:8.1f}  {folder}")
    terminalreporter.section("time per back-end (seconds; - : not parametrised by back-end)")
    for name, seconds in sorted(by_backend.items(), key=lambda kv: -kv[1]):
        write(f"{seconds:8.1f}  {name}")
    out = os.environ.get("STORE_TEST_DURATIONS")
    if out:
        Path(out).write_text(json.dumps(_durations, indent=0, sort_keys=True))
    long = sorted(((s, n) for n, s in _durations.items() if s > LONG_TEST_SECONDS), reverse=True)
    if long:
        terminalreporter.section(f"tests over {LONG_TEST_SECONDS:.0f} s")
        for seconds, nodeid in long:
            write(f"{seconds:8.1f}  {nodeid}")
