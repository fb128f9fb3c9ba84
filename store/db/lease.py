"""The lease rows of the node-manager table and the conditional ``UPDATE`` s on them
(docs/ha.md, reference §4.10, docs/conventions.md#9).

Rows (Artemis's layout): 0 state (``state``), 1 primary ("live") lock, 2 backup lock, 3 node
id (``node_id``). A lock row's ``holder_expiration_time`` is epoch ms by the database clock
(:mod:`store.db.lease_sql`); its ``holder_id`` carries the **generation** with the holder:

==================  =====================================================================
``holder_id``       meaning
==================  =====================================================================
NULL                never taken (generation 0), or released by Artemis itself
``"<g>:"``          released; the last generation was ``g``
``"<g>:<holder>"``  taken by ``holder`` (a random UUID per node manager, with pid and host),
                    generation ``g``; held while ``holder_expiration_time`` ≥ now
==================  =====================================================================

Operations (each one short transaction; "now" read from the database first, then used as a
parameter; every write is a compare-and-swap on the whole ``holder_id``, so two acquirers that
read the same row cannot both win):

- **acquire**: read the row; if unexpired, fail (not re-entrant); else ``UPDATE … SET
  holder_id = '<g+1>:<me>', holder_expiration_time = now + expiration WHERE id = n AND
  holder_id = <what was read> AND (holder_expiration_time IS NULL OR holder_expiration_time <
  now)``: exactly one row updated means acquired with generation ``g+1``.
- **renew**: ``UPDATE … SET holder_expiration_time = now + expiration WHERE id = n AND
  holder_id = '<g>:<me>' AND holder_expiration_time IS NOT NULL AND holder_expiration_time
  <= now + expiration``. As in Artemis an expired lease nobody took can still be renewed; one
  taken by another holder cannot (its ``holder_id`` differs).
- **release**: ``UPDATE … SET holder_id = '<g>:', holder_expiration_time = NULL WHERE id = n
  AND holder_id = '<g>:<me>'``.
- **node id**: ``UPDATE … SET node_id = :new WHERE id = 3 AND node_id IS NULL``, then read
  it back: the first starter's id wins, the other reads it (missing rows are inserted first,
  a duplicate-key error from a concurrent insert meaning "already there").

On SQLite every transaction here begins ``IMMEDIATE`` (the read and the update are one
critical section across processes). Elsewhere the compare-and-swap is what makes it safe: an
``UPDATE`` re-checks its ``WHERE`` on the newest row version under the row lock.

Thread-safety: :class:`LeaseTable` may be used from any thread (each call takes its own
connection from the engine's pool).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from store.db.dialects import SQLITE_WRITE_LOCK_OPTION
from store.db.lease_sql import Clock, clock_for
from store.db.schema import NODE_MANAGER_ROWS

__all__ = ["PRIMARY_ROW", "BACKUP_ROW", "Acquired", "LeaseRow", "LeaseTable", "token"]

_log = logging.getLogger(__name__)

STATE_ROW = 0
PRIMARY_ROW = 1
BACKUP_ROW = 2
NODE_ID_ROW = 3


def token(generation: int, holder: str) -> str:
    """What ``holder_id`` holds for ``holder`` at ``generation`` (module docstring)."""
    return f"{generation}:{holder}"


def parse_holder(text: str | None) -> tuple[int, str | None]:
    """``holder_id`` → (generation, holder or None). Returns (0, None) for NULL; a value not
    in our format (an Artemis holder UUID) is generation 0 held by that text."""
    if text is None:
        return 0, None
    head, sep, rest = text.partition(":")
    if sep and head.isdigit():
        return int(head), rest or None
    return 0, text


@dataclass(frozen=True, slots=True)
class LeaseRow:
    """One lock row as read: raw ``holder_id``, its generation and holder, the expiry and the
    database's now (epoch ms). Thread-safety: immutable."""

    raw: str | None
    generation: int
    holder: str | None
    expires_at_ms: int | None
    now_ms: int

    @property
    def held(self) -> bool:
        """Whether someone holds it now (a lease past its expiry, a "zombie", is not held)."""
        return (
            self.holder is not None
            and self.expires_at_ms is not None
            and self.expires_at_ms >= self.now_ms
        )


@dataclass(frozen=True, slots=True)
class Acquired:
    """A lock just taken or renewed: its generation, expiry and the database's now."""

    generation: int
    expires_at_ms: int
    now_ms: int


class LeaseTable:
    """The node-manager table of one store through ``engine`` (module docstring).

    ``expiration_ms`` is ``jdbc-lock-expiration``; ``allowed_diff_ms`` is
    ``jdbc-allowed-time-diff`` (a larger local/database clock difference logs a warning, at
    most once a minute). Methods raise SQLAlchemy errors as they come (callers wrap them).
    """

    def __init__(
        self, engine: Engine, table: sa.Table, *, expiration_ms: int, allowed_diff_ms: int
    ) -> None:
        self.engine = engine
        self.table = table
        self.expiration_ms = expiration_ms
        self.allowed_diff_ms = allowed_diff_ms
        self.clock: Clock = clock_for(engine.dialect.name)
        self._warned_at = 0.0

    @contextmanager
    def _tx(self, *, write: bool = True) -> Iterator[Connection]:
        """A transaction; on SQLite one that takes the write lock at once unless ``write`` is
        False (a plain read, which a read-only open can do too)."""
        with self.engine.connect() as conn:
            if write and conn.dialect.name == "sqlite":
                conn = conn.execution_options(**{SQLITE_WRITE_LOCK_OPTION: True})
            with conn.begin():
                yield conn

    def _now(self, conn: Connection) -> int:
        before = time.time()
        now = self.clock.decode(conn.execute(self.clock.query()).scalar_one())
        self._check_clock(now, (before + time.time()) * 500)
        return now

    def _check_clock(self, db_ms: int, local_ms: float) -> None:
        diff = db_ms - local_ms
        if abs(diff) > self.allowed_diff_ms and time.monotonic() - self._warned_at > 60:
            self._warned_at = time.monotonic()
            _log.warning(
                "HA: the database clock differs from the local clock by %+d ms (more than "
                "jdbc-allowed-time-diff, %d ms); the lease uses the database clock",
                int(diff),
                self.allowed_diff_ms,
            )

    def _row(self, conn: Connection, row: int) -> LeaseRow:
        t = self.table
        found = conn.execute(
            sa.select(t.c.holder_id, t.c.holder_expiration_time).where(t.c.id == row)
        ).first()
        now = self._now(conn)
        raw, expires = (found[0], found[1]) if found is not None else (None, None)
        generation, holder = parse_holder(raw)
        return LeaseRow(raw, generation, holder, None if expires is None else int(expires), now)

    def read(self, row: int) -> LeaseRow:
        """The lock row ``row`` now. Returns a :class:`LeaseRow`."""
        with self._tx(write=False) as conn:
            return self._row(conn, row)

    def try_acquire(self, row: int, holder: str) -> Acquired | None:
        """Take lock ``row`` for ``holder`` if nobody holds it (not re-entrant). Returns the
        :class:`Acquired` lease, or None when it is held (or another acquirer won)."""
        t = self.table
        with self._tx() as conn:
            current = self._row(conn, row)
            if current.expires_at_ms is not None and current.expires_at_ms >= current.now_ms:
                return None
            generation = current.generation + 1
            expires = current.now_ms + self.expiration_ms
            same = t.c.holder_id.is_(None) if current.raw is None else t.c.holder_id == current.raw
            result = conn.execute(
                t.update()
                .where(
                    t.c.id == row,
                    same,
                    sa.or_(
                        t.c.holder_expiration_time.is_(None),
                        t.c.holder_expiration_time < current.now_ms,
                    ),
                )
                .values(holder_id=token(generation, holder), holder_expiration_time=expires)
            )
            if result.rowcount != 1:
                return None
            return Acquired(generation, expires, current.now_ms)

    def renew(self, row: int, holder: str, generation: int) -> Acquired | None:
        """Extend ``holder``'s lease on ``row`` to now + expiration. Returns the new lease, or
        None when the row is no longer this holder's at this generation."""
        t = self.table
        with self._tx() as conn:
            now = self._now(conn)
            expires = now + self.expiration_ms
            result = conn.execute(
                t.update()
                .where(
                    t.c.id == row,
                    t.c.holder_id == token(generation, holder),
                    t.c.holder_expiration_time.is_not(None),
                    t.c.holder_expiration_time <= expires,
                )
                .values(holder_expiration_time=expires)
            )
            return Acquired(generation, expires, now) if result.rowcount == 1 else None

    def release(self, row: int, holder: str, generation: int) -> bool:
        """Release ``holder``'s lock ``row`` (keeping the generation). Returns whether it was
        still this holder's."""
        t = self.table
        with self._tx() as conn:
            result = conn.execute(
                t.update()
                .where(t.c.id == row, t.c.holder_id == token(generation, holder))
                .values(holder_id=token(generation, ""), holder_expiration_time=None)
            )
            return bool(result.rowcount == 1)

    def state_letter(self) -> str | None:
        """Row 0's state letter (None when NULL or missing)."""
        t = self.table
        with self._tx() as conn:
            value = conn.execute(sa.select(t.c.state).where(t.c.id == STATE_ROW)).scalar()
        return None if value is None else str(value)

    def set_state_letter(self, letter: str) -> None:
        """Store ``letter`` in row 0."""
        t = self.table
        with self._tx() as conn:
            conn.execute(t.update().where(t.c.id == STATE_ROW).values(state=letter))

    def ensure_rows(self) -> None:
        """Insert any of the four rows that is missing (Artemis creates them with the table;
        a DBA may have emptied it). A concurrent insert of the same row is not an error."""
        t = self.table
        with self._tx() as conn:
            present = set(conn.execute(sa.select(t.c.id)).scalars())
        for row in NODE_MANAGER_ROWS:
            if row in present:
                continue
            try:
                with self._tx() as conn:
                    conn.execute(t.insert().values(id=row))
            except sa.exc.IntegrityError:
                _log.debug("node-manager row %d was inserted concurrently", row)

    def setup_node_id(self, candidate: str) -> str:
        """Set the node id to ``candidate`` unless one is set; returns the one that is."""
        t = self.table
        for _ in range(20):
            with self._tx() as conn:
                conn.execute(
                    t.update()
                    .where(t.c.id == NODE_ID_ROW, t.c.node_id.is_(None))
                    .values(node_id=candidate)
                )
                value: Any = conn.execute(
                    sa.select(t.c.node_id).where(t.c.id == NODE_ID_ROW)
                ).scalar()
            if value is not None and str(value).strip():
                return str(value).strip()
            time.sleep(0.05)
        raise RuntimeError("the node id row cannot be set")  # pragma: no cover - row missing
