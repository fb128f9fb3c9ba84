"""Helpers the configuration's dataclasses and their reader share: kebab-case keys, the
sentinels of derived defaults, and validated copies of frozen dataclasses.

Thread-safety: the sentinels are immutable; the functions touch only their arguments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from store.config.values import unknown_key

__all__ = [
    "DERIVE",
    "DERIVE_DIR",
    "DerivedInt",
    "DerivedStr",
    "kebab",
    "replace_checked",
    "set_field",
]


class DerivedInt(int):
    """Marks an int field whose default is derived from another field (immutable; shareable)."""


class DerivedStr(str):
    """Marks a str field whose default is derived from another field (immutable; shareable)."""


# Identity-compared sentinels: the default of a field that depends on journal-type or
# journal-directory. Resolved in __post_init__; never visible on a built object.
DERIVE: Final = DerivedInt(-1)
DERIVE_DIR: Final = DerivedStr("")


def kebab(name: str) -> str:
    """The key of field ``name``: ``journal_file_size`` -> ``journal-file-size``."""
    return name.replace("_", "-")


def set_field(obj: object, name: str, value: object) -> None:
    """Set a field of a frozen dataclass (its ``__post_init__`` normalising a value)."""
    object.__setattr__(obj, name, value)


def replace_checked(obj: Any, changes: Mapping[str, Any]) -> Any:
    """A copy of the dataclass ``obj`` with ``changes`` (field names), validated like a new one.
    Raises ConfigError for an unknown field (naming the closest) or a bad value."""
    names = {f.name for f in dataclasses.fields(obj) if f.init}
    for name in changes:
        if name not in names:
            raise unknown_key(name, names, type(obj).__name__)
    return dataclasses.replace(obj, **changes)
