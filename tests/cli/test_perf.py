"""``store perf`` and ``store perf-journal`` through the real entry point, on real files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store import StoreConfig, load_config, open_store
from store.cli.main import build_parser, main
from store.cli.perf import perf_command
from store.perf import PERF_ADD_TYPE
from store.perf.messaging_workload import PAGED_ADDRESS, Ledger

CONFIG = """\
journal-type = "NIO"
journal-directory = "data/journal"
bindings-directory = "data/bindings"
journal-file-size = "64K"
"""


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables fit the terminal and shorten what does not fit: these tests look for whole
    paths in the output, and pytest's temporary paths are long (longer still under xdist)."""
    monkeypatch.setenv("COLUMNS", "400")


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "etc" / "store.toml"
    path.parent.mkdir()
    path.write_text(CONFIG)
    return path


def test_perf_prints_the_results_table_and_exits_0(config_file, capsys):
    code = main(
        ["perf", "--journal", "--config", str(config_file), "--records", "800", "--threads", "3"]
    )

    out, err = capsys.readouterr()
    assert code == 0
    assert "journal-type NIO" in out
    assert str(config_file.parent / "data" / "journal") in out, "folders resolve from the file"
    for text in ("records/s", "MB/s", "VERIFIED", "latency (ms)", "p99.9", "append", "commit"):
        assert text in out
    assert "FAILED" not in out
    assert "verifying" in err, "progress goes to stderr"


def test_perf_json_output_parses_with_every_figure(config_file, capsys):
    code = main(["perf", "--journal", "--config", str(config_file), "--records", "500", "--json"])

    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["verified"] is True and data["store"] == "file"
    assert data["records"] >= 500 and data["records_per_second"] > 0
    assert data["verification"]["checked"] > 0 and data["verification"]["missing"] == 0
    assert set(data["latency"]["append"]) == {"count", "p50", "p90", "p99", "p999", "max"}


def test_perf_without_config_runs_on_the_file_store_under_data(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    code = main(["perf", "--journal", "--records", "300", "--threads", "2", "--keep"])

    out = capsys.readouterr().out
    assert code == 0 and "VERIFIED" in out
    assert (tmp_path / "data" / "journal").is_dir() and (tmp_path / "data" / "bindings").is_dir()
    assert "kept (--keep)" in out


def test_perf_data_dir_places_the_default_store(tmp_path, capsys):
    code = main(
        ["perf", "--journal", "--data-dir", str(tmp_path / "elsewhere"), "--records", "200"]
    )

    assert code == 0
    assert str(tmp_path / "elsewhere" / "journal") in capsys.readouterr().out


def test_perf_exits_1_when_a_record_is_missing_after_reopening(config_file, capsys):
    def delete_one(config: StoreConfig) -> None:
        with open_store(config) as store:
            store.bindings.load()
            records = store.messages.load().records
            victim = next(r.id for r in records if r.user_record_type == PERF_ADD_TYPE)
            store.messages.append_delete(victim, sync=True)

    args = build_parser().parse_args(
        ["perf", "--journal", "--config", str(config_file), "--records", "400"]
    )
    code = perf_command(args, between_runs=delete_one)

    out = capsys.readouterr().out
    assert code == 1
    assert "FAILED" in out and "missing 1" in out and "problem:" in out


def test_perf_zero_persistence_config_verifies(tmp_path, capsys):
    path = tmp_path / "zero.toml"
    path.write_text("persistence-enabled = false\n")

    code = main(["perf", "--journal", "--config", str(path), "--records", "300", "--json"])

    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["store"] == "none" and data["verification"]["durable"] is False


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--config", "x.toml", "--data-dir", "d"], id="config-and-data-dir"),
        pytest.param(["--seconds", "1", "--records", "5"], id="seconds-and-records"),
        pytest.param(["--threads", "0"], id="no-threads"),
        pytest.param(["--sizes", "100,lots"], id="bad-size"),
    ],
)
def test_perf_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(["perf", *argv])
    assert info.value.code == 2


def test_perf_bad_tx_ratio_is_a_config_error_exit_2(tmp_path, capsys):
    code = main(["perf", "--journal", "--data-dir", str(tmp_path), "--tx-ratio", "2"])

    assert code == 2
    assert "--tx-ratio" in capsys.readouterr().err


def test_perf_accepts_sizes_in_artemis_notation(config_file, capsys):
    code = main(
        ["perf", "--journal", "--config", str(config_file), "--records", "200", "--sizes", "1K,2K"]
    )

    assert code == 0 and "sizes 1024/2048 B" in capsys.readouterr().out


def test_perf_no_sync_reports_the_rate_until_durable_and_appends_only(config_file, capsys):
    """Without sync the throughput counts until everything was durable; the rate until the
    last append returned is its own, labelled row (and JSON figure)."""
    code = main(
        ["perf", "--journal", "--config", str(config_file), "--records", "600", "--no-sync"]
    )

    out = capsys.readouterr().out
    assert code == 0 and "no-sync" in out
    assert "throughput" in out and "appends only" in out
    assert "everything was durable after" in out

    code = main(
        [
            "perf",
            "--journal",
            "--config",
            str(config_file),
            "--records",
            "600",
            "--no-sync",
            "--json",
        ]
    )

    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["write_seconds"] >= data["append_seconds"] > 0
    assert data["append_records_per_second"] >= data["records_per_second"] > 0


def test_perf_with_sync_shows_no_appends_only_row(config_file, capsys):
    code = main(["perf", "--journal", "--config", str(config_file), "--records", "300"])

    assert code == 0 and "appends only" not in capsys.readouterr().out


# --------------------------------------------------------------------------- perf-journal


def test_perf_journal_nio_with_five_writes_and_one_try_completes(tmp_path, capsys):
    """CLI-28: ``perf-journal --journal-type NIO --writes 5 --tries 1`` completes."""
    file = tmp_path / "probe.tmp"
    code = main(
        ["perf-journal", "--journal-type", "NIO", "--writes", "5", "--tries", "1",
         "--file", str(file)]
    )  # fmt: skip

    out = capsys.readouterr().out
    assert code == 0
    assert "writes/ms" in out and "recommended journal-buffer-timeout:" in out
    assert not file.exists()


def test_perf_journal_takes_its_defaults_from_the_config(config_file, capsys):
    config_file.write_text(CONFIG.replace('"NIO"', '"MAPPED"'))

    code = main(
        ["perf-journal", "--config", str(config_file), "--writes", "5", "--tries", "2", "--json"]
    )

    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["journal_type"] == "MAPPED" and len(data["try_ms"]) == 2
    assert data["file"] == str(config_file.parent / "data" / "journal" / "perf-journal.tmp")
    assert data["buffer_timeout_ns"] > 0
    assert not Path(data["file"]).exists()


def test_perf_journal_default_file_is_under_data_journal(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    code = main(["perf-journal", "--journal-type", "NIO", "--writes", "5", "--tries", "1"])

    assert code == 0
    assert str(Path("data", "journal", "perf-journal.tmp")) in capsys.readouterr().out
    assert (tmp_path / "data" / "journal").is_dir()
    assert list((tmp_path / "data" / "journal").iterdir()) == []


def test_perf_journal_unknown_type_exits_2(capsys):
    assert main(["perf-journal", "--journal-type", "FAST", "--writes", "5"]) == 2
    assert "--journal-type" in capsys.readouterr().err


# -- what a newcomer hit (issue 7) -------------------------------------------------------------


def _store_perf(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "store.cli.main", "perf", "--journal", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )


def _perf_records(config_file: Path) -> int:
    config = load_config(config_file)
    with open_store(config) as store:
        store.bindings.load()
        return sum(r.user_record_type == PERF_ADD_TYPE for r in store.messages.load().records)


def test_perf_sizes_too_large_names_the_size_not_a_tuple(config_file, capsys):
    code = main(["perf", "--journal", "--config", str(config_file), "--sizes", "100,3G"])

    err = capsys.readouterr().err
    assert code == 2
    assert "3221225472 bytes" in err and "(" not in err.split("allowed")[0]


def test_perf_keep_does_not_say_it_removes_records(config_file, capsys):
    code = main(["perf", "--journal", "--config", str(config_file), "--records", "300", "--keep"])

    out, err = capsys.readouterr()
    assert code == 0
    assert "removing" not in err and "kept (--keep)" in out
    assert _perf_records(config_file) > 0
    assert main(["perf", "--journal", "--config", str(config_file), "--clean"]) == 0
    assert "removed" in capsys.readouterr().out
    assert _perf_records(config_file) == 0


def test_perf_interrupted_says_what_it_left_and_clean_removes_it(config_file):
    proc = _store_perf("--config", str(config_file), "--seconds", "60", cwd=config_file.parent)
    assert proc.stderr is not None
    for line in proc.stderr:  # progress goes to stderr; wait until records are being written
        if "writing" in line:
            break
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)

    assert proc.returncode == 130
    assert "interrupted" in err and "store perf --clean --config" in err
    assert "Traceback" not in err
    assert _perf_records(config_file) > 0, "the run wrote records before the interrupt"
    clean = _store_perf("--config", str(config_file), "--clean", cwd=config_file.parent)
    _out, err = clean.communicate(timeout=60)
    assert clean.returncode == 0, err
    assert _perf_records(config_file) == 0


def test_perf_piped_into_head_exits_0_quietly(config_file):
    proc = _store_perf("--config", str(config_file), "--records", "400", cwd=config_file.parent)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader goes away before anything is printed, as `| head -0`
    err = proc.stderr.read()
    proc.wait(60)

    assert proc.returncode == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err


# -- the messaging workload (the default) ------------------------------------------------------

MESSAGING = ["--seconds", "1", "--crash-seconds", "0.5", "--seed", "5"]


def test_perf_messaging_prints_rates_latency_and_both_checks(config_file, capsys):
    code = main(["perf", "--config", str(config_file), *MESSAGING])

    out, err = capsys.readouterr()
    assert code == 0, out
    assert "journal-type NIO" in out
    for text in ("messages/s sent", "messages/s acked", "latency (ms)", "p50", "p99", "max"):
        assert text in out
    for call in ("send", "ack", "commit"):
        assert f"│ {call} " in out
    assert "clean restart" in out and "worker killed with kill -9" in out
    assert out.count("VERIFIED") == 2 and "FAILED" not in out
    assert "worker running until kill -9" in err, "progress goes to stderr"


def test_perf_messaging_json_has_every_figure(config_file, capsys):
    code = main(["perf", "--config", str(config_file), *MESSAGING, "--json"])

    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["verified"] is True and data["store"] == "file"
    assert data["sends_per_second"] > 0 and data["acks_per_second"] > 0
    assert set(data["latency"]["send"]) == {"count", "p50", "p90", "p99", "p999", "max"}
    assert data["crash"]["killed"] is True and data["crash"]["check"]["sends"] > 0


def test_perf_messaging_without_config_runs_under_data(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    code = main(["perf", "--seconds", "0.5", "--no-crash"])

    assert code == 0 and "VERIFIED" in capsys.readouterr().out
    assert (tmp_path / "data" / "journal").is_dir() and (tmp_path / "data" / "paging").is_dir()


def test_perf_messaging_exits_1_with_a_report_when_an_acknowledged_send_is_lost(
    config_file, capsys
):
    def lose_one(ledger: Ledger) -> None:
        ledger.record("send", PAGED_ADDRESS, 1 << 60)

    args = build_parser().parse_args(["perf", "--config", str(config_file), *MESSAGING])
    code = perf_command(args, before_check=lose_one)

    out = capsys.readouterr().out
    assert code == 1
    assert "FAILED" in out and "lost 1," in out
    assert f"problem: {PAGED_ADDRESS}: message {1 << 60} lost" in out


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        pytest.param(["--threads", "3"], "--threads", id="threads-without-journal"),
        pytest.param(["--records", "30"], "--records", id="records-without-journal"),
        pytest.param(["--journal", "--producers", "2"], "--producers", id="producers-journal"),
        pytest.param(["--journal", "--no-crash"], "--crash", id="crash-with-journal"),
    ],
)
def test_perf_options_of_the_other_workload_exit_2(tmp_path, argv, option, capsys):
    code = main(["perf", "--data-dir", str(tmp_path), *argv])

    assert code == 2
    assert f"{option} is not an option of store perf" in capsys.readouterr().err
