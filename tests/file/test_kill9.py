"""A real process killed with SIGKILL while it writes (reference behaviours [CRASH], J-100).

The child (tests/file/kill9_writer.py, run with this interpreter) appends with ``sync=True``
from three threads to a real file store under ``tmp_path`` and prints each id once its append
returned (and each deleted id once its delete returned). The parent kills it at a chosen
moment, reopens the store and checks: every reported id is there with its data, no reported
delete came back, nothing that was never added appears (per thread, at most the one append in
flight when the kill came), no in-flight files are left, and the journal keeps working.
Each journal type (NIO, MAPPED, ASYNCIO on the real disk) is killed at several moments, and a
variant kills while ``compact()`` runs in a loop.
"""

from __future__ import annotations

import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from store import StoreConfig, open_store
from tests.file import kill9_writer as child

WRITER = str(Path(child.__file__).resolve())
THREADS = 3


class Child:
    """The running writer process and the lines it printed (read on a helper thread)."""

    def __init__(self, directory: Path, journal_type: str, mode: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, WRITER, str(directory), journal_type, mode, str(THREADS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.endswith("\n"):  # a line cut by the kill was never complete
                self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next_line(self, timeout: float = 30.0) -> str:
        """Returns the next complete line. Raises AssertionError if the child died or hangs."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the child printed nothing for {timeout}s") from None
        if line is None:
            raise AssertionError(f"the child exited early: {self.stderr()}")
        self.seen.append(line)
        return line

    def kill(self) -> list[str]:
        """Sends SIGKILL, waits for the process, returns every complete line it printed."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._reader.join(30)
        while True:
            line = self.lines.get(timeout=5)
            if line is None:
                break
            self.seen.append(line)
        assert self.proc.returncode == -signal.SIGKILL, self.stderr()
        return self.seen

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read()[-3000:]


def _config(directory: Path, journal_type: str, mode: str) -> StoreConfig:
    return StoreConfig.from_mapping(child.config_mapping(str(directory), journal_type, mode))


def check_after_kill(directory: Path, journal_type: str, mode: str, lines: list[str]) -> int:
    """Reopens the store the child wrote and checks it against what the child reported.

    Returns how many records loaded. Raises AssertionError."""
    added = {int(x[2:]) for x in lines if x.startswith("A ")}
    deleted = {int(x[2:]) for x in lines if x.startswith("D ")}
    assert added, "the child reported no append before it was killed"
    # Each thread has one call in flight at the kill: the next add, or the delete of the id it
    # added last; that delete may have reached the disk, so that one id may be gone.
    for t in range(THREADS):
        base = (t + 1) * child.ID_SPAN
        mine = [i for i in added if base <= i < base + child.ID_SPAN]
        last = max(mine, default=None)
        if last is not None and last not in deleted and child.deleted_after_add(last - base, mode):
            added.discard(last)
    with open_store(_config(directory, journal_type, mode)) as store:
        records = store.messages.load().records
        loaded: dict[int, bytes] = {}
        for r in records:
            assert not r.is_update and r.id not in loaded, f"id {r.id} loaded twice"
            loaded[r.id] = r.data
        missing = sorted(added - deleted - loaded.keys())
        assert not missing, f"{len(missing)} acknowledged ids lost, first {missing[:5]}"
        back = sorted(deleted & loaded.keys())
        assert not back, f"{len(back)} acknowledged deletes undone, first {back[:5]}"
        reported = {int(x[2:]) for x in lines if x.startswith("A ")}
        for t in range(THREADS):
            base = (t + 1) * child.ID_SPAN
            mine = [i - base for i in reported if base <= i < base + child.ID_SPAN]
            limit = base + (max(mine) + 1 if mine else 0)  # the one append that may be in flight
            extra = [i for i in loaded if base <= i < base + child.ID_SPAN and i > limit]
            assert not extra, f"ids never added were loaded: {extra[:5]}"
        strangers = [i for i in loaded if not child.ID_SPAN <= i < (THREADS + 1) * child.ID_SPAN]
        assert not strangers, f"ids never added were loaded: {strangers[:5]}"
        for rid, data in loaded.items():
            assert data == child.payload(rid), f"id {rid} loaded with other data"
        store.messages.append_add(1, 1, b"after the kill", sync=True)  # it still works
    # Checked once closed: a running journal makes .tmp / .cmp files in the background.
    in_flight = [
        n for n in os.listdir(directory / "journal") if n.endswith((".cmp", ".tmp", ".ctl"))
    ]
    assert not in_flight, f"in-flight files left after recovery and a clean close: {in_flight}"
    with open_store(_config(directory, journal_type, mode)) as store:
        assert any(r.id == 1 for r in store.messages.load().records)
    return len(loaded)


# (lines to wait for before the kill, extra delay in seconds): early, in full flow, later
MOMENTS = [(5, 0.0), (300, 0.013), (1500, 0.031)]


@pytest.mark.parametrize("moment", range(len(MOMENTS)), ids=["early", "mid", "late"])
@pytest.mark.parametrize("journal_type", ["NIO", "MAPPED", "ASYNCIO"])
def test_kill9_loses_no_acknowledged_append(
    journal_type: str, moment: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines_before, delay = MOMENTS[moment]
    proc = Child(tmp_path, journal_type, "append")
    ready = proc.next_line()
    assert ready == f"ready {journal_type}", f"the child writes with {ready!r}"
    for _ in range(lines_before):
        proc.next_line()
    time.sleep(delay)
    lines = proc.kill()
    loaded = check_after_kill(tmp_path, journal_type, "append", lines)
    with capsys.disabled():
        print(f"\n[kill9] {journal_type}: killed after {len(lines)} lines, {loaded} records loaded")


@pytest.mark.parametrize("run", range(2))
@pytest.mark.parametrize("journal_type", ["NIO", "MAPPED", "ASYNCIO"])
def test_kill9_during_compaction_loses_nothing(
    journal_type: str, run: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The child compacts in a loop while appending and deleting; the kill comes a random
    moment after a ``C start`` line (most kills land inside compact())."""
    rng = random.Random(f"{journal_type}-{run}")
    proc = Child(tmp_path, journal_type, "compact")
    assert proc.next_line() == f"ready {journal_type}"
    starts = rng.randint(2, 5)
    while starts:
        if proc.next_line() == "C start":
            starts -= 1
    time.sleep(rng.choice((0.0, 0.0005, 0.001, 0.002, 0.004)))
    lines = proc.kill()
    compactions = [x for x in lines if x.startswith("C ")]
    inside = compactions[-1] == "C start"
    loaded = check_after_kill(tmp_path, journal_type, "compact", lines)
    with capsys.disabled():
        print(
            f"\n[kill9] {journal_type} compacting: killed after {len(lines)} lines "
            f"({compactions.count('C done')} compactions done, "
            f"{'inside' if inside else 'between'} compactions), {loaded} records loaded"
        )
