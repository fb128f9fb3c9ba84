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


@pytest.mark.parametrize("kind", ["file", "postgresql", "sqlite"])
def test_exp_creates_no_page_store_table_or_file(stores: Any, kind: str) -> None:  # noqa: F811
    """exp loads the store through the storage manager, which opens the journals for writing
    (Artemis's exporter does the same): what it must never do is make what was not there,
    such as an empty page table for every address (it did)."""
    backend = stores(kind)
    populate(backend)
    before = _state(backend)
    done = run("data", "exp", "--config", str(backend.path), "-q")
    assert done.returncode == 0, done.stderr.decode()
    after = _state(backend)
    if kind == "file":
        made = {p for p in after if p.startswith(("paging/", "large/"))} - set(before)
    else:
        made = set(after) - set(before)
    assert not made, f"exp made {sorted(made)}"
