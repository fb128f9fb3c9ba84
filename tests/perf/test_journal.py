"""``store.perf``: the main job's workload, its recovery check, and the sync-rate probe.

Every test runs on real stores in ``tmp_path`` (small journal files, so perf's records roll
across many files and reclaim runs). Tests that break verification do it for real, between
the two runs, through ``PerfOptions.between_runs``: they open the closed store and delete or
add a record behind perf's back.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from store import ConfigError, RecordTooLargeError, StoreConfig, open_store
from store.perf import (
    PERF_ADD_TYPE,
    PERF_UPDATE_TYPE,
    LatencySummary,
    PerfJournalOptions,
    PerfOptions,
    PerfProgress,
    run_perf,
    run_perf_journal,
)
from tests.support.backends import file_config_mapping

# Big enough that every kind of operation shows up, small enough for about a second.
SMALL_RUN = 2000


def file_config(tmp_path: Path, journal_type: str = "NIO") -> StoreConfig:
    return StoreConfig.from_mapping(file_config_mapping(tmp_path, journal_type))


def perf_ids(config: StoreConfig) -> dict[int, list[tuple[int, bytes]]]:
    """The records of perf's types in the store, by id (opens, loads and closes it)."""
    with open_store(config) as store:
        store.bindings.load()
        found: dict[int, list[tuple[int, bytes]]] = {}
        for rec in store.messages.load().records:
            if rec.user_record_type in (PERF_ADD_TYPE, PERF_UPDATE_TYPE):
                found.setdefault(rec.id, []).append((rec.user_record_type, rec.data))
        return found


@pytest.mark.parametrize("journal_type", ["NIO", "MAPPED"])
def test_perf_on_the_file_store_verifies_rolls_files_and_reports_sane_figures(
    tmp_path, journal_type
):
    reports: list[PerfProgress] = []
    result = run_perf(
        file_config(tmp_path, journal_type),
        PerfOptions(records=SMALL_RUN, threads=4, seed=7),
        progress=reports.append,
    )

    assert result.verified, result.verification.problems
    assert result.store == "file" and result.journal_type == journal_type
    assert result.verification.durable and result.verification.checked > 0
    assert SMALL_RUN <= result.records < SMALL_RUN + 4 * 12
    assert result.records_per_second > 0 and result.mb_per_second > 0
    assert result.payload_bytes >= 100 * result.operations["add"]
    assert set(result.operations) == {
        "add", "update", "delete", "tx_committed", "tx_rolled_back", "tx_prepared",
    }  # fmt: skip
    assert result.journal_stats.files > 3, "small files: records must roll across many files"
    for group in ("append", "commit", "prepare", "rollback"):
        s = result.latency[group]
        assert s.count > 0
        assert 0 < s.p50 <= s.p90 <= s.p99 <= s.p999 <= s.max
    assert result.latency["append"].count == sum(
        result.operations[k] for k in ("add", "update", "delete")
    )
    assert result.latency["commit"].count == result.operations["tx_committed"]
    assert result.reopen_seconds > 0 and result.write_seconds > 0
    assert [p.phase for p in reports if p.phase != "write"] == [
        "load", "close", "reopen", "verify", "cleanup", "done",
    ]  # fmt: skip
    writes = [p for p in reports if p.phase == "write"]
    assert writes and writes[-1].records <= result.records
    assert result.removed == result.verification.checked
    assert perf_ids(file_config(tmp_path, journal_type)) == {}, "perf must clean up"


def test_perf_with_zero_persistence_expects_nothing_back_and_verifies():
    config = StoreConfig.from_mapping({"persistence-enabled": False})
    result = run_perf(config, PerfOptions(records=SMALL_RUN, threads=2))

    assert result.verified
    assert result.store == "none" and result.journal_type is None
    assert not result.verification.durable and result.verification.checked == 0
    assert result.records >= SMALL_RUN and result.records_per_second > 0
    assert result.latency["append"].count > 0


def test_perf_runs_for_the_given_seconds(tmp_path):
    result = run_perf(file_config(tmp_path), PerfOptions(seconds=0.5, threads=2))

    assert result.verified
    assert 0.5 <= result.write_seconds < 5
    assert result.records > 0


def test_perf_uses_ids_above_the_users_records_and_leaves_them_alone(tmp_path):
    config = file_config(tmp_path)
    with open_store(config) as store:
        store.bindings.load()
        store.bindings.append_add(5000, 24, b"id counter")
        store.messages.load()
        for id in range(1, 51):
            store.messages.append_add(id, 45, f"user {id}".encode())
        store.messages.append_add_tx(900, 899, 45, b"prepared body")
        store.messages.append_prepare(900, b"xid-900")

    result = run_perf(config, PerfOptions(records=500, threads=2))

    assert result.verified and result.records_before == 50
    assert result.first_id > 5000, "perf's range starts above every id the loads returned"
    with open_store(config) as store:
        store.bindings.load()
        loaded = store.messages.load()
    assert [(r.id, r.data) for r in loaded.records] == [
        (id, f"user {id}".encode()) for id in range(1, 51)
    ]
    assert [(p.tx_id, p.xid) for p in loaded.prepared] == [(900, b"xid-900")]


def test_keep_leaves_perfs_records_with_their_exact_history(tmp_path):
    config = file_config(tmp_path)
    result = run_perf(config, PerfOptions(records=500, threads=2, keep=True))

    assert result.verified and result.kept and result.removed == 0
    kept = perf_ids(config)
    assert len(kept) == result.verification.checked
    assert all(result.first_id <= id <= result.last_id for id in kept)
    for entries in kept.values():
        types = [t for t, _ in entries]
        assert types[0] == PERF_ADD_TYPE and set(types[1:]) <= {PERF_UPDATE_TYPE}


def delete_one_perf_record(config: StoreConfig) -> None:
    """Between the runs: delete one of perf's acknowledged records, for real."""
    with open_store(config) as store:
        store.bindings.load()
        victim = next(
            r.id for r in store.messages.load().records if r.user_record_type == PERF_ADD_TYPE
        )
        store.messages.append_delete(victim, sync=True)


def test_a_record_deleted_behind_perfs_back_fails_verification(tmp_path):
    result = run_perf(
        file_config(tmp_path),
        PerfOptions(records=500, threads=2, between_runs=delete_one_perf_record),
    )

    v = result.verification
    assert not result.verified
    assert (v.missing, v.mismatched, v.unexpected) == (1, 0, 0)
    assert "missing" in v.problems[0]
    assert perf_ids(file_config(tmp_path)) == {}, "cleanup still removes what is left"


def test_a_deleted_id_that_comes_back_fails_verification(tmp_path):
    def resurrect(config: StoreConfig) -> None:
        with open_store(config) as store:
            store.bindings.load()
            ids = {r.id for r in store.messages.load().records}
            low = min(i for i in ids if i >= 1)
            gone = next(i for i in range(low, low + 100_000) if i not in ids)
            store.messages.append_add(gone, PERF_ADD_TYPE, b"back from the dead", sync=True)

    result = run_perf(
        file_config(tmp_path), PerfOptions(records=500, threads=2, between_runs=resurrect)
    )

    v = result.verification
    assert not result.verified
    assert (v.missing, v.mismatched, v.unexpected) == (0, 0, 1)
    assert "came back" in v.problems[0]


def test_a_record_whose_bytes_changed_fails_verification(tmp_path):
    def overwrite(config: StoreConfig) -> None:
        with open_store(config) as store:
            store.bindings.load()
            victim = store.messages.load().records[0].id
            store.messages.append_update(victim, PERF_UPDATE_TYPE, b"not perf's bytes", sync=True)

    result = run_perf(
        file_config(tmp_path), PerfOptions(records=500, threads=2, between_runs=overwrite)
    )

    assert not result.verified
    assert result.verification.mismatched == 1


def test_a_store_error_in_a_writer_is_raised_and_the_store_released(tmp_path):
    config = file_config(tmp_path)
    with pytest.raises(RecordTooLargeError):
        run_perf(config, PerfOptions(records=500, threads=2, sizes=(200_000,)))

    with open_store(config) as store:  # the lock was released: a new open works
        store.bindings.load()
        store.messages.load()


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"threads": 0}, id="no-threads"),
        pytest.param({"tx_ratio": 1.5}, id="tx-ratio-above-1"),
        pytest.param({"seconds": 0}, id="zero-seconds"),
        pytest.param({"records": 0}, id="zero-records"),
        pytest.param({"sizes": ()}, id="no-sizes"),
    ],
)
def test_bad_options_are_config_errors_naming_the_option(changes):
    with pytest.raises(ConfigError) as info:
        PerfOptions(**changes)
    assert info.value.key is not None and info.value.key.lstrip("-")


def test_latency_summary_uses_nearest_rank_percentiles():
    s = LatencySummary.of([n * 1_000_000 for n in range(1000, 0, -1)])  # 1..1000 ms

    assert (s.count, s.p50, s.p90, s.p99, s.p999, s.max) == (1000, 500, 900, 990, 999, 1000)
    assert LatencySummary.of([]).count == 0


def test_perf_verifies_on_every_backend(backend, store_factory):
    """The workload and its recovery check hold on every back-end the contract covers."""
    result = run_perf(store_factory.config, PerfOptions(records=300, threads=3))

    assert result.verified, result.verification.problems
    assert result.verification.durable == backend.persistent


# --------------------------------------------------------------------------- perf-journal


@pytest.mark.parametrize("journal_type", ["NIO", "MAPPED", "ASYNCIO"])
def test_perf_journal_with_five_writes_and_one_try_completes(tmp_path, journal_type):
    file = tmp_path / "journal" / "perf-journal.tmp"
    done: list[tuple[int, int]] = []
    result = run_perf_journal(
        PerfJournalOptions(file=str(file), writes=5, tries=1, journal_type=journal_type),
        progress=lambda n, total: done.append((n, total)),
    )

    assert result.requested_type == journal_type
    assert result.journal_type in (journal_type, "NIO")  # ASYNCIO may fall back
    assert len(result.try_ms) == 1 and result.best_ms > 0
    assert result.writes_per_ms == pytest.approx(5 / result.best_ms)
    assert result.buffer_timeout_ns == round(result.best_ms / 5 * 1e6)
    assert done == [(1, 1)]
    assert not file.exists(), "the scratch file is deleted"


def test_perf_journal_takes_the_fastest_try(tmp_path):
    result = run_perf_journal(
        PerfJournalOptions(file=str(tmp_path / "p.tmp"), writes=20, tries=3, sync_writes=True)
    )

    assert len(result.try_ms) == 3 and result.best_ms == min(result.try_ms)
    assert result.in_flight == 1


def test_perf_journal_asyncio_needs_aligned_blocks(tmp_path):
    options = PerfJournalOptions(
        file=str(tmp_path / "p.tmp"), block_size=1000, writes=5, tries=1, journal_type="ASYNCIO"
    )
    try:
        result = run_perf_journal(options)
    except ConfigError as exc:
        assert exc.key == "--block-size"
    else:  # no libaio / O_DIRECT here: the NIO fallback has no alignment rule
        assert result.journal_type == "NIO"
    assert not os.path.exists(tmp_path / "p.tmp")
