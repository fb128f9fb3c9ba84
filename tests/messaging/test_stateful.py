"""A Hypothesis state machine drives the storage manager (file store, NIO) and an independent
in-memory model of two queues with the same calls, restarts (clean and crash-like) included,
and checks every delivery (message, order, delivery count) and every depth against the model.

The model is written from docs/messaging.md, not from the manager's code:

- a queue delivers its ready messages by priority (high first), then by the order they became
  visible (sent, or committed); a cancel puts a message before every other of its priority and
  adds 1 to its delivery count; a delivered message is not delivered again before a restart;
- a transaction's sends become visible at commit; its acks hold the messages (counted, not
  delivered) until commit removes them or rollback puts them back at the head, in the order
  acknowledged, each with its count + 1;
- a restart keeps durable messages only, back in visibility order with their delivery counts;
  an open transaction is gone (its held messages ready again, counts unchanged); a prepared one
  survives with its durable sends and its holds;
- a duplicate id sent with a durable message stays refused across restarts.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from store import StoreConfig, open_store
from store.errors import DuplicateIdError, UnknownMessageError
from store.messaging import Message, StorageManager, Transaction, Xid
from tests.support.backends import file_config_mapping
from tests.support.profile import examples

QUEUES = ("q1", "q2")
READY, DELIVERED, HELD = "ready", "delivered", "held"
# Two priorities: enough to check priority order, and ties (send order) are frequent.
PRIORITIES = st.sampled_from([1, 6])


@dataclass(eq=False)
class MRef:
    mid: int
    priority: int
    durable: bool
    visible: int
    order: int
    count: int = 0
    state: str = READY
    paged: bool = False  # test_stateful_paging: stored in a page, not in memory
    recovered_hold: bool = False  # held by a prepared transaction recovered at a restart


@dataclass(eq=False)
class MTx:
    handle: Transaction
    # (mid, priority, durable, queues, page sequence or None): see Model.tx_send
    sends: list[tuple[int, int, bool, tuple[str, ...], int | None]] = field(default_factory=list)
    acks: list[tuple[str, int]] = field(default_factory=list)
    xid: Xid | None = None


class Model:
    def __init__(self) -> None:
        self.queues: dict[str, dict[int, MRef]] = {q: {} for q in QUEUES}
        self.visible = itertools.count()
        self.head = itertools.count(-1, -1)
        self.dups: dict[bytes, bool] = {}  # dup id -> durable

    def send(self, mid: int, priority: int, durable: bool, queues: tuple[str, ...]) -> None:
        """A non-transactional send."""
        self.enqueue(mid, priority, durable, queues)

    def tx_send(
        self, mid: int, priority: int, durable: bool, queues: tuple[str, ...]
    ) -> tuple[int, int, bool, tuple[str, ...], int | None]:
        """A transactional send: what the transaction keeps until commit."""
        return (mid, priority, durable, queues, None)

    def commit_send(self, send: tuple[int, int, bool, tuple[str, ...], int | None]) -> None:
        """A transactional send becomes visible."""
        self.enqueue(*send[:4])

    def ack(self, queue: str, mid: int) -> None:
        del self.queues[queue][mid]

    def release(self, queue: str, mid: int) -> None:
        """A rolled-back ack."""
        self.to_head(self.queues[queue][mid])

    def depth(self, queue: str) -> int:
        return len(self.queues[queue])

    def messages(self) -> int:
        return len({mid for refs in self.queues.values() for mid in refs})

    def enqueue(self, mid: int, priority: int, durable: bool, queues: tuple[str, ...]) -> None:
        for q in queues:
            v = next(self.visible)
            self.queues[q][mid] = MRef(mid, priority, durable, v, v)

    def take(self, queue: str, n: int) -> list[MRef]:
        ready = [r for r in self.queues[queue].values() if r.state == READY]
        ready.sort(key=lambda r: (-r.priority, r.order))
        for r in ready[:n]:
            r.state = DELIVERED
        return ready[:n]

    def to_head(self, ref: MRef) -> None:
        ref.order = next(self.head)
        ref.count += 1
        ref.state = READY

    def restart(self, prepared: list[MTx]) -> None:
        held = {(q, mid) for tx in prepared for q, mid in tx.acks}
        for q, refs in self.queues.items():
            for mid in [m for m, r in refs.items() if not r.durable]:
                del refs[mid]
            for mid, r in refs.items():
                r.order = r.visible
                r.state = HELD if (q, mid) in held else READY
        for tx in prepared:
            tx.sends = [s for s in tx.sends if s[2]]
            tx.acks = [(q, mid) for q, mid in tx.acks if mid in self.queues[q]]
        self.dups = {d: True for d, durable in self.dups.items() if durable}


class ManagerMachine(RuleBasedStateMachine):
    model_class: ClassVar[type[Model]] = Model
    address_settings: ClassVar[dict[str, dict[str, object]]] = {}
    #: Keys added to the store's configuration (test_stateful_large: min-large-message-size).
    settings_extra: ClassVar[dict[str, object]] = {}
    #: The body every message is sent with (test_stateful_large: one over the large limit).
    body: ClassVar[bytes] = b"x"

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="sm-stateful-"))
        mapping = file_config_mapping(self.dir, "NIO")
        if self.address_settings:
            mapping["address-settings"] = self.address_settings
        mapping.update(self.settings_extra)
        self.config = StoreConfig.from_mapping(mapping)
        self.model = self.model_class()
        self.tx: MTx | None = None
        self.prepared: list[MTx] = []
        self.xids = itertools.count()
        self.sm = StorageManager(open_store(self.config))
        self.sm.load()
        self.sm.create_address("a", routing_types=("MULTICAST",))
        for q in QUEUES:
            self.sm.create_queue(q, address="a", routing_type="MULTICAST")

    def teardown(self) -> None:
        self.sm.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @staticmethod
    def _targets(which: int) -> tuple[str, ...]:
        return QUEUES if which == 2 else (QUEUES[which],)

    @rule(
        priority=PRIORITIES,
        durable=st.booleans(),
        which=st.integers(0, 2),
        dup=st.none() | st.sampled_from([b"d1", b"d2", b"d3"]),
    )
    def send(self, priority: int, durable: bool, which: int, dup: bytes | None) -> None:
        self._send(priority, durable, which, dup)

    @rule(priorities=st.lists(PRIORITIES, min_size=2, max_size=5), durable=st.booleans())
    def send_several(self, priorities: list[int], durable: bool) -> None:
        for p in priorities:
            self._send(p, durable, 2, None)

    def _send(self, priority: int, durable: bool, which: int, dup: bytes | None) -> None:
        targets = self._targets(which)
        m = Message("a", self.body, priority=priority, durable=durable)
        if dup is not None and dup in self.model.dups:
            try:
                self.sm.send(m, queues=list(targets), dup_id=dup, sync=False)
            except DuplicateIdError:
                return
            raise AssertionError(f"duplicate id {dup!r} was accepted")
        mid = self.sm.send(m, queues=list(targets), dup_id=dup, sync=False)
        assert mid is not None
        self.model.send(mid, priority, durable, targets)
        if dup is not None:
            self.model.dups[dup] = durable

    @rule(queue=st.sampled_from(QUEUES), n=st.integers(1, 4))
    def receive(self, queue: str, n: int) -> None:
        expected = [(r.mid, r.count) for r in self.model.take(queue, n)]
        got = [(d.message.message_id, d.delivery_count) for d in self.sm.receive(queue, n)]
        assert got == expected

    def _delivered(self, queue: str, pick: int) -> MRef | None:
        refs = [r for r in self.model.queues[queue].values() if r.state == DELIVERED]
        return refs[pick % len(refs)] if refs else None

    @rule(queue=st.sampled_from(QUEUES), pick=st.integers(0, 50))
    def ack(self, queue: str, pick: int) -> None:
        ref = self._delivered(queue, pick)
        if ref is None:
            return
        self.sm.ack(queue, ref.mid, sync=False)
        self.model.ack(queue, ref.mid)

    @rule(queue=st.sampled_from(QUEUES), pick=st.integers(0, 50))
    def cancel(self, queue: str, pick: int) -> None:
        ref = self._delivered(queue, pick)
        if ref is None:
            return
        self.sm.cancel(queue, ref.mid)
        self.model.to_head(ref)

    @rule(queue=st.sampled_from(QUEUES))
    def ack_of_an_undelivered_message_is_refused(self, queue: str) -> None:
        for ref in self.model.queues[queue].values():
            if ref.state != DELIVERED:
                try:
                    self.sm.ack(queue, ref.mid)
                except UnknownMessageError:
                    return
                raise AssertionError(f"ack of undelivered {ref.mid} was accepted")

    @precondition(lambda self: self.tx is None)
    @rule()
    def begin(self) -> None:
        self.tx = MTx(self.sm.begin())

    @precondition(lambda self: self.tx is not None)
    @rule(priority=PRIORITIES, durable=st.booleans(), which=st.integers(0, 2))
    def tx_send(self, priority: int, durable: bool, which: int) -> None:
        assert self.tx is not None
        targets = self._targets(which)
        m = Message("a", self.body, priority=priority, durable=durable)
        mid = self.tx.handle.send(m, queues=list(targets))
        assert mid is not None
        self.tx.sends.append(self.model.tx_send(mid, priority, durable, targets))

    @precondition(lambda self: self.tx is not None)
    @rule(queue=st.sampled_from(QUEUES), pick=st.integers(0, 50))
    def tx_ack(self, queue: str, pick: int) -> None:
        assert self.tx is not None
        ref = self._delivered(queue, pick)
        if ref is None:
            return
        self.tx.handle.ack(queue, ref.mid)
        ref.state = HELD
        self.tx.acks.append((queue, ref.mid))

    @precondition(lambda self: self.tx is not None)
    @rule(queue=st.sampled_from(QUEUES), n=st.integers(1, 4))
    def tx_receive_and_ack(self, queue: str, n: int) -> None:
        """The usual transacted consumer: receive a batch, acknowledge all of it in the tx."""
        assert self.tx is not None
        self.receive(queue, n)
        for ref in [r for r in self.model.queues[queue].values() if r.state == DELIVERED]:
            self.tx.handle.ack(queue, ref.mid)
            ref.state = HELD
            self.tx.acks.append((queue, ref.mid))

    @precondition(lambda self: self.tx is None)
    @rule(queue=st.sampled_from(QUEUES), n=st.integers(2, 4), commit=st.booleans())
    def consume_in_a_transaction(self, queue: str, n: int, commit: bool) -> None:
        """begin, receive a batch, ack it all in the tx, commit or roll back: one step."""
        self.begin()
        self.tx_receive_and_ack(queue, n)
        self.tx_end(commit)

    def _commit(self, tx: MTx) -> None:
        tx.handle.commit()
        for send in tx.sends:
            self.model.commit_send(send)
        for queue, mid in tx.acks:
            self.model.ack(queue, mid)

    def _rollback(self, tx: MTx) -> None:
        tx.handle.rollback()
        for queue, mid in reversed(tx.acks):
            self.model.release(queue, mid)

    @precondition(lambda self: self.tx is not None)
    @rule(commit=st.booleans())
    def tx_end(self, commit: bool) -> None:
        assert self.tx is not None
        tx, self.tx = self.tx, None
        self._commit(tx) if commit else self._rollback(tx)

    @precondition(lambda self: self.tx is not None)
    @rule()
    def tx_prepare(self) -> None:
        assert self.tx is not None
        tx, self.tx = self.tx, None
        tx.xid = Xid(7, b"g%d" % next(self.xids), b"b")
        tx.handle.prepare(tx.xid)
        self.prepared.append(tx)

    @precondition(lambda self: bool(self.prepared))
    @rule(pick=st.integers(0, 50), commit=st.booleans())
    def resolve_prepared(self, pick: int, commit: bool) -> None:
        tx = self.prepared.pop(pick % len(self.prepared))
        self._commit(tx) if commit else self._rollback(tx)

    @rule(clean=st.booleans())
    def restart(self, clean: bool) -> None:
        if self.tx is not None:  # an open transaction is lost: its holds are released
            for queue, mid in self.tx.acks:
                self.model.queues[queue][mid].state = READY
            self.tx = None
        if clean:
            self.sm.close()
        else:
            self.sm._store.close()  # no clean stop of the id generator
        self.model.restart(self.prepared)
        self.sm = StorageManager(open_store(self.config))
        rec = self.sm.load()
        assert set(rec.prepared) == {tx.xid for tx in self.prepared}
        for tx in self.prepared:
            assert tx.xid is not None
            tx.handle = rec.prepared[tx.xid]
        assert rec.messages == self.model.messages()

    @invariant()
    def depths_match(self) -> None:
        for q in QUEUES:
            assert self.sm.depth(q) == self.model.depth(q), q


TestManagerMachine = ManagerMachine.TestCase
TestManagerMachine.settings = settings(
    max_examples=examples(150),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
