"""A real process killed with SIGKILL while it writes a large message (store.large.api rule 2).

The child (tests/large/kill9_large_writer.py, run with this interpreter) completes a few
bodies, reporting each once its block exited, then writes a big body until it is killed
after more than three chunks of it reached the storage. Before reopening, the test checks
that the cut-off body really left something behind (its ``.tmp`` file, its chunk rows); after
reopening: the body is not listed, cannot be opened, its storage is gone, every reported body
reads back with the digest the child printed, and the id can be written again. On the file
store and on each database (Derby: a database of the test's own, which the child boots).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from store import StoreConfig, open_store
from store.db.engine import create_store_engine, dispose_store_engine
from store.db.schema import StoreSchema, TableNames
from store.errors import UnknownRecordError
from tests.large import kill9_large_writer as child
from tests.large.support import read_all, stored_names, write_body
from tests.support.backends import BackendSpec, file_config_mapping, unique_prefix
from tests.support.db_backends import new_store_mapping

WRITER = str(Path(child.__file__).resolve())
COMPLETE = 6
# The child is killed once it has written more than this much of the big body: three chunks
# have then been handed to the storage (a full chunk is stored when its next byte arrives).
KILL_AFTER = 3 * (1 << 20) + 1


def _mapping(spec: BackendSpec, tmp_path: Path, prefix: str) -> dict[str, Any]:
    if spec.name.startswith("file-"):
        return file_config_mapping(tmp_path, "NIO")
    derby = f"jdbc:derby:{tmp_path / 'kill9-derby'};create=true"
    return new_store_mapping(tmp_path, prefix, spec.name, derby=derby)


def _left_behind(config: StoreConfig, tmp_path: Path) -> list[str]:
    """What the big body left in storage, looked at without opening the store."""
    prefix = f"{child.BIG_ID}."
    if config.database_store is None:
        return [n for n in os.listdir(tmp_path / "large") if n.startswith(prefix)]
    engine, _target = create_store_engine(config.database_store)
    try:
        table = StoreSchema(TableNames.from_config(config.database_store)).large_messages
        with engine.connect() as conn:
            names = conn.execute(sa.select(table.c.filename)).scalars().all()
            conn.rollback()
    finally:
        dispose_store_engine(engine)
    return [str(n) for n in names if str(n).startswith(prefix)]


def _run_child_until_mid_write(config_file: Path) -> tuple[dict[int, str], int]:
    """Runs the child, kills it mid-write; returns (reported digests, bytes it wrote)."""
    proc = subprocess.Popen(
        [sys.executable, WRITER, str(config_file), str(COMPLETE)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    digests: dict[int, str] = {}
    written = 0
    deadline = time.monotonic() + 120
    try:
        assert proc.stdout is not None
        while written < KILL_AFTER:
            line = proc.stdout.readline()
            if not line:
                assert proc.stderr is not None
                raise AssertionError(f"the child exited early: {proc.stderr.read()[-3000:]}")
            kind, *rest = line.split()
            if kind == "C":
                digests[int(rest[0])] = rest[1]
            elif kind == "W":
                written = int(rest[0])
            assert time.monotonic() < deadline, "the child is too slow"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        assert proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    return digests, written


def test_body_cut_off_by_kill9_is_gone_and_complete_ones_intact(
    body_backend: BackendSpec, tmp_path: Path
) -> None:
    """SIGKILL mid-write: after reopening, the cut-off body is not listed, not readable, and
    its storage is gone; every body reported complete reads back with its digest."""
    mapping = _mapping(body_backend, tmp_path, unique_prefix())
    config = StoreConfig.from_mapping(mapping)
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(mapping))
    try:
        digests, written = _run_child_until_mid_write(config_file)
        assert sorted(digests) == list(range(1, COMPLETE + 1))
        assert written >= KILL_AFTER
        left = _left_behind(config, tmp_path)
        assert left, "the killed writer left nothing: the test did not cut a body off"
        with open_store(config) as store:
            lm = store.large_messages
            assert lm.ids() == list(range(1, COMPLETE + 1))
            with pytest.raises(UnknownRecordError):
                lm.open(child.BIG_ID)
            with pytest.raises(UnknownRecordError):
                lm.size(child.BIG_ID)
            assert [n for n in stored_names(lm) if n.startswith(f"{child.BIG_ID}.")] == []
            for mid, digest in digests.items():
                assert lm.size(mid) == child.body_size(mid)
                assert read_all(lm, mid) == digest
            digest = write_body(lm, child.BIG_ID, 5000)
            assert read_all(lm, child.BIG_ID) == digest
    finally:
        body_backend.cleanup(config)
