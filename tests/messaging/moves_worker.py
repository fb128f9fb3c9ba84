"""The process ``test_moves_kill9.py`` kills: every message it cancels is dead-lettered and a
share of what it sends expires, so it is killed in the middle of moves.

Reads ``(config, round, seed)`` pickled from standard input, loads the store (creating
:data:`WORK`, the dead-letter queue :data:`DEAD` and the expiry queue :data:`EXPIRED` the
first time), prints ``READY``, then loops: 10 sends to :data:`WORK` with ``sync=True`` (``S
<seq>`` printed once each returns; ``seq`` is the ``seq`` property, ``round * 1_000_000 +
n``), one in five large, two in five expiring 10-300 ms later (the store's expiry scan and
the receives move them to :data:`EXPIRED`); up to 5 receives from :data:`WORK`, each
cancelled (``max-delivery-attempts`` 1: the cancel moves it to :data:`DEAD`); then up to 2
receives from :data:`DEAD`, each printed ``R <seq>`` before its ``ack(sync=True)`` and ``A
<seq>`` once that returns. Every line is flushed at once: the parent kills this process with
SIGKILL at any moment.

Thread-safety: one thread, beside the store's expiry scan.
"""

from __future__ import annotations

import pickle
import random
import sys
import time

from store import StoreConfig, open_store
from store.messaging import Message, StorageManager

WORK = "work"
DEAD = "dead"
EXPIRED = "expired"
#: A large message's body (over the 4 KiB min-large-message-size the test sets).
BIG = bytes(range(256)) * 40


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _ensure(sm: StorageManager) -> None:
    if WORK in {q.name for q in sm.queues()}:
        return
    sm.create_address(WORK)
    sm.create_queue(WORK, address=WORK)
    for address, queue in (("DLA", DEAD), ("EXP", EXPIRED)):
        sm.create_address(address, routing_types=("MULTICAST",))
        sm.create_queue(queue, address=address, routing_type="MULTICAST")


def main() -> None:
    config, round_no, seed = pickle.loads(sys.stdin.buffer.read())
    assert isinstance(config, StoreConfig)
    rng = random.Random(seed)
    sm = StorageManager(open_store(config))
    sm.load()
    _ensure(sm)
    _say("READY")
    seq = round_no * 1_000_000
    while True:
        for _ in range(10):
            seq += 1
            body = BIG if rng.random() < 0.2 else b"m" * 64
            soon = int(time.time() * 1000) + rng.randint(10, 300)
            expiration = soon if rng.random() < 0.4 else 0
            message = Message(WORK, body, properties={"seq": seq}, expiration=expiration)
            sm.send(message, sync=True)
            _say(f"S {seq}")
        for d in sm.receive(WORK, max_messages=5):
            assert d.message.message_id is not None
            sm.cancel(WORK, d.message.message_id)
        for d in sm.receive(DEAD, max_messages=2):
            got = d.message.properties["seq"]
            _say(f"R {got}")
            assert d.message.message_id is not None
            sm.ack(DEAD, d.message.message_id, sync=True)
            _say(f"A {got}")


if __name__ == "__main__":
    main()
