"""`store data print` ends with the messages the delivery policies moved that still wait, by
original address (store/data/moved.py): dead-lettered and expired, paged ones included, on the
file store and the database store (PostgreSQL, MariaDB, SQLite), as text and as JSON."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from store import StoreConfig, open_store
from store.data.moved import moved_counts
from store.messaging import Message, StorageManager
from tests.cli.test_data_print import Case, _json, _make_case, _print

NOW = 1_700_000_000_000
SETTINGS = {
    "orders": {
        "max_delivery_attempts": 1,
        "dead_letter_address": "DLA",
        "expiry_address": "EXP",
    },
    "news": {"expiry_address": "EXP"},
    # The dead-letter address pages past its first message: most moved messages are paged,
    # which a load does not read (Recovery's counts leave them out; these do not).
    "DLA": {"max_size_messages": 1, "address_full_policy": "PAGE", "page_size_bytes": 1024},
}


@pytest.fixture(params=["file", "postgresql", "mariadb", "sqlite"])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    for made in _make_case(tmp_path, request.param):
        made.config = made.config.replace(address_settings=SETTINGS)
        yield made


def _fill(config: StoreConfig) -> None:
    """4 messages dead-lettered from ``orders`` (one acknowledged off the dead-letter queue
    afterwards), 2 expired from ``orders`` and 1 from ``news``, 1 left on ``orders``."""
    now = [NOW]
    with StorageManager(open_store(config), clock=lambda: now[0]) as sm:
        sm.load()
        for address, queue in (("orders", "orders.q"), ("news", "news.q")):
            sm.create_address(address)
            sm.create_queue(queue, address=address)
        for address, queue in (("DLA", "dead"), ("EXP", "expired")):
            sm.create_address(address, routing_types=("MULTICAST",))
            sm.create_queue(queue, address=address, routing_type="MULTICAST")
        for i in range(5):
            sm.send(Message("orders", b"poison-%d" % i))
        for d in sm.receive("orders.q", 5):
            sm.cancel("orders.q", d.message.message_id)  # type: ignore[arg-type]
        (first,) = sm.receive("dead", 1)
        sm.ack("dead", first.message.message_id)  # type: ignore[arg-type]
        for address in ("orders", "orders", "news"):
            sm.send(Message(address, b"late", expiration=NOW + 10))
        sm.send(Message("orders", b"kept"))
        now[0] += 20
        assert sm.expire() == 3


def test_print_ends_with_the_dead_lettered_and_expired_counts(case: Case) -> None:
    _fill(case.config)
    done = _print(case)
    assert done.returncode == 0, done.stderr
    last = done.stdout.rstrip().splitlines()[-1]
    assert last == (
        "delivery policies: dead-lettered waiting: orders 4; expired waiting: news 1, "
        "orders 2 (by original address, of 8 messages)"
    )
    (moved,) = [e for e in _json(_print(case, "--json")) if e["kind"] == "moved"]
    assert moved == {
        "kind": "moved",
        "dead_lettered": {"orders": 4},
        "expired": {"news": 1, "orders": 2},
    }


def test_no_move_is_none_and_skip_journal_leaves_it_out(case: Case) -> None:
    with StorageManager(open_store(case.config)) as sm:
        sm.load()
        sm.create_address("orders")
        sm.create_queue("orders.q", address="orders")
        sm.send(Message("orders", b"plain"))
    assert moved_counts(case.config).messages == 1
    out = _print(case).stdout.rstrip().splitlines()
    assert out[-1] == (
        "delivery policies: dead-lettered waiting: none; expired waiting: none "
        "(by original address, of 1 messages)"
    )
    assert "delivery policies" not in _print(case, "--skip-journal").stdout
