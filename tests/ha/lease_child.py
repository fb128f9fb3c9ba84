"""Child process of the mutual-exclusion test: ``rounds`` times, take the live-lock row of the
store in ``config.json`` (retrying), do a non-atomic increment of the counter file (read,
pause, write), release. Prints nothing; exits 0, or 1 when another holder was seen inside.

Usage: python -m tests.ha.lease_child CONFIG_JSON COUNTER_FILE ROUNDS
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

from store import StoreConfig
from store.db.lease import PRIMARY_ROW, Acquired, LeaseTable
from store.ha.database import DatabaseNodeManager


def acquire(table: LeaseTable, holder: str, pause: float) -> Acquired:
    """Take the live-lock row for ``holder``, retrying. An attempt that fails with a database
    error (a statement or idle timeout while a dozen contenders wait for the row's lock, a
    dropped connection) counts as not taken, as the node manager's wait counts it; if its commit did
    land, the row is ``holder``'s and nobody else gets it before it expires. Raises nothing."""
    while True:
        try:
            got = table.try_acquire(PRIMARY_ROW, holder)
        except sa.exc.DBAPIError:
            got = None
        if got is not None:
            return got
        time.sleep(pause)


def release(table: LeaseTable, holder: str, generation: int) -> bool:
    """Release the row, retrying a database error; True when released (a retry that finds
    the row released already counts: the failed attempt's commit landed)."""
    for attempt in range(100):
        try:
            return table.release(PRIMARY_ROW, holder, generation) or attempt > 0
        except sa.exc.DBAPIError:
            time.sleep(0.05)
    return False


def main() -> int:
    config = StoreConfig.from_mapping(json.loads(Path(sys.argv[1]).read_text()))
    counter, rounds = sys.argv[2], int(sys.argv[3])
    nm = DatabaseNodeManager(config)
    holder = f"child-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    try:
        for _ in range(rounds):
            got = acquire(nm.table, holder, 0.01)
            value = int(Path(counter).read_text() or "0")
            time.sleep(0.02)
            Path(counter).write_text(str(value + 1))
            release(nm.table, holder, got.generation)
    finally:
        nm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
