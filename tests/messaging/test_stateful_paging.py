"""The state machine of ``test_stateful`` with paging on: the address holds at most 3 messages
in memory and pages the rest (``address-full-policy = PAGE``), checked against a model that
adds paging to the one of ``test_stateful``, also written from docs/messaging.md:

- a durable send goes to the pages while the address is full (3 messages in memory, counted
  once whatever their queues; paged messages read back do not count) or while any paged
  message is still unacknowledged; non-durable ones stay in memory; a transactional send is
  decided at ``tx.send`` and becomes visible at commit, a paged one at its place in the pages;
  the in-memory sends of open transactions count against the limit from ``tx.send`` (until
  their commit or rollback; a prepared transaction recovered at a restart counts nothing), and
  a transaction that paged a send pages its later durable ones too;
- ``receive`` takes what is ready in memory first; if that is fewer than asked, it reads the
  next paged messages of the queue, in page order, and takes among them by priority;
- a restart puts every unacknowledged paged message back in its page, in page order, with its
  delivery count back to 0 (a paged message's count is not persisted); one a recovered prepared
  transaction acknowledged is held, and goes back to its page if that transaction rolls back.
"""

from __future__ import annotations

import itertools
from typing import ClassVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from tests.messaging.test_stateful import (
    HELD,
    PRIORITIES,
    QUEUES,
    READY,
    ManagerMachine,
    Model,
    MRef,
    MTx,
)
from tests.support.profile import examples

LIMIT = 3


class PagingModel(Model):
    def __init__(self) -> None:
        super().__init__()
        self.pending: dict[str, list[MRef]] = {q: [] for q in QUEUES}  # in page order
        self.paged_live = 0  # paged refs not acknowledged (read back and held included)
        self.page_seq = itertools.count()
        self.held_paged: list[tuple[str, MRef]] = []
        self.tx_held: set[int] = set()  # in-memory sends of open transactions (counted)
        self.tx_paged = False  # the transaction sending now paged an earlier send

    def _in_memory(self) -> int:
        committed = {mid for refs in self.queues.values() for mid, r in refs.items() if not r.paged}
        return len(committed) + len(self.tx_held)

    def _pages(self, durable: bool) -> bool:
        return durable and (self.paged_live > 0 or self._in_memory() >= LIMIT)

    def send(self, mid: int, priority: int, durable: bool, queues: tuple[str, ...]) -> None:
        if not self._pages(durable):
            self.enqueue(mid, priority, durable, queues)
            return
        self._page(mid, priority, queues, next(self.page_seq))

    def _page(self, mid: int, priority: int, queues: tuple[str, ...], seq: int) -> None:
        for q in queues:
            self.pending[q].append(MRef(mid, priority, True, seq, seq, paged=True))
            self.pending[q].sort(key=lambda r: r.visible)  # page order
            self.paged_live += 1

    def tx_send(
        self, mid: int, priority: int, durable: bool, queues: tuple[str, ...]
    ) -> tuple[int, int, bool, tuple[str, ...], int | None]:
        paged = self._pages(durable) or (durable and self.tx_paged)
        seq = next(self.page_seq) if paged else None
        if seq is None:
            self.tx_held.add(mid)
        return (mid, priority, durable, queues, seq)

    def commit_send(self, send: tuple[int, int, bool, tuple[str, ...], int | None]) -> None:
        mid, priority, durable, queues, seq = send
        self.tx_held.discard(mid)
        if seq is None:
            self.enqueue(mid, priority, durable, queues)
        else:
            self._page(mid, priority, queues, seq)

    def rollback_sends(
        self, sends: list[tuple[int, int, bool, tuple[str, ...], int | None]]
    ) -> None:
        for mid, *_ in sends:
            self.tx_held.discard(mid)

    def take(self, queue: str, n: int) -> list[MRef]:
        taken = super().take(queue, n)
        if len(taken) < n and self.pending[queue]:
            batch = self.pending[queue][: n - len(taken)]
            del self.pending[queue][: len(batch)]
            for ref in batch:
                ref.order = next(self.visible)
                ref.state = READY
                self.queues[queue][ref.mid] = ref
            taken += super().take(queue, n - len(taken))
        return taken

    def ack(self, queue: str, mid: int) -> None:
        if self.queues[queue].pop(mid).paged:
            self.paged_live -= 1

    def release(self, queue: str, mid: int) -> None:
        ref = self.queues[queue][mid]
        if not ref.recovered_hold:
            self.to_head(ref)
            return
        del self.queues[queue][mid]
        ref.recovered_hold, ref.count = False, 0
        self.pending[queue].append(ref)
        self.pending[queue].sort(key=lambda r: r.visible)

    def depth(self, queue: str) -> int:
        return len(self.queues[queue]) + len(self.pending[queue])

    def messages(self) -> int:
        refs = [*self.queues.values(), *({r.mid: r for r in p} for p in self.pending.values())]
        return len({mid for r in refs for mid in r})

    def restart(self, prepared: list[MTx]) -> None:
        held = {(q, mid) for tx in prepared for q, mid in tx.acks}
        for q, refs in self.queues.items():
            for mid in [m for m, r in refs.items() if r.paged]:
                ref = refs.pop(mid)
                ref.count = 0
                if (q, mid) in held:
                    ref.state, ref.recovered_hold = HELD, True
                    self.held_paged.append((q, ref))
                else:
                    self.pending[q].append(ref)
            self.pending[q].sort(key=lambda r: r.visible)
        for q, ref in self.held_paged:
            self.queues[q][ref.mid] = ref
        self.held_paged = []
        self.tx_held = set()  # the open transaction is lost; recovered ones count nothing
        super().restart(prepared)


class PagingMachine(ManagerMachine):
    model_class = PagingModel
    address_settings: ClassVar[dict[str, dict[str, object]]] = {
        "a": {
            "max-size-messages": LIMIT,
            "address-full-policy": "PAGE",
            "page-size-bytes": 512,
        }
    }

    @precondition(lambda self: self.tx is not None)
    @rule(priority=PRIORITIES, durable=st.booleans(), which=st.integers(0, 2))
    def tx_send(self, priority: int, durable: bool, which: int) -> None:
        assert self.tx is not None and isinstance(self.model, PagingModel)
        self.model.tx_paged = any(seq is not None for *_, seq in self.tx.sends)
        super().tx_send(priority, durable, which)

    def _rollback(self, tx: MTx) -> None:
        super()._rollback(tx)
        assert isinstance(self.model, PagingModel)
        self.model.rollback_sends(tx.sends)


TestPagingMachine = PagingMachine.TestCase
TestPagingMachine.settings = settings(
    max_examples=examples(100),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
