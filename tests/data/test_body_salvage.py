"""``store data repair --salvage`` on large-message bodies (store.data.body_salvage), the file
store and the database back-ends: a body flipped by one byte and a body deleted from outside
make the load refuse the store (LostDataError / CorruptionError naming the body); verify
names the messages and advises ``repair --salvage``; the salvage removes exactly those two
messages (the file store's bodies kept in attic/) and every other message, large or small, is
delivered as before; a second salvage finds nothing."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from store.data import repair_store, verify_store
from store.data.advice import repair_advice
from store.data.checking import BodySalvage
from store.errors import CorruptionError
from store.large.database import DatabaseLargeMessages, chunk_name
from store.large.files import FileLargeMessages
from store.messaging.values import Message
from store.store import Store
from tests.data.support import loaded_manager
from tests.support.backends import StoreFactory, backend_by_name, unique_prefix

LIMIT = 1024
BIG = bytes(range(256)) * 14  # 3584 bytes, over LIMIT


@pytest.fixture(params=["file-nio", "sqlite", "postgresql", "mariadb"])
def factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    made = StoreFactory(backend_by_name(request.param), tmp_path, unique_prefix())
    made.config = made.config.replace(min_large_message_size=LIMIT)
    try:
        yield made
    finally:
        made.teardown()


def _flip_a_body_byte(store: Store, mid: int) -> None:
    large = store.large_messages
    if isinstance(large, FileLargeMessages):
        path = large.path(mid)
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) - 100)  # inside the last chunk's payload
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0xFF]))
        return
    assert isinstance(large, DatabaseLargeMessages)
    c = large.table.c
    with large.engine.begin() as conn:
        row = conn.execute(sa.select(c.id, c.data).where(c.filename == chunk_name(mid, 0))).one()
        data = bytearray(row.data)
        data[-100] ^= 0xFF
        conn.execute(sa.update(large.table).where(c.id == row.id).values(data=bytes(data)))


def test_salvage_removes_only_the_messages_whose_bodies_are_damaged_or_gone(
    factory: StoreFactory,
) -> None:
    sm = loaded_manager(factory)
    sm.create_address("orders", routing_types=("ANYCAST",))
    sm.create_queue("q", address="orders", routing_type="ANYCAST")
    sent = [sm.send(Message("orders", BIG if i % 2 else b"small %d" % i)) for i in range(8)]
    flipped, deleted = sent[3], sent[5]
    sm.close()
    store = factory.open()
    assert isinstance(store, Store)
    _flip_a_body_byte(store, flipped)
    store.large_messages.delete(deleted)
    factory.close()

    with pytest.raises(CorruptionError) as refused:
        loaded_manager(factory)
    assert str(deleted) in refused.value.path or str(flipped) in refused.value.path
    factory.close()

    found = verify_store(factory.config)
    assert not found.ok
    advice = " ".join(repair_advice(found))
    assert "repair --salvage" in advice and f"{flipped}" in advice and f"{deleted}" in advice

    done = repair_store(factory.config, salvage_journals=True)
    (bodies,) = [p for p in done.parts if isinstance(p, BodySalvage)]
    assert sorted(lost.message_id for lost in bodies.report.removed) == [flipped, deleted]
    assert bodies.report.checked == 4 and done.dropped == 2
    if factory.spec.name.startswith("file"):
        moved = {lost.message_id: lost.moved_to for lost in bodies.report.removed}
        assert moved[deleted] is None  # it was gone already
        assert moved[flipped] is not None and os.path.exists(moved[flipped])
        assert os.path.basename(os.path.dirname(moved[flipped])) == "attic"

    assert verify_store(factory.config).ok
    sm = loaded_manager(factory)
    got = []
    while batch := sm.receive("q", 10):
        for d in batch:
            with d.message.open_body() as f:
                got.append((d.message.message_id, f.read()))
            sm.ack("q", d.message.message_id)  # type: ignore[arg-type]
    sm.close()
    kept = [mid for mid in sent if mid not in (flipped, deleted)]
    assert [mid for mid, _ in got] == kept
    assert all(
        body == (BIG if mid in sent[1::2] else b"small %d" % sent.index(mid)) for mid, body in got
    )

    again = repair_store(factory.config, salvage_journals=True)
    (bodies,) = [p for p in again.parts if isinstance(p, BodySalvage)]
    assert bodies.report.removed == () and not again.dropped
