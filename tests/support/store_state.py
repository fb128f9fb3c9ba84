"""What a store holds, byte for byte or row for row, to prove a read-only tool changed
nothing (``store data exp``/``print``/``verify``, ``store report``)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from store.config import DatabaseStoreConfig, StoreConfig
from store.db.engine import create_store_engine, dispose_store_engine


def file_state(root: Path, *, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Every file and folder under ``root`` but the top-level names in ``skip``: its path
    and a digest of its bytes."""
    out: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        if Path(folder) == root:
            dirs[:] = [d for d in dirs if d not in skip]
            files = [f for f in files if f not in skip]
        for name in dirs:
            out[os.path.relpath(os.path.join(folder, name), root) + "/"] = "folder"
        for name in files:
            path = os.path.join(folder, name)
            out[os.path.relpath(path, root)] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return out


def db_state(db: DatabaseStoreConfig) -> dict[str, list[tuple[Any, ...]]]:
    """Every table of the store's prefix (the bindings table name up to its first ``_``)
    and all its rows, in a fixed order."""
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


def store_state(config: StoreConfig, root: Path, *, skip: tuple[str, ...] = ()) -> Any:
    """:func:`db_state` of a database store, else :func:`file_state` of ``root``."""
    if config.database_store is not None:
        return db_state(config.database_store)
    return file_state(root, skip=skip)
