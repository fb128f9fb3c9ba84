"""The operators' commands as a user runs them: ``store …`` through its entry point (in this
process; in a subprocess where a working folder is given), on the file store
and on PostgreSQL (the ``store data`` commands have their own modules; these are the rest:
``db``, ``ha status``, ``mask``, ``perf-journal``, and ``-q`` silencing progress)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from store import StoreConfig
from store.db.migrate import drop_schema
from tests.ha.nodes import write_toml
from tests.support.backends import unique_prefix
from tests.support.cli import ROOT, run_store, run_store_here
from tests.support.db_backends import new_store_mapping


def store(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``store ARGS`` through ``store.cli.main.main`` in this process, or in a subprocess in
    ``cwd`` when one is given; the completed process (never raises on exit status)."""
    return run_store(*args, cwd=cwd) if cwd is not None else run_store_here(*args)


@pytest.fixture
def pg_config(tmp_path: Path) -> Any:
    """(toml path, StoreConfig) of a PostgreSQL store whose tables do not exist yet; every
    table it gets is dropped after the test."""
    mapping = new_store_mapping(tmp_path, unique_prefix(), "postgresql")
    config = StoreConfig.from_mapping(mapping)
    yield write_toml(mapping, tmp_path / "pg.toml"), config
    drop_schema(config)


def test_db_upgrade_current_check_and_sql_on_postgresql(pg_config: Any) -> None:
    path, config = pg_config
    before = store("db", "current", "--config", str(path))
    assert before.returncode == 1, before.stderr  # no schema yet: a finding, not a crash
    done = store("db", "upgrade", "--config", str(path))
    assert done.returncode == 0, done.stderr
    current = store("db", "current", "--config", str(path))
    assert current.returncode == 0 and current.stdout.strip(), current.stderr
    check = store("db", "check", "--config", str(path))
    assert check.returncode == 0, check.stdout + check.stderr
    ddl = store("db", "sql", "--dialect", "postgresql", "--config", str(path))
    assert ddl.returncode == 0
    names = config.database_store
    assert f"CREATE TABLE {names.bindings_table_name}".lower() in ddl.stdout.lower()
    assert f"CREATE TABLE {names.message_table_name}".lower() in ddl.stdout.lower()


def test_ha_status_on_postgresql_and_on_the_file_store(pg_config: Any, tmp_path: Path) -> None:
    path, _config = pg_config
    assert store("db", "upgrade", "--config", str(path)).returncode == 0
    done = store("ha", "status", "--config", str(path), "--json")
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    assert status["kind"] == "database" and status["holder"] is None
    file_toml = write_toml({"journal-directory": str(tmp_path / "j")}, tmp_path / "f.toml")
    done = store("ha", "status", "--config", str(file_toml), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["kind"] == "file"


def test_mask_and_unmask_round_trip() -> None:
    masked = store("mask", "s3cret")
    assert masked.returncode == 0, masked.stderr
    value = masked.stdout.strip().splitlines()[-1]
    assert value.startswith("ENC(") and "s3cret" not in masked.stdout
    plain = store("mask", "--unmask", value)
    assert plain.returncode == 0 and plain.stdout.strip().splitlines()[-1] == "s3cret"


def test_perf_journal_measures_and_recommends_a_buffer_timeout(tmp_path: Path) -> None:
    done = store(
        "perf-journal", "--file", str(tmp_path / "t.tmp"), "--writes", "20", "--tries", "1",
        "--journal-type", "NIO", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["writes_per_ms"] > 0 and result["buffer_timeout_ns"] > 0
    assert not (tmp_path / "t.tmp").exists()  # the scratch file is deleted


def _stderr_on_a_terminal(*args: str) -> tuple[int, str]:
    """Run ``store ARGS`` with stderr on a pseudo-terminal (progress displays draw only on a
    terminal); returns the exit status and what reached the terminal."""
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120", "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "store.cli.main", *args],
        stdout=subprocess.DEVNULL, stderr=slave, env=env,
    )  # fmt: skip
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    return proc.wait(timeout=120), seen.decode(errors="replace")


def test_quiet_silences_the_progress_display(tmp_path: Path) -> None:
    args = ("perf", "--journal", "--data-dir", str(tmp_path / "d"), "--records", "3000")
    code, shown = _stderr_on_a_terminal(*args)
    assert code == 0, shown
    assert "records" in shown  # the display is there by default, on a terminal
    code, shown = _stderr_on_a_terminal(*args, "-q")
    assert code == 0, shown
    assert shown.strip() == ""


def test_perf_on_postgresql_runs_crashes_and_verifies(pg_config: Any) -> None:
    path, _config = pg_config
    done = store(
        "perf", "--config", str(path), "--seconds", "1", "--crash-seconds", "1",
        "--producers", "2", "--consumers", "2", "--queues", "2", "--json", "-q",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["store"] == "database" and result["sends"] > 0 and result["verified"]
    crash = result["crash"]
    assert crash["killed"] and crash["check"]["problems"] == []
    assert crash["check"]["sends"] > 0 and crash["check"]["lost"] == 0
