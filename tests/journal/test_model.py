"""The reference model (tests/support/model.py) on hand-built cases: if the oracle is wrong,
every contract test is wrong with it."""

from __future__ import annotations

import pytest

from store.errors import UnknownRecordError, UnknownTransactionError
from store.journal.api import LoadResult, PreparedTransaction, RecordInfo
from tests.support.model import (
    CrashLoadMismatch,
    ExpectedLoad,
    JournalModel,
    ModelUsageError,
    assert_load_equal,
)


def add(id: int, data: bytes = b"", urt: int = 1) -> RecordInfo:
    return RecordInfo(id, urt, data, False)


def upd(id: int, data: bytes = b"", urt: int = 1) -> RecordInfo:
    return RecordInfo(id, urt, data, True)


def result(
    records: list[RecordInfo],
    prepared: list[PreparedTransaction] | None = None,
    failed: list[int] | None = None,
) -> LoadResult:
    return LoadResult(records, prepared or [], failed or [])


# -- committed records -------------------------------------------------------------------------


def test_adds_and_updates_are_separate_entries_in_call_order() -> None:
    """J-21/J-22: each add and each update is its own entry, in the order written."""
    m = JournalModel()
    m.add(1, 1, b"a")
    m.add(2, 1, b"b")
    m.update(1, 1, b"a2")
    m.update(1, 2, b"a3")
    assert m.expected_load().records == [
        add(1, b"a"),
        add(2, b"b"),
        upd(1, b"a2"),
        upd(1, b"a3", 2),
    ]


def test_delete_removes_every_entry_of_the_id_including_duplicate_adds() -> None:
    """J-23/J-24: a delete removes both adds of a twice-added id and all its updates."""
    m = JournalModel()
    m.add(5, 1, b"x")
    m.add(6, 1, b"y")
    m.add(5, 1, b"x again")
    m.update(5, 1, b"u")
    m.delete(5)
    assert m.expected_load().records == [add(6, b"y")]
    assert not m.is_live(5)
    assert m.is_live(6)


def test_transaction_entries_appear_at_the_commit_position() -> None:
    """J-44: load order is commit order, not the order the tx records were written."""
    m = JournalModel()
    m.add_tx(9, 1, 1, b"tx")
    m.add(2, 1, b"plain")
    m.commit(9)
    m.add(3, 1, b"after")
    assert m.expected_load().records == [add(2, b"plain"), add(1, b"tx"), add(3, b"after")]


def test_delete_inside_a_tx_removes_the_tx_own_earlier_entries() -> None:
    """J-39: add 1,2,3; update 1,2; delete 1; commit -> [add 2, add 3, update 2]."""
    m = JournalModel()
    for i in (1, 2, 3):
        m.add_tx(1, i, 1, bytes([i]))
    m.update_tx(1, 1, 1, b"u1")
    m.update_tx(1, 2, 1, b"u2")
    m.delete_tx(1, 1)
    m.commit(1)
    assert m.expected_load().records == [add(2, b"\x02"), add(3, b"\x03"), upd(2, b"u2")]


def test_tx_delete_of_an_unknown_id_and_tx_update_of_a_never_added_id_are_legal() -> None:
    """DB-4, J-61: a tx may delete a missing id and update a never-added one."""
    m = JournalModel()
    m.delete_tx(1, 404)
    m.update_tx(1, 77, 3, b"up")
    m.commit(1)
    assert m.expected_load().records == [upd(77, b"up", 3)]


def test_rollback_leaves_nothing() -> None:
    """J-45: rolled-back adds and deletes have no effect."""
    m = JournalModel()
    for i in (1, 2, 3):
        m.add(i, 1, b"")
    for i in (1, 2, 3):
        m.delete_tx(1, i)
    m.add_tx(2, 4, 1, b"")
    m.rollback(1)
    m.rollback(2)
    assert m.restart().records == [add(1), add(2), add(3)]


# -- what must raise ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda m: m.update(1, 1, b""), id="update-never-added"),
        pytest.param(lambda m: m.delete(1), id="delete-never-added"),
        pytest.param(lambda m: m.delete(2), id="delete-deleted"),
        pytest.param(lambda m: m.update(3, 1, b""), id="update-only-in-open-tx"),
        pytest.param(lambda m: m.delete(3), id="delete-only-in-open-tx"),
        pytest.param(lambda m: m.delete(4), id="delete-deleted-by-committed-tx"),
    ],
)
def test_non_tx_update_or_delete_of_a_non_live_id_raises_unknown_record(call) -> None:
    """J-46: only live ids (added, not deleted, outside open txs) can be updated or deleted."""
    m = JournalModel()
    m.add(2, 1, b"")
    m.delete(2)
    m.add_tx(7, 3, 1, b"")
    m.add(4, 1, b"")
    m.delete_tx(8, 4)
    m.commit(8)
    before = m.op_count
    with pytest.raises(UnknownRecordError):
        call(m)
    assert m.op_count == before, "a refused call must not be recorded"


def test_tx_added_id_becomes_live_at_commit() -> None:
    """Rule 3: an id added by a committed transaction is live."""
    m = JournalModel()
    m.add_tx(1, 10, 1, b"")
    assert not m.is_live(10)
    m.commit(1)
    assert m.is_live(10)
    m.update(10, 1, b"u")
    m.delete(10)
    assert m.expected_load().records == []


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda m: m.commit(99), id="commit-never-opened"),
        pytest.param(lambda m: m.rollback(99), id="rollback-never-opened"),
        pytest.param(lambda m: m.commit(1), id="commit-after-commit"),
        pytest.param(lambda m: m.rollback(1), id="rollback-after-commit"),
        pytest.param(lambda m: m.commit(2), id="commit-after-rollback"),
    ],
)
def test_commit_or_rollback_of_a_tx_that_is_not_open_raises(call) -> None:
    """Rule 4: commit/rollback of a transaction that is not open raise UnknownTransactionError."""
    m = JournalModel()
    m.add_tx(1, 1, 1, b"")
    m.commit(1)
    m.add_tx(2, 2, 1, b"")
    m.rollback(2)
    with pytest.raises(UnknownTransactionError):
        call(m)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda m: m.add_tx(3, 5, 1, b""), id="record-after-prepare"),
        pytest.param(lambda m: m.prepare(3, b"x"), id="prepare-twice"),
    ],
)
def test_calls_outside_the_contract_are_model_usage_errors(call) -> None:
    """The model refuses to guess: undefined calls raise ModelUsageError, not a verdict."""
    m = JournalModel()
    m.add_tx(1, 1, 1, b"")
    m.commit(1)
    m.add_tx(3, 2, 1, b"")
    m.prepare(3, b"x")
    m.update_tx(4, 6, 1, b"")
    m.commit(4)
    with pytest.raises(ModelUsageError):
        call(m)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda m: m.update(6, 1, b""), id="update"),
        pytest.param(lambda m: m.delete(6), id="delete"),
    ],
)
def test_an_id_only_updated_in_a_committed_tx_is_not_live(call) -> None:
    """docs/journal.md (issue 6.6): an id a committed transaction only updated, never added, is not
    live; a non-transactional update or delete of it raises UnknownRecordError."""
    m = JournalModel()
    m.update_tx(4, 6, 1, b"")
    m.commit(4)
    with pytest.raises(UnknownRecordError):
        call(m)
    assert m.expected_load().records == [RecordInfo(6, 1, b"", True)]


def test_a_completed_or_failed_tx_id_may_be_used_again_as_a_new_transaction() -> None:
    """docs/journal.md#failed (issue 6.2): a reused id is a new transaction that counts in full."""
    m = JournalModel()
    m.add_tx(1, 1, 1, b"a")
    m.commit(1)
    m.add_tx(1, 2, 1, b"b")
    m.commit(1)
    m.add_tx(2, 3, 1, b"never committed")
    assert m.restart().failed == [2]
    m.add_tx(2, 4, 1, b"second life")
    m.commit(2)
    assert m.live_ids() == [1, 2, 4]


# -- restarts, failed and prepared transactions ------------------------------------------------


def test_restart_reports_unfinished_txs_failed_once_in_order_of_first_record() -> None:
    """J-50/J-51: open txs fail at a reopen (in order), contribute nothing, cannot commit later."""
    m = JournalModel()
    m.add_tx(78, 2, 1, b"")
    m.add_tx(77, 1, 1, b"")
    m.add_tx(78, 3, 1, b"")
    first = m.restart()
    assert first == ExpectedLoad([], [], [78, 77])
    with pytest.raises(UnknownTransactionError):
        m.commit(77)
    assert m.restart() == ExpectedLoad([], [], []), "failed is reported by one load only"


def test_prepared_tx_survives_restarts_and_lists_its_records_and_deletes() -> None:
    """J-64: prepared entry lists adds and updates in order and the ids it deletes."""
    m = JournalModel()
    m.add(1, 1, b"one")
    m.add_tx(5, 2, 1, b"two")
    m.update_tx(5, 1, 1, b"one'")
    m.delete_tx(5, 1)
    m.prepare(5, b"xid")
    want = PreparedTransaction(5, b"xid", [add(2, b"two"), upd(1, b"one'")], [1])
    assert m.restart() == ExpectedLoad([add(1, b"one")], [want], [])
    assert m.restart() == ExpectedLoad([add(1, b"one")], [want], [])
    m.commit(5)
    assert m.restart() == ExpectedLoad([add(2, b"two")], [], [])


def test_empty_prepare_is_a_prepared_tx_without_records() -> None:
    """J-68: prepare with no records -> one prepared tx after restart; commit then works."""
    m = JournalModel()
    m.prepare(1, b"")
    assert m.restart().prepared == [PreparedTransaction(1, b"", [], [])]
    m.commit(1)
    assert m.restart() == ExpectedLoad([], [], [])


# -- crash checks ------------------------------------------------------------------------------


def _crash_model() -> JournalModel:
    m = JournalModel()
    m.add(1, 1, b"a")  # 0
    m.add(2, 1, b"b")  # 1
    m.delete(1)  # 2
    m.add_tx(9, 3, 1, b"c")  # 3
    m.add_tx(9, 4, 1, b"d")  # 4
    m.commit(9)  # 5
    m.add(5, 1, b"e")  # 6
    return m


@pytest.mark.parametrize(
    ("loaded", "failed", "matched"),
    [
        pytest.param([add(1, b"a"), add(2, b"b")], [], 2, id="acknowledged-prefix-only"),
        pytest.param([add(2, b"b")], [], 3, id="one-unacknowledged-op-survived"),
        pytest.param([add(2, b"b")], [9], 5, id="tx-records-without-commit-failed"),
        pytest.param([add(2, b"b"), add(3, b"c"), add(4, b"d")], [], 6, id="tx-committed"),
        pytest.param(
            [add(2, b"b"), add(3, b"c"), add(4, b"d"), add(5, b"e")], [], 7, id="everything"
        ),
    ],
)
def test_crash_load_of_a_prefix_is_accepted(loaded, failed, matched) -> None:
    """docs/conventions.md#7: acknowledged ops plus any later prefix is a correct crash load."""
    m = _crash_model()
    m.acknowledge(2)
    assert m.check_crash_load(result(loaded, failed=failed)) == matched


@pytest.mark.parametrize(
    ("loaded", "failed"),
    [
        pytest.param([add(1, b"a")], [], id="acknowledged-add-lost"),
        pytest.param([add(1, b"a"), add(2, b"b"), add(5, b"e")], [], id="hole-before-later-op"),
        pytest.param([add(2, b"b"), add(3, b"c")], [], id="half-a-transaction"),
        pytest.param([add(2, b"b"), add(3, b"c"), add(4, b"d")], [9], id="committed-but-failed"),
        pytest.param(
            [add(1, b"a"), add(2, b"b"), add(3, b"c"), add(4, b"d")],
            [],
            id="deleted-record-came-back",
        ),
        pytest.param([add(1, b"a"), add(2, b"B")], [], id="wrong-bytes"),
    ],
)
def test_crash_load_that_is_not_a_prefix_is_rejected(loaded, failed) -> None:
    """docs/conventions.md#7: a lost ack, a hole, a torn tx or a resurrected delete fail it."""
    m = _crash_model()
    m.acknowledge(2)
    with pytest.raises(CrashLoadMismatch):
        m.check_crash_load(result(loaded, failed=failed))


def test_crash_load_must_report_a_tx_cut_before_its_commit_as_failed() -> None:
    """J-51 under a crash: tx records present without commit -> failed must list the tx."""
    m = JournalModel()
    m.add(1, 1, b"")
    m.add_tx(9, 2, 1, b"")
    m.add_tx(9, 3, 1, b"")
    m.acknowledge()
    with pytest.raises(CrashLoadMismatch):
        m.check_crash_load(result([add(1)], failed=[]))
    assert m.check_crash_load(result([add(1)], failed=[9])) == 3


def test_crash_load_may_repeat_a_tx_failed_by_the_previous_reopen() -> None:
    """The closing rollback of a failed tx may be lost in a crash: reporting it again is fine."""
    m = JournalModel()
    m.add_tx(4, 1, 1, b"")
    m.restart()
    m.add(2, 1, b"")
    m.acknowledge()
    assert m.check_crash_load(result([add(2)], failed=[4])) == 3
    with pytest.raises(CrashLoadMismatch):
        m.check_crash_load(result([add(2)], failed=[5]))


def test_crash_prepared_set_must_match_the_prefix() -> None:
    """A prepare acknowledged before the crash must be loaded as prepared."""
    m = JournalModel()
    m.add_tx(3, 1, 1, b"r")
    m.prepare(3, b"x")
    m.acknowledge()
    with pytest.raises(CrashLoadMismatch):
        m.check_crash_load(result([], failed=[3]))
    want = PreparedTransaction(3, b"x", [add(1, b"r")], [])
    assert m.check_crash_load(result([], prepared=[want])) == 2


def test_truncate_then_restart_continues_from_the_matched_prefix() -> None:
    """After a crash the model carries on from what the journal actually kept."""
    m = _crash_model()
    m.acknowledge(2)
    k = m.check_crash_load(result([add(2, b"b")], failed=[9]))
    m.truncate(k)
    assert m.restart() == ExpectedLoad([add(2, b"b")], [], [9])
    with pytest.raises(UnknownTransactionError):
        m.commit(9)
    assert m.is_live(2) and not m.is_live(1)


def test_acknowledge_and_truncate_refuse_to_go_backwards() -> None:
    """Acknowledged operations cannot be un-acknowledged or dropped."""
    m = _crash_model()
    m.acknowledge(4)
    with pytest.raises(ModelUsageError):
        m.acknowledge(3)
    with pytest.raises(ModelUsageError):
        m.acknowledge(99)
    with pytest.raises(ModelUsageError):
        m.truncate(3)


# -- the comparison helper ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "loaded",
    [
        pytest.param([add(2), add(1)], id="order"),
        pytest.param([add(1), upd(2)], id="update-flag"),
        pytest.param([add(1), RecordInfo(2, 9, b"", False)], id="user-type"),
        pytest.param([add(1)], id="missing"),
        pytest.param([add(1), add(2), add(3)], id="extra"),
    ],
)
def test_assert_load_equal_detects_record_differences(loaded) -> None:
    """The comparison checks order, ids, flags, types and data."""
    with pytest.raises(AssertionError):
        assert_load_equal(result(loaded), ExpectedLoad([add(1), add(2)], [], []))


def test_assert_load_equal_compares_prepared_as_a_set_and_failed_order_on_request() -> None:
    """Prepared have no contractual order; failed order is checked only when asked."""
    p1 = PreparedTransaction(1, b"a", [], [])
    p2 = PreparedTransaction(2, b"b", [add(3)], [4])
    assert_load_equal(result([], [p2, p1], [8, 7]), ExpectedLoad([], [p1, p2], [7, 8]))
    with pytest.raises(AssertionError):
        assert_load_equal(result([], [p1], []), ExpectedLoad([], [p1, p2], []))
    with pytest.raises(AssertionError):
        assert_load_equal(result([], [], [8, 7]), ExpectedLoad([], [], [7, 8]), failed_order=True)
