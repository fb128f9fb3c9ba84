"""A store opened read-only (``open_store(config, read_only=True)``, store/opening/read_only.py): it
loads what a normal open loads, refuses every write loudly, and locks out writers while open.
The byte-for-byte and row-for-row checks through ``store data exp`` are in
tests/cli/test_read_only_tools.py."""

from __future__ import annotations

import pytest

from store import open_store
from store.errors import JournalStateError, StoreLockedError
from store.messaging import Message, StorageManager
from tests.support.backends import StoreFactory


def _populate(factory: StoreFactory) -> list[int]:
    with StorageManager(factory.open()) as sm:
        sm.load()
        sm.create_address("a")
        sm.create_queue("q", address="a")
        ids = [sm.send(Message("a", f"m{i}".encode())) for i in range(5)]
        sm.receive("q", max_messages=1)
        sm.ack("q", ids[0])
    return ids


def test_loads_what_a_normal_open_loads_and_refuses_writes(
    messaging_factory: StoreFactory,
) -> None:
    ids = _populate(messaging_factory)
    with StorageManager(open_store(messaging_factory.config, read_only=True)) as sm:
        assert sm.read_only
        rec = sm.load()
        assert rec.messages == 4
        assert [m.message_id for m, _ in sm.browse()] == ids[1:]
        with pytest.raises(JournalStateError, match="read-only"):
            sm.send(Message("a", b"no"))
        got = sm.receive("q", max_messages=1)  # delivery writes nothing durable
        assert [d.message.message_id for d in got] == [ids[1]]
        with pytest.raises(JournalStateError, match="read-only"):
            sm.ack("q", ids[1])
        with pytest.raises(JournalStateError, match="read-only"):
            sm.create_queue("q2", address="a")
    with StorageManager(open_store(messaging_factory.config)) as sm:  # nothing was lost
        sm.load()
        assert [m.message_id for m, _ in sm.browse()] == ids[1:]


def test_a_writer_and_a_reader_exclude_each_other(messaging_factory: StoreFactory) -> None:
    _populate(messaging_factory)
    writer = open_store(messaging_factory.config)
    try:
        with pytest.raises(StoreLockedError):
            open_store(messaging_factory.config, read_only=True)
    finally:
        writer.close()
    reader = open_store(messaging_factory.config, read_only=True)
    try:
        with pytest.raises(StoreLockedError):
            open_store(messaging_factory.config)
    finally:
        reader.close()
    open_store(messaging_factory.config).close()  # released
