"""``store.perf.messaging_run`` and ``store.perf.messaging_workload``: the messaging workload
of ``store perf``, its clean-restart and kill -9 checks, and the check itself against hand-made
ledgers.

The runs are short (about a second of workload, the worker killed within half a second); the
check's own tests build a store with known messages and a ledger that lies about them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from store import ConfigError, StoreConfig, open_store
from store.messaging import Message, StorageManager
from store.perf.messaging_run import MessagingPerfOptions, run_messaging_perf
from store.perf.messaging_workload import (
    PAGED_ADDRESS,
    PREFIX,
    Ledger,
    WorkloadSpec,
    check_recovered,
    ensure_destinations,
    perf_config,
)
from tests.support.backends import file_config_mapping, unique_prefix
from tests.support.db_backends import db_backend

SHORT = dict(seconds=1.0, crash_seconds=0.5, seed=7)


def file_config(tmp_path: Path) -> StoreConfig:
    return StoreConfig.from_mapping(file_config_mapping(tmp_path, "NIO"))


def leftovers(config: StoreConfig) -> list[str]:
    """The names of perf's queues still in the store (opens, loads and closes it)."""
    with StorageManager(open_store(config)) as sm:
        sm.load()
        return [q.name for q in sm.queues() if q.name.startswith(PREFIX)]


def test_messaging_perf_on_the_file_store_measures_crashes_and_verifies(tmp_path):
    config = file_config(tmp_path)

    result = run_messaging_perf(config, MessagingPerfOptions(**SHORT))

    assert result.verified
    assert result.store == "file" and result.journal_type == "NIO"
    assert result.sends > 0 and result.acks > 0 and result.sends_per_second > 0
    assert {"send", "ack", "commit"} <= set(result.latency)
    assert result.operations["tx_send"] > 0 and result.operations["tx_ack"] > 0
    assert result.reopen is not None and result.reopen.sends >= result.sends
    crash = result.crash
    assert crash is not None and crash.killed, "the worker was killed, not ended"
    assert crash.check.sends > 0 and crash.check.acks > 0, "the worker reported over its pipe"
    assert leftovers(config) == [], "perf removes its queues at the end"


def test_the_paged_address_pages_and_large_messages_reach_the_large_store(tmp_path, monkeypatch):
    """The workload exercises paging and large messages (spied on where the manager does
    them: pages and large bodies are gone again once everything is acknowledged).

    Regular bodies of 48 KiB: two waiting messages fill the paged address's 64 KiB, so it
    pages whatever the machine's speed (with 1 KiB bodies a consumer that kept up on a slow
    day left fewer than 64 waiting and nothing paged)."""
    import store.messaging.state as state
    from store.messaging.pager import Pager

    paged: list[str] = []
    large: list[int] = []
    page, store_body = Pager.page, state.store_body

    def spy_page(self, address, *args, **kwargs):  # type: ignore[no-untyped-def]
        paged.append(address)
        return page(self, address, *args, **kwargs)

    def spy_body(large_store, mid, body, limit):  # type: ignore[no-untyped-def]
        inline, size = store_body(large_store, mid, body, limit)
        if inline is None:
            large.append(size)
        return inline, size

    monkeypatch.setattr(Pager, "page", spy_page)
    monkeypatch.setattr(state, "store_body", spy_body)
    options = MessagingPerfOptions(
        seconds=1.0, consumers=1, size=48 * 1024, large_ratio=0.2, crash=False
    )

    result = run_messaging_perf(file_config(tmp_path), options)

    assert result.verified and result.crash is None
    assert paged and set(paged) == {PAGED_ADDRESS}
    assert large and min(large) > 102400


def test_messaging_perf_on_sqlite_verifies(tmp_path):
    spec = db_backend("sqlite")
    config = spec.make_config(tmp_path, unique_prefix())
    try:
        result = run_messaging_perf(config, MessagingPerfOptions(**SHORT))
    finally:
        spec.cleanup(config)
    assert result.verified and result.store == "database"
    assert result.crash is not None and result.crash.killed and result.crash.check.sends > 0


def test_messaging_perf_with_zero_persistence_checks_nothing():
    config = StoreConfig.from_mapping({"persistence-enabled": False})

    result = run_messaging_perf(config, MessagingPerfOptions(seconds=0.5, seed=1))

    assert result.verified and result.reopen is None and result.crash is None
    assert result.sends > 0


def test_a_fake_acknowledged_send_fails_the_crash_check(tmp_path):
    def lose_one(ledger: Ledger) -> None:
        ledger.record("send", PAGED_ADDRESS, 1 << 60)

    result = run_messaging_perf(
        file_config(tmp_path), MessagingPerfOptions(**SHORT, before_check=lose_one)
    )

    assert not result.verified
    assert result.crash is not None and result.crash.check.lost == 1
    assert f"message {1 << 60} lost" in result.crash.check.problems[0]


def test_leftovers_of_an_interrupted_run_are_removed_first(tmp_path):
    config = perf_config(file_config(tmp_path))
    with StorageManager(open_store(config)) as sm:
        sm.load()
        ensure_destinations(sm, WorkloadSpec(queues=2))
        sm.send(Message(PAGED_ADDRESS, b"left behind"))

    result = run_messaging_perf(config, MessagingPerfOptions(seconds=0.5, crash=False))

    assert result.verified and result.reopen is not None and result.reopen.recovered == 0
    assert leftovers(config) == []


def _store_with(tmp_path: Path, n: int) -> tuple[StorageManager, list[int]]:
    sm = StorageManager(open_store(perf_config(file_config(tmp_path))))
    sm.load()
    ensure_destinations(sm, WorkloadSpec(queues=1))
    ids = [sm.send(Message(PAGED_ADDRESS, b"m%d" % k)) for k in range(n)]
    return sm, [i for i in ids if i is not None]


def test_check_passes_when_the_store_holds_what_was_acknowledged(tmp_path):
    sm, ids = _store_with(tmp_path, 3)
    ledger = Ledger()
    for mid in ids:
        ledger.record("send", PAGED_ADDRESS, mid)
    ledger.record("send", PAGED_ADDRESS, 10**12)  # sent, received, ack in flight: gone
    ledger.record("receive", PAGED_ADDRESS, 10**12)
    with sm:
        check, found = check_recovered(sm, ledger, [PAGED_ADDRESS])
    assert check.verified and check.recovered == 3 and check.in_doubt == 1
    assert found == {PAGED_ADDRESS: ids}


def test_check_reports_an_acknowledged_ack_whose_message_came_back(tmp_path):
    sm, ids = _store_with(tmp_path, 2)
    ledger = Ledger()
    ledger.record("send", PAGED_ADDRESS, ids[0])
    ledger.record("ack", PAGED_ADDRESS, ids[0])
    with sm:
        check, _ = check_recovered(sm, ledger, [PAGED_ADDRESS])
    assert not check.verified and check.undone == 1 and check.lost == 0
    assert "its ack was acknowledged" in check.problems[0]


def test_check_reports_an_acknowledged_send_that_is_gone(tmp_path):
    sm, _ids = _store_with(tmp_path, 1)
    ledger = Ledger()
    ledger.record("send", PAGED_ADDRESS, 10**12)
    with sm:
        check, _ = check_recovered(sm, ledger, [PAGED_ADDRESS])
    assert not check.verified and check.lost == 1


def test_ledger_refuses_an_unknown_kind():
    with pytest.raises(ValueError, match="send, receive or ack"):
        Ledger().record("cancel", "q", 1)


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"seconds": 0}, id="seconds"),
        pytest.param({"producers": 0}, id="producers"),
        pytest.param({"queues": 0}, id="queues"),
        pytest.param({"tx_ratio": 1.5}, id="tx-ratio"),
        pytest.param({"large_ratio": -0.1}, id="large-ratio"),
        pytest.param({"crash_seconds": 0}, id="crash-seconds"),
    ],
)
def test_bad_options_are_config_errors_naming_the_option(changes):
    key = "--" + next(iter(changes)).replace("_", "-")
    with pytest.raises(ConfigError, match=key):
        MessagingPerfOptions(**changes)
