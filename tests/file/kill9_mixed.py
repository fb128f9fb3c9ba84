"""The child process of tests/file/test_kill9_rounds.py: a mixed workload until killed.

Usage: ``python kill9_mixed.py DIRECTORY JOURNAL_TYPE ROUND``

Opens the store under DIRECTORY with :func:`config_mapping` (64 KiB files, two kept ready),
loads the messages journal, prints ``ready <backend>``, then makes random valid calls: adds,
updates and deletes (sync or not), transactions that commit, roll back, prepare (and later
commit or roll back, also those recovered from an earlier round), and ``compact()`` every
:data:`COMPACT_EVERY` operations. Before each call it prints the call as ``I <json>``; after
each call that returns only once durable (a sync append, a commit, a prepare, a rollback,
``flush``) it prints ``S <n>``: the first ``n`` printed calls are durable. The parent feeds the
calls to the reference model and checks each reopen against it.

Payloads are :func:`payload` of (round, call number, size), so the parent rebuilds them.
Runs until killed (or for ``MAX_SECONDS``). Thread-safety: one thread.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

# Runs as a script: make the project importable whatever the working directory is.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from store import StoreConfig, open_store
from store.journal.api import Journal, LoadResult

MAX_SECONDS = 60.0
COMPACT_EVERY = 300
ID_SPAN = 10_000_000  # ids and tx ids of round r start at r * ID_SPAN


def config_mapping(directory: str, journal_type: str) -> dict[str, object]:
    """Returns the configuration the child and the parent share. Raises nothing."""
    return {
        "journal-directory": os.path.join(directory, "journal"),
        "bindings-directory": os.path.join(directory, "bindings"),
        "journal-type": journal_type,
        "journal-file-size": 64 * 1024,
        "journal-min-files": 2,
        "journal-pool-files": 4,
        "journal-compact-min-files": 0,
    }


def payload(round: int, n: int, size: int) -> bytes:
    """Returns the data of call ``n`` of ``round``, ``size`` bytes. Raises nothing."""
    stamp = f"{round}:{n}:".encode()
    return (stamp * (size // len(stamp) + 1))[:size]


class Workload:
    """Random valid calls on one loaded journal, printed before they are made."""

    def __init__(self, journal: Journal, loaded: LoadResult, round: int) -> None:
        self.journal = journal
        self.round = round
        self.rng = random.Random(round)
        # Ids a prepared transaction deletes are left alone: it may commit in this round.
        held = {id for p in loaded.prepared for id in p.deleted_ids}
        self.live = {r.id for r in loaded.records if not r.is_update} - held
        self.prepared = [p.tx_id for p in loaded.prepared]
        self.next_id = round * ID_SPAN
        self.next_tx = round * ID_SPAN
        self.calls = 0

    def _say(self, line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def _call(self, kind: str, *, sync: bool = False, **fields: object) -> bytes:
        """Prints the call and returns its payload (empty when it has none)."""
        n = self.calls
        self.calls += 1
        size = int(fields.get("size", 0))  # type: ignore[call-overload]
        self._say("I " + json.dumps({"k": kind, "n": n, **fields}))
        return payload(self.round, n, size)

    def _durable(self) -> None:
        self._say(f"S {self.calls}")

    def step(self) -> None:
        rng, j = self.rng, self.journal
        r = rng.random()
        sync = rng.random() < 0.4
        if r < 0.35 or not self.live:
            rid, self.next_id = self.next_id, self.next_id + 1
            size = rng.randint(0, 2000)
            j.append_add(rid, 1, self._call("add", id=rid, u=1, size=size), sync=sync)
            self.live.add(rid)
        elif r < 0.5:
            rid = rng.choice(sorted(self.live))
            size = rng.randint(0, 600)
            j.append_update(rid, 2, self._call("update", id=rid, u=2, size=size), sync=sync)
        elif r < 0.68:
            rid = rng.choice(sorted(self.live))
            self._call("delete", id=rid)
            j.append_delete(rid, sync=sync)
            self.live.discard(rid)
        elif r < 0.72 and self.prepared:
            tx = self.prepared.pop(0)
            end = "commit" if rng.random() < 0.5 else "rollback"
            self._call(end, tx=tx)
            getattr(j, f"append_{end}")(tx)
            sync = True
        else:
            self._transaction()
            sync = True
        if sync:
            self._durable()
        if self.calls % COMPACT_EVERY < 6 and rng.random() < 0.2:
            j.compact()

    def _transaction(self) -> None:
        rng, j = self.rng, self.journal
        tx, self.next_tx = self.next_tx, self.next_tx + 1
        added = []
        for _ in range(rng.randint(1, 4)):
            rid, self.next_id = self.next_id, self.next_id + 1
            size = rng.randint(0, 800)
            j.append_add_tx(tx, rid, 3, self._call("add_tx", tx=tx, id=rid, u=3, size=size))
            added.append(rid)
        deleted = None
        if self.live and rng.random() < 0.4:
            deleted = rng.choice(sorted(self.live))
            self._call("delete_tx", tx=tx, id=deleted)
            j.append_delete_tx(tx, deleted)
        k = rng.random()
        if k < 0.25:
            xid = b"xid-%d" % tx
            self._call("prepare", tx=tx, x=xid.decode())
            j.append_prepare(tx, xid)
            self.prepared.append(tx)
            if deleted is not None:
                self.live.discard(deleted)  # held by the prepared tx: not touched again
        elif k < 0.85:
            self._call("commit", tx=tx)
            j.append_commit(tx)
            self.live.update(added)
            if deleted is not None:
                self.live.discard(deleted)
        else:
            self._call("rollback", tx=tx)
            j.append_rollback(tx)


def main(argv: list[str]) -> int:
    directory, journal_type, round = argv[1], argv[2], int(argv[3])
    store = open_store(StoreConfig.from_mapping(config_mapping(directory, journal_type)))
    journal = store.messages
    loaded = journal.load()
    backend = getattr(journal, "backend", None)
    sys.stdout.write(f"ready {getattr(backend, 'name', type(journal).__name__)}\n")
    sys.stdout.flush()
    work = Workload(journal, loaded, round)
    deadline = time.monotonic() + MAX_SECONDS
    while time.monotonic() < deadline:
        work.step()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
