"""The shared replay rules (store/journal/replay.py): a table of operation streams and the load
each must produce, plus a differential property against the reference model."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.errors import UnknownRecordError, UnknownTransactionError
from store.journal.api import LoadResult, PreparedTransaction, RecordInfo
from store.journal.replay import Replayer
from tests.support.model import (
    JournalModel,
    ModelUsageError,
    Op,
    OpKind,
    assert_load_equal,
)
from tests.support.profile import examples


def A(id: int, data: bytes = b"", urt: int = 1) -> RecordInfo:
    return RecordInfo(id, urt, data, False)


def U(id: int, data: bytes = b"", urt: int = 1) -> RecordInfo:
    return RecordInfo(id, urt, data, True)


def P(tx: int, xid: bytes, records: list[RecordInfo], deleted: list[int]) -> PreparedTransaction:
    return PreparedTransaction(tx, xid, records, deleted)


def run(ops: list[tuple[Any, ...]]) -> Replayer:
    replayer = Replayer()
    for name, *args in ops:
        getattr(replayer, name)(*args)
    return replayer


CASES = [
    pytest.param(
        [("add", 1, 1, b"a"), ("add", 2, 2, b"b")],
        LoadResult([A(1, b"a"), A(2, b"b", 2)]),
        id="adds-in-order",
    ),
    pytest.param(
        [("add", 1, 1, b"a"), ("update", 1, 3, b"a2"), ("update", 1, 3, b"a3")],
        LoadResult([A(1, b"a"), U(1, b"a2", 3), U(1, b"a3", 3)]),
        id="each-update-its-own-entry",
    ),
    pytest.param(
        [
            ("add", 1, 1, b"x"),
            ("add", 2, 1, b""),
            ("add", 1, 1, b"y"),
            ("update", 1, 1, b"z"),
            ("delete", 1),
        ],
        LoadResult([A(2)]),
        id="delete-removes-duplicate-adds-and-updates",
    ),
    pytest.param(
        [("add", 1, 1, b""), ("delete", 1), ("add", 1, 1, b"again")],
        LoadResult([A(1, b"again")]),
        id="add-after-delete-is-a-new-entry",
    ),
    pytest.param(
        [("delete", 42)],
        LoadResult([]),
        id="delete-of-unknown-id-ignored",
    ),
    pytest.param(
        [("add_tx", 9, 1, 1, b"t"), ("add", 2, 1, b"p"), ("commit", 9), ("add", 3, 1, b"q")],
        LoadResult([A(2, b"p"), A(1, b"t"), A(3, b"q")]),
        id="tx-entries-at-commit-position",
    ),
    pytest.param(
        [("add_tx", 1, i, 1, b"") for i in (1, 2, 3)]
        + [("update_tx", 1, 1, 1, b"u"), ("update_tx", 1, 2, 1, b"u"), ("delete_tx", 1, 1)]
        + [("commit", 1)],
        LoadResult([A(2), A(3), U(2, b"u")]),
        id="J-39-tx-delete-removes-own-earlier-entries",
    ),
    pytest.param(
        [("add", 5, 1, b""), ("update", 5, 1, b"u"), ("delete_tx", 7, 5), ("commit", 7)],
        LoadResult([]),
        id="tx-delete-removes-committed-entries",
    ),
    pytest.param(
        [("add", 5, 1, b""), ("delete_tx", 7, 5), ("add", 6, 1, b"")],
        LoadResult([A(5), A(6)], [], [7]),
        id="uncommitted-tx-delete-has-no-effect",
    ),
    pytest.param(
        [("update_tx", 1, 77, 4, b"up"), ("commit", 1)],
        LoadResult([U(77, b"up", 4)]),
        id="tx-update-of-never-added-id",
    ),
    pytest.param(
        [("add_tx", 1, 1, 1, b""), ("delete_tx", 1, 9), ("rollback", 1)],
        LoadResult([]),
        id="rollback-drops-everything",
    ),
    pytest.param(
        [("commit", 3), ("rollback", 4), ("add", 1, 1, b"")],
        LoadResult([A(1)]),
        id="commit-or-rollback-with-nothing-collected-ignored",
    ),
    pytest.param(
        [
            ("add", 1, 1, b"o"),
            ("add_tx", 5, 2, 1, b"n"),
            ("update_tx", 5, 1, 1, b"o2"),
            ("delete_tx", 5, 1),
            ("prepare", 5, b"xid"),
        ],
        LoadResult([A(1, b"o")], [P(5, b"xid", [A(2, b"n"), U(1, b"o2")], [1])]),
        id="J-64-prepared-lists-records-and-deletes",
    ),
    pytest.param(
        [("add", 1, 1, b"o"), ("delete_tx", 5, 1), ("prepare", 5, b"x"), ("commit", 5)],
        LoadResult([]),
        id="J-65-prepared-then-committed",
    ),
    pytest.param(
        [("add", 1, 1, b"o"), ("delete_tx", 5, 1), ("prepare", 5, b"x"), ("rollback", 5)],
        LoadResult([A(1, b"o")]),
        id="J-65-prepared-then-rolled-back",
    ),
    pytest.param(
        [("prepare", 3, b"")],
        LoadResult([], [P(3, b"", [], [])]),
        id="J-68-empty-prepare",
    ),
    pytest.param(
        [
            ("add_tx", 1, 1, 1, b""),
            ("add_tx", 2, 2, 1, b""),
            ("prepare", 2, b"a"),
            ("add_tx", 3, 3, 1, b""),
            ("prepare", 3, b"a"),
        ],
        LoadResult([], [P(2, b"a", [A(2)], []), P(3, b"a", [A(3)], [])], [1]),
        id="J-67-same-xid-twice-and-a-failed-tx",
    ),
    pytest.param(
        [("add_tx", 78, 1, 1, b""), ("add_tx", 77, 2, 1, b""), ("add_tx", 78, 3, 1, b"")],
        LoadResult([], [], [78, 77]),
        id="J-51-failed-in-order-of-first-appearance",
    ),
    pytest.param(
        [("add_tx", 1, 1, 1, b""), ("discard", 1), ("add", 2, 1, b"")],
        LoadResult([A(2)], [], [1]),
        id="discarded-tx-failed",
    ),
    pytest.param(
        [("discard", 4), ("add_tx", 3, 1, 1, b"")],
        LoadResult([], [], [3, 4]),
        id="discarded-unseen-tx-reported-after-open-ones",
    ),
    pytest.param(
        [("add_tx", 1, 1, 1, b""), ("discard", 1), ("commit", 1)],
        LoadResult([], [], [1]),
        id="commit-after-discard-contributes-nothing-and-stays-failed",
    ),
    # A failed id gets a ROLLBACK written at open, which would erase an in-doubt transaction:
    # an id discarded and then used again and prepared is prepared only, never also failed.
    pytest.param(
        [
            ("add_tx", 7, 1, 1, b"torn"),
            ("discard", 7),
            ("add_tx", 7, 2, 1, b"again"),
            ("prepare", 7, b"xid"),
        ],
        LoadResult([], [P(7, b"xid", [A(2, b"again")], [])], []),
        id="discarded-tx-reused-and-prepared-is-prepared-only",
    ),
    pytest.param(
        [("add_tx", 7, 1, 1, b"torn"), ("discard", 7), ("add_tx", 7, 2, 1, b"again")],
        LoadResult([], [], [7]),
        id="discarded-tx-reused-and-left-open-is-failed-once",
    ),
    pytest.param(
        [("add", 5, 1, b"old"), ("delete_tx", 7, 5), ("add_tx", 7, 5, 2, b"new"), ("commit", 7)],
        LoadResult([A(5, b"new", 2)]),
        id="tx-deletes-an-id-then-adds-it-again",
    ),
    pytest.param(
        [
            ("add", 1, 1, b"keep"),
            ("add_tx", 5, 2, 1, b"t"),
            ("update_tx", 5, 1, 1, b"t"),
            ("delete_tx", 5, 1),
            ("rollback", 5),
            ("add_tx", 5, 3, 1, b"later"),
            ("commit", 5),
        ],
        LoadResult([A(1, b"keep"), A(3, b"later")]),
        id="rollback-discards-what-it-collected",
    ),
]


@pytest.mark.parametrize(("ops", "expected"), CASES)
def test_replay_table(ops: list[tuple[Any, ...]], expected: LoadResult) -> None:
    """Each operation stream replays to exactly the load in the table (docs/journal.md rules)."""
    got = run(ops).result()
    assert got.records == expected.records
    assert got.prepared == expected.prepared
    assert got.failed == expected.failed


@pytest.mark.parametrize(
    ("ops", "id", "live"),
    [
        pytest.param([("add", 1, 1, b"")], 1, True, id="added"),
        pytest.param([("add", 1, 1, b""), ("delete", 1)], 1, False, id="deleted"),
        pytest.param([("add_tx", 1, 1, 1, b"")], 1, False, id="only-in-open-tx"),
        pytest.param([("add_tx", 1, 1, 1, b""), ("commit", 1)], 1, True, id="tx-committed"),
        pytest.param(
            [("add", 1, 1, b""), ("delete_tx", 2, 1), ("commit", 2)], 1, False, id="tx-del"
        ),
    ],
)
def test_is_live(ops: list[tuple[Any, ...]], id: int, live: bool) -> None:
    """is_live follows committed adds and deletes, never open transactions."""
    assert run(ops).is_live(id) is live


def test_open_transactions_and_prepared_xid_describe_what_is_pending() -> None:
    """The compactor's view: open txs with their ops, and the XID of prepared ones only."""
    r = run([("add_tx", 1, 5, 2, b"d"), ("delete_tx", 1, 6), ("prepare", 2, b"x")])
    assert r.open_transactions() == {1: [(0, 5, 2, b"d"), (2, 6, 0, b"")], 2: []}
    assert r.prepared_xid(2) == b"x"
    assert r.prepared_xid(1) is None
    assert r.prepared_xid(3) is None


# -- differential: the replayer agrees with the independent model ------------------------------

_ids = st.integers(min_value=0, max_value=6)
_txs = st.integers(min_value=100, max_value=104)
_data = st.binary(max_size=4)


_KINDS: list[OpKind] = [
    "add",
    "add",
    "update",
    "update",
    "delete",
    "delete",
    "add_tx",
    "add_tx",
    "update_tx",
    "update_tx",
    "delete_tx",
    "prepare",
    "commit",
    "rollback",
]


@st.composite
def _valid_ops(draw: st.DrawFn) -> list[Op]:
    """A stream of calls the contract allows: each drawn call the model refuses is dropped."""
    model = JournalModel()
    for _ in range(draw(st.integers(min_value=0, max_value=40))):
        kind = draw(st.sampled_from(_KINDS))
        tx_id = draw(_txs) if kind not in ("add", "update", "delete") else None
        op = Op(kind, draw(_ids), draw(st.integers(0, 255)), draw(_data), tx_id, draw(_data))
        try:
            model.apply(op)
        except (UnknownRecordError, UnknownTransactionError, ModelUsageError):
            continue
    return model.ops


@settings(max_examples=examples(300), deadline=None)
@given(_valid_ops())
def test_replayer_agrees_with_the_reference_model(ops: list[Op]) -> None:
    """Any valid call stream replays to what the model predicts (records, prepared, failed)."""
    replayer = Replayer()
    for op in ops:
        if op.kind in ("add", "update"):
            getattr(replayer, op.kind)(op.id, op.user_record_type, op.data)
        elif op.kind == "delete":
            replayer.delete(op.id)
        else:
            tx_id = op.tx_id
            assert tx_id is not None
            if op.kind in ("add_tx", "update_tx"):
                getattr(replayer, op.kind)(tx_id, op.id, op.user_record_type, op.data)
            elif op.kind == "delete_tx":
                replayer.delete_tx(tx_id, op.id)
            elif op.kind == "prepare":
                replayer.prepare(tx_id, op.xid)
            else:
                getattr(replayer, op.kind)(tx_id)
    assert_load_equal(
        replayer.result(), JournalModel.from_ops(ops).expected_load(), failed_order=True
    )
