"""Back-pressure of the database journal (issue 6, item 5; policy in :mod:`store.db.writer`):
the backlog of appended, not yet committed operations is bounded in operations and bytes, a
non-sync appender waits when it is full, and so ``close()`` after a burst has little left to
commit. Waiting appenders are released with the batch's StoreUnavailableError when the writer
fails (a killed connection, a failed fence) and with JournalClosedError at close; sync appends,
``flush()`` and ``sync_future()`` keep working meanwhile; nothing is lost.

Run on PostgreSQL, MariaDB and SQLite (``--backends`` narrows them). Not on Derby: the bound is
the writer's, the same code on every database, and a burst through JPype takes minutes there;
the contract suite covers Derby's appends.

Bursts are 4 threads appending 1 KiB adds as fast as they can, each deleting its add from
``WINDOW`` appends before (a broker acknowledging messages), so the table stays small.
Timing bounds are generous (seconds where the code needs milliseconds); before the bound,
``close()`` after the same burst took 40-100 s on PostgreSQL.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest

from store.db import BacklogLimits, DatabaseJournal, DatabaseJournals, open_database_journals
from store.errors import JournalClosedError, StoreError, StoreUnavailableError
from store.perf import PerfOptions, PerfProgress, run_perf
from tests.db.conftest import DbStore
from tests.support.db_backends import kill_mysql_connections, mysql_url, postgresql_url
from tests.support.waiting import wait_for

SERVERS = ["postgresql", "mariadb", "sqlite"]
THREADS = 4
WINDOW = 100
BODY = b"b" * 1024
#: Appends of the burst: each thread's adds and deletes, about 45,000 operations in all.
BURST_ADDS = 6_000
#: A bound small enough that every burst below waits on it all the time.
TIGHT = BacklogLimits(min_records=64, max_records=64, max_bytes=32 * 1024)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "server" in metafunc.fixturenames:
        names = getattr(metafunc.function, "servers", SERVERS)
        raw = str(metafunc.config.getoption("--backends")).strip()
        chosen = names if raw in ("", "all") else [n for n in raw.split(",") if n in names]
        metafunc.parametrize("server", chosen)


def only(*names: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Run a test on some of :data:`SERVERS` only."""

    def mark(test: Callable[..., None]) -> Callable[..., None]:
        test.servers = list(names)  # type: ignore[attr-defined]
        return test

    return mark


@pytest.fixture
def db(server: str, tmp_path: Path) -> Iterator[DbStore]:
    """A fresh database store on ``server`` (tables dropped at teardown)."""
    store = DbStore(server, tmp_path)
    try:
        yield store
    finally:
        store.teardown()


class Journals:
    """Journals opened by :func:`open_database_journals` (with a backlog bound or a fence),
    closed at the end of the test whatever happened."""

    def __init__(self) -> None:
        self.opened: list[DatabaseJournals] = []

    def open(self, db: DbStore, **kw: Any) -> DatabaseJournal:
        journals = open_database_journals(db.config, **kw)
        self.opened.append(journals)
        journals.bindings.load()
        journals.messages.load()
        return journals.messages

    def close_all(self) -> None:
        for journals in reversed(self.opened):
            try:
                journals.close()
            except StoreError:
                pass


@pytest.fixture
def journals() -> Iterator[Journals]:
    opened = Journals()
    try:
        yield opened
    finally:
        opened.close_all()


class Appender:
    """One thread appending non-sync adds of its own ids (``base + n``) and deleting each
    ``WINDOW`` appends later, until ``adds`` adds or an error. ``acked`` counts the adds whose
    call returned; ``live`` is what is left once every call that returned is committed. With
    ``retry`` a call refused with a StoreUnavailableError that applied nothing (not in doubt)
    is kept in ``refused`` and made again, as a client of a store that resumes by itself
    would."""

    def __init__(self, journal: DatabaseJournal, base: int, adds: int, retry: bool = False) -> None:
        self.journal = journal
        self.base = base
        self.adds = adds
        self.retry = retry
        self.acked = 0
        self.error: BaseException | None = None
        self.refused: list[StoreUnavailableError] = []
        self.failed_on_delete = False
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"appender-{base}", daemon=True)

    def _call(self, call: Callable[[], None]) -> bool:
        """Make ``call`` (again, with ``retry``, while it is refused); False when the test
        stopped this appender before it went through."""
        while True:
            try:
                call()
                return True
            except StoreUnavailableError as exc:
                if not self.retry or exc.in_doubt:
                    raise
                self.refused.append(exc)
                if self.stop.wait(0.05):
                    return False

    def _run(self) -> None:
        try:
            for n in range(self.adds):
                if self.stop.is_set():
                    return
                if not self._call(lambda n=n: self.journal.append_add(self.base + n, 1, BODY)):
                    return
                self.acked = n + 1
                if n >= WINDOW:
                    self.failed_on_delete = True
                    delete = self.base + n - WINDOW
                    if not self._call(lambda d=delete: self.journal.append_delete(d)):
                        return  # refused: not applied, and counted as possibly applied
                    self.failed_on_delete = False
        except BaseException as exc:  # reported by the test
            self.error = exc

    @property
    def live(self) -> set[int]:
        """Ids left live once every call of this appender that returned is committed."""
        first = self.acked - WINDOW - (1 if self.failed_on_delete else 0)
        return {self.base + n for n in range(max(0, first), self.acked)}


def start(journal: DatabaseJournal, adds: int, retry: bool = False) -> list[Appender]:
    appenders = [Appender(journal, (k + 1) * 10_000_000, adds, retry) for k in range(THREADS)]
    for a in appenders:
        a.thread.start()
    return appenders


def join(appenders: list[Appender], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    for a in appenders:
        a.thread.join(max(0.0, deadline - time.monotonic()))
    hung = [a.base for a in appenders if a.thread.is_alive()]
    assert not hung, f"appenders {hung} still blocked after {seconds} s"


def loaded_ids(db: DbStore) -> set[int]:
    store = db.open()
    try:
        return {r.id for r in store.messages.load().records}
    finally:
        db.close()


def check_no_holes(appenders: list[Appender], ids: set[int]) -> None:
    """Each appender's ids in the table are what a prefix of its calls leaves: the adds it
    made, minus those it deleted (only calls that returned can have been committed)."""
    for a in appenders:
        mine = sorted(i - a.base for i in ids if a.base <= i < a.base + 10_000_000)
        if not mine:
            continue
        last = mine[-1]
        assert last < a.acked, f"appender {a.base}: id {last} was never appended"
        expected = list(range(max(0, last - WINDOW), last + 1))
        # The oldest one may or may not have been deleted when the writer stopped.
        assert mine in (expected, expected[1:]), f"appender {a.base}: a hole in {mine[:5]}…"


# --------------------------------------------------------------------------- the bound


def test_a_burst_is_bounded_and_close_after_it_is_quick(db: DbStore) -> None:
    """Four threads append ~45,000 non-sync operations as fast as they can through the real
    open path (default bounds): the backlog's peak stays within the bound, appenders waited,
    ``close()`` returns within 5 s (before the bound it took 40-100 s on PostgreSQL, the whole
    backlog), and after reopening every record that should be live is there."""
    store = db.open()
    journal = store.messages
    journal.load()
    assert isinstance(journal, DatabaseJournal)
    appenders = start(journal, BURST_ADDS)
    join(appenders, 120)
    assert [a.error for a in appenders] == [None] * THREADS
    extra = journal.stats().extra  # flushes: everything is committed here

    started = time.monotonic()
    db.close()
    closing = time.monotonic() - started

    limits = BacklogLimits()
    assert 0 < extra["backlog_peak_records"] <= limits.max_records
    assert extra["backlog_peak_bytes"] <= limits.max_bytes
    assert extra["backlog_waits"] > 0, "the burst never met the bound"
    assert extra["batched_operations"] >= THREADS * (2 * BURST_ADDS - WINDOW)
    assert closing < 5, f"close() took {closing:.1f} s"
    expected = set().union(*(a.live for a in appenders))
    assert loaded_ids(db) == expected


def test_the_backlog_never_exceeds_a_configured_bound(db: DbStore, journals: Journals) -> None:
    """With a bound of 64 operations and 32 KiB, a sampler and the writer's own peak agree:
    never more than 64 operations or 32 KiB appended and not committed; every record is
    there after reopening."""
    journal = journals.open(db, backlog=TIGHT)
    samples: list[tuple[int, int]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            b = journal.backlog()
            samples.append((b.records, b.bytes))
            time.sleep(0.0005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    appenders = start(journal, 600)
    try:
        join(appenders, 60)
    finally:
        stop.set()
        sampler.join(10)
    assert [a.error for a in appenders] == [None] * THREADS
    backlog = journal.backlog()
    assert backlog.limit_records == 64 and backlog.limit_bytes == 32 * 1024
    assert 0 < backlog.peak_records <= 64
    assert 0 < backlog.peak_bytes <= 32 * 1024
    assert backlog.waits > 0
    assert samples and max(r for r, _ in samples) <= 64
    assert max(b for _, b in samples) <= 32 * 1024
    journals.close_all()
    assert loaded_ids(db) == set().union(*(a.live for a in appenders))


def test_a_record_larger_than_the_byte_bound_goes_alone(db: DbStore, journals: Journals) -> None:
    """A body bigger than the byte bound waits for an empty batch instead of forever."""
    journal = journals.open(db, backlog=BacklogLimits(min_records=4, max_records=4, max_bytes=64))
    for i in range(5):
        journal.append_add(i, 1, bytes(100 + i))
    journal.flush()
    assert journal.backlog().peak_bytes <= 2 * 104
    journals.close_all()
    assert loaded_ids(db) == set(range(5))


def test_sync_appends_flush_and_futures_work_under_back_pressure(
    db: DbStore, journals: Journals
) -> None:
    """While four threads keep the tight bound full, a sync appender, ``flush()`` and
    ``sync_future()`` each complete, and what they waited for is committed."""
    journal = journals.open(db, backlog=TIGHT)
    appenders = start(journal, 1_500)
    wait_for(lambda: journal.backlog().waiting > 0, 20, "no appender ever waited")
    for i in range(20):
        journal.append_add(i, 2, b"sync", sync=True)
    assert db.count() >= 20  # committed: visible to another connection
    journal.flush()
    journal.sync_future().result(timeout=20)
    join(appenders, 60)
    assert [a.error for a in appenders] == [None] * THREADS
    journals.close_all()
    assert loaded_ids(db) == set(range(20)) | set().union(*(a.live for a in appenders))


# --------------------------------------------------------------------------- releases


def test_close_releases_waiting_appenders_with_journal_closed(
    db: DbStore, journals: Journals
) -> None:
    """``close()`` while appenders wait for room: each gets JournalClosedError, close
    returns, and everything appended before (every call that returned) is committed."""
    journal = journals.open(db, backlog=TIGHT)
    appenders = start(journal, 1_000_000)
    wait_for(lambda: journal.backlog().waiting >= 2, 20, "appenders never waited")
    journals.close_all()
    join(appenders, 20)
    assert all(isinstance(a.error, JournalClosedError) for a in appenders), [
        repr(a.error) for a in appenders
    ]
    assert loaded_ids(db) == set().union(*(a.live for a in appenders))


def test_a_failed_batch_releases_waiting_appenders_with_its_error(
    db: DbStore, journals: Journals
) -> None:
    """The fence (the HA lease check) fails a batch while appenders wait for room: each gets
    the batch's StoreUnavailableError, so does a later append; nothing hangs."""
    fail = threading.Event()

    def fence(conn: Any) -> None:
        del conn
        if fail.is_set():
            raise StoreUnavailableError("the lease is gone (test)")

    journal = journals.open(db, backlog=TIGHT, fence=fence)
    appenders = start(journal, 1_000_000)
    wait_for(lambda: journal.backlog().waiting >= 2, 20, "appenders never waited")
    fail.set()
    join(appenders, 20)
    for a in appenders:
        assert isinstance(a.error, StoreUnavailableError), repr(a.error)
        assert "the lease is gone (test)" in str(a.error)
    with pytest.raises(StoreUnavailableError):
        journal.append_add(1, 1, b"after the failure")
    journals.close_all()
    check_no_holes(appenders, loaded_ids(db))


def _kill_postgresql(db: DbStore) -> Callable[[], int]:
    url, user, _ = postgresql_url()
    dsn = url.replace("jdbc:postgresql://", "postgresql://")
    assert db.config.database_store is not None
    app = f"store:{db.config.database_store.message_table_name.lower()}"

    def kill() -> int:
        with psycopg.connect(dsn, user=user, autocommit=True) as admin:
            return len(
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = %s AND pid <> pg_backend_pid()",
                    (app,),
                ).fetchall()
            )

    return kill


def _mysql_admin() -> Any:
    url, user, password = mysql_url()
    host_port, _, rest = url.split("//", 1)[1].partition("/")
    host, _, port = host_port.partition(":")
    return pymysql.connect(
        host=host,
        port=int(port or 3306),
        user=user,
        password=password or "",
        database=rest.split("?", 1)[0],
        autocommit=True,
    )


@only("postgresql", "mariadb")
def test_a_killed_connection_is_ridden_out_by_waiting_appenders(
    server: str, db: DbStore, journals: Journals
) -> None:
    """The server kills the store's connections (PostgreSQL ``pg_terminate_backend``,
    MariaDB ``KILL`` of the store's own user) while appenders wait for room: the writer
    reconnects by itself and the appenders carry on (one refused while the database was
    away gets StoreUnavailableError that applied nothing, never in doubt); after reopening
    each appender's records are what a prefix of its calls left (no hole)."""
    admin: Any = None
    user = ""
    base = db.config  # the teardown drops the tables as the test's own user
    if server == "postgresql":
        kill = _kill_postgresql(db)
    else:
        admin = _mysql_admin()
        user, password = f"store_{uuid.uuid4().hex[:10]}", uuid.uuid4().hex
        with admin.cursor() as cur:
            cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (user, password))
            cur.execute("SELECT DATABASE()")
            (database,) = cur.fetchone()
            cur.execute(f"GRANT ALL ON `{database}`.* TO %s@'%%'", (user,))
        db.with_config(jdbc_user=user, jdbc_password=password)

        def kill() -> int:
            return kill_mysql_connections(admin, user)

    try:
        journal = journals.open(db, backlog=TIGHT)
        appenders = start(journal, 1_000_000, retry=True)
        wait_for(lambda: journal.backlog().waiting >= 2, 20, "appenders never waited")
        health = journal._started().health
        assert kill() >= 1, "no connection of the store was found to kill"
        wait_for(lambda: health.outages >= 1, 20, "the writer never reconnected")
        after = [a.acked for a in appenders]
        wait_for(
            lambda: all(
                a.acked > n or a.error is not None for a, n in zip(appenders, after, strict=True)
            ),
            20,
            "appenders made no progress after the reconnect",
        )
        for a in appenders:
            a.stop.set()
        join(appenders, 30)
        assert all(a.error is None for a in appenders), [repr(a.error) for a in appenders]
        for a in appenders:  # a refused call applied nothing (made again)
            assert all(not e.in_doubt for e in a.refused), [repr(e) for e in a.refused]
        journals.close_all()
        check_no_holes(appenders, loaded_ids(db))
    finally:
        db.config = base
        if admin is not None:
            with admin.cursor() as cur:
                cur.execute("DROP USER IF EXISTS %s@'%%'", (user,))
            admin.close()


# --------------------------------------------------------------------------- store perf


def test_perf_no_sync_counts_the_drain_in_its_figure(db: DbStore) -> None:
    """``store perf --no-sync`` on a database store: the write phase ends once everything
    appended is committed. When the close phase begins, another connection already sees
    every row the store holds at the end; the figure's time covers the appends and the
    drain."""
    assert db.config.database_store is not None
    rows_at_close: list[int] = []

    def progress(p: PerfProgress) -> None:
        if p.phase == "close" and not rows_at_close:
            rows_at_close.append(db.count())

    result = run_perf(
        db.config,
        PerfOptions(records=20_000, threads=4, sync=False, sizes=(100, 1000), seed=5),
        progress=progress,
    )

    assert result.verified, result.verification.problems
    assert rows_at_close == [result.journal_stats.files], "rows were committed after writing"
    assert result.write_seconds >= result.append_seconds > 0
    assert result.records_per_second <= result.append_records_per_second
    assert result.journal_stats.extra["backlog_peak_records"] <= BacklogLimits().max_records


def test_backlog_limits_refuse_bounds_that_cannot_work() -> None:
    for bad in (
        {"min_records": 1},
        {"min_records": 100, "max_records": 99},
        {"max_bytes": 0},
    ):
        with pytest.raises(StoreError):
            BacklogLimits(**bad)
