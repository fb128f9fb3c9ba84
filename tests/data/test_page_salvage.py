"""``store data repair --salvage`` on a damaged page record (store.data.page_salvage), the file
store and the database back-ends, followed as an operator follows the hint: one flipped byte
in a paged message makes verify report the page, at the record's offset; the hint names
``repair --salvage``; run, it replaces only that record (the file store keeps its bytes in
attic/) and deletes the cursor ack a queue had written for it; every other message is then
delivered in order on both queues, nothing acknowledged comes back, and once both queues
consumed everything the pages go (the page's completion still counts right)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.data import repair_store, verify_store
from store.data.advice import repair_advice
from store.data.checking import PageSalvage, PagesVerify
from store.errors import CorruptionError, LostDataError
from store.messaging.manager import StorageManager
from store.messaging.values import Message
from store.paging.files import FilePageBackend
from store.paging.format import FRAMING
from store.paging.repair import page_backend
from store.store import Store
from tests.data.support import loaded_manager
from tests.support.backends import StoreFactory, backend_by_name, unique_prefix

PAYLOADS = [b"m%02d" % i + b"." * 150 for i in range(16)]
DAMAGED = 5  # the index in PAYLOADS of the message whose record is flipped (on page 1)


@pytest.fixture(params=["file-nio", "sqlite", "postgresql", "mariadb"])
def factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    made = StoreFactory(backend_by_name(request.param), tmp_path, unique_prefix())
    made.config = made.config.replace(
        address_settings={
            "orders": {
                "max_size_messages": 1,
                "address_full_policy": "PAGE",
                "page_size_bytes": 1500,
            }
        }
    )
    try:
        yield made
    finally:
        made.teardown()


def _drain(sm: StorageManager, queue: str) -> list[bytes]:
    got: list[bytes] = []
    while batch := sm.receive(queue, 4):
        for d in batch:
            assert isinstance(d.message.body, bytes)
            got.append(d.message.body)
            sm.ack(queue, d.message.message_id)  # type: ignore[arg-type]
    return got


def _flip_in_page_one(factory: StoreFactory, index: int, at: int = 60, width: int = 1) -> int:
    """Flip ``width`` bytes from ``at`` bytes into the ``index``-th record of page 1 (60:
    inside the payload, past the paged message's header; 0: its start byte); returns the
    record's offset."""
    with page_backend(factory.config) as backend:
        (locator,) = backend.survey().stores.values()
        data = backend.read_bytes(locator, 1)
        assert data is not None
        offset = _offset_of(data, index)
        start = offset + at
        flipped = bytes(b ^ 0xFF for b in data[start : start + width])
        if isinstance(backend, FilePageBackend):
            path, _ = backend.page_path(locator, 1)
            with open(path, "r+b") as f:
                f.seek(start)
                f.write(flipped)
        else:
            backend.overwrite(locator, 1, start, flipped)
        return offset


def _offset_of(data: bytes, index: int) -> int:
    """Where the ``index``-th record of the page ``data`` starts (its framing intact)."""
    offset = 0
    for _ in range(index):
        offset += FRAMING + int.from_bytes(data[offset + 1 : offset + 5], "big")
    return offset


def _record_length(factory: StoreFactory, index: int) -> int:
    """The encoded length of the ``index``-th record of page 1 (as written)."""
    with page_backend(factory.config) as backend:
        (locator,) = backend.survey().stores.values()
        data = backend.read_bytes(locator, 1)
        assert data is not None
        offset = _offset_of(data, index)
        return FRAMING + int.from_bytes(data[offset + 1 : offset + 5], "big")


def _two_queues(factory: StoreFactory) -> list[int | None]:
    """PAYLOADS sent to q1 and q2 (one in memory, the rest paged from page 1 on); q1 acks
    messages 0..6 but 4. Returns the message ids."""
    sm = loaded_manager(factory)
    sm.create_address("orders", routing_types=("MULTICAST",))
    for q in ("q1", "q2"):
        sm.create_queue(q, address="orders", routing_type="MULTICAST")
    ids = [sm.send(Message("orders", p)) for p in PAYLOADS]
    got = sm.receive("q1", DAMAGED + 2)
    acked = [d.message.message_id for d in got if d.message.message_id != ids[DAMAGED - 1]]
    for mid in acked:  # q1 acks 0..6 but 4, the damaged message (5) among them
        sm.ack("q1", mid)  # type: ignore[arg-type]
    sm.close()
    return ids


def test_salvage_replaces_only_the_damaged_page_record(factory: StoreFactory) -> None:
    ids = _two_queues(factory)
    store = factory.open()
    assert isinstance(store, Store)
    pages = store.paging.store("orders")
    first = len(pages.read_page(pages.pages()[0]))
    assert 1 + first > DAMAGED + 1 and len(pages.pages()) >= 3  # the damaged one is on page 1
    last = max(pages.pages())
    factory.close()
    offset = _flip_in_page_one(factory, DAMAGED - 1)  # page 1 starts after the one in memory

    # (that a load then cannot deliver q2's messages past it: tests/paging/test_damage.py)
    with page_backend(factory.config) as backend:
        (locator,) = backend.survey().stores.values()
        assert backend.read_summary(locator) is not None  # the clean close wrote one
    found = verify_store(factory.config)
    assert not found.ok
    page_findings = [f for p in found.parts if isinstance(p, PagesVerify) for f in p.findings]
    assert [f.offset for f in page_findings if f.severity == "error"] == [offset]
    advice = " ".join(repair_advice(found))
    assert "repair --salvage" in advice and "1 damaged page record" in advice

    done = repair_store(factory.config, salvage_journals=True)
    (pages_part,) = [p for p in done.parts if isinstance(p, PageSalvage)]
    (replaced,) = pages_part.report.replaced
    assert (replaced.page, replaced.offset, replaced.index) == (1, offset, DAMAGED - 1)
    assert replaced.message_id == ids[DAMAGED] and replaced.acks_deleted == 1
    if factory.spec.name.startswith("file"):
        assert replaced.kept_in is not None and os.path.getsize(replaced.kept_in) == replaced.length
    assert verify_store(factory.config).ok
    with page_backend(factory.config) as backend:  # it described the page as it was
        (locator,) = backend.survey().stores.values()
        assert backend.read_summary(locator) is None

    sm = loaded_manager(factory)
    kept = [p for i, p in enumerate(PAYLOADS) if i != DAMAGED]
    assert _drain(sm, "q2") == kept
    assert _drain(sm, "q1") == [PAYLOADS[DAMAGED - 1], *PAYLOADS[DAMAGED + 2 :]]
    sm.close()
    sm = loaded_manager(factory)  # nothing comes back, and every page went
    assert _drain(sm, "q1") == [] and _drain(sm, "q2") == []
    sm.close()
    store = factory.open()
    assert isinstance(store, Store)
    assert store.paging.store("orders").pages() in ([], [last])
    factory.close()

    again = repair_store(factory.config, salvage_journals=True)
    (pages_part,) = [p for p in again.parts if isinstance(p, PageSalvage)]
    assert pages_part.report.replaced == ()


def _paged_store(factory: StoreFactory, count: int) -> list[int]:
    sm = loaded_manager(factory)
    sm.create_address("orders", routing_types=("ANYCAST",))
    sm.create_queue("q", address="orders", routing_type="ANYCAST")
    ids = [sm.send(Message("orders", p)) for p in PAYLOADS[:count]]
    sm.close()
    return [i for i in ids if i is not None]


def _last_page(factory: StoreFactory) -> str:
    with page_backend(factory.config) as backend:
        (locator,) = backend.survey().stores.values()
        path, _ = backend.page_path(locator, backend.page_numbers(locator)[-1])
        return path


@pytest.mark.parametrize("factory", ["file-nio"], indirect=True)
def test_salvage_leaves_a_torn_tail_of_the_last_page_to_open(factory: StoreFactory) -> None:
    _paged_store(factory, 6)
    with open(_last_page(factory), "ab") as f:  # a record cut short: what a crash leaves
        f.write(bytes([0x7B]) + (500).to_bytes(4, "big") + b"\0" * 40)
    done = repair_store(factory.config, salvage_journals=True)
    (pages_part,) = [p for p in done.parts if isinstance(p, PageSalvage)]
    assert pages_part.report.replaced == () and not done.dropped
    sm = loaded_manager(factory)
    assert _drain(sm, "q") == PAYLOADS[:6]
    sm.close()


@pytest.mark.parametrize("factory", ["file-nio"], indirect=True)
def test_salvage_replaces_the_damaged_last_record_of_a_cleanly_closed_last_page(
    factory: StoreFactory,
) -> None:
    ids = _paged_store(factory, 6)
    page = _last_page(factory)
    size = os.path.getsize(page)
    with open(page, "r+b") as f:  # inside the last record's body
        f.seek(size - 20)
        byte = f.read(1)
        f.seek(size - 20)
        f.write(bytes([byte[0] ^ 0xFF]))
    done = repair_store(factory.config, salvage_journals=True)
    (pages_part,) = [p for p in done.parts if isinstance(p, PageSalvage)]
    (replaced,) = pages_part.report.replaced
    assert replaced.message_id == ids[-1]
    sm = loaded_manager(factory)
    assert _drain(sm, "q") == PAYLOADS[:5]
    sm.close()


@pytest.mark.parametrize("at", [0, 1], ids=["start-byte", "length"])
def test_salvage_mends_a_record_whose_header_alone_is_damaged_and_keeps_it(
    factory: StoreFactory, at: int
) -> None:
    """One flipped byte in a record's start byte or the top byte of its length (the next
    record's start is then unknown): verify reports it and advises the salvage, which writes
    the header again (the record's checksum verifies with it) and drops nothing."""
    ids = _two_queues(factory)
    offset = _flip_in_page_one(factory, DAMAGED - 1, at=at)
    found = verify_store(factory.config)
    assert not found.ok
    assert "repair --salvage" in " ".join(repair_advice(found))
    done = repair_store(factory.config, salvage_journals=True)
    (pages_part,) = [p for p in done.parts if isinstance(p, PageSalvage)]
    assert pages_part.report.replaced == () and not done.dropped
    (mended,) = pages_part.report.mended
    assert (mended.page, mended.offset, mended.index) == (1, offset, DAMAGED - 1)
    assert mended.message_id == ids[DAMAGED]
    assert verify_store(factory.config).ok
    sm = loaded_manager(factory)
    assert _drain(sm, "q2") == PAYLOADS
    assert _drain(sm, "q1") == [PAYLOADS[DAMAGED - 1], *PAYLOADS[DAMAGED + 2 :]]
    sm.close()


def test_salvage_replaces_damage_across_two_headers_by_the_records_the_summary_counts(
    factory: StoreFactory,
) -> None:
    """Records 5 and 6 damaged from the first's start into the second's payload: where they
    end is unknown, and the page summary of the clean close says how many records the
    stretch held (2), so the salvage replaces it by two records no queue receives, deletes
    q1's acks of both, and every other message is delivered in order."""
    _two_queues(factory)
    width = _record_length(factory, DAMAGED - 1) + 20  # into record 6's payload
    offset = _flip_in_page_one(factory, DAMAGED - 1, at=0, width=width)
    done = repair_store(factory.config, salvage_journals=True)
    (pages_part,) = [p for p in done.parts if isinstance(p, PageSalvage)]
    (replaced,) = pages_part.report.replaced
    assert (replaced.page, replaced.offset, replaced.records) == (1, offset, 2)
    assert replaced.acks_deleted == 2 and done.dropped == 2 and pages_part.report.mended == ()
    assert verify_store(factory.config).ok
    sm = loaded_manager(factory)
    gone = (DAMAGED, DAMAGED + 1)
    assert _drain(sm, "q2") == [p for i, p in enumerate(PAYLOADS) if i not in gone]
    assert _drain(sm, "q1") == [PAYLOADS[DAMAGED - 1], *PAYLOADS[DAMAGED + 2 :]]
    sm.close()


def test_salvage_refuses_damage_across_headers_without_a_page_summary(
    factory: StoreFactory,
) -> None:
    """The same damage with the summary gone (an open since the clean close deleted it):
    how many records the stretch held is unknown, so the salvage refuses the page, naming
    it and the offset, and changes nothing of it."""
    _two_queues(factory)
    with page_backend(factory.config) as backend:
        (locator,) = backend.survey().stores.values()
        backend.write_summary(locator, None)
        before = backend.read_bytes(locator, 1)
    width = _record_length(factory, DAMAGED - 1) + 20
    offset = _flip_in_page_one(factory, DAMAGED - 1, at=0, width=width)
    with page_backend(factory.config) as backend:
        (locator,) = backend.survey().stores.values()
        damaged = backend.read_bytes(locator, 1)
    with pytest.raises(CorruptionError, match="page summary") as refused:
        repair_store(factory.config, salvage_journals=True)
    assert refused.value.offset == offset
    with page_backend(factory.config) as backend:
        (locator,) = backend.survey().stores.values()
        assert backend.read_bytes(locator, 1) == damaged != before


def test_salvage_drops_a_paged_large_message_whose_body_is_gone(factory: StoreFactory) -> None:
    """A large message paged on a page no queue touched, its body deleted from outside: the
    load refuses the store naming the body, verify says so and advises the salvage, which
    replaces its page record (the message is dropped, reported) and nothing else; then every
    other message is delivered in order on both queues."""
    factory.config = factory.config.replace(min_large_message_size=1024)
    big = b"L" * 3000
    payloads = [*PAYLOADS[:4], big, *PAYLOADS[4:8]]
    sm = loaded_manager(factory)
    sm.create_address("orders", routing_types=("MULTICAST",))
    for q in ("q1", "q2"):
        sm.create_queue(q, address="orders", routing_type="MULTICAST")
    ids = [sm.send(Message("orders", p)) for p in payloads]
    sm.close()
    store = factory.open()
    assert isinstance(store, Store)
    mid = ids[4]
    assert mid is not None
    store.large_messages.delete(mid)
    with pytest.raises(LostDataError, match=f"large message {mid}"):
        StorageManager(store).load()
    factory.close()
    found = verify_store(factory.config)
    assert not found.ok
    assert "repair --salvage" in " ".join(repair_advice(found))

    done = repair_store(factory.config, salvage_journals=True)
    (pages_part,) = [p for p in done.parts if isinstance(p, PageSalvage)]
    (replaced,) = pages_part.report.replaced
    assert replaced.message_id == mid and "is gone" in replaced.problem
    assert done.dropped == 1
    assert verify_store(factory.config).ok
    sm = loaded_manager(factory)
    kept = [p for p in payloads if p is not big]
    assert _drain(sm, "q1") == kept and _drain(sm, "q2") == kept
    sm.close()
