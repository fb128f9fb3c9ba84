"""The paging state machine of ``test_stateful_paging`` with every body a large message (over
``min-large-message-size``, so kept in the large-message store, paged or not), plus the
bodies' own invariants:

- every message the model still holds (in a queue, held, or sent by an open or prepared
  transaction) has its body in the large-message store, and it reads back whole;
- after every restart, the store holds exactly those bodies: nothing a crash or an ack left
  behind survives the load's sweep (store.messaging.loader: orphans), and nothing of a
  live message was swept.

Damage to bodies found later is one more rule or invariant here, not a new harness.
"""

from __future__ import annotations

from typing import ClassVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from tests.messaging.test_stateful import QUEUES
from tests.messaging.test_stateful_paging import PagingMachine
from tests.support.profile import examples

BODY = bytes(range(256)) * 3  # 768 bytes, over the limit below


class LargePagingMachine(PagingMachine):
    settings_extra: ClassVar[dict[str, object]] = {"min-large-message-size": 256}
    body: ClassVar[bytes] = BODY

    def _live(self) -> set[int]:
        """Ids of the messages whose bodies must still exist."""
        live = {mid for refs in self.model.queues.values() for mid in refs}
        pending = getattr(self.model, "pending", {})  # paged, not read back yet
        live |= {ref.mid for refs in pending.values() for ref in refs}
        for tx in [*self.prepared, *([self.tx] if self.tx is not None else [])]:
            live |= {send[0] for send in tx.sends}
        return live

    @invariant()
    def every_live_body_is_stored(self) -> None:
        stored = set(self.sm._store.large_messages.ids())
        missing = self._live() - stored
        assert not missing, f"bodies of live messages are gone: {sorted(missing)}"

    @rule(queue=st.sampled_from(QUEUES))
    def read_a_body_back(self, queue: str) -> None:
        refs = [mid for mid in self.model.queues[queue]]
        if refs:
            with self.sm._store.large_messages.open(refs[0]) as body:
                assert body.read() == BODY

    @rule(clean=st.booleans())
    def restart(self, clean: bool) -> None:
        super().restart(clean)
        stored = set(self.sm._store.large_messages.ids())
        live = self._live()
        assert stored == live, (
            f"after the load: orphan bodies {sorted(stored - live)}, "
            f"lost bodies {sorted(live - stored)}"
        )


TestLargePagingMachine = LargePagingMachine.TestCase
TestLargePagingMachine.settings = settings(
    max_examples=examples(60),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
