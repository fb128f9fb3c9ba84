"""The child process of tests/large/test_kill9.py: writes large messages until killed.

Usage: ``python kill9_large_writer.py CONFIG.json COMPLETE``

- opens the store whose ``StoreConfig.from_mapping`` mapping is in CONFIG.json (no journal
  ``load()``: large messages do not need it);
- writes bodies 1..COMPLETE (sizes from :func:`body_size`) and prints ``C <id> <sha256>``
  once each block has exited, that is once the body is complete and durable;
- then starts body :data:`BIG_ID` and writes it in 256 KiB pieces without end, printing
  ``W <bytes written>`` after each piece, until it is killed (or ``MAX_SECONDS`` pass).

Lines are flushed at once, so a line the parent reads describes a call that had returned.
"""

from __future__ import annotations

import json
import os
import sys
import time

# Runs as a script: make the project importable whatever the working directory is.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from store import StoreConfig, open_store
from tests.large.support import pieces, write_body

BIG_ID = 999_999
MAX_SECONDS = 120.0
PIECE = 256 * 1024


def body_size(message_id: int) -> int:
    """Returns the size of complete body ``message_id``: empty, small, and over a chunk."""
    return [0, 1, 70_000, (1 << 20) + 3][message_id % 4] + message_id


def main(argv: list[str]) -> int:
    with open(argv[1]) as f:
        mapping = json.load(f)
    complete = int(argv[2])
    store = open_store(StoreConfig.from_mapping(mapping))
    lm = store.large_messages
    for mid in range(1, complete + 1):
        digest = write_body(lm, mid, body_size(mid))
        print(f"C {mid} {digest}", flush=True)
    deadline = time.monotonic() + MAX_SECONDS
    writer = lm.create(BIG_ID)
    written = 0
    while time.monotonic() < deadline:
        for data in pieces(BIG_ID, 64 << 20, PIECE):
            written += writer.write(data)
            print(f"W {written}", flush=True)
    return 1  # never killed: the parent fails on the exit status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
