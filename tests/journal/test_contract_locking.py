"""Contract: one writer per store (docs/journal.md): ``open_store`` on a store that is open raises
StoreLockedError at once, from the same process and from another one. Zero persistence holds
nothing, so a second open is accepted."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store.errors import StoreLockedError
from tests.support.backends import BackendSpec, StoreFactory

REPO = Path(__file__).resolve().parents[2]

# The child rebuilds the same configuration from (back-end, tmp_path, prefix), tries to open
# the store and reports by exit code: 0 opened, 10 StoreLockedError. With "hold" it keeps the
# store open until its stdin closes, after printing "open".
CHILD = """
import sys
from pathlib import Path
from store import open_store
from store.errors import StoreLockedError
from tests.support.backends import backend_by_name

name, tmp, prefix, mode = sys.argv[1:5]
config = backend_by_name(name).make_config(Path(tmp), prefix)
try:
    store = open_store(config)
except StoreLockedError as exc:
    print("locked:", exc, flush=True)
    sys.exit(10)
store.messages.load()
if mode == "hold":
    print("open", flush=True)
    sys.stdin.read()
store.messages.append_add(1, 1, b"from the child", sync=True)
store.close()
sys.exit(0)
"""

OPENED, LOCKED = 0, 10


def _child(factory: StoreFactory, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            factory.spec.name,
            str(factory.tmp_path),
            factory.prefix,
            mode,
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _try_child(factory: StoreFactory) -> tuple[int, str]:
    proc = _child(factory, "try")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in (OPENED, LOCKED), f"child failed ({proc.returncode}):\n{err}"
    return proc.returncode, out


def test_second_open_in_the_same_process_is_locked_out(backend: BackendSpec, store_factory) -> None:
    """A second open_store of an open store raises StoreLockedError at once (within 5 s);
    once the first is closed the store opens again. Zero persistence: both opens succeed."""
    first = store_factory.open()
    first.messages.load()
    started = time.monotonic()
    if backend.persistent:
        with pytest.raises(StoreLockedError):
            store_factory.open_second()
        assert time.monotonic() - started < 5, "StoreLockedError must come at once"
        first.messages.append_add(1, 1, b"first still works", sync=True)
    else:
        second = store_factory.open_second()
        second.messages.load()
        second.close()
    store_factory.close()
    again = store_factory.open()
    again.messages.load()


def test_open_from_another_process_is_locked_out_while_open(
    backend: BackendSpec, store_factory
) -> None:
    """A child process cannot open a store this process holds (StoreLockedError); after this
    process closes it, the child opens it and its write is loaded here. Zero persistence: the
    child opens it in both cases."""
    first = store_factory.open()
    first.messages.load()
    code, out = _try_child(store_factory)
    assert code == (LOCKED if backend.persistent else OPENED), out
    store_factory.close()
    code, out = _try_child(store_factory)
    assert code == OPENED, out
    result = store_factory.open().messages.load()
    assert len(result.records) == (1 if backend.persistent else 0)


def test_store_held_by_another_process_is_locked_here(
    persistent_backend: BackendSpec, store_factory
) -> None:
    """While a child process holds the store open, open_store here raises StoreLockedError;
    when the child closes it, it opens here."""
    holder = _child(store_factory, "hold")
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line.strip() == "open", f"child did not open the store: {line!r}"
        with pytest.raises(StoreLockedError):
            store_factory.open()
    finally:
        _out, err = holder.communicate(input="", timeout=120)
    assert holder.returncode == OPENED, err
    result = store_factory.open().messages.load()
    assert [r.data for r in result.records] == [b"from the child"]
