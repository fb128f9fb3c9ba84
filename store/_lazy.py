"""Names a package exports without importing their modules until first used (PEP 562), for
``store``, ``store.data`` and ``store.ha``: importing the package stays cheap (no messaging,
SQLAlchemy or HA runner until a program asks for them), and the names stay where users look.

::

    _LAZY = {"StorageManager": "store.messaging.manager"}
    __getattr__, __dir__ = _lazy.lazy_exports(__name__, _LAZY, globals())

Type checkers see the names through the package's ``if TYPE_CHECKING:`` imports.

Thread-safety: the import system's lock guards the first import; the value is then kept in
the package's namespace, so later lookups never reach ``__getattr__``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, lazy: dict[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` whose names ``lazy`` maps to
    the module defining each. ``__getattr__`` imports that module on first access, keeps the
    value in ``namespace`` (the package's globals) and returns it; it raises AttributeError
    for any other name. ``__dir__`` lists ``namespace`` and the lazy names."""

    def __getattr__(name: str) -> Any:
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(lazy))

    return __getattr__, __dir__
