"""Which optional extra of the ``store`` package brings which Python module, and the one line
that tells a user to install it.

The base install (``pip install store``) holds everything the file store, the storage manager,
the offline tools and the database store's own stack (SQLAlchemy, alembic, sqlite3) need; the
database drivers and Spark are extras, so that an embedded file store does not pull in a JVM
bridge or PySpark. A command that reaches a missing extra's module says which extra to install
in one line and exits 2 (bad configuration of this machine), never with a traceback: the
drivers raise :class:`~store.errors.ConfigError` from :func:`require`, and ``store``'s
``main`` turns any other ``ModuleNotFoundError`` of a module listed here into the same line.

Thread-safety: pure functions over a constant table.
"""

from __future__ import annotations

import importlib
import os
import shlex
import sys
from types import ModuleType
from typing import Final

from store.errors import ConfigError

__all__ = [
    "EXTRA_OF_MODULE",
    "checkout_root",
    "extra_for",
    "install_hint",
    "missing_extra_message",
    "require",
]

#: Top-level module -> the extra of pyproject.toml that installs it.
EXTRA_OF_MODULE: Final = {
    "psycopg": "postgresql",
    "psycopg_binary": "postgresql",
    "pymysql": "mysql",
    "jaydebeapi": "jdbc",
    "jpype": "jdbc",
    "pyspark": "spark",
    "py4j": "spark",
    "pyarrow": "spark",
    "pandas": "spark",
    "matplotlib": "spark",
}


def extra_for(module: str | None) -> str | None:
    """The extra that installs ``module`` (a dotted name; its top level decides), or None
    when no extra of this package does."""
    if not module:
        return None
    return EXTRA_OF_MODULE.get(module.split(".", 1)[0])


def install_hint(extra: str) -> str:
    """The command that installs ``extra`` into the Python running this code, for how this
    copy was installed: ``/venv/bin/python -m pip install -e '/checkout[EXTRA]'`` from a
    checkout (the source tree beside a ``pyproject.toml``, editable or on ``PYTHONPATH``),
    else ``/venv/bin/python -m pip install 'store[EXTRA]'``. A bare ``pip install
    'store[EXTRA]'`` run outside the virtualenv installed an unrelated PyPI package called
    ``store``; naming this interpreter's pip installs into the right place."""
    python = shlex.quote(sys.executable or "python3")
    root = checkout_root()
    if root is not None:
        return f"{python} -m pip install -e {shlex.quote(f'{root}[{extra}]')}"
    return f"{python} -m pip install 'store[{extra}]'"


def checkout_root() -> str | None:
    """The source checkout this package runs from (the folder holding ``store/`` and a
    ``pyproject.toml``), None for an installed copy in site-packages."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isfile(os.path.join(root, "pyproject.toml")) and "site-packages" not in root:
        return root
    return None


def missing_extra_message(module: str, extra: str, needed_for: str | None = None) -> str:
    """One line: what is missing, for what, and the command that installs it."""
    purpose = f" (needed for {needed_for})" if needed_for else ""
    return f"the Python module {module!r} is not installed{purpose}: {install_hint(extra)}"


def require(module: str, needed_for: str, *, key: str | None = None) -> ModuleType:
    """Import ``module`` (a module of an extra listed in :data:`EXTRA_OF_MODULE`).

    Returns the module. Raises ConfigError (exit 2 from ``store``) whose one-line message names
    the extra to install when the module or one it imports from the same extra is missing;
    ``key`` is the configuration key that asked for it, if any.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or module
        extra = extra_for(missing) or extra_for(module)
        if extra is None:
            raise
        raise ConfigError(
            missing_extra_message(missing.split(".", 1)[0], extra, needed_for),
            key=key,
            value=None,
            allowed=f"an install with the {extra} extra",
        ) from exc
