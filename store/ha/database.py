"""The database node manager: the live lock as a lease in ``node-manager-store-table-name``
(docs/ha.md, reference §4.10), and the fence that database stores opened with it run in every
write batch.

Timing (all from the configuration's ``database-store`` section):

- leases last ``jdbc-lock-expiration`` by the database clock and are renewed every
  ``jdbc-lock-renew-period`` by the node manager's own thread;
- a waiting node (``start_primary``, ``start_backup``, ``await_live``) tries every
  min(renew period, 2 s), so a backup goes live within expiration + one try of the last renew;
- a renew that **errors** is retried on the next tick only while the local deadline (the
  monotonic time before the last successful acquire/renew statement, plus the expiration)
  still leaves one renew period; then the lock is lost. A renew that updates no row (someone
  else holds the lease) loses it at once;
- a renew slower than the renew period logs an error; an interval between renews longer than
  the renew period by 100 ms a warning (longer than the expiration: an error);
- ``jdbc-lock-acquisition-timeout`` (when not -1) is the default timeout of the start calls.

Validated at start (:func:`validate`): renew period < expiration, and ``jdbc-network-timeout``
≤ expiration (a statement may otherwise outlive the lease it checks): ConfigError naming both
keys.

**The fence** (:meth:`DatabaseNodeManager.fence`): inside each batch's transaction, before its
statements, one ``SELECT`` of the live-lock row (:class:`store.db.lease_sql.FenceSQL`) checks
that it still holds this node's holder id and generation and that it has not expired by the database
clock; on PostgreSQL and MariaDB the same ``SELECT`` with a share lock runs again as the last
statement before the commit (``before_commit``), so that a takeover and a commit cannot
interleave. Otherwise it marks the lock lost (the callbacks then run on the node
manager's thread) and raises LockLostError: the batch commits nothing. Once lost, every fence
raises LockLostError without asking the database. A batch that fails with a database error
after its fence passed (a node frozen mid-batch, whose session the server ended while the
backup took over) asks the fence's ``after_failure``: when the row is no longer this node's,
the batch raises LockLostError too, never another error. A backup's acquiring ``UPDATE`` of the row
waits for a batch that holds the share lock, so a batch either commits before the takeover or
sees it.

**A store that cannot write gives the lock up** (docs/ha.md#store-failure), and an outage it
rides out does not (docs/db.md "Outages"): every failed write of a fenced store (journal batch, page
write, large-message transaction; a page store reports its failed reads here too) asks the
fence's ``after_failure``, which answers LockLostError when the row is no longer this node's
and otherwise leaves the caller its own error: a killed connection or a database restart is
an outage the journals ride out (:mod:`store.db.writer`, "Outages") while renewing carries on
(retried until the lease would run out), so one killed connection never fails the pair over.
When a journal's writer stops for good (a batch the database refuses again and again, a close
during an outage) it calls the fence's ``gave_up``: that is
:meth:`~store.ha.api.NodeManager.store_failed` — renewing stops, ``on_lock_lost`` runs, the
lease is released, and the backup goes live on its next try instead of after an application
restart (without it the node manager's own engine, which reconnects, would keep renewing the
lease of a node whose journals refuse every write).

The node manager has its own engine (a pool of its own: renews never wait behind a store's
writers for a connection), whose sessions bound idle transactions by the expiration.

Thread-safety: as :class:`~store.ha.api.NodeManager`; the fence may run on any thread.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import event

from store.db.engine import create_store_engine, dispose_store_engine
from store.db.lease import BACKUP_ROW, PRIMARY_ROW, Acquired, LeaseRow, LeaseTable, token
from store.db.lease_sql import FenceSQL, session_setup
from store.db.migrate import ensure_schema
from store.db.schema import StoreSchema, TableNames
from store.errors import ConfigError, LockLostError, StoreError, StoreUnavailableError
from store.ha.api import STATE_LETTERS, Lease, NodeManager, state_of_letter

if TYPE_CHECKING:
    from store.config import DatabaseStoreConfig, StoreConfig

__all__ = ["GENERATION_SEQ_SHIFT", "DatabaseNodeManager", "LeaseFence", "validate"]

_log = logging.getLogger(__name__)

#: The journal rows a store writes under generation g have ``seq`` from ``g << 40``: a new
#: live node never inserts a key that a frozen predecessor's uncommitted batch holds (its
#: insert would wait for that transaction, which a client stopped in the middle of a
#: PostgreSQL COPY keeps open however long the timeouts). 2**40 rows per generation and
#: 2**23 generations fit a BIGINT.
GENERATION_SEQ_SHIFT = 40
#: A waiting node tries at least this often (seconds), whatever the renew period.
MAX_POLL_SECONDS = 2.0
_LATE_MS = 100


def validate(db: DatabaseStoreConfig) -> None:
    """Check the lease timing of ``db``. Raises ConfigError naming the keys; returns None."""
    if db.jdbc_lock_renew_period >= db.jdbc_lock_expiration:
        raise ConfigError(
            f"jdbc-lock-renew-period ({db.jdbc_lock_renew_period} ms) must be less than "
            f"jdbc-lock-expiration ({db.jdbc_lock_expiration} ms)",
            key="jdbc-lock-renew-period",
            value=db.jdbc_lock_renew_period,
            allowed=f"less than jdbc-lock-expiration ({db.jdbc_lock_expiration} ms)",
        )
    if db.jdbc_network_timeout == 0 or db.jdbc_network_timeout > db.jdbc_lock_expiration:
        raise ConfigError(
            f"jdbc-network-timeout ({db.jdbc_network_timeout} ms) must be at most "
            f"jdbc-lock-expiration ({db.jdbc_lock_expiration} ms) for a shared-store HA pair",
            key="jdbc-network-timeout",
            value=db.jdbc_network_timeout,
            allowed=f"1 to jdbc-lock-expiration ({db.jdbc_lock_expiration}) ms",
            hint="a statement must not outlive the lease it checks",
        )


def _holder_name() -> str:
    return f"{uuid.uuid4()}@{socket.gethostname()[:60]}/{os.getpid()}"


class DatabaseNodeManager(NodeManager):
    """The live/backup lock of one database store (module docstring). Construction creates
    the store's schema if it has none (as opening the store would), inserts missing lock rows
    and sets the node id.

    Raises (constructor) ConfigError for bad timing, StoreUnavailableError when the database
    cannot be reached, SchemaError as opening a store does.
    """

    kind = "database"

    def __init__(self, config: StoreConfig) -> None:
        db = config.database_store
        if db is None:
            raise ConfigError(
                "the configuration has no database-store section",
                key="database-store",
                value=None,
                allowed="a database-store section with jdbc-connection-url",
            )
        validate(db)
        renew = db.jdbc_lock_renew_period / 1000
        super().__init__(poll_seconds=min(renew, MAX_POLL_SECONDS), tick_seconds=renew)
        self.renew_ms = db.jdbc_lock_renew_period
        self.expiration_ms = db.jdbc_lock_expiration
        self._acquire_timeout = db.jdbc_lock_acquisition_timeout
        self.holder = _holder_name()
        self._generation = 0
        self._backup_generation = 0
        self._local_deadline = 0.0
        self._last_renew = 0.0
        names = TableNames.from_config(db)
        engine, target = create_store_engine(db)
        self.engine = engine
        self.where = target.display
        self._install_session_setup()
        try:
            with self._errors("opening the node manager"):
                ensure_schema(
                    engine, names, create=True, config_hint="<your configuration>", where=self.where
                )
                table = StoreSchema(names).node_manager
                self.table = LeaseTable(
                    engine,
                    table,
                    expiration_ms=db.jdbc_lock_expiration,
                    allowed_diff_ms=db.jdbc_allowed_time_diff,
                )
                self.table.ensure_rows()
                self._node_id = self.table.setup_node_id(str(uuid.uuid4()))
            self.fence_sql = FenceSQL(table, engine.dialect, db.jdbc_lock_expiration)
        except BaseException:
            dispose_store_engine(engine)
            raise
        _log.info("HA: database node manager on %s, holder %s", self.where, self.holder)

    def _install_session_setup(self) -> None:
        # The statements are chosen per connection, not now: a ``jdbc:mariadb:`` URL runs
        # the mysql dialect, which learns that the server is MariaDB (``is_mariadb``) only
        # when its first connection initializes it ("first_connect" runs before "connect").
        # Chosen here, before any connection, MariaDB's node manager got no idle bound, and
        # a node frozen between a renew's UPDATE and its COMMIT held the lock row for good.

        @event.listens_for(self.engine, "connect")
        def _on_connect(dbapi_connection: Any, record: Any) -> None:
            statements = session_setup(self.engine.dialect, self.expiration_ms)
            if not statements:
                return
            cursor = dbapi_connection.cursor()
            try:
                for statement in statements:
                    cursor.execute(statement)
            finally:
                cursor.close()
            if self.engine.dialect.name == "postgresql":
                dbapi_connection.commit()

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except StoreError:
            raise
        except sa.exc.SQLAlchemyError as exc:
            raise StoreUnavailableError(
                f"HA: {what} on {self.where} failed: {type(exc).__name__}: "
                f"{str(getattr(exc, 'orig', None) or exc).strip().splitlines()[0][:300]}"
            ) from exc

    # -- NodeManager -----------------------------------------------------------------------

    @property
    def node_id(self) -> str:
        return self._node_id

    @property
    def state(self) -> str:
        with self._errors("reading the state"):
            return state_of_letter(self.table.state_letter())

    @property
    def lease(self) -> Lease:
        row = self.read_live_row()
        holder = row.holder if row.held else None
        return Lease(holder, row.generation, row.expires_at_ms)

    def read_live_row(self) -> LeaseRow:
        """The live-lock row as it is now (raw holder, expiry, the database's now).
        Raises StoreUnavailableError."""
        with self._errors("reading the live lock"):
            return self.table.read(PRIMARY_ROW)

    def _timeout(self, timeout: float | None) -> float | None:
        if timeout is None and self._acquire_timeout > 0:
            return self._acquire_timeout / 1000
        return timeout

    def _set_state(self, state: str) -> None:
        with self._errors(f"writing state {state}"):
            self.table.set_state_letter(STATE_LETTERS[state])

    def _try_live(self) -> bool:
        started = time.monotonic()
        with self._errors("taking the live lock"):
            got = self.table.try_acquire(PRIMARY_ROW, self.holder)
        if got is None:
            return False
        with self._mutex:
            self._generation = got.generation
            self._local_deadline = started + self.expiration_ms / 1000
            self._last_renew = started
        _log.info("HA: took the live lock, generation %d", got.generation)
        return True

    def _release_live(self) -> None:
        with self._errors("releasing the live lock"):
            self.table.release(PRIMARY_ROW, self.holder, self._generation)

    def _try_backup(self) -> bool:
        with self._errors("taking the backup lock"):
            got = self.table.try_acquire(BACKUP_ROW, self.holder)
        if got is not None:
            self._backup_generation = got.generation
        return got is not None

    def _release_backup(self) -> None:
        with self._errors("releasing the backup lock"):
            self.table.release(BACKUP_ROW, self.holder, self._backup_generation)

    def _dispose(self) -> None:
        dispose_store_engine(self.engine)

    def _tick(self) -> None:
        if self._live:
            self._renew_live()
        if self._backup:
            try:
                if self.table.renew(BACKUP_ROW, self.holder, self._backup_generation) is None:
                    _log.warning("HA: the backup lock was taken by another node")
            except (sa.exc.SQLAlchemyError, StoreError) as exc:
                _log.warning("HA: renewing the backup lock failed: %s", exc)

    def _renew_live(self) -> None:
        started = time.monotonic()
        interval_ms = (started - self._last_renew) * 1000
        if interval_ms > self.expiration_ms + _LATE_MS:
            _log.error("HA: %d ms between renews, more than the expiration", interval_ms)
        elif interval_ms > self.renew_ms + _LATE_MS:
            _log.warning("HA: %d ms between renews (renew period %d)", interval_ms, self.renew_ms)
        self._last_renew = started
        try:
            got: Acquired | None = self.table.renew(PRIMARY_ROW, self.holder, self._generation)
        except Exception as exc:
            left = self._local_deadline - time.monotonic()
            if left >= self.renew_ms / 1000:
                _log.warning(
                    "HA: renewing the live lock failed (%.0f ms left, retrying): %s",
                    left * 1000,
                    exc,
                )
                return
            self._lock_lost(f"renewing the live lock failed and its lease ran out: {exc}")
            return
        took = time.monotonic() - started
        if took * 1000 > self.renew_ms:
            _log.error(
                "HA: renewing the live lock took %d ms (renew period %d ms)",
                took * 1000,
                self.renew_ms,
            )
        if got is None:
            self._lock_lost("the live lock's lease was taken by another node")
            return
        self._local_deadline = started + self.expiration_ms / 1000

    # -- fencing ---------------------------------------------------------------------------

    def seq_floor(self) -> int:
        """``generation << GENERATION_SEQ_SHIFT`` of the held live lock (0 when not live)."""
        return self._generation << GENERATION_SEQ_SHIFT if self._live else 0

    def fence(self) -> LeaseFence:
        """The fence of a store opened now (module docstring, :class:`LeaseFence`): it checks
        this node's current holder id and generation. Returns it. Raises LockLostError when
        not live."""
        if not self._live:
            raise LockLostError(
                "this node does not hold the live lock",
                hint="start_primary() or await_live() first",
            )
        return LeaseFence(self, token(self._generation, self.holder))

    def holds(self, expected: str) -> bool:
        """Whether this node still believes it holds the live lock as ``expected`` (the
        ``holder_id`` of its generation). Raises nothing."""
        return self._live and token(self._generation, self.holder) == expected

    @property
    def loss_reason(self) -> str:
        """Why the live lock was last lost ("" if never)."""
        return self._loss_reason

    def lock_lost(self, reason: str) -> None:
        """Record a loss a write noticed: callbacks run once on the node manager's thread.
        Returns None; raises nothing."""
        self._lock_lost(reason)


class LeaseFence:
    """What a database store opened with a node manager runs in its write transactions
    (module docstring): called with a connection before a batch's statements (the check
    without lock), :meth:`before_commit` just before its commit (the share-locked re-check,
    PostgreSQL and MariaDB), :meth:`after_failure` when a batch failed with a database error.

    Each raises (or returns) LockLostError once the live-lock row no longer holds
    ``expected`` (this node's ``holder_id`` at its generation) or its lease has expired by
    the database clock, and then marks the node manager's lock lost.

    Thread-safety: shared by the store's writer threads; each call uses the connection it is
    given; the set of connections whose session was prepared is guarded by a lock.
    """

    def __init__(self, nm: DatabaseNodeManager, expected: str) -> None:
        self._nm = nm
        self._expected = expected
        self._sql = nm.fence_sql
        self._prepared: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
        self._guard = threading.Lock()

    def __call__(self, conn: Any) -> None:
        """The check before a batch's statements. Returns None; raises LockLostError, and
        the driver's errors as they come."""
        self._verify(conn, self._sql.check)

    def before_commit(self, conn: Any) -> None:
        """The share-locked re-check just before the commit (where the database has one).
        Returns None; raises as :meth:`__call__`."""
        if self._sql.lock is not None:
            self._verify(conn, self._sql.lock)

    def after_failure(self) -> LockLostError | None:
        """After a batch failed with a database error: LockLostError when that was because
        this node lost the lock (frozen mid-batch, its session ended, the backup took over),
        else None (an outage: the lock stays). Raises the database's errors (the caller keeps
        its own error then)."""
        if not self._nm.holds(self._expected):
            return _lost(self._nm.loss_reason or "no longer held")
        row = self._nm.table.read(PRIMARY_ROW)  # the database away: its error, the caller's
        if row.raw != self._expected or not row.held:
            problem = f"the live lock held as {row.raw!r}, not {self._expected!r}"
            self._nm.lock_lost(f"a failed write found {problem}")
            return _lost(problem)
        # Still ours: the write failed for its own reasons (a lost connection, a restart),
        # an outage the journals ride out; the lock stays (module docstring).
        return None

    def gave_up(self, reason: str) -> None:
        """A journal's writer stopped for good (``reason``): this node can no longer serve,
        so it gives the live lock up for the backup (module docstring). Raises nothing."""
        self._nm.store_failed(f"a journal stopped writing: {reason}")

    def _verify(self, conn: Any, statement: Any) -> None:
        if not self._nm.holds(self._expected):
            raise _lost(self._nm.loss_reason or "no longer held")
        # A pooled proxy (large messages) or the driver's own connection (journals, pages):
        # the driver's is the one that lives as long as its session settings.
        conn = getattr(conn, "driver_connection", conn)
        cursor = conn.cursor()
        try:
            with self._guard:
                fresh = conn not in self._prepared
            if fresh and self._sql.session:
                for setup in self._sql.session:
                    cursor.execute(setup)
                with self._guard:
                    self._prepared[conn] = True
            cursor.execute(statement.sql, statement.params)
            row = cursor.fetchone()
        finally:
            cursor.close()
        problem = _fence_problem(row, self._expected, self._sql.clock.decode)
        if problem is not None:
            self._nm.lock_lost(f"a write's fence found {problem}")
            raise _lost(problem)


def _lost(problem: str) -> LockLostError:
    return LockLostError(
        f"the live lock was lost ({problem}): this write was not committed",
        hint="the backup has taken over; restart this node as a backup",
    )


def _fence_problem(row: Any, expected: str, decode: Callable[[Any], int]) -> str | None:
    if row is None:
        return "no live-lock row"
    holder, expires, now = row[0], row[1], decode(row[2])
    if holder != expected:
        return f"the live lock held as {holder!r}, not {expected!r}"
    if expires is None or int(expires) < now:
        return "the live lock's lease expired"
    return None
