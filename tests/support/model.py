"""The reference model of the journal contract: the oracle the contract and crash tests compare
every back-end with (docs/journal.md, the rules in the docstring of ``store/journal/api.py``).

It is written to be obviously right rather than fast, and it is deliberately independent of
``store.journal.replay`` (the code under test must not be its own oracle). A test drives the
model with the same calls it makes on a journal, in the same order, and asks it:

- what a call must raise (the model raises ``UnknownRecordError`` / ``UnknownTransactionError``
  exactly where the contract says a journal must, and :class:`ModelUsageError` where the test
  has stepped outside what the contract defines);
- what a load must return: :meth:`JournalModel.expected_load` (a peek) and
  :meth:`JournalModel.restart` (the load of a reopen, which also applies the reopen: open,
  unprepared transactions become failed and are forgotten);
- after a crash, whether a load is acceptable: :meth:`JournalModel.check_crash_load`.

Contract decisions the model encodes (and the tests therefore check):

1. A transaction is *open* from its first record (or from a prepare with no records) until its
   commit or rollback; a commit or rollback of a transaction that is not open raises
   ``UnknownTransactionError`` (also after it completed, also after it was reported failed).
2. A live id is one with a committed add that no delete has removed since. A non-transactional
   update or delete of an id that is not live raises ``UnknownRecordError``. An id whose only
   committed entries are transactional updates (never added) is not live (Artemis refuses it
   too); the replay rules still return its update entries.
3. A reopen reports as failed every transaction that was open, had records and was not
   prepared, in the order of their first record; each is reported by that one load only (the
   journal closes it), and it never contributes anything. Prepared transactions survive reopens
   and are listed with their adds/updates in written order and their deleted ids.
4. A transaction id may be used again once its transaction completed or was reported failed:
   the new transaction is a new one and counts in full once committed (docs/journal.md#failed: an
   acknowledged commit is never lost). Adding records to a prepared transaction and preparing
   twice are outside the contract (:class:`ModelUsageError`).

Crash bookkeeping: operations are numbered from 0 in call order (:attr:`JournalModel.op_count`
is the number recorded so far). A crash test says which prefix was acknowledged durable
(:meth:`JournalModel.acknowledge`) and checks the load after the crash with
:meth:`JournalModel.check_crash_load`: the load must equal the effect of some prefix of the
operations that contains every acknowledged one (docs/conventions.md#7). Tests with several writer
threads must record each call in the model in the order the journal took it (for instance
under one lock held around the journal call and the model call).

Thread-safety: none; guard a shared model with a lock.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from store.errors import UnknownRecordError, UnknownTransactionError
from store.journal.api import LoadResult, PreparedTransaction, RecordInfo

__all__ = [
    "CrashLoadMismatch",
    "ExpectedLoad",
    "JournalModel",
    "ModelUsageError",
    "Op",
    "OpKind",
    "assert_load_equal",
    "load_of",
]

OpKind = Literal[
    "add",
    "update",
    "delete",
    "add_tx",
    "update_tx",
    "delete_tx",
    "prepare",
    "commit",
    "rollback",
    "restart",
]


class ModelUsageError(ValueError):
    """Raised when a test asks the model about a call the journal contract does not define."""


class CrashLoadMismatch(AssertionError):
    """Raised when a load after a crash is not the effect of any acceptable prefix."""


@dataclass(frozen=True, slots=True)
class Op:
    """One recorded call, in call order; ``tx_id`` is None for non-transactional ones."""

    kind: OpKind
    id: int = 0
    user_record_type: int = 0
    data: bytes = b""
    tx_id: int | None = None
    xid: bytes = b""


@dataclass(frozen=True, slots=True)
class ExpectedLoad:
    """What a load must return: records in order, prepared transactions, failed tx ids."""

    records: list[RecordInfo]
    prepared: list[PreparedTransaction]
    failed: list[int]


def load_of(result: LoadResult) -> ExpectedLoad:
    """Returns the parts of ``result`` as an :class:`ExpectedLoad` (for uniform comparison)."""
    return ExpectedLoad(list(result.records), list(result.prepared), list(result.failed))


def _prepared_key(p: PreparedTransaction) -> tuple[int, bytes, list[RecordInfo], list[int]]:
    return (p.tx_id, p.xid, list(p.records), list(p.deleted_ids))


def assert_load_equal(
    actual: LoadResult, expected: ExpectedLoad, *, failed_order: bool = False
) -> None:
    """Asserts that ``actual`` holds exactly ``expected``; returns None.

    Records are compared in order; prepared transactions as a set keyed by tx id (the contract
    gives them no order); failed ids as a set unless ``failed_order``. Raises AssertionError
    with the first difference.
    """
    got = [tuple(r) for r in actual.records]
    want = [tuple(r) for r in expected.records]
    if got != want:
        raise AssertionError(_describe_record_diff(got, want))
    got_p = sorted((_prepared_key(p) for p in actual.prepared), key=lambda k: k[0])
    want_p = sorted((_prepared_key(p) for p in expected.prepared), key=lambda k: k[0])
    assert got_p == want_p, f"prepared differ:\n got  {got_p!r}\n want {want_p!r}"
    if failed_order:
        assert list(actual.failed) == expected.failed, (
            f"failed differ: got {actual.failed!r}, want {expected.failed!r}"
        )
    else:
        assert sorted(actual.failed) == sorted(expected.failed), (
            f"failed differ: got {sorted(actual.failed)!r}, want {sorted(expected.failed)!r}"
        )


def _short(entry: tuple[object, ...]) -> str:
    id_, urt, data, is_update = entry
    assert isinstance(data, bytes)
    shown = data if len(data) <= 24 else data[:24] + b"..."
    return f"{'update' if is_update else 'add'}(id={id_}, type={urt}, {len(data)}B {shown!r})"


def _describe_record_diff(got: list[tuple[object, ...]], want: list[tuple[object, ...]]) -> str:
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g != w:
            return (
                f"records differ at position {i} of {len(got)} (want {len(want)}):\n"
                f" got  {_short(g)}\n want {_short(w)}"
            )
    longer, which = (got, "extra") if len(got) > len(want) else (want, "missing")
    first = longer[min(len(got), len(want))]
    return f"{len(got)} records loaded, {len(want)} expected; first {which}: {_short(first)}"


# -- the state a prefix of operations leads to -------------------------------------------------


@dataclass(slots=True)
class _Tx:
    ops: list[Op] = field(default_factory=list)
    prepared: bool = False
    xid: bytes = b""
    first_seen: int = 0


@dataclass(slots=True)
class _State:
    """The effect of the operations applied so far (no validation: that is the model's job)."""

    # Committed entries keyed by a growing sequence number; dict order is journal order.
    entries: dict[int, RecordInfo] = field(default_factory=dict)
    seqs_of: dict[int, list[int]] = field(default_factory=dict)
    # Ids with a committed add not deleted since (contract rule "live").
    added: set[int] = field(default_factory=set)
    open_txs: dict[int, _Tx] = field(default_factory=dict)
    # Tx ids completed, or failed by a reopen: closed for good.
    closed_txs: set[int] = field(default_factory=set)
    # Failed by the most recent reopen (what that reopen's load reported).
    last_failed: list[int] = field(default_factory=list)
    next_seq: int = 0
    # Order-independent digest of ``entries`` so the crash check compares cheaply first.
    digest: int = 0

    def _append(self, info: RecordInfo) -> None:
        seq = self.next_seq
        self.next_seq += 1
        self.entries[seq] = info
        self.seqs_of.setdefault(info.id, []).append(seq)
        self.digest = (self.digest + hash(info)) & 0xFFFF_FFFF_FFFF_FFFF
        if not info.is_update:
            self.added.add(info.id)

    def _delete(self, id: int) -> None:
        for seq in self.seqs_of.pop(id, []):
            info = self.entries.pop(seq)
            self.digest = (self.digest - hash(info)) & 0xFFFF_FFFF_FFFF_FFFF
        self.added.discard(id)

    def apply(self, op: Op, position: int) -> None:
        kind = op.kind
        if kind == "add":
            self._append(RecordInfo(op.id, op.user_record_type, op.data, False))
        elif kind == "update":
            self._append(RecordInfo(op.id, op.user_record_type, op.data, True))
        elif kind == "delete":
            self._delete(op.id)
        elif kind in ("add_tx", "update_tx", "delete_tx", "prepare"):
            assert op.tx_id is not None
            tx = self.open_txs.get(op.tx_id)
            if tx is None:
                tx = self.open_txs[op.tx_id] = _Tx(first_seen=position)
            if kind == "prepare":
                tx.prepared, tx.xid = True, op.xid
            else:
                tx.ops.append(op)
        elif kind == "commit":
            assert op.tx_id is not None
            for tx_op in self.open_txs.pop(op.tx_id).ops:
                if tx_op.kind == "delete_tx":
                    self._delete(tx_op.id)
                else:
                    is_update = tx_op.kind == "update_tx"
                    self._append(
                        RecordInfo(tx_op.id, tx_op.user_record_type, tx_op.data, is_update)
                    )
            self.closed_txs.add(op.tx_id)
        elif kind == "rollback":
            assert op.tx_id is not None
            del self.open_txs[op.tx_id]
            self.closed_txs.add(op.tx_id)
        elif kind == "restart":
            self.last_failed = self.failing()
            for tx_id in self.last_failed:
                del self.open_txs[tx_id]
                self.closed_txs.add(tx_id)
        else:  # pragma: no cover - Op.kind is a closed set
            raise AssertionError(kind)

    def failing(self) -> list[int]:
        """Open, unprepared transactions with records, in order of first record."""
        txs = [(tx.first_seen, tx_id) for tx_id, tx in self.open_txs.items() if not tx.prepared]
        return [tx_id for _first, tx_id in sorted(txs)]

    def prepared(self) -> list[PreparedTransaction]:
        out = []
        for tx_id, tx in sorted(self.open_txs.items(), key=lambda kv: kv[1].first_seen):
            if not tx.prepared:
                continue
            records = [
                RecordInfo(o.id, o.user_record_type, o.data, o.kind == "update_tx")
                for o in tx.ops
                if o.kind != "delete_tx"
            ]
            deleted = [o.id for o in tx.ops if o.kind == "delete_tx"]
            out.append(PreparedTransaction(tx_id, tx.xid, records, deleted))
        return out

    def load(self) -> ExpectedLoad:
        """What a reopen at this point returns (without applying the reopen)."""
        return ExpectedLoad(list(self.entries.values()), self.prepared(), self.failing())


# -- the model ---------------------------------------------------------------------------------


class JournalModel:
    """Records journal calls, validates them against the contract, predicts loads.

    Every mutating method first checks the call and raises exactly what a journal must raise
    (``UnknownRecordError``, ``UnknownTransactionError``) or :class:`ModelUsageError` for a
    call outside the contract; a call that raises is not recorded.

    Thread-safety: none; guard a shared model with a lock.
    """

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self._state = _State()
        self._acked = 0

    # -- queries --------------------------------------------------------------------------

    @property
    def op_count(self) -> int:
        """Returns the number of operations recorded so far (restarts included)."""
        return len(self.ops)

    @property
    def acknowledged(self) -> int:
        """Returns how many leading operations were declared durable by :meth:`acknowledge`."""
        return self._acked

    def is_live(self, id: int) -> bool:
        """Returns True if ``id`` has a committed add that no delete removed since."""
        return id in self._state.added

    def has_entries(self, id: int) -> bool:
        """Returns True if a load now would return at least one entry for ``id``."""
        return id in self._state.seqs_of

    def is_open(self, tx_id: int) -> bool:
        """Returns True if ``tx_id`` is open (has records or a prepare, not completed)."""
        return tx_id in self._state.open_txs

    def is_prepared(self, tx_id: int) -> bool:
        """Returns True if ``tx_id`` is open and prepared."""
        tx = self._state.open_txs.get(tx_id)
        return tx is not None and tx.prepared

    def is_used(self, tx_id: int) -> bool:
        """Returns True if ``tx_id`` is open or was completed/failed (so it cannot be reused)."""
        return tx_id in self._state.open_txs or tx_id in self._state.closed_txs

    def live_ids(self) -> list[int]:
        """Returns the live ids, in the order of their first committed entry."""
        return [i for i in self._state.seqs_of if i in self._state.added]

    def open_transactions(self) -> list[int]:
        """Returns the open transaction ids (prepared or not), oldest first."""
        txs = self._state.open_txs.items()
        return [tx_id for tx_id, _tx in sorted(txs, key=lambda kv: kv[1].first_seen)]

    def expected_load(self) -> ExpectedLoad:
        """Returns what a load would return if the journal were reopened now. Raises nothing."""
        return self._state.load()

    # -- non-transactional ----------------------------------------------------------------

    def add(self, id: int, user_record_type: int, data: bytes) -> None:
        """Records ``append_add``; returns None. Raises nothing (duplicate adds are legal)."""
        self._record(Op("add", id, user_record_type, bytes(data)))

    def update(self, id: int, user_record_type: int, data: bytes) -> None:
        """Records ``append_update``; returns None. Raises UnknownRecordError if not live."""
        self._check_live(id, "update")
        self._record(Op("update", id, user_record_type, bytes(data)))

    def delete(self, id: int) -> None:
        """Records ``append_delete``; returns None. Raises UnknownRecordError if not live."""
        self._check_live(id, "delete")
        self._record(Op("delete", id))

    def _check_live(self, id: int, what: str) -> None:
        if id not in self._state.added:
            raise UnknownRecordError(f"{what} of id {id}, which is not live")

    # -- transactional --------------------------------------------------------------------

    def add_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        """Records ``append_add_tx``; returns None. Raises ModelUsageError (see rule 4)."""
        self._check_tx_record(tx_id)
        self._record(Op("add_tx", id, user_record_type, bytes(data), tx_id))

    def update_tx(self, tx_id: int, id: int, user_record_type: int, data: bytes) -> None:
        """Records ``append_update_tx``; returns None. Raises ModelUsageError (see rule 4)."""
        self._check_tx_record(tx_id)
        self._record(Op("update_tx", id, user_record_type, bytes(data), tx_id))

    def delete_tx(self, tx_id: int, id: int) -> None:
        """Records ``append_delete_tx``; returns None. Raises ModelUsageError (see rule 4)."""
        self._check_tx_record(tx_id)
        self._record(Op("delete_tx", id, tx_id=tx_id))

    def _check_tx_record(self, tx_id: int) -> None:
        tx = self._state.open_txs.get(tx_id)
        if tx is not None and tx.prepared:
            raise ModelUsageError(f"record added to transaction {tx_id} after its prepare")

    def prepare(self, tx_id: int, xid: bytes) -> None:
        """Records ``append_prepare``; returns None. Raises ModelUsageError (see rule 4)."""
        if self.is_prepared(tx_id):
            raise ModelUsageError(f"transaction {tx_id} prepared twice")
        self._check_tx_record(tx_id)
        self._record(Op("prepare", tx_id=tx_id, xid=bytes(xid)))

    def commit(self, tx_id: int) -> None:
        """Records ``append_commit``; returns None. Raises UnknownTransactionError if not open."""
        self._check_open(tx_id, "commit")
        self._record(Op("commit", tx_id=tx_id))

    def rollback(self, tx_id: int) -> None:
        """Records ``append_rollback``; returns None. Raises UnknownTransactionError if not open."""
        self._check_open(tx_id, "rollback")
        self._record(Op("rollback", tx_id=tx_id))

    def _check_open(self, tx_id: int, what: str) -> None:
        if tx_id not in self._state.open_txs:
            raise UnknownTransactionError(f"{what} of transaction {tx_id}, which is not open")

    # -- reopen and crashes -----------------------------------------------------------------

    def restart(self) -> ExpectedLoad:
        """Records a reopen and returns what its load must return. Raises nothing.

        The transactions the load reports as failed are closed: they contribute nothing and a
        later commit or rollback of them raises UnknownTransactionError.
        """
        expected = self._state.load()
        self._record(Op("restart"))
        return expected

    def acknowledge(self, upto: int | None = None) -> None:
        """Declares operations ``[0, upto)`` durable (default: all recorded); returns None.

        Raises ModelUsageError if ``upto`` is beyond the recorded operations or goes backwards.
        """
        upto = len(self.ops) if upto is None else upto
        if not self._acked <= upto <= len(self.ops):
            raise ModelUsageError(
                f"acknowledge({upto}) with {len(self.ops)} ops, acked {self._acked}"
            )
        self._acked = upto

    def state_after(self, n: int) -> ExpectedLoad:
        """Returns what a reopen after the first ``n`` operations must load. Raises nothing."""
        state = _State()
        for pos, op in enumerate(self.ops[:n]):
            state.apply(op, pos)
        return state.load()

    def check_crash_load(self, result: LoadResult, acked_upto: int | None = None) -> int:
        """Checks the crash invariant (docs/conventions.md#7); returns the prefix length it matched.

        The load must equal the effect of the first ``k`` operations for some ``k`` between
        ``acked_upto`` (default: :attr:`acknowledged`) and :attr:`op_count`: everything
        acknowledged is there, later operations may be missing only from some point on (never
        a hole), nothing deleted or rolled back comes back, and transactions are all or
        nothing. The failed list must contain every transaction the prefix leaves open with
        records and unprepared; it may also repeat transactions an earlier reopen failed
        (their closing rollback may not have been durable). Returns the largest matching ``k``;
        to carry on with the reopened journal, call ``truncate(k)`` then :meth:`restart`.
        Raises CrashLoadMismatch otherwise.
        """
        start = self._acked if acked_upto is None else acked_upto
        if not 0 <= start <= len(self.ops):
            raise ModelUsageError(f"acked_upto {start} outside 0..{len(self.ops)}")
        got = [tuple(r) for r in result.records]
        got_digest = sum(hash(r) for r in result.records) & 0xFFFF_FFFF_FFFF_FFFF
        state = _State()
        for pos, op in enumerate(self.ops[:start]):
            state.apply(op, pos)
        matched: int | None = None
        for k in itertools.count(start):
            if self._crash_state_matches(state, result, got, got_digest):
                matched = k
            if k == len(self.ops):
                break
            state.apply(self.ops[k], k)
        if matched is None:
            raise CrashLoadMismatch(self._crash_explanation(result, start))
        return matched

    @staticmethod
    def _crash_state_matches(
        state: _State, result: LoadResult, got: list[tuple[object, ...]], got_digest: int
    ) -> bool:
        if len(state.entries) != len(got) or state.digest != got_digest:
            return False
        if [tuple(r) for r in state.entries.values()] != got:
            return False
        want_p = sorted((_prepared_key(p) for p in state.prepared()), key=lambda k: k[0])
        got_p = sorted((_prepared_key(p) for p in result.prepared), key=lambda k: k[0])
        if want_p != got_p:
            return False
        must_fail = set(state.failing())
        may_fail = must_fail | set(state.last_failed)
        return must_fail <= set(result.failed) <= may_fail

    def _crash_explanation(self, result: LoadResult, start: int) -> str:
        acked = self.state_after(start)
        full = self.state_after(len(self.ops))
        return (
            f"the load after the crash matches no prefix of ops[{start}..{len(self.ops)}] "
            f"({len(self.ops)} ops recorded, {start} acknowledged): loaded "
            f"{len(result.records)} records, {len(result.prepared)} prepared, failed "
            f"{sorted(result.failed)}; the acknowledged prefix gives {len(acked.records)} "
            f"records and all ops give {len(full.records)}"
        )

    def truncate(self, n: int) -> None:
        """Forgets operations after the first ``n`` (to continue after a crash); returns None.

        Raises ModelUsageError if that would drop acknowledged operations.
        """
        if not self._acked <= n <= len(self.ops):
            raise ModelUsageError(
                f"truncate({n}): acknowledged {self._acked}, have {len(self.ops)}"
            )
        kept = self.ops[:n]
        self.ops = []
        self._state = _State()
        self._replay(kept)

    # -- internals ----------------------------------------------------------------------------

    def _record(self, op: Op) -> None:
        self._state.apply(op, len(self.ops))
        self.ops.append(op)

    def _replay(self, ops: Iterable[Op]) -> None:
        for op in ops:
            self._record(op)

    def apply(self, op: Op) -> None:
        """Makes the call ``op`` describes on this model; returns None.

        Raises what that call raises (UnknownRecordError, UnknownTransactionError,
        ModelUsageError); a refused call is not recorded.
        """
        if op.kind in ("add", "update"):
            getattr(self, op.kind)(op.id, op.user_record_type, op.data)
        elif op.kind == "delete":
            self.delete(op.id)
        elif op.kind == "restart":
            self.restart()
        else:
            if op.tx_id is None:
                raise ModelUsageError(f"{op.kind} without a tx_id")
            if op.kind in ("add_tx", "update_tx"):
                getattr(self, op.kind)(op.tx_id, op.id, op.user_record_type, op.data)
            elif op.kind == "delete_tx":
                self.delete_tx(op.tx_id, op.id)
            elif op.kind == "prepare":
                self.prepare(op.tx_id, op.xid)
            else:
                getattr(self, op.kind)(op.tx_id)

    @classmethod
    def from_ops(cls, ops: Iterable[Op]) -> JournalModel:
        """Returns a model that made the calls ``ops`` describe, in order.

        Raises what the first call outside the contract raises.
        """
        model = cls()
        for op in ops:
            model.apply(op)
        return model
