"""`store ha status` and `store ha run`'s refusals, through the real entry point (the
failovers of `store ha run` are in tests/ha)."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

from store import StoreConfig
from store.cli.main import main
from store.ha import open_node_manager
from tests.ha.nodes import Node, write_toml


def _sqlite(tmp_path: Path) -> tuple[Path, StoreConfig]:
    mapping = {
        "database-store": {
            "jdbc-connection-url": f"jdbc:sqlite:{tmp_path / 'store.db'}",
            "jdbc-lock-renew-period": 200,
            "jdbc-lock-expiration": 1500,
            "jdbc-network-timeout": 1500,
        }
    }
    return write_toml(mapping, tmp_path / "store.toml"), StoreConfig.from_mapping(mapping)


def test_status_shows_holder_generation_expiry_node_id_and_state(tmp_path, capsys) -> None:
    path, config = _sqlite(tmp_path)
    nm = open_node_manager(config)
    try:
        nm.start_primary(timeout=5)
        assert main(["ha", "status", "--config", str(path), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["holder"] == nm.lease.holder
        assert status["generation"] == 1 and status["state"] == "ACTIVE"
        assert status["node_id"] == nm.node_id and status["kind"] == "database"
        assert 0 < status["expires_at_ms"] - status["database_now_ms"] <= 1500
        assert main(["ha", "status", "--config", str(path)]) == 0
        text = capsys.readouterr().out
        assert f"live lock: held by {nm.lease.holder}, expires at 20" in text
        # ISO 8601 in UTC and the time left (issue 44: it was epoch milliseconds)
        assert re.search(
            r"expires at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \(in \d+\.\d s\)", text
        ), text
        assert "generation: 1\n" in text and "state: ACTIVE\n" in text
    finally:
        nm.close()
    assert main(["ha", "status", "--config", str(path)]) == 0
    assert "live lock: not held" in capsys.readouterr().out


def test_status_of_a_file_store(tmp_path, capsys) -> None:
    path = write_toml({"journal-directory": str(tmp_path / "j")}, tmp_path / "f.toml")
    assert main(["ha", "status", "--config", str(path), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["kind"] == "file" and status["holder"] is None
    assert status["expires_at_ms"] is None and status["state"] == "NOT_STARTED"
    assert (tmp_path / "j" / "server.lock").exists()  # the lock directory follows the journal


def test_run_without_a_role_is_a_usage_error(tmp_path, capsys) -> None:
    path, _ = _sqlite(tmp_path)
    assert main(["ha", "run", "--config", str(path)]) == 2
    assert "--role" in capsys.readouterr().err


def test_run_times_out_while_another_node_is_live(tmp_path, capsys) -> None:
    path, config = _sqlite(tmp_path)
    nm = open_node_manager(config)
    try:
        nm.start_primary(timeout=5)
        code = main(["ha", "run", "--config", str(path), "--role", "primary", "--timeout", "0.5"])
        assert code == 3
        assert f"live lock held by {nm.lease.holder}" in capsys.readouterr().err
    finally:
        nm.close()


def test_sigterm_stops_a_waiting_backup_cleanly(tmp_path) -> None:
    """A backup still waiting to go live stops at SIGTERM with exit 0, and says so."""
    path, config = _sqlite(tmp_path)
    nm = open_node_manager(config)
    try:
        nm.start_primary(timeout=5)
        backup = Node(path, "backup")
        try:
            deadline = time.monotonic() + 30
            while not any(e.startswith("waiting to go live") for e in backup.errors):
                assert time.monotonic() < deadline, backup.stderr()
                time.sleep(0.05)
            time.sleep(0.3)
            backup.signal(signal.SIGTERM)
            assert backup.finish(10) == 0
            assert "stopped before going live as backup" in backup.stderr()
            assert nm.is_live and backup.acks == []
        finally:
            backup.kill()
    finally:
        nm.close()
