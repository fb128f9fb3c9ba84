"""The id generator (store.messaging.ids): ids never repeat or go back, across clean stops and
crash-like stops (the store closed without the generator's clean-stop record), and old counter
records are cleaned at load (reference SM-2)."""

from __future__ import annotations

import pytest

from store.errors import StoreError
from store.messaging.ids import IdGenerator
from store.messaging.records import ID_COUNTER_RECORD, IdCounterRecord
from tests.support.backends import StoreFactory

BATCH = 1000


def _open(factory: StoreFactory) -> IdGenerator:
    store = factory.open()
    loaded = store.bindings.load()
    store.messages.load()
    counters = [
        (rec.id, IdCounterRecord.decode(rec.data))
        for rec in loaded.records
        if rec.user_record_type == ID_COUNTER_RECORD
    ]
    gen = IdGenerator(store.bindings, batch=BATCH)
    gen.recover(counters, highest_seen=0)
    return gen


def _counter_records(factory: StoreFactory) -> list[int]:
    store = factory.open()
    loaded = store.bindings.load()
    factory.close()
    return [IdCounterRecord.decode(r.data).next_id for r in loaded.records]


def test_ids_increase_and_a_crash_skips_at_most_one_batch(
    messaging_factory: StoreFactory,
) -> None:
    gen = _open(messaging_factory)
    first, second = gen.next_id(), gen.next_id()
    assert 0 < first < second
    gen = _open(messaging_factory)  # no clean stop: the reserved range is skipped
    after_crash = gen.next_id()
    assert second < after_crash <= second + BATCH + 2
    gen.close()
    with pytest.raises(StoreError, match="closed"):
        gen.next_id()
    gen = _open(messaging_factory)  # clean stop: no jump
    after_stop = gen.next_id()
    assert after_crash < after_stop <= after_crash + 3


def test_ids_strictly_increase_over_many_reopens_clean_and_crash_like(
    messaging_factory: StoreFactory,
) -> None:
    last = 0
    for round_ in range(12):
        gen = _open(messaging_factory)
        for _ in range(700):
            value = gen.next_id()
            assert value > last
            last = value
        if round_ % 2:
            gen.close()
    messaging_factory.close()
    assert len(_counter_records(messaging_factory)) <= 2


def test_reopening_without_generating_keeps_the_next_id(messaging_factory: StoreFactory) -> None:
    gen = _open(messaging_factory)
    gen.next_id()
    gen.close()
    peeks = []
    for _ in range(3):
        gen = _open(messaging_factory)
        peeks.append(gen.peek)
        gen.close()
    assert peeks[1] == peeks[0] + 1 and peeks[2] == peeks[1] + 1  # only the stop record's id


def test_stale_counter_records_are_deleted_at_load(messaging_factory: StoreFactory) -> None:
    store = messaging_factory.open()
    store.bindings.load()
    for rid, value in ((1, 100), (2, 5000), (3, 300)):
        store.bindings.append_add(rid, ID_COUNTER_RECORD, IdCounterRecord(value).encode())
    messaging_factory.close()
    gen = _open(messaging_factory)
    assert gen.next_id() >= 5000
    messaging_factory.close()
    # The newest (5000) was kept at load, then replaced by the next batch's record.
    assert _counter_records(messaging_factory) == [5000 + 1 + BATCH]


def test_ids_start_past_every_id_the_journals_hold(messaging_factory: StoreFactory) -> None:
    store = messaging_factory.open()
    store.bindings.load()
    store.messages.load()
    gen = IdGenerator(store.bindings, batch=BATCH)
    gen.recover([], highest_seen=123_456)
    assert gen.next_id() > 123_456
    with pytest.raises(StoreError, match="already recovered"):
        gen.recover([], highest_seen=0)


def test_the_generator_refuses_ids_before_recovery_and_a_zero_batch(
    messaging_factory: StoreFactory,
) -> None:
    store = messaging_factory.open()
    store.bindings.load()
    with pytest.raises(StoreError, match="not recovered"):
        IdGenerator(store.bindings).next_id()
    with pytest.raises(ValueError, match="at least 1"):
        IdGenerator(store.bindings, batch=0)
