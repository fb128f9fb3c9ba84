"""A page replaced by another valid page of its address, of the same length (a restore from the
wrong backup, a copy by hand), on the file store, SQLite, PostgreSQL and MariaDB, with and
without the page summary (store.paging.format, "binding").

Before page records were bound to their page, this read as its own page: that page's
messages were never delivered, and the copy's messages, acknowledged long before, were
delivered again. Now reading it is a CorruptionError naming the page it is in and the page its
records were written for, before any of them is delivered; ``store data verify`` reports it
as an error and the report refuses the store. A page file written before bindings (``{``
records) still reads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from store.data import verify_store
from store.data.checking import PagesVerify
from store.errors import CorruptionError
from store.messaging.values import Message
from store.paging.files import FilePageBackend
from store.paging.format import FRAMING, RECORD_START, encode_record
from store.paging.repair import page_backend
from store.reporting.report import ReportSource, find_damage
from tests.data.support import loaded_manager
from tests.messaging.support import bodies
from tests.support.backends import StoreFactory, backend_by_name, unique_prefix

#: Equal bodies, so that every page holds the same number of records of the same length.
PAYLOADS = [b"m%02d" % i + b"." * 150 for i in range(13)]


@pytest.fixture(params=["file-nio", "sqlite", "postgresql", "mariadb"])
def factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    made = StoreFactory(backend_by_name(request.param), tmp_path, unique_prefix())
    made.config = made.config.replace(
        address_settings={
            "orders": {
                "max_size_messages": 1,
                "address_full_policy": "PAGE",
                "page_size_bytes": 800,
            }
        }
    )
    try:
        yield made
    finally:
        made.teardown()


def _fill(factory: StoreFactory) -> None:
    """The first message in memory, the others on pages of 4 each (3 pages); closed cleanly."""
    sm = loaded_manager(factory)
    sm.create_address("orders")
    sm.create_queue("orders", address="orders")
    for p in PAYLOADS:
        sm.send(Message("orders", p))
    sm.close()
    factory.close()


def _page(factory: StoreFactory, page: int) -> bytes:
    with page_backend(factory.config) as backend:
        (locator,) = backend.survey().stores.values()
        data = backend.read_bytes(locator, page)
        assert data is not None
        return data


def _write_page(factory: StoreFactory, page: int, data: bytes, *, summary: bool) -> None:
    """Overwrite ``page`` with ``data`` (of its length); without ``summary``, the page
    summary is deleted too."""
    with page_backend(factory.config) as backend:
        (locator,) = backend.survey().stores.values()
        assert len(backend.read_bytes(locator, page) or b"") == len(data)
        if isinstance(backend, FilePageBackend):
            path, _ = backend.page_path(locator, page)
            Path(path).write_bytes(data)
        else:
            backend.overwrite(locator, page, 0, data)
        if not summary:
            backend.write_summary(locator, None)


@pytest.mark.parametrize("summary", [True, False], ids=["summary", "no-summary"])
def test_a_page_copied_over_another_is_refused_naming_both(
    factory: StoreFactory, summary: bool
) -> None:
    _fill(factory)
    saved = _page(factory, 1)
    sm = loaded_manager(factory)
    first = sm.receive("orders", 5)  # the one in memory and page 1: consumed for good
    assert bodies(first) == PAYLOADS[:5]
    for d in first:
        sm.ack("orders", d.message.message_id)  # type: ignore[arg-type]
    sm.close()
    factory.close()
    _write_page(factory, 2, saved, summary=summary)  # page 1 restored over page 2

    delivered: list[bytes] = []
    with pytest.raises(CorruptionError) as refused:
        sm = loaded_manager(factory)
        while batch := sm.receive("orders", 2):
            delivered += bodies(batch)
            for d in batch:
                sm.ack("orders", d.message.message_id)  # type: ignore[arg-type]
    assert "a record of page 1, not of page 2" in str(refused.value)
    assert refused.value.offset == 0
    assert not set(delivered) & set(PAYLOADS[:5])  # nothing acknowledged came back
    factory.close()
    found = verify_store(factory.config)
    assert not found.ok
    errors = [
        f.message
        for p in found.parts
        if isinstance(p, PagesVerify)
        for f in p.findings
        if f.severity == "error"
    ]
    assert any("a record of page 1, not of page 2" in e for e in errors), errors
    damage = find_damage(ReportSource(config=factory.config))
    assert any("not of page 2" in str(e) for e in damage), damage


def test_the_current_page_copied_over_is_not_taken_for_a_torn_tail(factory: StoreFactory) -> None:
    """The last page (the one a crash may leave torn) replaced by page 2: refused, not cut."""
    _fill(factory)
    _write_page(factory, 3, _page(factory, 2), summary=False)
    with pytest.raises(CorruptionError, match="a record of page 2, not of page 3"):
        sm = loaded_manager(factory)
        while batch := sm.receive("orders", 4):
            for d in batch:
                sm.ack("orders", d.message.message_id)  # type: ignore[arg-type]


def test_pages_written_before_bindings_still_read(factory: StoreFactory) -> None:
    """Every record rewritten unbound (``{``, as a store written before bindings holds):
    every message is delivered, in order."""
    _fill(factory)
    with page_backend(factory.config) as backend:
        (locator,) = backend.survey().stores.values()
        backend.write_summary(locator, None)
        for page in backend.page_numbers(locator):
            data = backend.read_bytes(locator, page) or b""
            old, offset = bytearray(), 0
            while offset < len(data):
                length = int.from_bytes(data[offset + 1 : offset + 5], "big")
                old += encode_record(data[offset + 9 : offset + 9 + length])
                offset += FRAMING + length
            assert old[0] == RECORD_START and len(old) == len(data)
            if isinstance(backend, FilePageBackend):
                Path(backend.page_path(locator, page)[0]).write_bytes(old)
            else:
                backend.overwrite(locator, page, 0, bytes(old))
    sm = loaded_manager(factory)
    got: list[bytes] = []
    while batch := sm.receive("orders", 4):
        got += bodies(batch)
        for d in batch:
            sm.ack("orders", d.message.message_id)  # type: ignore[arg-type]
    assert got == PAYLOADS
