"""Read-only tools never write: `store data exp`, `print` and `verify` leave a store
byte-for-byte (file store) or row-for-row (database store) as they found it, page tables and
large bodies included (issue: `exp` on a database store used to create empty page tables)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from store.db.engine import create_store_engine, dispose_store_engine
from tests.cli.test_data_exchange import Backend, populate, run, stores  # noqa: F401


def _file_state(root: Path) -> dict[str, str]:
    """Every file under ``root`` and folder: its path and a digest of its bytes."""
    out: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.relpath(os.path.join(folder, name), root) + "/"] = "folder"
        for name in files:
            path = os.path.join(folder, name)
            out[os.path.relpath(path, root)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return out


def _db_state(backend: Backend) -> dict[str, list[tuple[Any, ...]]]:
    """Every table of the store's prefix and all its rows, in a fixed order."""
    db = backend.config.database_store
    assert db is not None
    prefix = db.bindings_table_name.lower().split("_")[0]
    engine, _ = create_store_engine(db)
    try:
        with engine.connect() as conn:
            names = [n for n in sa.inspect(conn).get_table_names() if n.lower().startswith(prefix)]
            meta = sa.MetaData()
            out = {}
            for name in sorted(names):
                table = sa.Table(name, meta, autoload_with=conn)
                rows = conn.execute(sa.select(table)).all()
                out[name.lower()] = sorted(tuple(map(repr, r)) for r in rows)
            return out
    finally:
        dispose_store_engine(engine)


def _state(backend: Backend) -> Any:
    if backend.kind == "file":
        return _file_state(backend.dir / "data")
    return _db_state(backend)


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
