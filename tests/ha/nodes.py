"""Nodes of an HA pair as real processes: ``store ha run`` children whose acknowledged ids
(stdout) and status lines (stderr) are collected by reader threads.

Thread-safety: a :class:`Node` is driven by the test's thread; its readers only append.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]
_CLI = "import sys; from store.cli.main import main; sys.exit(main(sys.argv[1:]))"


def write_toml(mapping: dict[str, Any], path: Path) -> Path:
    """Write a configuration mapping (top-level keys and one ``database-store`` table) as
    TOML. Returns ``path``."""
    lines: list[str] = []
    tables: dict[str, dict[str, Any]] = {}
    for key, value in mapping.items():
        if isinstance(value, dict):
            tables[key] = value
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    for name, table in tables.items():
        lines.append(f"[{name}]")
        lines.extend(f"{key} = {json.dumps(value)}" for key, value in table.items())
    path.write_text("\n".join(lines) + "\n")
    return path


class Node:
    """One ``store ha run --config CONFIG --role ROLE`` process."""

    def __init__(self, config: Path, role: str, *, pause: float = 0.005) -> None:
        self.role = role
        self.acks: list[int] = []
        self.errors: list[str] = []
        self.live_at: float | None = None
        self._live = threading.Event()
        self._guard = threading.Lock()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        argv = ["ha", "run", "--config", str(config), "--role", role, "--pause", str(pause)]
        self.proc = subprocess.Popen(
            # -X faulthandler: a node that hangs dumps every thread's stack on SIGABRT
            # (finish() sends it before it fails the test).
            [sys.executable, "-X", "faulthandler", "-c", _CLI, *argv],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [
            threading.Thread(target=self._read_acks, args=(self.proc.stdout,), daemon=True),
            threading.Thread(target=self._read_errors, args=(self.proc.stderr,), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_acks(self, stream: IO[str]) -> None:
        for line in stream:
            with self._guard:
                self.acks.append(int(line))

    def _read_errors(self, stream: IO[str]) -> None:
        for line in stream:
            with self._guard:
                self.errors.append(line.rstrip())
            if line.startswith("live as") and self.live_at is None:
                self.live_at = time.monotonic()
                self._live.set()

    def wait_live(self, timeout: float) -> float:
        """Wait until the node says it is live; returns that moment (monotonic)."""
        assert self._live.wait(timeout), f"{self.role} not live: {self.stderr()}"
        assert self.live_at is not None
        return self.live_at

    def wait_acks(self, count: int, timeout: float) -> None:
        """Wait until ``count`` more ids were acknowledged than now."""
        target = len(self.acks) + count
        deadline = time.monotonic() + timeout
        while len(self.acks) < target:
            assert time.monotonic() < deadline, f"{self.role} stalled: {self.stderr()}"
            assert self.proc.poll() is None, f"{self.role} exited: {self.stderr()}"
            time.sleep(0.01)

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the process."""
        self.proc.send_signal(sig)

    def finish(self, timeout: float = 30) -> int:
        """Wait for the process to exit and its output to be read; returns its exit code.
        A node still running after ``timeout`` is aborted (SIGABRT: its threads' stacks go to
        stderr) and the test fails with what it said."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)
            self.proc.wait(10)
            for reader in self._readers:
                reader.join(10)
            with self._guard:
                said = "\n".join(self.errors[-200:])
            raise AssertionError(f"{self.role} still running after {timeout} s:\n{said}") from None
        for reader in self._readers:
            reader.join(10)
        return code

    def stop(self) -> int:
        """SIGTERM (a clean stop), then wait. Returns the exit code."""
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
        return self.finish()

    def kill(self) -> None:
        """SIGKILL if still running (cleanup)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stderr(self) -> str:
        """What the node said on stderr so far."""
        with self._guard:
            return "\n".join(self.errors[-20:])
