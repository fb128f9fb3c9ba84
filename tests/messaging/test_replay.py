"""The messaging load's compiled loops (``store/_speedups_load.c``) against the Python code
they stand in for: the replay of the message journal (``replay_message_run`` for
``store.messaging.recovery.replay_messages``) on record sequences of every kind it meets,
and a whole ``load()`` of a real file store (also ``keep_run`` for the keeping of messages in
``store.messaging.loader`` and ``add_entries_run`` for ``MessageQueue.add_entries``)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store import StoreConfig, open_store
from store.journal.api import LoadResult, RecordInfo
from store.messaging import StorageManager, loader, queues, recovery
from store.messaging import message_records as mr
from store.messaging import records as r
from store.messaging.queues import QueueEntry
from store.messaging.values import Message
from tests.support.backends import file_config_mapping
from tests.support.profile import examples

IDS = st.sampled_from([1, 2, 3, 2**31 + 5, 2**62 + 7])
QUEUES = st.sampled_from([1, 2, 2**40])
ADDRESSES = ["q", "orders.eu", "é"]


@st.composite
def _message_body(draw: st.DrawFn) -> tuple[int, bytes]:
    m = Message(
        draw(st.sampled_from(ADDRESSES)),
        draw(st.binary(max_size=12)),
        priority=draw(st.integers(0, 9)),
        scheduled_delivery=draw(st.sampled_from([0, 5, 2**40])),
        properties=draw(st.sampled_from([{}, {}, {"k": 1}])),
    )
    if draw(st.integers(0, 5)) == 0:  # a large message's record: never peeked
        return r.ADD_LARGE_MESSAGE, mr.encode_large_message(m, 4096)
    return r.ADD_MESSAGE_PROTOCOL, mr.encode_message(m, m.body)  # type: ignore[arg-type]


@st.composite
def _record(draw: st.DrawFn) -> RecordInfo:
    mid = draw(IDS)
    qid = draw(QUEUES)
    kind = draw(st.sampled_from(["message", "ref", "ref", "ack", "count", "time", "other"]))
    if kind == "message":
        urt, body = draw(_message_body())
        return RecordInfo(mid, urt, body, False)
    if kind == "ref":
        return RecordInfo(mid, r.ADD_REF, r.RefRecord(qid).encode(), True)
    if kind == "ack":
        return RecordInfo(mid, r.ACKNOWLEDGE_REF, r.AckRecord(qid).encode(), True)
    if kind == "count":
        body = r.DeliveryCountRecord(qid, draw(st.integers(0, 9))).encode()
        return RecordInfo(mid, r.UPDATE_DELIVERY_COUNT, body, True)
    if kind == "time":
        body = r.ScheduledTimeRecord(qid, draw(st.integers(0, 2**40))).encode()
        return RecordInfo(mid, r.SET_SCHEDULED_DELIVERY_TIME, body, True)
    return RecordInfo(mid, r.DUPLICATE_ID, r.DuplicateIdRecord("q", b"d%d" % mid).encode(), False)


def _entry(e: QueueEntry) -> tuple[int, ...]:
    return (e.message_id, e.priority, e.order, e.delivery_count, e.scheduled, e.state)


def _snapshot(state: recovery.MessagesState) -> Any:
    """Everything the loader reads of a replayed state, with which entries are current."""
    messages = {
        mid: (
            repr(lm.message),  # Message compares by identity
            lm.large_size,
            lm.size,
            {q: _entry(e) for q, e in lm.refs.items()},
            lm.message_id,
            lm.header,
            lm.encoded,
        )
        for mid, lm in state.messages.items()
    }
    lists = {
        q: [(_entry(e), state.messages[e.message_id].refs.get(q) is e) for e in entries]
        for q, entries in state.queue_entries.items()
    }
    return messages, lists, state.stale, next(state.orders), state.dups, state.highest_id


def _replay(
    records: list[RecordInfo], compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, list[tuple[str, int, int]]]:
    with monkeypatch.context() as m:
        if not compiled:
            m.setattr(recovery, "COMPILED_RUN", None)
        m.setattr(recovery, "_PROGRESS_EVERY", 3)  # chunk boundaries inside short sequences
        calls: list[tuple[str, int, int]] = []
        state = recovery.replay_messages(LoadResult(list(records)), lambda *a: calls.append(a))
        return _snapshot(state), calls


@settings(max_examples=examples(300), deadline=None)
@given(records=st.lists(_record(), max_size=30))
def test_the_compiled_replay_equals_the_python_reference(records: list[RecordInfo]) -> None:
    from tests.file.test_reader import require_speedups

    require_speedups()
    assert recovery.COMPILED_RUN is not None
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert _replay(records, True, monkeypatch) == _replay(records, False, monkeypatch)


def test_the_compiled_replay_refuses_a_class_it_cannot_fill() -> None:
    """The compiled loop writes the slots of LoadedMessage and QueueEntry by name: a class
    without one of them is a TypeError, not a write into the wrong place."""
    from tests.file.test_reader import require_speedups

    require_speedups()
    run = recovery.COMPILED_RUN
    assert run is not None

    class NoSlots:
        pass

    args = ([], 0, 0, {}, {}, iter([]), {}, mr.MessageHeader, 1, r.ADD_REF)
    with pytest.raises(TypeError, match="not a slot"):
        run(*args, r.ADD_MESSAGE_PROTOCOL, NoSlots, QueueEntry, 0)
    with pytest.raises(TypeError, match="not a slot"):
        run(*args, r.ADD_MESSAGE_PROTOCOL, recovery.LoadedMessage, NoSlots, 0)


def _file_store_config(root: Path) -> StoreConfig:
    return StoreConfig.from_mapping(file_config_mapping(root, "NIO"))


_GONE = 987_654  # a queue id no queue has: its refs are of a queue that is gone


@st.composite
def _journal(draw: st.DrawFn) -> list[tuple[str, int, int, bytes]]:
    """Appends to a message journal: (how, id, user record type, body), how "add" or
    "update"; messages 10..19 on queues 0..2 (2 is gone; 0 and 1 are filled in later)."""
    out: list[tuple[str, int, int, bytes]] = []
    for mid in draw(st.lists(st.integers(10, 19), unique=True, max_size=10)):
        urt, body = draw(_message_body())
        out.append(("add", mid, urt, body))
        for q in draw(st.lists(st.integers(0, 2), unique=True, max_size=3)):
            out.append(("update", mid, r.ADD_REF, r.RefRecord(q).encode()))
            kind = draw(st.sampled_from(["", "", "ack", "count", "time"]))
            if kind == "ack":
                out.append(("update", mid, r.ACKNOWLEDGE_REF, r.AckRecord(q).encode()))
            elif kind == "count":
                count = r.DeliveryCountRecord(q, draw(st.integers(1, 5))).encode()
                out.append(("update", mid, r.UPDATE_DELIVERY_COUNT, count))
            elif kind == "time":
                time = r.ScheduledTimeRecord(q, draw(st.sampled_from([1, 2**45]))).encode()
                out.append(("update", mid, r.SET_SCHEDULED_DELIVERY_TIME, time))
    return out


def _with_queue_ids(body: bytes, urt: int, ids: list[int]) -> bytes:
    """``body`` with its queue id (0..2, as drawn) made the real one."""
    if urt == r.ADD_REF:
        return r.RefRecord(ids[r.RefRecord.decode(body).queue_id]).encode()
    if urt == r.ACKNOWLEDGE_REF:
        return r.AckRecord(ids[r.AckRecord.decode(body).queue_id]).encode()
    if urt == r.UPDATE_DELIVERY_COUNT:
        dc = r.DeliveryCountRecord.decode(body)
        return r.DeliveryCountRecord(ids[dc.queue_id], dc.count).encode()
    if urt == r.SET_SCHEDULED_DELIVERY_TIME:
        t = r.ScheduledTimeRecord.decode(body)
        return r.ScheduledTimeRecord(ids[t.queue_id], t.time).encode()
    return body


def _loaded(root: Path, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Load the store at ``root`` and describe everything the manager rebuilt."""
    with monkeypatch.context() as m:
        if not compiled:
            m.setattr(recovery, "COMPILED_RUN", None)
            m.setattr(loader, "COMPILED_KEEP", None)
            m.setattr(queues, "COMPILED_ADD", None)
        with StorageManager(open_store(_file_store_config(root))) as sm:
            rec = sm.load()
            stored = {
                mid: (s.record(), s.size, s.large_size, {q: _entry(e) for q, e in s.refs.items()})
                for mid, s in sm._state.messages.items()
            }
            by_queue = {
                q.info.name: (
                    {mid: _entry(e) for mid, e in q._entries.items()},
                    sorted(q._ready),
                    sorted(q._scheduled),
                    all(
                        s.refs[q.info.id] is e
                        for mid, e in q._entries.items()
                        for s in [sm._state.messages[mid]]
                    ),
                )
                for q in sm._state.queues.values()
            }
            memory = [
                (held.memory_bytes, held.memory_messages)
                for held in map(sm._pager.address, ADDRESSES)
            ]
            return rec.messages, rec.cleaned, stored, by_queue, memory, next(sm._state.order)


@settings(max_examples=examples(40), deadline=None)
@given(appends=_journal())
def test_the_compiled_load_equals_the_python_reference(
    appends: list[tuple[str, int, int, bytes]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A whole ``load()`` of a real file store, with the compiled loops and without: the same
    messages kept (their records, sizes, refs), deleted and counted, the same queues (entries,
    ready and scheduled heaps), memory held and next order."""
    from tests.file.test_reader import require_speedups

    require_speedups()
    root = tmp_path_factory.mktemp("replay")
    with StorageManager(open_store(_file_store_config(root / "built"))) as sm:
        sm.load()
        sm.create_address("a")
        ids = [sm.create_queue(name, address="a").id for name in ("q0", "q1")] + [_GONE]
    store = open_store(_file_store_config(root / "built"))
    try:
        store.bindings.load()
        store.messages.load()
        for how, mid, urt, body in appends:
            append = store.messages.append_add if how == "add" else store.messages.append_update
            append(mid, urt, _with_queue_ids(body, urt, ids), sync=False)
            if how == "add" and urt == r.ADD_LARGE_MESSAGE:  # its body, as a send writes it
                with store.large_messages.create(mid) as writer:
                    writer.write(bytes(mr.decode_large_message(body, mid)[1]))
        store.messages.flush()
    finally:
        store.close()
    for name in ("compiled", "python"):
        shutil.copytree(root / "built", root / name)
    with pytest.MonkeyPatch.context() as monkeypatch:
        got = _loaded(root / "compiled", True, monkeypatch)
        want = _loaded(root / "python", False, monkeypatch)
    assert got == want
