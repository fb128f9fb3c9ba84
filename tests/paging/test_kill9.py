"""A real process killed with SIGKILL while it appends page records with ``sync=True``
(tests/paging/kill9_writer.py): after reopening, every acknowledged record is at the
position it was acknowledged at, in order, with its payload; at most the one append per
thread in flight at the kill shows up beyond them; and appends continue after them. File
store and PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store.paging.api import PagePosition
from tests.paging import kill9_writer as child
from tests.support.backends import unique_prefix
from tests.support.db_backends import db_backend, new_store_mapping

WRITER = str(Path(child.__file__).resolve())
THREADS = 3


def _run_and_kill(kind: str, target: str, seconds: float) -> list[str]:
    proc = subprocess.Popen(
        [sys.executable, WRITER, kind, target, str(THREADS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n", proc.stderr.read() if proc.stderr else ""
    time.sleep(seconds)
    os.kill(proc.pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err
    return [line for line in out.split("\n")[:-1]]  # the last piece may be cut by the kill


def _check(kind: str, target: str, lines: list[str]) -> None:
    acked: dict[int, list[tuple[PagePosition, int]]] = {t: [] for t in range(THREADS)}
    for line in lines:
        t, page, index, i = (int(x) for x in line.split())
        acked[t].append((PagePosition(page, index), i))
    assert sum(len(v) for v in acked.values()) > 20, "the child acknowledged too little"
    pm, journals = child.open_manager(kind, target)
    try:
        for t, records in acked.items():
            ps = pm.store(f"a{t}")
            assert [i for _, i in records] == list(range(len(records)))
            stored = []
            for page in ps.pages():
                stored.extend((PagePosition(page, n), r) for n, r in enumerate(ps.read_page(page)))
            expected = [(p, child.payload(t, i)) for p, i in records]
            assert stored[: len(expected)] == expected, f"thread {t}: acknowledged records lost"
            extra = stored[len(expected) :]
            assert len(extra) <= 1, f"thread {t}: {len(extra)} records never appended"
            assert [r for _, r in extra] == [child.payload(t, len(records))][: len(extra)]
            position = ps.append(b"after", sync=True)
            assert position > stored[-1][0]
            assert ps.read_page(position.page)[position.index] == b"after"
    finally:
        pm.close()
        if journals is not None:
            journals.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("seconds", [0.3, 1.5])
def test_kill9_file_store_keeps_every_acknowledged_record(tmp_path: Path, seconds: float) -> None:
    target = str(tmp_path / "paging")
    lines = _run_and_kill("file", target, seconds)
    _check("file", target, lines)


def test_kill9_postgresql_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    spec = db_backend("postgresql")
    prefix = unique_prefix()
    config = spec.make_config(tmp_path, prefix)
    target = json.dumps(new_store_mapping(tmp_path, prefix, "postgresql"))
    try:
        lines = _run_and_kill("database", target, 1.5)
        time.sleep(0.5)  # the killed session's store lock is released by the server
        _check("database", target, lines)
    finally:
        spec.cleanup(config)
