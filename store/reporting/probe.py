"""A database store reached with the store's own Python driver before Spark starts: whether
this install has the driver (:func:`python_driver`), whether the database answers
(:func:`probe_database`), and its journal tables' ``seq`` bounds (:func:`seq_bounds`).

Thread-safety: each call opens and disposes of its own engine.
"""

from __future__ import annotations

import os

from store.config import DatabaseStoreConfig, db_dialect_of
from store.errors import StoreError, StoreUnavailableError

__all__ = ["PROBE_DRIVERS", "probe_database", "python_driver", "seq_bounds"]

#: The Python driver module the probe needs, by dialect (sqlite3 is always there).
PROBE_DRIVERS = {"postgresql": "psycopg", "mysql": "pymysql", "sqlite": None}


def python_driver(db: DatabaseStoreConfig) -> bool:
    """Whether this install has the store's own Python driver for ``db``'s database."""
    import importlib.util

    dialect = db_dialect_of(db.jdbc_connection_url)
    if dialect not in PROBE_DRIVERS:
        return False
    module = PROBE_DRIVERS[dialect]
    try:
        return module is None or importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def probe_database(db: DatabaseStoreConfig) -> None:
    if not python_driver(db):
        return
    from store.db.engine import create_store_engine, dispose_store_engine

    engine, target = create_store_engine(db)
    try:
        if target.sqlite_path is not None and not os.path.isfile(target.sqlite_path):
            raise StoreUnavailableError(f"the SQLite database {target.sqlite_path} does not exist")
        with engine.connect():
            pass
    except StoreError:
        raise
    except Exception as exc:  # the drivers' and SQLAlchemy's errors have no common class
        cause = exc.__cause__ or exc
        reason = " ".join(str(cause).split())  # one line
        raise StoreUnavailableError(
            f"cannot connect to {target.display}: {type(cause).__name__}: {reason}"
        ) from exc
    finally:
        dispose_store_engine(engine)


def seq_bounds(db: DatabaseStoreConfig) -> list[tuple[int, int] | None] | None:
    """The smallest and largest ``seq`` of the messages and bindings tables (None: empty),
    read with the Python driver. Returns None when they cannot be read (the report's own
    reads say why). Raises nothing."""
    import sqlalchemy as sa

    from store.db.engine import create_store_engine, dispose_store_engine
    from store.db.schema import TableNames

    names = TableNames.from_config(db)
    try:
        engine, _target = create_store_engine(db)
    except Exception:  # a URL the report's own checks refuse, with their message
        return None
    bounds: list[tuple[int, int] | None] = []
    try:
        with engine.connect() as connection:
            for name in (names.messages, names.bindings):
                t = sa.table(name, sa.column("seq"))
                low, high = connection.execute(
                    sa.select(sa.func.min(t.c.seq), sa.func.max(t.c.seq))
                ).one()
                bounds.append(None if high is None else (int(low), int(high)))
    except Exception:  # the drivers' and SQLAlchemy's errors have no common class
        return None
    finally:
        dispose_store_engine(engine)
    return bounds
