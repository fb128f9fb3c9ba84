"""Running the ``store`` command as a user runs it: a subprocess of this interpreter, with this
checkout first on its ``PYTHONPATH``. One helper for every test that goes through the real
entry point, and one (:func:`run_store_here`) that runs the same entry point in this process,
for tests that check only a command's output, exit status and files and would otherwise
start a second JVM: ``store report`` there reuses this worker's SparkSession.

Thread-safety: :func:`run_store` is a plain function, each call starts its own process;
:func:`run_store_here` swaps this process's standard streams and environment while it runs,
so only one thread may call it at a time.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

__all__ = ["ROOT", "run_store", "run_store_here"]

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


def run_store_here(
    *argv: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``store ARGV`` through ``store.cli.main.main`` in this process, its output captured as
    :func:`run_store` captures a subprocess's: the same completed process (returncode, stdout,
    stderr), 200 columns, ``env`` set while it runs and restored after. What only a separate
    process has (its own locks, signals, start-up imports, PATH lookups before Python starts)
    is :func:`run_store`'s to test. Never raises on the exit status."""
    from store.cli.main import main

    # Text streams over bytes, as a process's are: commands that write bytes use .buffer.
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
                for _ in range(2))  # fmt: skip
    with (
        _environment({"COLUMNS": "200", **(env or {})}),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            code = main(list(argv))
        except SystemExit as exit_:  # argparse's usage errors
            code = exit_.code if isinstance(exit_.code, int) else 2
    return subprocess.CompletedProcess(["store", *argv], code, _text(out), _text(err))


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    raw = stream.buffer
    assert isinstance(raw, io.BytesIO)
    return raw.getvalue().decode("utf-8", errors="replace")


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """``values`` in ``os.environ`` while the block runs; the earlier values (or absence) after."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
