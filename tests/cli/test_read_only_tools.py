"""Read-only tools never write: `store data exp`, `print` and `verify` leave a store
byte-for-byte (file store) or row-for-row (database store) as they found it, page tables and
large bodies included (issue: `exp` on a database store used to create empty page tables)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_data_exchange import Backend, populate, run, stores  # noqa: F401
from tests.support.store_state import store_state


def _state(backend: Backend) -> Any:
    return store_state(backend.config, backend.dir / "data")


@pytest.mark.parametrize("kind", ["file", "postgresql", "sqlite"])
def test_print_and_verify_change_nothing(stores: Any, kind: str) -> None:  # noqa: F811
    backend = stores(kind)
    populate(backend)
    before = _state(backend)
    config = str(backend.path)
    for command in ("print", "verify"):
        done = run("data", command, "--config", config)
        assert done.returncode in (0, 1), (command, done.stderr.decode())
        assert _state(backend) == before, f"{command} changed the store"


@pytest.mark.parametrize("kind", ["file", "postgresql", "mariadb", "sqlite"])
def test_exp_changes_nothing(stores: Any, kind: str, tmp_path: Path) -> None:  # noqa: F811
    """exp opens the store read-only (store.opening.read_only): not a byte of a file store and
    not a row of a database store changes, page stores and large bodies included; it used to
    create empty page tables and record the id generator's position at close."""
    backend = stores(kind)
    populate(backend)
    before = _state(backend)
    out = tmp_path / "export.xml"
    done = run("data", "exp", "--config", str(backend.path), "-q", "--output", str(out))
    assert done.returncode == 0, done.stderr.decode()
    assert b"<message " in out.read_bytes()
    assert _state(backend) == before


@pytest.mark.parametrize("kind", ["file", "postgresql"])
def test_exp_leaves_what_a_load_would_sweep(stores: Any, kind: str, tmp_path: Path) -> None:  # noqa: F811
    """What a normal load sweeps (stale id-counter records from earlier runs, on the file
    store a large body no message names) stays in the store after exp, and the export is
    the one a normal load gives."""
    backend = stores(kind)
    populate(backend)
    for _ in range(2):  # each clean close records a counter: the older ones are stale
        backend.manager().close()
    if kind == "file":
        (backend.dir / "data" / "large" / "999999.msg").write_bytes(b"no message names me")
    before = _state(backend)
    first = tmp_path / "first.xml"
    done = run("data", "exp", "--config", str(backend.path), "-q", "--output", str(first))
    assert done.returncode == 0, done.stderr.decode()
    assert _state(backend) == before
    backend.manager().close()  # a normal load sweeps
    assert _state(backend) != before, "the normal load swept nothing: the test proves nothing"
    second = tmp_path / "second.xml"
    done = run("data", "exp", "--config", str(backend.path), "-q", "--output", str(second))
    assert done.returncode == 0, done.stderr.decode()
    assert first.read_bytes() == second.read_bytes()
