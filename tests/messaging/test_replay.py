"""The message journal's replay (``store.messaging.recovery.replay_messages``): its compiled
loop (``replay_message_run`` in ``store/_speedups.c``) against the inline Python code it
stands in for, on record sequences of every kind the replay meets."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from store.journal.api import LoadResult, RecordInfo
from store.messaging import message_records as mr
from store.messaging import records as r
from store.messaging import recovery
from store.messaging.queues import QueueEntry
from store.messaging.values import Message

IDS = st.sampled_from([1, 2, 3, 2**31 + 5, 2**62 + 7])
QUEUES = st.sampled_from([1, 2, 2**40])


@st.composite
def _message_body(draw: st.DrawFn) -> tuple[int, bytes]:
    m = Message(
        draw(st.sampled_from(["q", "orders.eu", "é"])),
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
        state = recovery.replay_messages(
            LoadResult(list(records)), lambda *a: calls.append(a)
        )
        return _snapshot(state), calls


@settings(max_examples=300, deadline=None)
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
