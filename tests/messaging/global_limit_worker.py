"""The process ``test_global_limits_kill9.py`` kills: sends to one address that has no limit
of its own while a small ``global-max-messages`` makes it page, and consumes more slowly.

Reads ``(config, round)`` pickled from standard input, loads the store (creating the address
and queue :data:`QUEUE` the first time), prints ``READY``, then loops: 20 sends with
``sync=True`` (``S <seq>`` printed once each returns; ``seq`` is the ``seq`` property,
``round * 1_000_000 + n``, so sends of later rounds have higher numbers), then up to 10
receives, each printed ``R <seq>`` before its ``ack(sync=True)`` and ``A <seq>`` once that
returns. Every line is flushed at once: the parent kills this process with SIGKILL at any
moment.

Thread-safety: one thread.
"""

from __future__ import annotations

import pickle
import sys

from store import StoreConfig, open_store
from store.messaging import Message, StorageManager

QUEUE = "global.q"


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    config, round_no = pickle.loads(sys.stdin.buffer.read())
    assert isinstance(config, StoreConfig)
    sm = StorageManager(open_store(config))
    sm.load()
    if QUEUE not in {q.name for q in sm.queues()}:
        sm.create_address(QUEUE)
        sm.create_queue(QUEUE, address=QUEUE)
    _say("READY")
    seq = round_no * 1_000_000
    while True:
        for _ in range(20):
            seq += 1
            sm.send(Message(QUEUE, b"g" * 64, properties={"seq": seq}), sync=True)
            _say(f"S {seq}")
        for d in sm.receive(QUEUE, max_messages=10):
            got = d.message.properties["seq"]
            _say(f"R {got}")
            assert d.message.message_id is not None
            sm.ack(QUEUE, d.message.message_id, sync=True)
            _say(f"A {got}")


if __name__ == "__main__":
    main()
