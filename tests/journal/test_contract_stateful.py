"""Contract, at random: a Hypothesis state machine mixes every journal operation with restarts,
compactions and flushes, and compares every load with the reference model (and every refusal
with the model's), on every back-end.

Bounded so the suite stays fast: ``BackendSpec.stateful_max_examples`` examples (25 for files
and zero persistence, fewer for databases) of at most 50 steps. With ``CI=true`` the search is
derandomized (the same examples every run); otherwise a failure prints the
``@reproduce_failure`` blob and Hypothesis's database replays it on the next run.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from store.journal.api import MAX_ID, MIN_ID
from tests.journal.contract import ModelledJournal, expect_load, open_loaded
from tests.support.backends import FILE_JOURNAL_SIZE, BackendSpec, StoreFactory, unique_prefix
from tests.support.model import JournalModel
from tests.support.profile import examples

IDS = st.one_of(st.integers(min_value=0, max_value=7), st.sampled_from([MIN_ID, -1, MAX_ID]))
USER_TYPES = st.sampled_from([0, 1, 45, 255])
# Bodies of a few fixed sizes (cheap to generate) so records also roll across journal files.
DATA = st.builds(
    lambda size, byte: bytes([byte]) * size,
    st.sampled_from([0, 1, 100, 5000, FILE_JOURNAL_SIZE // 3]),
    st.integers(min_value=0, max_value=255),
)
XIDS = st.sampled_from([b"", b"xid-1", bytes(range(40))])
SYNC = st.booleans()


class JournalMachine(RuleBasedStateMachine):
    """One store of one back-end driven at random beside the model.

    Thread-safety: none; Hypothesis runs it on the test's thread.
    """

    def __init__(self, spec: BackendSpec, base: Path, counter: itertools.count[int]) -> None:
        super().__init__()
        directory = base / f"example-{next(counter)}"
        directory.mkdir()
        self.factory = StoreFactory(spec, directory, unique_prefix())
        self.spec = spec
        self.next_tx = 1
        self.mj: ModelledJournal

    @initialize()
    def open_empty(self) -> None:
        journal, result = open_loaded(self.factory)
        model = JournalModel()
        expect_load(self.spec, result, model.expected_load())
        self.mj = ModelledJournal(self.spec, journal, model)

    def teardown(self) -> None:
        self.factory.teardown()

    # -- helpers ------------------------------------------------------------------------------

    def _open_unprepared(self) -> list[int]:
        model = self.mj.model
        return [tx for tx in model.open_transactions() if not model.is_prepared(tx)]

    def _clear_for_non_tx(self, id: int) -> bool:
        # Non-tx update/delete of an id with only tx updates is outside the contract.
        model = self.mj.model
        return model.is_live(id) or not model.has_entries(id)

    # -- non-transactional --------------------------------------------------------------------

    @rule(id=IDS, urt=USER_TYPES, data=DATA, sync=SYNC)
    def add(self, id: int, urt: int, data: bytes, sync: bool) -> None:
        self.mj.add(id, urt, data, sync=sync)

    @rule(id=IDS, urt=USER_TYPES, data=DATA, sync=SYNC)
    def update(self, id: int, urt: int, data: bytes, sync: bool) -> None:
        if self._clear_for_non_tx(id):
            self.mj.update(id, urt, data, sync=sync)

    @rule(id=IDS, sync=SYNC)
    def delete(self, id: int, sync: bool) -> None:
        if self._clear_for_non_tx(id):
            self.mj.delete(id, sync=sync)

    # -- transactional ------------------------------------------------------------------------

    def _pick_tx(self, pick: st.DataObject) -> int:
        # An open unprepared tx, or a new one (its first record opens it).
        tx = pick.draw(st.sampled_from([*self._open_unprepared(), self.next_tx]), label="tx")
        if tx == self.next_tx:
            self.next_tx += 1
        return tx

    @rule(pick=st.data(), id=IDS, urt=USER_TYPES, data=DATA)
    def add_tx(self, pick: st.DataObject, id: int, urt: int, data: bytes) -> None:
        self.mj.add_tx(self._pick_tx(pick), id, urt, data)

    @rule(pick=st.data(), id=IDS, urt=USER_TYPES, data=DATA)
    def update_tx(self, pick: st.DataObject, id: int, urt: int, data: bytes) -> None:
        self.mj.update_tx(self._pick_tx(pick), id, urt, data)

    @rule(pick=st.data(), id=IDS)
    def delete_tx(self, pick: st.DataObject, id: int) -> None:
        self.mj.delete_tx(self._pick_tx(pick), id)

    @rule(pick=st.data(), xid=XIDS, sync=SYNC)
    def prepare(self, pick: st.DataObject, xid: bytes, sync: bool) -> None:
        # An open unprepared tx, or a brand-new one (an empty prepare, J-68).
        candidates = [*self._open_unprepared(), self.next_tx]
        tx = pick.draw(st.sampled_from(candidates), label="tx")
        if tx == self.next_tx:
            self.next_tx += 1
        self.mj.prepare(tx, xid, sync=sync)

    @precondition(lambda self: self.mj.model.open_transactions())
    @rule(pick=st.data(), commit=st.booleans(), sync=SYNC)
    def finish(self, pick: st.DataObject, commit: bool, sync: bool) -> None:
        tx = pick.draw(st.sampled_from(self.mj.model.open_transactions()), label="tx")
        if commit:
            self.mj.commit(tx, sync=sync)
        else:
            self.mj.rollback(tx, sync=sync)

    @rule(pick=st.data(), commit=st.booleans())
    def finish_unknown(self, pick: st.DataObject, commit: bool) -> None:
        # A finished, failed or never-used tx: must raise UnknownTransactionError (rule 4).
        model = self.mj.model
        finished = [t for t in range(1, self.next_tx) if not model.is_open(t)]
        tx = pick.draw(st.sampled_from([*finished, self.next_tx + 1000]), label="tx")
        if commit:
            self.mj.commit(tx)
        else:
            self.mj.rollback(tx)

    # -- whole-journal ------------------------------------------------------------------------

    @rule()
    def restart(self) -> None:
        self.mj.restart(self.factory)

    @rule()
    def compact(self) -> None:
        self.mj.journal.compact()

    @rule()
    def flush(self) -> None:
        self.mj.journal.flush()

    @invariant()
    def stats_are_consistent(self) -> None:
        if not hasattr(self, "mj"):
            return
        stats = self.mj.journal.stats()
        assert stats.records_live >= 0 and 0 <= stats.bytes_live <= stats.bytes_total
        if not self.spec.persistent:
            assert stats.records_live == 0


def test_random_operations_match_the_model(backend: BackendSpec, tmp_path: Path) -> None:
    """Rules 1-6 at random: any mix of adds, updates, deletes, transactions, prepares,
    commits, rollbacks, restarts, compactions and flushes loads exactly what the model says,
    and is refused exactly where the model refuses."""
    counter = itertools.count()

    class Machine(JournalMachine):
        def __init__(self) -> None:
            super().__init__(backend, tmp_path, counter)

    run_state_machine_as_test(
        Machine,
        settings=settings(
            max_examples=examples(backend.stateful_max_examples),
            stateful_step_count=50,
            deadline=None,
            derandomize=os.environ.get("CI", "").lower() == "true",
            print_blob=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
