"""The storage manager's errors join the one tree (store.errors): subclasses of StoreError,
exported from ``store``, drawn in the tree of the errors module's docstring."""

from __future__ import annotations

import pytest

import store
import store.errors

NAMES = ["DuplicateIdError", "AddressFullError", "UnknownQueueError", "UnknownMessageError"]


@pytest.mark.parametrize("name", NAMES)
def test_storage_manager_errors_are_store_errors_in_the_drawn_tree(name: str) -> None:
    cls = getattr(store.errors, name)
    assert issubclass(cls, store.errors.StoreError)
    assert getattr(store, name) is cls
    assert name in store.__all__ and name in store.errors.__all__
    assert f"── {name} " in (store.errors.__doc__ or "")
    assert (cls.__doc__ or "").startswith("Raised when")
