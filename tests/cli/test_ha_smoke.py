"""``store ha run`` as an operator's smoke test: what a node wrote is a store like any other,
which ``store data verify`` finds clean (the writer sends messages through the storage
manager, not raw records of a user type that means something else)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from store import StoreConfig
from store.db.migrate import drop_schema
from store.messaging import StorageManager
from store.node import SMOKE_QUEUE
from store.store import open_store
from tests.ha.conftest import ha_mapping
from tests.ha.nodes import Node, write_toml
from tests.support.backends import unique_prefix
from tests.support.cli import run_store


@pytest.mark.parametrize("which", ["postgresql", "sqlite"])
def test_what_ha_run_wrote_verifies_clean_and_loads_as_messages(tmp_path: Path, which: str) -> None:
    mapping = ha_mapping(tmp_path, unique_prefix(), which)
    config = StoreConfig.from_mapping(mapping)
    path = write_toml(mapping, tmp_path / "node.toml")
    try:
        for _ in range(2):  # a restart reuses the queue
            node = Node(path, "primary")
            try:
                node.wait_live(30)
                node.wait_acks(20, 30)
                assert node.stop() == 0, node.stderr()
            finally:
                node.kill()
        acked = {int(i) for i in node.acks}
        verify = run_store("data", "verify", "--config", str(path))
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert "DAMAGED" not in verify.stdout
        done = run_store("data", "print", "--config", str(path), "--json", "--safe")
        assert done.returncode == 0, done.stderr
        kinds = {json.loads(line).get("kind") for line in done.stdout.splitlines()}
        assert "error" not in kinds
        with StorageManager(open_store(config)) as sm:
            sm.load()
            assert [q.name for q in sm.queues()] == [SMOKE_QUEUE]
            assert acked <= {m.message_id for m, _ in sm.browse()}
    finally:
        drop_schema(config)
