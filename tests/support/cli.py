"""Running the ``store`` command as a user runs it: a subprocess of this interpreter, with this
checkout first on its ``PYTHONPATH``. One helper for every test that goes through the real
entry point.

Thread-safety: a plain function; each call starts its own process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["ROOT", "run_store"]

#: The checkout these tests belong to.
ROOT = Path(__file__).resolve().parents[2]


def run_store(
    *argv: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """``store ARGV`` in a subprocess; returns the completed process (never raises on its exit
    status). ``env`` adds to (or overrides) this process's environment; output is text, at
    200 columns unless ``env`` says otherwise."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    environment = {**os.environ, "PYTHONPATH": path, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "store.cli.main", *argv],
        capture_output=True, text=True, env=environment, cwd=cwd, timeout=timeout, check=False,
    )  # fmt: skip
