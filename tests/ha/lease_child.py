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

from store import StoreConfig
from store.ha.database import DatabaseNodeManager
from store.ha.lease import PRIMARY_ROW


def main() -> int:
    config = StoreConfig.from_mapping(json.loads(Path(sys.argv[1]).read_text()))
    counter, rounds = sys.argv[2], int(sys.argv[3])
    nm = DatabaseNodeManager(config)
    holder = f"child-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    try:
        for _ in range(rounds):
            while (got := nm.table.try_acquire(PRIMARY_ROW, holder)) is None:
                time.sleep(0.01)
            value = int(Path(counter).read_text() or "0")
            time.sleep(0.02)
            Path(counter).write_text(str(value + 1))
            nm.table.release(PRIMARY_ROW, holder, got.generation)
    finally:
        nm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
