"""Child process of the file node manager's exclusion test: ``rounds`` times, open a node
manager on the lock directory, start_primary, do a non-atomic increment of the counter file
(read, pause, write), close.

Usage: python -m tests.ha.file_child LOCK_DIRECTORY COUNTER_FILE ROUNDS
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from store import StoreConfig
from store.ha import open_node_manager


def main() -> int:
    directory, counter, rounds = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    config = StoreConfig.from_mapping({"node-manager-lock-directory": directory})
    for _ in range(rounds):
        nm = open_node_manager(config)
        try:
            nm.start_primary(timeout=60)
            value = int(counter.read_text() or "0")
            time.sleep(0.02)
            counter.write_text(str(value + 1))
        finally:
            nm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
