"""The report's dead-lettered and expired counts per address (``address_bytes``, the header's
totals, the first screen's lines), on stores whose delivery policies really moved messages:
inline, large and paged ones, on the file store and PostgreSQL; equal to what
``store data print`` counts (store/data/moved.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from store import StoreConfig, open_store
from store.data.moved import moved_counts
from store.messaging import Message, StorageManager
from store.reporting import jobs
from store.reporting.report import ReportSource, _pinned, _records, _settled, run_report
from tests.support.backends import StoreFactory, backend_by_name, unique_prefix

NOW = 1_700_000_000_000
BIG = bytes(range(256)) * 40  # 10 KiB: over min-large-message-size below
SETTINGS = {
    "orders": {"max_delivery_attempts": 2, "dead_letter_address": "DLA", "expiry_address": "EXP"},
    "news": {"expiry_address": "EXP"},
    # the dead-letter address pages past its first message: most dead letters are paged
    "DLA": {"max_size_messages": 1, "address_full_policy": "PAGE", "page_size_bytes": 4096},
}


@pytest.fixture(params=["file-nio", "postgresql"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreConfig]:
    factory = StoreFactory(backend_by_name(request.param), tmp_path, unique_prefix())
    try:
        yield factory.config.replace(address_settings=SETTINGS, min_large_message_size=4096)
    finally:
        factory.teardown()


def _fill(config: StoreConfig) -> None:
    """From ``orders``: 4 messages dead-lettered (one large; one acknowledged off the
    dead-letter queue afterwards, so 3 wait) and 2 expired (one large); from ``news`` 1
    expired; 1 message left on ``orders`` and 1 on ``news``."""
    now = [NOW]
    with StorageManager(open_store(config), clock=lambda: now[0]) as sm:
        sm.load()
        for address, queue in (("orders", "orders.q"), ("news", "news.q")):
            sm.create_address(address)
            sm.create_queue(queue, address=address)
        for address, queue in (("DLA", "dead"), ("EXP", "expired")):
            sm.create_address(address, routing_types=("MULTICAST",))
            sm.create_queue(queue, address=address, routing_type="MULTICAST")
        for body in (b"poison-0", BIG, b"poison-2", b"poison-3"):
            sm.send(Message("orders", body))
        for _attempt in range(2):
            for d in sm.receive("orders.q", 4):
                sm.cancel("orders.q", d.message.message_id)  # type: ignore[arg-type]
        (first,) = sm.receive("dead", 1)
        sm.ack("dead", first.message.message_id)  # type: ignore[arg-type]
        for address, body in (("orders", b"late"), ("orders", BIG), ("news", b"late")):
            sm.send(Message(address, body, expiration=NOW + 10))
        sm.send(Message("orders", b"kept"))
        sm.send(Message("news", b"kept"))
        now[0] += 20
        assert sm.expire() == 3


def test_address_bytes_counts_the_moved_messages_by_original_address(
    spark: Any, config: StoreConfig
) -> None:
    _fill(config)
    expected = moved_counts(config)
    assert expected.dead_lettered == {"orders": 3} and expected.expired == {"news": 1, "orders": 2}
    records, pages = _records(spark, ReportSource(config=config))
    assert records is not None
    live = _settled(jobs.replay(_pinned(records)))
    paged = _pinned(pages)
    assert paged.filter("orig_address is not null").count() >= 2  # the paged dead letters
    rows = {r["address"]: r.asDict() for r in jobs.address_bytes(live, paged).collect()}
    assert {a: r["dead_lettered"] for a, r in rows.items() if r["dead_lettered"]} == {"orders": 3}
    assert {a: r["expired"] for a, r in rows.items() if r["expired"]} == {"news": 1, "orders": 2}
    # where they wait now: counted there as messages, never as moved from there
    assert rows["DLA"]["messages"] == 3 and rows["DLA"]["dead_lettered"] == 0
    assert rows["EXP"]["messages"] == 3 and rows["EXP"]["expired"] == 0
    assert rows["orders"]["messages"] == 1 and rows["news"]["messages"] == 1


def test_the_report_shows_them_per_address_and_on_its_first_screen(
    spark: Any, config: StoreConfig, tmp_path: Path
) -> None:
    _fill(config)
    out = tmp_path / "report"
    summary = run_report(spark, ReportSource(config=config), str(out))
    assert (summary.totals.dead_lettered, summary.totals.expired) == (3, 3)
    table = {r["address"]: r for r in pq.read_table(out / "address_bytes").to_pylist()}
    assert (table["orders"]["dead_lettered"], table["orders"]["expired"]) == (3, 2)
    assert (table["news"]["dead_lettered"], table["news"]["expired"]) == (0, 1)
    assert summary.health.verdict == "needs attention"
    (dead,) = [a for a in summary.health.actions if "dead-lettered" in a]
    assert dead.startswith("3 messages sent to 'orders' (3) dead-lettered")
    (expired,) = [a for a in summary.health.actions if "expired" in a]
    assert expired.startswith("3 messages sent to 'orders' (2), 'news' (1) expired")
    page = (out / "index.html").read_text()
    assert 'data-total="dead_lettered" data-value="3"' in page
    assert 'data-total="expired" data-value="3"' in page
    assert "3 messages sent to &#x27;orders&#x27; (3) dead-lettered" in page


def test_a_store_without_moves_counts_none_and_stays_healthy(
    spark: Any, config: StoreConfig, tmp_path: Path
) -> None:
    with StorageManager(open_store(config)) as sm:
        sm.load()
        sm.create_address("orders")
        sm.create_queue("orders.q", address="orders")
        sm.send(Message("orders", b"x", properties={"_AMQ_ORIG_ADDRESS": 5}))  # not text
    summary = run_report(spark, ReportSource(config=config), str(tmp_path / "report"))
    assert (summary.totals.dead_lettered, summary.totals.expired) == (0, 0)
    assert summary.health.verdict == "healthy"
