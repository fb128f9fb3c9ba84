"""A process that ends without closing its file store (issue 44: a ``.jrn.tmp`` left on a
healthy store after the README's examples): the journal makes its ready file on a daemon
thread right after a load, and interpreter exit killed that thread in the middle of making
it. Exit now waits for it (``store.file.segments``), so nothing is left behind and
``store data verify`` finds nothing to warn of; a later open loads the record."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from store import StoreConfig, open_store
from store.data import verify_store
from tests.support.backends import file_config_mapping

ROOT = Path(__file__).resolve().parents[2]


def test_a_process_that_never_closes_its_store_leaves_no_temporary_file(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.file.unclosed_child", str(tmp_path), "1.0"],
        capture_output=True, text=True, env=env, timeout=120, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    left = sorted(p.name for p in tmp_path.rglob("*.tmp"))
    assert left == [], left
    config = StoreConfig.from_mapping(file_config_mapping(tmp_path, "NIO"))
    found = verify_store(config)
    assert found.ok and not any(p.warning_count for p in found.parts), found
    with open_store(config) as store:
        store.bindings.load()
        assert [r.id for r in store.messages.load().records] == list(range(1, 36))
