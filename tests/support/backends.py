"""The back-ends every contract test runs against, and the helper that opens their stores.

A back-end is a :class:`BackendSpec`: how to build a store configuration for one test and how to
drop what the test made. The file store comes in its three journal types, zero persistence is
one more, and the database back-ends (PostgreSQL, MariaDB, SQLite, Derby) come from
``tests/support/db_backends.py`` (``DB_BACKENDS``), written by the database store's owner.

``ALL_BACKENDS`` and ``DB_BACKENDS`` are computed on first use (a module ``__getattr__``), so
``tests/support/db_backends.py`` can import :class:`BackendSpec` from here without an import cycle.
While that module does not exist yet the database list is empty; that guard exists only for
the weeks before it lands and is not a skip of an unreachable server (the database back-ends
fail, never skip, when their server does not answer).

Thread-safety: specs are immutable; a :class:`StoreFactory` belongs to one test (one thread).
"""

from __future__ import annotations

import importlib
import importlib.util
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from store.journal.api import Journal
from store.large.api import LargeMessageStore
from store.paging.api import PagingManager

if TYPE_CHECKING:
    from store import StoreConfig

__all__ = [
    "ALL_BACKENDS",
    "DB_BACKENDS",
    "FILE_BACKENDS",
    "FILE_JOURNAL_SIZE",
    "ZERO_BACKEND",
    "BackendSpec",
    "StoreFactory",
    "StoreHandle",
    "backend_by_name",
    "file_config_mapping",
    "unique_prefix",
]

# Small files so that records and transactions roll across many files in every test.
FILE_JOURNAL_SIZE = 65536


@dataclass(frozen=True)
class BackendSpec:
    """One back-end the contract suite runs against.

    ``make_config(tmp_path, prefix)`` returns the configuration of a fresh, empty store for one
    test: ``tmp_path`` is the test's own directory and ``prefix`` a unique name fragment
    matching ``^t[0-9a-f]{8}_$`` (database back-ends put it in front of every table name). It
    must be deterministic and safe to call again with the same arguments: the lock tests call
    it a second time in a child process to target the same store. ``cleanup(config)`` drops
    everything the test made (tables, sequences, large objects); it is a no-op for files, which
    live under ``tmp_path``.
    """

    name: str
    persistent: bool
    make_config: Callable[[Path, str], StoreConfig]
    cleanup: Callable[[StoreConfig], None]
    # A data size this back-end must refuse with RecordTooLargeError (None: no limit a test can
    # reach cheaply, e.g. a database blob limit of gigabytes; the test then says so).
    too_large_record_size: int | None = None
    # Hypothesis examples for the stateful test: each example opens and reopens real stores,
    # so database back-ends (slower to open) default to fewer.
    stateful_max_examples: int = 10
    # A database whose schema a StoreFactory empties at teardown and hands to the next test of
    # the process instead of dropping it (tests/support/schema_pool.py: DDL costs more than
    # most tests).
    reuse_schemas: bool = False


class StoreHandle(Protocol):
    """What ``store.open_store`` returns, as far as the contract tests use it."""

    @property
    def bindings(self) -> Journal: ...

    @property
    def messages(self) -> Journal: ...

    @property
    def large_messages(self) -> LargeMessageStore: ...

    @property
    def paging(self) -> PagingManager: ...

    def close(self) -> None: ...


def file_config_mapping(tmp_path: Path, journal_type: str) -> dict[str, object]:
    """Returns the kebab-case configuration of a file store under ``tmp_path``. Raises nothing."""
    return {
        "journal-directory": str(tmp_path / "journal"),
        "bindings-directory": str(tmp_path / "bindings"),
        "large-messages-directory": str(tmp_path / "large"),
        "paging-directory": str(tmp_path / "paging"),
        "journal-type": journal_type,
        "journal-file-size": FILE_JOURNAL_SIZE,
        "journal-min-files": 2,
        "journal-buffer-timeout": 100000,
    }


def _file_backend(journal_type: str) -> BackendSpec:
    def make_config(tmp_path: Path, prefix: str) -> StoreConfig:
        from store import StoreConfig

        del prefix  # directories under tmp_path are already unique to the test
        return StoreConfig.from_mapping(file_config_mapping(tmp_path, journal_type))

    def cleanup(config: StoreConfig) -> None:
        del config  # everything lives under tmp_path, which pytest removes

    return BackendSpec(
        name=f"file-{journal_type.lower()}",
        persistent=True,
        make_config=make_config,
        cleanup=cleanup,
        too_large_record_size=FILE_JOURNAL_SIZE,
        stateful_max_examples=25,
    )


def _zero_config(tmp_path: Path, prefix: str) -> StoreConfig:
    from store import StoreConfig

    del tmp_path, prefix  # nothing is written anywhere
    return StoreConfig.from_mapping({"persistence-enabled": False})


def _no_cleanup(config: StoreConfig) -> None:
    del config


FILE_BACKENDS: list[BackendSpec] = [_file_backend(t) for t in ("NIO", "MAPPED", "ASYNCIO")]
ZERO_BACKEND = BackendSpec(
    name="zero",
    persistent=False,
    make_config=_zero_config,
    cleanup=_no_cleanup,
    stateful_max_examples=25,
)


# Filled in on first use by __getattr__ below (declared here for readers and type checkers).
DB_BACKENDS: list[BackendSpec]
ALL_BACKENDS: list[BackendSpec]


def _load_db_backends() -> list[BackendSpec]:
    try:
        found = importlib.util.find_spec("tests.support.db_backends")
    except ModuleNotFoundError:  # the tests.db package itself does not exist yet
        found = None
    if found is None:
        return []
    module = importlib.import_module("tests.support.db_backends")
    return list(module.DB_BACKENDS)


def __getattr__(name: str) -> list[BackendSpec]:
    if name == "DB_BACKENDS":
        value = _load_db_backends()
    elif name == "ALL_BACKENDS":
        value = [*FILE_BACKENDS, ZERO_BACKEND, *_load_db_backends()]
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def unique_prefix() -> str:
    """Returns a fresh table-name prefix, ``t`` + 8 hex digits + ``_``. Raises nothing."""
    return f"t{uuid.uuid4().hex[:8]}_"


def backend_by_name(name: str) -> BackendSpec:
    """Returns the spec called ``name``. Raises KeyError naming the known back-ends."""
    specs: list[BackendSpec] = __getattr__("ALL_BACKENDS")
    for spec in specs:
        if spec.name == name:
            return spec
    raise KeyError(f"unknown back-end {name!r}; known: {', '.join(s.name for s in specs)}")


class StoreFactory:
    """Opens, reopens and finally cleans up one store of one back-end for one test.

    ``open()`` closes the store it opened before (a test never holds two of its own stores
    open unless it asks for a second one with ``open_second()``), ``reopen()`` is close + open,
    and ``teardown()`` (called by the fixture) closes everything and runs the back-end's
    cleanup (a back-end that reuses schemas gets its emptied schema back for the next test of
    the process, :mod:`tests.support.schema_pool`). Thread-safety: none; the test's thread uses it.
    """

    def __init__(self, spec: BackendSpec, tmp_path: Path, prefix: str) -> None:
        self.spec = spec
        self.tmp_path = tmp_path
        from tests.support import schema_pool

        #: The table-name prefix of this test's store (a kept schema's, when one was reused).
        self.prefix, self.config = schema_pool.start(spec, tmp_path, prefix)
        self._made = self.config
        self._current: StoreHandle | None = None
        self._opened: list[StoreHandle] = []

    @property
    def store(self) -> StoreHandle:
        """Returns the store opened last. Raises AssertionError if none is open."""
        assert self._current is not None, "store_factory.open() was not called"
        return self._current

    def open(self) -> StoreHandle:
        """Closes the previous store, opens the configured one and returns it.

        Raises whatever ``store.open_store`` raises.
        """
        from store import open_store

        self.close()
        handle: StoreHandle = open_store(self.config)
        self._current = handle
        self._opened.append(handle)
        return handle

    def reopen(self) -> StoreHandle:
        """Closes the current store, opens it again and returns the new one. Raises as open()."""
        return self.open()

    def open_second(self) -> StoreHandle:
        """Opens the same store again without closing the current one; returns it.

        Raises whatever ``store.open_store`` raises (StoreLockedError for a persistent store).
        """
        from store import open_store

        handle: StoreHandle = open_store(self.config)
        self._opened.append(handle)
        return handle

    def close(self) -> None:
        """Closes the current store if one is open; returns None. Raises what close raises."""
        current, self._current = self._current, None
        if current is not None:
            current.close()

    def teardown(self) -> None:
        """Closes every store this factory opened and drops what the test made; returns None.

        Close errors of stores a test left broken on purpose are ignored; cleanup errors are
        raised (a leaked table must not pass silently).
        """
        self._current = None
        for handle in reversed(self._opened):
            try:
                handle.close()
            except Exception:  # a test may have broken the store on purpose
                pass
        self._opened.clear()
        from tests.support import schema_pool

        schema_pool.finish(self.spec, self.prefix, self._made, self.config)
